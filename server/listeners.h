// The gRPC listen addresses (--listen) and the HTTP one (--metrics-listen):
// parsing "host:port" and "unix:/path", preparing a unix socket's path
// before gRPC binds it, setting its permission bits after, and a short cause
// for a failed bind.
#ifndef BREAKERD_SERVER_LISTENERS_H_
#define BREAKERD_SERVER_LISTENERS_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace breakerd {

// A "host:port" address split in two; the host keeps IPv6 brackets.
struct HostPort {
  std::string host;
  int port = 0;
};

// INVALID_ARGUMENT (naming `flag`) for a missing host, an IPv6 host without
// brackets, or a port outside 0..65535.
absl::StatusOr<HostPort> ParseHostPort(absl::string_view address,
                                       absl::string_view flag);

// One --listen entry.
struct Listener {
  std::string address;  // as given
  bool unix_socket = false;
  std::string host;       // TCP only, brackets kept for IPv6
  int selected_port = 0;  // filled by gRPC when it binds
  // "host:selected_port", or the address for a unix socket.
  std::string Bound() const;
};

// A --listen entry: "unix:PATH", "unix-abstract:NAME" or "host:port"
// (ParseHostPort, flag "listen").
absl::StatusOr<Listener> ParseListener(absl::string_view address);

// For a "unix:" address (anything else: OK, nothing done): INVALID_ARGUMENT
// for an empty path or one too long for a socket; UNAVAILABLE if the
// directory is missing, the path is not a socket, or a process still
// listens on it. Removes a stale socket file left by a crashed process.
absl::Status PrepareUnixSocket(absl::string_view address);

// Gives a bound "unix:" socket file `mode` (anything else: nothing done);
// warns ("unix_socket_permissive") if other users may connect. UNAVAILABLE
// if chmod fails.
absl::Status SetUnixSocketMode(absl::string_view address, uint32_t mode);

// A short cause for a failed listen ("address in use", "permission
// denied", ...) from what the libraries logged meanwhile.
absl::string_view ListenFailureCause(absl::string_view diagnostics);

}  // namespace breakerd

#endif  // BREAKERD_SERVER_LISTENERS_H_

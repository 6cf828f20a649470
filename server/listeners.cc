#include "server/listeners.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <optional>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "server/log/json_log.h"

namespace breakerd {
namespace {

// The file of a "unix:" address ("unix:///abs" too); nullopt otherwise.
std::optional<absl::string_view> UnixSocketPath(absl::string_view address) {
  if (!absl::ConsumePrefix(&address, "unix:")) return std::nullopt;
  if (absl::StartsWith(address, "//")) address.remove_prefix(2);
  return address;
}

}  // namespace

absl::StatusOr<HostPort> ParseHostPort(absl::string_view address,
                                       absl::string_view flag) {
  HostPort hp;
  absl::string_view port_text;
  if (absl::StartsWith(address, "[")) {
    const size_t close = address.find("]:");
    if (close == absl::string_view::npos) {
      return absl::InvalidArgumentError(absl::StrCat(
          flag, " ", address, ": expected [ipv6]:port, e.g. [::1]:50051"));
    }
    hp.host = std::string(address.substr(0, close + 1));
    port_text = address.substr(close + 2);
  } else {
    const size_t colon = address.rfind(':');
    if (colon == absl::string_view::npos || colon == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          flag, " ", address,
          ": expected host:port (e.g. 127.0.0.1:50051; port 0 picks a free "
          "port)"));
    }
    hp.host = std::string(address.substr(0, colon));
    if (hp.host.find(':') != std::string::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat(flag, " ", address,
                       ": put an IPv6 host in brackets, e.g. [::1]:50051"));
    }
    port_text = address.substr(colon + 1);
  }
  if (port_text.empty() || !absl::SimpleAtoi(port_text, &hp.port) ||
      hp.port < 0 || hp.port > 65535 ||
      port_text.find_first_not_of("0123456789") != absl::string_view::npos) {
    return absl::InvalidArgumentError(absl::StrCat(
        flag, " ", address, ": port must be a number from 0 to 65535"));
  }
  return hp;
}

std::string Listener::Bound() const {
  return unix_socket ? address : absl::StrCat(host, ":", selected_port);
}

absl::StatusOr<Listener> ParseListener(absl::string_view address) {
  Listener l;
  l.address = std::string(address);
  if (absl::StartsWith(address, "unix:") ||
      absl::StartsWith(address, "unix-abstract:")) {
    l.unix_socket = true;
    return l;
  }
  absl::StatusOr<HostPort> hp = ParseHostPort(address, "listen");
  if (!hp.ok()) return hp.status();
  l.host = std::move(hp->host);
  return l;
}

absl::Status PrepareUnixSocket(absl::string_view address) {
  const std::optional<absl::string_view> path = UnixSocketPath(address);
  if (!path.has_value()) return absl::OkStatus();
  if (path->empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("listen ", address, ": empty socket path"));
  }
  struct sockaddr_un sun;
  if (path->size() >= sizeof(sun.sun_path)) {
    return absl::InvalidArgumentError(
        absl::StrCat("listen ", address, ": socket path longer than ",
                     sizeof(sun.sun_path) - 1, " bytes"));
  }
  const std::string file(*path);
  const size_t slash = file.rfind('/');
  const std::string dir = slash == std::string::npos ? "."
                          : slash == 0               ? "/"
                                                     : file.substr(0, slash);
  struct stat st;
  if (stat(dir.c_str(), &st) != 0) {
    return absl::UnavailableError(absl::StrCat(
        "listen ", address, ": directory ", dir,
        " does not exist or is not accessible (", ErrnoText(errno), ")"));
  }
  if (!S_ISDIR(st.st_mode)) {
    return absl::UnavailableError(
        absl::StrCat("listen ", address, ": ", dir, " is not a directory"));
  }
  if (lstat(file.c_str(), &st) != 0) {
    if (errno == ENOENT) return absl::OkStatus();
    return absl::UnavailableError(absl::StrCat("listen ", address,
                                               ": cannot stat ", file, " (",
                                               ErrnoText(errno), ")"));
  }
  if (!S_ISSOCK(st.st_mode)) {
    return absl::UnavailableError(
        absl::StrCat("listen ", address, ": ", file,
                     " exists and is not a socket; not removing it"));
  }
  // A socket file: in use if something accepts connections on it.
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd >= 0) {
    memset(&sun, 0, sizeof(sun));
    sun.sun_family = AF_UNIX;
    memcpy(sun.sun_path, file.data(), file.size());
    const int rc =
        connect(fd, reinterpret_cast<struct sockaddr*>(&sun), sizeof(sun));
    close(fd);
    if (rc == 0) {
      return absl::UnavailableError(absl::StrCat(
          "listen ", address,
          ": address in use (another process is listening on ", file, ")"));
    }
  }
  if (unlink(file.c_str()) != 0 && errno != ENOENT) {
    return absl::UnavailableError(
        absl::StrCat("listen ", address, ": cannot remove stale socket ", file,
                     " (", ErrnoText(errno), ")"));
  }
  LogEvent(LogLevel::kInfo, "stale_socket_removed", {{"path", file}});
  return absl::OkStatus();
}

absl::Status SetUnixSocketMode(absl::string_view address, uint32_t mode) {
  const std::optional<absl::string_view> path = UnixSocketPath(address);
  if (!path.has_value()) return absl::OkStatus();
  if ((mode & 0007) != 0) {
    LogEvent(LogLevel::kWarn, "unix_socket_permissive",
             {{"listen", address},
              {"mode", absl::StrFormat("%04o", mode)},
              {"why",
               "any local user may connect and call the Breaker service; "
               "prefer 0660 with a shared group"}});
  }
  if (chmod(std::string(*path).c_str(), mode) != 0) {
    return absl::UnavailableError(absl::StrCat("listen ", address, ": chmod ",
                                               absl::StrFormat("%04o", mode),
                                               ": ", ErrnoText(errno)));
  }
  return absl::OkStatus();
}

absl::string_view ListenFailureCause(absl::string_view diagnostics) {
  if (absl::StrContains(diagnostics, "Address already in use")) {
    return "address in use";
  }
  if (absl::StrContains(diagnostics, "Permission denied")) {
    return "permission denied";
  }
  if (absl::StrContains(diagnostics, "Cannot assign requested address")) {
    return "not a local address";
  }
  return "cannot listen";
}

}  // namespace breakerd

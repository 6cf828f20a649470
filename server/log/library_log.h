// The log lines of the libraries breakerd runs on (gRPC, protobuf, civetweb)
// go to the JSON log (json_log.h), so stderr stays one JSON object per line:
// events "grpc_log", "protobuf_log" (at most one a second; a client can
// provoke them at will) and "http_log". What gRPC and civetweb log is also
// kept, so that a failed bind can be explained ("address in use") in the
// startup_failed line.
//
// Thread-safety: every function here is thread-safe.
#ifndef BREAKERD_SERVER_LOG_LIBRARY_LOG_H_
#define BREAKERD_SERVER_LOG_LIBRARY_LOG_H_

#include <string>

#include "absl/strings/string_view.h"

struct mg_connection;

namespace breakerd {

// Installs the gRPC and protobuf log handlers. Call before either library
// logs anything worth keeping (before the gRPC server is built).
void RouteLibraryLogsToJson();

// civetweb's log_message callback: logs `message` as "http_log" and keeps
// it among the diagnostics. Returns 1 (handled: civetweb prints nothing).
int CivetLogToJson(const struct mg_connection* conn, const char* message);

// What gRPC and civetweb logged since the previous call (at most ~16 KiB,
// "; "-separated), and forgets it. Called before a bind, to start afresh,
// and after it fails.
std::string TakeLibraryDiagnostics();

// The payload (absl::Status::SetPayload) of an error that such diagnostics
// explain; the startup_failed line shows it as "detail".
inline constexpr absl::string_view kLibraryDiagnosticsPayload =
    "breakerd.library-diagnostics";

}  // namespace breakerd

#endif  // BREAKERD_SERVER_LOG_LIBRARY_LOG_H_

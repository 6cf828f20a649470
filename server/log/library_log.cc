#include "server/log/library_log.h"

#include <atomic>
#include <cstdint>
#include <utility>

#include "absl/base/const_init.h"
#include "absl/base/thread_annotations.h"
#include "absl/strings/ascii.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "google/protobuf/stubs/logging.h"
#include "grpc/support/log.h"
#include "server/log/json_log.h"

namespace breakerd {
namespace {

constexpr size_t kMaxDiagnosticBytes = 16384;

absl::Mutex g_diag_mu(absl::kConstInit);
std::string* g_diagnostics ABSL_GUARDED_BY(g_diag_mu) = nullptr;

void RememberDiagnostic(absl::string_view message) {
  absl::MutexLock lock(&g_diag_mu);
  if (g_diagnostics == nullptr) g_diagnostics = new std::string();
  if (g_diagnostics->size() > kMaxDiagnosticBytes) return;
  if (!g_diagnostics->empty()) g_diagnostics->append("; ");
  g_diagnostics->append(message.data(), message.size());
}

// gRPC's own log lines (errors only, unless GRPC_VERBOSITY says otherwise).
void GrpcLogToJson(gpr_log_func_args* args) {
  if (args->message != nullptr) RememberDiagnostic(args->message);
  LogLevel level = LogLevel::kInfo;
  if (args->severity == GPR_LOG_SEVERITY_ERROR) level = LogLevel::kError;
  if (args->severity == GPR_LOG_SEVERITY_DEBUG) level = LogLevel::kDebug;
  LogEvent(level, "grpc_log",
           {{"message", args->message != nullptr ? args->message : ""},
            {"file", args->file != nullptr ? args->file : ""},
            {"line", args->line}});
}

// libprotobuf's log lines (e.g. a request whose string field is not UTF-8:
// any client can send those at will), at most one a second, with the count
// of those dropped in between.
void ProtobufLogToJson(google::protobuf::LogLevel level, const char* file,
                       int line, const std::string& message) {
  static std::atomic<int64_t> next_ns{0};
  static std::atomic<int64_t> dropped{0};
  const int64_t now = absl::GetCurrentTimeNanos();
  int64_t next = next_ns.load(std::memory_order_relaxed);
  if (now < next || !next_ns.compare_exchange_strong(
                        next, now + 1'000'000'000, std::memory_order_relaxed)) {
    dropped.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  LogEvent(
      level >= google::protobuf::LOGLEVEL_ERROR ? LogLevel::kError
                                                : LogLevel::kWarn,
      "protobuf_log",
      {{"message", message},
       {"file", file != nullptr ? file : ""},
       {"line", line},
       {"dropped_before", dropped.exchange(0, std::memory_order_relaxed)}});
}

}  // namespace

void RouteLibraryLogsToJson() {
  gpr_set_log_function(&GrpcLogToJson);
  google::protobuf::SetLogHandler(&ProtobufLogToJson);
}

int CivetLogToJson(const struct mg_connection*, const char* message) {
  const absl::string_view text =
      absl::StripAsciiWhitespace(message != nullptr ? message : "");
  RememberDiagnostic(text);
  LogEvent(LogLevel::kWarn, "http_log", {{"message", text}});
  return 1;
}

std::string TakeLibraryDiagnostics() {
  absl::MutexLock lock(&g_diag_mu);
  if (g_diagnostics == nullptr) return "";
  return std::exchange(*g_diagnostics, std::string());
}

}  // namespace breakerd

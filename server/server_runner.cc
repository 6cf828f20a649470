#include "server/server_runner.h"

#include <errno.h>
#include <netdb.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <exception>
#include <fstream>
#include <iterator>
#include <utility>
#include <vector>

#include "CivetServer.h"
#include "absl/base/const_init.h"
#include "absl/random/random.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "civetweb.h"
#include "google/protobuf/stubs/logging.h"
#include "grpc/support/log.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/grpcpp.h"
#include "server/config/config.h"
#include "server/engine/clock.h"
#include "server/engine/registry.h"
#include "server/fleet/fleet_sync.h"
#include "server/fleet/redis_store.h"
#include "server/log/json_log.h"
#include "server/metrics/collector.h"
#include "server/metrics/scrape_limiter.h"
#include "server/metrics/text_format.h"
#include "server/service/admin_service.h"
#include "server/service/breaker_service.h"
#include "server/service/health_service.h"
#include "server/service/watch_hub.h"
#include "server/state/state_file.h"
#include "server/state/state_saver.h"

namespace breakerd {
namespace {

constexpr size_t kMaxTokenBytes = 4096;

// What /readyz answers. Process-wide because civetweb's callbacks are plain
// function pointers without a user argument of ours; one runner per process.
enum class Phase : int { kStarting, kServing, kShuttingDown };
std::atomic<Phase> g_phase{Phase::kStarting};

// What gRPC and civetweb logged during startup, so a failed bind can be
// explained ("address in use") in the startup_failed line.
absl::Mutex g_diag_mu(absl::kConstInit);
std::string* g_diagnostics ABSL_GUARDED_BY(g_diag_mu) = nullptr;

void RememberDiagnostic(absl::string_view message) {
  absl::MutexLock lock(&g_diag_mu);
  if (g_diagnostics == nullptr) g_diagnostics = new std::string();
  if (g_diagnostics->size() > 16384) return;
  if (!g_diagnostics->empty()) g_diagnostics->append("; ");
  g_diagnostics->append(message.data(), message.size());
}

std::string TakeDiagnostics() {
  absl::MutexLock lock(&g_diag_mu);
  if (g_diagnostics == nullptr) return "";
  return std::exchange(*g_diagnostics, std::string());
}

// A short cause for a failed listen, from what the libraries logged.
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

sigset_t ShutdownSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGHUP);
  return set;
}

std::string ErrnoText(int err) {
  char buf[256];
  // GNU strerror_r returns the message (possibly not in buf).
  return std::string(strerror_r(err, buf, sizeof(buf)));
}

void StartupFailed(absl::string_view error) {
  LogEvent(LogLevel::kError, "startup_failed", {{"error", error}});
}

// Routes gRPC's own log lines (errors only, unless GRPC_VERBOSITY says
// otherwise) into the JSON log so stderr stays one JSON object per line.
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
// any client can send those at will) go to the JSON log too, at most one a
// second, with the count of those dropped in between.
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

// civetweb's log hook: JSON log, and remembered for startup errors.
int CivetLogToJson(const struct mg_connection*, const char* message) {
  const absl::string_view text =
      absl::StripAsciiWhitespace(message != nullptr ? message : "");
  RememberDiagnostic(text);
  LogEvent(LogLevel::kWarn, "http_log", {{"message", text}});
  return 1;  // handled: civetweb prints nothing itself
}

// The status line and headers of a response. Every response closes the
// connection (civetweb's keep-alive is off).
std::string ResponseHead(int status, absl::string_view reason,
                         absl::string_view content_type, size_t content_length,
                         absl::string_view extra_headers = "") {
  return absl::StrCat(
      "HTTP/1.1 ", status, " ", reason, "\r\nContent-Type: ", content_type,
      "\r\nContent-Length: ", content_length, "\r\n", extra_headers,
      "Cache-Control: no-store\r\nConnection: close\r\n\r\n");
}

// Sends a short plain-text response (no body for HEAD) and returns `status`
// for civetweb's access log.
int Respond(struct mg_connection* conn, bool head, int status,
            absl::string_view reason, absl::string_view body,
            absl::string_view extra_headers = "") {
  const std::string response =
      absl::StrCat(ResponseHead(status, reason, "text/plain; charset=utf-8",
                                body.size(), extra_headers),
                   head ? absl::string_view() : body);
  mg_write(conn, response.data(), response.size());
  return status;
}

// The Kubernetes probes.
int AnswerProbe(struct mg_connection* conn, absl::string_view path, bool head) {
  int status = 200;
  absl::string_view reason = "OK";
  absl::string_view body;
  if (path == "/healthz") {
    body = "ok\n";  // the process is alive, even while draining
  } else {
    switch (g_phase.load(std::memory_order_acquire)) {
      case Phase::kServing:
        body = "ready\n";
        break;
      case Phase::kStarting:
        status = 503;
        reason = "Service Unavailable";
        body = "starting\n";
        break;
      case Phase::kShuttingDown:
        status = 503;
        reason = "Service Unavailable";
        body = "shutting down\n";
        break;
    }
  }
  return Respond(conn, head, status, reason, body);
}

// What /metrics serves and what bounds it; set while the metrics server
// runs. Process-wide for the same reason as g_phase.
std::atomic<const RegistryCollector*> g_metrics{nullptr};
std::atomic<ScrapeLimiter*> g_scrape_limiter{nullptr};

// The pieces of the exposition being written, one buffer per ScrapeLimiter
// slot: reused, so the memory scrapes keep stays at one piece per slot,
// whichever of the kMetricsWorkers threads serve them.
std::string g_scrape_buffers[ScrapeLimits::kDefaultConcurrent];

// Writes all of `bytes`; false if the connection failed or timed out.
bool WriteAll(struct mg_connection* conn, absl::string_view bytes) {
  return mg_write(conn, bytes.data(), bytes.size()) ==
         static_cast<int>(bytes.size());
}

// /metrics: the text format written straight from the Registry
// (RegistryCollector::WriteText), not prometheus-cpp's serializer, which
// costs ten times as much for the same samples. The answer is streamed:
// HTTP/1.1 chunked (a cut answer shows as incomplete), or for HTTP/1.0 a
// body that ends when the connection closes. HEAD renders nothing.
int AnswerMetrics(struct mg_connection* conn,
                  const struct mg_request_info& info) {
  const absl::string_view method =
      info.request_method != nullptr ? info.request_method : "";
  const bool head = method == "HEAD";
  if (method != "GET" && !head) {
    return Respond(conn, false, 405, "Method Not Allowed", "use GET or HEAD\n",
                   "Allow: GET, HEAD\r\n");
  }
  const RegistryCollector* collector =
      g_metrics.load(std::memory_order_acquire);
  ScrapeLimiter* limiter = g_scrape_limiter.load(std::memory_order_acquire);
  if (collector == nullptr || limiter == nullptr) {
    return Respond(conn, head, 503, "Service Unavailable", "starting\n");
  }
  const bool chunked = info.http_version == nullptr ||
                       absl::string_view(info.http_version) != "1.0";
  const std::string response_head =
      absl::StrCat("HTTP/1.1 200 OK\r\nContent-Type: ", kTextFormatContentType,
                   chunked ? "\r\nTransfer-Encoding: chunked" : "",
                   "\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n");
  if (head) {
    WriteAll(conn, response_head);
    return 200;
  }
  const ScrapeLimiter::Admission admission =
      limiter->Begin(collector->registry_size());
  if (!admission.admitted) {
    return Respond(
        conn, /*head=*/false, 503, "Service Unavailable",
        absl::StrCat(admission.reason, "\n"),
        absl::StrCat("Retry-After: ", admission.retry_after_seconds, "\r\n"));
  }
  const Clock* clock = MonotonicClock::Get();
  const absl::Time deadline = clock->Now() + kScrapeDeadline;
  bool first = true;
  auto write_piece = [&](absl::string_view piece) {
    if (clock->Now() > deadline) return false;  // cut: a reader too slow
    if (chunked) {
      const std::string size_line =
          absl::StrCat(first ? "" : "\r\n", absl::Hex(piece.size()), "\r\n");
      if (!WriteAll(conn, size_line)) return false;
    }
    first = false;
    return WriteAll(conn, piece);
  };
  if (WriteAll(conn, response_head) &&
      collector->WriteText(kExpositionChunkBytes,
                           &g_scrape_buffers[admission.slot], write_piece) &&
      chunked) {
    WriteAll(conn, first ? "0\r\n\r\n" : "\r\n0\r\n\r\n");
  }
  limiter->End(admission.slot);
  return 200;
}

// civetweb's begin_request hook: answers every request itself (/metrics,
// the Kubernetes probes, 404 for any other path).
int BeginRequest(struct mg_connection* conn) {
  const struct mg_request_info* info = mg_get_request_info(conn);
  const absl::string_view path =
      info != nullptr && info->local_uri != nullptr ? info->local_uri : "";
  const bool head = info != nullptr && info->request_method != nullptr &&
                    absl::string_view(info->request_method) == "HEAD";
  if (path == "/metrics") return AnswerMetrics(conn, *info);
  if (path == "/healthz" || path == "/readyz") {
    return AnswerProbe(conn, path, head);
  }
  return Respond(conn, head, 404, "Not Found",
                 "not found: this port serves /metrics, /healthz and "
                 "/readyz\n");
}

// For a "unix:" listen address: fails clearly if the directory is missing,
// refuses to touch a path that is not a socket or a socket someone is still
// listening on, and removes a stale socket file left by a crashed process.
absl::Status PrepareUnixSocket(absl::string_view address) {
  absl::string_view path = address;
  absl::ConsumePrefix(&path, "unix:");
  if (absl::StartsWith(path, "//")) path.remove_prefix(2);  // unix:///abs
  if (path.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("listen ", address, ": empty socket path"));
  }
  struct sockaddr_un sun;
  if (path.size() >= sizeof(sun.sun_path)) {
    return absl::InvalidArgumentError(
        absl::StrCat("listen ", address, ": socket path longer than ",
                     sizeof(sun.sun_path) - 1, " bytes"));
  }
  const std::string file(path);
  const size_t slash = file.rfind('/');
  const std::string dir = slash == std::string::npos ? "."
                          : slash == 0               ? "/"
                                                     : file.substr(0, slash);
  struct stat st;
  if (stat(dir.c_str(), &st) != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "listen ", address, ": directory ", dir,
        " does not exist or is not accessible (", ErrnoText(errno), ")"));
  }
  if (!S_ISDIR(st.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat("listen ", address, ": ", dir, " is not a directory"));
  }
  if (lstat(file.c_str(), &st) != 0) {
    if (errno == ENOENT) return absl::OkStatus();
    return absl::FailedPreconditionError(
        absl::StrCat("listen ", address, ": cannot stat ", file, " (",
                     ErrnoText(errno), ")"));
  }
  if (!S_ISSOCK(st.st_mode)) {
    return absl::FailedPreconditionError(
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
      return absl::FailedPreconditionError(absl::StrCat(
          "listen ", address,
          ": address in use (another process is listening on ", file, ")"));
    }
  }
  if (unlink(file.c_str()) != 0 && errno != ENOENT) {
    return absl::FailedPreconditionError(
        absl::StrCat("listen ", address, ": cannot remove stale socket ", file,
                     " (", ErrnoText(errno), ")"));
  }
  LogEvent(LogLevel::kInfo, "stale_socket_removed", {{"path", file}});
  return absl::OkStatus();
}

// True if this process is in group `gid` (effective or supplementary).
bool InOwnGroups(gid_t gid) {
  if (gid == getegid()) return true;
  const int n = getgroups(0, nullptr);
  if (n <= 0) return false;
  std::vector<gid_t> groups(static_cast<size_t>(n));
  const int got = getgroups(n, groups.data());
  return got > 0 && std::find(groups.begin(), groups.begin() + got, gid) !=
                        groups.begin() + got;
}

// Logs a warning if the secret file `path` (symlinks followed, as a
// Kubernetes Secret volume is mounted) may be read or written by others
// than breakerd: any "other" bit, group write, or group read by a group
// breakerd is not in. Group read by breakerd's own group is how Kubernetes
// gives a non-root container its Secret (defaultMode 0400 with the pod's
// fsGroup makes the file 0440, group fsGroup), so that is not warned about.
void WarnIfSecretFileIsShared(const std::string& path, absl::string_view flag) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return;
  const bool shared = (st.st_mode & 0027) != 0 ||
                      ((st.st_mode & 0040) != 0 && !InOwnGroups(st.st_gid));
  if (!shared) return;
  LogEvent(LogLevel::kWarn, "secret_file_permissive",
           {{"flag", flag},
            {"path", path},
            {"mode", absl::StrFormat("%04o", st.st_mode & 07777)},
            {"gid", static_cast<int64_t>(st.st_gid)},
            {"why",
             "other users may read or write it; make it 0400 or 0600, or "
             "0440 with breakerd's own group (Kubernetes: the Secret "
             "volume's defaultMode 0400 and the pod's fsGroup)"}});
}

absl::StatusOr<std::string> ReadTokenFile(const std::string& path,
                                          absl::string_view flag) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::FailedPreconditionError(absl::StrCat(
        flag, " ", path, ": cannot open (", ErrnoText(errno), ")"));
  }
  std::string content;
  content.assign(std::istreambuf_iterator<char>(in),
                 std::istreambuf_iterator<char>());
  if (in.bad()) {
    return absl::FailedPreconditionError(
        absl::StrCat(flag, " ", path, ": read error"));
  }
  const absl::string_view token = absl::StripAsciiWhitespace(content);
  if (token.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        flag, " ", path,
        ": the file is empty; put the secret in it or drop the flag"));
  }
  if (token.size() > kMaxTokenBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        flag, " ", path, ": token longer than ", kMaxTokenBytes, " bytes"));
  }
  for (char c : token) {
    if (c < 0x21 || c > 0x7E) {
      // Never echo the token itself.
      return absl::InvalidArgumentError(absl::StrCat(
          flag, " ", path,
          ": the token must be printable ASCII without spaces (it is sent "
          "as `authorization: Bearer <token>`)"));
    }
  }
  // The example overlays' secretGenerator ships this placeholder in public:
  // a cluster running with it has an Admin token anyone can read.
  if (absl::StartsWith(token, kPlaceholderTokenPrefix)) {
    return absl::InvalidArgumentError(absl::StrCat(
        flag, " ", path, ": holds the example's public placeholder (",
        kPlaceholderTokenPrefix,
        "...); create the Secret with a secret of your own and delete the "
        "example's secretGenerator"));
  }
  return std::string(token);
}

std::string LastGoodConfigPath(const std::string& state_file) {
  return state_file.empty() ? std::string()
                            : absl::StrCat(state_file, kLastGoodConfigSuffix);
}

void LogReload(const ReloadEvent& e) {
  if (e.ok) {
    LogEvent(LogLevel::kInfo, "config_reloaded",
             {{"source", e.source},
              {"trigger", e.trigger},
              {"policies", e.policies}});
  } else {
    LogEvent(LogLevel::kError, "config_rejected",
             {{"source", e.source},
              {"trigger", e.trigger},
              {"error", e.error},
              {"policies_in_force", e.policies}});
  }
}

}  // namespace

void BlockShutdownSignals() {
  const sigset_t set = ShutdownSignals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

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

ServerRunner::ServerRunner(ServerOptions options)
    : options_(std::move(options)) {}

ServerRunner::~ServerRunner() {
  // Reverse order of dependency: nothing may outlive what it points to.
  StopSignalThread();
  StopMaintenanceThread();
  http_server_.reset();
  g_metrics.store(nullptr, std::memory_order_release);
  g_scrape_limiter.store(nullptr, std::memory_order_release);
  collector_.reset();
  if (server_ != nullptr) {
    watch_hub_->Shutdown();
    health_service_->Shutdown();
    server_->Shutdown(std::chrono::system_clock::now());
    server_.reset();
  }
  health_service_.reset();
  admin_service_.reset();
  breaker_service_.reset();
  reloader_.reset();
  // The registry calls its observers; it goes before them.
  registry_.reset();
  watch_hub_.reset();
  transition_logger_.reset();
}

void ServerRunner::RequestShutdown() {
  {
    MutexLock lock(&mu_);
    shutdown_requested_ = true;
  }
  cv_.SignalAll();
}

int ServerRunner::Run() {
  g_phase.store(Phase::kStarting, std::memory_order_release);
  gpr_set_log_function(&GrpcLogToJson);
  google::protobuf::SetLogHandler(&ProtobufLogToJson);

  if (int code = ParseAddresses(); code != kExitOk) return code;
  if (int code = LoadAdminToken(); code != kExitOk) return code;
  if (int code = LoadConfig(); code != kExitOk) return code;
  RestoreState();
  // Written once now, so that a --state-file whose directory is missing or
  // read-only is reported (and counted) at start, not at the first override
  // that would be lost.
  if (state_saver_ != nullptr) OnStateSaved(state_saver_->Save());
  if (int code = StartFleet(); code != kExitOk) return code;
  if (int code = StartGrpc(); code != kExitOk) return code;
  if (int code = StartMetrics(); code != kExitOk) return code;

  signal_thread_ = std::thread(&ServerRunner::SignalLoop, this);
  maintenance_thread_ = std::thread(&ServerRunner::MaintenanceLoop, this);
  g_phase.store(Phase::kServing, std::memory_order_release);
  LogServing();

  {
    MutexLock lock(&mu_);
    while (!shutdown_requested_) cv_.Wait(&mu_);
  }
  Shutdown();
  return kExitOk;
}

int ServerRunner::ParseAddresses() {
  if (options_.listen.empty()) {
    StartupFailed("listen: at least one address is required");
    return kExitConfigError;
  }
  listeners_.clear();
  listeners_.reserve(options_.listen.size());
  for (const std::string& address : options_.listen) {
    Listener l;
    l.address = address;
    if (absl::StartsWith(address, "unix:") ||
        absl::StartsWith(address, "unix-abstract:")) {
      l.unix_socket = true;
    } else {
      absl::StatusOr<HostPort> hp = ParseHostPort(address, "listen");
      if (!hp.ok()) {
        StartupFailed(hp.status().message());
        return kExitConfigError;
      }
      l.host = hp->host;
    }
    listeners_.push_back(std::move(l));
  }
  absl::StatusOr<HostPort> metrics =
      ParseHostPort(options_.metrics_listen, "metrics-listen");
  if (!metrics.ok()) {
    StartupFailed(metrics.status().message());
    return kExitConfigError;
  }
  metrics_host_ = metrics->host;
  metrics_port_ = metrics->port;
  return kExitOk;
}

int ServerRunner::LoadConfig() {
  std::shared_ptr<const PolicySet> policies;
  std::optional<std::string> content;
  if (options_.config_path.empty()) {
    policies = EmbeddedDefaults();
  } else {
    absl::StatusOr<std::string> text = ReadConfigFile(options_.config_path);
    absl::StatusOr<std::shared_ptr<const PolicySet>> parsed =
        text.ok()
            ? ParseConfig(*text, options_.config_path)
            : absl::StatusOr<std::shared_ptr<const PolicySet>>(text.status());
    if (text.ok()) content = *text;
    if (parsed.ok()) {
      policies = *std::move(parsed);
      SaveLastGoodConfig(*content);
    } else {
      LogEvent(LogLevel::kError, "config_rejected",
               {{"source", options_.config_path},
                {"trigger", "startup"},
                {"error", parsed.status().message()}});
      if (options_.strict_config) {
        StartupFailed(absl::StrCat(
            "config ", options_.config_path,
            " is invalid and --strict-config is set: exiting (without it "
            "breakerd would serve on the last good config or the embedded "
            "defaults)"));
        return kExitConfigError;
      }
      // A policy typo must not take the pod down: serve on the last good
      // config (or the defaults) and say so loudly until the file is fixed.
      config_valid_.store(false, std::memory_order_relaxed);
      policies = FallbackConfig();
    }
  }
  LogEvent(
      LogLevel::kInfo, "config_loaded",
      {{"source", policies->source},
       {"valid", config_valid_.load(std::memory_order_relaxed)},
       {"policies", policies->policies.size()},
       {"max_breakers", policies->limits.max_breakers},
       {"idle_ttl_ms", absl::ToInt64Milliseconds(policies->limits.idle_ttl)}});

  transition_logger_ = std::make_unique<TransitionLogger>();
  registry_ = std::make_unique<Registry>(policies, MonotonicClock::Get());
  read_limiter_ = std::make_unique<ReadLimiter>(
      MonotonicClock::Get(), options_.read_all_breakers_per_second);
  watch_hub_ = std::make_unique<WatchHub>(
      registry_.get(), static_cast<size_t>(options_.max_watch_streams),
      static_cast<size_t>(options_.watch_queue), read_limiter_.get());
  registry_->AddObserver(transition_logger_.get());
  registry_->AddObserver(watch_hub_.get());
  if (!options_.state_file.empty()) {
    state_saver_ =
        std::make_unique<StateSaver>(registry_.get(), options_.state_file);
    registry_->AddObserver(state_saver_.get());
  }
  if (!options_.config_path.empty()) {
    // The content read counts as seen, valid or not: an invalid file is
    // reported once, and tried again as soon as it changes.
    reloader_ = std::make_unique<ConfigReloader>(
        options_.config_path, registry_.get(),
        [this](const ReloadEvent& e) { OnReload(e); }, std::move(content));
  }
  return kExitOk;
}

std::shared_ptr<const PolicySet> ServerRunner::FallbackConfig() {
  const std::string last_good = LastGoodConfigPath(options_.state_file);
  if (!last_good.empty()) {
    absl::StatusOr<std::shared_ptr<const PolicySet>> saved =
        LoadConfigFile(last_good);
    if (saved.ok()) {
      LogEvent(LogLevel::kError, "config_fallback",
               {{"source", options_.config_path},
                {"using", last_good},
                {"reason",
                 "the config file is invalid; serving on the last "
                 "good config until it is fixed"}});
      return *std::move(saved);
    }
    if (!absl::IsNotFound(saved.status())) {
      LogEvent(LogLevel::kWarn, "last_good_config_skipped",
               {{"path", last_good}, {"error", saved.status().message()}});
    }
  }
  LogEvent(LogLevel::kError, "config_fallback",
           {{"source", options_.config_path},
            {"using", "embedded defaults"},
            {"reason",
             "the config file is invalid and no last good config is "
             "kept; serving on the embedded defaults until it is "
             "fixed"}});
  return EmbeddedDefaults();
}

void ServerRunner::OnReload(const ReloadEvent& e) {
  LogReload(e);
  config_valid_.store(e.ok, std::memory_order_relaxed);
  if (e.ok) SaveLastGoodConfig(e.content);
}

void ServerRunner::SaveLastGoodConfig(absl::string_view content) {
  const std::string path = LastGoodConfigPath(options_.state_file);
  if (path.empty()) return;
  if (absl::Status s = WriteFileAtomically(path, content); !s.ok()) {
    LogEvent(LogLevel::kWarn, "last_good_config_not_saved",
             {{"path", path}, {"error", s.message()}});
  }
}

int ServerRunner::LoadAdminToken() {
  if (options_.admin_token_file.empty()) {
    LogEvent(
        LogLevel::kInfo, "admin_disabled",
        {{"reason", "no --admin-token-file: every Admin call is refused"}});
    return kExitOk;
  }
  absl::StatusOr<std::string> token =
      ReadTokenFile(options_.admin_token_file, "admin-token-file");
  if (!token.ok()) {
    StartupFailed(token.status().message());
    return kExitConfigError;
  }
  WarnIfSecretFileIsShared(options_.admin_token_file, "admin-token-file");
  admin_token_ = *std::move(token);
  {
    MutexLock lock(&token_mu_);
    admin_token_seen_ = *admin_token_;
  }
  LogEvent(LogLevel::kInfo, "admin_enabled",
           {{"token_file", options_.admin_token_file}});
  return kExitOk;
}

void ServerRunner::ReloadAdminToken() {
  MutexLock lock(&token_mu_);
  absl::StatusOr<std::string> token =
      ReadTokenFile(options_.admin_token_file, "admin-token-file");
  const std::string seen =
      token.ok() ? *token : std::string(token.status().message());
  if (seen == admin_token_seen_) return;
  admin_token_seen_ = seen;
  if (!token.ok()) {
    LogEvent(
        LogLevel::kError, "admin_token_rejected",
        {{"error", token.status().message()}, {"kept", "the token in force"}});
    return;
  }
  admin_service_->SetToken(*token);
  LogEvent(LogLevel::kInfo, "admin_token_reloaded",
           {{"token_file", options_.admin_token_file}});
}

void ServerRunner::OnAdminAuthFailure(absl::string_view reason) {
  const int64_t now = registry_->clock()->NowNanos();
  MutexLock lock(&auth_log_mu_);
  ++auth_failures_unlogged_;
  if (auth_failures_logged_once_ &&
      now - auth_log_last_nanos_ <
          absl::ToInt64Nanoseconds(kAuthFailureLogInterval)) {
    return;
  }
  // One line per interval at most, counting every failure since the last
  // line: a guessing client cannot flood the log.
  LogEvent(LogLevel::kWarn, "admin_auth_failed",
           {{"failures", static_cast<int64_t>(auth_failures_unlogged_)},
            {"last_reason", reason},
            {"total", static_cast<int64_t>(admin_service_->auth_failures())}});
  auth_failures_unlogged_ = 0;
  auth_log_last_nanos_ = now;
  auth_failures_logged_once_ = true;
}

void ServerRunner::PersistState() {
  if (state_saver_ == nullptr) return;
  OnStateSaved(state_saver_->SaveIfStale());
}

void ServerRunner::OnStateSaved(const absl::StatusOr<size_t>& saved) {
  MutexLock lock(&state_log_mu_);
  if (saved.ok()) {
    if (state_failing_) {
      LogEvent(LogLevel::kInfo, "state_save_recovered",
               {{"path", options_.state_file},
                {"failures", static_cast<int64_t>(state_failures_unlogged_)}});
    }
    state_failing_ = false;
    state_failures_unlogged_ = 0;
    return;
  }
  state_save_failures_.fetch_add(1, std::memory_order_relaxed);
  ++state_failures_unlogged_;
  const int64_t now = MonotonicClock::Get()->NowNanos();
  if (state_failing_ &&
      now - state_log_last_nanos_ <
          absl::ToInt64Nanoseconds(kStateSaveFailureLogInterval)) {
    return;
  }
  LogEvent(LogLevel::kError, "state_save_failed",
           {{"path", options_.state_file},
            {"error", saved.status().message()},
            {"failures", static_cast<int64_t>(state_failures_unlogged_)},
            {"why",
             "open breakers and operator overrides will not survive a "
             "restart until a write works (tried again every second)"}});
  state_failing_ = true;
  state_failures_unlogged_ = 0;
  state_log_last_nanos_ = now;
}

void ServerRunner::RestoreState() {
  if (options_.state_file.empty()) return;
  absl::StatusOr<std::vector<SavedBreaker>> saved =
      ReadStateFile(options_.state_file);
  if (!saved.ok()) {
    // Never fatal: start fresh.
    LogEvent(
        absl::IsNotFound(saved.status()) ? LogLevel::kInfo : LogLevel::kWarn,
        "state_file_skipped",
        {{"path", options_.state_file}, {"error", saved.status().message()}});
    return;
  }
  const RestoreStats stats = breakerd::RestoreState(
      registry_.get(), *saved, absl::Now(), options_.state_stale_after);
  LogEvent(LogLevel::kInfo, "state_restored",
           {{"path", options_.state_file},
            {"restored", int64_t{stats.restored}},
            {"skipped_stale", int64_t{stats.skipped_stale}},
            {"failed", int64_t{stats.failed}}});
}

void ServerRunner::SaveState() {
  if (state_saver_ == nullptr) return;
  absl::StatusOr<size_t> saved = state_saver_->Save();
  OnStateSaved(saved);
  if (!saved.ok()) return;
  LogEvent(LogLevel::kInfo, "state_saved",
           {{"path", options_.state_file},
            {"breakers", static_cast<int64_t>(*saved)}});
}

int ServerRunner::StartFleet() {
  if (options_.redis.empty()) return kExitOk;
  RedisOptions redis;
  absl::Status s = ParseRedisAddress(options_.redis, &redis);
  if (s.ok() && !options_.redis_password_file.empty()) {
    absl::StatusOr<std::string> password =
        ReadTokenFile(options_.redis_password_file, "redis-password-file");
    if (password.ok()) {
      WarnIfSecretFileIsShared(options_.redis_password_file,
                               "redis-password-file");
      redis.password = *std::move(password);
    } else {
      s = password.status();
    }
  }
  redis.db = options_.redis_db;
  redis.key_prefix = options_.redis_key_prefix;
  redis.timeout = options_.redis_timeout;
  if (s.ok()) s = ValidateRedisOptions(redis);
  if (!s.ok()) {
    StartupFailed(s.message());
    return kExitConfigError;
  }
  FleetOptions fleet;
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  absl::BitGen gen;
  fleet.id =
      absl::StrCat(host[0] != 0 ? host : "breakerd", "/", getpid(), "/",
                   absl::Hex(absl::Uniform<uint32_t>(gen), absl::kZeroPad8));
  LogEvent(LogLevel::kInfo, "fleet_mode",
           {{"redis", options_.redis},
            {"db", int64_t{redis.db}},
            {"key_prefix", redis.key_prefix},
            {"id", fleet.id}});
  fleet_ = std::make_unique<FleetSync>(
      registry_.get(), std::make_unique<RedisStore>(std::move(redis)),
      std::move(fleet));
  registry_->SetProbeArbiter(fleet_.get());
  registry_->AddObserver(fleet_.get());
  fleet_->Start();
  return kExitOk;
}

int ServerRunner::StartGrpc() {
  for (const Listener& l : listeners_) {
    if (!absl::StartsWith(l.address, "unix:")) continue;
    if (absl::Status s = PrepareUnixSocket(l.address); !s.ok()) {
      StartupFailed(s.message());
      return absl::IsInvalidArgument(s) ? kExitConfigError : kExitRuntimeError;
    }
  }

  if (!options_.trace_file.empty()) {
    if (options_.trace_max_bytes <= 0) {
      StartupFailed("trace-max-bytes: must be positive");
      return kExitConfigError;
    }
    absl::StatusOr<std::unique_ptr<TraceWriter>> trace = TraceWriter::Open(
        options_.trace_file, static_cast<uint64_t>(options_.trace_max_bytes));
    if (!trace.ok()) {
      StartupFailed(std::string(trace.status().message()));
      return kExitConfigError;
    }
    trace_ = *std::move(trace);
  }
  breaker_service_ = std::make_unique<BreakerServiceImpl>(
      registry_.get(), watch_hub_.get(), &call_tracker_, &rpc_stats_,
      trace_.get(), read_limiter_.get());
  // Admin calls are in flight for the shutdown's drain too.
  admin_service_ = std::make_unique<AdminServiceImpl>(
      registry_.get(), admin_token_, &rpc_stats_, &call_tracker_);
  // An override is on disk before the operator hears it took.
  admin_service_->SetAfterOverride([this] { PersistState(); });
  admin_service_->SetOnAuthFailure(
      [this](absl::string_view reason) { OnAdminAuthFailure(reason); });

  // Our own grpc.health.v1.Health: gRPC's default one bounds no Watch
  // stream. Disabled, gRPC adds none of its own beside it.
  health_service_ = std::make_unique<HealthService>(kMaxHealthWatchStreams);

  TakeDiagnostics();
  grpc::EnableDefaultHealthCheckService(false);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  // A second breakerd on the same port must fail, not share the port.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS,
                             kMaxConcurrentStreamsPerConnection);
  builder.SetMaxReceiveMessageSize(options_.max_message_bytes);
  for (Listener& l : listeners_) {
    builder.AddListeningPort(l.address, grpc::InsecureServerCredentials(),
                             &l.selected_port);
  }
  builder.RegisterService(breaker_service_.get());
  builder.RegisterService(admin_service_.get());
  builder.RegisterService(health_service_.get());
  // Unix sockets are bound here and chmod-ed below: until then the umask
  // decides who may connect. Owner-only in between, whatever the umask
  // breakerd was started with (it is process-wide, but no other thread
  // creates files during start-up).
  const mode_t old_umask = umask(0177);
  server_ = builder.BuildAndStart();
  umask(old_umask);

  std::vector<std::string> failed;
  for (const Listener& l : listeners_) {
    if (l.selected_port == 0) failed.push_back(l.address);
  }
  if (server_ == nullptr || !failed.empty()) {
    StartupFailed(absl::StrCat("listen ",
                               failed.empty()
                                   ? absl::StrJoin(options_.listen, ",")
                                   : absl::StrJoin(failed, ","),
                               ": ", ListenFailureCause(TakeDiagnostics())));
    return kExitRuntimeError;
  }
  for (const Listener& l : listeners_) {
    if (!l.unix_socket || !absl::StartsWith(l.address, "unix:")) continue;
    if ((options_.unix_socket_mode & 0007) != 0) {
      LogEvent(LogLevel::kWarn, "unix_socket_permissive",
               {{"listen", l.address},
                {"mode", absl::StrFormat("%04o", options_.unix_socket_mode)},
                {"why",
                 "any local user may connect and call the Breaker service; "
                 "prefer 0660 with a shared group"}});
    }
    absl::string_view path = l.address;
    absl::ConsumePrefix(&path, "unix:");
    if (absl::StartsWith(path, "//")) path.remove_prefix(2);
    if (chmod(std::string(path).c_str(), options_.unix_socket_mode) != 0) {
      StartupFailed(
          absl::StrCat("listen ", l.address, ": chmod ",
                       absl::StrFormat("%04o", options_.unix_socket_mode), ": ",
                       ErrnoText(errno)));
      return kExitRuntimeError;
    }
  }
  health_service_->SetServingStatus("breakerd.v1.Breaker", true);
  health_service_->SetServingStatus("breakerd.v1.Admin", true);
  health_service_->SetServingStatus(true);
  return kExitOk;
}

int ServerRunner::StartMetrics() {
  ProcessStats stats;
  stats.version = options_.version;
  ConfigReloader* reloader = reloader_.get();
  if (reloader != nullptr) {
    stats.reload_successes = [reloader] { return reloader->successes(); };
    stats.reload_failures = [reloader] { return reloader->failures(); };
  }
  stats.config_valid = [this] {
    return config_valid_.load(std::memory_order_relaxed);
  };
  WatchHub* hub = watch_hub_.get();
  stats.watch_streams = [hub] {
    return static_cast<uint64_t>(hub->active_streams());
  };
  const RpcStats* rpc_stats = &rpc_stats_;
  stats.rpc_methods = [rpc_stats] { return rpc_stats->Snapshot(); };
  const AdminServiceImpl* admin = admin_service_.get();
  stats.admin_auth_failures = [admin] { return admin->auth_failures(); };
  if (state_saver_ != nullptr) {
    stats.state_save_failures = [this] {
      return state_save_failures_.load(std::memory_order_relaxed);
    };
  }
  if (const FleetSync* fleet = fleet_.get(); fleet != nullptr) {
    stats.fleet_connected = [fleet] { return fleet->connected(); };
    stats.fleet_events = [fleet] {
      const FleetCounters c = fleet->counters();
      return std::vector<std::pair<std::string, uint64_t>>{
          {"published", c.published},  {"publish_failed", c.publish_failures},
          {"applied", c.applied},      {"duplicate", c.duplicates},
          {"claim_won", c.claims_won}, {"claim_lost", c.claims_lost},
          {"connected", c.connects},   {"disconnected", c.disconnects},
          {"refused", c.refused}};
    };
  }
  collector_ = std::make_shared<RegistryCollector>(
      registry_.get(), stats, options_.metrics_dependency_label);
  scrape_limiter_ =
      std::make_unique<ScrapeLimiter>(MonotonicClock::Get(), ScrapeLimits());
  g_metrics.store(collector_.get(), std::memory_order_release);
  g_scrape_limiter.store(scrape_limiter_.get(), std::memory_order_release);

  CivetCallbacks callbacks;  // zero-initialized by its constructor
  callbacks.begin_request = &BeginRequest;
  callbacks.log_message = &CivetLogToJson;
  TakeDiagnostics();
  try {
    http_server_ = std::make_unique<CivetServer>(
        std::vector<std::string>{
            "listening_ports", options_.metrics_listen,  //
            "num_threads", absl::StrCat(kMetricsWorkers), "request_timeout_ms",
            absl::StrCat(absl::ToInt64Milliseconds(kMetricsRequestTimeout)),
            "enable_keep_alive", "no"},
        &callbacks);
  } catch (const std::exception& e) {
    g_metrics.store(nullptr, std::memory_order_release);
    g_scrape_limiter.store(nullptr, std::memory_order_release);
    const std::string detail = TakeDiagnostics();
    LogEvent(LogLevel::kError, "startup_failed",
             {{"error", absl::StrCat("metrics-listen ", options_.metrics_listen,
                                     ": ", ListenFailureCause(detail))},
              {"detail", detail.empty() ? e.what() : detail}});
    return kExitRuntimeError;
  }
  const std::vector<int> ports = http_server_->getListeningPorts();
  metrics_address_ = absl::StrCat(
      metrics_host_, ":", ports.empty() ? metrics_port_ : ports.front());
  return kExitOk;
}

void ServerRunner::LogServing() const {
  std::vector<std::string> grpc_addresses;
  for (const Listener& l : listeners_) {
    grpc_addresses.push_back(
        l.unix_socket ? l.address : absl::StrCat(l.host, ":", l.selected_port));
  }
  LogEvent(LogLevel::kInfo, "serving",
           {{"grpc", absl::StrJoin(grpc_addresses, ",")},
            {"metrics", metrics_address_},
            {"version", options_.version},
            {"config", registry_->policies()->source}});
}

void ServerRunner::Shutdown() {
  g_phase.store(Phase::kShuttingDown, std::memory_order_release);
  LogEvent(LogLevel::kInfo, "shutting_down",
           {{"grace_ms", absl::ToInt64Milliseconds(options_.shutdown_grace)}});
  health_service_->SetServingStatus(false);
  StopMaintenanceThread();

  // Watch streams (Breaker's and Health's) never end on their own; end them
  // so Shutdown need not wait out the grace period for them.
  watch_hub_->Shutdown();
  health_service_->Shutdown();
  // gRPC's Shutdown(deadline) waits until every client connection is gone,
  // and an idle client hangs up only at the deadline. So wait for the calls
  // in flight ourselves (unary calls take microseconds), bounded by the
  // grace period, then give stragglers a short final window.
  const absl::Time deadline = absl::Now() + options_.shutdown_grace;
  while (call_tracker_.active() > 0 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  const absl::Time final_deadline =
      std::min(deadline, absl::Now() + absl::Milliseconds(100));
  server_->Shutdown(absl::ToChronoTime(final_deadline));
  server_->Wait();

  // No call changes a breaker any more: let the fleet go, then save.
  if (fleet_ != nullptr) fleet_->Stop();
  SaveState();

  StopSignalThread();
  StopMetrics();  // /readyz said 503 until the calls drained
  LogEvent(LogLevel::kInfo, "stopped");
}

namespace {

// Opens and closes a TCP connection to host:port, ignoring every error.
void Poke(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res) !=
      0) {
    return;
  }
  for (addrinfo* ai = res; ai != nullptr; ai = ai->ai_next) {
    const int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, 0);
    if (fd < 0) continue;
    const bool connected = connect(fd, ai->ai_addr, ai->ai_addrlen) == 0;
    close(fd);
    if (connected) break;
  }
  freeaddrinfo(res);
}

}  // namespace

void ServerRunner::StopMetrics() {
  if (http_server_ == nullptr) return;
  const std::vector<int> ports = http_server_->getListeningPorts();
  std::string host(
      absl::StripSuffix(absl::StripPrefix(metrics_host_, "["), "]"));
  if (host.empty() || host == "0.0.0.0") host = "127.0.0.1";
  if (host == "::") host = "::1";
  std::atomic<bool> stopped{false};
  std::thread stopper([&] {
    http_server_.reset();
    stopped.store(true);
  });
  // civetweb sees its stop flag only when its accept loop wakes up, which
  // without traffic is at a 2 s poll timeout; a connection wakes it now.
  while (!stopped.load()) {
    for (int port : ports) Poke(host, port);
    absl::SleepFor(absl::Milliseconds(10));
  }
  stopper.join();
  g_metrics.store(nullptr, std::memory_order_release);
  g_scrape_limiter.store(nullptr, std::memory_order_release);
}

void ServerRunner::SignalLoop() {
  const sigset_t set = ShutdownSignals();
  while (true) {
    int sig = 0;
    if (sigwait(&set, &sig) != 0) continue;
    bool stopping;
    {
      MutexLock lock(&mu_);
      if (stop_signals_) return;
      stopping = shutdown_requested_;
    }
    const char* name = sig == SIGHUP    ? "SIGHUP"
                       : sig == SIGTERM ? "SIGTERM"
                                        : "SIGINT";
    if (sig == SIGHUP) {
      if (stopping) continue;
      if (!options_.admin_token_file.empty()) ReloadAdminToken();
      if (reloader_ == nullptr) {
        LogEvent(LogLevel::kInfo, "reload_skipped",
                 {{"signal", name},
                  {"reason",
                   "no --config given: the embedded defaults apply, nothing "
                   "to reload"}});
      } else {
        reloader_->Reload("signal").IgnoreError();  // logged by LogReload
      }
      continue;
    }
    if (stopping) {
      LogEvent(LogLevel::kWarn, "signal_ignored",
               {{"signal", name}, {"reason", "already shutting down"}});
      continue;
    }
    LogEvent(LogLevel::kInfo, "shutdown_requested", {{"signal", name}});
    RequestShutdown();
  }
}

void ServerRunner::StopSignalThread() {
  if (!signal_thread_.joinable()) return;
  {
    MutexLock lock(&mu_);
    stop_signals_ = true;
  }
  // Wakes sigwait in that thread only; it sees stop_signals_ and returns.
  pthread_kill(signal_thread_.native_handle(), SIGHUP);
  signal_thread_.join();
}

void ServerRunner::StopMaintenanceThread() {
  if (!maintenance_thread_.joinable()) return;
  {
    MutexLock lock(&mu_);
    stop_maintenance_ = true;
  }
  cv_.SignalAll();
  maintenance_thread_.join();
}

void ServerRunner::MaintenanceLoop() {
  const Clock* clock = MonotonicClock::Get();
  // The poll re-reads the config and the admin token files.
  const bool poll_needed =
      reloader_ != nullptr || !options_.admin_token_file.empty();
  const absl::Duration poll =
      poll_needed ? options_.config_poll_interval : absl::ZeroDuration();
  // Opens and closes reach the --state-file this often (overrides at once).
  const absl::Duration save =
      state_saver_ != nullptr ? kStateSaveInterval : absl::ZeroDuration();
  const absl::Duration evict = options_.evict_interval;
  absl::Time next_poll = poll > absl::ZeroDuration() ? clock->Now() + poll
                                                     : absl::InfiniteFuture();
  absl::Time next_evict = evict > absl::ZeroDuration() ? clock->Now() + evict
                                                       : absl::InfiniteFuture();
  absl::Time next_save = save > absl::ZeroDuration() ? clock->Now() + save
                                                     : absl::InfiniteFuture();
  while (true) {
    const absl::Time next = std::min({next_poll, next_evict, next_save});
    {
      MutexLock lock(&mu_);
      // InfiniteFuture - now is an infinite wait.
      while (!stop_maintenance_ && clock->Now() < next) {
        cv_.WaitWithTimeout(&mu_, next - clock->Now());
      }
      if (stop_maintenance_) return;
    }
    const absl::Time now = clock->Now();
    if (now >= next_poll) {
      if (reloader_ != nullptr) {
        reloader_->ReloadIfChanged().IgnoreError();  // logged by OnReload
      }
      if (!options_.admin_token_file.empty()) ReloadAdminToken();
      next_poll = clock->Now() + poll;
    }
    if (now >= next_save) {
      PersistState();
      next_save = clock->Now() + save;
    }
    if (now >= next_evict) {
      const size_t evicted = registry_->EvictIdle();
      if (evicted > 0) {
        LogEvent(LogLevel::kInfo, "breakers_evicted",
                 {{"evicted", evicted}, {"remaining", registry_->size()}});
      }
      next_evict = clock->Now() + evict;
    }
  }
}

}  // namespace breakerd

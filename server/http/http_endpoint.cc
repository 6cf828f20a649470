#include "server/http/http_endpoint.h"

#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <exception>
#include <thread>
#include <utility>
#include <vector>

#include "CivetServer.h"
#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "civetweb.h"
#include "server/engine/clock.h"
#include "server/listeners.h"
#include "server/log/library_log.h"
#include "server/metrics/collector.h"
#include "server/metrics/text_format.h"

namespace breakerd {
namespace {

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

// Writes all of `bytes`; false if the connection failed or timed out.
bool WriteAll(struct mg_connection* conn, absl::string_view bytes) {
  return mg_write(conn, bytes.data(), bytes.size()) ==
         static_cast<int>(bytes.size());
}

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

HttpEndpoint::HttpEndpoint(const RegistryCollector* collector, std::string host)
    : collector_(collector),
      limiter_(MonotonicClock::Get(), ScrapeLimits()),
      host_(std::move(host)) {}

HttpEndpoint::~HttpEndpoint() { Stop(); }

absl::StatusOr<std::unique_ptr<HttpEndpoint>> HttpEndpoint::Start(
    const std::string& listen, const RegistryCollector* collector) {
  absl::StatusOr<HostPort> hp = ParseHostPort(listen, "metrics-listen");
  if (!hp.ok()) return hp.status();
  std::unique_ptr<HttpEndpoint> endpoint(new HttpEndpoint(collector, hp->host));
  CivetCallbacks callbacks;  // zero-initialized by its constructor
  callbacks.begin_request = &HttpEndpoint::BeginRequest;
  callbacks.log_message = &CivetLogToJson;
  TakeLibraryDiagnostics();
  try {
    endpoint->server_ = std::make_unique<CivetServer>(
        std::vector<std::string>{
            "listening_ports", listen,  //
            "num_threads", absl::StrCat(kMetricsWorkers), "request_timeout_ms",
            absl::StrCat(absl::ToInt64Milliseconds(kMetricsRequestTimeout)),
            "enable_keep_alive", "no"},
        &callbacks, endpoint.get());
  } catch (const std::exception& e) {
    const std::string detail = TakeLibraryDiagnostics();
    absl::Status error = absl::UnavailableError(absl::StrCat(
        "metrics-listen ", listen, ": ", ListenFailureCause(detail)));
    error.SetPayload(kLibraryDiagnosticsPayload,
                     absl::Cord(detail.empty() ? e.what() : detail));
    return error;
  }
  const std::vector<int> ports = endpoint->server_->getListeningPorts();
  endpoint->address_ =
      absl::StrCat(hp->host, ":", ports.empty() ? hp->port : ports.front());
  return endpoint;
}

void HttpEndpoint::Stop() {
  if (server_ == nullptr) return;
  const std::vector<int> ports = server_->getListeningPorts();
  std::string host(absl::StripSuffix(absl::StripPrefix(host_, "["), "]"));
  if (host.empty() || host == "0.0.0.0") host = "127.0.0.1";
  if (host == "::") host = "::1";
  std::atomic<bool> stopped{false};
  std::thread stopper([&] {
    server_.reset();
    stopped.store(true);
  });
  // civetweb sees its stop flag only when its accept loop wakes up, which
  // without traffic is at a 2 s poll timeout; a connection wakes it now.
  while (!stopped.load()) {
    for (int port : ports) Poke(host, port);
    absl::SleepFor(absl::Milliseconds(10));
  }
  stopper.join();
}

int HttpEndpoint::BeginRequest(struct mg_connection* conn) {
  const struct mg_request_info* info = mg_get_request_info(conn);
  const CivetServer* server =
      info != nullptr ? static_cast<const CivetServer*>(info->user_data)
                      : nullptr;
  HttpEndpoint* self = server != nullptr
                           ? static_cast<HttpEndpoint*>(
                                 const_cast<void*>(server->getUserContext()))
                           : nullptr;
  const std::string path =
      info != nullptr && info->local_uri != nullptr ? info->local_uri : "";
  const absl::string_view method =
      info != nullptr && info->request_method != nullptr ? info->request_method
                                                         : "";
  const bool head = method == "HEAD";
  if (self == nullptr) {
    return Respond(conn, head, 503, "Service Unavailable", "starting\n");
  }
  const bool metrics = path == "/metrics";
  if (metrics || path == "/healthz" || path == "/readyz") {
    if (method != "GET" && !head) {
      return Respond(conn, false, 405, "Method Not Allowed",
                     "use GET or HEAD\n", "Allow: GET, HEAD\r\n");
    }
    return metrics ? self->AnswerMetrics(conn, *info, head)
                   : self->AnswerProbe(conn, path, head);
  }
  return Respond(conn, head, 404, "Not Found",
                 "not found: this port serves /metrics, /healthz and "
                 "/readyz\n");
}

int HttpEndpoint::AnswerProbe(struct mg_connection* conn,
                              const std::string& path, bool head) const {
  int status = 200;
  absl::string_view reason = "OK";
  absl::string_view body;
  if (path == "/healthz") {
    body = "ok\n";  // the process is alive, even while draining
  } else {
    switch (phase_.load(std::memory_order_acquire)) {
      case ServingPhase::kServing:
        body = "ready\n";
        break;
      case ServingPhase::kStarting:
        status = 503;
        reason = "Service Unavailable";
        body = "starting\n";
        break;
      case ServingPhase::kShuttingDown:
        status = 503;
        reason = "Service Unavailable";
        body = "shutting down\n";
        break;
    }
  }
  return Respond(conn, head, status, reason, body);
}

// The text format is written straight from the Registry
// (RegistryCollector::WriteText), not by prometheus-cpp's serializer, which
// costs ten times as much for the same samples. HEAD renders nothing.
int HttpEndpoint::AnswerMetrics(struct mg_connection* conn,
                                const struct mg_request_info& info, bool head) {
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
      limiter_.Begin(collector_->registry_size());
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
      collector_->WriteText(kExpositionChunkBytes,
                            &scrape_buffers_[admission.slot], write_piece) &&
      chunked) {
    WriteAll(conn, first ? "0\r\n\r\n" : "\r\n0\r\n\r\n");
  }
  limiter_.End(admission.slot);
  return 200;
}

}  // namespace breakerd

// The HTTP endpoint on --metrics-listen (civetweb): /metrics (the Prometheus
// text format, streamed from the Registry), /healthz (liveness: the process
// answers) and /readyz (readiness: 503 while starting or shutting down);
// 404 for any other path; 405 for a method other than GET or HEAD. Every
// request is answered in civetweb's
// begin_request hook, and every answer closes its connection.
//
// A peer holding connections open without sending a request (idle, or
// trickling headers: slowloris) ties one of kMetricsWorkers threads each for
// at most kMetricsRequestTimeout (the bound is on the whole request header,
// not on each read, and also on each stalled write of an answer). With fewer
// than kMetricsWorkers such connections a probe finds a free worker at once;
// with more it waits for one to time out (SECURITY.md).
//
// What /metrics scrapes may cost, whoever sends them: ScrapeLimits'
// defaults (at most 2 rendered at once, 10,000 breakers read per second in
// bursts of 20,000; beyond either, 503 with Retry-After), each scrape
// streaming the exposition in pieces of kExpositionChunkBytes (HTTP/1.1
// chunked; HTTP/1.0: a body that ends when the connection closes). A scrape
// still unfinished after kScrapeDeadline is cut at its next piece (with
// HTTP/1.1 the client sees an incomplete answer), so a slow reader holds a
// slot for a bounded time.
//
// Thread-safety: SetPhase() may be called from any thread; Start() and
// Stop() from one.
#ifndef BREAKERD_SERVER_HTTP_HTTP_ENDPOINT_H_
#define BREAKERD_SERVER_HTTP_HTTP_ENDPOINT_H_

#include <atomic>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/metrics/scrape_limiter.h"

class CivetServer;
struct mg_connection;
struct mg_request_info;

namespace breakerd {

class RegistryCollector;

inline constexpr int kMetricsWorkers = 64;
inline constexpr absl::Duration kMetricsRequestTimeout =
    absl::Milliseconds(1000);
inline constexpr absl::Duration kScrapeDeadline = absl::Seconds(10);

// What /readyz answers: 200 "ready" only while kServing.
enum class ServingPhase : int { kStarting, kServing, kShuttingDown };

class HttpEndpoint {
 public:
  // Listens on `listen` ("host:port"; port 0 picks a free port) and serves
  // `collector`'s metrics. UNAVAILABLE, naming --metrics-listen and the
  // cause (with civetweb's own words as the "detail" payload), if it cannot
  // listen. REQUIRES: collector outlives the endpoint.
  static absl::StatusOr<std::unique_ptr<HttpEndpoint>> Start(
      const std::string& listen, const RegistryCollector* collector);
  // Stop().
  ~HttpEndpoint();

  HttpEndpoint(const HttpEndpoint&) = delete;
  HttpEndpoint& operator=(const HttpEndpoint&) = delete;

  // "host:port" with the port bound.
  const std::string& address() const { return address_; }

  void SetPhase(ServingPhase phase) {
    phase_.store(phase, std::memory_order_release);
  }

  // Stops serving, at once: civetweb's accept loop sees its stop flag only
  // when it wakes up (a 2 s poll without traffic), so this connects to the
  // port until it has stopped. Idempotent.
  void Stop();

 private:
  HttpEndpoint(const RegistryCollector* collector, std::string host);

  // civetweb's begin_request hook; the endpoint is the server's user
  // context.
  static int BeginRequest(struct mg_connection* conn);
  int AnswerProbe(struct mg_connection* conn, const std::string& path,
                  bool head) const;
  // REQUIRES: a GET or HEAD (`head`) request.
  int AnswerMetrics(struct mg_connection* conn,
                    const struct mg_request_info& info, bool head);

  const RegistryCollector* const collector_;
  ScrapeLimiter limiter_;
  // The pieces of the exposition being written, one buffer per
  // ScrapeLimiter slot: reused, so the memory scrapes keep stays at one
  // piece per slot, whichever of the kMetricsWorkers threads serve them.
  std::string scrape_buffers_[ScrapeLimits::kDefaultConcurrent];
  std::atomic<ServingPhase> phase_{ServingPhase::kStarting};
  const std::string host_;  // from --metrics-listen
  std::string address_;
  std::unique_ptr<CivetServer> server_;
};

}  // namespace breakerd

#endif  // BREAKERD_SERVER_HTTP_HTTP_ENDPOINT_H_

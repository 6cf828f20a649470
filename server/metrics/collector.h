// The /metrics view of breakerd: a prometheus-cpp Collectable that reads the
// engine's one Registry when scraped. There is no second set of counters and
// no cached copy: every sample comes from the BreakerSnapshot the Registry
// hands out at scrape time, so /metrics shows exactly what traffic gets.
//
// Families (every one has a HELP line saying what its values mean):
//   per breaker      breakerd_state, breakerd_transitions_total,
//                    breakerd_acquire_total, breakerd_reports_total,
//                    breakerd_failure_rate, breakerd_state_seconds_total,
//                    breakerd_call_duration_seconds (histogram),
//                    breakerd_retries_total
//   per process      breakerd_breakers, breakerd_build_info,
//                    breakerd_config_reloads_total,
//                    breakerd_unknown_permits_total, breakerd_watch_streams
//
// To keep a scrape of max_breakers breakers small, per-breaker counters are
// exported only for label combinations that have counted something (a
// combination appears the first time it is non-zero), and the latency
// histogram only for breakers that have a reported latency. breakerd_state
// and breakerd_failure_rate are exported for every breaker.
//
// Thread-safety: Collect() is const and may run on several HTTP threads at
// once; it takes only the Registry's own (shared) locks, one shard at a time.
#ifndef BREAKERD_SERVER_METRICS_COLLECTOR_H_
#define BREAKERD_SERVER_METRICS_COLLECTOR_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "prometheus/collectable.h"
#include "prometheus/metric_family.h"
#include "server/engine/registry.h"

namespace breakerd {

// Process-level numbers that do not live in the Registry. Each function is
// called once per scrape; an empty function exports 0.
// REQUIRES: every function is thread-safe and cheap.
struct ProcessStats {
  // Exported as breakerd_build_info{version}.
  std::string version;
  // Config reloads applied / refused since start
  // (breakerd_config_reloads_total{result="success"|"failure"}).
  std::function<uint64_t()> reload_successes;
  std::function<uint64_t()> reload_failures;
  // Open Watch streams (breakerd_watch_streams).
  std::function<uint64_t()> watch_streams;
};

class RegistryCollector final : public prometheus::Collectable {
 public:
  // REQUIRES: `registry` is non-null and outlives the collector (and every
  // Exposer it is registered with).
  RegistryCollector(const Registry* registry, ProcessStats stats);

  RegistryCollector(const RegistryCollector&) = delete;
  RegistryCollector& operator=(const RegistryCollector&) = delete;

  // Reads every breaker once and returns the families listed above.
  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  // Constant after construction.
  const Registry* const registry_;
  const ProcessStats stats_;
};

// The value of breakerd_state for `state`: 0 closed, 1 half-open, 2 open,
// 3 forced open, 4 forced closed.
double StateGaugeValue(State state);

}  // namespace breakerd

#endif  // BREAKERD_SERVER_METRICS_COLLECTOR_H_

// The /metrics view of breakerd, read from the engine's one Registry when
// scraped. There is no second set of counters and no cached copy: every
// sample comes from the BreakerSnapshot the Registry hands out at scrape
// time, so /metrics shows exactly what traffic gets. families.h lists the
// families and decides which samples a scrape contains.
//
// RegistryCollector renders them two ways from the same samples:
//   - Collect(): prometheus-cpp MetricFamily values, so the collector is a
//     prometheus::Collectable like any other (the data model stays separate
//     from the HTTP server).
//   - AppendText(): the Prometheus text format written directly
//     (text_format.h). Collect() plus prometheus-cpp's TextSerializer costs
//     over ten times as much for the same text (bench/scrape_bench).
// breakerd serves /metrics with AppendText(). The Collectable stays
// registered with the Exposer, on /metrics-prometheus-cpp: a reference
// rendering to cross-check the fast one in a running process (it also
// carries prometheus-cpp's exposer_* self-metrics and gzip); it is not
// meant to be scraped (see server_runner.cc).
//
// Thread-safety: Collect() and AppendText() are const and may run on several
// HTTP threads at once; they take only the Registry's own locks, one shard
// at a time.
#ifndef BREAKERD_SERVER_METRICS_COLLECTOR_H_
#define BREAKERD_SERVER_METRICS_COLLECTOR_H_

#include <string>
#include <vector>

#include "prometheus/collectable.h"
#include "prometheus/metric_family.h"
#include "server/engine/registry.h"
#include "server/metrics/families.h"

namespace breakerd {

class RegistryCollector final : public prometheus::Collectable {
 public:
  // REQUIRES: `registry` is non-null and outlives the collector (and every
  // Exposer it is registered with).
  RegistryCollector(const Registry* registry, ProcessStats stats);

  RegistryCollector(const RegistryCollector&) = delete;
  RegistryCollector& operator=(const RegistryCollector&) = delete;

  // Reads every breaker once and returns the families of families.h, in
  // FamilyId order (a family without samples is still returned).
  std::vector<prometheus::MetricFamily> Collect() const override;

  // Reads every breaker once and appends the same families to `out` in the
  // Prometheus text format 0.0.4 (content type kTextFormatContentType).
  void AppendText(std::string* out) const;

 private:
  // Constant after construction.
  const Registry* const registry_;
  const ProcessStats stats_;
};

}  // namespace breakerd

#endif  // BREAKERD_SERVER_METRICS_COLLECTOR_H_

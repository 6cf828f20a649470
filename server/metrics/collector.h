// The /metrics view of breakerd, read from the engine's one Registry when
// scraped. There is no second set of counters and no cached copy: every
// sample comes from the BreakerSnapshot the Registry hands out at scrape
// time, so /metrics shows exactly what traffic gets. families.h lists the
// families and decides which samples a scrape contains.
//
// RegistryCollector renders them two ways from the same samples:
//   - WriteText(): the Prometheus text format written directly and handed
//     out in pieces (text_format.h): what /metrics serves. AppendText()
//     is the same text whole, for tests and benchmarks.
//   - Collect(): prometheus-cpp MetricFamily values, so the collector is a
//     prometheus::Collectable like any other (the data model stays separate
//     from the HTTP server). Collect() plus prometheus-cpp's TextSerializer
//     costs over ten times as much for the same text and holds all of it at
//     once (bench/scrape_bench); breakerd serves it nowhere. Tests and the
//     benchmark render it to cross-check the text writer.
// Both honour the collector's DependencyLabel (families.h).
//
// Thread-safety: Collect(), WriteText() and AppendText() are const and may
// run on several HTTP threads at once; they take only the Registry's own
// locks, one shard at a time.
#ifndef BREAKERD_SERVER_METRICS_COLLECTOR_H_
#define BREAKERD_SERVER_METRICS_COLLECTOR_H_

#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/strings/string_view.h"
#include "prometheus/collectable.h"
#include "prometheus/metric_family.h"
#include "server/engine/registry.h"
#include "server/metrics/dependency_label.h"
#include "server/metrics/families.h"

namespace breakerd {

class RegistryCollector final : public prometheus::Collectable {
 public:
  // REQUIRES: `registry` is non-null and outlives the collector.
  RegistryCollector(const Registry* registry, ProcessStats stats,
                    DependencyLabel label = DependencyLabel::kName);

  RegistryCollector(const RegistryCollector&) = delete;
  RegistryCollector& operator=(const RegistryCollector&) = delete;

  // Reads every breaker once and returns the families of families.h, in
  // FamilyId order (a family without samples is still returned).
  std::vector<prometheus::MetricFamily> Collect() const override;

  // The same families in the Prometheus text format 0.0.4 (content type
  // kTextFormatContentType), handed to `write` in pieces of about
  // `chunk_bytes` built in `*buffer` (WriteTextExposition). Returns false
  // if `write` did.
  bool WriteText(size_t chunk_bytes, std::string* buffer,
                 absl::FunctionRef<bool(absl::string_view)> write) const;

  // The same text appended to `out` whole.
  void AppendText(std::string* out) const;

  // The breakers a scrape would read now.
  size_t registry_size() const { return registry_->size(); }

 private:
  // Constant after construction.
  const Registry* const registry_;
  const ProcessStats stats_;
  const DependencyLabel label_;
};

}  // namespace breakerd

#endif  // BREAKERD_SERVER_METRICS_COLLECTOR_H_

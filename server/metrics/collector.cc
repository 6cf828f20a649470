#include "server/metrics/collector.h"

#include <array>
#include <cassert>
#include <cstddef>
#include <limits>
#include <utility>

#include "prometheus/client_metric.h"
#include "prometheus/metric_type.h"
#include "server/metrics/text_format.h"

namespace breakerd {
namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

MetricType TypeOf(MetricKind kind) {
  switch (kind) {
    case MetricKind::kCounter:
      return MetricType::Counter;
    case MetricKind::kGauge:
      return MetricType::Gauge;
    case MetricKind::kHistogram:
      return MetricType::Histogram;
  }
  return MetricType::Untyped;
}

// Builds one MetricFamily per FamilyId from the samples.
class FamilySink final : public SampleSink {
 public:
  FamilySink(size_t breakers, DependencyLabel label) : labeler_(label) {
    for (int i = 0; i < kFamilyCount; ++i) {
      const FamilyDef& def = Family(static_cast<FamilyId>(i));
      MetricFamily& f = families_[i];
      f.name = std::string(def.name);
      f.help = std::string(def.help);
      f.type = TypeOf(def.kind);
      // The registry may change while we walk it: a little headroom.
      if (def.samples_per_breaker > 0) {
        f.metric.reserve((breakers + 16) * def.samples_per_breaker);
      }
    }
  }

  void AddSample(FamilyId family, LabelValues labels, double value) override {
    ClientMetric& m = Add(family, labels);
    if (Family(family).kind == MetricKind::kCounter) {
      m.counter.value = value;
    } else {
      m.gauge.value = value;
    }
  }

  void AddCount(FamilyId family, LabelValues labels, uint64_t value) override {
    AddSample(family, labels, static_cast<double>(value));
  }

  void AddHistogram(FamilyId family, LabelValues labels,
                    const HistogramSample& h) override {
    const absl::Span<const double> bounds = Family(family).bucket_bounds;
    ClientMetric& m = Add(family, labels);
    m.histogram.sample_count = h.count;
    m.histogram.sample_sum = h.sum;
    m.histogram.bucket.reserve(bounds.size() + 1);
    for (size_t b = 0; b < bounds.size(); ++b) {
      m.histogram.bucket.push_back(
          ClientMetric::Bucket{h.cumulative_counts[b], bounds[b]});
    }
    // +Inf is the total count by definition.
    m.histogram.bucket.push_back(
        ClientMetric::Bucket{h.count, std::numeric_limits<double>::infinity()});
  }

  std::vector<MetricFamily> Take() && {
    return std::vector<MetricFamily>(std::make_move_iterator(families_.begin()),
                                     std::make_move_iterator(families_.end()));
  }

 private:
  // A new sample of `family` with its labels. Scrapes of many breakers build
  // hundreds of thousands of labels, so each string is built once, in place.
  ClientMetric& Add(FamilyId family, LabelValues all_values) {
    const absl::Span<const absl::string_view> names = labeler_.Names(family);
    const absl::Span<const absl::string_view> values =
        labeler_.Values(family, all_values, &values_);
    ClientMetric& m = families_[static_cast<int>(family)].metric.emplace_back();
    assert(values.size() == names.size());
    m.label.reserve(values.size());
    const absl::string_view* name = names.data();
    for (absl::string_view value : values) {
      ClientMetric::Label& l = m.label.emplace_back();
      l.name.assign(name->data(), name->size());
      l.value.assign(value.data(), value.size());
      ++name;
    }
    return m;
  }

  DependencyLabeler labeler_;
  std::array<absl::string_view, kMaxLabels> values_;  // scratch of Add
  std::array<MetricFamily, kFamilyCount> families_;
};

}  // namespace

RegistryCollector::RegistryCollector(const Registry* registry,
                                     ProcessStats stats, DependencyLabel label)
    : registry_(registry), stats_(std::move(stats)), label_(label) {}

std::vector<MetricFamily> RegistryCollector::Collect() const {
  FamilySink sink(registry_->size(), label_);
  EmitSamples(*registry_, stats_, label_, &sink);
  std::vector<MetricFamily> families = std::move(sink).Take();
  std::vector<MetricFamily> exported;
  exported.reserve(families.size());
  for (int i = 0; i < kFamilyCount; ++i) {
    if (FamilyExported(static_cast<FamilyId>(i), stats_, label_)) {
      exported.push_back(std::move(families[i]));
    }
  }
  return exported;
}

bool RegistryCollector::WriteText(
    size_t chunk_bytes, std::string* buffer,
    absl::FunctionRef<bool(absl::string_view)> write) const {
  return WriteTextExposition(*registry_, stats_, label_, chunk_bytes, buffer,
                             write);
}

void RegistryCollector::AppendText(std::string* out) const {
  AppendTextExposition(*registry_, stats_, out, label_);
}

}  // namespace breakerd

#include "server/metrics/collector.h"

#include <cstddef>
#include <initializer_list>
#include <limits>
#include <string>
#include <utility>

#include "prometheus/client_metric.h"
#include "prometheus/metric_type.h"
#include "server/engine/outcome.h"
#include "server/engine/types.h"

namespace breakerd {
namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

MetricFamily Family(std::string name, std::string help, MetricType type) {
  MetricFamily f;
  f.name = std::move(name);
  f.help = std::move(help);
  f.type = type;
  return f;
}

// Appends a sample to `family` labelled with `labels` (name, value) pairs.
// Scrapes of many breakers build hundreds of thousands of labels, so each
// string is built once, in place.
ClientMetric& Add(
    MetricFamily* family,
    std::initializer_list<std::pair<const char*, absl::string_view>> labels) {
  ClientMetric& m = family->metric.emplace_back();
  m.label.reserve(labels.size());
  for (const auto& [name, value] : labels) {
    ClientMetric::Label& l = m.label.emplace_back();
    l.name = name;
    l.value.assign(value.data(), value.size());
  }
  return m;
}

void AddCounter(
    MetricFamily* family,
    std::initializer_list<std::pair<const char*, absl::string_view>> labels,
    double value) {
  Add(family, labels).counter.value = value;
}

void AddGauge(
    MetricFamily* family,
    std::initializer_list<std::pair<const char*, absl::string_view>> labels,
    double value) {
  Add(family, labels).gauge.value = value;
}

uint64_t Call(const std::function<uint64_t()>& fn) { return fn ? fn() : 0; }

constexpr State kAllStates[] = {State::kClosed, State::kHalfOpen, State::kOpen,
                                State::kForcedOpen, State::kForcedClosed};

}  // namespace

double StateGaugeValue(State state) {
  switch (state) {
    case State::kClosed:
      return 0;
    case State::kHalfOpen:
      return 1;
    case State::kOpen:
      return 2;
    case State::kForcedOpen:
      return 3;
    case State::kForcedClosed:
      return 4;
  }
  return 0;
}

RegistryCollector::RegistryCollector(const Registry* registry,
                                     ProcessStats stats)
    : registry_(registry), stats_(std::move(stats)) {}

std::vector<MetricFamily> RegistryCollector::Collect() const {
  MetricFamily state = Family(
      "breakerd_state",
      "Current state of the breaker: 0 closed (calls allowed), 1 half-open "
      "(one probe allowed), 2 open (calls rejected until the cooldown ends), "
      "3 forced open by an operator, 4 forced closed by an operator.",
      MetricType::Gauge);
  MetricFamily transitions =
      Family("breakerd_transitions_total",
             "State changes of the breaker since it was created, by previous "
             "state, new state and the rule or action that caused it.",
             MetricType::Counter);
  MetricFamily acquires = Family(
      "breakerd_acquire_total",
      "Acquire decisions since the breaker was created. decision: allowed, "
      "probe (the half-open trial call), rejected_<why> (open, "
      "probe_in_flight, retry_budget, forced_open), or shadow_rejected_<why> "
      "(shadow mode: would have been rejected, was allowed).",
      MetricType::Counter);
  MetricFamily reports = Family(
      "breakerd_reports_total",
      "Reported call outcomes since the breaker was created, by outcome class "
      "and by effect on the breaker (counted_success, counted_failure, "
      "neutral, late: from an earlier generation, no state change).",
      MetricType::Counter);
  MetricFamily failure_rate = Family(
      "breakerd_failure_rate",
      "Share of counted failures among counted outcomes in the breaker's "
      "sliding window, 0 to 1 (0 when the window is empty).",
      MetricType::Gauge);
  MetricFamily state_seconds =
      Family("breakerd_state_seconds_total",
             "Seconds the breaker has spent in each state since it was "
             "created, including the current stretch.",
             MetricType::Counter);
  MetricFamily durations =
      Family("breakerd_call_duration_seconds",
             "Latency of the guarded calls as reported by the application, in "
             "seconds (reports without a latency are not observed).",
             MetricType::Histogram);
  MetricFamily retries =
      Family("breakerd_retries_total",
             "Acquire calls with attempt > 0: granted by the retry budget or "
             "rejected (budget spent, or breaker not closed).",
             MetricType::Counter);

  // One sample per breaker in these (the registry may change while we walk it).
  const size_t expected = registry_->size() + 16;
  state.metric.reserve(expected);
  failure_rate.metric.reserve(expected);
  acquires.metric.reserve(expected);
  reports.metric.reserve(expected);
  state_seconds.metric.reserve(expected);

  size_t breakers = 0;
  registry_->ForEach([&](const BreakerSnapshot& s) {
    ++breakers;
    const absl::string_view dep = s.dependency;

    AddGauge(&state, {{"dependency", dep}}, StateGaugeValue(s.state));

    for (const BreakerSnapshot::TransitionCount& t : s.transitions) {
      if (t.count == 0) continue;
      AddCounter(&transitions,
                 {{"dependency", dep},
                  {"from", StateName(t.from)},
                  {"to", StateName(t.to)},
                  {"reason", TransitionReasonName(t.reason)}},
                 static_cast<double>(t.count));
    }

    for (int d = 0; d < kDecisionCount; ++d) {
      if (s.acquires[d] == 0) continue;
      AddCounter(&acquires,
                 {{"dependency", dep},
                  {"decision", DecisionName(static_cast<Decision>(d))}},
                 static_cast<double>(s.acquires[d]));
    }

    for (int c = 1; c < kOutcomeClassCount; ++c) {
      for (int e = 1; e < kEffectCount; ++e) {
        const uint64_t n = s.reports[c][e];
        if (n == 0) continue;
        AddCounter(&reports,
                   {{"dependency", dep},
                    {"class", OutcomeClassName(static_cast<OutcomeClass>(c))},
                    {"effect", EffectName(static_cast<Effect>(e))}},
                   static_cast<double>(n));
      }
    }

    AddGauge(&failure_rate, {{"dependency", dep}}, s.failure_rate);

    for (State st : kAllStates) {
      const double seconds = s.state_seconds[static_cast<int>(st)];
      if (seconds <= 0) continue;
      AddCounter(&state_seconds,
                 {{"dependency", dep}, {"state", StateName(st)}}, seconds);
    }

    if (s.latency_count > 0) {
      ClientMetric& m = Add(&durations, {{"dependency", dep}});
      m.histogram.sample_count = s.latency_count;
      m.histogram.sample_sum = s.latency_sum_seconds;
      m.histogram.bucket.reserve(kLatencyBuckets + 1);
      // The snapshot holds per-bucket counts; Prometheus buckets are
      // cumulative (le = "less than or equal").
      uint64_t cumulative = 0;
      for (int b = 0; b < kLatencyBuckets; ++b) {
        cumulative += s.latency_buckets[b];
        m.histogram.bucket.push_back(
            ClientMetric::Bucket{cumulative, kLatencyBucketBounds[b]});
      }
      // +Inf is the total count by definition.
      m.histogram.bucket.push_back(ClientMetric::Bucket{
          s.latency_count, std::numeric_limits<double>::infinity()});
    }

    if (s.retries_granted > 0) {
      AddCounter(&retries, {{"dependency", dep}, {"decision", "granted"}},
                 static_cast<double>(s.retries_granted));
    }
    if (s.retries_rejected > 0) {
      AddCounter(&retries, {{"dependency", dep}, {"decision", "rejected"}},
                 static_cast<double>(s.retries_rejected));
    }
  });

  MetricFamily breaker_count =
      Family("breakerd_breakers",
             "Breakers currently held in memory (one per dependency name "
             "seen and not evicted; capped by limits.max_breakers).",
             MetricType::Gauge);
  AddGauge(&breaker_count, {}, static_cast<double>(breakers));

  MetricFamily build_info =
      Family("breakerd_build_info",
             "Always 1; the version label is the running breakerd version.",
             MetricType::Gauge);
  AddGauge(&build_info, {{"version", stats_.version}}, 1);

  MetricFamily reloads = Family(
      "breakerd_config_reloads_total",
      "Config reload attempts since start: success (the new file is in "
      "force) or failure (the file was refused whole, the old one stays).",
      MetricType::Counter);
  AddCounter(&reloads, {{"result", "success"}},
             static_cast<double>(Call(stats_.reload_successes)));
  AddCounter(&reloads, {{"result", "failure"}},
             static_cast<double>(Call(stats_.reload_failures)));

  MetricFamily unknown_permits = Family(
      "breakerd_unknown_permits_total",
      "Reports refused because their permit was never issued by this "
      "process (garbage, or from before a restart); they change nothing.",
      MetricType::Counter);
  AddCounter(&unknown_permits, {},
             static_cast<double>(registry_->unknown_permits()));

  MetricFamily watch_streams =
      Family("breakerd_watch_streams", "Watch streams currently open.",
             MetricType::Gauge);
  AddGauge(&watch_streams, {}, static_cast<double>(Call(stats_.watch_streams)));

  std::vector<MetricFamily> out;
  out.reserve(13);
  for (MetricFamily* f :
       {&state, &transitions, &acquires, &reports, &failure_rate,
        &state_seconds, &durations, &retries, &breaker_count, &build_info,
        &reloads, &unknown_permits, &watch_streams}) {
    out.push_back(std::move(*f));
  }
  return out;
}

}  // namespace breakerd

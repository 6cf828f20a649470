// The metric families breakerd exports, defined once: their names, HELP
// texts, types and label names (Family()), and the one piece of code that
// decides which samples a scrape contains (the Emit* functions). Two
// renderings consume the samples through the SampleSink interface:
//   - RegistryCollector::Collect() builds prometheus-cpp MetricFamily values
//     (the Collectable, see collector.h);
//   - WriteTextExposition() writes the Prometheus text format directly
//     (text_format.h), which is what /metrics serves.
// Because both are fed by the same Emit* code, they cannot disagree on what
// is exported; only the rendering differs.
//
// Families (every one has a HELP line saying what its values mean):
//   per breaker      breakerd_state, breakerd_transitions_total,
//                    breakerd_acquire_total, breakerd_reports_total,
//                    breakerd_failure_rate, breakerd_state_seconds_total,
//                    breakerd_call_duration_seconds (histogram),
//                    breakerd_retries_total, breakerd_inflight,
//                    breakerd_hung_calls_total, breakerd_admit_share,
//                    breakerd_open_episodes_total,
//                    breakerd_open_duration_seconds (histogram),
//                    breakerd_policy_threshold, breakerd_window_calls,
//                    breakerd_state_age_seconds (breakers not closed),
//                    breakerd_client_decisions_total;
//                    in fleet mode breakerd_fleet_window_calls,
//                    breakerd_fleet_failure_rate (for breakers whose
//                    fleet window was read) and
//                    breakerd_fleet_unconfirmed_opens_total
//   per process      breakerd_breakers, breakerd_build_info,
//                    breakerd_config_reloads_total,
//                    breakerd_unknown_permits_total, breakerd_watch_streams,
//                    breakerd_grpc_server_handled_total,
//                    breakerd_grpc_server_handling_seconds (histogram),
//                    breakerd_admin_auth_failures_total,
//                    breakerd_state_save_failures_total (with --state-file),
//                    breakerd_chain_decisions_total,
//                    breakerd_chain_outcomes_total,
//                    breakerd_acquire_first_skipped_total,
//                    breakerd_batch_outcomes_total
//
// To keep a scrape of max_breakers breakers small, per-breaker counters are
// exported only for label combinations that have counted something (a
// combination appears the first time it is non-zero), and the latency
// histogram only for breakers that have a reported latency. The gauges
// breakerd_state, breakerd_failure_rate, breakerd_inflight,
// breakerd_admit_share, breakerd_window_calls and breakerd_policy_threshold
// (one sample per rule that is on) are exported for every breaker.
//
// The per-breaker families carry the dependency as their first label. What
// its value is depends on the DependencyLabel (dependency_label.h,
// --metrics-dependency-label): the name, or its hash (DependencyLabeler
// rewrites the value), or, for kOmit, no dependency label at all: each
// counter and histogram is then summed over every dependency held and every
// one evicted since start (Registry::SumCounters, so a sum never goes down),
// one series per combination of the remaining labels; the per-breaker
// gauges, which the sums do not carry, are not exported.
//
// Thread-safety: the family table is immutable; the Emit* functions may run
// on several threads at once, each with its own sink. EmitSamples takes the
// Registry's shard locks one at a time and calls the sink with a shard
// locked: such a sink must be quick and must not call into the Registry.
#ifndef BREAKERD_SERVER_METRICS_FAMILIES_H_
#define BREAKERD_SERVER_METRICS_FAMILIES_H_

#include <array>
#include <bitset>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "server/engine/registry.h"
#include "server/engine/types.h"
#include "server/fleet/fleet_counters.h"
#include "server/metrics/dependency_label.h"
#include "server/service/rpc_method_stats.h"

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
  // False while the --config file is invalid (breakerd_config_valid); unset
  // exports 1.
  std::function<bool()> config_valid;
  // Open Watch streams (breakerd_watch_streams).
  std::function<uint64_t()> watch_streams;
  // Every RPC method's handling numbers
  // (breakerd_grpc_server_handled_total,
  // breakerd_grpc_server_handling_seconds); empty exports no samples.
  std::function<std::vector<RpcMethodStats>()> rpc_methods;
  // Fleet mode (--redis); unset without a fleet, which exports no fleet
  // samples. 1 while the fleet store is reachable
  // (breakerd_fleet_connected), and event counts
  // (breakerd_fleet_events_total{event}).
  std::function<bool()> fleet_connected;
  // The fleet's live members seen at the last heartbeat, 0 while the store
  // is unreachable (breakerd_fleet_members).
  std::function<uint64_t()> fleet_members;
  std::function<FleetCounters()> fleet_counters;
  // Admin calls refused as unauthenticated since start
  // (breakerd_admin_auth_failures_total); unset: the family is absent.
  std::function<uint64_t()> admin_auth_failures;
  // Writes of the --state-file that failed since start
  // (breakerd_state_save_failures_total); unset without --state-file.
  std::function<uint64_t()> state_save_failures;
};

// Every family, in exposition order.
enum class FamilyId : int {
  kState,
  kTransitions,
  kAcquires,
  kReports,
  kFailureRate,
  kStateSeconds,
  kCallDuration,
  kRetries,
  kInflight,
  kHungCalls,
  kAdmitShare,
  kFleetWindowCalls,
  kFleetFailureRate,
  kFleetUnconfirmedOpens,
  kOpenEpisodes,
  kOpenDuration,
  kPolicyThreshold,
  kWindowCalls,
  kStateAge,
  kClientDecisions,
  kBreakers,
  kBuildInfo,
  kConfigReloads,
  kConfigValid,
  kUnknownPermits,
  kWatchStreams,
  kGrpcHandled,
  kGrpcHandlingSeconds,
  kFleetConnected,
  kFleetMembers,
  kFleetEvents,
  kAdminAuthFailures,
  kStateSaveFailures,
  kChainDecisions,
  kChainOutcomes,
  kAcquireFirstSkipped,
  kBatchOutcomes,
};
inline constexpr int kFamilyCount = 37;
// The families before kBreakers are per breaker: fed by
// EmitBreakerSamples, with "dependency" as their first label.
inline constexpr int kPerBreakerFamilyCount = 20;
inline constexpr bool PerBreakerFamily(FamilyId id) {
  return static_cast<int>(id) < kPerBreakerFamilyCount;
}
static_assert(!PerBreakerFamily(FamilyId::kBreakers) &&
              PerBreakerFamily(FamilyId::kClientDecisions));
// Most labels a family has (breakerd_transitions_total's four).
inline constexpr size_t kMaxLabels = 4;

enum class MetricKind { kCounter, kGauge, kHistogram };

// The Prometheus TYPE keyword: "counter", "gauge" or "histogram".
absl::string_view MetricKindName(MetricKind kind);

struct FamilyDef {
  absl::string_view name;
  absl::string_view help;  // one line; no backslash, no newline
  MetricKind kind;
  // Label names, in the order EmitSamples passes their values. For a
  // histogram, the "le" label of its buckets is not listed.
  absl::Span<const absl::string_view> labels;
  // For histograms: the finite upper bounds of the buckets, increasing (the
  // +Inf bucket is implied). Empty for other kinds.
  absl::Span<const double> bucket_bounds;
  // Samples a typical breaker contributes (0 for process families and for
  // families most breakers leave empty); only a hint for reserving memory.
  int samples_per_breaker;
};

// The definition of `id`. The returned reference is valid forever.
const FamilyDef& Family(FamilyId id);

// Label values of one sample, in the order of FamilyDef::labels.
using LabelValues = std::initializer_list<absl::string_view>;

// One histogram sample (one breaker's latency).
struct HistogramSample {
  // Observations <= each finite bound of the family (cumulative), one per
  // FamilyDef::bucket_bounds entry.
  absl::Span<const uint64_t> cumulative_counts;
  // All observations: the +Inf bucket and _count.
  uint64_t count = 0;
  double sum = 0;
};

// Receives the samples of one scrape, in the order they are emitted:
// EmitSamples interleaves families breaker by breaker (Collect()'s sink
// groups them by family); the text writer emits one family at a time.
class SampleSink {
 public:
  virtual ~SampleSink() = default;
  // A counter or gauge sample with a floating-point value.
  virtual void AddSample(FamilyId family, LabelValues labels, double value) = 0;
  // A counter or gauge sample with an integer value (exact in text).
  virtual void AddCount(FamilyId family, LabelValues labels,
                        uint64_t value) = 0;
  // REQUIRES: `family` is a histogram.
  virtual void AddHistogram(FamilyId family, LabelValues labels,
                            const HistogramSample& histogram) = 0;
};

// A set of families: which samples an Emit call feeds to its sink.
using FamilySet = std::bitset<kFamilyCount>;
inline FamilySet AllFamilies() { return FamilySet().set(); }
inline FamilySet OnlyFamily(FamilyId id) {
  return FamilySet().set(static_cast<size_t>(id));
}

// Feeds the samples of one breaker that belong to `families` to `sink`.
void EmitBreakerSamples(const BreakerSnapshot& snapshot, FamilySet families,
                        SampleSink* sink);

// Feeds the process-level samples that belong to `families` to `sink`;
// `breakers` is the number of breakers the scrape saw (breakerd_breakers).
// Calls the functions of `stats` only for the families asked for.
void EmitProcessSamples(const Registry& registry, const ProcessStats& stats,
                        size_t breakers, FamilySet families, SampleSink* sink);

// False for the families a process does not export at all (no HELP/TYPE
// either): the fleet families without fleet mode, the admin family without
// its function, and the per-breaker gauges (breakerd_state,
// breakerd_failure_rate, breakerd_inflight, breakerd_admit_share) under
// DependencyLabel::kOmit.
bool FamilyExported(FamilyId id, const ProcessStats& stats,
                    DependencyLabel label = DependencyLabel::kName);

// Every sample of one scrape, with the dependency label as `label` says
// (the sink still receives the dependency value first; see
// DependencyLabeler). kName and kHash: reads each breaker of `registry`
// once (one Registry::ForEach, calling the sink with the breaker's shard
// locked). kOmit: one sample per label combination of the sums
// (Registry::SumCounters). Then the process-level numbers. Returns the
// number of breakers seen.
size_t EmitSamples(const Registry& registry, const ProcessStats& stats,
                   DependencyLabel label, SampleSink* sink);

// What a sink exports for the label values EmitSamples gives it: the values
// of per-breaker samples with the dependency (the first value) as the name,
// its hash, or left out. One per sink: it keeps the last hash computed (a
// breaker's samples come one after the other).
class DependencyLabeler {
 public:
  explicit DependencyLabeler(DependencyLabel label) : label_(label) {}

  DependencyLabel label() const { return label_; }

  // The label names `id` is exported with: FamilyDef::labels without
  // "dependency" for kOmit.
  absl::Span<const absl::string_view> Names(FamilyId id) const;

  // `values` (in FamilyDef::labels order) as exported, in Names() order.
  // The result views `values`, `*scratch` and this labeler; it is valid
  // until the next call. REQUIRES: values.size() <= kMaxLabels.
  absl::Span<const absl::string_view> Values(
      FamilyId id, LabelValues values,
      std::array<absl::string_view, kMaxLabels>* scratch);

 private:
  const DependencyLabel label_;
  std::string hashed_name_;  // the name last hashed,
  std::string hash_;         // and its HashedDependencyLabel
};

// The value of breakerd_state for `state`: 0 closed, 1 half-open, 2 open,
// 3 forced open, 4 forced closed.
double StateGaugeValue(State state);

}  // namespace breakerd

#endif  // BREAKERD_SERVER_METRICS_FAMILIES_H_

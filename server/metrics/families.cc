#include "server/metrics/families.h"

#include <algorithm>
#include <array>
#include <cassert>

#include "server/engine/outcome.h"

namespace breakerd {
namespace {

constexpr absl::string_view kDependency[] = {"dependency"};
constexpr absl::string_view kDependencyMode[] = {"dependency", "mode"};
constexpr absl::string_view kTransitionLabels[] = {"dependency", "from", "to",
                                                   "reason"};
constexpr absl::string_view kDecisionLabels[] = {"dependency", "decision"};
constexpr absl::string_view kReportLabels[] = {"dependency", "class", "effect"};
constexpr absl::string_view kStateLabels[] = {"dependency", "state"};
constexpr absl::string_view kVersion[] = {"version"};
constexpr absl::string_view kResult[] = {"result"};
constexpr absl::string_view kMethodCode[] = {"method", "code"};
constexpr absl::string_view kEvent[] = {"event"};
constexpr absl::string_view kMethod[] = {"method"};
constexpr absl::string_view kFirstProbe[] = {"dependency", "first_probe"};
constexpr absl::string_view kRule[] = {"dependency", "rule"};
constexpr absl::string_view kChainTier[] = {"chain", "tier"};
constexpr absl::string_view kChainTierClass[] = {"chain", "tier", "class"};
constexpr absl::string_view kReason[] = {"reason"};

// A table row; the fields in the order that reads best in the table.
FamilyDef Def(absl::string_view name, MetricKind kind,
              absl::Span<const absl::string_view> labels,
              int samples_per_breaker, absl::string_view help,
              absl::Span<const double> bucket_bounds = {}) {
  return FamilyDef{name,   help,          kind,
                   labels, bucket_bounds, samples_per_breaker};
}

// Indexed by FamilyId.
const std::array<FamilyDef, kFamilyCount> kFamilies = {
    // Per breaker.
    Def("breakerd_state", MetricKind::kGauge, kDependencyMode, 1,
        "Current state of the breaker: 0 closed (calls allowed), 1 half-open "
        "(one probe allowed), 2 open (calls rejected until the cooldown "
        "ends), 3 forced open by an operator, 4 forced closed by an "
        "operator. mode: enforce, or shadow (every call is allowed whatever "
        "the state)."),
    Def("breakerd_transitions_total", MetricKind::kCounter, kTransitionLabels,
        0,
        "State changes of the breaker since it was created, by previous "
        "state, new state and the rule or action that caused it."),
    Def("breakerd_acquire_total", MetricKind::kCounter, kDecisionLabels, 1,
        "Acquire decisions since the breaker was created. decision: allowed, "
        "probe (the half-open trial call), allowed_local (a first attempt "
        "a Watch client granted itself, counted from its batch), "
        "rejected_<why> (open, "
        "probe_in_flight, retry_budget, forced_open, ramp: past the share "
        "of a breaker recovering after its probe, or a retry meanwhile), or "
        "shadow_rejected_<why> (shadow mode: would have been rejected, was "
        "allowed)."),
    Def("breakerd_reports_total", MetricKind::kCounter, kReportLabels, 1,
        "Reported call outcomes since the breaker was created, by outcome "
        "class and by effect on the breaker (counted_success, "
        "counted_failure, neutral, late: from an earlier generation, no "
        "state change; duplicate: the permit was reported already, no state "
        "change)."),
    Def("breakerd_failure_rate", MetricKind::kGauge, kDependency, 1,
        "Share of counted failures among counted outcomes in the breaker's "
        "sliding window, 0 to 1 (0 when the window is empty)."),
    Def("breakerd_state_seconds_total", MetricKind::kCounter, kStateLabels, 1,
        "Seconds the breaker has spent in each state since it was created, "
        "including the current stretch."),
    Def("breakerd_call_duration_seconds", MetricKind::kHistogram, kDependency,
        1,
        "Latency of the guarded calls as reported by the application, in "
        "seconds (reports without a latency are not observed).",
        kLatencyBucketBounds),
    Def("breakerd_retries_total", MetricKind::kCounter, kDecisionLabels, 0,
        "Acquire calls with attempt > 0: granted by the retry budget or "
        "rejected (budget spent, breaker not closed, or recovering after "
        "its probe: recovery.ramp admits no retry)."),
    Def("breakerd_inflight", MetricKind::kGauge, kDependency, 1,
        "Calls in flight: permits acquired within the permit horizon "
        "(inflight.hang_after, or 60 s when that is off) and not reported "
        "yet, including calls past hang_after that the next Acquire or "
        "Report will count as hung."),
    Def("breakerd_hung_calls_total", MetricKind::kCounter, kDependency, 0,
        "Calls counted as hung since the breaker was created: permits not "
        "reported inflight.hang_after after their Acquire, from then on "
        "counted as slow calls and as failures in the sliding window (never "
        "toward consecutive_failures) until their real Report replaces "
        "them."),
    Def("breakerd_admit_share", MetricKind::kGauge, kDependency, 1,
        "Gentle recovery (recovery.ramp): the share of first attempts the "
        "breaker admits now, 0 to 1, rising over the ramp after a probe "
        "closed it; 1 when not ramping. The rest, and every retry, are "
        "rejected_ramp."),
    Def("breakerd_fleet_window_calls", MetricKind::kGauge, kDependency, 0,
        "Fleet mode: counted calls in the fleet's window for the dependency "
        "(every sidecar's, summed in Redis), as last read by this sidecar; "
        "0 once that read is older than the window."),
    Def("breakerd_fleet_failure_rate", MetricKind::kGauge, kDependency, 0,
        "Fleet mode: share of counted failures among the fleet window's "
        "counted calls, 0 to 1, as last read (compare breakerd_failure_rate, "
        "this sidecar's own)."),
    Def("breakerd_fleet_unconfirmed_opens_total", MetricKind::kCounter,
        kDependency, 0,
        "Fleet mode: open episodes of this sidecar that ended without the "
        "fleet ever confirming them (neither its window nor a quorum of "
        "sidecars agreed): opens that refused only this pod's calls. Many "
        "on one pod mean that pod is sick, not the dependency."),
    Def("breakerd_open_episodes_total", MetricKind::kCounter, kFirstProbe, 0,
        "Open episodes (an open entered from closed) by how their first "
        "probe ended: succeeded (the dependency was fine by then: with "
        "escalation 0, on one pod, unconfirmed by the fleet, the signature "
        "of a false open) or failed. Counted when that probe reports."),
    Def("breakerd_open_duration_seconds", MetricKind::kHistogram, kDependency,
        0,
        "Open episodes that ended in a close, by their duration in seconds "
        "from the open (entered from closed) to the close.",
        kOpenDurationBucketBounds),
    Def("breakerd_policy_threshold", MetricKind::kGauge, kRule, 3,
        "The thresholds of the breaker's policy, one sample per rule that is "
        "on: failure_rate and slow_call_rate (0 to 1), min_calls (of the "
        "failure-rate rule), consecutive_failures (a count)."),
    Def("breakerd_window_calls", MetricKind::kGauge, kDependency, 1,
        "Counted calls in the breaker's failure-rate window now (the "
        "failure-rate rule acts from min_calls on)."),
    Def("breakerd_state_age_seconds", MetricKind::kGauge, kDependency, 0,
        "Seconds since the breaker entered its current state; exported only "
        "for breakers that are not closed."),
    Def("breakerd_client_decisions_total", MetricKind::kCounter,
        kDecisionLabels, 0,
        "Decisions clients made without the sidecar, as their batches "
        "(ReportBatch) told it: refused_local (refused from the Watch "
        "cache), fail_open and fail_closed (made while the sidecar was "
        "away)."),
    // Per process.
    Def("breakerd_breakers", MetricKind::kGauge, {}, 0,
        "Breakers currently held in memory (one per dependency name seen and "
        "not evicted; capped by limits.max_breakers)."),
    Def("breakerd_build_info", MetricKind::kGauge, kVersion, 0,
        "Always 1; the version label is the running breakerd version."),
    Def("breakerd_config_reloads_total", MetricKind::kCounter, kResult, 0,
        "Config reload attempts since start: success (the new file is in "
        "force) or failure (the file was refused whole, the old one stays)."),
    Def("breakerd_config_valid", MetricKind::kGauge, {}, 0,
        "1 when the config in force is the --config file as it reads now (or "
        "there is no --config); 0 when the file is invalid: at start "
        "breakerd then runs on the last good config or the embedded "
        "defaults, on reload the previous config stays."),
    Def("breakerd_unknown_permits_total", MetricKind::kCounter, {}, 0,
        "Reports refused because their permit was never issued by this "
        "process (garbage, or from before a restart); they change nothing."),
    Def("breakerd_watch_streams", MetricKind::kGauge, {}, 0,
        "Watch streams currently open."),
    Def("breakerd_grpc_server_handled_total", MetricKind::kCounter, kMethodCode,
        0,
        "breakerd's own gRPC calls handled since start, by method and by the "
        "gRPC status code they ended with (code OK is always exported; other "
        "codes once they occur). A rejected Acquire is OK. Watch counts "
        "streams set up, not how they end."),
    Def("breakerd_grpc_server_handling_seconds", MetricKind::kHistogram,
        kMethod, 0,
        "Time breakerd took to handle each of its own gRPC calls, in seconds, "
        "from the handler's entry to its response being handed to gRPC "
        "(network and queueing not included; for Watch, the stream set-up).",
        kRpcLatencyBucketBounds),
    Def("breakerd_fleet_connected", MetricKind::kGauge, {}, 0,
        "Fleet mode (--redis): 1 while the shared store is reachable, 0 "
        "while this sidecar breaks on its own (local breakers, local "
        "probes). Absent without --redis."),
    Def("breakerd_fleet_members", MetricKind::kGauge, {}, 0,
        "Fleet mode: the sidecars that heartbeat to the shared store (this "
        "one included), by the store's clock; one silent for 4 "
        "--fleet-sync-interval drops out. 0 while the store is unreachable. "
        "Absent without --redis."),
    Def("breakerd_fleet_events_total", MetricKind::kCounter, kEvent, 0,
        "Fleet mode: states published and applied, duplicates dropped, probe "
        "claims won and lost, publish failures, connects and disconnects "
        "since start."),
    Def("breakerd_admin_auth_failures_total", MetricKind::kCounter, {}, 0,
        "Admin calls (ForceOpen, ForceClose, Reset) refused as "
        "unauthenticated since start: no token configured, no authorization "
        "metadata, or a wrong token."),
    Def("breakerd_state_save_failures_total", MetricKind::kCounter, {}, 0,
        "Writes of the --state-file that failed since start (its directory "
        "missing, not writable, or full): open breakers and operator "
        "overrides would not survive a restart. Absent without "
        "--state-file."),
    Def("breakerd_chain_decisions_total", MetricKind::kCounter, kChainTier, 0,
        "AcquireFirst decisions of named fallback chains, by the granted "
        "candidate's tier (its 0-based position in the caller's full chain) "
        "or none (every candidate refused: the ultimate fallback). Past "
        "limits.max_chains names, chains are counted as other."),
    Def("breakerd_chain_outcomes_total", MetricKind::kCounter, kChainTierClass,
        0,
        "Reported outcomes of calls granted through a named fallback chain, "
        "by tier and outcome class (repeated Reports of a permit not "
        "counted)."),
    Def("breakerd_acquire_first_skipped_total", MetricKind::kCounter, kReason,
        0,
        "AcquireFirst candidates passed over because no breaker could be "
        "created for them (reason max_breakers: limits.max_breakers held); "
        "the next candidate was tried."),
    Def("breakerd_batch_outcomes_total", MetricKind::kCounter, kResult, 0,
        "Outcomes of local decisions reported in batches (ReportBatch): "
        "counted (applied to the breaker), late (an older generation, or a "
        "breaker evicted since), refused (beyond the grants, changing "
        "nothing)."),
};

constexpr State kAllStates[] = {State::kClosed, State::kHalfOpen, State::kOpen,
                                State::kForcedOpen, State::kForcedClosed};

uint64_t Call(const std::function<uint64_t()>& fn) { return fn ? fn() : 0; }

bool Has(FamilySet families, FamilyId id) {
  return families.test(static_cast<size_t>(id));
}

}  // namespace

absl::string_view MetricKindName(MetricKind kind) {
  switch (kind) {
    case MetricKind::kCounter:
      return "counter";
    case MetricKind::kGauge:
      return "gauge";
    case MetricKind::kHistogram:
      return "histogram";
  }
  return "untyped";
}

namespace {

// Prometheus buckets are cumulative (le = "less than or equal"); snapshots
// hold per-bucket counts. Fills *cumulative from the first N per-bucket
// counts and returns their total.
template <size_t N>
uint64_t Accumulate(const uint64_t* per_bucket,
                    std::array<uint64_t, N>* cumulative) {
  uint64_t total = 0;
  for (size_t b = 0; b < N; ++b) {
    total += per_bucket[b];
    (*cumulative)[b] = total;
  }
  return total;
}

}  // namespace

const FamilyDef& Family(FamilyId id) { return kFamilies[static_cast<int>(id)]; }

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

void EmitBreakerSamples(const BreakerSnapshot& s, FamilySet families,
                        SampleSink* sink) {
  const absl::string_view dep = s.dependency;

  if (Has(families, FamilyId::kState)) {
    sink->AddSample(FamilyId::kState, {dep, ModeName(s.shadow)},
                    StateGaugeValue(s.state));
  }

  if (Has(families, FamilyId::kTransitions)) {
    for (const BreakerSnapshot::TransitionCount& t : s.transitions) {
      if (t.count == 0) continue;
      sink->AddCount(FamilyId::kTransitions,
                     {dep, StateName(t.from), StateName(t.to),
                      TransitionReasonName(t.reason)},
                     t.count);
    }
  }

  if (Has(families, FamilyId::kAcquires)) {
    for (int d = 0; d < kDecisionCount; ++d) {
      if (s.acquires[d] == 0) continue;
      sink->AddCount(FamilyId::kAcquires,
                     {dep, DecisionName(static_cast<Decision>(d))},
                     s.acquires[d]);
    }
  }

  if (Has(families, FamilyId::kReports)) {
    for (int c = 1; c < kOutcomeClassCount; ++c) {
      for (int e = 1; e < kEffectCount; ++e) {
        const uint64_t n = s.reports[c][e];
        if (n == 0) continue;
        sink->AddCount(FamilyId::kReports,
                       {dep, OutcomeClassName(static_cast<OutcomeClass>(c)),
                        EffectName(static_cast<Effect>(e))},
                       n);
      }
    }
  }

  if (Has(families, FamilyId::kFailureRate)) {
    sink->AddSample(FamilyId::kFailureRate, {dep}, s.failure_rate);
  }

  if (Has(families, FamilyId::kStateSeconds)) {
    for (State st : kAllStates) {
      const double seconds = s.state_seconds[static_cast<int>(st)];
      if (seconds <= 0) continue;
      sink->AddSample(FamilyId::kStateSeconds, {dep, StateName(st)}, seconds);
    }
  }

  if (Has(families, FamilyId::kCallDuration) && s.latency_count > 0) {
    std::array<uint64_t, kLatencyBuckets> cumulative;
    Accumulate(s.latency_buckets.data(), &cumulative);
    HistogramSample h;
    h.cumulative_counts = cumulative;
    h.count = s.latency_count;
    h.sum = s.latency_sum_seconds;
    sink->AddHistogram(FamilyId::kCallDuration, {dep}, h);
  }

  if (s.fleet_window_known) {
    if (Has(families, FamilyId::kFleetWindowCalls)) {
      sink->AddSample(FamilyId::kFleetWindowCalls, {dep},
                      static_cast<double>(s.fleet_window_calls));
    }
    if (Has(families, FamilyId::kFleetFailureRate)) {
      sink->AddSample(FamilyId::kFleetFailureRate, {dep},
                      s.fleet_window_calls == 0
                          ? 0
                          : static_cast<double>(s.fleet_window_failures) /
                                static_cast<double>(s.fleet_window_calls));
    }
  }
  if (Has(families, FamilyId::kFleetUnconfirmedOpens) &&
      s.fleet_unconfirmed_opens > 0) {
    sink->AddCount(FamilyId::kFleetUnconfirmedOpens, {dep},
                   s.fleet_unconfirmed_opens);
  }

  if (Has(families, FamilyId::kRetries)) {
    if (s.retries_granted > 0) {
      sink->AddCount(FamilyId::kRetries, {dep, "granted"}, s.retries_granted);
    }
    if (s.retries_rejected > 0) {
      sink->AddCount(FamilyId::kRetries, {dep, "rejected"}, s.retries_rejected);
    }
  }

  if (Has(families, FamilyId::kInflight)) {
    sink->AddCount(FamilyId::kInflight, {dep}, s.inflight);
  }
  if (Has(families, FamilyId::kHungCalls) && s.hung_calls > 0) {
    sink->AddCount(FamilyId::kHungCalls, {dep}, s.hung_calls);
  }
  if (Has(families, FamilyId::kAdmitShare)) {
    sink->AddSample(FamilyId::kAdmitShare, {dep}, s.admit_share);
  }

  if (Has(families, FamilyId::kOpenEpisodes)) {
    if (s.first_probe_succeeded > 0) {
      sink->AddCount(FamilyId::kOpenEpisodes, {dep, "succeeded"},
                     s.first_probe_succeeded);
    }
    if (s.first_probe_failed > 0) {
      sink->AddCount(FamilyId::kOpenEpisodes, {dep, "failed"},
                     s.first_probe_failed);
    }
  }
  if (Has(families, FamilyId::kOpenDuration)) {
    std::array<uint64_t, kOpenDurationBuckets> cumulative;
    const uint64_t finite =
        Accumulate(s.open_duration_buckets.data(), &cumulative);
    HistogramSample h;
    h.count = finite + s.open_duration_buckets[kOpenDurationBuckets];
    if (h.count > 0) {
      h.cumulative_counts = cumulative;
      h.sum = s.open_duration_sum_seconds;
      sink->AddHistogram(FamilyId::kOpenDuration, {dep}, h);
    }
  }
  if (Has(families, FamilyId::kPolicyThreshold)) {
    if (s.failure_rate_threshold > 0) {
      sink->AddSample(FamilyId::kPolicyThreshold, {dep, "failure_rate"},
                      s.failure_rate_threshold);
      sink->AddCount(FamilyId::kPolicyThreshold, {dep, "min_calls"},
                     s.failure_rate_min_calls);
    }
    if (s.slow_call_rate_threshold > 0) {
      sink->AddSample(FamilyId::kPolicyThreshold, {dep, "slow_call_rate"},
                      s.slow_call_rate_threshold);
    }
    if (s.consecutive_failures_threshold > 0) {
      sink->AddCount(FamilyId::kPolicyThreshold, {dep, "consecutive_failures"},
                     s.consecutive_failures_threshold);
    }
  }
  if (Has(families, FamilyId::kWindowCalls)) {
    sink->AddCount(FamilyId::kWindowCalls, {dep}, s.window.calls);
  }
  if (Has(families, FamilyId::kClientDecisions)) {
    const std::pair<absl::string_view, uint64_t> decisions[] = {
        {"refused_local", s.client_refused_local},
        {"fail_open", s.client_fail_open},
        {"fail_closed", s.client_fail_closed}};
    for (const auto& [decision, n] : decisions) {
      if (n > 0) sink->AddCount(FamilyId::kClientDecisions, {dep, decision}, n);
    }
  }
  if (Has(families, FamilyId::kStateAge) && s.state != State::kClosed) {
    sink->AddSample(FamilyId::kStateAge, {dep},
                    absl::ToDoubleSeconds(s.state_age));
  }
}

bool FamilyExported(FamilyId id, const ProcessStats& stats,
                    DependencyLabel label) {
  switch (id) {
    case FamilyId::kState:
    case FamilyId::kFailureRate:
    case FamilyId::kInflight:
    case FamilyId::kAdmitShare:
    case FamilyId::kPolicyThreshold:
    case FamilyId::kWindowCalls:
    case FamilyId::kStateAge:
      return label != DependencyLabel::kOmit;
    case FamilyId::kFleetWindowCalls:
    case FamilyId::kFleetFailureRate:
      return static_cast<bool>(stats.fleet_counters) &&
             label != DependencyLabel::kOmit;
    case FamilyId::kFleetUnconfirmedOpens:
      return static_cast<bool>(stats.fleet_counters);
    case FamilyId::kFleetConnected:
      return static_cast<bool>(stats.fleet_connected);
    case FamilyId::kFleetMembers:
      return static_cast<bool>(stats.fleet_members);
    case FamilyId::kFleetEvents:
      return static_cast<bool>(stats.fleet_counters);
    case FamilyId::kAdminAuthFailures:
      return static_cast<bool>(stats.admin_auth_failures);
    case FamilyId::kStateSaveFailures:
      return static_cast<bool>(stats.state_save_failures);
    default:
      return true;
  }
}

void EmitProcessSamples(const Registry& registry, const ProcessStats& stats,
                        size_t breakers, FamilySet families, SampleSink* sink) {
  if (Has(families, FamilyId::kBreakers)) {
    sink->AddCount(FamilyId::kBreakers, {}, breakers);
  }
  if (Has(families, FamilyId::kBuildInfo)) {
    sink->AddSample(FamilyId::kBuildInfo, {stats.version}, 1);
  }
  if (Has(families, FamilyId::kConfigReloads)) {
    sink->AddCount(FamilyId::kConfigReloads, {"success"},
                   Call(stats.reload_successes));
    sink->AddCount(FamilyId::kConfigReloads, {"failure"},
                   Call(stats.reload_failures));
  }
  if (Has(families, FamilyId::kConfigValid)) {
    sink->AddSample(FamilyId::kConfigValid, {},
                    !stats.config_valid || stats.config_valid() ? 1 : 0);
  }
  if (Has(families, FamilyId::kUnknownPermits)) {
    sink->AddCount(FamilyId::kUnknownPermits, {}, registry.unknown_permits());
  }
  if (Has(families, FamilyId::kAdminAuthFailures) &&
      stats.admin_auth_failures) {
    sink->AddCount(FamilyId::kAdminAuthFailures, {},
                   stats.admin_auth_failures());
  }
  if (Has(families, FamilyId::kStateSaveFailures) &&
      stats.state_save_failures) {
    sink->AddCount(FamilyId::kStateSaveFailures, {},
                   stats.state_save_failures());
  }
  if (Has(families, FamilyId::kFleetConnected) && stats.fleet_connected) {
    sink->AddSample(FamilyId::kFleetConnected, {},
                    stats.fleet_connected() ? 1 : 0);
  }
  if (Has(families, FamilyId::kFleetMembers) && stats.fleet_members) {
    sink->AddSample(FamilyId::kFleetMembers, {},
                    static_cast<double>(stats.fleet_members()));
  }
  if (Has(families, FamilyId::kFleetEvents) && stats.fleet_counters) {
    const FleetCounters c = stats.fleet_counters();
    const std::pair<const char*, uint64_t> events[] = {
        {"published", c.published},
        {"publish_failed", c.publish_failures},
        {"applied", c.applied},
        {"duplicate", c.duplicates},
        {"claim_won", c.claims_won},
        {"claim_lost", c.claims_lost},
        {"connected", c.connects},
        {"disconnected", c.disconnects},
        {"refused", c.refused},
        {"store_reset", c.store_resets},
        {"unknown_version", c.unknown_versions},
        {"window_sync", c.window_syncs},
        {"confirmed_open", c.confirmed_opens},
        {"stale_decision", c.stale_decisions}};
    for (const auto& [event, count] : events) {
      sink->AddCount(FamilyId::kFleetEvents, {event}, count);
    }
  }
  if (Has(families, FamilyId::kChainDecisions)) {
    registry.chains().ForEachDecision(
        [sink](absl::string_view chain, size_t tier, uint64_t n) {
          const std::string t =
              tier == ChainStats::kNoneTier ? "none" : std::to_string(tier);
          sink->AddCount(FamilyId::kChainDecisions, {chain, t}, n);
        });
  }
  if (Has(families, FamilyId::kChainOutcomes)) {
    registry.chains().ForEachOutcome([sink](absl::string_view chain,
                                            size_t tier, OutcomeClass c,
                                            uint64_t n) {
      sink->AddCount(FamilyId::kChainOutcomes,
                     {chain, std::to_string(tier), OutcomeClassName(c)}, n);
    });
  }
  if (Has(families, FamilyId::kAcquireFirstSkipped)) {
    sink->AddCount(FamilyId::kAcquireFirstSkipped, {"max_breakers"},
                   registry.acquire_first_skipped());
  }
  if (Has(families, FamilyId::kBatchOutcomes)) {
    const std::array<uint64_t, 3> batch = registry.batch_outcomes();
    sink->AddCount(FamilyId::kBatchOutcomes, {"counted"}, batch[0]);
    sink->AddCount(FamilyId::kBatchOutcomes, {"late"}, batch[1]);
    sink->AddCount(FamilyId::kBatchOutcomes, {"refused"}, batch[2]);
  }
  if (Has(families, FamilyId::kWatchStreams)) {
    sink->AddCount(FamilyId::kWatchStreams, {}, Call(stats.watch_streams));
  }
  const bool handled = Has(families, FamilyId::kGrpcHandled);
  const bool handling = Has(families, FamilyId::kGrpcHandlingSeconds);
  if ((handled || handling) && stats.rpc_methods) {
    for (const RpcMethodStats& m : stats.rpc_methods()) {
      if (handled) {
        for (int c = 0; c < kGrpcCodeCount; ++c) {
          if (c != 0 && m.handled[c] == 0) continue;
          sink->AddCount(FamilyId::kGrpcHandled, {m.method, GrpcCodeName(c)},
                         m.handled[c]);
        }
      }
      if (handling) {
        std::array<uint64_t, kRpcLatencyBuckets> cumulative;
        const uint64_t finite =
            Accumulate(m.latency_buckets.data(), &cumulative);
        HistogramSample h;
        h.cumulative_counts = cumulative;
        h.count = finite + m.latency_buckets[kRpcLatencyBuckets];
        h.sum = m.latency_sum_seconds;
        sink->AddHistogram(FamilyId::kGrpcHandlingSeconds, {m.method}, h);
      }
    }
  }
}

size_t EmitSamples(const Registry& registry, const ProcessStats& stats,
                   DependencyLabel label, SampleSink* sink) {
  FamilySet exported;
  for (int i = 0; i < kFamilyCount; ++i) {
    exported[i] = FamilyExported(static_cast<FamilyId>(i), stats, label);
  }
  size_t breakers = 0;
  if (label == DependencyLabel::kOmit) {
    BreakerSnapshot total;
    breakers = registry.SumCounters(&total);
    EmitBreakerSamples(total, exported, sink);
  } else {
    registry.ForEach([&](const BreakerSnapshot& s) {
      ++breakers;
      EmitBreakerSamples(s, exported, sink);
    });
  }
  EmitProcessSamples(registry, stats, breakers, exported, sink);
  return breakers;
}

absl::Span<const absl::string_view> DependencyLabeler::Names(
    FamilyId id) const {
  absl::Span<const absl::string_view> names = Family(id).labels;
  if (label_ == DependencyLabel::kOmit && PerBreakerFamily(id)) {
    names.remove_prefix(1);
  }
  return names;
}

absl::Span<const absl::string_view> DependencyLabeler::Values(
    FamilyId id, LabelValues values,
    std::array<absl::string_view, kMaxLabels>* scratch) {
  assert(values.size() <= kMaxLabels);
  std::copy(values.begin(), values.end(), scratch->begin());
  absl::Span<const absl::string_view> out(scratch->data(), values.size());
  if (!PerBreakerFamily(id) || label_ == DependencyLabel::kName) return out;
  if (label_ == DependencyLabel::kOmit) {
    out.remove_prefix(1);
    return out;
  }
  const absl::string_view name = (*scratch)[0];
  if (hash_.empty() || name != hashed_name_) {
    hashed_name_.assign(name.data(), name.size());
    hash_ = HashedDependencyLabel(name);
  }
  (*scratch)[0] = hash_;
  return out;
}

}  // namespace breakerd

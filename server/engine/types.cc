#include "server/engine/types.h"

#include <algorithm>

namespace breakerd {

const std::array<double, kLatencyBuckets> kLatencyBucketBounds = {
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120};

const std::array<double, kOpenDurationBuckets> kOpenDurationBucketBounds = {
    1, 5, 10, 30, 60, 120, 300, 600, 1800, 3600};

absl::string_view StateName(State s) {
  switch (s) {
    case State::kClosed:
      return "closed";
    case State::kOpen:
      return "open";
    case State::kHalfOpen:
      return "half_open";
    case State::kForcedOpen:
      return "forced_open";
    case State::kForcedClosed:
      return "forced_closed";
  }
  return "unknown";
}

absl::string_view DecisionName(Decision d) {
  switch (d) {
    case Decision::kAllowed:
      return "allowed";
    case Decision::kProbe:
      return "probe";
    case Decision::kRejectedOpen:
      return "rejected_open";
    case Decision::kRejectedProbeInFlight:
      return "rejected_probe_in_flight";
    case Decision::kRejectedRetryBudget:
      return "rejected_retry_budget";
    case Decision::kRejectedForcedOpen:
      return "rejected_forced_open";
    case Decision::kShadowRejectedOpen:
      return "shadow_rejected_open";
    case Decision::kShadowRejectedProbeInFlight:
      return "shadow_rejected_probe_in_flight";
    case Decision::kShadowRejectedRetryBudget:
      return "shadow_rejected_retry_budget";
    case Decision::kShadowRejectedForcedOpen:
      return "shadow_rejected_forced_open";
    case Decision::kRejectedRamp:
      return "rejected_ramp";
    case Decision::kShadowRejectedRamp:
      return "shadow_rejected_ramp";
    case Decision::kAllowedLocal:
      return "allowed_local";
  }
  return "unknown";
}

absl::string_view EffectName(Effect e) {
  switch (e) {
    case Effect::kCountedSuccess:
      return "counted_success";
    case Effect::kCountedFailure:
      return "counted_failure";
    case Effect::kNeutral:
      return "neutral";
    case Effect::kLate:
      return "late";
    case Effect::kDuplicate:
      return "duplicate";
  }
  return "unknown";
}

absl::string_view TransitionReasonName(TransitionReason r) {
  switch (r) {
    case TransitionReason::kConsecutiveFailures:
      return "consecutive_failures";
    case TransitionReason::kFailureRate:
      return "failure_rate";
    case TransitionReason::kSlowCallRate:
      return "slow_call_rate";
    case TransitionReason::kCooldownElapsed:
      return "cooldown_elapsed";
    case TransitionReason::kProbeSucceeded:
      return "probe_succeeded";
    case TransitionReason::kProbeFailed:
      return "probe_failed";
    case TransitionReason::kForcedOpen:
      return "forced_open";
    case TransitionReason::kForcedClosed:
      return "forced_closed";
    case TransitionReason::kReset:
      return "reset";
    case TransitionReason::kFleet:
      return "fleet";
    case TransitionReason::kRestored:
      return "restored";
    case TransitionReason::kFleetFailureRate:
      return "fleet_failure_rate";
    case TransitionReason::kFleetSlowCallRate:
      return "fleet_slow_call_rate";
    case TransitionReason::kRampFailed:
      return "ramp_failed";
    case TransitionReason::kHungCalls:
      return "hung_calls";
    case TransitionReason::kReload:
      return "reload";
    case TransitionReason::kCreated:
      return "created";
    case TransitionReason::kEvicted:
      return "evicted";
    case TransitionReason::kRampDone:
      return "ramp_done";
  }
  return "unknown";
}

void AddCounters(const BreakerSnapshot& from, BreakerSnapshot* into) {
  for (size_t d = 0; d < from.acquires.size(); ++d) {
    into->acquires[d] += from.acquires[d];
  }
  for (size_t c = 0; c < from.reports.size(); ++c) {
    for (size_t e = 0; e < from.reports[c].size(); ++e) {
      into->reports[c][e] += from.reports[c][e];
    }
  }
  into->retries_granted += from.retries_granted;
  into->retries_rejected += from.retries_rejected;
  for (const BreakerSnapshot::TransitionCount& t : from.transitions) {
    auto same = [&t](const BreakerSnapshot::TransitionCount& u) {
      return u.from == t.from && u.to == t.to && u.reason == t.reason;
    };
    auto it =
        std::find_if(into->transitions.begin(), into->transitions.end(), same);
    if (it == into->transitions.end()) {
      into->transitions.push_back(t);
    } else {
      it->count += t.count;
    }
  }
  for (size_t st = 0; st < from.state_seconds.size(); ++st) {
    into->state_seconds[st] += from.state_seconds[st];
  }
  for (size_t b = 0; b < from.latency_buckets.size(); ++b) {
    into->latency_buckets[b] += from.latency_buckets[b];
  }
  into->latency_sum_seconds += from.latency_sum_seconds;
  into->latency_count += from.latency_count;
  into->fleet_unconfirmed_opens += from.fleet_unconfirmed_opens;
  into->client_refused_local += from.client_refused_local;
  into->client_fail_open += from.client_fail_open;
  into->client_fail_closed += from.client_fail_closed;
  into->first_probe_succeeded += from.first_probe_succeeded;
  into->first_probe_failed += from.first_probe_failed;
  for (size_t b = 0; b < from.open_duration_buckets.size(); ++b) {
    into->open_duration_buckets[b] += from.open_duration_buckets[b];
  }
  into->open_duration_sum_seconds += from.open_duration_sum_seconds;
  into->hung_calls += from.hung_calls;
}

}  // namespace breakerd

// Value types shared by the engine's API: states, decisions, effects,
// transitions and snapshots. Enum values that cross the wire match the
// breakerd.v1 proto enums so the service layer can cast.
//
// Thread-safety: plain values.
#ifndef BREAKERD_SERVER_ENGINE_TYPES_H_
#define BREAKERD_SERVER_ENGINE_TYPES_H_

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "server/engine/outcome.h"

namespace breakerd {

// Matches breakerd.v1.State.
enum class State : uint8_t {
  kClosed = 1,
  kOpen = 2,
  kHalfOpen = 3,
  kForcedOpen = 4,
  kForcedClosed = 5,
};
inline constexpr int kStateCount = 6;  // index 0 unused

// Matches breakerd.v1.RejectReason.
enum class RejectReason : uint8_t {
  kNone = 0,
  kOpen = 1,
  kProbeInFlight = 2,
  kRetryBudget = 3,
  kForcedOpen = 4,
  // Gentle recovery: past the share the ramp admits now, or a retry while
  // ramping.
  kRamp = 5,
};

// Matches breakerd.v1.Effect.
enum class Effect : uint8_t {
  kCountedSuccess = 1,
  kCountedFailure = 2,
  kNeutral = 3,
  kLate = 4,
  // The permit was reported already (within the permit horizon): nothing
  // changes. Wins over kLate.
  kDuplicate = 5,
};
inline constexpr int kEffectCount = 6;  // index 0 unused

// The decision label of breakerd_acquire_total. In shadow mode a rejection
// is counted as kShadow* and the call is allowed.
enum class Decision : uint8_t {
  kAllowed,
  kProbe,
  kRejectedOpen,
  kRejectedProbeInFlight,
  kRejectedRetryBudget,
  kRejectedForcedOpen,
  kShadowRejectedOpen,
  kShadowRejectedProbeInFlight,
  kShadowRejectedRetryBudget,
  kShadowRejectedForcedOpen,
  kRejectedRamp,
  kShadowRejectedRamp,
  // A first attempt a Watch client granted itself (ReportBatch grants).
  kAllowedLocal,
};
inline constexpr int kDecisionCount = 13;

enum class TransitionReason : uint8_t {
  kConsecutiveFailures,
  kFailureRate,
  kSlowCallRate,
  kCooldownElapsed,
  kProbeSucceeded,
  kProbeFailed,
  kForcedOpen,
  kForcedClosed,
  kReset,
  // Applied from another sidecar of the fleet (fleet mode).
  kFleet,
  // Read back from the --state-file at start-up.
  kRestored,
  // Fleet mode: the failure-rate / slow-call-rate rule crossed on the
  // fleet's sums over the window (with failures from a quorum of sidecars).
  kFleetFailureRate,
  kFleetSlowCallRate,
  // A trip while gentle recovery was ramping: reopened at the next
  // escalation level.
  kRampFailed,
  // The hung calls just counted (inflight.hang_after) are what tipped the
  // failure-rate or slow-call-rate rule.
  kHungCalls,
  // Not a state change: a reload changed the breaker's mode (enforce /
  // shadow). The event carries from == to and the current generation, so
  // Watch clients learn the new mode; it is not counted as a transition and
  // the fleet does not publish it.
  kReload,
  // Not state changes either, for Watch clients that decide locally
  // (DESIGN.md "Local decisions"): the breaker was created (at the
  // generation it starts at), evicted (forget it), or its recovery ramp
  // ended (local decisions are possible again). Like kReload: from == to,
  // not counted, not logged as transitions, not published to the fleet.
  kCreated,
  kEvicted,
  kRampDone,
};

// False for the events that are not state changes (kReload, kCreated,
// kEvicted, kRampDone): observers that act on state changes skip them.
inline constexpr bool IsStateChange(TransitionReason r) {
  return r != TransitionReason::kReload && r != TransitionReason::kCreated &&
         r != TransitionReason::kEvicted && r != TransitionReason::kRampDone;
}

// Stable lower_snake_case names, used in metric labels, logs and the wire.
absl::string_view StateName(State s);
absl::string_view DecisionName(Decision d);
absl::string_view EffectName(Effect e);
absl::string_view TransitionReasonName(TransitionReason r);

struct AcquireResult {
  bool allowed = false;
  // Nonzero exactly when allowed.
  uint64_t permit = 0;
  bool probe = false;
  State state = State::kClosed;
  // Why it was rejected (in shadow mode: why it would have been).
  RejectReason reason = RejectReason::kNone;
  // When rejected: time until trying again is useful (cooldown or lease
  // left); zero when unknown or not rejected.
  absl::Duration retry_after = absl::ZeroDuration();
};

struct ReportResult {
  State state = State::kClosed;
  Effect effect = Effect::kNeutral;
};

// The counted outcomes in a breaker's sliding window.
struct WindowCounts {
  uint64_t calls = 0;
  uint64_t failures = 0;
  uint64_t slow = 0;
};

struct Transition {
  std::string dependency;
  State from = State::kClosed;
  State to = State::kClosed;
  TransitionReason reason = TransitionReason::kReset;
  uint64_t generation = 0;
  // For `to` == kOpen: the cooldown that starts now.
  absl::Duration retry_after = absl::ZeroDuration();
  uint32_t escalation_level = 0;
  uint32_t consecutive_failures = 0;
  WindowCounts window;
  // True when the change was decided elsewhere (another sidecar of the
  // fleet, or a state file) and applied here: fleet sync does not publish
  // it again.
  bool external = false;
  // The breaker's policy is in shadow mode: it never refuses a call, so no
  // client refuses it locally and the fleet never enforces its opens.
  bool shadow = false;
  // Fleet mode: the open period this transition belongs to is this
  // sidecar's alone: a local trip the fleet has not confirmed (yet), or one
  // made while the fleet's store was away. It is never published, its probe
  // is local, and so is the close that ends it.
  bool fleet_local = false;
  // Applied from elsewhere (external): ExternalState::decided_unix_ms.
  int64_t decided_unix_ms = 0;
  // After this event a Watch client may decide first attempts itself:
  // closed, not forced, not in shadow mode, not ramping, and the policy's
  // local_decisions on (StateChange.local_decisions).
  bool local_decisions = false;
};

// Fleet mode: the fleet's sums over one breaker's window (Redis time
// buckets of the policy's window), and what they were built from.
struct FleetWindow {
  uint64_t calls = 0;
  uint64_t failures = 0;
  uint64_t slow = 0;
  // Distinct sidecars that contributed failures or slow calls to it.
  uint64_t sources = 0;
  // Distinct sidecars that tripped the dependency locally within it.
  uint64_t trips = 0;
};

// Fleet mode: a breaker's counted outcomes gained since the fleet last took
// them (FleetSync flushes them to the fleet's window).
struct FleetDelta {
  std::string dependency;
  WindowCounts gained;
  // The policy's window, whose buckets the fleet keeps (width = window /
  // kFleetWindowBuckets).
  absl::Duration window = absl::ZeroDuration();
  // True if the breaker tripped locally and waits for the fleet to confirm.
  bool tripped = false;
};
inline constexpr int kFleetWindowBuckets = 10;

// What a breaker did with the fleet's window (Registry::ApplyFleetWindow).
struct FleetWindowEffect {
  // Its unconfirmed local open is now confirmed: publish it (open for
  // `open_remaining` more, at `escalation_level`).
  bool publish_open = false;
  absl::Duration open_remaining = absl::ZeroDuration();
  uint32_t escalation_level = 0;
};

// A state decided outside this breaker (by the fleet or a state file), to
// apply to it.
struct ExternalState {
  enum class Kind : uint8_t {
    kOpen,
    kClosed,
    kForcedOpen,
    kForcedClosed,
    kReset
  };
  Kind kind = Kind::kOpen;
  // kOpen: the time left in the cooldown (zero or less: half-open now).
  absl::Duration open_remaining = absl::ZeroDuration();
  // kOpen: the escalation level to take (cooldown doublings so far).
  uint32_t escalation_level = 0;
  // An operator's decision (forced states, reset): when it was made, by the
  // fleet's clock (Unix ms); 0 if unknown. Carried to the transition.
  int64_t decided_unix_ms = 0;
};

// Number of finite buckets of the call-latency histogram.
inline constexpr int kLatencyBuckets = 14;
// Their upper bounds, in seconds.
extern const std::array<double, kLatencyBuckets> kLatencyBucketBounds;

// Number of finite buckets of the open-duration histogram (from an open
// entered from closed to the close), and their upper bounds in seconds.
inline constexpr int kOpenDurationBuckets = 10;
extern const std::array<double, kOpenDurationBuckets> kOpenDurationBucketBounds;

// Everything known about one breaker at one instant: the status served by
// GetState and the counters served by /metrics, read under the same lock.
struct BreakerSnapshot {
  std::string dependency;
  State state = State::kClosed;
  uint64_t generation = 0;
  absl::Duration retry_after = absl::ZeroDuration();
  WindowCounts window;
  double failure_rate = 0;  // window.failures / window.calls, 0 if no calls
  uint32_t consecutive_failures = 0;
  uint32_t escalation_level = 0;
  std::string policy;  // the policy's match, or "defaults"
  bool shadow = false;
  bool probe_in_flight = false;
  // As Transition::local_decisions, now.
  bool local_decisions = false;
  // The policy's thresholds (0: the rule is off).
  double failure_rate_threshold = 0;
  uint32_t failure_rate_min_calls = 0;
  double slow_call_rate_threshold = 0;
  uint32_t consecutive_failures_threshold = 0;
  // How long the breaker has been in its current state.
  absl::Duration state_age = absl::ZeroDuration();
  // Fleet mode: the fleet's window as last read (zero once older than the
  // window), and whether one was ever read for this breaker.
  bool fleet_window_known = false;
  uint64_t fleet_window_calls = 0;
  uint64_t fleet_window_failures = 0;

  // Monotonic counters since the breaker was created.
  std::array<uint64_t, kDecisionCount> acquires{};
  // reports[class][effect]
  std::array<std::array<uint64_t, kEffectCount>, kOutcomeClassCount> reports{};
  uint64_t retries_granted = 0;
  uint64_t retries_rejected = 0;
  struct TransitionCount {
    State from;
    State to;
    TransitionReason reason;
    uint64_t count;
  };
  std::vector<TransitionCount> transitions;
  // Seconds spent in each state (indexed by State), including the current
  // stretch up to the snapshot.
  std::array<double, kStateCount> state_seconds{};
  // Reported latency: cumulative bucket counts are computed by the reader.
  std::array<uint64_t, kLatencyBuckets + 1> latency_buckets{};  // last: +Inf
  double latency_sum_seconds = 0;
  uint64_t latency_count = 0;
  // Fleet mode: local open episodes that ended never confirmed by the fleet.
  uint64_t fleet_unconfirmed_opens = 0;
  // Decisions clients made without the sidecar (ReportBatch's
  // ClientDecisions): local refusals, fail-open, fail-closed.
  uint64_t client_refused_local = 0;
  uint64_t client_fail_open = 0;
  uint64_t client_fail_closed = 0;
  // Open episodes (an open entered from closed) by how their first probe
  // ended (the false-positive signal: a first probe that succeeded).
  uint64_t first_probe_succeeded = 0;
  uint64_t first_probe_failed = 0;
  // Episodes that ended in a close, by duration from the open: per-bucket
  // counts (last: +Inf) and the sum.
  std::array<uint64_t, kOpenDurationBuckets + 1> open_duration_buckets{};
  double open_duration_sum_seconds = 0;
  // Permits out: within the permit horizon, or (inflight.hang_after on)
  // waiting to be counted as hung at the next Acquire or Report; not
  // reported, not counted as hung.
  uint64_t inflight = 0;
  // Permits counted as hung (inflight.hang_after), since the breaker was
  // created (monotonic).
  uint64_t hung_calls = 0;
  // Gentle recovery: the share of first attempts admitted now; 1 when not
  // ramping.
  double admit_share = 1;
};

// Adds the monotonic counters of `from` to `into`: acquires, reports,
// retries, transitions (merged by from, to and reason), state seconds, the
// latency histogram and the fleet's unconfirmed opens. Nothing else of `into`
// changes. A total over many breakers built this way (Registry::SumCounters)
// never goes down while breakers are added, counted or evicted.
void AddCounters(const BreakerSnapshot& from, BreakerSnapshot* into);

}  // namespace breakerd

#endif  // BREAKERD_SERVER_ENGINE_TYPES_H_

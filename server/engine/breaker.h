// One circuit breaker: the state machine of DESIGN.md for one dependency.
//
// Stored state is only CLOSED or OPEN(opened_at, cooldown), plus an optional
// operator override. HALF_OPEN is derived: OPEN with now >= opened_at +
// cooldown. Nothing moves a breaker but Acquire, Report and the admin calls;
// there is no timer.
//
// Thread-safety: NOT thread-safe. A Breaker is owned by the Registry, which
// serializes every call on it under the lock of the shard that holds it (one
// lock per operation instead of two keeps the hot path at two atomic
// instructions). Standalone use (tests) must be single-threaded.
#ifndef BREAKERD_SERVER_ENGINE_BREAKER_H_
#define BREAKERD_SERVER_ENGINE_BREAKER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "server/engine/bucket_ring.h"
#include "server/engine/clock.h"
#include "server/engine/outcome.h"
#include "server/engine/permit_ledger.h"
#include "server/engine/policy.h"
#include "server/engine/types.h"

namespace breakerd {

// Source of jitter: returns a uniform value in [0, 1). Must be thread-safe.
using UniformSource = double (*)();
// The default: a thread-local pseudo-random generator.
double DefaultUniform();

// Decides, in fleet mode, which sidecar may send the half-open probe. The
// engine asks; the answer comes back later through Breaker::SetProbeClaim
// (Registry::SetProbeClaim), so no Acquire ever waits on the fleet.
// REQUIRES of implementations: thread-safe; both methods quick and
// non-blocking (they run under a shard lock); never call the Registry.
class ProbeArbiter {
 public:
  virtual ~ProbeArbiter() = default;
  // True while probes must be claimed fleet-wide; false (fleet store down)
  // means every breaker probes on its own, as without a fleet.
  virtual bool Active() const = 0;
  // Asks for the fleet-wide probe of `dependency` for its open period
  // `generation`, held for `lease`.
  virtual void RequestClaim(absl::string_view dependency, uint64_t generation,
                            absl::Duration lease) = 0;
  // The fleet's live members (this sidecar included), 0 if unknown: a
  // quorum is never more than this.
  virtual uint64_t Members() const { return 0; }
};

// What every breaker of a Registry shares, kept once (breakers hold a
// pointer: at 100k breakers every byte of a Breaker counts).
struct BreakerContext {
  const Clock* clock = nullptr;
  // Keys the permit check; a per-process random value.
  uint64_t permit_secret = 0;
  UniformSource uniform = &DefaultUniform;
  // Fleet mode's probe arbiter; null without a fleet. Set before serving.
  ProbeArbiter* arbiter = nullptr;
};

// One report's facts after classification.
struct ReportInput {
  OutcomeClass outcome = OutcomeClass::kSuccess;
  // Zero when the client did not measure it.
  absl::Duration latency = absl::ZeroDuration();
  // The upstream's Retry-After hint; zero if none.
  absl::Duration retry_after = absl::ZeroDuration();
};

class Breaker {
 public:
  // REQUIRES: `context` (and its clock) outlives the breaker; `policy` is
  // non-null. `generation`: where the generation starts (the Registry
  // starts a re-created breaker above every evicted one, so generations seen
  // by a Watch client never go back).
  Breaker(std::string dependency, std::shared_ptr<const Policy> policy,
          const BreakerContext* context, uint64_t generation = 0);

  Breaker(const Breaker&) = delete;
  Breaker& operator=(const Breaker&) = delete;

  const std::string& dependency() const { return dependency_; }

  // Decides whether a call may go. attempt 0 is a first try, > 0 a retry
  // (spends the retry budget; never allowed unless closed). If the decision
  // moved the breaker (open -> half-open), *transition is set.
  AcquireResult Acquire(uint32_t attempt,
                        std::optional<Transition>* transition);

  // Records the outcome of a call made under `permit`. Returns
  // INVALID_ARGUMENT, changing nothing, if this breaker never issued
  // `permit`; Effect::kDuplicate, changing nothing, if the permit was
  // reported already (within the permit horizon). If the report moved the
  // breaker, *transition is set.
  absl::StatusOr<ReportResult> Report(uint64_t permit, const ReportInput& in,
                                      std::optional<Transition>* transition);

  // What ApplyLocal did with a batch's outcomes.
  struct LocalCounts {
    uint32_t counted = 0;
    uint32_t late = 0;
    uint32_t refused = 0;
  };
  // A Watch client's batch for this breaker (ReportBatch): `grants` first
  // attempts it granted itself while it held `generation` closed, and the
  // outcomes of such calls. Grants count as decisions (allowed_local) and
  // retry-budget deposits; in the current generation, while closed, they
  // add to the generation's grant ledger (cumulative across batches).
  // Outcomes of the current generation are applied as Reports of closed
  // permits are (windows, trip rules) while the ledger holds grants they
  // have not used, and refused beyond them (changing nothing: a batch
  // cannot invent calls); outcomes of an older generation are late; of a
  // newer one, refused. If an outcome moves the breaker, *transition is set
  // and the rest are late.
  LocalCounts ApplyLocal(uint64_t generation, uint32_t grants,
                         absl::Span<const ReportInput> outcomes,
                         std::optional<Transition>* transition);
  // Decisions a client made without the sidecar, counted
  // (breakerd_client_decisions_total).
  void CountClientDecisions(uint32_t refused_local, uint32_t fail_open,
                            uint32_t fail_closed);

  // Operator overrides. Each bumps the generation and returns the transition.
  Transition ForceOpen();
  Transition ForceClose();
  // Back to plain closed: override, window, counts and escalation cleared.
  Transition Reset();

  // Applies a state decided elsewhere (the fleet, a state file), with
  // `reason` for kOpen and kClosed (forced states and reset keep theirs).
  // kOpen opens (or re-times the open period) with the given time left and
  // escalation, leaving an operator override in place; kClosed closes an
  // open breaker as a probe success would. Returns the transition, marked
  // external, or nullopt if nothing visible changed.
  std::optional<Transition> ApplyExternal(const ExternalState& state,
                                          TransitionReason reason);

  // The fleet's answer to ProbeArbiter::RequestClaim for `generation`: this
  // sidecar holds the fleet-wide probe (`won`) or another one does, for
  // `lease` from now. Ignored if the breaker has moved on since.
  void SetProbeClaim(uint64_t generation, bool won, absl::Duration lease);

  // Applies a new policy in place: state, counters, escalation, generation
  // and the running cooldown survive. Returns an event with reason kReload
  // (from == to, generation unchanged) when the mode changed, so watchers
  // learn it; else nullopt. REQUIRES: policy non-null.
  std::optional<Transition> SetPolicy(std::shared_ptr<const Policy> policy);

  // Fleet mode. True once each time outcomes are counted while none were
  // waiting for the fleet: the Registry then queues this breaker for the
  // fleet thread, which takes them with TakeFleetDelta.
  bool QueueForFleet();
  // The counted outcomes gained since the last take (and whether a local
  // trip waits for the fleet's confirmation), cleared.
  FleetDelta TakeFleetDelta();
  // The fleet's sums over this breaker's window: kept for status; with
  // fleet.share_window, a closed breaker opens (kFleetFailureRate /
  // kFleetSlowCallRate) when a rule crosses on them with failures from a
  // quorum of sidecars (fleet.quorum, at most `members`), and an
  // unconfirmed local open is confirmed by that or by a quorum of trips.
  // Returns the transition, if any, through *transition.
  FleetWindowEffect ApplyFleetWindow(const FleetWindow& window,
                                     uint64_t members,
                                     std::optional<Transition>* transition);
  BreakerSnapshot Snapshot() const;
  State CurrentState() const;
  uint64_t generation() const { return generation_; }

  // True if the breaker holds nothing worth keeping: closed without
  // override, not ramping, no counted outcome in the window, no failure
  // streak, no escalation, no permit out within the permit horizon, and no
  // Acquire or Report for at least `idle_ttl`.
  bool IsIdle(absl::Duration idle_ttl) const;

  // Frees what the permit ledger no longer needs (all of it once every
  // permit is past the horizon), and ends a recovery ramp that has run its
  // course (clearing its escalation, as the next Acquire would). Moves
  // nothing: hung calls are counted only by Acquire and Report. For the
  // Registry's eviction pass. Returns true if the ledger was freed; a ramp
  // it ended is told in *ramp_done (kRampDone), if given.
  bool ReleaseIdleMemory(std::optional<Transition>* ramp_done = nullptr);

  // An event that is not a state change (kCreated, kEvicted), for Watch
  // clients: the breaker as it is now, from == to.
  Transition Notice(TransitionReason reason) const;

 private:
  enum class Override : uint8_t { kNone, kForcedOpen, kForcedClosed };
  // Fleet mode: where the fleet-wide probe of this half-open period is.
  enum class Claim : uint8_t { kNone, kPending, kHeld, kElsewhere };
  // Fleet mode: whether the fleet stands behind the open period: kLocal
  // began while the store was away (never published, never counted).
  enum class Episode : uint8_t { kNone, kUnconfirmed, kConfirmed, kLocal };
  bool LocalEpisode() const {
    return episode_ == Episode::kUnconfirmed || episode_ == Episode::kLocal;
  }
  enum Counter { kCalls = 0, kFailures = 1, kSlow = 2 };
  enum BudgetCounter { kFirsts = 0, kRetries = 1 };

  // The clock read once per operation (Clock nanoseconds).
  struct Instant {
    int64_t ns;
  };
  Instant NowInstant() const { return Instant{context_->clock->NowNanos()}; }

  Transition Force(Override to);
  State DerivedState(Instant now) const;
  // Fleet mode, half-open with no probe out: true if this sidecar may send
  // the probe; else fills r (PROBE_IN_FLIGHT) and asks for the claim if
  // nobody has yet.
  bool FleetAllowsProbe(Instant now, AcquireResult* r);
  uint64_t MakePermit(bool probe, uint32_t seq) const;
  // Numbers a new permit, records it in the ledger and returns it.
  uint64_t IssuePermit(Instant now, bool probe);
  // The permit horizon and the ledger's bucket width, in nanoseconds.
  int64_t HorizonNs() const;
  // Counts hung permits (a trip they cause goes to *transition) and drops
  // what the ledger no longer needs. REQUIRES: ledger_ non-null.
  void TendLedger(Instant now, std::optional<Transition>* transition);
  // At the start of every Acquire, Report and batch: TendLedger and
  // TendLocal when either is due (a trip they cause goes to *transition).
  void TendIfDue(Instant now, std::optional<Transition>* transition);
  // Permits out at `now` (BreakerSnapshot::inflight).
  uint64_t InflightAt(Instant now) const;
  // When the ledger next needs TendLedger.
  int64_t LedgerDue(Instant now) const;
  // True while the permits of the current generation count toward the
  // window (closed or forced closed).
  bool Counting(State s) const {
    return s == State::kClosed || s == State::kForcedClosed;
  }
  // Gentle recovery: the share of first attempts admitted at `now` (1 when
  // not ramping); whether the ramp runs.
  double RampShare(Instant now) const;
  bool Ramping(Instant now) const { return RampShare(now) < 1; }
  // Admits or refuses a call in a closed breaker that is ramping; ends the
  // ramp (clearing the escalation) once it is complete, telling Watch
  // clients (kRampDone in *transition, if it holds nothing else).
  bool RampAdmits(Instant now, bool retry,
                  std::optional<Transition>* transition);
  // Ends a ramp whose time is over (clearing its escalation), wherever the
  // next call finds it: an Acquire, a trip, an override, the eviction pass.
  // Returns true if it ended one.
  bool EndCompletedRamp(Instant now);
  // Whether a Watch client may decide first attempts itself once the
  // breaker is in `state` (Transition::local_decisions).
  bool LocalDecisions(Instant now, State state) const;
  bool PermitIsOurs(uint64_t permit) const;
  // Adds a reported latency to the histogram (none for zero).
  void ObserveLatency(absl::Duration latency);
  // How a reported outcome counts: its verdict, whether it was slow, and
  // the effect a counted one has.
  struct Counted {
    Verdict verdict;
    bool slow;
    Effect effect;
  };
  Counted Count(const ReportInput& in) const;
  // Keys this breaker's permits: unique among live breakers.
  uint64_t Identity() const;
  // Recomputes the bucket widths from policy_.
  void CacheWidths();
  int64_t WindowWidth() const { return int64_t{window_width_us_} * 1000; }
  int64_t BudgetWidth() const { return int64_t{budget_width_us_} * 1000; }
  WindowCounts Window(Instant now) const;
  bool RetryAllowed(Instant now) const;
  absl::Duration NextCooldown(absl::Duration hint) const;

  // The effective fleet quorum: fleet.quorum, at most the live members.
  uint64_t FleetQuorum(uint64_t members) const;
  // The rule the fleet's window crosses, if any.
  std::optional<TransitionReason> FleetRule(const FleetWindow& w,
                                            uint64_t members) const;

  // Counts a closed-state outcome; returns the trip reason if a rule fires.
  std::optional<TransitionReason> RecordClosed(Instant now, Verdict verdict,
                                               bool slow, bool may_trip);
  // RecordClosed, then opens the breaker from `before` if a rule fired and
  // no transition is pending in *transition.
  void RecordClosedAndMaybeOpen(Instant now, State before, Verdict verdict,
                                bool slow, bool may_trip,
                                absl::Duration retry_after,
                                std::optional<Transition>* transition);
  // The window's rate rule that fires at `now`, if any.
  std::optional<TransitionReason> RateRule(Instant now) const;

  // The event for a change to `to` at the current generation.
  Transition Event(Instant now, State from, State to,
                   TransitionReason reason) const;
  // State changes. Each credits the time spent in the old state, bumps the
  // generation, counts the transition and fills the event.
  Transition MoveTo(Instant now, State from, State to, TransitionReason reason);
  Transition Open(Instant now, State from, TransitionReason reason,
                  absl::Duration retry_after_hint);
  Transition Close(Instant now, State from, TransitionReason reason);
  void ClearHistory();

  // Adds the time from state_entered_ to `now` to `seconds`, split between
  // open and half-open at the end of the cooldown.
  void CreditStateTime(Instant now,
                       std::array<double, kStateCount>* seconds) const;

  void CountTransition(State from, State to, TransitionReason reason);

  // Constant after construction.
  const std::string dependency_;
  const BreakerContext* const context_;

  // Everything below is serialized by the owner (see the class comment).
  std::shared_ptr<const Policy> policy_;

  // The state machine.
  bool open_ = false;
  Override override_ = Override::kNone;
  // Set once the open -> half-open transition has been recorded for the
  // current open period (half-open itself is derived, not stored).
  bool half_open_seen_ = false;
  // Fleet mode: the probe claim, valid until claim_until_ns_ (for kPending:
  // when to ask again if no answer came).
  Claim claim_ = Claim::kNone;
  Episode episode_ = Episode::kNone;
  // Outcomes counted since the fleet last took them wait in fleet_gained_;
  // fleet_queued_: the Registry has this breaker in its queue.
  bool fleet_queued_ = false;
  // A hash of dependency_, mixed into permit tags (fills what would be
  // padding; set once in the constructor).
  uint32_t name_hash_ = 0;
  // When the running cooldown ends (Clock nanoseconds); meaningful when
  // open_. Only the end is stored: open_until - now is all any rule needs.
  int64_t open_until_ns_ = 0;
  uint64_t generation_ = 0;
  uint32_t escalation_ = 0;
  uint32_t consecutive_failures_ = 0;
  // The permit of the probe out, 0 if none; its lease ends at probe_until_.
  uint64_t probe_permit_ = 0;
  int64_t probe_until_ns_ = 0;
  int64_t claim_until_ns_ = 0;
  int64_t last_activity_ns_ = 0;
  // Fleet mode: the outcomes waiting for the fleet (by Counter), and
  // whether a local trip waits to be told to it.
  std::array<uint32_t, 3> fleet_gained_{};
  bool fleet_trip_pending_ = false;
  // The fleet's window as last read, and when (Clock nanoseconds; 0: never).
  uint32_t fleet_window_calls_ = 0;
  uint32_t fleet_window_failures_ = 0;
  int64_t fleet_window_at_ns_ = 0;
  uint32_t fleet_unconfirmed_opens_ = 0;

  // Bucket widths in microseconds, derived from policy_ (CacheWidths).
  uint32_t window_width_us_ = 1;
  uint32_t budget_width_us_ = 1;
  BucketRing<3> window_;
  BucketRing<2> budget_;
  // Probe successes in a row in the current half-open period.
  uint32_t probe_successes_ = 0;

  // Permits: numbered in issue order (the low PermitLedger::kSeqBits go
  // into the permit); generation_first_seq_ is the number of the current
  // generation's first. The ledger exists only while permits are within
  // the horizon.
  uint32_t next_seq_ = 0;
  uint32_t generation_first_seq_ = 0;
  std::unique_ptr<PermitLedger> ledger_;

  // Gentle recovery: when the running ramp began (0: none), and the
  // admission credit of first attempts (RampAdmits), in millionths.
  static constexpr uint32_t kRampCreditUnit = 1000000;
  int64_t ramp_start_ns_ = 0;
  uint32_t ramp_credit_ = 0;

  // Metrics, read at scrape time through Snapshot().
  int64_t state_entered_ns_ = 0;
  std::array<double, kStateCount> state_seconds_{};
  // Acquires decided kAllowed and kProbe; the rejections, rarer, are in
  // Rare.
  std::array<uint64_t, 2> acquires_{};
  // Counted report counts, only for the effect each class has (see
  // ReportSlot in breaker.cc); Snapshot() spreads them over the effects.
  std::array<uint64_t, kOutcomeClassCount> reports_{};
  uint64_t retries_granted_ = 0;
  uint64_t retries_rejected_ = 0;
  // Counters most breakers never need, allocated at first use: a breaker
  // that never moves, never refuses and never sees a late or repeated
  // report costs a pointer.
  struct Rare {
    std::vector<BreakerSnapshot::TransitionCount> transitions;
    // Acquires by decision, from kRejectedOpen on.
    std::array<uint64_t, kDecisionCount - 2> rejections{};
    // Late and duplicate reports, by outcome class.
    std::array<uint64_t, kOutcomeClassCount> late{};
    std::array<uint64_t, kOutcomeClassCount> duplicates{};
    uint64_t hung_calls = 0;
    // The open episode (an open entered from closed) under way: when it
    // opened (0: none), and whether its first probe has yet to report.
    int64_t episode_start_ns = 0;
    bool first_probe_pending = false;
    uint64_t first_probe_succeeded = 0;
    uint64_t first_probe_failed = 0;
    // The grant ledger of local decisions: the generation it is for, the
    // grants batches declared in it and the outcomes applied against them.
    uint64_t local_generation = 0;
    uint64_t local_grants = 0;
    uint64_t local_outcomes = 0;
    // With inflight.hang_after on: the generation's grants without an
    // outcome, by bucket of horizon/16, oldest first (AddLocalGrants), and
    // when the oldest open one will count as hung (0: none).
    struct LocalBucket {
      int64_t start_ns;
      int64_t newest_ns;
      uint32_t open;
      uint32_t hung;
      int64_t hung_at_ns;
    };
    std::vector<LocalBucket> local_buckets;
    int64_t local_due_ns = 0;
    uint64_t client_refused_local = 0;
    uint64_t client_fail_open = 0;
    uint64_t client_fail_closed = 0;
    // Episodes closed, by duration (kOpenDurationBucketBounds; last: +Inf).
    std::array<uint64_t, kOpenDurationBuckets + 1> open_duration{};
    double open_duration_sum_seconds = 0;
  };
  Rare& rare();
  static constexpr size_t kMaxLocalBuckets = 64;
  // The hung-call rule for grants made in clients (ReportBatch): grants
  // join the ledger's newest bucket; each outcome takes one from the oldest
  // (replacing a hung count first); TendLocal counts the grants of a bucket
  // whose newest is hang_after old as hung. LocalOpen: grants of the
  // current generation without an outcome, not counted as hung.
  void AddLocalGrants(Instant now, uint32_t grants);
  void ConsumeLocalGrant();
  void TendLocal(Instant now, std::optional<Transition>* transition);
  uint64_t LocalOpen() const;
  // Counts `hung` calls as slow failures in the window (never toward the
  // failure streak) and trips a closed breaker if a rate rule is crossed
  // (reason hung_calls), unless *transition holds one already.
  void CountHungCalls(Instant now, State state, uint64_t hung,
                      std::optional<Transition>* transition);
  // Open episodes: one starts at an open entered from closed, its first
  // probe's verdict is counted once, and a close ends it (observing its
  // duration).
  void StartEpisode(Instant now);
  void CountFirstProbe(Verdict verdict);
  void EndEpisode(Instant now);
  std::unique_ptr<Rare> rare_;
  // The reported-latency histogram, allocated at the first report that
  // carries a latency.
  struct Latency {
    std::array<uint64_t, kLatencyBuckets + 1> buckets{};
    double sum_seconds = 0;
  };
  std::unique_ptr<Latency> latency_;
};

}  // namespace breakerd

#endif  // BREAKERD_SERVER_ENGINE_BREAKER_H_

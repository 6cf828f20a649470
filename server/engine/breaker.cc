#include "server/engine/breaker.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <utility>

#include "absl/random/random.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "server/engine/name_hash.h"

namespace breakerd {
namespace {

constexpr int kWindowBuckets = 10;
constexpr uint64_t kGenerationMask = 0xFFFFFF;  // 24 bits carried in a permit

// A 64-bit mixer (the splitmix64 finalizer): fast and well distributed; the
// permit tag only has to tell our permits from garbage and stale ones.
uint64_t Mix(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

// Permit layout: [tag:32][generation:24][probe seq:7][probe:1]. The tag is
// a keyed hash of the payload, the breaker's identity (its address and a
// hash of its name) and the process secret, so
// a permit from another process, another breaker or random bytes fails the
// check (with probability 1 - 2^-31), without storing any permit.
uint32_t Tag(uint64_t secret, uint64_t identity, uint32_t payload) {
  return static_cast<uint32_t>(
             Mix(secret ^ identity ^ (payload * 0x9e3779b97f4a7c15ULL)) >> 32) |
         1u;  // never zero, so a permit is never zero
}

Decision ShadowOf(Decision d) {
  switch (d) {
    case Decision::kRejectedOpen:
      return Decision::kShadowRejectedOpen;
    case Decision::kRejectedProbeInFlight:
      return Decision::kShadowRejectedProbeInFlight;
    case Decision::kRejectedRetryBudget:
      return Decision::kShadowRejectedRetryBudget;
    case Decision::kRejectedForcedOpen:
      return Decision::kShadowRejectedForcedOpen;
    default:
      return d;
  }
}

Decision RejectionDecision(RejectReason r) {
  switch (r) {
    case RejectReason::kProbeInFlight:
      return Decision::kRejectedProbeInFlight;
    case RejectReason::kRetryBudget:
      return Decision::kRejectedRetryBudget;
    case RejectReason::kForcedOpen:
      return Decision::kRejectedForcedOpen;
    default:
      return Decision::kRejectedOpen;
  }
}

// reports_ keeps, per class, only the effects the class can have: its
// verdict's effect under rate_limited "count" (slot 2 * (class - 1)) and
// late (the next slot); rate limited, which "ignore" makes neutral, has one
// more slot at the end.
constexpr int kRateLimitedNeutralSlot = 2 * (kOutcomeClassCount - 1);

Effect NaturalEffect(OutcomeClass c) {
  switch (VerdictFor(c, RateLimitedHandling::kCount)) {
    case Verdict::kSuccess:
      return Effect::kCountedSuccess;
    case Verdict::kFailure:
      return Effect::kCountedFailure;
    case Verdict::kNeutral:
      break;
  }
  return Effect::kNeutral;
}

int ReportSlot(OutcomeClass c, Effect e) {
  const int base = 2 * (static_cast<int>(c) - 1);
  if (e == Effect::kLate) return base + 1;
  if (c == OutcomeClass::kRateLimited && e == Effect::kNeutral) {
    return kRateLimitedNeutralSlot;
  }
  // Every other class has exactly one effect besides late.
  assert(e == NaturalEffect(c));
  return base;
}

}  // namespace

double DefaultUniform() {
  thread_local absl::InsecureBitGen gen;
  return absl::Uniform<double>(gen, 0.0, 1.0);
}

Breaker::Breaker(std::string dependency, std::shared_ptr<const Policy> policy,
                 const BreakerContext* context, uint64_t generation)
    : dependency_(std::move(dependency)),
      context_(context),
      policy_(std::move(policy)),
      generation_(generation) {
  name_hash_ = static_cast<uint32_t>(HashName(dependency_) >> 32);
  const Instant now = NowInstant();
  last_activity_ns_ = now.ns;
  state_entered_ns_ = now.ns;
  CacheWidths();
}

// --- helpers -----------------------------------------------------------------

State Breaker::DerivedState(Instant now) const {
  if (override_ == Override::kForcedOpen) return State::kForcedOpen;
  if (override_ == Override::kForcedClosed) return State::kForcedClosed;
  if (!open_) return State::kClosed;
  return now.ns >= open_until_ns_ ? State::kHalfOpen : State::kOpen;
}

uint64_t Breaker::Identity() const {
  return reinterpret_cast<uintptr_t>(this) ^ (uint64_t{name_hash_} << 32);
}

uint64_t Breaker::MakePermit(bool probe, uint32_t seq) const {
  const uint32_t payload =
      static_cast<uint32_t>((generation_ & kGenerationMask) << 8) |
      ((seq & 0x7F) << 1) | (probe ? 1u : 0u);
  return (uint64_t{Tag(context_->permit_secret, Identity(), payload)} << 32) |
         payload;
}

bool Breaker::PermitIsOurs(uint64_t permit) const {
  const uint32_t payload = static_cast<uint32_t>(permit);
  return static_cast<uint32_t>(permit >> 32) ==
         Tag(context_->permit_secret, Identity(), payload);
}

void Breaker::CacheWidths() {
  // Microseconds in 32 bits: config validation bounds both at 1 s .. 1 h,
  // so a bucket is 100 ms .. 360 s.
  window_width_us_ = static_cast<uint32_t>(std::max<int64_t>(
      1, absl::ToInt64Microseconds(policy_->failure_rate.window) /
             kWindowBuckets));
  budget_width_us_ = static_cast<uint32_t>(std::max<int64_t>(
      1,
      absl::ToInt64Microseconds(policy_->retry_budget.ttl) / kWindowBuckets));
}

WindowCounts Breaker::Window(Instant now) const {
  const auto sum = window_.Sum(now.ns, WindowWidth());
  return WindowCounts{sum[kCalls], sum[kFailures], sum[kSlow]};
}

bool Breaker::RetryAllowed(Instant now) const {
  const Policy::RetryBudget& rb = policy_->retry_budget;
  const auto sum = budget_.Sum(now.ns, BudgetWidth());
  const double allowance = rb.ratio * static_cast<double>(sum[kFirsts]) +
                           rb.min_per_second * absl::ToDoubleSeconds(rb.ttl);
  return static_cast<double>(sum[kRetries]) + 1 <= allowance;
}

absl::Duration Breaker::NextCooldown(absl::Duration hint) const {
  const Policy::Cooldown& c = policy_->cooldown;
  absl::Duration d = c.base;
  for (uint32_t i = 0; i < escalation_ && d < c.max; ++i) d *= 2;
  d = std::min(d, c.max);
  if (c.jitter > 0) {
    d *= 1.0 + c.jitter * (2.0 * context_->uniform() - 1.0);
  }
  return std::max(d, hint);
}

void Breaker::CreditStateTime(Instant now,
                              std::array<double, kStateCount>* seconds) const {
  if (now.ns <= state_entered_ns_) return;
  constexpr double kSecondsPerNano = 1e-9;
  const State s = DerivedState(now);
  if (s == State::kOpen || s == State::kHalfOpen) {
    const int64_t split = std::clamp(open_until_ns_, state_entered_ns_, now.ns);
    (*seconds)[static_cast<int>(State::kOpen)] +=
        (split - state_entered_ns_) * kSecondsPerNano;
    (*seconds)[static_cast<int>(State::kHalfOpen)] +=
        (now.ns - split) * kSecondsPerNano;
  } else {
    (*seconds)[static_cast<int>(s)] +=
        (now.ns - state_entered_ns_) * kSecondsPerNano;
  }
}

void Breaker::CountTransition(State from, State to, TransitionReason reason) {
  if (transitions_ == nullptr) {
    transitions_ =
        std::make_unique<std::vector<BreakerSnapshot::TransitionCount>>();
  }
  for (auto& t : *transitions_) {
    if (t.from == from && t.to == to && t.reason == reason) {
      ++t.count;
      return;
    }
  }
  transitions_->push_back({from, to, reason, 1});
}

Transition Breaker::MoveTo(Instant now, State from, State to,
                           TransitionReason reason) {
  ++generation_;
  claim_ = Claim::kNone;
  CountTransition(from, to, reason);
  return Event(now, from, to, reason);
}

Transition Breaker::Event(Instant now, State from, State to,
                          TransitionReason reason) const {
  Transition t;
  t.dependency = dependency_;
  t.from = from;
  t.to = to;
  t.reason = reason;
  t.generation = generation_;
  if (to == State::kOpen)
    t.retry_after = absl::Nanoseconds(open_until_ns_ - now.ns);
  t.escalation_level = escalation_;
  t.consecutive_failures = consecutive_failures_;
  t.window = Window(now);
  t.shadow = policy_->mode == Mode::kShadow;
  t.fleet_local = LocalEpisode();
  return t;
}

void Breaker::ClearHistory() {
  window_.Clear();
  consecutive_failures_ = 0;
  escalation_ = 0;
  // What was counted before a close no longer counts after it, in the
  // fleet's window either.
  fleet_gained_ = {};
  fleet_trip_pending_ = false;
}

Transition Breaker::Open(Instant now, State from, TransitionReason reason,
                         absl::Duration retry_after_hint) {
  CreditStateTime(now, &state_seconds_);
  state_entered_ns_ = now.ns;
  open_ = true;
  const absl::Duration cooldown = NextCooldown(absl::ZeroDuration());
  open_until_ns_ =
      now.ns + absl::ToInt64Nanoseconds(std::max(cooldown, retry_after_hint));
  half_open_seen_ = false;
  probe_permit_ = 0;
  probe_successes_ = 0;
  if (from == State::kClosed) {
    // A new episode. In fleet mode a local trip stays local until the
    // fleet agrees, unless it is the fleet's own verdict, the upstream's
    // (its Retry-After set the cooldown: a shared credential's limit holds
    // for every pod), or no quorum is needed.
    // While the store is away the episode is this sidecar's alone: it
    // is not published when the store returns.
    episode_ = Episode::kNone;
    ProbeArbiter* arbiter = context_->arbiter;
    if (arbiter != nullptr && !arbiter->Active() &&
        policy_->mode != Mode::kShadow) {
      episode_ = Episode::kLocal;
    } else if (arbiter != nullptr && policy_->mode != Mode::kShadow) {
      const bool authoritative =
          reason == TransitionReason::kFleetFailureRate ||
          reason == TransitionReason::kFleetSlowCallRate ||
          retry_after_hint > cooldown || FleetQuorum(arbiter->Members()) <= 1;
      episode_ = authoritative ? Episode::kConfirmed : Episode::kUnconfirmed;
      fleet_trip_pending_ = !authoritative;
    }
  }
  return MoveTo(now, from, State::kOpen, reason);
}

Transition Breaker::Close(Instant now, State from, TransitionReason reason) {
  CreditStateTime(now, &state_seconds_);
  state_entered_ns_ = now.ns;
  open_ = false;
  override_ = Override::kNone;
  half_open_seen_ = false;
  probe_permit_ = 0;
  probe_successes_ = 0;
  ClearHistory();
  // An episode the fleet never confirmed ends here: counted once (the
  // false-positive signal), and its close stays local like its open.
  const bool local = LocalEpisode();
  if (episode_ == Episode::kUnconfirmed) ++fleet_unconfirmed_opens_;
  episode_ = Episode::kNone;
  // What the fleet's window said is over with the episode.
  fleet_window_calls_ = 0;
  fleet_window_failures_ = 0;
  Transition t = MoveTo(now, from, State::kClosed, reason);
  t.fleet_local = local;
  return t;
}

std::optional<TransitionReason> Breaker::RecordClosed(Instant now,
                                                      Verdict verdict,
                                                      bool slow,
                                                      bool may_trip) {
  if (verdict == Verdict::kNeutral) return std::nullopt;
  const int64_t width = WindowWidth();
  window_.Add(now.ns, width, kCalls);
  if (verdict == Verdict::kFailure) {
    window_.Add(now.ns, width, kFailures);
    ++consecutive_failures_;
  } else {
    consecutive_failures_ = 0;
  }
  if (slow) window_.Add(now.ns, width, kSlow);
  if (context_->arbiter != nullptr && policy_->fleet.share_window) {
    ++fleet_gained_[kCalls];
    if (verdict == Verdict::kFailure) ++fleet_gained_[kFailures];
    if (slow) ++fleet_gained_[kSlow];
  }
  if (!may_trip) return std::nullopt;

  const Policy& p = *policy_;
  if (verdict == Verdict::kFailure && p.consecutive_failures > 0 &&
      consecutive_failures_ >= p.consecutive_failures) {
    return TransitionReason::kConsecutiveFailures;
  }
  const WindowCounts w = Window(now);
  if (p.failure_rate.threshold > 0 && w.calls >= p.failure_rate.min_calls &&
      static_cast<double>(w.failures) >=
          p.failure_rate.threshold * static_cast<double>(w.calls)) {
    return TransitionReason::kFailureRate;
  }
  if (p.slow_call_rate.threshold > 0 && w.calls >= p.slow_call_rate.min_calls &&
      static_cast<double>(w.slow) >=
          p.slow_call_rate.threshold * static_cast<double>(w.calls)) {
    return TransitionReason::kSlowCallRate;
  }
  return std::nullopt;
}

// --- the hot path ------------------------------------------------------------

AcquireResult Breaker::Acquire(uint32_t attempt,
                               std::optional<Transition>* transition) {
  const Instant now = NowInstant();
  last_activity_ns_ = now.ns;
  const Policy& p = *policy_;
  const bool retry = attempt > 0;

  AcquireResult r;
  r.state = DerivedState(now);
  Decision decision = Decision::kAllowed;

  switch (r.state) {
    case State::kForcedOpen:
      r.reason = RejectReason::kForcedOpen;
      break;
    case State::kForcedClosed:
    case State::kClosed:
      if (retry && !RetryAllowed(now)) r.reason = RejectReason::kRetryBudget;
      break;
    case State::kOpen:
      r.reason = RejectReason::kOpen;
      r.retry_after = absl::Nanoseconds(open_until_ns_ - now.ns);
      break;
    case State::kHalfOpen: {
      if (!half_open_seen_) {
        // The cooldown has run out: record the derived transition the first
        // time anyone observes it.
        CreditStateTime(now, &state_seconds_);
        state_entered_ns_ = now.ns;
        half_open_seen_ = true;
        *transition = MoveTo(now, State::kOpen, State::kHalfOpen,
                             TransitionReason::kCooldownElapsed);
      }
      const bool probe_out = probe_permit_ != 0 && now.ns < probe_until_ns_;
      if (probe_out) {
        r.reason = RejectReason::kProbeInFlight;
        r.retry_after = absl::Nanoseconds(probe_until_ns_ - now.ns);
      } else if (retry) {
        // No retry while the breaker is not closed: the probe is a first try.
        r.reason = RejectReason::kOpen;
      } else if (!FleetAllowsProbe(now, &r)) {
        // Another sidecar holds the fleet's probe, or the claim is pending:
        // r says PROBE_IN_FLIGHT.
      } else {
        probe_seq_ = (probe_seq_ % 127) + 1;
        probe_permit_ = MakePermit(/*probe=*/true, probe_seq_);
        probe_until_ns_ = now.ns + absl::ToInt64Nanoseconds(p.probe.lease);
        r.allowed = true;
        r.probe = true;
        r.permit = probe_permit_;
        decision = Decision::kProbe;
      }
      break;
    }
  }

  if (r.reason != RejectReason::kNone) {
    decision = RejectionDecision(r.reason);
    if (p.mode == Mode::kShadow) {
      decision = ShadowOf(decision);
      r.allowed = true;
      r.permit = MakePermit(/*probe=*/false, 0);
    }
  } else if (!r.probe) {
    r.allowed = true;
    r.permit = MakePermit(/*probe=*/false, 0);
  }
  ++acquires_[static_cast<int>(decision)];

  // Retry budget accounting reflects what enforce mode decided.
  if (retry) {
    if (r.reason == RejectReason::kNone) {
      budget_.Add(now.ns, BudgetWidth(), kRetries);
      ++retries_granted_;
    } else {
      ++retries_rejected_;
    }
  } else if (r.reason == RejectReason::kNone) {
    budget_.Add(now.ns, BudgetWidth(), kFirsts);
  }
  return r;
}

bool Breaker::FleetAllowsProbe(Instant now, AcquireResult* r) {
  ProbeArbiter* arbiter = context_->arbiter;
  // A shadow breaker's episodes are its own (never published), and so is
  // an unconfirmed local trip: it probes locally and never holds the
  // fleet's probe.
  if (arbiter == nullptr || !arbiter->Active() ||
      policy_->mode == Mode::kShadow || LocalEpisode()) {
    return true;
  }
  if (claim_ == Claim::kHeld && now.ns < claim_until_ns_) return true;
  r->reason = RejectReason::kProbeInFlight;
  if (claim_ == Claim::kNone || now.ns >= claim_until_ns_) {
    // Ask; refuse meanwhile. Without an answer within the lease, ask again.
    claim_ = Claim::kPending;
    claim_until_ns_ = now.ns + absl::ToInt64Nanoseconds(policy_->probe.lease);
    arbiter->RequestClaim(dependency_, generation_, policy_->probe.lease);
  }
  if (claim_ == Claim::kElsewhere) {
    r->retry_after = absl::Nanoseconds(claim_until_ns_ - now.ns);
  }
  return false;
}

void Breaker::SetProbeClaim(uint64_t generation, bool won,
                            absl::Duration lease) {
  if (generation != generation_) return;
  claim_ = won ? Claim::kHeld : Claim::kElsewhere;
  claim_until_ns_ = NowInstant().ns + absl::ToInt64Nanoseconds(lease);
}

// The longest open period taken from elsewhere (a year: far beyond any
// cooldown, far from int64 nanoseconds' 292 years).
constexpr absl::Duration kMaxExternalOpen = absl::Hours(24 * 365);

std::optional<Transition> Breaker::ApplyExternal(const ExternalState& state,
                                                 TransitionReason reason) {
  std::optional<Transition> t;
  switch (state.kind) {
    case ExternalState::Kind::kForcedOpen:
      t = Force(Override::kForcedOpen);
      break;
    case ExternalState::Kind::kForcedClosed:
      t = Force(Override::kForcedClosed);
      break;
    case ExternalState::Kind::kReset:
      t = Reset();
      break;
    case ExternalState::Kind::kClosed: {
      if (!open_) return std::nullopt;
      const Instant now = NowInstant();
      if (override_ != Override::kNone) {
        // The operator's override still decides; close beneath it.
        open_ = false;
        half_open_seen_ = false;
        probe_permit_ = 0;
        probe_successes_ = 0;
        ClearHistory();
        return std::nullopt;
      }
      t = Close(now, DerivedState(now), reason);
      break;
    }
    case ExternalState::Kind::kOpen: {
      const Instant now = NowInstant();
      const State from = DerivedState(now);
      const bool overridden = override_ != Override::kNone;
      if (!overridden) {
        CreditStateTime(now, &state_seconds_);
        state_entered_ns_ = now.ns;
      }
      open_ = true;
      // Bounded: a time left from a file or another process is never
      // negative, and never so far out that the clock's int64 nanoseconds
      // overflow (found by fuzz/state_file_fuzz).
      open_until_ns_ = now.ns + absl::ToInt64Nanoseconds(std::clamp(
                                    state.open_remaining, absl::ZeroDuration(),
                                    kMaxExternalOpen));
      escalation_ = state.escalation_level;
      half_open_seen_ = false;
      probe_permit_ = 0;
      probe_successes_ = 0;
      // The fleet's open (also one that confirms a local trip of ours); a
      // restored one is this sidecar's own, as before the restart.
      episode_ = reason == TransitionReason::kRestored ? Episode::kNone
                                                       : Episode::kConfirmed;
      fleet_trip_pending_ = false;
      // With an override, the open period runs beneath it, unseen.
      if (overridden) return std::nullopt;
      t = MoveTo(now, from, State::kOpen, reason);
      break;
    }
  }
  t->external = true;
  t->decided_unix_ms = state.decided_unix_ms;
  return t;
}

absl::StatusOr<ReportResult> Breaker::Report(
    uint64_t permit, const ReportInput& in,
    std::optional<Transition>* transition) {
  if (!PermitIsOurs(permit)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "permit: ", permit,
        " was not issued by this breakerd for dependency \"", dependency_,
        "\" (a value not returned by Acquire, another dependency's permit, or "
        "one from before a restart)"));
  }
  const uint32_t payload = static_cast<uint32_t>(permit);
  const uint64_t permit_generation = payload >> 8;
  const bool is_probe = (payload & 1) != 0;

  const Instant now = NowInstant();
  last_activity_ns_ = now.ns;
  const Policy& p = *policy_;

  if (in.latency > absl::ZeroDuration()) {
    const double s = absl::ToDoubleSeconds(in.latency);
    const auto it = std::lower_bound(kLatencyBucketBounds.begin(),
                                     kLatencyBucketBounds.end(), s);
    ++latency_buckets_[it - kLatencyBucketBounds.begin()];
    latency_sum_ += s;
  }

  const Verdict verdict = VerdictFor(in.outcome, p.rate_limited);
  const bool slow = p.slow_call_rate.threshold > 0 &&
                    in.latency >= p.slow_call_rate.duration &&
                    in.latency > absl::ZeroDuration();
  const Effect counted = verdict == Verdict::kSuccess ? Effect::kCountedSuccess
                         : verdict == Verdict::kFailure
                             ? Effect::kCountedFailure
                             : Effect::kNeutral;
  const State before = DerivedState(now);
  ReportResult r;
  r.effect = Effect::kLate;

  const bool current = permit_generation == (generation_ & kGenerationMask);
  if (!current || before == State::kForcedOpen) {
    // Late: counted in metrics, changes nothing.
  } else if (before == State::kClosed || before == State::kForcedClosed) {
    r.effect = counted;
    const auto trip = RecordClosed(now, verdict, slow,
                                   /*may_trip=*/before == State::kClosed);
    if (trip.has_value()) {
      *transition = Open(now, before, *trip, in.retry_after);
    }
  } else if (is_probe && permit == probe_permit_) {
    // The probe's result decides (open or half-open: a probe that reports
    // after its cooldown restarted cannot match, the generation moved).
    r.effect = counted;
    probe_permit_ = 0;
    if (verdict == Verdict::kFailure) {
      ++escalation_;
      *transition =
          Open(now, before, TransitionReason::kProbeFailed, in.retry_after);
    } else if (verdict == Verdict::kSuccess &&
               ++probe_successes_ >= p.probe.required_successes) {
      *transition = Close(now, before, TransitionReason::kProbeSucceeded);
    }
  }
  ++reports_[ReportSlot(in.outcome, r.effect)];
  r.state = DerivedState(now);
  return r;
}

// --- admin -----------------------------------------------------------------

Transition Breaker::ForceOpen() { return Force(Override::kForcedOpen); }

Transition Breaker::ForceClose() { return Force(Override::kForcedClosed); }

Transition Breaker::Force(Override to) {
  const Instant now = NowInstant();
  const State from = DerivedState(now);
  CreditStateTime(now, &state_seconds_);
  state_entered_ns_ = now.ns;
  override_ = to;
  probe_permit_ = 0;
  return to == Override::kForcedOpen ? MoveTo(now, from, State::kForcedOpen,
                                              TransitionReason::kForcedOpen)
                                     : MoveTo(now, from, State::kForcedClosed,
                                              TransitionReason::kForcedClosed);
}

Transition Breaker::Reset() {
  const Instant now = NowInstant();
  return Close(now, DerivedState(now), TransitionReason::kReset);
}

std::optional<Transition> Breaker::SetPolicy(
    std::shared_ptr<const Policy> policy) {
  const Instant now = NowInstant();
  const int64_t old_window = WindowWidth(), old_budget = BudgetWidth();
  const bool mode_changed = policy->mode != policy_->mode;
  policy_ = std::move(policy);
  CacheWidths();
  if (WindowWidth() != old_window) {
    window_.Rebucket(now.ns, old_window, WindowWidth());
  }
  if (BudgetWidth() != old_budget) {
    budget_.Rebucket(now.ns, old_budget, BudgetWidth());
  }
  if (!mode_changed) return std::nullopt;
  const State state = DerivedState(now);
  return Event(now, state, state, TransitionReason::kReload);
}

// --- fleet -----------------------------------------------------------------

bool Breaker::QueueForFleet() {
  if (fleet_queued_ || (fleet_gained_[kCalls] == 0 && !fleet_trip_pending_)) {
    return false;
  }
  fleet_queued_ = true;
  return true;
}

FleetDelta Breaker::TakeFleetDelta() {
  FleetDelta d;
  d.dependency = dependency_;
  d.gained = WindowCounts{fleet_gained_[kCalls], fleet_gained_[kFailures],
                          fleet_gained_[kSlow]};
  d.window = policy_->failure_rate.window;
  d.tripped = fleet_trip_pending_;
  fleet_gained_ = {};
  fleet_trip_pending_ = false;
  fleet_queued_ = false;
  return d;
}

uint64_t Breaker::FleetQuorum(uint64_t members) const {
  uint64_t q = std::max<uint64_t>(1, policy_->fleet.quorum);
  if (members > 0) q = std::min(q, members);
  return q;
}

std::optional<TransitionReason> Breaker::FleetRule(const FleetWindow& w,
                                                   uint64_t members) const {
  const Policy& p = *policy_;
  if (!p.fleet.share_window || w.sources < FleetQuorum(members)) {
    return std::nullopt;
  }
  if (p.failure_rate.threshold > 0 && w.calls >= p.failure_rate.min_calls &&
      static_cast<double>(w.failures) >=
          p.failure_rate.threshold * static_cast<double>(w.calls)) {
    return TransitionReason::kFleetFailureRate;
  }
  if (p.slow_call_rate.threshold > 0 && w.calls >= p.slow_call_rate.min_calls &&
      static_cast<double>(w.slow) >=
          p.slow_call_rate.threshold * static_cast<double>(w.calls)) {
    return TransitionReason::kFleetSlowCallRate;
  }
  return std::nullopt;
}

FleetWindowEffect Breaker::ApplyFleetWindow(
    const FleetWindow& w, uint64_t members,
    std::optional<Transition>* transition) {
  const Instant now = NowInstant();
  auto clamp32 = [](uint64_t v) {
    return static_cast<uint32_t>(std::min<uint64_t>(v, UINT32_MAX));
  };
  fleet_window_calls_ = clamp32(w.calls);
  fleet_window_failures_ = clamp32(w.failures);
  fleet_window_at_ns_ = std::max<int64_t>(now.ns, 1);  // 0: never read

  FleetWindowEffect effect;
  const std::optional<TransitionReason> rule = FleetRule(w, members);
  const State state = DerivedState(now);
  if (state == State::kClosed && rule.has_value()) {
    *transition = Open(now, state, *rule, absl::ZeroDuration());
  } else if (episode_ == Episode::kUnconfirmed &&
             (rule.has_value() || w.trips >= FleetQuorum(members))) {
    episode_ = Episode::kConfirmed;
    // Still open: the fleet opens with us, until our cooldown's end. (Past
    // it, our probe decides for us alone; the fleet needs no open period
    // that is already over.)
    if (state == State::kOpen) {
      effect.publish_open = true;
      effect.open_remaining = absl::Nanoseconds(open_until_ns_ - now.ns);
      effect.escalation_level = escalation_;
    }
  }
  return effect;
}

// --- reads -----------------------------------------------------------------

State Breaker::CurrentState() const { return DerivedState(NowInstant()); }

bool Breaker::IsIdle(absl::Duration idle_ttl) const {
  const Instant now = NowInstant();
  return override_ == Override::kNone && !open_ && consecutive_failures_ == 0 &&
         escalation_ == 0 &&
         now.ns - last_activity_ns_ >= absl::ToInt64Nanoseconds(idle_ttl) &&
         Window(now).calls == 0;
}

BreakerSnapshot Breaker::Snapshot() const {
  BreakerSnapshot s;
  s.dependency = dependency_;
  const Instant now = NowInstant();
  s.state = DerivedState(now);
  s.generation = generation_;
  if (s.state == State::kOpen) {
    s.retry_after = absl::Nanoseconds(open_until_ns_ - now.ns);
  }
  s.window = Window(now);
  s.failure_rate = s.window.calls == 0
                       ? 0
                       : static_cast<double>(s.window.failures) /
                             static_cast<double>(s.window.calls);
  s.consecutive_failures = consecutive_failures_;
  s.escalation_level = escalation_;
  s.policy = policy_->match;
  s.shadow = policy_->mode == Mode::kShadow;
  s.probe_in_flight = s.state == State::kHalfOpen && probe_permit_ != 0 &&
                      now.ns < probe_until_ns_;
  s.failure_rate_threshold = policy_->failure_rate.threshold;
  s.fleet_window_known = fleet_window_at_ns_ != 0;
  // Shown while it says something: read within the window, and the store
  // reachable (while it is away, breakers decide on their own windows).
  if (s.fleet_window_known &&
      now.ns - fleet_window_at_ns_ <
          absl::ToInt64Nanoseconds(policy_->failure_rate.window) &&
      (context_->arbiter == nullptr || context_->arbiter->Active())) {
    s.fleet_window_calls = fleet_window_calls_;
    s.fleet_window_failures = fleet_window_failures_;
  }
  s.fleet_unconfirmed_opens = fleet_unconfirmed_opens_;
  s.acquires = acquires_;
  for (int c = 1; c < kOutcomeClassCount; ++c) {
    const auto cls = static_cast<OutcomeClass>(c);
    for (Effect e : {NaturalEffect(cls), Effect::kLate}) {
      s.reports[c][static_cast<int>(e)] = reports_[ReportSlot(cls, e)];
    }
  }
  s.reports[static_cast<int>(OutcomeClass::kRateLimited)]
           [static_cast<int>(Effect::kNeutral)] =
      reports_[kRateLimitedNeutralSlot];
  s.retries_granted = retries_granted_;
  s.retries_rejected = retries_rejected_;
  if (transitions_ != nullptr) s.transitions = *transitions_;
  s.state_seconds = state_seconds_;
  CreditStateTime(now, &s.state_seconds);
  s.latency_buckets = latency_buckets_;
  s.latency_sum_seconds = latency_sum_;
  for (uint64_t c : latency_buckets_) s.latency_count += c;
  return s;
}

}  // namespace breakerd

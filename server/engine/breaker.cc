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
constexpr int kPayloadBits = 47;                // generation, seq, probe
constexpr uint64_t kPayloadMask = (uint64_t{1} << kPayloadBits) - 1;
constexpr int kSeqShift = 1;
constexpr int kGenerationShift = kSeqShift + PermitLedger::kSeqBits;

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

// Permit layout: [tag:17][generation:24][seq:22][probe:1]. The tag is a
// keyed hash of the payload, the breaker's identity (its address and a
// hash of its name) and the process secret, so a permit from another
// process, another breaker or random bytes fails the check (a random value
// passes with probability 2^-17: its low bit must be 1 and 16 more bits
// must match), without storing any permit. seq numbers the breaker's
// permits (PermitLedger), so each can be reported once.
uint64_t Tag(uint64_t secret, uint64_t identity, uint64_t payload) {
  return (Mix(secret ^ identity ^ (payload * 0x9e3779b97f4a7c15ULL)) >>
          kPayloadBits) |
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
    case Decision::kRejectedRamp:
      return Decision::kShadowRejectedRamp;
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
    case RejectReason::kRamp:
      return Decision::kRejectedRamp;
    default:
      return Decision::kRejectedOpen;
  }
}

// reports_ keeps, per class, only the effect the class has when it is
// counted: its verdict's effect under rate_limited "count" (slot class - 1);
// rate limited, which "ignore" makes neutral, has one more slot at the end.
// Late and duplicate reports are counted in Breaker::Rare.
static_assert(static_cast<int>(Decision::kAllowed) == 0 &&
                  static_cast<int>(Decision::kProbe) == 1,
              "acquires_ holds the first two decisions");
constexpr int kRateLimitedNeutralSlot = kOutcomeClassCount - 1;

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
  if (c == OutcomeClass::kRateLimited && e == Effect::kNeutral) {
    return kRateLimitedNeutralSlot;
  }
  // Every other class has exactly one effect besides late and duplicate.
  assert(e == NaturalEffect(c));
  return static_cast<int>(c) - 1;
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
  const uint64_t payload =
      ((generation_ & kGenerationMask) << kGenerationShift) |
      (uint64_t{seq & PermitLedger::kSeqMask} << kSeqShift) | (probe ? 1u : 0u);
  return (Tag(context_->permit_secret, Identity(), payload) << kPayloadBits) |
         payload;
}

bool Breaker::PermitIsOurs(uint64_t permit) const {
  return permit >> kPayloadBits ==
         Tag(context_->permit_secret, Identity(), permit & kPayloadMask);
}

int64_t Breaker::HorizonNs() const {
  return absl::ToInt64Nanoseconds(PermitHorizon(*policy_));
}

uint64_t Breaker::IssuePermit(Instant now, bool probe) {
  const uint32_t seq = next_seq_++;
  if (ledger_ == nullptr) {
    ledger_ = std::make_unique<PermitLedger>(HorizonNs() /
                                             PermitLedger::kBucketsPerHorizon);
    ledger_->set_due_ns(INT64_MAX);
  }
  if (ledger_->Issue(seq, now.ns, generation_first_seq_)) {
    // The new bucket may be the next to hang, or to leave the horizon (a
    // later permit in it never comes due earlier than its first).
    const int64_t hang = absl::ToInt64Nanoseconds(policy_->inflight.hang_after);
    const int64_t due = now.ns + (hang > 0 ? hang : HorizonNs());
    if (due < ledger_->due_ns()) ledger_->set_due_ns(due);
  }
  return MakePermit(probe, seq);
}

int64_t Breaker::LedgerDue(Instant now) const {
  return ledger_->NextDue(
      absl::ToInt64Nanoseconds(policy_->inflight.hang_after),
      Counting(DerivedState(now)), generation_first_seq_, HorizonNs(),
      absl::ToInt64Nanoseconds(policy_->failure_rate.window));
}

void Breaker::TendLedger(Instant now, std::optional<Transition>* transition) {
  const int64_t hang = absl::ToInt64Nanoseconds(policy_->inflight.hang_after);
  const State state = DerivedState(now);
  uint64_t hung = 0;
  if (hang > 0 && Counting(state)) {
    hung =
        ledger_->CountHung(now.ns, hang, WindowWidth(), generation_first_seq_);
  }
  ledger_->Expire(now.ns, HorizonNs(),
                  absl::ToInt64Nanoseconds(policy_->failure_rate.window));
  if (ledger_->empty()) {
    ledger_.reset();
  } else {
    ledger_->set_due_ns(LedgerDue(now));
  }
  CountHungCalls(now, state, hung, transition);
}

void Breaker::CountHungCalls(Instant now, State state, uint64_t hung,
                             std::optional<Transition>* transition) {
  if (hung == 0) return;
  // Hung calls are slow failures in the window, never part of a failure
  // streak (a crashed client is not five outages), and this sidecar's own
  // evidence: the fleet's window gets the real outcomes when they come.
  const uint32_t n =
      static_cast<uint32_t>(std::min<uint64_t>(hung, UINT32_MAX));
  const int64_t width = WindowWidth();
  window_.Add(now.ns, width, kCalls, n);
  window_.Add(now.ns, width, kFailures, n);
  window_.Add(now.ns, width, kSlow, n);
  rare().hung_calls += hung;
  if (state != State::kClosed || transition->has_value()) return;
  if (const auto rule = RateRule(now); rule.has_value()) {
    *transition =
        Open(now, state, TransitionReason::kHungCalls, absl::ZeroDuration());
  }
}

// Local grants (ReportBatch) have no permits: the grant ledger keeps, per
// bucket of horizon/16, how many of the current generation's grants have
// no outcome yet (open) and how many of those were counted as hung.
void Breaker::AddLocalGrants(Instant now, uint32_t grants) {
  const int64_t hang = absl::ToInt64Nanoseconds(policy_->inflight.hang_after);
  if (hang <= 0 || grants == 0) return;
  Rare& r = rare();
  const int64_t width = std::max<int64_t>(HorizonNs() / 16, 1);
  if (r.local_buckets.empty() ||
      now.ns - r.local_buckets.back().start_ns >= width) {
    if (r.local_buckets.size() >= kMaxLocalBuckets) {
      // Bounded: the two oldest become one (counted hung a little late).
      Rare::LocalBucket& second = r.local_buckets[1];
      second.open += r.local_buckets[0].open;
      second.hung += r.local_buckets[0].hung;
      r.local_buckets.erase(r.local_buckets.begin());
    }
    r.local_buckets.push_back(Rare::LocalBucket{now.ns, now.ns, 0, 0, 0});
  }
  Rare::LocalBucket& b = r.local_buckets.back();
  b.open += grants;
  b.newest_ns = now.ns;
  if (r.local_due_ns == 0) r.local_due_ns = b.newest_ns + hang;
}

void Breaker::ConsumeLocalGrant() {
  if (rare_ == nullptr) return;
  std::vector<Rare::LocalBucket>& buckets = rare_->local_buckets;
  while (!buckets.empty() && buckets.front().open + buckets.front().hung == 0) {
    buckets.erase(buckets.begin());
  }
  if (buckets.empty()) return;
  Rare::LocalBucket& b = buckets.front();
  if (b.hung > 0) {
    // The real outcome replaces the hung count, if the window still holds
    // it.
    --b.hung;
    const int64_t width = WindowWidth();
    window_.Sub(b.hung_at_ns, width, kCalls);
    window_.Sub(b.hung_at_ns, width, kFailures);
    window_.Sub(b.hung_at_ns, width, kSlow);
  } else {
    --b.open;
  }
}

void Breaker::TendLocal(Instant now, std::optional<Transition>* transition) {
  Rare& r = *rare_;
  r.local_due_ns = 0;
  const int64_t hang = absl::ToInt64Nanoseconds(policy_->inflight.hang_after);
  if (r.local_generation != generation_ || hang <= 0) {
    r.local_buckets.clear();
    return;
  }
  const State state = DerivedState(now);
  const int64_t forget = absl::ToInt64Nanoseconds(policy_->failure_rate.window);
  uint64_t hung = 0;
  for (Rare::LocalBucket& b : r.local_buckets) {
    if (b.open > 0 && now.ns - b.newest_ns >= hang) {
      hung += b.open;
      b.hung += b.open;
      b.open = 0;
      b.hung_at_ns = now.ns;
    }
    if (b.open > 0 && r.local_due_ns == 0) r.local_due_ns = b.newest_ns + hang;
  }
  // Hung counts the window has forgotten need no replacing.
  while (!r.local_buckets.empty() && r.local_buckets.front().open == 0 &&
         now.ns - r.local_buckets.front().hung_at_ns >= forget) {
    r.local_buckets.erase(r.local_buckets.begin());
  }
  if (Counting(state)) CountHungCalls(now, state, hung, transition);
}

uint64_t Breaker::LocalOpen() const {
  if (rare_ == nullptr || rare_->local_generation != generation_) return 0;
  uint64_t open = 0;
  for (const Rare::LocalBucket& b : rare_->local_buckets) open += b.open;
  return open;
}

bool Breaker::ReleaseIdleMemory(std::optional<Transition>* ramp_done) {
  const Instant now = NowInstant();
  // A breaker nobody calls any more must become idle.
  if (EndCompletedRamp(now) && ramp_done != nullptr) {
    *ramp_done =
        Event(now, State::kClosed, State::kClosed, TransitionReason::kRampDone);
  }
  if (ledger_ == nullptr) return false;
  const bool hang_on = policy_->inflight.hang_after > absl::ZeroDuration();
  ledger_->Expire(now.ns, HorizonNs(),
                  absl::ToInt64Nanoseconds(policy_->failure_rate.window),
                  /*keep_unswept=*/hang_on && Counting(DerivedState(now)),
                  generation_first_seq_);
  if (!ledger_->empty()) return false;
  ledger_.reset();
  return true;
}

uint64_t Breaker::InflightAt(Instant now) const {
  if (ledger_ == nullptr) return LocalOpen();
  // Permits that will count as hung at the next Acquire or Report are
  // still out until then: shown, and they keep the breaker from eviction.
  return ledger_->Inflight(
             now.ns, HorizonNs(),
             policy_->inflight.hang_after > absl::ZeroDuration() &&
                 Counting(DerivedState(now)),
             generation_first_seq_) +
         LocalOpen();
}

double Breaker::RampShare(Instant now) const {
  if (ramp_start_ns_ == 0) return 1;
  const int64_t ramp = absl::ToInt64Nanoseconds(policy_->recovery.ramp);
  const int64_t elapsed = now.ns - ramp_start_ns_;
  if (ramp <= 0 || elapsed >= ramp) return 1;
  const double start = policy_->recovery.start_share;
  return start +
         (1 - start) * static_cast<double>(elapsed) / static_cast<double>(ramp);
}

bool Breaker::RampAdmits(Instant now, bool retry,
                         std::optional<Transition>* transition) {
  const double share = RampShare(now);
  if (share >= 1) {
    // Complete: from here on the breaker is as after any close, and Watch
    // clients may decide locally again.
    if (EndCompletedRamp(now) && !transition->has_value()) {
      *transition = Event(now, State::kClosed, State::kClosed,
                          TransitionReason::kRampDone);
    }
    return true;
  }
  if (retry) return false;
  // By count, not by dice: each first attempt earns the share now in
  // credit (millionths), and one whole credit admits a call. Over any run
  // of attempts the admitted share is the ramp's share then, within one
  // call; nothing banked early is spent in a burst later.
  ramp_credit_ += static_cast<uint32_t>(share * kRampCreditUnit + 0.5);
  if (ramp_credit_ < kRampCreditUnit) return false;
  ramp_credit_ -= kRampCreditUnit;
  return true;
}

Breaker::Rare& Breaker::rare() {
  if (rare_ == nullptr) rare_ = std::make_unique<Rare>();
  return *rare_;
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
  std::vector<BreakerSnapshot::TransitionCount>& transitions =
      rare().transitions;
  for (auto& t : transitions) {
    if (t.from == from && t.to == to && t.reason == reason) {
      ++t.count;
      return;
    }
  }
  transitions.push_back({from, to, reason, 1});
}

Transition Breaker::MoveTo(Instant now, State from, State to,
                           TransitionReason reason) {
  ++generation_;
  generation_first_seq_ = next_seq_;
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
  t.local_decisions = LocalDecisions(now, to);
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

bool Breaker::EndCompletedRamp(Instant now) {
  if (ramp_start_ns_ == 0 || Ramping(now)) return false;
  ramp_start_ns_ = 0;
  escalation_ = 0;
  return true;
}

Transition Breaker::Notice(TransitionReason reason) const {
  const Instant now = NowInstant();
  const State state = DerivedState(now);
  Transition t = Event(now, state, state, reason);
  // An evicted breaker is forgotten: nothing to decide on.
  if (reason == TransitionReason::kEvicted) t.local_decisions = false;
  return t;
}

bool Breaker::LocalDecisions(Instant now, State state) const {
  return state == State::kClosed && policy_->local_decisions &&
         policy_->mode != Mode::kShadow && !Ramping(now);
}

Transition Breaker::Open(Instant now, State from, TransitionReason reason,
                         absl::Duration retry_after_hint) {
  // A ramp over since the last Acquire is complete: its escalation is gone.
  EndCompletedRamp(now);
  if (from == State::kClosed && Ramping(now)) {
    // The dependency failed again while it was being eased back in: the
    // next escalation level, and for a local rule the reason says so.
    ++escalation_;
    if (reason != TransitionReason::kFleetFailureRate &&
        reason != TransitionReason::kFleetSlowCallRate) {
      reason = TransitionReason::kRampFailed;
    }
  }
  ramp_start_ns_ = 0;
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
    StartEpisode(now);
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

void Breaker::StartEpisode(Instant now) {
  Rare& r = rare();
  r.episode_start_ns = std::max<int64_t>(now.ns, 1);
  r.first_probe_pending = true;
}

void Breaker::CountFirstProbe(Verdict verdict) {
  if (rare_ == nullptr || !rare_->first_probe_pending ||
      verdict == Verdict::kNeutral) {
    return;
  }
  rare_->first_probe_pending = false;
  ++(verdict == Verdict::kSuccess ? rare_->first_probe_succeeded
                                  : rare_->first_probe_failed);
}

void Breaker::EndEpisode(Instant now) {
  if (rare_ == nullptr || rare_->episode_start_ns == 0) return;
  const double seconds =
      static_cast<double>(now.ns - rare_->episode_start_ns) / 1e9;
  const auto bound = std::lower_bound(kOpenDurationBucketBounds.begin(),
                                      kOpenDurationBucketBounds.end(), seconds);
  ++rare_->open_duration[bound - kOpenDurationBucketBounds.begin()];
  rare_->open_duration_sum_seconds += seconds;
  rare_->episode_start_ns = 0;
  rare_->first_probe_pending = false;
}

Transition Breaker::Close(Instant now, State from, TransitionReason reason) {
  CreditStateTime(now, &state_seconds_);
  state_entered_ns_ = now.ns;
  open_ = false;
  override_ = Override::kNone;
  half_open_seen_ = false;
  probe_permit_ = 0;
  probe_successes_ = 0;
  // A close after a probe (here or in the fleet) eases the load back in
  // when the policy ramps; the escalation stays until the ramp completes.
  const uint32_t escalation = escalation_;
  ClearHistory();
  ramp_start_ns_ = 0;
  if (policy_->recovery.ramp > absl::ZeroDuration() &&
      (reason == TransitionReason::kProbeSucceeded ||
       reason == TransitionReason::kFleet)) {
    ramp_start_ns_ = std::max<int64_t>(now.ns, 1);
    // The first attempt after the close goes through.
    ramp_credit_ = kRampCreditUnit -
                   static_cast<uint32_t>(
                       policy_->recovery.start_share * kRampCreditUnit + 0.5);
    escalation_ = escalation;
  }
  EndEpisode(now);
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
  return RateRule(now);
}

std::optional<TransitionReason> Breaker::RateRule(Instant now) const {
  const Policy& p = *policy_;
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

inline void Breaker::TendIfDue(Instant now,
                               std::optional<Transition>* transition) {
  if (ledger_ != nullptr && now.ns >= ledger_->due_ns()) {
    TendLedger(now, transition);
  }
  if (rare_ != nullptr && rare_->local_due_ns != 0 &&
      now.ns >= rare_->local_due_ns) {
    TendLocal(now, transition);
  }
}

inline void Breaker::RecordClosedAndMaybeOpen(
    Instant now, State before, Verdict verdict, bool slow, bool may_trip,
    absl::Duration retry_after, std::optional<Transition>* transition) {
  const auto trip = RecordClosed(now, verdict, slow, may_trip);
  if (trip.has_value() && !transition->has_value()) {
    *transition = Open(now, before, *trip, retry_after);
  }
}

AcquireResult Breaker::Acquire(uint32_t attempt,
                               std::optional<Transition>* transition) {
  const Instant now = NowInstant();
  last_activity_ns_ = now.ns;
  const Policy& p = *policy_;
  const bool retry = attempt > 0;
  TendIfDue(now, transition);

  AcquireResult r;
  r.state = DerivedState(now);
  Decision decision = Decision::kAllowed;

  switch (r.state) {
    case State::kForcedOpen:
      r.reason = RejectReason::kForcedOpen;
      break;
    case State::kClosed:
      if (ramp_start_ns_ != 0 && !RampAdmits(now, retry, transition)) {
        r.reason = RejectReason::kRamp;
        break;
      }
      [[fallthrough]];
    case State::kForcedClosed:
      if (retry && !RetryAllowed(now)) r.reason = RejectReason::kRetryBudget;
      break;
    case State::kOpen:
      r.reason = RejectReason::kOpen;
      r.retry_after = absl::Nanoseconds(open_until_ns_ - now.ns);
      break;
    case State::kHalfOpen: {
      if (!half_open_seen_ && !transition->has_value()) {
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
        probe_permit_ = IssuePermit(now, /*probe=*/true);
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
      r.permit = IssuePermit(now, /*probe=*/false);
    }
  } else if (!r.probe) {
    r.allowed = true;
    r.permit = IssuePermit(now, /*probe=*/false);
  }
  if (static_cast<size_t>(decision) < acquires_.size()) {
    ++acquires_[static_cast<int>(decision)];
  } else {
    ++rare().rejections[static_cast<int>(decision) - acquires_.size()];
  }

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
        EndEpisode(now);
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
      if (!open_) StartEpisode(now);
      open_ = true;
      // Bounded: a time left from a file or another process is never
      // negative, and never so far out that the clock's int64 nanoseconds
      // overflow (found by fuzz/state_file_fuzz).
      open_until_ns_ = now.ns + absl::ToInt64Nanoseconds(std::clamp(
                                    state.open_remaining, absl::ZeroDuration(),
                                    kMaxExternalOpen));
      escalation_ = state.escalation_level;
      ramp_start_ns_ = 0;
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
  const uint64_t permit_generation =
      (permit >> kGenerationShift) & kGenerationMask;
  const uint32_t seq =
      static_cast<uint32_t>(permit >> kSeqShift) & PermitLedger::kSeqMask;
  const bool is_probe = (permit & 1) != 0;

  const Instant now = NowInstant();
  last_activity_ns_ = now.ns;
  const Policy& p = *policy_;
  TendIfDue(now, transition);
  const PermitLedger::Mark mark = ledger_ != nullptr
                                      ? ledger_->MarkReported(seq, next_seq_)
                                      : PermitLedger::Mark{};
  if (mark.seen == PermitLedger::Seen::kDuplicate) {
    ++rare().duplicates[static_cast<int>(in.outcome)];
    return ReportResult{DerivedState(now), Effect::kDuplicate};
  }

  ObserveLatency(in.latency);
  const auto [verdict, slow, counted] = Count(in);
  const State before = DerivedState(now);
  ReportResult r;
  r.effect = Effect::kLate;

  const bool current = permit_generation == (generation_ & kGenerationMask);
  if (!current || before == State::kForcedOpen) {
    // Late: counted in metrics, changes nothing.
  } else if (before == State::kClosed || before == State::kForcedClosed) {
    r.effect = counted;
    if (mark.seen == PermitLedger::Seen::kFirstOfHung) {
      // The real outcome replaces the hung count, if the window still
      // holds it.
      const int64_t width = WindowWidth();
      window_.Sub(mark.hung_at_ns, width, kCalls);
      window_.Sub(mark.hung_at_ns, width, kFailures);
      window_.Sub(mark.hung_at_ns, width, kSlow);
    }
    RecordClosedAndMaybeOpen(now, before, verdict, slow,
                             /*may_trip=*/before == State::kClosed,
                             in.retry_after, transition);
  } else if (is_probe && permit == probe_permit_) {
    // The probe's result decides (open or half-open: a probe that reports
    // after its cooldown restarted cannot match, the generation moved).
    r.effect = counted;
    probe_permit_ = 0;
    CountFirstProbe(verdict);
    if (verdict == Verdict::kFailure) {
      ++escalation_;
      *transition =
          Open(now, before, TransitionReason::kProbeFailed, in.retry_after);
    } else if (verdict == Verdict::kSuccess &&
               ++probe_successes_ >= p.probe.required_successes) {
      *transition = Close(now, before, TransitionReason::kProbeSucceeded);
    }
  }
  if (r.effect == Effect::kLate) {
    ++rare().late[static_cast<int>(in.outcome)];
  } else {
    ++reports_[ReportSlot(in.outcome, r.effect)];
  }
  r.state = DerivedState(now);
  return r;
}

void Breaker::ObserveLatency(absl::Duration latency) {
  if (latency <= absl::ZeroDuration()) return;
  const double s = absl::ToDoubleSeconds(latency);
  const auto it = std::lower_bound(kLatencyBucketBounds.begin(),
                                   kLatencyBucketBounds.end(), s);
  if (latency_ == nullptr) latency_ = std::make_unique<Latency>();
  ++latency_->buckets[it - kLatencyBucketBounds.begin()];
  latency_->sum_seconds += s;
}

Breaker::Counted Breaker::Count(const ReportInput& in) const {
  const Policy& p = *policy_;
  Counted c;
  c.verdict = VerdictFor(in.outcome, p.rate_limited);
  c.slow = p.slow_call_rate.threshold > 0 &&
           in.latency >= p.slow_call_rate.duration &&
           in.latency > absl::ZeroDuration();
  c.effect = c.verdict == Verdict::kSuccess   ? Effect::kCountedSuccess
             : c.verdict == Verdict::kFailure ? Effect::kCountedFailure
                                              : Effect::kNeutral;
  return c;
}

// --- local decisions ---------------------------------------------------------

Breaker::LocalCounts Breaker::ApplyLocal(
    uint64_t generation, uint32_t grants,
    absl::Span<const ReportInput> outcomes,
    std::optional<Transition>* transition) {
  const Instant now = NowInstant();
  last_activity_ns_ = now.ns;
  TendIfDue(now, transition);
  LocalCounts counts;
  if (generation > generation_) {
    // Not a generation this breaker has had: invented.
    counts.refused = static_cast<uint32_t>(outcomes.size());
    return counts;
  }
  Rare& r = rare();
  if (grants > 0) {
    // Decisions made: counted whatever became of the calls since, and
    // deposited in the retry budget as first attempts are.
    r.rejections[static_cast<int>(Decision::kAllowedLocal) -
                 acquires_.size()] += grants;
    budget_.Add(now.ns, BudgetWidth(), kFirsts, grants);
  }
  if (r.local_generation != generation_) {
    r.local_generation = generation_;
    r.local_grants = 0;
    r.local_outcomes = 0;
    r.local_buckets.clear();
    r.local_due_ns = 0;
  }
  if (generation == generation_ && DerivedState(now) == State::kClosed) {
    r.local_grants += grants;
    AddLocalGrants(now, grants);
  }
  for (const ReportInput& in : outcomes) {
    const uint64_t generation_now = generation_;
    if (generation < generation_now) {
      ++r.late[static_cast<int>(in.outcome)];
      ++counts.late;
      continue;
    }
    if (r.local_outcomes >= r.local_grants) {
      ++counts.refused;
      continue;
    }
    ++r.local_outcomes;
    ++counts.counted;
    ConsumeLocalGrant();
    ObserveLatency(in.latency);
    const auto [verdict, slow, effect] = Count(in);
    ++reports_[ReportSlot(in.outcome, effect)];
    RecordClosedAndMaybeOpen(now, State::kClosed, verdict, slow,
                             /*may_trip=*/true, in.retry_after, transition);
  }
  return counts;
}

void Breaker::CountClientDecisions(uint32_t refused_local, uint32_t fail_open,
                                   uint32_t fail_closed) {
  if (refused_local + fail_open + fail_closed == 0) return;
  Rare& r = rare();
  r.client_refused_local += refused_local;
  r.client_fail_open += fail_open;
  r.client_fail_closed += fail_closed;
}

// --- admin -----------------------------------------------------------------

Transition Breaker::ForceOpen() { return Force(Override::kForcedOpen); }

Transition Breaker::ForceClose() { return Force(Override::kForcedClosed); }

Transition Breaker::Force(Override to) {
  const Instant now = NowInstant();
  EndCompletedRamp(now);
  const State from = DerivedState(now);
  CreditStateTime(now, &state_seconds_);
  state_entered_ns_ = now.ns;
  override_ = to;
  probe_permit_ = 0;
  ramp_start_ns_ = 0;
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
  // What a Watch client decides on: the mode, and whether it may decide
  // (local_decisions, or a ramp the new length ends or restarts).
  const State state = DerivedState(now);
  const bool mode_before = policy_->mode == Mode::kShadow;
  const bool local_before = LocalDecisions(now, state);
  policy_ = std::move(policy);
  CacheWidths();
  if (WindowWidth() != old_window) {
    window_.Rebucket(now.ns, old_window, WindowWidth());
  }
  if (BudgetWidth() != old_budget) {
    budget_.Rebucket(now.ns, old_budget, BudgetWidth());
  }
  // hang_after may have changed: tend the ledger at the next call.
  if (ledger_ != nullptr) ledger_->set_due_ns(0);
  if (mode_before == (policy_->mode == Mode::kShadow) &&
      local_before == LocalDecisions(now, state)) {
    return std::nullopt;
  }
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
         escalation_ == 0 && ramp_start_ns_ == 0 &&
         now.ns - last_activity_ns_ >= absl::ToInt64Nanoseconds(idle_ttl) &&
         Window(now).calls == 0 && InflightAt(now) == 0;
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
  s.admit_share = s.state == State::kClosed ? RampShare(now) : 1;
  // A ramp that has run its course clears the escalation at the next
  // Acquire; show it as it will be.
  if (ramp_start_ns_ != 0 && s.admit_share >= 1) s.escalation_level = 0;
  s.inflight = InflightAt(now);
  s.policy = policy_->match;
  s.shadow = policy_->mode == Mode::kShadow;
  s.probe_in_flight = s.state == State::kHalfOpen && probe_permit_ != 0 &&
                      now.ns < probe_until_ns_;
  s.local_decisions = LocalDecisions(now, s.state);
  s.failure_rate_threshold = policy_->failure_rate.threshold;
  s.failure_rate_min_calls = policy_->failure_rate.min_calls;
  s.slow_call_rate_threshold = policy_->slow_call_rate.threshold;
  s.consecutive_failures_threshold = policy_->consecutive_failures;
  s.state_age = absl::Nanoseconds(now.ns - state_entered_ns_);
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
  std::copy(acquires_.begin(), acquires_.end(), s.acquires.begin());
  for (int c = 1; c < kOutcomeClassCount; ++c) {
    const auto cls = static_cast<OutcomeClass>(c);
    const Effect e = NaturalEffect(cls);
    s.reports[c][static_cast<int>(e)] = reports_[ReportSlot(cls, e)];
  }
  s.reports[static_cast<int>(OutcomeClass::kRateLimited)]
           [static_cast<int>(Effect::kNeutral)] =
      reports_[kRateLimitedNeutralSlot];
  s.retries_granted = retries_granted_;
  s.retries_rejected = retries_rejected_;
  if (rare_ != nullptr) {
    s.transitions = rare_->transitions;
    s.hung_calls = rare_->hung_calls;
    s.client_refused_local = rare_->client_refused_local;
    s.client_fail_open = rare_->client_fail_open;
    s.client_fail_closed = rare_->client_fail_closed;
    s.first_probe_succeeded = rare_->first_probe_succeeded;
    s.first_probe_failed = rare_->first_probe_failed;
    s.open_duration_buckets = rare_->open_duration;
    s.open_duration_sum_seconds = rare_->open_duration_sum_seconds;
    for (int c = 1; c < kOutcomeClassCount; ++c) {
      s.reports[c][static_cast<int>(Effect::kDuplicate)] = rare_->duplicates[c];
      s.reports[c][static_cast<int>(Effect::kLate)] = rare_->late[c];
    }
    std::copy(rare_->rejections.begin(), rare_->rejections.end(),
              s.acquires.begin() + acquires_.size());
  }
  s.state_seconds = state_seconds_;
  CreditStateTime(now, &s.state_seconds);
  if (latency_ != nullptr) {
    s.latency_buckets = latency_->buckets;
    s.latency_sum_seconds = latency_->sum_seconds;
    for (uint64_t c : latency_->buckets) s.latency_count += c;
  }
  return s;
}

}  // namespace breakerd

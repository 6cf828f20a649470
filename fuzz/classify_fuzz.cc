// classify_fuzz: arbitrary raw outcomes -> Classify (server/engine/outcome.h),
// then a sequence of Acquire / Report / admin / clock operations on a
// Registry driven by a FakeClock, checked against the state machine of
// DESIGN.md ("The breaker"; "Hung calls, single-use permits, gentle
// recovery").
//
// Input layout (FuzzedDataProvider): one RawOutcome checked on its own, a
// policy (every field inside its documented range, inflight.hang_after,
// recovery.ramp and recovery.start_share included), then up to kMaxOps
// operations, each reading what it needs.
//
// The harness keeps, per breaker, what its snapshot does not show: the
// permit ledger and the ramp (fuzz/engine_model.h), the probe out, the
// last activity. With them every decision below is exact, except a retry
// in a closed breaker, which the retry budget may refuse.
//
// Invariants, each an abort when broken:
//  Classify
//   - OK exactly for a valid combination: explicit class 1..9, else
//     http_status 100..599, else grpc_code 0..16 (explicit > http > grpc;
//     a zero explicit class or http_status means "not set"); the class is
//     the one DESIGN.md's table gives; VerdictFor follows the table.
//   - Otherwise INVALID_ARGUMENT whose message starts with the offending
//     field ("outcome", "http_status", "grpc_code").
//  Hung calls (inflight.hang_after), at every Acquire and Report first
//   - The unreported permits of the current generation whose issue bucket
//     is hang_after old count, once, as slow failures in the window (never
//     in the failure streak) while the breaker is closed or forced closed;
//     hung_calls counts them. A closed breaker they tip over a rate rule
//     opens with reason hung_calls (ramp_failed while ramping).
//  Acquire (state read just before, same instant, after the hung calls)
//   - enforce: allowed == (permit != 0) == (reason == none); shadow: always
//     allowed with a permit. probe only when half-open with no probe out.
//   - The reason follows the state: forced open -> FORCED_OPEN; open ->
//     OPEN with retry_after = the cooldown left; half-open -> PROBE_IN_FLIGHT
//     while a probe is out, OPEN for a retry, else the probe; closed while
//     ramping -> RAMP for a retry and for the first attempts past the
//     ramp's count; closed and forced closed -> allowed, or RETRY_BUDGET
//     for a retry only. The decision counter of that reason (shadow_* in
//     shadow mode) goes up by one.
//   - The generation moves only at the first Acquire that sees half-open
//     (or when hung calls open it). A new breaker starts above every
//     generation an evicted one reached.
//  Report
//   - A permit this Registry never issued for that dependency (garbage,
//     zero, another dependency's) is INVALID_ARGUMENT naming "permit" and
//     changes nothing (whole snapshot compared); an invalid outcome is
//     INVALID_ARGUMENT naming its field and changes nothing. (A forged
//     value passes the permit's 17-bit tag with probability 2^-17, which
//     DESIGN.md allows: the rest of such an input is not checked, and the
//     process aborts if that happens more often than chance explains.)
//   - A permit reported before (and still tracked: within the permit
//     horizon) is DUPLICATE and changes nothing; this wins over late.
//   - An issued permit of an earlier generation, or any report while forced
//     open, is LATE and changes no state, counter or window.
//   - Closed / forced closed: the effect is the verdict's; a counted
//     outcome adds one call to the window (and a failure, a slow call),
//     less the permit's hung count if it was counted as hung and that
//     count is still in the window; success resets the failure streak,
//     failure extends it; a closed breaker opens iff a trip rule holds
//     afterwards (consecutive failures, failure rate, slow-call rate; while
//     ramping the reason is ramp_failed and the escalation one higher);
//     forced closed never opens.
//   - The half-open probe's report decides: failure re-opens with the
//     escalation one higher; success closes after required_successes (and
//     clears window and streak; the escalation too, unless the policy
//     ramps: then it stays until the ramp completes); neutral releases the
//     probe. Any other report while open / half-open is LATE.
//   - Every new open period's cooldown is base doubled per escalation,
//     capped at max, scaled by the jitter factor, and at least the
//     outcome's retry_after.
//  Always
//   - Per breaker: generation never decreases; failures, slow <= calls;
//     retry_after > 0 exactly when open; probe_in_flight only when
//     half-open; size() <= max_breakers; inflight, hung_calls and
//     admit_share are the models'; a ramp runs only while closed.
//   - EvictIdle removes exactly the breakers that are closed with no
//     override, no window, no streak, no escalation, no ramp (one that has
//     run its course ends there), no permit out (within the horizon, or
//     waiting to be counted as hung) and no Acquire/Report for idle_ttl.
//
// Fixed finding (the reproducer stays in crashes/): a ramp whose time was
// over but that no Acquire had ended kept its escalation for a trip by a
// Report or for a forced state, while the status showed 0. Every trip,
// override and eviction pass now ends such a ramp first.
#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "fuzz/engine_model.h"
#include "fuzz/fuzz_check.h"
#include "server/engine/clock.h"
#include "server/engine/outcome.h"
#include "server/engine/policy.h"
#include "server/engine/registry.h"
#include "server/engine/types.h"

namespace breakerd {
namespace {

using fuzz::Counting;
using fuzz::LedgerModel;
using fuzz::RampModel;

constexpr int kMaxOps = 96;
// Most permits one input's bursts may ask for (each is checked like any
// Acquire): enough for the permit ledger to outgrow its first words.
constexpr int kMaxBurstPermits = 1000;
// Largest latency / retry_after the service lets through (convert.h's
// kMaxReportDuration): the engine is fuzzed within the service's contract.
constexpr int64_t kMaxReportMillis = int64_t{24} * 3600 * 1000;

// The jitter draw, set by the input; Registry reads it through FuzzUniform.
double g_uniform = 0.5;
double FuzzUniform() { return g_uniform; }

// --- Classification, written from DESIGN.md's table -------------------------

// This oracle is deliberately independent of the engine: it does not call
// ClassifyHttpStatus, ClassifyGrpcCode or VerdictFor, nor share their
// tables, so a mistake in the engine's table cannot hide in its own
// oracle. Only the names used in messages (OutcomeClassName) are shared.

std::optional<OutcomeClass> ExpectedHttp(uint32_t s) {
  if (s < 100 || s > 599) return std::nullopt;
  if (s < 400) return OutcomeClass::kSuccess;
  if (s == 408 || s == 504) return OutcomeClass::kTimeout;
  if (s == 429) return OutcomeClass::kRateLimited;
  if (s == 401 || s == 403) return OutcomeClass::kAuthError;
  if (s < 500) return OutcomeClass::kBadRequest;
  return OutcomeClass::kServerError;
}

std::optional<OutcomeClass> ExpectedGrpc(int32_t c) {
  switch (c) {
    case 0:
      return OutcomeClass::kSuccess;
    case 1:
      return OutcomeClass::kCancelled;
    case 4:
      return OutcomeClass::kTimeout;
    case 14:
      return OutcomeClass::kConnectionError;
    case 8:
      return OutcomeClass::kRateLimited;
    case 7:
    case 16:
      return OutcomeClass::kAuthError;
    case 3:
    case 5:
    case 6:
    case 9:
    case 10:
    case 11:
    case 12:
      return OutcomeClass::kBadRequest;
    case 2:
    case 13:
    case 15:
      return OutcomeClass::kServerError;
    default:
      return std::nullopt;
  }
}

// The expected class, or the field an error must name.
struct Expected {
  std::optional<OutcomeClass> cls;
  const char* field = "";
};

Expected ExpectedClass(const RawOutcome& raw) {
  if (raw.explicit_class != 0) {
    if (raw.explicit_class >= 1 && raw.explicit_class <= 9) {
      return {static_cast<OutcomeClass>(raw.explicit_class), ""};
    }
    return {std::nullopt, "outcome"};
  }
  if (raw.http_status != 0) {
    std::optional<OutcomeClass> c = ExpectedHttp(raw.http_status);
    return {c, c ? "" : "http_status"};
  }
  if (raw.grpc_code.has_value()) {
    std::optional<OutcomeClass> c = ExpectedGrpc(*raw.grpc_code);
    return {c, c ? "" : "grpc_code"};
  }
  return {std::nullopt, "outcome"};
}

Verdict ExpectedVerdict(OutcomeClass c, RateLimitedHandling rl) {
  switch (c) {
    case OutcomeClass::kSuccess:
    case OutcomeClass::kSoftFailure:
      return Verdict::kSuccess;
    case OutcomeClass::kTimeout:
    case OutcomeClass::kConnectionError:
    case OutcomeClass::kServerError:
      return Verdict::kFailure;
    case OutcomeClass::kRateLimited:
      return rl == RateLimitedHandling::kCount ? Verdict::kFailure
                                               : Verdict::kNeutral;
    default:
      return Verdict::kNeutral;
  }
}

std::string RawText(const RawOutcome& raw) {
  return absl::StrCat(
      "{explicit ", raw.explicit_class, ", http ", raw.http_status, ", grpc ",
      raw.grpc_code ? absl::StrCat(*raw.grpc_code) : std::string("none"), "}");
}

// Classify against the table; returns the class when valid.
std::optional<OutcomeClass> CheckClassify(const RawOutcome& raw) {
  const Expected want = ExpectedClass(raw);
  const absl::StatusOr<OutcomeClass> got = Classify(raw);
  if (want.cls.has_value()) {
    FUZZ_CHECK(got.ok(), RawText(raw), " -> ", got.status().ToString());
    FUZZ_CHECK(*got == *want.cls, RawText(raw), " -> ", OutcomeClassName(*got),
               ", want ", OutcomeClassName(*want.cls));
    FUZZ_CHECK(OutcomeClassName(*got) != "unknown");
    for (RateLimitedHandling rl :
         {RateLimitedHandling::kCount, RateLimitedHandling::kIgnore}) {
      FUZZ_CHECK(VerdictFor(*got, rl) == ExpectedVerdict(*got, rl),
                 OutcomeClassName(*got));
    }
    return *got;
  }
  FUZZ_CHECK(!got.ok(), RawText(raw), " accepted as ", OutcomeClassName(*got));
  FUZZ_CHECK(got.status().code() == absl::StatusCode::kInvalidArgument,
             got.status().ToString());
  FUZZ_CHECK(
      absl::StartsWith(got.status().message(), absl::StrCat(want.field, ":")),
      RawText(raw), " -> ", got.status().ToString(), " (want field ",
      want.field, ")");
  return std::nullopt;
}

RawOutcome ConsumeRawOutcome(FuzzedDataProvider& fdp) {
  RawOutcome raw;
  switch (fdp.ConsumeIntegralInRange(0, 3)) {
    case 0:
      raw.explicit_class = 0;
      break;
    case 1:
    case 2:
      raw.explicit_class = fdp.ConsumeIntegralInRange(-2, 11);
      break;
    default:
      raw.explicit_class = fdp.ConsumeIntegral<int>();
  }
  switch (fdp.ConsumeIntegralInRange(0, 3)) {
    case 0:
      raw.http_status = 0;
      break;
    case 1:
    case 2:
      raw.http_status = fdp.ConsumeIntegralInRange<uint32_t>(90, 610);
      break;
    default:
      raw.http_status = fdp.ConsumeIntegral<uint32_t>();
  }
  switch (fdp.ConsumeIntegralInRange(0, 3)) {
    case 0:
      break;
    case 1:
    case 2:
      raw.grpc_code = fdp.ConsumeIntegralInRange<int32_t>(-2, 18);
      break;
    default:
      raw.grpc_code = fdp.ConsumeIntegral<int32_t>();
  }
  return raw;
}

// --- Policy ------------------------------------------------------------------

absl::Duration ConsumeMillis(FuzzedDataProvider& fdp, int64_t lo, int64_t hi) {
  return absl::Milliseconds(fdp.ConsumeIntegralInRange<int64_t>(lo, hi));
}

// A duration of 0 (off, half the time), 1 ms .. 10 s, or a quarter of a
// nanosecond (absl::Duration's resolution, which the config keeps) ..
// `max`.
absl::Duration ConsumeDurationOrOff(FuzzedDataProvider& fdp,
                                    absl::Duration max) {
  switch (fdp.ConsumeIntegralInRange(0, 3)) {
    case 0:
    case 1:
      return absl::ZeroDuration();
    case 2:
      return ConsumeMillis(fdp, 1, 10000);
    default:
      return absl::Nanoseconds(fdp.ConsumeIntegralInRange<int64_t>(
                 1, 4 * absl::ToInt64Nanoseconds(max))) /
             4;
  }
}

// The longest recovery.ramp the config accepts (server/config/config.cc).
constexpr absl::Duration kMaxRecoveryRamp = absl::Hours(1);

// A policy inside every documented range, biased to small numbers so that
// breakers move within a short input.
Policy ConsumePolicy(FuzzedDataProvider& fdp) {
  Policy p;
  p.mode =
      fdp.ConsumeIntegralInRange(0, 3) == 0 ? Mode::kShadow : Mode::kEnforce;
  p.consecutive_failures = fdp.ConsumeIntegralInRange<uint32_t>(0, 6);
  const double thresholds[] = {0, 0.25, 0.5, 1, 0.01};
  p.failure_rate.threshold = thresholds[fdp.ConsumeIntegralInRange(0, 4)];
  p.failure_rate.min_calls = fdp.ConsumeIntegralInRange<uint32_t>(1, 8);
  p.failure_rate.window = ConsumeMillis(fdp, 1000, 60000);
  p.slow_call_rate.threshold = thresholds[fdp.ConsumeIntegralInRange(0, 4)];
  p.slow_call_rate.min_calls = fdp.ConsumeIntegralInRange<uint32_t>(1, 8);
  p.slow_call_rate.duration = ConsumeMillis(fdp, 1, 5000);
  p.cooldown.base = ConsumeMillis(fdp, 1, 60000);
  p.cooldown.max = p.cooldown.base * fdp.ConsumeIntegralInRange<int64_t>(1, 64);
  p.cooldown.max = std::min(p.cooldown.max, absl::Hours(24));
  const double jitters[] = {0, 0.1, 0.5, 0.999};
  p.cooldown.jitter = jitters[fdp.ConsumeIntegralInRange(0, 3)];
  p.probe.lease = ConsumeMillis(fdp, 1, 20000);
  p.probe.required_successes = fdp.ConsumeIntegralInRange<uint32_t>(1, 3);
  p.rate_limited = fdp.ConsumeBool() ? RateLimitedHandling::kIgnore
                                     : RateLimitedHandling::kCount;
  p.retry_budget.ratio = fdp.ConsumeIntegralInRange(0, 20) / 10.0;
  p.retry_budget.min_per_second = fdp.ConsumeIntegralInRange(0, 20) / 10.0;
  p.retry_budget.ttl = ConsumeMillis(fdp, 1000, 20000);
  p.inflight.hang_after = ConsumeDurationOrOff(fdp, kMaxHangAfter);
  p.recovery.ramp = ConsumeDurationOrOff(fdp, kMaxRecoveryRamp);
  // (0, 1]: the edges, and any millionth.
  const double shares[] = {0.1, 0.5, 1, 0.25, 0.000001};
  const int share = fdp.ConsumeIntegralInRange(0, 5);
  p.recovery.start_share =
      share < 5 ? shares[share]
                : fdp.ConsumeIntegralInRange(1, 1000000) / 1000000.0;
  return p;
}

// --- Snapshots ---------------------------------------------------------------

// Everything a refused call must leave alone (the clock does not move
// between the two reads, so even the time-derived fields compare equal).
auto Comparable(const BreakerSnapshot& s) {
  std::vector<std::tuple<int, int, int, uint64_t>> transitions;
  for (const auto& t : s.transitions) {
    transitions.emplace_back(static_cast<int>(t.from), static_cast<int>(t.to),
                             static_cast<int>(t.reason), t.count);
  }
  std::sort(transitions.begin(), transitions.end());
  return std::make_tuple(
      s.state, s.generation, s.retry_after, s.window.calls, s.window.failures,
      s.window.slow, s.consecutive_failures, s.escalation_level,
      s.probe_in_flight, s.acquires, s.reports, s.retries_granted,
      s.retries_rejected, transitions, s.latency_buckets, s.latency_count,
      s.inflight, s.hung_calls, s.admit_share);
}

std::string SnapText(const BreakerSnapshot& s) {
  return absl::StrCat(
      s.dependency, ": ", StateName(s.state), " gen ", s.generation,
      " retry_after ", absl::FormatDuration(s.retry_after), " window ",
      s.window.calls, "/", s.window.failures, "/", s.window.slow, " streak ",
      s.consecutive_failures, " escalation ", s.escalation_level, " inflight ",
      s.inflight, " hung ", s.hung_calls, " share ", s.admit_share,
      s.probe_in_flight ? " probe out" : "");
}

uint64_t Sum(const std::array<uint64_t, kDecisionCount>& a) {
  uint64_t n = 0;
  for (uint64_t v : a) n += v;
  return n;
}

uint64_t TransitionCount(const BreakerSnapshot& s, State from, State to,
                         TransitionReason reason) {
  for (const auto& t : s.transitions) {
    if (t.from == from && t.to == to && t.reason == reason) return t.count;
  }
  return 0;
}

// The breakerd_acquire_total decision an answer is counted under.
Decision DecisionOf(RejectReason reason, bool probe, bool shadow) {
  switch (reason) {
    case RejectReason::kNone:
      return probe ? Decision::kProbe : Decision::kAllowed;
    case RejectReason::kOpen:
      return shadow ? Decision::kShadowRejectedOpen : Decision::kRejectedOpen;
    case RejectReason::kProbeInFlight:
      return shadow ? Decision::kShadowRejectedProbeInFlight
                    : Decision::kRejectedProbeInFlight;
    case RejectReason::kRetryBudget:
      return shadow ? Decision::kShadowRejectedRetryBudget
                    : Decision::kRejectedRetryBudget;
    case RejectReason::kForcedOpen:
      return shadow ? Decision::kShadowRejectedForcedOpen
                    : Decision::kRejectedForcedOpen;
    case RejectReason::kRamp:
      return shadow ? Decision::kShadowRejectedRamp : Decision::kRejectedRamp;
  }
  FUZZ_CHECK(false, "reject reason ", static_cast<int>(reason));
  return Decision::kAllowed;
}

bool SameWindow(const WindowCounts& a, const WindowCounts& b) {
  return a.calls == b.calls && a.failures == b.failures && a.slow == b.slow;
}

// Hung calls counted now: slow failures in the window.
void AddHung(BreakerSnapshot* v, uint64_t hung) {
  v->window.calls += hung;
  v->window.failures += hung;
  v->window.slow += hung;
  v->hung_calls += hung;
}

// --- The fuzzed session -----------------------------------------------------

struct IssuedPermit {
  std::string dependency;
  uint64_t permit = 0;
  uint64_t generation = 0;  // the breaker's generation when issued
  bool probe = false;
  uint32_t index = 0;  // the breaker's permit number (LedgerModel)
};

// What the harness knows about one breaker beyond its snapshot.
struct Tracked {
  explicit Tracked(const Policy& p) : ledger(p), ramp(p) {}
  int64_t last_activity_ns = 0;
  uint64_t generation = 0;
  // The probe out in the current generation (0: none), and the probe
  // successes in a row counted in the current generation.
  uint64_t probe_permit = 0;
  uint32_t probe_successes = 0;
  // The current generation began with the open -> half-open transition
  // (which the first Acquire to see the cooldown over records).
  bool half_open_recorded = false;
  LedgerModel ledger;
  RampModel ramp;
};

// What an Acquire must answer, planned from the breaker as it was.
struct AcquirePlan {
  // The state the decision is taken in (after any hung calls).
  State state = State::kClosed;
  // The reasons the answer may carry (kNone: allowed); two only for a
  // retry, which the retry budget may refuse.
  std::vector<RejectReason> reasons;
  // With kNone: the half-open probe.
  bool probe = false;
  // Hung calls counted first, and the open they caused (its reason).
  uint64_t hung = 0;
  std::optional<TransitionReason> trip;

  bool Allows(RejectReason r) const {
    return std::find(reasons.begin(), reasons.end(), r) != reasons.end();
  }
  bool MayReject() const {
    return std::any_of(reasons.begin(), reasons.end(),
                       [](RejectReason r) { return r != RejectReason::kNone; });
  }
  std::string Text() const {
    std::string out = absl::StrCat("state ", StateName(state), " reasons");
    for (RejectReason r : reasons)
      absl::StrAppend(&out, " ", static_cast<int>(r));
    if (probe) absl::StrAppend(&out, " (probe)");
    if (hung > 0) absl::StrAppend(&out, " hung ", hung);
    if (trip) absl::StrAppend(&out, " opened: ", TransitionReasonName(*trip));
    return out;
  }
};

using What = std::function<std::string()>;

class Session {
 public:
  Session(std::shared_ptr<const PolicySet> set)
      : set_(std::move(set)),
        registry_(set_, &clock_, /*permit_secret=*/0x5eed, &FuzzUniform) {}

  void Run(FuzzedDataProvider& fdp) {
    for (int op = 0; op < kMaxOps && fdp.remaining_bytes() > 0; ++op) {
      switch (fdp.ConsumeIntegralInRange(0, 13)) {
        case 0:
        case 1:
          Acquire(PickName(fdp), ConsumeAttempt(fdp));
          break;
        case 2:
        case 3:
          ReportIssued(fdp);
          break;
        case 4:
          ReportForged(fdp);
          break;
        case 5:
          Advance(fdp);
          break;
        case 6:
          Admin(fdp);
          break;
        case 7:
          g_uniform = fdp.ConsumeIntegralInRange(0, 1000) / 1001.0;
          FUZZ_TRACE("uniform = ", g_uniform);
          break;
        case 8:
          AcquireFirst(fdp);
          break;
        case 9:
          Evict();
          break;
        case 10:
          Acquire(fdp.ConsumeRandomLengthString(8), 0);  // maybe a bad name
          break;
        case 11:
          Burst(fdp);
          break;
        case 12:
          ReportAll(fdp);
          break;
        default:
          ReportIssued(fdp);
      }
      if (abandoned_) return;
      CheckAll();
    }
  }

 private:
  static constexpr const char* kNames[] = {"a", "openai/key-1", "b.c:d@e-f_g",
                                           "z"};

  std::string PickName(FuzzedDataProvider& fdp) {
    return kNames[fdp.ConsumeIntegralInRange(0, 3)];
  }

  static uint32_t ConsumeAttempt(FuzzedDataProvider& fdp) {
    switch (fdp.ConsumeIntegralInRange(0, 5)) {
      case 0:
        return 1;
      case 1:
        return fdp.ConsumeIntegral<uint32_t>();
      default:
        return 0;
    }
  }

  const Policy& PolicyOf(const std::string& name) const {
    return *set_->Match(name);
  }

  std::optional<BreakerSnapshot> Get(const std::string& name) const {
    absl::StatusOr<BreakerSnapshot> s = registry_.Get(name);
    if (!s.ok()) {
      FUZZ_CHECK(
          absl::IsNotFound(s.status()) || absl::IsInvalidArgument(s.status()),
          s.status().ToString());
      return std::nullopt;
    }
    return *s;
  }

  // The model of a breaker (a new one for a name without a breaker).
  Tracked& Track(const std::string& name) {
    auto it = tracked_.find(name);
    if (it == tracked_.end()) {
      it = tracked_.emplace(name, Tracked(PolicyOf(name))).first;
    }
    return it->second;
  }

  // The breaker an Acquire or a forced state creates, as it starts.
  BreakerSnapshot Fresh(const std::string& name) const {
    BreakerSnapshot s;
    s.dependency = name;
    s.generation = floor_;
    return s;
  }

  // The breaker moved to the generation `s` shows (in the middle of an
  // operation: before any permit the operation issues).
  static void NewGeneration(Tracked& t, const BreakerSnapshot& s) {
    t.generation = s.generation;
    t.probe_permit = 0;
    t.probe_successes = 0;
    t.half_open_recorded = s.state == State::kHalfOpen;
    t.ledger.NewGeneration();
  }

  // Bookkeeping after any operation that may have moved `s`'s generation.
  void Observe(const BreakerSnapshot& s) {
    Tracked& t = Track(s.dependency);
    FUZZ_CHECK(s.generation >= t.generation, SnapText(s), " was gen ",
               t.generation);
    if (s.generation != t.generation) NewGeneration(t, s);
  }

  // A closed breaker opens on `rule` (`v`: the breaker as expected, moved
  // to open). Returns the reason it records.
  TransitionReason TripFromClosed(Tracked& t, BreakerSnapshot* v,
                                  TransitionReason rule) {
    const int64_t now = clock_.NowNanos();
    TransitionReason reason = rule;
    if (t.ramp.Ramping(now)) {
      // Re-opened while easing back in: the next escalation level.
      reason = TransitionReason::kRampFailed;
      ++v->escalation_level;
    }
    t.ramp.Stop();
    FUZZ_TRACE("  opens: ", TransitionReasonName(reason), ", escalation ",
               v->escalation_level);
    v->state = State::kOpen;
    ++v->generation;
    v->probe_in_flight = false;
    NewGeneration(t, *v);
    return reason;
  }

  // Cooldown bounds for an open period that started now (jitter scales
  // within [1 - jitter, 1 + jitter]; a retry_after hint is a floor).
  void CheckCooldown(const BreakerSnapshot& s, absl::Duration hint) const {
    const Policy& p = PolicyOf(s.dependency);
    absl::Duration c = p.cooldown.base;
    for (uint32_t i = 0; i < s.escalation_level && c < p.cooldown.max; ++i) {
      c *= 2;
    }
    c = std::min(c, p.cooldown.max);
    const absl::Duration lo =
        std::max(c * (1 - p.cooldown.jitter), hint) - absl::Nanoseconds(1);
    const absl::Duration hi =
        std::max(c * (1 + p.cooldown.jitter), hint) + absl::Nanoseconds(1);
    FUZZ_CHECK(s.retry_after >= lo && s.retry_after <= hi, SnapText(s),
               " cooldown outside [", absl::FormatDuration(lo), ", ",
               absl::FormatDuration(hi), "] for escalation ",
               s.escalation_level);
  }

  // `after` is what the harness expects (`want`) in every field an
  // operation may move.
  static void CheckExpected(const BreakerSnapshot& want,
                            const BreakerSnapshot& after, const What& what) {
    FUZZ_CHECK(after.state == want.state &&
                   after.generation == want.generation &&
                   SameWindow(after.window, want.window) &&
                   after.consecutive_failures == want.consecutive_failures &&
                   after.escalation_level == want.escalation_level &&
                   after.probe_in_flight == want.probe_in_flight &&
                   after.hung_calls == want.hung_calls,
               what(), "; after: ", SnapText(after), "; want ", SnapText(want));
  }

  // Plans an Acquire of `name` from `v` (the breaker as it is, moved to
  // what it becomes before a permit is issued) and moves the models.
  AcquirePlan PlanAcquire(const std::string& name, uint32_t attempt, Tracked& t,
                          BreakerSnapshot* v, const What& what) {
    const int64_t now = clock_.NowNanos();
    const bool retry = attempt > 0;
    AcquirePlan plan;
    plan.hung = t.ledger.Tend(now, v->state);
    if (plan.hung > 0) {
      AddHung(v, plan.hung);
      if (v->state == State::kClosed &&
          fuzz::RateRuleHolds(PolicyOf(name), v->window)) {
        plan.trip = TripFromClosed(t, v, TransitionReason::kHungCalls);
      }
    }
    plan.state = v->state;
    switch (v->state) {
      case State::kForcedOpen:
        plan.reasons = {RejectReason::kForcedOpen};
        break;
      case State::kClosed:
        if (t.ramp.active() && !t.ramp.Admits(now, retry)) {
          plan.reasons = {RejectReason::kRamp};
          break;
        }
        [[fallthrough]];
      case State::kForcedClosed:
        plan.reasons = {RejectReason::kNone};
        if (retry) plan.reasons.push_back(RejectReason::kRetryBudget);
        break;
      case State::kOpen:
        plan.reasons = {RejectReason::kOpen};
        break;
      case State::kHalfOpen:
        if (!t.half_open_recorded) {
          ++v->generation;
          NewGeneration(t, *v);
        }
        if (v->probe_in_flight) {
          plan.reasons = {RejectReason::kProbeInFlight};
        } else if (retry) {
          plan.reasons = {RejectReason::kOpen};
        } else {
          plan.reasons = {RejectReason::kNone};
          plan.probe = true;
        }
        break;
    }
    return plan;
  }

  // Checks one answer against its plan, and issues its permit in the
  // models (`v` then shows the probe out).
  void CheckAnswer(const std::string& name, const AcquirePlan& plan,
                   const AcquireResult& r, Tracked& t, BreakerSnapshot* v,
                   const What& what) {
    const bool shadow = PolicyOf(name).mode == Mode::kShadow;
    FUZZ_CHECK(r.state == plan.state, what(), "; plan: ", plan.Text());
    FUZZ_CHECK(plan.Allows(r.reason), what(), "; plan: ", plan.Text());
    FUZZ_CHECK(r.allowed == (r.permit != 0), what());
    FUZZ_CHECK(r.allowed == (shadow || r.reason == RejectReason::kNone),
               what());
    FUZZ_CHECK(r.probe == (plan.probe && r.reason == RejectReason::kNone),
               what(), "; plan: ", plan.Text());
    FUZZ_CHECK(r.retry_after >= absl::ZeroDuration(), what());
    if (r.reason == RejectReason::kProbeInFlight) {
      FUZZ_CHECK(r.retry_after > absl::ZeroDuration(), what());
    }
    if (!r.allowed) return;
    const uint32_t index = t.ledger.Issue(clock_.NowNanos());
    issued_.push_back({name, r.permit, v->generation, r.probe, index});
    if (r.probe) {
      t.probe_permit = r.permit;
      v->probe_in_flight = true;
    }
  }

  // The open an Acquire's hung calls caused, as the after snapshot shows.
  void CheckHungTrip(const AcquirePlan& plan, const BreakerSnapshot& before,
                     const BreakerSnapshot& after, const What& what) const {
    if (!plan.trip) return;
    FUZZ_CHECK(
        TransitionCount(after, State::kClosed, State::kOpen, *plan.trip) ==
            TransitionCount(before, State::kClosed, State::kOpen, *plan.trip) +
                1,
        what(), " reason ", TransitionReasonName(*plan.trip));
    CheckCooldown(after, absl::ZeroDuration());
  }

  void Acquire(const std::string& name, uint32_t attempt) {
    if (ValidateDependency(name).ok()) used_.insert(name);
    const std::optional<BreakerSnapshot> before = Get(name);
    const bool existed = before.has_value();
    const absl::StatusOr<AcquireResult> r = registry_.Acquire(name, attempt);
    FUZZ_TRACE("Acquire(", name, ", ", attempt, ") -> ",
               r.ok() ? absl::StrCat(r->allowed ? "allowed" : "rejected",
                                     r->probe ? " probe" : "", " reason ",
                                     static_cast<int>(r->reason))
                      : r.status().ToString());
    if (!r.ok()) {
      if (absl::IsInvalidArgument(r.status())) {
        FUZZ_CHECK(!ValidateDependency(name).ok(), r.status().ToString());
        FUZZ_CHECK(absl::StartsWith(r.status().message(), "dependency:"),
                   r.status().ToString());
      } else {
        FUZZ_CHECK(absl::IsResourceExhausted(r.status()),
                   r.status().ToString());
        FUZZ_CHECK(!existed && registry_.size() >= set_->limits.max_breakers,
                   r.status().ToString());
        FUZZ_CHECK(absl::StrContains(r.status().message(), "max_breakers"));
      }
      FUZZ_CHECK(!Get(name).has_value());  // nothing created
      return;
    }
    FUZZ_CHECK(ValidateDependency(name).ok(), name);
    const std::optional<BreakerSnapshot> after = Get(name);
    FUZZ_CHECK(after.has_value());
    const BreakerSnapshot start = existed ? *before : Fresh(name);
    Tracked& t = Track(name);
    if (!existed) Observe(start);
    const auto what = [&] {
      return std::string(absl::StrCat(
          "Acquire(", name, ", ", attempt, ") allowed ", r->allowed, " permit ",
          r->permit, " probe ", r->probe, " reason ",
          static_cast<int>(r->reason), " state ", StateName(r->state),
          "; before: ", existed ? SnapText(*before) : "absent"));
    };
    BreakerSnapshot v = start;
    const AcquirePlan plan = PlanAcquire(name, attempt, t, &v, what);
    FUZZ_TRACE("  plan: ", plan.Text());
    CheckAnswer(name, plan, *r, t, &v, what);
    if (plan.state == State::kOpen) {
      // The cooldown left (the new one after hung calls opened it).
      FUZZ_CHECK(r->retry_after ==
                     (plan.trip ? after->retry_after : start.retry_after),
                 what());
      FUZZ_CHECK(r->retry_after > absl::ZeroDuration(), what());
    }
    CheckExpected(v, *after, what);
    CheckHungTrip(plan, start, *after, what);
    const Decision d =
        DecisionOf(r->reason, r->probe, PolicyOf(name).mode == Mode::kShadow);
    FUZZ_CHECK(after->acquires[static_cast<int>(d)] ==
                   start.acquires[static_cast<int>(d)] + 1,
               what(), " decision ", DecisionName(d));
    FUZZ_CHECK(Sum(after->acquires) == Sum(start.acquires) + 1, what());
    t.last_activity_ns = clock_.NowNanos();
    Observe(*after);
  }

  // Acquires up to 100 times in a row, now (bounded per input).
  void Burst(FuzzedDataProvider& fdp) {
    const std::string name = PickName(fdp);
    const int n = std::min(fdp.ConsumeIntegralInRange(1, 100),
                           kMaxBurstPermits - burst_permits_);
    FUZZ_TRACE("burst of ", n, " Acquire(", name, ")");
    for (int i = 0; i < n; ++i) {
      ++burst_permits_;
      Acquire(name, 0);
    }
  }

  RawOutcome ConsumeReportOutcome(FuzzedDataProvider& fdp) {
    RawOutcome raw;
    if (fdp.ConsumeIntegralInRange(0, 7) == 0) return ConsumeRawOutcome(fdp);
    switch (fdp.ConsumeIntegralInRange(0, 2)) {
      case 0:
        raw.explicit_class = fdp.ConsumeIntegralInRange(1, 9);
        break;
      case 1: {
        const uint32_t statuses[] = {200, 204, 301, 400, 401, 403, 404,
                                     408, 429, 500, 502, 503, 504, 529};
        raw.http_status = statuses[fdp.ConsumeIntegralInRange(0, 13)];
        break;
      }
      default:
        raw.grpc_code = fdp.ConsumeIntegralInRange(0, 16);
    }
    return raw;
  }

  ReportRequestFacts ConsumeFacts(FuzzedDataProvider& fdp) {
    ReportRequestFacts f;
    f.outcome = ConsumeReportOutcome(fdp);
    switch (fdp.ConsumeIntegralInRange(0, 3)) {
      case 0:
        break;
      case 1:
        f.latency = absl::Milliseconds(
            fdp.ConsumeIntegralInRange<int64_t>(0, kMaxReportMillis));
        break;
      default:
        f.latency =
            absl::Milliseconds(fdp.ConsumeIntegralInRange<int64_t>(0, 6000));
    }
    if (fdp.ConsumeIntegralInRange(0, 3) == 0) {
      f.retry_after = absl::Milliseconds(
          fdp.ConsumeIntegralInRange<int64_t>(0, kMaxReportMillis));
    }
    return f;
  }

  // A report refused: INVALID_ARGUMENT naming `field`, and nothing changed
  // in any breaker.
  void CheckRefused(const absl::StatusOr<ReportResult>& r,
                    absl::string_view field,
                    const std::vector<BreakerSnapshot>& before,
                    const What& what) {
    FUZZ_CHECK(!r.ok(), what(), " accepted with effect ",
               r.ok() ? EffectName(r->effect) : "");
    FUZZ_CHECK(absl::IsInvalidArgument(r.status()), what(), " -> ",
               r.status().ToString());
    FUZZ_CHECK(absl::StartsWith(r.status().message(), absl::StrCat(field, ":")),
               what(), " -> ", r.status().ToString(), " (want field ", field,
               ")");
    CheckUnchanged(before, what);
  }

  // Every breaker, by name. Reads the names this session used rather than
  // Registry::List (which locks all 256 shards); CheckAll compares the
  // count with Registry::size().
  std::vector<BreakerSnapshot> Sorted() const {
    std::vector<BreakerSnapshot> all;
    for (const std::string& name : used_) {
      if (std::optional<BreakerSnapshot> s = Get(name)) {
        all.push_back(*std::move(s));
      }
    }
    return all;
  }

  void CheckUnchanged(const std::vector<BreakerSnapshot>& before,
                      const What& what) const {
    const std::vector<BreakerSnapshot> after = Sorted();
    FUZZ_CHECK(after.size() == before.size(), what());
    for (size_t i = 0; i < after.size(); ++i) {
      FUZZ_CHECK(Comparable(after[i]) == Comparable(before[i]), what(),
                 " changed ", SnapText(before[i]), " -> ", SnapText(after[i]));
    }
  }

  void ReportIssued(FuzzedDataProvider& fdp) {
    if (issued_.empty()) return;
    const IssuedPermit p =
        issued_[fdp.ConsumeIntegralInRange<size_t>(0, issued_.size() - 1)];
    ReportPermit(p, ConsumeFacts(fdp));
  }

  // Reports every permit issued for one dependency (again), in issue order
  // or the reverse, with the same facts.
  void ReportAll(FuzzedDataProvider& fdp) {
    const std::string name = PickName(fdp);
    const bool reverse = fdp.ConsumeBool();
    const ReportRequestFacts facts = ConsumeFacts(fdp);
    std::vector<IssuedPermit> mine;
    for (const IssuedPermit& p : issued_) {
      if (p.dependency == name) mine.push_back(p);
    }
    if (reverse) std::reverse(mine.begin(), mine.end());
    FUZZ_TRACE("report all ", mine.size(), " permits of ", name,
               reverse ? ", newest first" : "");
    for (const IssuedPermit& p : mine) ReportPermit(p, facts);
  }

  void ReportPermit(const IssuedPermit& p, const ReportRequestFacts& facts) {
    const std::vector<BreakerSnapshot> all = Sorted();
    const std::optional<BreakerSnapshot> before = Get(p.dependency);
    const uint64_t unknown_before = registry_.unknown_permits();
    const absl::StatusOr<ReportResult> r =
        registry_.Report(p.dependency, p.permit, facts);
    const auto what = [&] {
      return std::string(absl::StrCat(
          "Report(", p.dependency, ", issued permit ", p.permit, " #", p.index,
          " gen ", p.generation, p.probe ? " probe" : "", ", ",
          RawText(facts.outcome), ", latency ",
          absl::FormatDuration(facts.latency), ", retry_after ",
          absl::FormatDuration(facts.retry_after),
          "); before: ", before ? SnapText(*before) : "absent"));
    };

    FUZZ_TRACE(what(), " -> ",
               r.ok() ? EffectName(r->effect) : r.status().ToString());
    const std::optional<OutcomeClass> cls = CheckClassify(facts.outcome);
    if (!cls.has_value()) {
      CheckRefused(r, ExpectedClass(facts.outcome).field, all, what);
      return;
    }
    // Permits of evicted breakers are forgotten (Evict).
    FUZZ_CHECK(before.has_value(), what());
    FUZZ_CHECK(r.ok(), what(), " -> ", r.status().ToString());
    FUZZ_CHECK(registry_.unknown_permits() == unknown_before, what());
    const BreakerSnapshot after = *Get(p.dependency);
    const auto both = [&] {
      return std::string(absl::StrCat(what(), "; after: ", SnapText(after),
                                      "; effect ", EffectName(r->effect)));
    };
    FUZZ_CHECK(r->state == after.state, both());
    const int64_t now = clock_.NowNanos();
    Tracked& t = Track(p.dependency);
    t.last_activity_ns = now;

    const Policy& policy = PolicyOf(p.dependency);
    const Verdict verdict = ExpectedVerdict(*cls, policy.rate_limited);
    const Effect counted =
        verdict == Verdict::kSuccess   ? Effect::kCountedSuccess
        : verdict == Verdict::kFailure ? Effect::kCountedFailure
                                       : Effect::kNeutral;
    const bool slow = policy.slow_call_rate.threshold > 0 &&
                      facts.latency > absl::ZeroDuration() &&
                      facts.latency >= policy.slow_call_rate.duration;

    // First the hung calls, which may open the breaker.
    BreakerSnapshot v = *before;
    std::optional<TransitionReason> hung_trip;
    const uint64_t hung = t.ledger.Tend(now, v.state);
    if (hung > 0) {
      AddHung(&v, hung);
      if (v.state == State::kClosed && fuzz::RateRuleHolds(policy, v.window)) {
        hung_trip = TripFromClosed(t, &v, TransitionReason::kHungCalls);
      }
    }
    if (hung_trip) {
      FUZZ_CHECK(
          TransitionCount(after, State::kClosed, State::kOpen, *hung_trip) ==
              TransitionCount(*before, State::kClosed, State::kOpen,
                              *hung_trip) +
                  1,
          both(), " hung calls: ", TransitionReasonName(*hung_trip));
      CheckCooldown(after, absl::ZeroDuration());
    }
    // Then single use.
    const LedgerModel::Mark mark = t.ledger.MarkReported(p.index);
    const bool duplicate = mark.seen == LedgerModel::Seen::kDuplicate;
    const bool current = p.generation == v.generation;
    const State s0 = v.state;
    const bool is_current_probe =
        !duplicate && current && p.probe && p.permit == t.probe_permit &&
        (s0 == State::kOpen || s0 == State::kHalfOpen);

    Effect want = Effect::kLate;
    if (duplicate) {
      want = Effect::kDuplicate;
    } else if (current && Counting(s0)) {
      want = counted;
    } else if (is_current_probe) {
      want = counted;
    }
    FUZZ_CHECK(r->effect == want, both(), "; want ", EffectName(want),
               " (hung ", hung, ")");
    FUZZ_CHECK(
        after.reports[static_cast<int>(*cls)][static_cast<int>(want)] ==
            before->reports[static_cast<int>(*cls)][static_cast<int>(want)] + 1,
        both());

    if (want == Effect::kLate || want == Effect::kDuplicate) {
      // Nothing moves (but the hung calls).
      CheckExpected(v, after, both);
      Observe(after);
      return;
    }

    if (!is_current_probe) {
      // Closed or forced closed: the outcome replaces the permit's hung
      // count, if the window still holds it, and a counted one is added.
      const uint64_t replaced =
          mark.seen == LedgerModel::Seen::kFirstOfHung &&
                  fuzz::InWindow(policy, mark.hung_at_ns, now)
              ? 1
              : 0;
      v.window.calls -= replaced;
      v.window.failures -= replaced;
      v.window.slow -= replaced;
      if (verdict != Verdict::kNeutral) {
        ++v.window.calls;
        if (verdict == Verdict::kFailure) ++v.window.failures;
        if (slow) ++v.window.slow;
        v.consecutive_failures =
            verdict == Verdict::kFailure ? v.consecutive_failures + 1 : 0;
      }
      const WindowCounts& w = v.window;
      const bool streak_trips =
          verdict == Verdict::kFailure && policy.consecutive_failures > 0 &&
          v.consecutive_failures >= policy.consecutive_failures;
      const bool rate_trips =
          policy.failure_rate.threshold > 0 &&
          w.calls >= policy.failure_rate.min_calls &&
          static_cast<double>(w.failures) >=
              policy.failure_rate.threshold * static_cast<double>(w.calls);
      const bool slow_trips =
          policy.slow_call_rate.threshold > 0 &&
          w.calls >= policy.slow_call_rate.min_calls &&
          static_cast<double>(w.slow) >=
              policy.slow_call_rate.threshold * static_cast<double>(w.calls);
      const bool trips = verdict != Verdict::kNeutral && s0 == State::kClosed &&
                         (streak_trips || rate_trips || slow_trips);
      if (trips) {
        const TransitionReason rule =
            streak_trips ? TransitionReason::kConsecutiveFailures
            : rate_trips ? TransitionReason::kFailureRate
                         : TransitionReason::kSlowCallRate;
        const TransitionReason reason = TripFromClosed(t, &v, rule);
        FUZZ_CHECK(
            TransitionCount(after, State::kClosed, State::kOpen, reason) ==
                TransitionCount(*before, State::kClosed, State::kOpen, reason) +
                    1,
            both(), " reason ", TransitionReasonName(reason));
        CheckCooldown(after, facts.retry_after);
      }
      CheckExpected(v, after, both);
      Observe(after);
      return;
    }

    // The probe's report decides.
    v.probe_in_flight = false;
    if (verdict == Verdict::kFailure) {
      v.state = State::kOpen;
      ++v.generation;
      ++v.escalation_level;
      CheckExpected(v, after, both);
      CheckCooldown(after, facts.retry_after);
    } else if (verdict == Verdict::kSuccess &&
               t.probe_successes + 1 >= policy.probe.required_successes) {
      // Closed: window and streak cleared; the escalation too, unless the
      // policy ramps (kept until the ramp completes).
      t.ramp.Close(now, v.escalation_level);
      v.state = State::kClosed;
      ++v.generation;
      v.window = WindowCounts{};
      v.consecutive_failures = 0;
      if (!t.ramp.Ramping(now)) v.escalation_level = 0;
      CheckExpected(v, after, both);
      FUZZ_CHECK(TransitionCount(after, s0, State::kClosed,
                                 TransitionReason::kProbeSucceeded) ==
                     TransitionCount(*before, s0, State::kClosed,
                                     TransitionReason::kProbeSucceeded) +
                         1,
                 both());
    } else {
      CheckExpected(v, after, both);
      if (verdict == Verdict::kSuccess) ++t.probe_successes;
    }
    t.probe_permit = 0;
    Observe(after);
  }
  // Reports a permit this Registry never issued for the dependency.
  void ReportForged(FuzzedDataProvider& fdp) {
    const std::string name = PickName(fdp);
    uint64_t permit = 0;
    const char* kind = "";
    switch (fdp.ConsumeIntegralInRange(0, 3)) {
      case 0:
        kind = "zero";
        break;
      case 1: {
        // Another dependency's permit.
        kind = "another dependency's";
        std::vector<uint64_t> others;
        for (const IssuedPermit& p : issued_) {
          if (p.dependency != name) others.push_back(p.permit);
        }
        if (others.empty()) return;
        permit =
            others[fdp.ConsumeIntegralInRange<size_t>(0, others.size() - 1)];
        break;
      }
      default: {
        // Garbage, mixed so that libFuzzer's comparison tracing cannot copy
        // the tag the engine compares against into the input.
        kind = "garbage";
        uint64_t x = fdp.ConsumeIntegral<uint64_t>() + 0x9e3779b97f4a7c15ULL;
        x = (x ^ (x >> 31)) * 0xd6e8feb86659fd93ULL;
        permit = x ^ (x >> 29);
        break;
      }
    }
    for (const IssuedPermit& p : issued_) {
      if (p.dependency == name && p.permit == permit) return;  // issued
    }
    const ReportRequestFacts facts = ConsumeFacts(fdp);
    const std::vector<BreakerSnapshot> all = Sorted();
    const bool exists = Get(name).has_value();
    const uint64_t unknown_before = registry_.unknown_permits();
    const absl::StatusOr<ReportResult> r =
        registry_.Report(name, permit, facts);
    const auto what = [&] {
      return std::string(absl::StrCat("Report(", name, ", ", kind, " permit ",
                                      permit, ", ", RawText(facts.outcome),
                                      ")"));
    };
    FUZZ_TRACE(what(), " -> ", r.status().ToString());
    const bool outcome_ok = ExpectedClass(facts.outcome).cls.has_value();
    if (exists && permit != 0 && outcome_ok) {
      // It reached the breaker's check of the permit's tag, which lets a
      // forged value through with probability 2^-17: then the rest of the
      // input is not checked (the value named some permit of the breaker).
      if (r.ok()) {
        fuzz::ForgedPermits::Accepted(what());
        FUZZ_TRACE("  a forged permit passed the tag: the rest is unchecked");
        abandoned_ = true;
        return;
      }
      fuzz::ForgedPermits::Refused();
    }
    // permit 0 is refused first, then the outcome, then the permit's tag.
    const absl::string_view field = permit == 0 || outcome_ok
                                        ? "permit"
                                        : ExpectedClass(facts.outcome).field;
    CheckRefused(r, field, all, what);
    FUZZ_CHECK(registry_.unknown_permits() ==
                   unknown_before + (permit != 0 && outcome_ok ? 1 : 0),
               what(), " unknown_permits ", unknown_before, " -> ",
               registry_.unknown_permits());
  }

  void Advance(FuzzedDataProvider& fdp) {
    absl::Duration d;
    switch (fdp.ConsumeIntegralInRange(0, 2)) {
      case 0:
        d = absl::Milliseconds(fdp.ConsumeIntegralInRange(0, 1000));
        break;
      case 1:
        d = absl::Milliseconds(fdp.ConsumeIntegralInRange(0, 120000));
        break;
      default:
        d = absl::Seconds(fdp.ConsumeIntegralInRange(0, 7200));
    }
    FUZZ_TRACE("clock +", absl::FormatDuration(d));
    clock_.Advance(d);
  }

  void Admin(FuzzedDataProvider& fdp) {
    const std::string name = PickName(fdp);
    const std::optional<BreakerSnapshot> before = Get(name);
    const int op = fdp.ConsumeIntegralInRange(0, 2);
    absl::StatusOr<BreakerSnapshot> r = op == 0   ? registry_.ForceOpen(name)
                                        : op == 1 ? registry_.ForceClose(name)
                                                  : registry_.Reset(name);
    const auto what = [&] {
      return std::string(absl::StrCat(
          op == 0   ? "ForceOpen("
          : op == 1 ? "ForceClose("
                    : "Reset(",
          name, "); before: ", before ? SnapText(*before) : "absent"));
    };
    FUZZ_TRACE(what(), " -> ", r.ok() ? SnapText(*r) : r.status().ToString());
    if (!r.ok()) {
      if (op == 2) {
        FUZZ_CHECK(absl::IsNotFound(r.status()) && !before.has_value(), what(),
                   " -> ", r.status().ToString());
      } else {
        FUZZ_CHECK(absl::IsResourceExhausted(r.status()) && !before.has_value(),
                   what(), " -> ", r.status().ToString());
      }
      return;
    }
    Tracked& t = Track(name);
    if (!before.has_value()) {
      Observe(Fresh(name));
      t.last_activity_ns = clock_.NowNanos();
    }
    const State want = op == 0   ? State::kForcedOpen
                       : op == 1 ? State::kForcedClosed
                                 : State::kClosed;
    FUZZ_CHECK(r->state == want, what(), " -> ", SnapText(*r));
    FUZZ_CHECK(r->generation == (before ? before->generation : floor_) + 1,
               what(), " -> ", SnapText(*r));
    FUZZ_CHECK(!r->probe_in_flight, what());
    // Every override ends a ramp; a forced state keeps the escalation, a
    // reset clears window, streak and escalation.
    const uint32_t escalation = before ? before->escalation_level : 0;
    t.ramp.Stop();
    if (op == 2) {
      FUZZ_CHECK(r->window.calls == 0 && r->consecutive_failures == 0 &&
                     r->escalation_level == 0,
                 what(), " -> ", SnapText(*r));
    } else {
      FUZZ_CHECK(r->escalation_level == escalation, what(), " -> ",
                 SnapText(*r), "; want escalation ", escalation);
    }
    Observe(*r);
  }

  void AcquireFirst(FuzzedDataProvider& fdp) {
    std::vector<std::string> names(fdp.ConsumeIntegralInRange(0, 5));
    for (std::string& n : names) n = PickName(fdp);
    const uint32_t attempt = ConsumeAttempt(fdp);
    std::map<std::string, std::optional<BreakerSnapshot>> before;
    for (const std::string& n : names) before[n] = Get(n);
    // Which candidates the Registry decides, in order: each name once (at
    // its first place), passing over those it cannot create (max_breakers).
    size_t creatable = set_->limits.max_breakers - registry_.size();
    std::set<std::string> exist;
    for (const auto& [n, s] : before) {
      if (s.has_value()) exist.insert(n);
    }
    std::vector<size_t> decidable;
    std::set<std::string> named;
    for (size_t i = 0; i < names.size(); ++i) {
      if (!named.insert(names[i]).second) continue;  // a repeat
      if (exist.count(names[i]) == 0) {
        if (creatable == 0) continue;  // skipped at the cap
        --creatable;
        exist.insert(names[i]);
      }
      decidable.push_back(i);
    }
    const absl::StatusOr<AcquireFirstResult> r =
        registry_.AcquireFirst(names, attempt);
    const auto what = [&] {
      std::string out = "AcquireFirst([";
      for (const std::string& n : names) absl::StrAppend(&out, n, " ");
      absl::StrAppend(&out, "], ", attempt, ") -> ",
                      r.ok() ? absl::StrCat("granted ", r->granted, " reason ",
                                            static_cast<int>(r->result.reason))
                             : r.status().ToString());
      return out;
    };
    FUZZ_TRACE(what());
    if (names.empty()) {
      FUZZ_CHECK(absl::IsInvalidArgument(r.status()), what());
      return;
    }
    std::vector<size_t> asked = decidable;
    if (r.ok()) {
      FUZZ_CHECK(!decidable.empty(), what());
      FUZZ_CHECK(
          r->granted == -1 ||
              std::find(decidable.begin(), decidable.end(),
                        static_cast<size_t>(r->granted)) != decidable.end(),
          what(), " (", decidable.size(), " decidable)");
      FUZZ_CHECK(r->result.allowed == (r->granted >= 0), what());
      FUZZ_CHECK(r->result.allowed == (r->result.permit != 0), what());
      if (r->granted >= 0) {
        asked.erase(std::find(asked.begin(), asked.end(),
                              static_cast<size_t>(r->granted)) +
                        1,
                    asked.end());
      }
    } else {
      FUZZ_CHECK(absl::IsResourceExhausted(r.status()) && decidable.empty(),
                 what());
    }

    // Each candidate asked, in order, against the models: all refused but
    // the one granted.
    const int64_t now = clock_.NowNanos();
    std::map<std::string, BreakerSnapshot> views;
    std::map<std::string, std::vector<AcquirePlan>> plans;
    std::map<std::string, uint64_t> times;
    for (const size_t i : asked) {
      const std::string& n = names[i];
      used_.insert(n);
      ++times[n];
      if (views.count(n) == 0) {
        views[n] = before[n].has_value() ? *before[n] : Fresh(n);
        if (!before[n].has_value()) Observe(views[n]);
      }
      Tracked& t = Track(n);
      t.last_activity_ns = now;
      BreakerSnapshot& v = views[n];
      const AcquirePlan plan = PlanAcquire(n, attempt, t, &v, what);
      plans[n].push_back(plan);
      const bool granted = r.ok() && static_cast<int>(i) == r->granted;
      const auto one = [&] {
        return absl::StrCat(what(), "; candidate ", i, " (", n,
                            ") plan: ", plan.Text());
      };
      if (granted) {
        CheckAnswer(n, plan, r->result, t, &v, one);
      } else {
        FUZZ_CHECK(plan.MayReject() && PolicyOf(n).mode == Mode::kEnforce,
                   one(), " was refused");
        if (r.ok() && i == asked.back()) {
          // None granted: the last candidate decided's answer.
          FUZZ_CHECK(r->result.state == plan.state && !r->result.allowed &&
                         r->result.reason != RejectReason::kNone &&
                         plan.Allows(r->result.reason),
                     one());
        }
      }
    }
    for (auto& [name, v] : views) {
      const std::string& n = name;
      const std::optional<BreakerSnapshot> after = Get(n);
      FUZZ_CHECK(after.has_value(), what(), " ", n);
      const auto one = [&] { return absl::StrCat(what(), "; ", n); };
      CheckExpected(v, *after, one);
      const BreakerSnapshot start = before[n] ? *before[n] : Fresh(n);
      FUZZ_CHECK(Sum(after->acquires) == Sum(start.acquires) + times[n], one());
      for (const AcquirePlan& plan : plans[n])
        CheckHungTrip(plan, start, *after, one);
      Observe(*after);
    }
    // The candidates never asked are untouched.
    for (const auto& [n, s] : before) {
      if (times.count(n) == 1) continue;
      const std::optional<BreakerSnapshot> after = Get(n);
      FUZZ_CHECK(after.has_value() == s.has_value(), what(), " ", n);
      if (s.has_value()) {
        FUZZ_CHECK(Sum(after->acquires) == Sum(s->acquires), what(), " ", n);
      }
    }
  }

  void Evict() {
    const int64_t now = clock_.NowNanos();
    const std::vector<BreakerSnapshot> before = Sorted();
    std::vector<std::string> want;
    for (const BreakerSnapshot& s : before) {
      Tracked& t = Track(s.dependency);
      // The pass ends a ramp that has run its course (and the escalation
      // kept through it) and drops what the ledger no longer needs.
      if (t.ramp.RunItsCourse(now)) t.ramp.Stop();
      t.ledger.ReleaseIdle(now, s.state);
      const bool idle = s.state == State::kClosed && !t.ramp.active() &&
                        s.window.calls == 0 && s.consecutive_failures == 0 &&
                        s.escalation_level == 0 &&
                        now - t.last_activity_ns >=
                            absl::ToInt64Nanoseconds(set_->limits.idle_ttl) &&
                        t.ledger.Inflight(now, s.state) == 0;
      if (idle) want.push_back(s.dependency);
    }
    const size_t evicted = registry_.EvictIdle();
    FUZZ_TRACE("EvictIdle -> ", evicted);
    std::vector<std::string> gone;
    for (const BreakerSnapshot& s : before) {
      if (!Get(s.dependency).has_value()) gone.push_back(s.dependency);
    }
    std::string detail;
    for (const BreakerSnapshot& s : before) {
      const Tracked& t = Track(s.dependency);
      absl::StrAppend(
          &detail, "\n  ", SnapText(s), " idle for ",
          absl::FormatDuration(absl::Nanoseconds(now - t.last_activity_ns)),
          " model inflight ", t.ledger.Inflight(now, s.state),
          t.ramp.active() ? " ramp" : "");
    }
    FUZZ_CHECK(gone == want && evicted == gone.size(), "evicted ", gone.size(),
               " (returned ", evicted, "), want ", want.size(),
               " with idle_ttl ", absl::FormatDuration(set_->limits.idle_ttl),
               detail);
    // A re-created breaker continues above every evicted generation.
    for (const BreakerSnapshot& s : before) {
      if (std::find(gone.begin(), gone.end(), s.dependency) != gone.end()) {
        floor_ = std::max(floor_, s.generation + 1);
      }
    }
    FUZZ_CHECK(registry_.generation_floor() == floor_,
               registry_.generation_floor(), " want ", floor_);
    for (const std::string& n : gone) {
      tracked_.erase(n);
      issued_.erase(std::remove_if(issued_.begin(), issued_.end(),
                                   [&](const IssuedPermit& p) {
                                     return p.dependency == n;
                                   }),
                    issued_.end());
    }
  }

  void CheckAll() {
    const int64_t now = clock_.NowNanos();
    const std::vector<BreakerSnapshot> all = Sorted();
    FUZZ_CHECK(all.size() == registry_.size());
    FUZZ_CHECK(all.size() <= set_->limits.max_breakers);
    for (const BreakerSnapshot& s : all) {
      const auto what = [&] { return SnapText(s); };
      const int st = static_cast<int>(s.state);
      FUZZ_CHECK(st >= 1 && st <= 5, what());
      FUZZ_CHECK(s.window.failures <= s.window.calls &&
                     s.window.slow <= s.window.calls,
                 what());
      FUZZ_CHECK(
          (s.retry_after > absl::ZeroDuration()) == (s.state == State::kOpen),
          what());
      FUZZ_CHECK(!s.probe_in_flight || s.state == State::kHalfOpen, what());
      FUZZ_CHECK(s.failure_rate >= 0 && s.failure_rate <= 1, what());
      FUZZ_CHECK(s.shadow == (PolicyOf(s.dependency).mode == Mode::kShadow),
                 what());
      Observe(s);
      const Tracked& t = Track(s.dependency);
      FUZZ_CHECK(s.inflight == t.ledger.Inflight(now, s.state), what(),
                 " model inflight ", t.ledger.Inflight(now, s.state));
      FUZZ_CHECK(s.hung_calls == t.ledger.hung_total(), what(),
                 " model hung calls ", t.ledger.hung_total());
      const double share = s.state == State::kClosed ? t.ramp.Share(now) : 1.0;
      FUZZ_CHECK(s.admit_share == share, what(), " model share ", share);
      FUZZ_CHECK(s.admit_share > 0 && s.admit_share <= 1, what());
      if (t.ramp.active()) {
        FUZZ_CHECK(s.state == State::kClosed, what(), " ramping");
        FUZZ_CHECK(s.escalation_level ==
                       (t.ramp.Ramping(now) ? t.ramp.escalation() : 0),
                   what(), " ramp kept escalation ", t.ramp.escalation());
      }
    }
  }

  std::shared_ptr<const PolicySet> set_;
  FakeClock clock_;
  Registry registry_;
  std::vector<IssuedPermit> issued_;
  std::map<std::string, Tracked> tracked_;
  // Where a breaker created now starts (above every evicted generation).
  uint64_t floor_ = 0;
  // Every valid name passed to the registry (a superset of its breakers).
  std::set<std::string> used_ = {std::begin(kNames), std::end(kNames)};
  // Acquires made by Burst so far.
  int burst_permits_ = 0;
  // A forged permit passed its tag (ReportForged): nothing more is checked.
  bool abandoned_ = false;
};

}  // namespace
}  // namespace breakerd

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace breakerd;  // NOLINT
  FuzzedDataProvider fdp(data, size);

  // The raw outcome on its own first: the whole int ranges.
  CheckClassify(ConsumeRawOutcome(fdp));

  auto set = std::make_shared<PolicySet>();
  set->defaults = std::make_shared<const Policy>(ConsumePolicy(fdp));
  if (fdp.ConsumeBool()) {
    // A second policy for one of the names, e.g. a shadow one.
    Policy p = ConsumePolicy(fdp);
    p.match = "openai/*";
    set->policies.push_back(std::make_shared<const Policy>(p));
  }
  set->limits.max_breakers = fdp.ConsumeIntegralInRange<uint32_t>(1, 5);
  set->limits.idle_ttl = absl::Seconds(fdp.ConsumeIntegralInRange(1, 600));
  g_uniform = 0.5;
  const Policy& d = *set->defaults;
  FUZZ_TRACE(
      "defaults: ", d.mode == Mode::kShadow ? "shadow" : "enforce",
      " consecutive ", d.consecutive_failures, " failure_rate ",
      d.failure_rate.threshold, "/", d.failure_rate.min_calls, " in ",
      absl::FormatDuration(d.failure_rate.window), " slow ",
      d.slow_call_rate.threshold, "/", d.slow_call_rate.min_calls, " cooldown ",
      absl::FormatDuration(d.cooldown.base), "..",
      absl::FormatDuration(d.cooldown.max), " jitter ", d.cooldown.jitter,
      " required_successes ", d.probe.required_successes, " hang_after ",
      absl::FormatDuration(d.inflight.hang_after), " ramp ",
      absl::FormatDuration(d.recovery.ramp), " from ", d.recovery.start_share,
      "; max_breakers ", set->limits.max_breakers, " idle_ttl ",
      absl::FormatDuration(set->limits.idle_ttl));

  Session session(set);
  session.Run(fdp);
  return 0;
}

// classify_fuzz: arbitrary raw outcomes -> Classify (server/engine/outcome.h),
// then a sequence of Acquire / Report / admin / clock operations on a
// Registry driven by a FakeClock, checked against the state machine of
// DESIGN.md ("The breaker").
//
// Input layout (FuzzedDataProvider): one RawOutcome checked on its own, a
// policy (every field inside its documented range), then up to kMaxOps
// operations, each reading what it needs.
//
// Invariants, each an abort when broken:
//  Classify
//   - OK exactly for a valid combination: explicit class 1..9, else
//     http_status 100..599, else grpc_code 0..16 (explicit > http > grpc;
//     a zero explicit class or http_status means "not set"); the class is
//     the one DESIGN.md's table gives; VerdictFor follows the table.
//   - Otherwise INVALID_ARGUMENT whose message starts with the offending
//     field ("outcome", "http_status", "grpc_code").
//  Acquire (state read just before, same instant)
//   - enforce: allowed == (permit != 0) == (reason == none); shadow: always
//     allowed with a permit. probe only when half-open with no probe out.
//   - The reason follows the state: forced open -> FORCED_OPEN; open ->
//     OPEN with retry_after = the cooldown left; half-open -> PROBE_IN_FLIGHT
//     while a probe is out, OPEN for a retry, else the probe; closed and
//     forced closed -> allowed, or RETRY_BUDGET for a retry only.
//   - It never changes the derived state; the generation moves by at most
//     one, and only when observing half-open. A new breaker starts above
//     every generation an evicted one reached.
//  Report
//   - A permit this Registry never issued for that dependency (garbage,
//     zero, another dependency's) is INVALID_ARGUMENT naming "permit" and
//     changes nothing (whole snapshot compared); an invalid outcome is
//     INVALID_ARGUMENT naming its field and changes nothing.
//   - An issued permit of an earlier generation, or any report while forced
//     open, is LATE and changes no state, counter or window.
//   - Closed / forced closed: the effect is the verdict's; a counted
//     outcome adds one call to the window (and a failure, a slow call);
//     success resets the failure streak, failure extends it; a closed
//     breaker opens iff a trip rule holds afterwards (consecutive failures,
//     failure rate, slow-call rate); forced closed never opens.
//   - The half-open probe's report decides: failure re-opens with the
//     escalation one higher; success closes after required_successes (and
//     clears window, streak, escalation); neutral releases the probe. Any
//     other report while open / half-open is LATE.
//   - Every new open period's cooldown is base doubled per escalation,
//     capped at max, scaled by the jitter factor, and at least the
//     outcome's retry_after.
//  Always
//   - Per breaker: generation never decreases; failures, slow <= calls;
//     retry_after > 0 exactly when open; probe_in_flight only when
//     half-open; size() <= max_breakers.
//   - EvictIdle removes exactly the breakers that are closed with no
//     override, no window, no streak, no escalation and no Acquire/Report
//     for idle_ttl.
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
#include "fuzz/fuzz_check.h"
#include "server/engine/clock.h"
#include "server/engine/outcome.h"
#include "server/engine/policy.h"
#include "server/engine/registry.h"
#include "server/engine/types.h"

namespace breakerd {
namespace {

constexpr int kMaxOps = 96;
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
  return p;
}

// --- Snapshots
// -----------------------------------------------------------------

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
      s.consecutive_failures, " escalation ", s.escalation_level,
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

// --- The fuzzed session -----------------------------------------------------

struct IssuedPermit {
  std::string dependency;
  uint64_t permit = 0;
  uint64_t generation = 0;  // the breaker's generation when issued
  bool probe = false;
};

// What the harness knows about one breaker beyond its snapshot.
struct Tracked {
  int64_t last_activity_ns = 0;
  uint64_t generation = 0;
  // The probe out in the current generation (0: none), and the probe
  // successes in a row counted in the current generation.
  uint64_t probe_permit = 0;
  uint32_t probe_successes = 0;
};

class Session {
 public:
  Session(std::shared_ptr<const PolicySet> set)
      : set_(std::move(set)),
        registry_(set_, &clock_, /*permit_secret=*/0x5eed, &FuzzUniform) {}

  void Run(FuzzedDataProvider& fdp) {
    for (int op = 0; op < kMaxOps && fdp.remaining_bytes() > 0; ++op) {
      switch (fdp.ConsumeIntegralInRange(0, 11)) {
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
        default:
          ReportIssued(fdp);
      }
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

  // Bookkeeping after any operation that may have moved `s`'s generation.
  void Observe(const BreakerSnapshot& s) {
    Tracked& t = tracked_[s.dependency];
    FUZZ_CHECK(s.generation >= t.generation, SnapText(s), " was gen ",
               t.generation);
    if (s.generation != t.generation) {
      t.generation = s.generation;
      t.probe_permit = 0;
      t.probe_successes = 0;
    }
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
    CheckAcquire(name, attempt, existed ? &*before : nullptr, *r, *after);
    tracked_[name].last_activity_ns = clock_.NowNanos();
    Observe(*after);
    if (r->allowed) {
      issued_.push_back({name, r->permit, after->generation, r->probe});
      if (r->probe) tracked_[name].probe_permit = r->permit;
    }
  }

  // `before` is null for a breaker this Acquire created (fresh: closed).
  void CheckAcquire(const std::string& name, uint32_t attempt,
                    const BreakerSnapshot* before, const AcquireResult& r,
                    const BreakerSnapshot& after) {
    const bool shadow = PolicyOf(name).mode == Mode::kShadow;
    const State state = before ? before->state : State::kClosed;
    const bool probe_out = before && before->probe_in_flight;
    const auto what = [&] {
      return std::string(absl::StrCat(
          "Acquire(", name, ", ", attempt, ") allowed ", r.allowed, " permit ",
          r.permit, " probe ", r.probe, " reason ", static_cast<int>(r.reason),
          " state ", StateName(r.state),
          "; before: ", before ? SnapText(*before) : "absent"));
    };
    FUZZ_CHECK(r.state == state, what());
    FUZZ_CHECK(after.state == state, what(), "; after: ", SnapText(after));
    FUZZ_CHECK(r.allowed == (r.permit != 0), what());
    if (shadow) {
      FUZZ_CHECK(r.allowed, what());
    } else {
      FUZZ_CHECK(r.allowed == (r.reason == RejectReason::kNone), what());
    }
    FUZZ_CHECK(r.retry_after >= absl::ZeroDuration(), what());
    if (r.probe)
      FUZZ_CHECK(r.allowed && r.reason == RejectReason::kNone, what());

    RejectReason want = RejectReason::kNone;
    switch (state) {
      case State::kForcedOpen:
        want = RejectReason::kForcedOpen;
        break;
      case State::kClosed:
      case State::kForcedClosed:
        FUZZ_CHECK(!r.probe, what());
        FUZZ_CHECK(r.reason == RejectReason::kNone ||
                       (attempt > 0 && r.reason == RejectReason::kRetryBudget),
                   what());
        want = r.reason;
        break;
      case State::kOpen:
        want = RejectReason::kOpen;
        FUZZ_CHECK(r.retry_after == before->retry_after, what());
        FUZZ_CHECK(r.retry_after > absl::ZeroDuration(), what());
        break;
      case State::kHalfOpen:
        if (probe_out) {
          want = RejectReason::kProbeInFlight;
          FUZZ_CHECK(r.retry_after > absl::ZeroDuration(), what());
        } else if (attempt > 0) {
          want = RejectReason::kOpen;
        } else {
          FUZZ_CHECK(r.probe, what());
        }
        break;
    }
    FUZZ_CHECK(r.reason == want, what(), " want reason ",
               static_cast<int>(want));
    if (state != State::kHalfOpen || probe_out || attempt > 0) {
      FUZZ_CHECK(!r.probe, what());
    }
    FUZZ_CHECK(after.probe_in_flight == (probe_out || r.probe), what(),
               "; after: ", SnapText(after));

    const uint64_t gen_before = before ? before->generation : floor_;
    FUZZ_CHECK(
        after.generation == gen_before ||
            (after.generation == gen_before + 1 && state == State::kHalfOpen),
        what(), "; after: ", SnapText(after));
    FUZZ_CHECK(Sum(after.acquires) == (before ? Sum(before->acquires) : 0) + 1,
               what());
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
                    const std::function<std::string()>& what) {
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
                      const std::function<std::string()>& what) const {
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
    const ReportRequestFacts facts = ConsumeFacts(fdp);
    const std::vector<BreakerSnapshot> all = Sorted();
    const std::optional<BreakerSnapshot> before = Get(p.dependency);
    const uint64_t unknown_before = registry_.unknown_permits();
    const absl::StatusOr<ReportResult> r =
        registry_.Report(p.dependency, p.permit, facts);
    const auto what = [&] {
      return std::string(absl::StrCat(
          "Report(", p.dependency, ", issued permit ", p.permit, " gen ",
          p.generation, p.probe ? " probe" : "", ", ", RawText(facts.outcome),
          ", latency ", absl::FormatDuration(facts.latency), ", retry_after ",
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
    if (!before.has_value()) {
      // Evicted since: the permit is refused (or, should the new breaker
      // sit at the old one's address, may even match); not checked.
      return;
    }
    FUZZ_CHECK(r.ok(), what(), " -> ", r.status().ToString());
    FUZZ_CHECK(registry_.unknown_permits() == unknown_before, what());
    const BreakerSnapshot after = *Get(p.dependency);
    const auto both = [&] {
      return std::string(absl::StrCat(what(), "; after: ", SnapText(after),
                                      "; effect ", EffectName(r->effect)));
    };
    FUZZ_CHECK(r->state == after.state, both());
    Tracked& t = tracked_[p.dependency];
    t.last_activity_ns = clock_.NowNanos();

    const Policy& policy = PolicyOf(p.dependency);
    const Verdict verdict = ExpectedVerdict(*cls, policy.rate_limited);
    const Effect counted =
        verdict == Verdict::kSuccess   ? Effect::kCountedSuccess
        : verdict == Verdict::kFailure ? Effect::kCountedFailure
                                       : Effect::kNeutral;
    const bool slow = policy.slow_call_rate.threshold > 0 &&
                      facts.latency > absl::ZeroDuration() &&
                      facts.latency >= policy.slow_call_rate.duration;
    const bool current = p.generation == before->generation;
    const State s0 = before->state;
    const bool is_current_probe =
        current && p.probe && p.permit == t.probe_permit &&
        (s0 == State::kOpen || s0 == State::kHalfOpen);

    Effect want = Effect::kLate;
    if (current && (s0 == State::kClosed || s0 == State::kForcedClosed)) {
      want = counted;
    } else if (is_current_probe) {
      want = counted;
    }
    FUZZ_CHECK(r->effect == want, both(), "; want ", EffectName(want));
    FUZZ_CHECK(
        after.reports[static_cast<int>(*cls)][static_cast<int>(want)] ==
            before->reports[static_cast<int>(*cls)][static_cast<int>(want)] + 1,
        both());

    if (want == Effect::kLate ||
        (want == Effect::kNeutral && !is_current_probe)) {
      // Nothing moves.
      FUZZ_CHECK(after.state == s0 && after.generation == before->generation,
                 both());
      FUZZ_CHECK(after.window.calls == before->window.calls &&
                     after.window.failures == before->window.failures &&
                     after.window.slow == before->window.slow,
                 both());
      FUZZ_CHECK(after.consecutive_failures == before->consecutive_failures &&
                     after.escalation_level == before->escalation_level,
                 both());
      FUZZ_CHECK(after.probe_in_flight == before->probe_in_flight, both());
      Observe(after);
      return;
    }

    if (!is_current_probe) {
      // A counted outcome in closed or forced closed.
      FUZZ_CHECK(after.window.calls == before->window.calls + 1, both());
      FUZZ_CHECK(
          after.window.failures ==
              before->window.failures + (verdict == Verdict::kFailure ? 1 : 0),
          both());
      FUZZ_CHECK(after.window.slow == before->window.slow + (slow ? 1 : 0),
                 both());
      FUZZ_CHECK(
          after.consecutive_failures == (verdict == Verdict::kFailure
                                             ? before->consecutive_failures + 1
                                             : 0),
          both());
      const WindowCounts& w = after.window;
      const bool streak_trips =
          verdict == Verdict::kFailure && policy.consecutive_failures > 0 &&
          after.consecutive_failures >= policy.consecutive_failures;
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
      const bool trips = streak_trips || rate_trips || slow_trips;
      if (s0 == State::kForcedClosed || !trips) {
        FUZZ_CHECK(after.state == s0 && after.generation == before->generation,
                   both(), " (trips ", trips, ")");
      } else {
        FUZZ_CHECK(after.state == State::kOpen &&
                       after.generation == before->generation + 1,
                   both(), " should have opened");
        const TransitionReason reason =
            streak_trips ? TransitionReason::kConsecutiveFailures
            : rate_trips ? TransitionReason::kFailureRate
                         : TransitionReason::kSlowCallRate;
        FUZZ_CHECK(
            TransitionCount(after, State::kClosed, State::kOpen, reason) ==
                TransitionCount(*before, State::kClosed, State::kOpen, reason) +
                    1,
            both(), " reason ", TransitionReasonName(reason));
        FUZZ_CHECK(after.escalation_level == before->escalation_level, both());
        CheckCooldown(after, facts.retry_after);
      }
      Observe(after);
      return;
    }

    // The probe's report decides.
    FUZZ_CHECK(!after.probe_in_flight || after.generation != before->generation,
               both());
    if (verdict == Verdict::kFailure) {
      FUZZ_CHECK(after.state == State::kOpen &&
                     after.generation == before->generation + 1 &&
                     after.escalation_level == before->escalation_level + 1,
                 both(), " probe failure must re-open, escalated");
      CheckCooldown(after, facts.retry_after);
    } else if (verdict == Verdict::kSuccess &&
               t.probe_successes + 1 >= policy.probe.required_successes) {
      FUZZ_CHECK(after.state == State::kClosed &&
                     after.generation == before->generation + 1,
                 both(), " probe success must close");
      FUZZ_CHECK(after.window.calls == 0 && after.consecutive_failures == 0 &&
                     after.escalation_level == 0,
                 both(), " closing clears history");
    } else {
      FUZZ_CHECK(after.state == State::kHalfOpen &&
                     after.generation == before->generation,
                 both());
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
    if (!before.has_value())
      tracked_[name].last_activity_ns = clock_.NowNanos();
    const State want = op == 0   ? State::kForcedOpen
                       : op == 1 ? State::kForcedClosed
                                 : State::kClosed;
    FUZZ_CHECK(r->state == want, what(), " -> ", SnapText(*r));
    FUZZ_CHECK(r->generation == (before ? before->generation : floor_) + 1,
               what(), " -> ", SnapText(*r));
    FUZZ_CHECK(!r->probe_in_flight, what());
    if (op == 2) {
      FUZZ_CHECK(r->window.calls == 0 && r->consecutive_failures == 0 &&
                     r->escalation_level == 0,
                 what(), " -> ", SnapText(*r));
    }
    Observe(*r);
  }

  void AcquireFirst(FuzzedDataProvider& fdp) {
    std::vector<std::string> names(fdp.ConsumeIntegralInRange(0, 5));
    for (std::string& n : names) n = PickName(fdp);
    const uint32_t attempt = ConsumeAttempt(fdp);
    std::map<std::string, uint64_t> acquires_before;
    for (const std::string& n : names) {
      std::optional<BreakerSnapshot> s = Get(n);
      acquires_before[n] = s ? Sum(s->acquires) : 0;
    }
    const absl::StatusOr<AcquireFirstResult> r =
        registry_.AcquireFirst(names, attempt);
    FUZZ_TRACE(
        "AcquireFirst(", names.size(), " names, ", attempt, ") -> ",
        r.ok() ? absl::StrCat("granted ", r->granted) : r.status().ToString());
    // Every candidate asked counts as activity, even when a later one then
    // hit max_breakers.
    for (const auto& [n, before] : acquires_before) {
      const std::optional<BreakerSnapshot> s = Get(n);
      if (s.has_value() && Sum(s->acquires) > before) {
        tracked_[n].last_activity_ns = clock_.NowNanos();
      }
    }
    if (!r.ok()) {
      FUZZ_CHECK(names.empty() ? absl::IsInvalidArgument(r.status())
                               : absl::IsResourceExhausted(r.status()),
                 r.status().ToString());
      return;
    }
    FUZZ_CHECK(!names.empty());
    FUZZ_CHECK(r->granted >= -1 && r->granted < static_cast<int>(names.size()));
    FUZZ_CHECK(r->result.allowed == (r->granted >= 0));
    FUZZ_CHECK(r->result.allowed == (r->result.permit != 0));
    // Candidates up to the one granted were asked once each; the rest not.
    const size_t asked = r->granted >= 0 ? r->granted + 1 : names.size();
    std::map<std::string, uint64_t> times;
    for (size_t i = 0; i < asked; ++i) ++times[names[i]];
    for (const auto& [n, before] : acquires_before) {
      const std::optional<BreakerSnapshot> s = Get(n);
      FUZZ_CHECK((s ? Sum(s->acquires) : 0) == before + times[n], n);
      if (s.has_value()) Observe(*s);
    }
    if (r->granted >= 0) {
      const std::string& n = names[r->granted];
      const BreakerSnapshot s = *Get(n);
      issued_.push_back({n, r->result.permit, s.generation, r->result.probe});
      if (r->result.probe) tracked_[n].probe_permit = r->result.permit;
    }
  }

  void Evict() {
    const int64_t now = clock_.NowNanos();
    const std::vector<BreakerSnapshot> before = Sorted();
    std::vector<std::string> want;
    for (const BreakerSnapshot& s : before) {
      const Tracked& t = tracked_[s.dependency];
      if (s.state == State::kClosed && s.window.calls == 0 &&
          s.consecutive_failures == 0 && s.escalation_level == 0 &&
          now - t.last_activity_ns >=
              absl::ToInt64Nanoseconds(set_->limits.idle_ttl)) {
        want.push_back(s.dependency);
      }
    }
    const size_t evicted = registry_.EvictIdle();
    FUZZ_TRACE("EvictIdle -> ", evicted);
    std::vector<std::string> gone;
    for (const BreakerSnapshot& s : before) {
      if (!Get(s.dependency).has_value()) gone.push_back(s.dependency);
    }
    std::string detail;
    for (const BreakerSnapshot& s : before) {
      absl::StrAppend(&detail, "\n  ", SnapText(s), " idle for ",
                      absl::FormatDuration(absl::Nanoseconds(
                          now - tracked_[s.dependency].last_activity_ns)));
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
  FUZZ_TRACE("defaults: ", d.mode == Mode::kShadow ? "shadow" : "enforce",
             " consecutive ", d.consecutive_failures, " failure_rate ",
             d.failure_rate.threshold, "/", d.failure_rate.min_calls,
             " cooldown ", absl::FormatDuration(d.cooldown.base), "..",
             absl::FormatDuration(d.cooldown.max), " jitter ",
             d.cooldown.jitter, " required_successes ",
             d.probe.required_successes, "; max_breakers ",
             set->limits.max_breakers);

  Session session(set);
  session.Run(fdp);
  return 0;
}

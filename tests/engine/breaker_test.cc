#include "server/engine/breaker.h"

#include <memory>
#include <optional>
#include <set>

#include "gtest/gtest.h"
#include "server/engine/clock.h"
#include "tests/engine/breaker_fixture.h"

namespace breakerd {
namespace {

using absl::Milliseconds;
using absl::Seconds;

// --- closed ------------------------------------------------------------------

TEST_F(BreakerTest, ClosedAllowsWithANonzeroPermit) {
  Make(BasePolicy());
  AcquireResult a = Acquire();
  EXPECT_TRUE(a.allowed);
  EXPECT_NE(a.permit, 0u);
  EXPECT_FALSE(a.probe);
  EXPECT_EQ(a.state, State::kClosed);
  EXPECT_EQ(a.reason, RejectReason::kNone);
  EXPECT_EQ(Report(a.permit, OutcomeClass::kSuccess).effect,
            Effect::kCountedSuccess);
}

TEST_F(BreakerTest, FiveConsecutiveFailuresOpen) {
  Make(BasePolicy());
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(Call(OutcomeClass::kTimeout).effect, Effect::kCountedFailure);
  }
  EXPECT_EQ(Current(), State::kClosed);
  EXPECT_EQ(breaker_->Snapshot().consecutive_failures, 4u);
  ReportResult r = Call(OutcomeClass::kServerError);
  EXPECT_EQ(r.state, State::kOpen);
  ASSERT_EQ(transitions_.size(), 1u);
  EXPECT_EQ(transitions_[0].from, State::kClosed);
  EXPECT_EQ(transitions_[0].to, State::kOpen);
  EXPECT_EQ(transitions_[0].reason, TransitionReason::kConsecutiveFailures);
  EXPECT_EQ(transitions_[0].retry_after, Seconds(10));
  EXPECT_EQ(transitions_[0].consecutive_failures, 5u);
}

TEST_F(BreakerTest, SuccessResetsTheFailureStreak) {
  Make(BasePolicy());
  for (int i = 0; i < 4; ++i) Call(OutcomeClass::kTimeout);
  Call(OutcomeClass::kSuccess);
  for (int i = 0; i < 4; ++i) Call(OutcomeClass::kTimeout);
  EXPECT_EQ(Current(), State::kClosed);
  Call(OutcomeClass::kTimeout);
  EXPECT_EQ(Current(), State::kOpen);
}

TEST_F(BreakerTest, NeutralOutcomesNeitherCountNorReset) {
  Make(BasePolicy());
  for (int i = 0; i < 4; ++i) Call(OutcomeClass::kTimeout);
  for (OutcomeClass c : {OutcomeClass::kBadRequest, OutcomeClass::kAuthError,
                         OutcomeClass::kCancelled}) {
    for (int i = 0; i < 20; ++i) {
      EXPECT_EQ(Call(c).effect, Effect::kNeutral);
    }
  }
  EXPECT_EQ(Current(), State::kClosed);
  EXPECT_EQ(breaker_->Snapshot().consecutive_failures, 4u);
  EXPECT_EQ(breaker_->Snapshot().window.calls, 4u);
  Call(OutcomeClass::kConnectionError);
  EXPECT_EQ(Current(), State::kOpen);
}

TEST_F(BreakerTest, BadRequestsInALoopNeverOpen) {
  Make(BasePolicy());
  for (int i = 0; i < 1000; ++i) Call(OutcomeClass::kBadRequest);
  EXPECT_EQ(Current(), State::kClosed);
  EXPECT_EQ(breaker_->Snapshot().reports[static_cast<int>(
                OutcomeClass::kBadRequest)][static_cast<int>(Effect::kNeutral)],
            1000u);
}

TEST_F(BreakerTest, SoftFailureIsSuccessForTheBreakerButCountedApart) {
  Make(BasePolicy());
  for (int i = 0; i < 4; ++i) Call(OutcomeClass::kTimeout);
  EXPECT_EQ(Call(OutcomeClass::kSoftFailure).effect, Effect::kCountedSuccess);
  EXPECT_EQ(breaker_->Snapshot().consecutive_failures, 0u);
  EXPECT_EQ(
      breaker_->Snapshot().reports[static_cast<int>(OutcomeClass::kSoftFailure)]
                                  [static_cast<int>(Effect::kCountedSuccess)],
      1u);
}

TEST_F(BreakerTest, RateLimitedCountsUnlessPolicyIgnoresIt) {
  Make(BasePolicy());
  EXPECT_EQ(Call(OutcomeClass::kRateLimited).effect, Effect::kCountedFailure);
  Policy p = BasePolicy();
  p.rate_limited = RateLimitedHandling::kIgnore;
  Make(p);
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(Call(OutcomeClass::kRateLimited).effect, Effect::kNeutral);
  }
  EXPECT_EQ(Current(), State::kClosed);
}

TEST_F(BreakerTest, ConsecutiveRuleCanBeSwitchedOff) {
  Policy p = BasePolicy();
  p.consecutive_failures = 0;
  Make(p);
  for (int i = 0; i < 100; ++i) Call(OutcomeClass::kTimeout);
  EXPECT_EQ(Current(), State::kClosed);
}

// --- failure rate and slow calls ---------------------------------------------

TEST_F(BreakerTest, FailureRateOpensOnlyWithMinCalls) {
  Policy p = BasePolicy();
  p.consecutive_failures = 0;
  p.failure_rate = {0.5, 20, Seconds(30)};
  Make(p);
  // 19 calls, alternating: 10 failures of 19 (> 50%) but below min_calls.
  for (int i = 0; i < 19; ++i) {
    Call(i % 2 == 0 ? OutcomeClass::kTimeout : OutcomeClass::kSuccess);
  }
  EXPECT_EQ(Current(), State::kClosed);
  EXPECT_EQ(breaker_->Snapshot().window.calls, 19u);
  EXPECT_EQ(breaker_->Snapshot().window.failures, 10u);
  Call(OutcomeClass::kSuccess);  // 10/20 = 0.5 >= threshold
  EXPECT_EQ(Current(), State::kOpen);
  EXPECT_EQ(transitions_.back().reason, TransitionReason::kFailureRate);
}

TEST_F(BreakerTest, FailureRateBelowThresholdStaysClosed) {
  Policy p = BasePolicy();
  p.consecutive_failures = 0;
  p.failure_rate = {0.5, 20, Seconds(30)};
  Make(p);
  // 40% failures, the case a consecutive rule never catches.
  for (int i = 0; i < 200; ++i) {
    Call(i % 5 < 2 ? OutcomeClass::kTimeout : OutcomeClass::kSuccess);
  }
  EXPECT_EQ(Current(), State::kClosed);
  EXPECT_NEAR(breaker_->Snapshot().failure_rate, 0.4, 0.05);
}

TEST_F(BreakerTest, OldOutcomesSlideOutOfTheWindow) {
  Policy p = BasePolicy();
  p.consecutive_failures = 0;
  p.failure_rate = {0.5, 20, Seconds(30)};
  Make(p);
  for (int i = 0; i < 15; ++i) Call(OutcomeClass::kTimeout);
  EXPECT_EQ(breaker_->Snapshot().window.calls, 15u);
  clock_.Advance(Seconds(31));
  EXPECT_EQ(breaker_->Snapshot().window.calls, 0u);
  // Fresh window: 15 successes then 5 failures is 25%: closed.
  for (int i = 0; i < 15; ++i) Call(OutcomeClass::kSuccess);
  for (int i = 0; i < 5; ++i) Call(OutcomeClass::kTimeout);
  EXPECT_EQ(Current(), State::kClosed);
}

TEST_F(BreakerTest, SlowCallRateOpens) {
  Policy p = BasePolicy();
  p.consecutive_failures = 0;
  p.slow_call_rate = {0.5, 10, Seconds(2)};
  Make(p);
  for (int i = 0; i < 5; ++i) Call(OutcomeClass::kSuccess, Milliseconds(100));
  for (int i = 0; i < 4; ++i) Call(OutcomeClass::kSuccess, Seconds(2));
  EXPECT_EQ(Current(), State::kClosed);  // 9 calls < min_calls
  Call(OutcomeClass::kSuccess, Seconds(3));
  EXPECT_EQ(Current(), State::kOpen);
  EXPECT_EQ(transitions_.back().reason, TransitionReason::kSlowCallRate);
  EXPECT_EQ(transitions_.back().window.slow, 5u);
}

TEST_F(BreakerTest, SlowCallRuleIsOffByDefault) {
  Policy p = BasePolicy();
  p.consecutive_failures = 0;
  Make(p);
  for (int i = 0; i < 50; ++i) Call(OutcomeClass::kSuccess, Seconds(60));
  EXPECT_EQ(Current(), State::kClosed);
}

// --- open --------------------------------------------------------------------

TEST_F(BreakerTest, OpenRejectsAtOnceWithTimeLeft) {
  Make(BasePolicy());
  Trip();
  clock_.Advance(Seconds(4));
  AcquireResult a = Acquire();
  EXPECT_FALSE(a.allowed);
  EXPECT_EQ(a.permit, 0u);
  EXPECT_EQ(a.state, State::kOpen);
  EXPECT_EQ(a.reason, RejectReason::kOpen);
  EXPECT_EQ(a.retry_after, Seconds(6));
  EXPECT_EQ(breaker_->Snapshot().retry_after, Seconds(6));
}

TEST_F(BreakerTest, LateResultsWhileOpenChangeNothing) {
  Make(BasePolicy());
  AcquireResult early = Acquire();  // a call that started while closed
  Trip();
  const uint64_t gen = breaker_->Snapshot().generation;
  EXPECT_EQ(Report(early.permit, OutcomeClass::kSuccess).effect, Effect::kLate);
  EXPECT_EQ(Current(), State::kOpen);
  EXPECT_EQ(breaker_->Snapshot().generation, gen);
  EXPECT_EQ(breaker_->Snapshot().reports[static_cast<int>(
                OutcomeClass::kSuccess)][static_cast<int>(Effect::kLate)],
            1u);
}

TEST_F(BreakerTest, HalfOpenIsDerivedFromTheClock) {
  Make(BasePolicy());
  Trip();
  clock_.Advance(Seconds(10) - absl::Nanoseconds(1));
  EXPECT_EQ(Current(), State::kOpen);
  clock_.Advance(absl::Nanoseconds(1));
  EXPECT_EQ(Current(), State::kHalfOpen);  // no Acquire, no timer
}

// --- half-open ---------------------------------------------------------------

TEST_F(BreakerTest, HalfOpenGrantsExactlyOneProbe) {
  Make(BasePolicy());
  Trip();
  clock_.Advance(Seconds(10));
  AcquireResult probe = Acquire();
  EXPECT_TRUE(probe.allowed);
  EXPECT_TRUE(probe.probe);
  EXPECT_EQ(probe.state, State::kHalfOpen);
  ASSERT_EQ(transitions_.size(), 2u);
  EXPECT_EQ(transitions_[1].to, State::kHalfOpen);
  EXPECT_EQ(transitions_[1].reason, TransitionReason::kCooldownElapsed);
  for (int i = 0; i < 10; ++i) {
    AcquireResult other = Acquire();
    EXPECT_FALSE(other.allowed);
    EXPECT_EQ(other.reason, RejectReason::kProbeInFlight);
    EXPECT_EQ(other.retry_after, Seconds(10));  // the lease left
  }
  EXPECT_TRUE(breaker_->Snapshot().probe_in_flight);
}

TEST_F(BreakerTest, ProbeSuccessClosesAndResetsEverything) {
  Make(BasePolicy());
  Trip();
  clock_.Advance(Seconds(10));
  AcquireResult probe = Acquire();
  ReportResult r = Report(probe.permit, OutcomeClass::kSuccess);
  EXPECT_EQ(r.effect, Effect::kCountedSuccess);
  EXPECT_EQ(r.state, State::kClosed);
  BreakerSnapshot s = breaker_->Snapshot();
  EXPECT_EQ(s.consecutive_failures, 0u);
  EXPECT_EQ(s.window.calls, 0u);
  EXPECT_EQ(s.escalation_level, 0u);
  EXPECT_EQ(transitions_.back().reason, TransitionReason::kProbeSucceeded);
  EXPECT_EQ(transitions_.back().from, State::kHalfOpen);
  EXPECT_TRUE(Acquire().allowed);
}

TEST_F(BreakerTest, ProbeFailureReopensWithDoubledCooldown) {
  Make(BasePolicy());
  Trip();
  clock_.Advance(Seconds(10));
  ReportResult r = Report(Acquire().permit, OutcomeClass::kTimeout);
  EXPECT_EQ(r.effect, Effect::kCountedFailure);
  EXPECT_EQ(r.state, State::kOpen);
  EXPECT_EQ(transitions_.back().reason, TransitionReason::kProbeFailed);
  EXPECT_EQ(transitions_.back().retry_after, Seconds(20));
  EXPECT_EQ(breaker_->Snapshot().escalation_level, 1u);
  // The cooldown restarts from now: still open 19 s later.
  clock_.Advance(Seconds(19));
  EXPECT_EQ(Acquire().reason, RejectReason::kOpen);
  clock_.Advance(Seconds(1));
  EXPECT_TRUE(Acquire().probe);
}

TEST_F(BreakerTest, CooldownEscalationIsCappedAtMax) {
  Make(BasePolicy());  // 10 s base, 80 s max
  Trip();
  absl::Duration expected[] = {Seconds(20), Seconds(40), Seconds(80),
                               Seconds(80), Seconds(80)};
  absl::Duration cooldown = Seconds(10);
  for (absl::Duration want : expected) {
    clock_.Advance(cooldown);
    Report(Acquire().permit, OutcomeClass::kServerError);
    EXPECT_EQ(transitions_.back().retry_after, want);
    cooldown = want;
  }
  EXPECT_EQ(breaker_->Snapshot().escalation_level, 5u);
  // A success resets the escalation: the next trip starts at base again.
  clock_.Advance(cooldown);
  Report(Acquire().permit, OutcomeClass::kSuccess);
  Trip();
  EXPECT_EQ(transitions_.back().retry_after, Seconds(10));
}

TEST_F(BreakerTest, JitterStaysWithinItsBounds) {
  Policy p = BasePolicy();
  p.cooldown.jitter = 0.1;
  for (double u : {0.0, 0.25, 0.999}) {
    g_uniform = u;
    Make(p);
    transitions_.clear();
    Trip();
    const absl::Duration d = transitions_.back().retry_after;
    EXPECT_GE(d, Seconds(9));
    EXPECT_LE(d, Seconds(11));
    EXPECT_NEAR(absl::ToDoubleSeconds(d), 10 * (1 + 0.1 * (2 * u - 1)), 1e-6);
  }
}

TEST_F(BreakerTest, DefaultJitterSpreadsCooldowns) {
  Policy p = BasePolicy();
  p.cooldown.jitter = 0.1;
  std::set<absl::Duration> seen;
  for (int i = 0; i < 20; ++i) {
    breaker_ = std::make_unique<Breaker>("dep/a", std::make_shared<Policy>(p),
                                         &default_jitter_);
    transitions_.clear();
    Trip();
    const absl::Duration d = transitions_.back().retry_after;
    EXPECT_GE(d, Seconds(9));
    EXPECT_LE(d, Seconds(11));
    seen.insert(d);
  }
  EXPECT_GT(seen.size(), 1u);
}

TEST_F(BreakerTest, RetryAfterLengthensButNeverShortensTheCooldown) {
  Make(BasePolicy());
  for (int i = 0; i < 4; ++i) Call(OutcomeClass::kTimeout);
  Call(OutcomeClass::kRateLimited, absl::ZeroDuration(), Seconds(45));
  EXPECT_EQ(transitions_.back().retry_after, Seconds(45));
  clock_.Advance(Seconds(44));
  EXPECT_EQ(Acquire().reason, RejectReason::kOpen);

  Make(BasePolicy());
  transitions_.clear();
  for (int i = 0; i < 4; ++i) Call(OutcomeClass::kTimeout);
  Call(OutcomeClass::kRateLimited, absl::ZeroDuration(), Seconds(1));
  EXPECT_EQ(transitions_.back().retry_after, Seconds(10));
}

TEST_F(BreakerTest, ProbeLeaseLapseLetsTheNextCallerProbe) {
  Make(BasePolicy());  // lease 10 s
  Trip();
  clock_.Advance(Seconds(10));
  AcquireResult first = Acquire();
  ASSERT_TRUE(first.probe);
  clock_.Advance(Seconds(9));
  EXPECT_EQ(Acquire().reason, RejectReason::kProbeInFlight);
  clock_.Advance(Seconds(1));
  AcquireResult second = Acquire();
  ASSERT_TRUE(second.probe);
  EXPECT_NE(second.permit, first.permit);
  // The abandoned probe's late result decides nothing ...
  EXPECT_EQ(Report(first.permit, OutcomeClass::kTimeout).effect, Effect::kLate);
  EXPECT_EQ(Current(), State::kHalfOpen);
  // ... the current one does.
  EXPECT_EQ(Report(second.permit, OutcomeClass::kSuccess).state,
            State::kClosed);
}

TEST_F(BreakerTest, ProbeReportAfterLeaseStillCountsIfNobodyClaimed) {
  Make(BasePolicy());
  Trip();
  clock_.Advance(Seconds(10));
  AcquireResult probe = Acquire();
  clock_.Advance(Seconds(30));
  EXPECT_EQ(Report(probe.permit, OutcomeClass::kSuccess).state, State::kClosed);
}

TEST_F(BreakerTest, NeutralOutcomeOnTheProbeReleasesIt) {
  Make(BasePolicy());
  Trip();
  clock_.Advance(Seconds(10));
  AcquireResult probe = Acquire();
  ReportResult r = Report(probe.permit, OutcomeClass::kBadRequest);
  EXPECT_EQ(r.effect, Effect::kNeutral);
  EXPECT_EQ(r.state, State::kHalfOpen);
  EXPECT_EQ(breaker_->Snapshot().escalation_level, 0u);
  AcquireResult next = Acquire();  // no need to wait for the lease
  EXPECT_TRUE(next.probe);
}

TEST_F(BreakerTest, RequiredSuccessesNeedsThatManyProbes) {
  Policy p = BasePolicy();
  p.probe.required_successes = 3;
  Make(p);
  Trip();
  clock_.Advance(Seconds(10));
  for (int i = 0; i < 2; ++i) {
    AcquireResult probe = Acquire();
    ASSERT_TRUE(probe.probe) << i;
    EXPECT_EQ(Acquire().reason, RejectReason::kProbeInFlight);
    EXPECT_EQ(Report(probe.permit, OutcomeClass::kSuccess).state,
              State::kHalfOpen);
  }
  EXPECT_EQ(Report(Acquire().permit, OutcomeClass::kSuccess).state,
            State::kClosed);
}

TEST_F(BreakerTest, RequiredSuccessesRestartAfterAProbeFailure) {
  Policy p = BasePolicy();
  p.probe.required_successes = 2;
  Make(p);
  Trip();
  clock_.Advance(Seconds(10));
  Report(Acquire().permit, OutcomeClass::kSuccess);
  Report(Acquire().permit, OutcomeClass::kTimeout);  // back to open, 20 s
  clock_.Advance(Seconds(20));
  EXPECT_EQ(Report(Acquire().permit, OutcomeClass::kSuccess).state,
            State::kHalfOpen);
  EXPECT_EQ(Report(Acquire().permit, OutcomeClass::kSuccess).state,
            State::kClosed);
}

// --- permits and generations -------------------------------------------------

TEST_F(BreakerTest, GenerationMovesAtEveryTransition) {
  Make(BasePolicy());
  EXPECT_EQ(breaker_->Snapshot().generation, 0u);
  Trip();
  EXPECT_EQ(breaker_->Snapshot().generation, 1u);
  clock_.Advance(Seconds(10));
  AcquireResult probe = Acquire();
  EXPECT_EQ(breaker_->Snapshot().generation, 2u);  // open -> half-open
  Report(probe.permit, OutcomeClass::kSuccess);
  EXPECT_EQ(breaker_->Snapshot().generation, 3u);
  for (size_t i = 0; i < transitions_.size(); ++i) {
    EXPECT_EQ(transitions_[i].generation, i + 1);
  }
}

TEST_F(BreakerTest, ReportFromAnEarlierGenerationIsLate) {
  Make(BasePolicy());
  AcquireResult old = Acquire();
  Trip();
  clock_.Advance(Seconds(10));
  Report(Acquire().permit, OutcomeClass::kSuccess);  // closed again
  ASSERT_EQ(Current(), State::kClosed);
  EXPECT_EQ(Report(old.permit, OutcomeClass::kTimeout).effect, Effect::kLate);
  EXPECT_EQ(breaker_->Snapshot().consecutive_failures, 0u);
  EXPECT_EQ(breaker_->Snapshot().window.calls, 0u);
}

TEST_F(BreakerTest, PermitsItNeverIssuedAreRefusedAndChangeNothing) {
  Make(BasePolicy());
  Acquire();
  Breaker other("dep/b", std::make_shared<Policy>(BasePolicy()), &context_);
  std::optional<Transition> t;
  const uint64_t foreign = other.Acquire(0, &t).permit;
  const BreakerContext other_process{&clock_, kSecret + 1};
  Breaker restarted("dep/a", std::make_shared<Policy>(BasePolicy()),
                    &other_process);
  const uint64_t stale = restarted.Acquire(0, &t).permit;
  const BreakerSnapshot before = breaker_->Snapshot();
  for (uint64_t bad :
       {uint64_t{1}, uint64_t{12345}, ~uint64_t{0}, foreign, stale}) {
    auto r = breaker_->Report(bad, {OutcomeClass::kTimeout}, &t);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find("permit"), std::string::npos);
  }
  const BreakerSnapshot after = breaker_->Snapshot();
  EXPECT_EQ(after.generation, before.generation);
  EXPECT_EQ(after.window.calls, before.window.calls);
  EXPECT_EQ(after.consecutive_failures, before.consecutive_failures);
  EXPECT_EQ(after.reports, before.reports);
}

// DESIGN.md: a random 64-bit value is refused with probability at least
// 1 - 2^-16 (the 17-bit tag gives 1 - 2^-17: about 7.6 of a million pass).
TEST_F(BreakerTest, RandomPermitsAlmostNeverPass) {
  Make(BasePolicy());
  std::optional<Transition> t;
  int accepted = 0;
  uint64_t x = 0x9e3779b97f4a7c15ULL;
  constexpr int kTries = 1 << 20;
  for (int i = 0; i < kTries; ++i) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    if (breaker_->Report(x, {OutcomeClass::kSuccess}, &t).ok()) ++accepted;
  }
  EXPECT_LE(accepted, kTries >> 16);
}

// --- retry budget
// --------------------------------------------------------------

TEST_F(BreakerTest, RetryBudgetAllowsMinPerSecondTimesTtl) {
  Make(BasePolicy());  // ratio 0.1, min 1/s, ttl 10 s
  for (int i = 0; i < 10; ++i) {
    AcquireResult r = Acquire(/*attempt=*/1);
    EXPECT_TRUE(r.allowed) << i;
  }
  AcquireResult r = Acquire(1);
  EXPECT_FALSE(r.allowed);
  EXPECT_EQ(r.reason, RejectReason::kRetryBudget);
  EXPECT_EQ(breaker_->Snapshot().retries_granted, 10u);
  EXPECT_EQ(breaker_->Snapshot().retries_rejected, 1u);
}

TEST_F(BreakerTest, RetryBudgetGrowsWithFirstAttempts) {
  Make(BasePolicy());
  for (int i = 0; i < 100; ++i) Acquire(0);
  int granted = 0;
  while (Acquire(2).allowed) ++granted;
  EXPECT_EQ(granted, 20);  // 0.1 * 100 + 1 * 10
}

TEST_F(BreakerTest, RetryBudgetRefillsAfterTtl) {
  Make(BasePolicy());
  while (Acquire(1).allowed) {
  }
  clock_.Advance(Seconds(11));
  EXPECT_TRUE(Acquire(1).allowed);
}

TEST_F(BreakerTest, NoRetryWhileNotClosed) {
  Make(BasePolicy());
  Trip();
  EXPECT_EQ(Acquire(1).reason, RejectReason::kOpen);
  clock_.Advance(Seconds(10));
  AcquireResult retry = Acquire(1);  // half-open, nobody probing yet
  EXPECT_FALSE(retry.allowed);
  EXPECT_EQ(retry.reason, RejectReason::kOpen);
  EXPECT_TRUE(Acquire(0).probe);  // the probe is a first attempt
}

// --- admin overrides ---------------------------------------------------------

TEST_F(BreakerTest, ForcedOpenRejectsEveryone) {
  Make(BasePolicy());
  AcquireResult before = Acquire();
  Transition t = breaker_->ForceOpen();
  EXPECT_EQ(t.to, State::kForcedOpen);
  EXPECT_EQ(t.reason, TransitionReason::kForcedOpen);
  AcquireResult a = Acquire();
  EXPECT_FALSE(a.allowed);
  EXPECT_EQ(a.reason, RejectReason::kForcedOpen);
  EXPECT_EQ(a.state, State::kForcedOpen);
  clock_.Advance(absl::Hours(1));
  EXPECT_EQ(Acquire().reason, RejectReason::kForcedOpen);
  EXPECT_EQ(Report(before.permit, OutcomeClass::kSuccess).effect,
            Effect::kLate);
}

TEST_F(BreakerTest, ForcedClosedAllowsAndStillRecords) {
  Make(BasePolicy());
  Trip();
  breaker_->ForceClose();
  for (int i = 0; i < 20; ++i) {
    AcquireResult a = Acquire();
    ASSERT_TRUE(a.allowed);
    EXPECT_EQ(a.state, State::kForcedClosed);
    EXPECT_EQ(Report(a.permit, OutcomeClass::kTimeout).effect,
              Effect::kCountedFailure);
  }
  EXPECT_EQ(Current(), State::kForcedClosed);
  EXPECT_EQ(breaker_->Snapshot().consecutive_failures, 25u);
}

TEST_F(BreakerTest, ResetReturnsToPlainClosed) {
  Make(BasePolicy());
  Trip();
  clock_.Advance(Seconds(10));
  Report(Acquire().permit, OutcomeClass::kTimeout);  // escalation 1
  breaker_->ForceOpen();
  Transition t = breaker_->Reset();
  EXPECT_EQ(t.from, State::kForcedOpen);
  EXPECT_EQ(t.to, State::kClosed);
  EXPECT_EQ(t.reason, TransitionReason::kReset);
  BreakerSnapshot s = breaker_->Snapshot();
  EXPECT_EQ(s.state, State::kClosed);
  EXPECT_EQ(s.escalation_level, 0u);
  EXPECT_EQ(s.consecutive_failures, 0u);
  EXPECT_TRUE(Acquire().allowed);
}

// --- shadow mode -------------------------------------------------------------

TEST_F(BreakerTest, ShadowModeAllowsButComputesEveryDecision) {
  Policy p = BasePolicy();
  p.mode = Mode::kShadow;
  Make(p);
  Trip();
  EXPECT_EQ(transitions_.back().to, State::kOpen);
  AcquireResult a = Acquire();
  EXPECT_TRUE(a.allowed);
  EXPECT_NE(a.permit, 0u);
  EXPECT_EQ(a.state, State::kOpen);
  EXPECT_EQ(a.reason, RejectReason::kOpen);  // what enforce would do
  // Outcomes of calls shadow let through while open change nothing.
  EXPECT_EQ(Report(a.permit, OutcomeClass::kSuccess).effect, Effect::kLate);
  clock_.Advance(Seconds(10));
  AcquireResult probe = Acquire();
  EXPECT_TRUE(probe.probe);
  AcquireResult other = Acquire();
  EXPECT_TRUE(other.allowed);
  EXPECT_EQ(other.reason, RejectReason::kProbeInFlight);
  EXPECT_EQ(Report(probe.permit, OutcomeClass::kSuccess).state, State::kClosed);
  const BreakerSnapshot s = breaker_->Snapshot();
  EXPECT_EQ(s.acquires[static_cast<int>(Decision::kShadowRejectedOpen)], 1u);
  EXPECT_EQ(
      s.acquires[static_cast<int>(Decision::kShadowRejectedProbeInFlight)], 1u);
  EXPECT_EQ(s.acquires[static_cast<int>(Decision::kRejectedOpen)], 0u);
  EXPECT_TRUE(s.shadow);
}

// --- policy reload, idleness, metrics
// -----------------------------------------

TEST_F(BreakerTest, NewPolicyKeepsStateCountersEscalationAndGeneration) {
  Make(BasePolicy());
  Trip();
  clock_.Advance(Seconds(10));
  Report(Acquire().permit, OutcomeClass::kTimeout);  // escalation 1, 20 s
  const BreakerSnapshot before = breaker_->Snapshot();
  Policy p = BasePolicy();
  p.match = "dep/*";
  p.consecutive_failures = 50;
  p.cooldown.base = Seconds(1);
  breaker_->SetPolicy(std::make_shared<Policy>(p));
  const BreakerSnapshot after = breaker_->Snapshot();
  EXPECT_EQ(after.state, State::kOpen);
  EXPECT_EQ(after.generation, before.generation);
  EXPECT_EQ(after.escalation_level, 1u);
  EXPECT_EQ(after.retry_after, before.retry_after);  // running cooldown kept
  EXPECT_EQ(after.policy, "dep/*");
}

TEST_F(BreakerTest, WindowCountsSurviveAWindowChange) {
  Policy p = BasePolicy();
  p.consecutive_failures = 0;
  Make(p);
  for (int i = 0; i < 7; ++i) Call(OutcomeClass::kTimeout);
  for (int i = 0; i < 3; ++i) Call(OutcomeClass::kSuccess);
  p.failure_rate.window = Seconds(60);
  breaker_->SetPolicy(std::make_shared<Policy>(p));
  EXPECT_EQ(breaker_->Snapshot().window.calls, 10u);
  EXPECT_EQ(breaker_->Snapshot().window.failures, 7u);
}

TEST_F(BreakerTest, IdleOnlyWhenClosedQuietAndOld) {
  Make(BasePolicy());
  EXPECT_FALSE(breaker_->IsIdle(absl::Minutes(10)));  // just created
  clock_.Advance(absl::Minutes(10));
  EXPECT_TRUE(breaker_->IsIdle(absl::Minutes(10)));
  Call(OutcomeClass::kTimeout);  // history: one failure
  clock_.Advance(absl::Minutes(20));
  EXPECT_FALSE(breaker_->IsIdle(absl::Minutes(10)));  // streak of 1
  Call(OutcomeClass::kSuccess);
  clock_.Advance(absl::Minutes(10));
  EXPECT_TRUE(breaker_->IsIdle(absl::Minutes(10)));
  Trip();
  clock_.Advance(absl::Hours(2));
  EXPECT_FALSE(breaker_->IsIdle(absl::Minutes(10)));  // open: history
  breaker_->Reset();
  breaker_->ForceClose();
  clock_.Advance(absl::Hours(2));
  EXPECT_FALSE(breaker_->IsIdle(absl::Minutes(10)));  // override
}

TEST_F(BreakerTest, StateSecondsSplitOpenAndHalfOpen) {
  Make(BasePolicy());
  clock_.Advance(Seconds(5));
  Trip();
  clock_.Advance(Seconds(25));  // 10 s open, then 15 s half-open
  BreakerSnapshot s = breaker_->Snapshot();
  EXPECT_DOUBLE_EQ(s.state_seconds[static_cast<int>(State::kClosed)], 5);
  EXPECT_DOUBLE_EQ(s.state_seconds[static_cast<int>(State::kOpen)], 10);
  EXPECT_DOUBLE_EQ(s.state_seconds[static_cast<int>(State::kHalfOpen)], 15);
  Report(Acquire().permit, OutcomeClass::kSuccess);
  clock_.Advance(Seconds(2));
  s = breaker_->Snapshot();
  EXPECT_DOUBLE_EQ(s.state_seconds[static_cast<int>(State::kClosed)], 7);
  EXPECT_DOUBLE_EQ(s.state_seconds[static_cast<int>(State::kHalfOpen)], 15);
}

TEST_F(BreakerTest, LatencyHistogramCountsEveryReportedLatency) {
  Make(BasePolicy());
  Call(OutcomeClass::kSuccess, Milliseconds(3));
  Call(OutcomeClass::kSuccess, Milliseconds(40));
  Call(OutcomeClass::kTimeout, Seconds(200));
  Call(OutcomeClass::kSuccess);  // no latency measured: not observed
  BreakerSnapshot s = breaker_->Snapshot();
  EXPECT_EQ(s.latency_count, 3u);
  EXPECT_EQ(s.latency_buckets[0], 1u);      // <= 5 ms
  EXPECT_EQ(s.latency_buckets[3], 1u);      // <= 50 ms
  EXPECT_EQ(s.latency_buckets.back(), 1u);  // +Inf
  EXPECT_NEAR(s.latency_sum_seconds, 200.043, 1e-9);
}

TEST_F(BreakerTest, DecisionsAreCounted) {
  Make(BasePolicy());
  Trip();
  Acquire();
  clock_.Advance(Seconds(10));
  Acquire();
  Acquire();
  const BreakerSnapshot s = breaker_->Snapshot();
  EXPECT_EQ(s.acquires[static_cast<int>(Decision::kAllowed)], 5u);
  EXPECT_EQ(s.acquires[static_cast<int>(Decision::kRejectedOpen)], 1u);
  EXPECT_EQ(s.acquires[static_cast<int>(Decision::kProbe)], 1u);
  EXPECT_EQ(s.acquires[static_cast<int>(Decision::kRejectedProbeInFlight)], 1u);
  ASSERT_EQ(s.transitions.size(), 2u);
  EXPECT_EQ(s.transitions[0].reason, TransitionReason::kConsecutiveFailures);
  EXPECT_EQ(s.transitions[1].reason, TransitionReason::kCooldownElapsed);
}

}  // namespace
}  // namespace breakerd

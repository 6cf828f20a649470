// Single-use permits, hung calls and gentle recovery (DESIGN.md "Hung
// calls, single-use permits, gentle recovery"), on the fake clock.
#include <memory>
#include <optional>
#include <vector>

#include "gtest/gtest.h"
#include "server/engine/breaker.h"
#include "server/engine/clock.h"
#include "server/engine/permit_ledger.h"
#include "server/engine/registry.h"
#include "tests/engine/breaker_fixture.h"

namespace breakerd {
namespace {

using absl::Milliseconds;
using absl::Seconds;

int Idx(OutcomeClass c) { return static_cast<int>(c); }
int Idx(Effect e) { return static_cast<int>(e); }

// --- single-use permits --------------------------------------------------

using PermitTest = BreakerTest;

// The issue's report: three calls, each Report sent twice, opened the
// breaker on five "failures".
TEST_F(PermitTest, RepeatedReportsChangeNothingAndSayDuplicate) {
  Make(BasePolicy());  // consecutive_failures 5
  for (int i = 0; i < 3; ++i) {
    AcquireResult a = Acquire();
    EXPECT_EQ(Report(a.permit, OutcomeClass::kTimeout).effect,
              Effect::kCountedFailure);
    EXPECT_EQ(Report(a.permit, OutcomeClass::kTimeout).effect,
              Effect::kDuplicate);
  }
  BreakerSnapshot s = breaker_->Snapshot();
  EXPECT_EQ(s.state, State::kClosed);
  EXPECT_EQ(s.consecutive_failures, 3u);
  EXPECT_EQ(s.window.calls, 3u);
  EXPECT_EQ(
      s.reports[Idx(OutcomeClass::kTimeout)][Idx(Effect::kCountedFailure)], 3u);
  EXPECT_EQ(s.reports[Idx(OutcomeClass::kTimeout)][Idx(Effect::kDuplicate)],
            3u);
  // A duplicate's latency is not a second observation either.
  AcquireResult a = Acquire();
  Report(a.permit, OutcomeClass::kSuccess, Milliseconds(5));
  Report(a.permit, OutcomeClass::kSuccess, Milliseconds(5));
  EXPECT_EQ(breaker_->Snapshot().latency_count, 1u);
}

TEST_F(PermitTest, DuplicateWinsOverLate) {
  Make(BasePolicy());
  AcquireResult held = Acquire();
  Trip();  // the generation moves on: `held` is late now
  EXPECT_EQ(Report(held.permit, OutcomeClass::kTimeout).effect, Effect::kLate);
  EXPECT_EQ(Report(held.permit, OutcomeClass::kTimeout).effect,
            Effect::kDuplicate);
  BreakerSnapshot s = breaker_->Snapshot();
  EXPECT_EQ(s.reports[Idx(OutcomeClass::kTimeout)][Idx(Effect::kLate)], 1u);
  EXPECT_EQ(s.reports[Idx(OutcomeClass::kTimeout)][Idx(Effect::kDuplicate)],
            1u);
}

TEST_F(PermitTest, AProbeReportedTwiceDecidesOnce) {
  Policy p = BasePolicy();
  p.probe.required_successes = 2;
  Make(p);
  Trip();
  clock_.Advance(Seconds(10));
  AcquireResult probe = Acquire();
  ASSERT_TRUE(probe.probe);
  EXPECT_EQ(Report(probe.permit, OutcomeClass::kSuccess).effect,
            Effect::kCountedSuccess);
  // Not a second probe success: the breaker needs another probe.
  EXPECT_EQ(Report(probe.permit, OutcomeClass::kSuccess).effect,
            Effect::kDuplicate);
  EXPECT_EQ(Current(), State::kHalfOpen);
}

// Exact at the design's rate: 10,000 calls/s for the whole 60 s horizon,
// every permit reported once after a delay, then every one again.
TEST_F(PermitTest, ExactAtTenThousandPerSecondOverTheHorizon) {
  Policy p = BasePolicy();
  p.consecutive_failures = 0;
  Make(p);
  constexpr int kPermits = 600000;  // 60 s at 10,000/s
  std::vector<uint64_t> permits;
  permits.reserve(kPermits);
  for (int i = 0; i < kPermits; ++i) {
    permits.push_back(Acquire().permit);
    clock_.Advance(absl::Microseconds(100));
    // Each reported about a second after its Acquire.
    if (i >= 10000) Report(permits[i - 10000], OutcomeClass::kSuccess);
  }
  for (int i = kPermits - 10000; i < kPermits; ++i) {
    Report(permits[i], OutcomeClass::kSuccess);
  }
  int duplicates = 0;
  for (uint64_t permit : permits) {
    if (Report(permit, OutcomeClass::kSuccess).effect == Effect::kDuplicate) {
      ++duplicates;
    }
  }
  EXPECT_EQ(duplicates, kPermits);
  EXPECT_EQ(breaker_->Snapshot().inflight, 0u);
}

TEST_F(PermitTest, AReportOlderThanTheHorizonIsAppliedAsBefore) {
  Make(BasePolicy());
  AcquireResult a = Acquire();
  EXPECT_EQ(Report(a.permit, OutcomeClass::kSuccess).effect,
            Effect::kCountedSuccess);
  clock_.Advance(kDefaultPermitHorizon + Seconds(1));
  Acquire();  // tends the ledger: the old permit is forgotten
  EXPECT_EQ(Report(a.permit, OutcomeClass::kTimeout).effect,
            Effect::kCountedFailure);
}

TEST_F(PermitTest, InflightCountsPermitsOutWithinTheHorizon) {
  Make(BasePolicy());
  std::vector<uint64_t> permits;
  for (int i = 0; i < 5; ++i) permits.push_back(Acquire().permit);
  Report(permits[0], OutcomeClass::kSuccess);
  Report(permits[1], OutcomeClass::kBadRequest);  // neutral, still reported
  EXPECT_EQ(breaker_->Snapshot().inflight, 3u);
  clock_.Advance(kDefaultPermitHorizon);
  EXPECT_EQ(breaker_->Snapshot().inflight, 0u);
}

// --- hung calls ----------------------------------------------------------

class HungCallTest : public BreakerTest {
 protected:
  // failure_rate 0.5 of 20 in 30 s; hang_after 1 s.
  static Policy HangPolicy() {
    Policy p = BasePolicy();
    p.failure_rate.threshold = 0.5;
    p.failure_rate.min_calls = 20;
    p.failure_rate.window = Seconds(30);
    p.inflight.hang_after = Seconds(1);
    return p;
  }
};

TEST_F(HungCallTest, EveryCallHangingOpensOnTheNextAcquireAfterHangAfter) {
  Make(HangPolicy());
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(Acquire().allowed);
  clock_.Advance(Milliseconds(999));
  EXPECT_TRUE(Acquire().allowed);  // not hung yet
  EXPECT_EQ(breaker_->Snapshot().hung_calls, 0u);
  clock_.Advance(Milliseconds(1));
  AcquireResult r = Acquire();
  EXPECT_FALSE(r.allowed);
  EXPECT_EQ(r.reason, RejectReason::kOpen);
  ASSERT_EQ(transitions_.size(), 1u);
  EXPECT_EQ(transitions_[0].reason, TransitionReason::kHungCalls);
  EXPECT_EQ(transitions_[0].window.calls, 20u);
  EXPECT_EQ(transitions_[0].window.failures, 20u);
  EXPECT_EQ(transitions_[0].window.slow, 20u);
  BreakerSnapshot s = breaker_->Snapshot();
  EXPECT_EQ(s.hung_calls, 20u);
  EXPECT_EQ(s.consecutive_failures, 0u);
}

TEST_F(HungCallTest, HungCallsNeverCountTowardConsecutiveFailures) {
  Policy p = HangPolicy();
  p.failure_rate.threshold = 0;  // only consecutive_failures (5)
  Make(p);
  for (int i = 0; i < 10; ++i) Acquire();
  clock_.Advance(Seconds(2));
  Acquire();
  BreakerSnapshot s = breaker_->Snapshot();
  EXPECT_EQ(s.state, State::kClosed);
  EXPECT_EQ(s.hung_calls, 10u);
  EXPECT_EQ(s.consecutive_failures, 0u);
  EXPECT_EQ(s.window.failures, 10u);
  EXPECT_EQ(s.window.slow, 10u);
}

TEST_F(HungCallTest, AScrapeShowsButNeverMoves) {
  Make(HangPolicy());
  for (int i = 0; i < 20; ++i) Acquire();
  EXPECT_EQ(breaker_->Snapshot().inflight, 20u);
  clock_.Advance(Seconds(5));
  BreakerSnapshot s = breaker_->Snapshot();
  EXPECT_EQ(s.state, State::kClosed);
  EXPECT_EQ(s.inflight, 20u);  // still out: counted at the next call
  EXPECT_EQ(s.hung_calls, 0u);
  EXPECT_TRUE(transitions_.empty());
  EXPECT_FALSE(Acquire().allowed);
  s = breaker_->Snapshot();
  EXPECT_EQ(s.inflight, 0u);
  EXPECT_EQ(s.hung_calls, 20u);
}

TEST_F(HungCallTest, TheRealReportReplacesTheHungCount) {
  Policy p = HangPolicy();
  p.failure_rate.threshold = 0;
  p.consecutive_failures = 0;
  Make(p);
  std::vector<uint64_t> permits;
  for (int i = 0; i < 3; ++i) permits.push_back(Acquire().permit);
  clock_.Advance(Seconds(1));
  Acquire();
  EXPECT_EQ(breaker_->Snapshot().window.failures, 3u);
  EXPECT_EQ(Report(permits[0], OutcomeClass::kSuccess).effect,
            Effect::kCountedSuccess);
  BreakerSnapshot s = breaker_->Snapshot();
  EXPECT_EQ(s.window.calls, 3u);
  EXPECT_EQ(s.window.failures, 2u);
  EXPECT_EQ(s.window.slow, 2u);
  EXPECT_EQ(s.hung_calls, 3u);  // a counter: what was counted stays counted
  EXPECT_EQ(Report(permits[0], OutcomeClass::kSuccess).effect,
            Effect::kDuplicate);
  EXPECT_EQ(breaker_->Snapshot().window.calls, 3u);
}

TEST_F(HungCallTest, ARealReportAfterTheHungCountLeftTheWindowCountsAnew) {
  Policy p = HangPolicy();
  p.failure_rate.threshold = 0;
  p.failure_rate.window = Seconds(10);
  p.consecutive_failures = 0;
  Make(p);
  uint64_t permit = Acquire().permit;
  clock_.Advance(Seconds(1));
  Report(Acquire().permit, OutcomeClass::kSuccess);
  EXPECT_EQ(breaker_->Snapshot().window.failures, 1u);
  clock_.Advance(Seconds(12));
  EXPECT_EQ(Report(permit, OutcomeClass::kSuccess).effect,
            Effect::kCountedSuccess);
  BreakerSnapshot s = breaker_->Snapshot();
  EXPECT_EQ(s.window.calls, 1u);
  EXPECT_EQ(s.window.failures, 0u);
}

TEST_F(HungCallTest, CallsOfAnEarlierGenerationNeverHang) {
  Policy p = HangPolicy();
  p.failure_rate.threshold = 0;
  Make(p);
  for (int i = 0; i < 10; ++i) Acquire();  // out, never reported
  Trip();                                  // consecutive failures
  clock_.Advance(Seconds(10));             // half-open
  AcquireResult probe = Acquire();
  ASSERT_TRUE(probe.probe);
  clock_.Advance(Seconds(5));  // past hang_after, inside the probe lease
  AcquireResult r = Acquire();
  EXPECT_FALSE(r.allowed);
  EXPECT_EQ(r.reason, RejectReason::kProbeInFlight);  // the lease rule
  EXPECT_EQ(breaker_->Snapshot().hung_calls, 0u);
  // The probe decides as always.
  EXPECT_EQ(Report(probe.permit, OutcomeClass::kSuccess).effect,
            Effect::kCountedSuccess);
  EXPECT_EQ(Current(), State::kClosed);
  Acquire();  // of the closed generation: this one hangs
  clock_.Advance(Seconds(5));
  Acquire();
  EXPECT_EQ(breaker_->Snapshot().hung_calls, 1u);
}

TEST_F(HungCallTest, ForcedClosedCountsHungCallsButNeverTrips) {
  Make(HangPolicy());
  breaker_->ForceClose();
  for (int i = 0; i < 30; ++i) Acquire();
  clock_.Advance(Seconds(1));
  EXPECT_TRUE(Acquire().allowed);
  BreakerSnapshot s = breaker_->Snapshot();
  EXPECT_EQ(s.state, State::kForcedClosed);
  EXPECT_EQ(s.hung_calls, 30u);
}

TEST_F(HungCallTest, SlowCallRateSeesHungCalls) {
  Policy p = HangPolicy();
  p.failure_rate.threshold = 0;
  p.slow_call_rate.threshold = 0.5;
  p.slow_call_rate.min_calls = 4;
  Make(p);
  for (int i = 0; i < 4; ++i) Acquire();
  clock_.Advance(Seconds(1));
  EXPECT_FALSE(Acquire().allowed);
  ASSERT_EQ(transitions_.size(), 1u);
  EXPECT_EQ(transitions_[0].reason, TransitionReason::kHungCalls);
}

TEST(PermitLedgerTest, AMillionPermitsNeverReportedStayBounded) {
  const int64_t horizon = absl::ToInt64Nanoseconds(kDefaultPermitHorizon);
  PermitLedger ledger(horizon / PermitLedger::kBucketsPerHorizon);
  int64_t now = 1;
  size_t most = 0;
  for (uint32_t seq = 0; seq < 1000000; ++seq) {
    ledger.Issue(seq, now, 0);
    now += 1000000;  // 1,000 calls/s: 1,000 s in all
    if (seq % 1000 == 0) ledger.Expire(now, horizon, horizon);
    most = std::max(most, ledger.MemoryBytes());
  }
  // 60 s at 1,000/s: 60,000 bits (8 KiB, 16 KiB as a power of two).
  EXPECT_LT(most, 20u * 1024);
  // At bucket granularity: every permit of the last 60 s, and at most a
  // bucket (horizon / 16) more.
  const uint64_t inflight = ledger.Inflight(now, horizon);
  EXPECT_GE(inflight, 59999u);
  EXPECT_LE(inflight, 60000u + 60000u / PermitLedger::kBucketsPerHorizon);
  ledger.Expire(now + horizon, horizon, horizon);
  EXPECT_TRUE(ledger.empty());
}

TEST(PermitLedgerTest, PastItsBoundTheOldestPermitsAreForgotten) {
  PermitLedger ledger(absl::ToInt64Nanoseconds(Seconds(1)));
  // 5 million permits in the same instant: more than 2^22 bits.
  for (uint32_t seq = 0; seq < 5000000; ++seq) ledger.Issue(seq, 1, 0);
  EXPECT_LE(ledger.MemoryBytes(), PermitLedger::kMaxBits / 8 + 4096);
  // The newest is tracked; the first is not.
  EXPECT_EQ(ledger.MarkReported(4999999 & PermitLedger::kSeqMask, 5000000).seen,
            PermitLedger::Seen::kFirst);
}

// --- gentle recovery -----------------------------------------------------

class RampTest : public BreakerTest {
 protected:
  // Ramp of 2 s from 0.1; consecutive_failures 5; cooldown 10 s.
  static Policy RampPolicy() {
    Policy p = BasePolicy();
    p.recovery.ramp = Seconds(2);
    p.recovery.start_share = 0.1;
    return p;
  }

  // Opens (escalated `failed_probes` times), then closes on a probe.
  void OpenThenRecover(int failed_probes = 0) {
    Trip();
    for (int i = 0; i < failed_probes; ++i) {
      clock_.Advance(Seconds(80));
      AcquireResult probe = Acquire();
      ASSERT_TRUE(probe.probe);
      Report(probe.permit, OutcomeClass::kTimeout);
    }
    clock_.Advance(Seconds(80));
    AcquireResult probe = Acquire();
    ASSERT_TRUE(probe.probe);
    Report(probe.permit, OutcomeClass::kSuccess);
    ASSERT_EQ(Current(), State::kClosed);
  }

  // Makes n first attempts now; returns how many were admitted.
  int Admitted(int n) {
    int admitted = 0;
    for (int i = 0; i < n; ++i) {
      AcquireResult a = Acquire();
      if (a.allowed) {
        ++admitted;
        Report(a.permit, OutcomeClass::kSuccess);
      } else {
        EXPECT_EQ(a.reason, RejectReason::kRamp);
      }
    }
    return admitted;
  }
};

TEST_F(RampTest, AdmitsARisingShareByCountThenEverything) {
  Make(RampPolicy());
  OpenThenRecover();
  EXPECT_DOUBLE_EQ(breaker_->Snapshot().admit_share, 0.1);
  EXPECT_EQ(Admitted(100), 10);  // the first goes through, then 1 in 10
  clock_.Advance(Seconds(1));
  EXPECT_DOUBLE_EQ(breaker_->Snapshot().admit_share, 0.55);
  // The share now, not a catch-up for the slow start.
  EXPECT_EQ(Admitted(100), 55);
  clock_.Advance(Seconds(1));
  EXPECT_DOUBLE_EQ(breaker_->Snapshot().admit_share, 1.0);
  EXPECT_EQ(Admitted(100), 100);
  BreakerSnapshot s = breaker_->Snapshot();
  EXPECT_EQ(s.acquires[static_cast<int>(Decision::kRejectedRamp)], 135u);
}

TEST_F(RampTest, RetriesAreRefusedWhileRamping) {
  Make(RampPolicy());
  OpenThenRecover();
  AcquireResult r = Acquire(/*attempt=*/1);
  EXPECT_FALSE(r.allowed);
  EXPECT_EQ(r.reason, RejectReason::kRamp);
  clock_.Advance(Seconds(2));
  EXPECT_TRUE(Acquire(1).allowed);
}

TEST_F(RampTest, ATripDuringTheRampReopensAtTheNextEscalationLevel) {
  Make(RampPolicy());
  OpenThenRecover(/*failed_probes=*/1);  // escalation 1 when it closed
  EXPECT_EQ(breaker_->Snapshot().escalation_level, 1u);
  transitions_.clear();
  clock_.Advance(Seconds(1));  // share 0.55: admits enough to trip
  int failures = 0;
  while (Current() == State::kClosed && failures < 50) {
    AcquireResult a = Acquire();
    if (!a.allowed) continue;
    Report(a.permit, OutcomeClass::kTimeout);
    ++failures;
  }
  ASSERT_EQ(Current(), State::kOpen);
  ASSERT_FALSE(transitions_.empty());
  const Transition& t = transitions_.back();
  EXPECT_EQ(t.reason, TransitionReason::kRampFailed);
  EXPECT_EQ(t.escalation_level, 2u);
  EXPECT_EQ(t.retry_after, Seconds(40));  // 10 s doubled twice
}

TEST_F(RampTest, EscalationClearsOnlyWhenTheRampCompletes) {
  Make(RampPolicy());
  OpenThenRecover(/*failed_probes=*/1);
  clock_.Advance(Seconds(1));
  Acquire();
  EXPECT_EQ(breaker_->Snapshot().escalation_level, 1u);
  clock_.Advance(Seconds(1));
  Acquire();
  EXPECT_EQ(breaker_->Snapshot().escalation_level, 0u);
}

// Found by fuzz/classify_fuzz: a ramp over since the last Acquire kept its
// escalation for a trip by Report.
TEST_F(RampTest, ATripAfterTheRampEndedUsesTheBaseCooldown) {
  Make(RampPolicy());
  OpenThenRecover(/*failed_probes=*/1);  // escalation 1 while ramping
  std::vector<uint64_t> permits;
  while (permits.size() < 5) {
    AcquireResult a = Acquire();
    if (a.allowed) permits.push_back(a.permit);
  }
  clock_.Advance(Seconds(3));  // the ramp is over; no Acquire since
  transitions_.clear();
  for (uint64_t permit : permits) Report(permit, OutcomeClass::kTimeout);
  ASSERT_EQ(transitions_.size(), 1u);
  EXPECT_EQ(transitions_[0].reason, TransitionReason::kConsecutiveFailures);
  EXPECT_EQ(transitions_[0].escalation_level, 0u);
  EXPECT_EQ(transitions_[0].retry_after, Seconds(10));
}

TEST_F(RampTest, AReloadKeepsTheRampsStart) {
  Make(RampPolicy());
  OpenThenRecover();
  clock_.Advance(Seconds(1));
  Policy longer = RampPolicy();
  longer.recovery.ramp = Seconds(4);
  breaker_->SetPolicy(std::make_shared<Policy>(longer));
  EXPECT_DOUBLE_EQ(breaker_->Snapshot().admit_share, 0.1 + 0.9 * 0.25);
  // Switched off: the ramp is over.
  Policy off = RampPolicy();
  off.recovery.ramp = absl::ZeroDuration();
  breaker_->SetPolicy(std::make_shared<Policy>(off));
  EXPECT_DOUBLE_EQ(breaker_->Snapshot().admit_share, 1.0);
  EXPECT_TRUE(Acquire(/*attempt=*/1).allowed);
}

TEST_F(RampTest, AFleetOpenEndsTheRampAndAFleetCloseStartsOne) {
  Make(RampPolicy());
  OpenThenRecover();
  ExternalState open;
  open.kind = ExternalState::Kind::kOpen;
  open.open_remaining = Seconds(20);
  open.escalation_level = 3;
  breaker_->ApplyExternal(open, TransitionReason::kFleet);
  BreakerSnapshot s = breaker_->Snapshot();
  EXPECT_EQ(s.state, State::kOpen);
  EXPECT_EQ(s.escalation_level, 3u);
  EXPECT_DOUBLE_EQ(s.admit_share, 1.0);
  ExternalState close;
  close.kind = ExternalState::Kind::kClosed;
  breaker_->ApplyExternal(close, TransitionReason::kFleet);
  s = breaker_->Snapshot();
  EXPECT_EQ(s.state, State::kClosed);
  EXPECT_DOUBLE_EQ(s.admit_share, 0.1);
  EXPECT_EQ(s.escalation_level, 3u);  // until the ramp completes
}

TEST_F(RampTest, NoRampAfterAResetOrAForcedClose) {
  Make(RampPolicy());
  Trip();
  breaker_->Reset();
  EXPECT_DOUBLE_EQ(breaker_->Snapshot().admit_share, 1.0);
  OpenThenRecover();
  breaker_->ForceClose();
  EXPECT_DOUBLE_EQ(breaker_->Snapshot().admit_share, 1.0);
  EXPECT_EQ(Admitted(10), 10);
}

TEST_F(RampTest, ShadowModeCountsWhatTheRampWouldRefuse) {
  Policy p = RampPolicy();
  p.mode = Mode::kShadow;
  Make(p);
  OpenThenRecover();
  int allowed = 0;
  for (int i = 0; i < 10; ++i) allowed += Acquire().allowed ? 1 : 0;
  EXPECT_EQ(allowed, 10);
  EXPECT_EQ(breaker_->Snapshot()
                .acquires[static_cast<int>(Decision::kShadowRejectedRamp)],
            9u);
}

// --- eviction --------------------------------------------------------------

// The issue's report: five calls longer than idle_ttl ended in timeouts,
// and every Report failed because the breaker had been evicted.
TEST(PermitEvictionTest, ABreakerWithPermitsOutIsNotEvicted) {
  FakeClock clock;
  auto set = std::make_shared<PolicySet>();
  set->limits.idle_ttl = Seconds(1);
  Registry registry(set, &clock, 7);
  std::vector<uint64_t> permits;
  for (int i = 0; i < 5; ++i) {
    auto a = registry.Acquire("slow/upstream", 0);
    ASSERT_TRUE(a.ok());
    permits.push_back(a->permit);
  }
  clock.Advance(Seconds(5));
  EXPECT_EQ(registry.EvictIdle(), 0u);
  for (uint64_t permit : permits) {
    ReportRequestFacts f;
    f.outcome.explicit_class = static_cast<int>(OutcomeClass::kTimeout);
    auto r = registry.Report("slow/upstream", permit, f);
    ASSERT_TRUE(r.ok()) << r.status();
  }
  EXPECT_EQ(registry.Get("slow/upstream")->state, State::kOpen);
}

// The operator trial's report: with hang_after on, calls past it are no
// longer within the horizon, but not counted yet either; evicting the
// breaker lost them and refused their Reports.
TEST(PermitEvictionTest, CallsWaitingToBeCountedAsHungKeepTheBreaker) {
  FakeClock clock;
  auto set = std::make_shared<PolicySet>();
  auto p = std::make_shared<Policy>();
  p->inflight.hang_after = Seconds(2);
  p->consecutive_failures = 0;
  p->failure_rate.threshold = 0;
  set->defaults = p;
  set->limits.idle_ttl = Seconds(1);
  Registry registry(set, &clock, 7);
  std::vector<uint64_t> permits;
  for (int i = 0; i < 5; ++i) {
    permits.push_back(registry.Acquire("hung/upstream", 0)->permit);
  }
  clock.Advance(Seconds(3));
  EXPECT_EQ(registry.EvictIdle(), 0u);
  EXPECT_EQ(registry.Get("hung/upstream")->inflight, 5u);
  ReportRequestFacts f;
  f.outcome.explicit_class = static_cast<int>(OutcomeClass::kTimeout);
  auto r = registry.Report("hung/upstream", permits[0], f);
  ASSERT_TRUE(r.ok()) << r.status();
  BreakerSnapshot s = *registry.Get("hung/upstream");
  EXPECT_EQ(s.hung_calls, 5u);
  EXPECT_EQ(s.window.failures, 5u);  // 4 hung, and the real timeout
}

// Found by fuzz/classify_fuzz: a ramp ends at the next Acquire; a breaker
// nobody called after its ramp kept its escalation and was never evicted.
TEST(PermitEvictionTest, ABreakerWhoseRampEndedUncalledIsEvicted) {
  FakeClock clock;
  auto set = std::make_shared<PolicySet>();
  auto p = std::make_shared<Policy>();
  p->consecutive_failures = 1;
  p->cooldown.base = Seconds(10);
  p->cooldown.jitter = 0;
  p->recovery.ramp = Seconds(5);
  set->defaults = p;
  set->limits.idle_ttl = Seconds(1);
  Registry registry(set, &clock, 7);
  ReportRequestFacts fail, ok;
  fail.outcome.explicit_class = static_cast<int>(OutcomeClass::kTimeout);
  ok.outcome.explicit_class = static_cast<int>(OutcomeClass::kSuccess);
  ASSERT_TRUE(
      registry.Report("ramp/a", registry.Acquire("ramp/a", 0)->permit, fail)
          .ok());
  clock.Advance(Seconds(10));
  auto probe = registry.Acquire("ramp/a", 0);
  ASSERT_TRUE(probe->probe);
  ASSERT_TRUE(registry.Report("ramp/a", probe->permit, ok).ok());
  EXPECT_DOUBLE_EQ(registry.Get("ramp/a")->admit_share, 0.1);
  clock.Advance(kDefaultPermitHorizon);
  EXPECT_EQ(registry.EvictIdle(), 1u);
}

TEST(PermitEvictionTest, PermitsPastTheHorizonNoLongerKeepABreaker) {
  FakeClock clock;
  auto set = std::make_shared<PolicySet>();
  set->limits.idle_ttl = Seconds(1);
  Registry registry(set, &clock, 7);
  ASSERT_TRUE(registry.Acquire("gone/client", 0).ok());
  clock.Advance(kDefaultPermitHorizon);
  EXPECT_EQ(registry.EvictIdle(), 1u);
}

}  // namespace
}  // namespace breakerd

// Open episodes, the false-open signals: how an episode's first probe ended
// (breakerd_open_episodes_total{first_probe}) and how long it lasted from
// the open to the close (breakerd_open_duration_seconds); and the policy
// facts a snapshot carries for the dashboard (thresholds, state age).
#include <numeric>

#include "tests/engine/breaker_fixture.h"

namespace breakerd {
namespace {

using absl::Seconds;

class EpisodeTest : public BreakerTest {
 protected:
  void SetUp() override {
    Policy p = BasePolicy();
    p.consecutive_failures = 5;
    Make(p);
  }

  // The probe of the half-open breaker, reported with `c`.
  void Probe(OutcomeClass c) {
    AcquireResult a = Acquire();
    ASSERT_TRUE(a.allowed && a.probe);
    Report(a.permit, c);
  }

  static uint64_t Episodes(const BreakerSnapshot& s) {
    return std::accumulate(s.open_duration_buckets.begin(),
                           s.open_duration_buckets.end(), uint64_t{0});
  }
};

TEST_F(EpisodeTest, AFirstProbeThatSucceedsIsCountedOnceWithTheDuration) {
  Trip();
  clock_.Advance(Seconds(10));  // the base cooldown
  Probe(OutcomeClass::kSuccess);
  ASSERT_EQ(Current(), State::kClosed);
  const BreakerSnapshot s = breaker_->Snapshot();
  EXPECT_EQ(s.first_probe_succeeded, 1u);
  EXPECT_EQ(s.first_probe_failed, 0u);
  // 10 s from the open to the close: bucket le=10 (index 2), not le=5.
  EXPECT_EQ(s.open_duration_buckets[1], 0u);
  EXPECT_EQ(s.open_duration_buckets[2], 1u);
  EXPECT_EQ(Episodes(s), 1u);
  EXPECT_DOUBLE_EQ(s.open_duration_sum_seconds, 10);
}

TEST_F(EpisodeTest, OnlyTheFirstProbeOfAnEpisodeIsCounted) {
  Trip();
  clock_.Advance(Seconds(10));
  Probe(OutcomeClass::kTimeout);  // re-opens for 20 s (escalation 1)
  ASSERT_EQ(Current(), State::kOpen);
  EXPECT_EQ(breaker_->Snapshot().first_probe_failed, 1u);
  EXPECT_EQ(Episodes(breaker_->Snapshot()), 0u);  // not over yet
  clock_.Advance(Seconds(20));
  Probe(OutcomeClass::kSuccess);
  const BreakerSnapshot s = breaker_->Snapshot();
  EXPECT_EQ(s.first_probe_failed, 1u);
  EXPECT_EQ(s.first_probe_succeeded, 0u);  // the second probe: not counted
  // One episode of 30 s, from the first open: bucket le=30 (index 3).
  EXPECT_EQ(s.open_duration_buckets[3], 1u);
  EXPECT_EQ(Episodes(s), 1u);
  EXPECT_DOUBLE_EQ(s.open_duration_sum_seconds, 30);
}

TEST_F(EpisodeTest, ANeutralProbeDecidesNothing) {
  Trip();
  clock_.Advance(Seconds(10));
  Probe(OutcomeClass::kCancelled);  // the caller gave up: no verdict
  EXPECT_EQ(breaker_->Snapshot().first_probe_succeeded, 0u);
  EXPECT_EQ(breaker_->Snapshot().first_probe_failed, 0u);
  Probe(OutcomeClass::kSuccess);
  EXPECT_EQ(breaker_->Snapshot().first_probe_succeeded, 1u);
}

TEST_F(EpisodeTest, AResetEndsTheEpisodeWithItsDurationButNoProbe) {
  Trip();
  clock_.Advance(Seconds(200));
  breaker_->Reset();
  const BreakerSnapshot s = breaker_->Snapshot();
  EXPECT_EQ(s.first_probe_succeeded + s.first_probe_failed, 0u);
  EXPECT_EQ(s.open_duration_buckets[6], 1u);  // le=300
  // A forced state is not an episode: nothing starts, nothing is observed.
  breaker_->ForceOpen();
  clock_.Advance(Seconds(5));
  breaker_->Reset();
  EXPECT_EQ(Episodes(breaker_->Snapshot()), 1u);
}

TEST_F(EpisodeTest, AnOpenAppliedFromTheFleetStartsAnEpisode) {
  ExternalState open;
  open.kind = ExternalState::Kind::kOpen;
  open.open_remaining = Seconds(10);
  ASSERT_TRUE(breaker_->ApplyExternal(open, TransitionReason::kFleet));
  clock_.Advance(Seconds(10));
  Probe(OutcomeClass::kSuccess);
  const BreakerSnapshot s = breaker_->Snapshot();
  EXPECT_EQ(s.first_probe_succeeded, 1u);
  EXPECT_EQ(Episodes(s), 1u);
}

TEST_F(EpisodeTest, TheSnapshotCarriesThePolicyThresholdsAndTheStateAge) {
  Policy p = BasePolicy();
  p.consecutive_failures = 7;
  p.failure_rate.threshold = 0.25;
  p.failure_rate.min_calls = 40;
  p.slow_call_rate.threshold = 0.75;
  Make(p);
  clock_.Advance(Seconds(3));
  BreakerSnapshot s = breaker_->Snapshot();
  EXPECT_EQ(s.consecutive_failures_threshold, 7u);
  EXPECT_DOUBLE_EQ(s.failure_rate_threshold, 0.25);
  EXPECT_EQ(s.failure_rate_min_calls, 40u);
  EXPECT_DOUBLE_EQ(s.slow_call_rate_threshold, 0.75);
  breaker_->ForceOpen();
  clock_.Advance(Seconds(42));
  s = breaker_->Snapshot();
  EXPECT_EQ(s.state_age, Seconds(42));
}

}  // namespace
}  // namespace breakerd

// The engine's side of fleet mode and restarts: states applied from
// elsewhere (Breaker::ApplyExternal) and the fleet-wide probe claim
// (ProbeArbiter, Breaker::SetProbeClaim). Fake clock; no fleet store.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "server/engine/breaker.h"
#include "server/engine/clock.h"

namespace breakerd {
namespace {

using absl::Seconds;

double NoJitter() { return 0.5; }

// Records claim requests; Active() as the test sets it.
class FakeArbiter : public ProbeArbiter {
 public:
  bool Active() const override { return active; }
  void RequestClaim(absl::string_view dependency, uint64_t generation,
                    absl::Duration lease) override {
    requests.push_back({std::string(dependency), generation, lease});
  }
  struct Request {
    std::string dependency;
    uint64_t generation;
    absl::Duration lease;
  };
  bool active = true;
  std::vector<Request> requests;
};

// An unconfirmed local trip (quorum 2 of 3 live members) probes on its own:
// the fleet never heard of its open period, so nobody else holds a probe.
TEST(FleetEpisodeTest, AnUnconfirmedTripProbesLocallyWithoutAskingTheFleet) {
  class ThreeMembers : public FakeArbiter {
   public:
    uint64_t Members() const override { return 3; }
  } arbiter;
  FakeClock clock;
  BreakerContext context{&clock, 0x1234, &NoJitter, &arbiter};
  Policy p;
  p.cooldown.base = Seconds(10);
  p.cooldown.jitter = 0;
  p.failure_rate.threshold = 0;
  Breaker b("dep/a", std::make_shared<Policy>(p), &context);
  std::optional<Transition> t;
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(
        b.Report(b.Acquire(0, &t).permit, {OutcomeClass::kTimeout}, &t).ok());
  }
  ASSERT_TRUE(t.has_value());
  EXPECT_TRUE(t->fleet_local);
  clock.Advance(Seconds(10));
  AcquireResult probe = b.Acquire(0, &t);
  EXPECT_TRUE(probe.probe);
  EXPECT_TRUE(arbiter.requests.empty());
  ASSERT_TRUE(b.Report(probe.permit, {OutcomeClass::kSuccess}, &t).ok());
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->to, State::kClosed);
  EXPECT_TRUE(t->fleet_local);  // its close stays local too
  EXPECT_EQ(b.Snapshot().fleet_unconfirmed_opens, 1u);
}

class FleetHooksTest : public ::testing::Test {
 protected:
  FleetHooksTest() {
    Policy p;
    p.cooldown.base = Seconds(10);
    p.cooldown.max = Seconds(80);
    p.cooldown.jitter = 0;
    p.failure_rate.threshold = 0;
    p.probe.lease = Seconds(4);
    // Every trip is the fleet's at once: these tests are about the claim.
    // (An unconfirmed local trip probes locally: FleetEvidenceTest.)
    p.fleet.quorum = 1;
    breaker_ = std::make_unique<Breaker>("dep/a", std::make_shared<Policy>(p),
                                         &context_);
  }

  AcquireResult Acquire(uint32_t attempt = 0) {
    std::optional<Transition> t;
    AcquireResult r = breaker_->Acquire(attempt, &t);
    if (t.has_value()) transitions_.push_back(*t);
    return r;
  }
  void Report(uint64_t permit, OutcomeClass c) {
    std::optional<Transition> t;
    ASSERT_TRUE(breaker_->Report(permit, {c}, &t).ok());
    if (t.has_value()) transitions_.push_back(*t);
  }
  void Trip() {
    for (int i = 0; i < 5; ++i)
      Report(Acquire().permit, OutcomeClass::kTimeout);
    ASSERT_EQ(State(), State::kOpen);
  }
  breakerd::State State() { return breaker_->Snapshot().state; }

  FakeClock clock_;
  FakeArbiter arbiter_;
  BreakerContext context_{&clock_, 0x1234, &NoJitter, &arbiter_};
  std::unique_ptr<Breaker> breaker_;
  std::vector<Transition> transitions_;
};

TEST_F(FleetHooksTest, ExternalOpenTakesTheCooldownEndAndEscalation) {
  std::optional<Transition> t = breaker_->ApplyExternal(
      {ExternalState::Kind::kOpen, Seconds(7), 2}, TransitionReason::kFleet);
  ASSERT_TRUE(t.has_value());
  EXPECT_TRUE(t->external);
  EXPECT_EQ(t->from, State::kClosed);
  EXPECT_EQ(t->to, State::kOpen);
  EXPECT_EQ(t->reason, TransitionReason::kFleet);
  EXPECT_EQ(t->retry_after, Seconds(7));
  BreakerSnapshot s = breaker_->Snapshot();
  EXPECT_EQ(s.escalation_level, 2u);
  EXPECT_EQ(s.retry_after, Seconds(7));

  AcquireResult r = Acquire();
  EXPECT_FALSE(r.allowed);
  EXPECT_EQ(r.reason, RejectReason::kOpen);
  clock_.Advance(Seconds(7));
  EXPECT_EQ(State(), State::kHalfOpen);
}

TEST_F(FleetHooksTest, ExternalOpenInThePastIsHalfOpenNow) {
  breaker_->ApplyExternal({ExternalState::Kind::kOpen, Seconds(-3), 1},
                          TransitionReason::kRestored);
  EXPECT_EQ(State(), State::kHalfOpen);
  // A failed probe escalates from the level taken: 10 s * 2^2.
  arbiter_.active = false;
  AcquireResult probe = Acquire();
  ASSERT_TRUE(probe.probe);
  Report(probe.permit, OutcomeClass::kServerError);
  EXPECT_EQ(breaker_->Snapshot().retry_after, Seconds(40));
}

TEST_F(FleetHooksTest, ExternalOpenFarInTheFutureIsBoundedNotWrapped) {
  // 300 years overflows int64 nanoseconds if added as is.
  breaker_->ApplyExternal(
      {ExternalState::Kind::kOpen, absl::Hours(24 * 365 * 300), 0},
      TransitionReason::kRestored);
  EXPECT_EQ(State(), State::kOpen);
  EXPECT_EQ(breaker_->Snapshot().retry_after, absl::Hours(24 * 365));
}

TEST_F(FleetHooksTest, ExternalCloseClosesAndClearsEscalation) {
  Trip();
  std::optional<Transition> t = breaker_->ApplyExternal(
      {ExternalState::Kind::kClosed}, TransitionReason::kFleet);
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->to, State::kClosed);
  EXPECT_EQ(State(), State::kClosed);
  EXPECT_EQ(breaker_->Snapshot().consecutive_failures, 0u);
  // Closing what is closed changes nothing.
  EXPECT_FALSE(breaker_
                   ->ApplyExternal({ExternalState::Kind::kClosed},
                                   TransitionReason::kFleet)
                   .has_value());
}

TEST_F(FleetHooksTest, OverrideStillDecidesUnderExternalOpen) {
  breaker_->ForceClose();
  EXPECT_FALSE(breaker_
                   ->ApplyExternal({ExternalState::Kind::kOpen, Seconds(5), 0},
                                   TransitionReason::kFleet)
                   .has_value());
  EXPECT_EQ(State(), State::kForcedClosed);
  EXPECT_TRUE(Acquire().allowed);
  // Forced states and reset from elsewhere apply as the admin calls do.
  std::optional<Transition> t = breaker_->ApplyExternal(
      {ExternalState::Kind::kForcedOpen}, TransitionReason::kFleet);
  ASSERT_TRUE(t.has_value());
  EXPECT_TRUE(t->external);
  EXPECT_EQ(t->reason, TransitionReason::kForcedOpen);
  EXPECT_EQ(State(), State::kForcedOpen);
  t = breaker_->ApplyExternal({ExternalState::Kind::kReset},
                              TransitionReason::kFleet);
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->reason, TransitionReason::kReset);
  EXPECT_EQ(State(), State::kClosed);
}

TEST_F(FleetHooksTest, HalfOpenAsksTheFleetAndRefusesUntilTheClaimIsWon) {
  Trip();
  clock_.Advance(Seconds(10));
  AcquireResult first = Acquire();
  EXPECT_FALSE(first.allowed);
  EXPECT_EQ(first.reason, RejectReason::kProbeInFlight);
  ASSERT_EQ(arbiter_.requests.size(), 1u);
  EXPECT_EQ(arbiter_.requests[0].dependency, "dep/a");
  EXPECT_EQ(arbiter_.requests[0].lease, Seconds(4));
  const uint64_t generation = arbiter_.requests[0].generation;
  EXPECT_EQ(generation, breaker_->Snapshot().generation);

  // Pending: refused, not asked again.
  EXPECT_EQ(Acquire().reason, RejectReason::kProbeInFlight);
  EXPECT_EQ(arbiter_.requests.size(), 1u);

  breaker_->SetProbeClaim(generation, /*won=*/true, Seconds(4));
  AcquireResult probe = Acquire();
  EXPECT_TRUE(probe.allowed);
  EXPECT_TRUE(probe.probe);
  // Still one probe at a time here.
  EXPECT_EQ(Acquire().reason, RejectReason::kProbeInFlight);
  Report(probe.permit, OutcomeClass::kSuccess);
  EXPECT_EQ(State(), State::kClosed);
}

TEST_F(FleetHooksTest, ClaimLostRefusesUntilTheLeaseEndsThenAsksAgain) {
  Trip();
  clock_.Advance(Seconds(10));
  Acquire();
  ASSERT_EQ(arbiter_.requests.size(), 1u);
  breaker_->SetProbeClaim(arbiter_.requests[0].generation, /*won=*/false,
                          Seconds(3));
  AcquireResult r = Acquire();
  EXPECT_EQ(r.reason, RejectReason::kProbeInFlight);
  EXPECT_EQ(r.retry_after, Seconds(3));
  clock_.Advance(Seconds(3));
  // The other prober's lease has lapsed: ask again.
  EXPECT_EQ(Acquire().reason, RejectReason::kProbeInFlight);
  EXPECT_EQ(arbiter_.requests.size(), 2u);
}

TEST_F(FleetHooksTest, StaleClaimAnswerIsIgnored) {
  Trip();
  clock_.Advance(Seconds(10));
  Acquire();
  const uint64_t old_generation = arbiter_.requests[0].generation;
  // The fleet closes the breaker before the answer arrives.
  breaker_->ApplyExternal({ExternalState::Kind::kClosed},
                          TransitionReason::kFleet);
  breaker_->SetProbeClaim(old_generation, /*won=*/true, Seconds(4));
  Trip();
  clock_.Advance(Seconds(10));
  AcquireResult r = Acquire();
  EXPECT_FALSE(r.allowed) << "a claim for an earlier period must not grant";
  EXPECT_EQ(arbiter_.requests.size(), 2u);
}

TEST_F(FleetHooksTest, InactiveArbiterMeansLocalProbes) {
  arbiter_.active = false;
  Trip();
  clock_.Advance(Seconds(10));
  AcquireResult probe = Acquire();
  EXPECT_TRUE(probe.probe);
  EXPECT_TRUE(arbiter_.requests.empty());
}

}  // namespace
}  // namespace breakerd

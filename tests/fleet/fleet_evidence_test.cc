// Fleet mode shares evidence, not only verdicts: the fleet's window with a
// quorum of sources, confirmed opens, and the unconfirmed-open count, on
// three sidecars over the in-memory store, on fake clocks.
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "server/engine/registry.h"
#include "server/fleet/fleet_sync.h"
#include "tests/fleet/fleet_fakes.h"

namespace breakerd {
namespace {

using absl::Milliseconds;
using absl::Seconds;
using fleet_testing::FakeRedis;
using fleet_testing::Sidecar;

// Five failures in a row open for 10 s; the rate rule is off; quorum 2.
std::shared_ptr<const PolicySet> QuorumPolicies() {
  auto set = std::make_shared<PolicySet>();
  auto p = std::make_shared<Policy>(*fleet_testing::Policies()->defaults);
  p->fleet.quorum = 2;
  set->defaults = p;
  return set;
}

// The spread-out degradation: consecutive failures off, the rate
// rule on at 50 % of at least 20 calls in 10 s; quorum 2.
std::shared_ptr<const PolicySet> RatePolicies() {
  auto set = std::make_shared<PolicySet>();
  auto p = std::make_shared<Policy>(*QuorumPolicies()->defaults);
  p->consecutive_failures = 0;
  p->failure_rate.threshold = 0.5;
  p->failure_rate.min_calls = 20;
  p->failure_rate.window = Seconds(10);
  set->defaults = p;
  return set;
}

class FleetEvidenceTest : public ::testing::Test {
 protected:
  void Start(std::shared_ptr<const PolicySet> policies, int n = 3) {
    redis_.wall = &wall_;
    for (int i = 0; i < n; ++i) {
      sidecars_.push_back(
          std::make_unique<Sidecar>(std::string(1, static_cast<char>('a' + i)),
                                    &redis_, &wall_, nullptr, policies));
    }
    // Everyone joined and heartbeat since the last join: each counts all.
    StepAll();
    Sync();
    for (auto& s : sidecars_) {
      ASSERT_EQ(s->sync->members(), static_cast<uint64_t>(n));
    }
  }
  Sidecar& at(int i) { return *sidecars_[i]; }
  void StepAll() {
    for (auto& s : sidecars_) s->Step();
  }
  void Advance(absl::Duration d) {
    wall_ += d;
    for (auto& s : sidecars_) s->clock.Advance(d);
  }
  // One sync interval: everyone flushes, reads the fleet's window, and
  // hears what others published.
  void Sync() {
    Advance(Milliseconds(250));
    StepAll();
    StepAll();
  }
  void Calls(int i, const std::string& dep, int successes, int failures) {
    for (int n = 0; n < successes; ++n) {
      at(i).Report(dep, at(i).Acquire(dep).permit, OutcomeClass::kSuccess);
    }
    for (int n = 0; n < failures; ++n) {
      at(i).Report(dep, at(i).Acquire(dep).permit, OutcomeClass::kTimeout);
    }
  }
  uint64_t Transitions(int i, const std::string& dep, TransitionReason reason) {
    auto s = at(i).registry.Get(dep);
    uint64_t n = 0;
    if (s.ok()) {
      for (const auto& t : s->transitions) {
        if (t.reason == reason) n += t.count;
      }
    }
    return n;
  }
  uint64_t Unconfirmed(int i, const std::string& dep) {
    auto s = at(i).registry.Get(dep);
    return s.ok() ? s->fleet_unconfirmed_opens : 0;
  }
  // The half-open probe through sidecar i, reported with `outcome`.
  void Probe(int i, const std::string& dep, OutcomeClass outcome) {
    AcquireResult r = at(i).Acquire(dep);
    if (!r.probe) {
      // In fleet mode the claim goes to the store first.
      StepAll();
      r = at(i).Acquire(dep);
    }
    ASSERT_TRUE(r.probe) << "sidecar " << i << " got no probe";
    at(i).Report(dep, r.permit, outcome);
  }

  absl::Time wall_ = absl::FromUnixSeconds(1'800'000'000);
  FakeRedis redis_;
  std::vector<std::unique_ptr<Sidecar>> sidecars_;
};

TEST_F(FleetEvidenceTest, ALoneSickPodOpensAloneAndItsEpisodeIsUnconfirmed) {
  Start(QuorumPolicies());
  const std::string dep = "dep/x";
  at(0).Trip(dep);
  Calls(1, dep, 10, 0);
  Calls(2, dep, 10, 0);
  // Two cooldowns of the sick pod's own probes failing, and still nobody
  // else refuses a call.
  for (int cooldown = 0; cooldown < 2; ++cooldown) {
    Sync();
    for (int i = 1; i < 3; ++i) {
      EXPECT_EQ(at(i).State(dep), State::kClosed) << "sidecar " << i;
      EXPECT_TRUE(at(i).Acquire(dep).allowed);
    }
    Advance(Seconds(10 << cooldown));
    Probe(0, dep, OutcomeClass::kTimeout);  // locally: not the fleet's probe
    ASSERT_EQ(at(0).State(dep), State::kOpen);
  }
  EXPECT_EQ(at(0).sync->counters().published, 0u);
  EXPECT_EQ(Unconfirmed(0, dep), 0u);  // not over yet
  Advance(Seconds(40));
  Probe(0, dep, OutcomeClass::kSuccess);
  ASSERT_EQ(at(0).State(dep), State::kClosed);
  Sync();
  EXPECT_EQ(Unconfirmed(0, dep), 1u);
  EXPECT_EQ(at(0).sync->counters().published, 0u);  // nor its close
  for (int i = 1; i < 3; ++i) {
    EXPECT_EQ(Transitions(i, dep, TransitionReason::kFleet), 0u);
    EXPECT_EQ(Unconfirmed(i, dep), 0u);
  }
}

TEST_F(FleetEvidenceTest,
       TwoSidecarsAtEqualTrafficOneFailingDoNotOpenTheFleet) {
  Start(RatePolicies(), 2);
  const std::string dep = "dep/x";
  Calls(0, dep, 0, 20);  // a fails every call: its own rate rule trips it
  Calls(1, dep, 20, 0);
  ASSERT_EQ(at(0).State(dep), State::kOpen);
  Sync();
  Sync();
  // The fleet's window is 50 % failures over 40 calls, but from one source.
  auto b = at(1).registry.Get(dep);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->state, State::kClosed);
  EXPECT_EQ(b->fleet_window_calls, 40u);
  EXPECT_EQ(b->fleet_window_failures, 20u);
  EXPECT_EQ(at(0).sync->counters().published, 0u);
}

TEST_F(FleetEvidenceTest, SpreadOutFailuresOpenEveryoneOnTheFleetsWindow) {
  Start(RatePolicies());
  const std::string dep = "dep/x";
  // 8 calls and 5 failures each: nobody reaches min_calls (20) alone.
  for (int i = 0; i < 3; ++i) {
    Calls(i, dep, 3, 5);
    ASSERT_EQ(at(i).State(dep), State::kClosed);
  }
  Sync();
  Sync();
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(at(i).State(dep), State::kOpen) << "sidecar " << i;
    EXPECT_EQ(Transitions(i, dep, TransitionReason::kFleetFailureRate), 1u)
        << "sidecar " << i;
  }
  // The fleet's probe closes everyone, and the old failures are gone: new
  // calls start an empty window, and nothing opens again.
  Advance(Seconds(10));
  Probe(0, dep, OutcomeClass::kSuccess);
  Sync();
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(at(i).State(dep), State::kClosed) << "sidecar " << i;
    Calls(i, dep, 1, 0);
  }
  Sync();
  Sync();
  for (int i = 0; i < 3; ++i) {
    auto s = at(i).registry.Get(dep);
    ASSERT_TRUE(s.ok());
    EXPECT_EQ(s->state, State::kClosed) << "sidecar " << i;
    EXPECT_EQ(s->fleet_window_failures, 0u) << "sidecar " << i;
    EXPECT_EQ(s->fleet_unconfirmed_opens, 0u);
  }
}

TEST_F(FleetEvidenceTest, TwoOfThreeTripAndTheThirdOpensWithoutAFailure) {
  Start(QuorumPolicies());
  const std::string dep = "dep/x";
  at(0).Trip(dep);
  Sync();
  ASSERT_EQ(at(2).State(dep), State::kClosed);  // one trip is no quorum
  at(1).Trip(dep);
  Sync();
  EXPECT_EQ(at(2).State(dep), State::kOpen);
  EXPECT_FALSE(at(2).Acquire(dep).allowed);
  EXPECT_EQ(at(1).sync->counters().confirmed_opens, 1u);
  // The first tripper's episode was confirmed too: when the fleet's probe
  // closes it, it is not counted.
  Advance(Seconds(10));
  Probe(2, dep, OutcomeClass::kSuccess);
  Sync();
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(at(i).State(dep), State::kClosed) << "sidecar " << i;
    EXPECT_EQ(Unconfirmed(i, dep), 0u) << "sidecar " << i;
  }
}

TEST_F(FleetEvidenceTest, AnUpstreamsRetryAfterOpensEveryoneAtOnce) {
  Start(QuorumPolicies());
  const std::string dep = "dep/x";
  for (int n = 0; n < 5; ++n) {
    ReportRequestFacts f;
    f.outcome.explicit_class = static_cast<int>(OutcomeClass::kRateLimited);
    f.retry_after = Seconds(60);  // past the 10 s cooldown
    ASSERT_TRUE(at(0).registry.Report(dep, at(0).Acquire(dep).permit, f).ok());
  }
  ASSERT_EQ(at(0).State(dep), State::kOpen);
  StepAll();
  StepAll();
  for (int i = 1; i < 3; ++i) {
    auto s = at(i).registry.Get(dep);
    ASSERT_TRUE(s.ok());
    EXPECT_EQ(s->state, State::kOpen) << "sidecar " << i;
    EXPECT_EQ(s->retry_after, Seconds(60)) << "sidecar " << i;
  }
}

TEST_F(FleetEvidenceTest, TheQuorumIsNeverMoreThanTheLiveMembers) {
  Start(QuorumPolicies(), 1);  // alone: every trip is the fleet's
  at(0).Trip("dep/x");
  StepAll();
  EXPECT_EQ(at(0).sync->counters().published, 1u);
}

TEST_F(FleetEvidenceTest, WhileTheStoreIsAwayOpensAreLocalAndNotCounted) {
  Start(QuorumPolicies());
  redis_.up = false;
  Sync();
  ASSERT_FALSE(at(0).sync->connected());
  const std::string dep = "dep/x";
  at(0).Trip(dep);
  Advance(Seconds(10));
  Probe(0, dep, OutcomeClass::kSuccess);
  ASSERT_EQ(at(0).State(dep), State::kClosed);
  EXPECT_EQ(Unconfirmed(0, dep), 0u);
  // What was counted meanwhile is not flushed into the fleet's window when
  // the store comes back.
  Calls(0, dep, 0, 3);
  redis_.up = true;
  Advance(Seconds(5));
  StepAll();
  Sync();
  EXPECT_TRUE(redis_.windows.empty());
}

// Operators' decisions are ordered by when they were made, by the fleet's
// clock: the newest ForceOpen / ForceClose / Reset wins on every pod.
class FleetDecisionsTest : public FleetEvidenceTest {
 protected:
  // Every sidecar back from the store's absence (past any backoff).
  void Rejoin() {
    redis_.up = true;
    Advance(Seconds(5));
    StepAll();
    StepAll();
    StepAll();
  }
};

TEST_F(FleetDecisionsTest, AResetMadeWhileTheStoreWasAwayWinsOverAnOlderForce) {
  Start(fleet_testing::Policies(), 2);
  const std::string dep = "dep/x";
  ASSERT_TRUE(at(0).registry.ForceOpen(dep).ok());
  Sync();
  ASSERT_EQ(at(1).State(dep), State::kForcedOpen);
  Advance(Seconds(1));
  redis_.up = false;
  Sync();
  ASSERT_FALSE(at(1).sync->connected());
  ASSERT_TRUE(at(1).registry.Reset(dep).ok());  // decided while away
  Rejoin();
  // b did not take the older stored ForceOpen back; a took b's Reset.
  EXPECT_EQ(at(1).State(dep), State::kClosed);
  EXPECT_EQ(at(0).State(dep), State::kClosed);
}

TEST_F(FleetDecisionsTest, AnOlderDecisionMadeWhileAwayLosesToTheNewerOne) {
  Start(fleet_testing::Policies(), 2);
  const std::string dep = "dep/x";
  redis_.up = false;
  Sync();
  ASSERT_TRUE(at(0).registry.ForceOpen(dep).ok());  // first
  Advance(Seconds(1));
  ASSERT_TRUE(at(1).registry.ForceClose(dep).ok());  // then, newer
  // b comes back first and stores its ForceClose; a comes back to a newer
  // decision than its own, takes it, and never publishes its own.
  redis_.up = true;
  Advance(Seconds(5));
  at(1).Step();
  at(1).Step();
  at(0).Step();
  at(0).Step();
  Sync();
  Sync();
  EXPECT_EQ(at(0).State(dep), State::kForcedClosed);
  EXPECT_EQ(at(1).State(dep), State::kForcedClosed);
  // a's own, older ForceOpen never went out.
  EXPECT_EQ(at(0).sync->counters().published, 0u);
}

TEST_F(FleetDecisionsTest, ARestartedPodTakesTheResetMadeAfterItsSavedForce) {
  Start(fleet_testing::Policies(), 2);
  const std::string dep = "dep/x";
  ASSERT_TRUE(at(0).registry.ForceOpen(dep).ok());
  Sync();
  const int64_t forced_at = absl::ToUnixMillis(wall_);
  // a stops (its state file keeps forced_open); b resets.
  sidecars_[0]->sync->Stop();
  Advance(Seconds(1));
  ASSERT_TRUE(at(1).registry.Reset(dep).ok());
  Sync();
  // a comes back: the state file's override, then the join.
  Sidecar a2("a2", &redis_, &wall_, nullptr, fleet_testing::Policies());
  ExternalState saved;
  saved.kind = ExternalState::Kind::kForcedOpen;
  saved.decided_unix_ms = forced_at;
  ASSERT_TRUE(
      a2.registry.ApplyExternal(dep, saved, TransitionReason::kRestored).ok());
  ASSERT_EQ(a2.State(dep), State::kForcedOpen);
  a2.Step();
  EXPECT_EQ(a2.State(dep), State::kClosed);
  EXPECT_EQ(at(1).State(dep), State::kClosed);
}

TEST_F(FleetDecisionsTest, ASavedForceNewerThanTheStoresIsPublishedOnJoin) {
  Start(fleet_testing::Policies(), 2);
  const std::string dep = "dep/x";
  ASSERT_TRUE(at(1).registry.ForceClose(dep).ok());
  Sync();
  ASSERT_EQ(at(0).State(dep), State::kForcedClosed);
  // A pod that forced the dependency open while the store was away and
  // restarted before it came back: the decision lives in its state file.
  Advance(Seconds(1));
  Sidecar c("c", &redis_, &wall_, nullptr, fleet_testing::Policies());
  ExternalState saved;
  saved.kind = ExternalState::Kind::kForcedOpen;
  saved.decided_unix_ms = absl::ToUnixMillis(wall_);
  ASSERT_TRUE(
      c.registry.ApplyExternal(dep, saved, TransitionReason::kRestored).ok());
  c.Step();  // joins: the store's ForceClose is older
  c.Step();  // publishes its own
  EXPECT_EQ(c.State(dep), State::kForcedOpen);
  EXPECT_EQ(c.sync->counters().published, 1u);
  Sync();
  EXPECT_EQ(at(0).State(dep), State::kForcedOpen);
  EXPECT_EQ(at(1).State(dep), State::kForcedOpen);
}

// The race CI found: Redis restarts empty while a ForceOpen (a, older) and
// a Reset made while it was away (b, newer) are both held. Whichever pod
// comes back first, both end with the Reset, and so does the store.
TEST_F(FleetDecisionsTest, AfterAnEmptyRestartTheNewerDecisionWinsInAnyOrder) {
  for (int first : {0, 1}) {
    Start(fleet_testing::Policies(), 2);
    const std::string dep = "dep/x";
    ASSERT_TRUE(at(0).registry.ForceOpen(dep).ok());
    Sync();
    ASSERT_EQ(at(1).State(dep), State::kForcedOpen);
    Advance(Seconds(1));
    redis_.up = false;
    Sync();
    ASSERT_TRUE(at(1).registry.Reset(dep).ok());
    redis_.Flush();
    redis_.up = true;
    Advance(Seconds(5));
    at(first).Step();
    at(first).Step();
    at(1 - first).Step();
    at(1 - first).Step();
    Sync();
    Sync();
    EXPECT_EQ(at(0).State(dep), State::kClosed) << "first back: " << first;
    EXPECT_EQ(at(1).State(dep), State::kClosed) << "first back: " << first;
    EXPECT_TRUE(absl::StrContains(redis_.states[dep], " reset "))
        << redis_.states[dep];
    sidecars_.clear();
    redis_ = FakeRedis();
    redis_.wall = &wall_;
  }
}

// Decisions are ordered by when they were made, not by version: after an
// empty restart, a newer decision can be stored under a lower version than
// an older one republished meanwhile (the interleaving CI found), and must
// still win.
TEST_F(FleetDecisionsTest, ANewerDecisionUnderAnOlderVersionStillWins) {
  Start(fleet_testing::Policies(), 2);
  const std::string dep = "dep/x";
  ASSERT_TRUE(at(0).registry.ForceOpen(dep).ok());
  Sync();
  ASSERT_EQ(at(1).State(dep), State::kForcedOpen);
  const uint64_t version = redis_.versions[dep];
  FleetMessage reset;
  reset.dependency = dep;
  reset.version = version;  // not above what b has seen
  reset.stored_unix_ms = absl::ToUnixMillis(wall_) + 5;
  reset.origin = "elsewhere";
  reset.kind = ExternalState::Kind::kReset;
  reset.reason = "reset";
  at(1).store->Deliver(reset);
  at(1).Step();
  EXPECT_EQ(at(1).State(dep), State::kClosed);
  // Once a newer decision is made here, that message again changes
  // nothing, nor does a non-decision under an old version.
  Advance(Seconds(1));
  ASSERT_TRUE(at(1).registry.ForceClose(dep).ok());
  at(1).store->Deliver(reset);
  FleetMessage open = reset;
  open.kind = ExternalState::Kind::kOpen;
  open.reason = "consecutive_failures";
  at(1).store->Deliver(open);
  at(1).Step();
  EXPECT_EQ(at(1).State(dep), State::kForcedClosed);
}

TEST_F(FleetDecisionsTest, AStaleDecisionArrivingLiveIsIgnoredAndCounted) {
  Start(fleet_testing::Policies(), 2);
  const std::string dep = "dep/x";
  ASSERT_TRUE(at(0).registry.ForceOpen(dep).ok());
  Sync();
  ASSERT_EQ(at(1).State(dep), State::kForcedOpen);
  FleetMessage old;
  old.dependency = dep;
  old.version = 99;
  old.stored_unix_ms = absl::ToUnixMillis(wall_ - Seconds(30));
  old.origin = "elsewhere";
  old.kind = ExternalState::Kind::kReset;
  old.reason = "reset";
  at(1).store->Deliver(old);
  at(1).Step();
  EXPECT_EQ(at(1).State(dep), State::kForcedOpen);
  EXPECT_EQ(at(1).sync->counters().stale_decisions, 1u);
}

}  // namespace
}  // namespace breakerd

// The facts a Watch client decides on (DESIGN.md "Local decisions"): every
// event says whether a client may decide first attempts itself
// (local_decisions), and events that are not state changes tell it of a
// breaker's creation, eviction, ramp end, and of reloads that change its
// mode or local_decisions.
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "server/engine/clock.h"
#include "server/engine/registry.h"

namespace breakerd {
namespace {

using absl::Seconds;

class Events : public TransitionObserver {
 public:
  void OnTransition(const Transition& t) override { all.push_back(t); }
  std::vector<Transition> all;
};

std::shared_ptr<PolicySet> Policies() {
  auto set = std::make_shared<PolicySet>();
  auto defaults = std::make_shared<Policy>();
  defaults->cooldown.jitter = 0;
  defaults->cooldown.base = Seconds(10);
  defaults->consecutive_failures = 2;
  set->defaults = defaults;
  auto ramp = std::make_shared<Policy>(*defaults);
  ramp->match = "ramp/*";
  ramp->recovery.ramp = Seconds(20);
  set->policies.push_back(ramp);
  auto shadow = std::make_shared<Policy>(*defaults);
  shadow->match = "shadow/*";
  shadow->mode = Mode::kShadow;
  set->policies.push_back(shadow);
  auto off = std::make_shared<Policy>(*defaults);
  off->match = "off/*";
  off->local_decisions = false;
  set->policies.push_back(off);
  set->limits.idle_ttl = absl::Minutes(10);
  return set;
}

class WatchFactsTest : public ::testing::Test {
 protected:
  WatchFactsTest() : registry_(Policies(), &clock_, 7) {
    registry_.AddObserver(&events_);
  }

  void Call(absl::string_view dep, OutcomeClass c) {
    auto a = registry_.Acquire(dep, 0);
    ASSERT_TRUE(a.ok() && a->allowed) << dep;
    ReportRequestFacts f;
    f.outcome.explicit_class = static_cast<int>(c);
    ASSERT_TRUE(registry_.Report(dep, a->permit, f).ok());
  }

  // Opens `dep`, waits its cooldown and closes it by a successful probe.
  void TripAndRecover(absl::string_view dep) {
    Call(dep, OutcomeClass::kTimeout);
    Call(dep, OutcomeClass::kTimeout);
    clock_.Advance(Seconds(10));
    Call(dep, OutcomeClass::kSuccess);
  }

  std::vector<std::string> Reasons() const {
    std::vector<std::string> out;
    for (const Transition& t : events_.all) {
      out.push_back(std::string(TransitionReasonName(t.reason)));
    }
    return out;
  }

  FakeClock clock_;
  Events events_;
  Registry registry_;
};

TEST_F(WatchFactsTest, ABreakerIsAnnouncedBeforeItsFirstTransition) {
  Call("db/a", OutcomeClass::kTimeout);
  Call("db/a", OutcomeClass::kTimeout);
  ASSERT_EQ(Reasons(),
            (std::vector<std::string>{"created", "consecutive_failures"}));
  const Transition& created = events_.all[0];
  EXPECT_EQ(created.from, State::kClosed);
  EXPECT_EQ(created.to, State::kClosed);
  EXPECT_EQ(created.generation, 0u);
  EXPECT_TRUE(created.local_decisions);
  EXPECT_FALSE(events_.all[1].local_decisions);  // open
  // Not a transition: not counted.
  EXPECT_EQ(registry_.Get("db/a")->transitions.size(), 1u);
}

TEST_F(WatchFactsTest, LocalDecisionsOnlyWhileClosedEnforcedAndAllowed) {
  Call("shadow/a", OutcomeClass::kSuccess);
  Call("off/a", OutcomeClass::kSuccess);
  ASSERT_TRUE(registry_.ForceClose("db/forced").ok());
  ASSERT_EQ(events_.all.size(), 4u);
  EXPECT_FALSE(events_.all[0].local_decisions);  // shadow mode
  EXPECT_FALSE(events_.all[1].local_decisions);  // local_decisions: false
  EXPECT_TRUE(events_.all[2].local_decisions);   // db/forced created closed
  EXPECT_EQ(events_.all[3].to, State::kForcedClosed);
  EXPECT_FALSE(events_.all[3].local_decisions);  // forced
  EXPECT_FALSE(registry_.Get("shadow/a")->local_decisions);
  EXPECT_FALSE(registry_.Get("db/forced")->local_decisions);
}

TEST_F(WatchFactsTest, ARampEndsWithAnEventThatAllowsLocalDecisionsAgain) {
  TripAndRecover("ramp/a");
  const Transition& closed = events_.all.back();
  ASSERT_EQ(closed.reason, TransitionReason::kProbeSucceeded);
  EXPECT_FALSE(closed.local_decisions);  // ramping
  EXPECT_FALSE(registry_.Get("ramp/a")->local_decisions);
  events_.all.clear();
  clock_.Advance(Seconds(20));  // the ramp has run its course
  EXPECT_TRUE(registry_.Get("ramp/a")->local_decisions);
  // The next Acquire ends it and tells the Watch clients, at the same
  // generation.
  const uint64_t generation = registry_.Get("ramp/a")->generation;
  ASSERT_TRUE(registry_.Acquire("ramp/a", 0).ok());
  ASSERT_EQ(Reasons(), (std::vector<std::string>{"ramp_done"}));
  EXPECT_TRUE(events_.all[0].local_decisions);
  EXPECT_EQ(events_.all[0].generation, generation);
  EXPECT_EQ(registry_.Get("ramp/a")->generation, generation);
  // Once.
  ASSERT_TRUE(registry_.Acquire("ramp/a", 0).ok());
  EXPECT_EQ(events_.all.size(), 1u);
}

TEST_F(WatchFactsTest, TheEvictionPassEndsARampAndEvictsWithEvents) {
  TripAndRecover("ramp/b");
  events_.all.clear();
  clock_.Advance(absl::Minutes(11));  // ramp over, idle
  ASSERT_EQ(registry_.EvictIdle(), 1u);
  ASSERT_EQ(Reasons(), (std::vector<std::string>{"ramp_done", "evicted"}));
  EXPECT_FALSE(events_.all[1].local_decisions);  // forget it
  const uint64_t evicted = events_.all[1].generation;
  // Re-created above the evicted generation.
  events_.all.clear();
  Call("ramp/b", OutcomeClass::kSuccess);
  ASSERT_EQ(Reasons(), (std::vector<std::string>{"created"}));
  EXPECT_GT(events_.all[0].generation, evicted);
}

TEST_F(WatchFactsTest, AReloadThatChangesLocalDecisionsTellsClients) {
  Call("db/a", OutcomeClass::kSuccess);
  Call("ramp/c", OutcomeClass::kSuccess);
  events_.all.clear();
  auto next = Policies();
  auto defaults = std::make_shared<Policy>(*next->defaults);
  defaults->local_decisions = false;
  next->defaults = defaults;
  registry_.ApplyPolicies(next);
  // db/a matched the defaults: it changed; ramp/c did not.
  ASSERT_EQ(Reasons(), (std::vector<std::string>{"reload"}));
  EXPECT_EQ(events_.all[0].dependency, "db/a");
  EXPECT_FALSE(events_.all[0].local_decisions);
  // A ramp the new length ends early: clients may decide again.
  TripAndRecover("ramp/c");
  events_.all.clear();
  auto shorter = Policies();
  auto ramp = std::make_shared<Policy>(*shorter->policies[0]);
  ramp->recovery.ramp = absl::ZeroDuration();
  shorter->policies[0] = ramp;
  registry_.ApplyPolicies(shorter);
  std::vector<std::string> ramp_c;
  for (const Transition& t : events_.all) {
    if (t.dependency == "ramp/c") {
      ramp_c.push_back(std::string(TransitionReasonName(t.reason)));
      EXPECT_TRUE(t.local_decisions);
    }
  }
  EXPECT_EQ(ramp_c, (std::vector<std::string>{"reload"}));
}

}  // namespace
}  // namespace breakerd

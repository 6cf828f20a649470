// FleetSync's logic with two sidecars (each its own Registry and fake
// clock) on an in-memory store, driven step by step with RunOnce: no
// threads, no sleeps. The real Redis is exercised end to end in
// tests/e2e/fleet_e2e_test.cc.
#include "server/fleet/fleet_sync.h"

#include <algorithm>
#include <array>
#include <deque>
#include <functional>
#include <iterator>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "server/engine/clock.h"
#include "server/engine/registry.h"
#include "server/log/json_log.h"
#include "tests/fleet/fleet_fakes.h"

namespace breakerd {
namespace {

using absl::Seconds;
using fleet_testing::FakeRedis;
using fleet_testing::FakeStore;
using fleet_testing::Policies;
using fleet_testing::Sidecar;

class FleetSyncTest : public ::testing::Test {
 protected:
  FleetSyncTest() {
    redis_.wall = &wall_;
    a_ = std::make_unique<Sidecar>("a", &redis_, &wall_);
    b_ = std::make_unique<Sidecar>("b", &redis_, &wall_);
    StepAll();
  }
  void StepAll() {
    a_->Step();
    b_->Step();
  }
  void Advance(absl::Duration d) {
    wall_ += d;
    a_->clock.Advance(d);
    b_->clock.Advance(d);
  }

  absl::Time wall_ = absl::FromUnixSeconds(1'800'000'000);
  FakeRedis redis_;
  std::unique_ptr<Sidecar> a_, b_;
};

TEST_F(FleetSyncTest, AShadowBreakersOpenAndProbeResultAreNeverPublished) {
  // a tries a policy in shadow mode; b enforces.
  auto shadow = std::make_shared<PolicySet>(*Policies());
  auto p = std::make_shared<Policy>(*shadow->defaults);
  p->mode = Mode::kShadow;
  shadow->defaults = p;
  a_->registry.ApplyPolicies(shadow);

  a_->Trip("dep/x");
  EXPECT_TRUE(a_->Acquire("dep/x").allowed);  // shadow: allowed, yet open
  StepAll();
  StepAll();
  EXPECT_EQ(b_->State("dep/x"), State::kClosed);
  EXPECT_TRUE(b_->Acquire("dep/x").allowed);
  // Its probe result neither: the fleet never heard of this episode.
  Advance(Seconds(10));
  const AcquireResult probe = a_->Acquire("dep/x");
  ASSERT_TRUE(probe.probe);
  a_->Report("dep/x", probe.permit, OutcomeClass::kSuccess);
  StepAll();
  StepAll();
  EXPECT_EQ(a_->sync->counters().published, 0u);
  EXPECT_EQ(b_->sync->counters().applied, 0u);

  // An operator's decision on the shadow sidecar is still fleet-wide.
  ASSERT_TRUE(a_->registry.ForceOpen("dep/y").ok());
  StepAll();
  StepAll();
  EXPECT_EQ(b_->State("dep/y"), State::kForcedOpen);
}

TEST_F(FleetSyncTest, OpenPropagatesWithTheSameCooldownEnd) {
  ASSERT_TRUE(a_->sync->connected());
  a_->Trip("dep/x");
  StepAll();  // a publishes
  StepAll();  // b receives
  auto s = b_->registry.Get("dep/x");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->state, State::kOpen);
  EXPECT_EQ(s->retry_after, Seconds(10));
  AcquireResult r = b_->Acquire("dep/x");
  EXPECT_FALSE(r.allowed);
  EXPECT_EQ(r.reason, RejectReason::kOpen);
  EXPECT_EQ(a_->sync->counters().published, 1u);
  EXPECT_EQ(b_->sync->counters().applied, 1u);
  // a does not apply its own message.
  EXPECT_EQ(a_->sync->counters().applied, 0u);
}

TEST_F(FleetSyncTest, ACooldownEndIsTheSameOnNodesAMinuteOffTheStoresClock) {
  // c's clock is a minute ahead of the store's, d's a minute behind; a's is
  // right. A cooldown end in a's own clock would end c's a minute early and
  // d's a minute late.
  auto shifted = [this](absl::Duration by) {
    return [this, by](FleetOptions* o) {
      o->wall_now = [this, by] { return wall_ + by; };
    };
  };
  Sidecar c("c", &redis_, &wall_, shifted(Seconds(60)));
  Sidecar d("d", &redis_, &wall_, shifted(Seconds(-60)));
  c.Step();
  d.Step();
  a_->Trip("dep/x");
  a_->Step();
  c.Step();
  d.Step();
  for (Sidecar* s : {&c, &d}) {
    auto got = s->registry.Get("dep/x");
    ASSERT_TRUE(got.ok());
    EXPECT_EQ(got->state, State::kOpen);
    EXPECT_EQ(got->retry_after, Seconds(10));
  }
  // The stored state read on a join is measured the same way.
  Advance(Seconds(4));
  Sidecar e("e", &redis_, &wall_, shifted(Seconds(60)));
  e.clock.Advance(Seconds(4));
  e.Step();
  auto got = e.registry.Get("dep/x");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->state, State::kOpen);
  EXPECT_EQ(got->retry_after, Seconds(6));
}

TEST_F(FleetSyncTest, AFormatItDoesNotKnowIsIgnoredAndCountedNotRefused) {
  b_->store->DeliverRaw("7 v3 1800000000000 a forced_open 0 0 x dep/x");
  b_->store->DeliverRaw("8 v99 anything at all");
  b_->Step();
  EXPECT_EQ(b_->sync->counters().unknown_versions, 2u);
  EXPECT_EQ(b_->sync->counters().refused, 0u);
  EXPECT_EQ(b_->State("dep/x"), State::kClosed);
  // Both known formats are read: v2 (the store's clock) and the untagged
  // v1 of earlier releases (the origin's clock).
  b_->store->DeliverRaw(
      "1 v2 1800000000000 a forced_open 0 0 forced_open dep/x");
  b_->store->DeliverRaw("1 a/1/f forced_closed 0 0 dep/y");
  b_->Step();
  EXPECT_EQ(b_->State("dep/x"), State::kForcedOpen);
  EXPECT_EQ(b_->State("dep/y"), State::kForcedClosed);
  // A v2 message is validated field by field too.
  for (const char* bad : {"2 v2 -5 a reset 0 0 reset dep/x",
                          "2 v2 1800000000000 a reset 0 0 dep/x",
                          "2 v2 99999999999999999 a reset 0 0 reset dep/x",
                          "2 v2 1800000000000 a reset 0 0 Reset! dep/x"}) {
    b_->store->DeliverRaw(bad);
  }
  b_->Step();
  EXPECT_EQ(b_->sync->counters().refused, 4u);
  EXPECT_EQ(b_->State("dep/x"), State::kForcedOpen);
}

TEST_F(FleetSyncTest, DuplicatesAndOlderVersionsChangeNothing) {
  a_->Trip("dep/x");
  StepAll();
  StepAll();
  ASSERT_EQ(b_->State("dep/x"), State::kOpen);
  const uint64_t generation = b_->registry.Get("dep/x")->generation;
  FleetMessage dup = *ParseFleetMessage(redis_.states["dep/x"]);
  b_->store->Deliver(dup);
  // Another body under a version already seen is not news either.
  FleetMessage same_version = dup;
  same_version.kind = ExternalState::Kind::kClosed;
  b_->store->Deliver(same_version);
  b_->Step();
  EXPECT_EQ(b_->State("dep/x"), State::kOpen);
  EXPECT_EQ(b_->registry.Get("dep/x")->generation, generation);
  EXPECT_EQ(b_->sync->counters().duplicates, 2u);
}

TEST_F(FleetSyncTest, OneProbeForTheFleetAndItsSuccessClosesEveryone) {
  a_->Trip("dep/x");
  StepAll();
  StepAll();
  Advance(Seconds(10));
  // Both are half-open: each asks the fleet and refuses meanwhile.
  EXPECT_EQ(a_->Acquire("dep/x").reason, RejectReason::kProbeInFlight);
  EXPECT_EQ(b_->Acquire("dep/x").reason, RejectReason::kProbeInFlight);
  a_->Step();  // a claims first and wins
  b_->Step();  // b loses
  EXPECT_EQ(redis_.claims, 2);
  AcquireResult probe = a_->Acquire("dep/x");
  EXPECT_TRUE(probe.probe);
  AcquireResult other = b_->Acquire("dep/x");
  EXPECT_FALSE(other.allowed);
  EXPECT_EQ(other.reason, RejectReason::kProbeInFlight);
  EXPECT_GT(other.retry_after, Seconds(4));

  a_->Report("dep/x", probe.permit, OutcomeClass::kSuccess);
  EXPECT_EQ(a_->State("dep/x"), State::kClosed);
  StepAll();  // a publishes closed and releases the claim
  StepAll();
  EXPECT_EQ(b_->State("dep/x"), State::kClosed);
  EXPECT_TRUE(b_->Acquire("dep/x").allowed);
  EXPECT_EQ(redis_.probes.count("dep/x"), 0u);
}

TEST_F(FleetSyncTest, ProbeFailureReopensEveryoneEscalated) {
  a_->Trip("dep/x");
  StepAll();
  StepAll();
  Advance(Seconds(10));
  a_->Acquire("dep/x");
  a_->Step();
  AcquireResult probe = a_->Acquire("dep/x");
  ASSERT_TRUE(probe.probe);
  a_->Report("dep/x", probe.permit, OutcomeClass::kServerError);
  StepAll();
  StepAll();
  auto s = b_->registry.Get("dep/x");
  EXPECT_EQ(s->state, State::kOpen);
  EXPECT_EQ(s->escalation_level, 1u);
  EXPECT_EQ(s->retry_after, Seconds(20));
}

TEST_F(FleetSyncTest, AnotherSidecarClaimsAfterTheProbersLeaseLapses) {
  a_->Trip("dep/x");
  StepAll();
  StepAll();
  Advance(Seconds(10));
  a_->Acquire("dep/x");
  a_->Step();
  ASSERT_TRUE(a_->Acquire("dep/x").probe);  // and a never reports
  b_->Acquire("dep/x");
  b_->Step();
  EXPECT_EQ(b_->Acquire("dep/x").reason, RejectReason::kProbeInFlight);
  Advance(Seconds(5));
  EXPECT_FALSE(b_->Acquire("dep/x").allowed);  // asks again
  b_->Step();
  EXPECT_TRUE(b_->Acquire("dep/x").probe);
}

// Members are those that heartbeat: every kMemberTtlIntervals heartbeat
// intervals without one, a member drops out; one that reconnects is back.
// While the store is away, a sidecar knows no members.
TEST_F(FleetSyncTest, MembersAreThoseWhoHeartbeatRecently) {
  // Each counts those heard from so far: a joined before b.
  EXPECT_EQ(a_->sync->members(), 1u);
  EXPECT_EQ(b_->sync->members(), 2u);
  const absl::Duration interval = FleetOptions().heartbeat_interval;
  Advance(interval);
  StepAll();
  EXPECT_EQ(a_->sync->members(), 2u);
  Sidecar c("c", &redis_, &wall_);
  c.Step();
  EXPECT_EQ(c.sync->members(), 3u);
  Advance(interval);
  StepAll();
  EXPECT_EQ(a_->sync->members(), 3u);

  // c stops heartbeating: still counted within the ttl, gone after it.
  for (int i = 1; i < kMemberTtlIntervals; ++i) {
    Advance(interval);
    StepAll();
  }
  EXPECT_EQ(a_->sync->members(), 3u);
  Advance(interval + absl::Milliseconds(1));
  StepAll();
  EXPECT_EQ(a_->sync->members(), 2u);
  EXPECT_EQ(b_->sync->members(), 2u);

  c.Step();
  EXPECT_EQ(c.sync->members(), 3u);

  redis_.up = false;
  Advance(interval);
  StepAll();
  EXPECT_FALSE(a_->sync->connected());
  EXPECT_EQ(a_->sync->members(), 0u);
}

// The split: after a FLUSHALL the versions restart at 1, and a
// sidecar that remembered version 2 dropped the new version 1 as a
// duplicate. The heartbeat sees the store's new incarnation: the sidecar
// counts it, forgets its versions and reads the store again.
TEST_F(FleetSyncTest, AStoreThatForgotItsKeysIsDetectedAndReadAgain) {
  ASSERT_TRUE(a_->registry.ForceOpen("dep/flush").ok());
  StepAll();
  StepAll();
  ASSERT_EQ(b_->State("dep/flush"), State::kForcedOpen);
  ASSERT_TRUE(a_->registry.Reset("dep/flush").ok());
  StepAll();
  StepAll();
  ASSERT_EQ(b_->State("dep/flush"), State::kClosed);
  ASSERT_EQ(redis_.versions["dep/flush"], 2u);

  redis_.Flush();
  ASSERT_TRUE(a_->registry.ForceOpen("dep/flush").ok());
  a_->Step();  // publishes version 1 of the new incarnation
  ASSERT_EQ(redis_.versions["dep/flush"], 1u);
  Advance(FleetOptions().heartbeat_interval);
  StepAll();
  StepAll();
  EXPECT_EQ(b_->State("dep/flush"), State::kForcedOpen);
  EXPECT_EQ(b_->sync->counters().store_resets, 1u);
  EXPECT_EQ(a_->sync->counters().store_resets, 1u);

  // From then on versions count from the new baseline: a later reset
  // arrives as usual, and nothing is counted again.
  ASSERT_TRUE(a_->registry.Reset("dep/flush").ok());
  StepAll();
  StepAll();
  EXPECT_EQ(b_->State("dep/flush"), State::kClosed);
  Advance(FleetOptions().heartbeat_interval);
  StepAll();
  EXPECT_EQ(b_->sync->counters().store_resets, 1u);
}

// After the store forgot its keys, the overrides in force are published
// again, so a pod that joins later still learns them.
TEST_F(FleetSyncTest, AStoreThatForgotItsKeysGetsTheOverridesInForceBack) {
  ASSERT_TRUE(a_->registry.ForceOpen("dep/keep").ok());
  StepAll();
  StepAll();
  ASSERT_EQ(b_->State("dep/keep"), State::kForcedOpen);
  redis_.Flush();
  Advance(FleetOptions().heartbeat_interval);
  StepAll();
  StepAll();
  ASSERT_EQ(a_->sync->counters().store_resets, 1u);
  ASSERT_TRUE(redis_.states.count("dep/keep"));
  EXPECT_TRUE(absl::StrContains(redis_.states["dep/keep"], " forced_open "));
  Sidecar c("c", &redis_, &wall_);
  c.Step();
  EXPECT_EQ(c.State("dep/keep"), State::kForcedOpen);
}

// A Redis that restarted without persistence comes back empty: the
// sidecars that knew its old incarnation count a store reset when they
// rejoin (not only a disconnect), and publish the overrides in force.
TEST_F(FleetSyncTest, ARedisRestartedWithoutPersistenceIsAStoreReset) {
  ASSERT_TRUE(a_->registry.ForceOpen("dep/keep").ok());
  StepAll();
  StepAll();
  redis_.up = false;
  StepAll();
  ASSERT_FALSE(a_->sync->connected());
  redis_.Flush();
  redis_.up = true;
  Advance(Seconds(5));
  StepAll();
  StepAll();
  ASSERT_TRUE(a_->sync->connected());
  EXPECT_EQ(a_->sync->counters().store_resets, 1u);
  EXPECT_EQ(b_->sync->counters().store_resets, 1u);
  Sidecar c("c", &redis_, &wall_);
  c.Step();
  EXPECT_EQ(c.State("dep/keep"), State::kForcedOpen);
  EXPECT_EQ(c.sync->counters().store_resets, 0u);  // its first incarnation
}

// A trip made while the store was away stays this sidecar's: it is not
// published when the store returns (nor is its close), and it is not
// counted as unconfirmed.
TEST_F(FleetSyncTest, AnOpenMadeWhileTheStoreWasAwayIsNotPublishedOnReturn) {
  redis_.up = false;
  StepAll();
  a_->Trip("dep/away");
  redis_.up = true;
  Advance(Seconds(1));
  StepAll();
  StepAll();
  ASSERT_TRUE(a_->sync->connected());
  EXPECT_EQ(b_->State("dep/away"), State::kClosed);
  EXPECT_EQ(a_->sync->counters().published, 0u);
  Advance(Seconds(10));
  const AcquireResult probe = a_->Acquire("dep/away");
  ASSERT_TRUE(probe.probe);  // local: no claim asked of the fleet
  a_->Report("dep/away", probe.permit, OutcomeClass::kSuccess);
  StepAll();
  EXPECT_EQ(a_->sync->counters().published, 0u);
  EXPECT_EQ(a_->registry.Get("dep/away")->fleet_unconfirmed_opens, 0u);
}

TEST_F(FleetSyncTest, StoreDownMeansLocalBreakersThenRejoin) {
  redis_.up = false;
  StepAll();
  EXPECT_FALSE(a_->sync->connected());
  EXPECT_FALSE(a_->sync->Active());
  // Still breaking locally, probing locally.
  a_->Trip("dep/x");
  Advance(Seconds(10));
  EXPECT_TRUE(a_->Acquire("dep/x").probe);
  // An operator's decision made meanwhile is kept for later.
  ASSERT_TRUE(a_->registry.ForceOpen("dep/y").ok());
  StepAll();  // reconnect backs off

  redis_.up = true;
  Advance(Seconds(3));
  StepAll();
  EXPECT_TRUE(a_->sync->connected());
  EXPECT_TRUE(b_->sync->connected());
  EXPECT_EQ(a_->sync->counters().disconnects, 1u);
  // The decision made while away is published once it is back; the trip
  // stays a's own (AnOpenMadeWhileTheStoreWasAwayIsNotPublishedOnReturn).
  StepAll();
  StepAll();
  EXPECT_EQ(a_->sync->counters().published, 1u);
  EXPECT_NE(redis_.states.count("dep/y"), 0u);
  EXPECT_EQ(redis_.states.count("dep/x"), 0u);
  EXPECT_EQ(b_->State("dep/y"), State::kForcedOpen);
}

TEST_F(FleetSyncTest, RejoinAppliesStoredOpenAndForcedStates) {
  b_->sync->Stop();
  b_.reset();
  a_->Trip("dep/open");
  ASSERT_TRUE(a_->registry.ForceOpen("dep/forced").ok());
  a_->Step();
  // A sidecar that starts now learns both from the store.
  Sidecar c("c", &redis_, &wall_);
  c.clock.Advance(Seconds(1));
  c.Step();
  EXPECT_EQ(c.State("dep/open"), State::kOpen);
  EXPECT_EQ(c.State("dep/forced"), State::kForcedOpen);
}

// Captures every log line while alive.
class LogCapture {
 public:
  LogCapture() {
    previous_ = SetLogWriterForTesting(
        [this](absl::string_view line) { lines_.emplace_back(line); });
  }
  ~LogCapture() { SetLogWriterForTesting(previous_); }
  size_t Bytes() const {
    size_t n = 0;
    for (const std::string& l : lines_) n += l.size();
    return n;
  }
  std::vector<std::string> With(absl::string_view event) const {
    std::vector<std::string> out;
    for (const std::string& l : lines_) {
      if (absl::StrContains(l, absl::StrCat("\"event\":\"", event, "\""))) {
        out.push_back(l);
      }
    }
    return out;
  }

 private:
  LogWriter previous_;
  std::vector<std::string> lines_;
};

TEST_F(FleetSyncTest, AMegabyteDependencyIsRefusedNotStoredNorLoggedWhole) {
  LogCapture log;
  const std::string huge(1 << 20, 'x');
  for (int i = 0; i < 5; ++i) {
    b_->store->DeliverRaw(
        absl::StrCat(i + 1, " a open 1800000010000 0 ", huge, i));
    b_->Step();
    Advance(Seconds(1));  // every one may be logged
  }
  EXPECT_EQ(b_->sync->counters().refused, 5u);
  EXPECT_EQ(b_->sync->counters().applied, 0u);
  EXPECT_EQ(b_->sync->tracked_versions(), 0u);
  EXPECT_EQ(b_->registry.size(), 0u);
  ASSERT_EQ(log.With("fleet_message_refused").size(), 5u);
  EXPECT_LT(log.Bytes(), 5 * 400u) << log.With("fleet_message_refused")[0];
}

TEST_F(FleetSyncTest, EveryFieldIsValidatedBeforeAnythingIsApplied) {
  const std::string long_origin(kMaxFleetOriginBytes + 1, 'o');
  const std::vector<std::string> hostile = {
      "",
      "1 a open 0 0",                            // a field missing
      "1 a open 0 0 dep/x extra",                // one too many (a space)
      "0 a open 0 0 dep/x",                      // version 0
      "18446744073709551615 a reset 0 0 dep/x",  // past Redis' int64
      "+1 a open 0 0 dep/x",                     // not plain digits
      absl::StrCat("1 ", long_origin, " open 0 0 dep/x"),
      "1 a\x01 open 0 0 dep/x",               // control byte in origin
      "1 a opne 0 0 dep/x",                   // unknown kind
      "1 a open -1 0 dep/x",                  // negative time
      "1 a open 999999999999999999 0 dep/x",  // past year 9999
      "1 a open 0 65 dep/x",                  // escalation too high
      "1 a open 0 0 dep\x01x",                // dependency charset
      absl::StrCat("1 a open 0 0 ", std::string(kMaxDependencyLength + 1, 'd')),
  };
  for (const std::string& text : hostile) b_->store->DeliverRaw(text);
  b_->Step();
  EXPECT_EQ(b_->sync->counters().refused, hostile.size());
  EXPECT_EQ(b_->sync->counters().applied, 0u);
  EXPECT_EQ(b_->sync->tracked_versions(), 0u);
  EXPECT_EQ(b_->registry.size(), 0u);
  // And one good message still goes through.
  b_->store->DeliverRaw("1 a forced_open 0 0 dep/x");
  b_->Step();
  EXPECT_EQ(b_->State("dep/x"), State::kForcedOpen);
}

TEST_F(FleetSyncTest, AnImplausibleVersionJumpIsRefusedAndPropagationGoesOn) {
  a_->Trip("dep/x");
  StepAll();
  StepAll();
  ASSERT_EQ(b_->State("dep/x"), State::kOpen);  // version 1
  // The no-op message, and the largest Redis could ever make.
  b_->store->DeliverRaw("18446744073709551615 evil reset 0 0 dep/x");
  b_->store->DeliverRaw("9223372036854775807 evil reset 0 0 dep/x");
  b_->store->DeliverRaw("1000002 evil reset 0 0 dep/x");  // 1 + 1,000,001
  // Nothing seen yet: counted from 0.
  b_->store->DeliverRaw("1000001 evil forced_open 0 0 dep/new");
  b_->Step();
  EXPECT_EQ(b_->sync->counters().refused, 4u);
  EXPECT_EQ(b_->State("dep/new"), State::kClosed);
  // The fleet's next decisions still reach b.
  ASSERT_TRUE(a_->registry.ForceClose("dep/x").ok());
  StepAll();
  StepAll();
  EXPECT_EQ(b_->State("dep/x"), State::kForcedClosed);
  ASSERT_TRUE(a_->registry.ForceOpen("dep/x").ok());
  StepAll();
  StepAll();
  EXPECT_EQ(b_->State("dep/x"), State::kForcedOpen);
}

TEST_F(FleetSyncTest, ARejoinTakesTheStoredVersionAsTheBaseline) {
  // A long-lived forced state: its version key never expires.
  redis_.versions["dep/forced"] = 5'000'000;
  ASSERT_TRUE(a_->registry.ForceOpen("dep/forced").ok());
  a_->Step();
  Sidecar c("c", &redis_, &wall_);
  c.Step();
  EXPECT_EQ(c.State("dep/forced"), State::kForcedOpen);
  ASSERT_TRUE(a_->registry.ForceClose("dep/forced").ok());
  a_->Step();
  c.Step();
  EXPECT_EQ(c.State("dep/forced"), State::kForcedClosed);
  EXPECT_EQ(c.sync->counters().refused, 0u);
}

TEST_F(FleetSyncTest, AVersionRestartedAfterItsKeyExpiredIsApplied) {
  ASSERT_TRUE(a_->registry.ForceOpen("dep/x").ok());
  StepAll();
  ASSERT_TRUE(a_->registry.Reset("dep/x").ok());
  StepAll();
  StepAll();
  ASSERT_EQ(b_->State("dep/x"), State::kClosed);  // b saw version 2
  // Within state_ttl a lower version is old news...
  b_->store->DeliverRaw("1 evil forced_open 0 0 dep/x");
  b_->Step();
  EXPECT_EQ(b_->State("dep/x"), State::kClosed);
  EXPECT_EQ(b_->sync->counters().duplicates, 1u);
  // ...but once the keys have expired with the state, the version restarts
  // from 1 and is news again.
  Advance(absl::Minutes(10));
  redis_.versions.erase("dep/x");
  redis_.states.erase("dep/x");
  ASSERT_TRUE(a_->registry.ForceOpen("dep/x").ok());
  StepAll();
  StepAll();
  ASSERT_EQ(redis_.versions["dep/x"], 1u);
  EXPECT_EQ(b_->State("dep/x"), State::kForcedOpen);
}

TEST_F(FleetSyncTest, TheVersionMapIsBounded) {
  Sidecar c("c", &redis_, &wall_,
            [](FleetOptions* o) { o->max_tracked_versions = 3; });
  c.Step();
  for (int i = 0; i < 10; ++i) {
    c.store->DeliverRaw(absl::StrCat("1 z reset 0 0 one-off/", i));
  }
  c.Step();
  EXPECT_EQ(c.sync->tracked_versions(), 3u);
  // The most recent are the ones kept.
  c.store->DeliverRaw("1 z reset 0 0 one-off/9");
  c.Step();
  EXPECT_EQ(c.sync->counters().duplicates, 1u);
  // The default bound holds against many one-off names too.
  for (int i = 0; i < 10'100; ++i) {
    b_->store->DeliverRaw(absl::StrCat("1 z reset 0 0 one-off/", i));
  }
  b_->Step();
  EXPECT_EQ(b_->sync->tracked_versions(), 10'000u);
}

TEST_F(FleetSyncTest, RefusalsAndApplyFailuresAreLoggedAtMostOncePerSecond) {
  auto one_breaker = std::make_shared<PolicySet>(*Policies());
  one_breaker->limits.max_breakers = 1;
  Sidecar c("c", &redis_, &wall_, nullptr, one_breaker);
  c.Step();
  LogCapture log;
  for (int i = 0; i < 100; ++i) c.store->DeliverRaw("1 z opne 0 0 dep/x");
  for (int i = 0; i < 50; ++i) {
    c.store->DeliverRaw(absl::StrCat("1 z forced_open 0 0 dep/", i));
  }
  c.Step();
  EXPECT_EQ(c.sync->counters().refused, 100u);
  EXPECT_EQ(c.sync->counters().applied, 1u);  // dep/0; then the limit
  EXPECT_EQ(log.With("fleet_message_refused").size(), 1u);
  EXPECT_EQ(log.With("fleet_apply_failed").size(), 1u);
  // A second later, one line each says how many were held back.
  Advance(Seconds(1));
  c.store->DeliverRaw("1 z opne 0 0 dep/x");
  c.store->DeliverRaw("1 z forced_open 0 0 dep/50");
  c.Step();
  std::vector<std::string> refused = log.With("fleet_message_refused");
  std::vector<std::string> failed = log.With("fleet_apply_failed");
  ASSERT_EQ(refused.size(), 2u);
  ASSERT_EQ(failed.size(), 2u);
  EXPECT_TRUE(absl::StrContains(refused[1], "\"suppressed\":99")) << refused[1];
  EXPECT_TRUE(absl::StrContains(failed[1], "\"suppressed\":48")) << failed[1];
}

}  // namespace
}  // namespace breakerd

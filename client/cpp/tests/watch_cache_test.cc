// The Watch cache alone: generations, modes and cooldowns, time passed in;
// and the notices local decisions rest on (created, evicted, reload,
// ramp_done), which decide when a first attempt is granted in the client.
#include "breakerd/internal/watch_cache.h"

#include <memory>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "breakerd/client.h"
#include "breakerd/v1/breaker.pb.h"
#include "gtest/gtest.h"

namespace breakerd::client {
namespace {

class WatchCacheTest : public ::testing::Test {
 protected:
  static v1::StateChange Change(v1::State state, uint64_t generation,
                                absl::string_view mode = "enforce",
                                absl::string_view reason = "") {
    v1::StateChange c;
    c.set_dependency(std::string(kDep));
    c.set_state(state);
    c.set_generation(generation);
    c.set_mode(std::string(mode));
    c.set_reason(std::string(reason));
    if (state == v1::STATE_OPEN) c.mutable_retry_after()->set_seconds(30);
    return c;
  }

  bool Refused() { return cache_.Refusal(kDep, now_).has_value(); }

  // An event that allows local decisions, or not.
  static v1::StateChange Local(v1::State state, uint64_t generation, bool local,
                               absl::string_view reason,
                               absl::string_view mode = "enforce") {
    v1::StateChange c = Change(state, generation, mode, reason);
    c.set_local_decisions(local);
    return c;
  }

  // The cache's verdict for a first attempt.
  internal::CacheVerdict Decide(bool may_grant = true) {
    return cache_.Decide(kDep, may_grant, [this] { return now_; });
  }
  bool Grants() {
    return Decide().kind == internal::CacheVerdict::Kind::kGrant;
  }

  static constexpr absl::string_view kDep = "cache/dep";
  const absl::Duration now_ = absl::Hours(1);
  internal::WatchCache cache_;
};

TEST_F(WatchCacheTest, OpenWithALowerGenerationThanCloseIsIgnored) {
  EXPECT_TRUE(cache_.Apply(Change(v1::STATE_CLOSED, 6), now_));
  EXPECT_FALSE(cache_.Apply(Change(v1::STATE_OPEN, 5), now_));
  EXPECT_FALSE(Refused());
  EXPECT_EQ(cache_.StateOf(kDep), State::kClosed);
}

TEST_F(WatchCacheTest, CloseWithAHigherGenerationThanOpenIsApplied) {
  EXPECT_TRUE(cache_.Apply(Change(v1::STATE_OPEN, 5), now_));
  EXPECT_TRUE(Refused());
  EXPECT_TRUE(cache_.Apply(Change(v1::STATE_CLOSED, 6), now_));
  EXPECT_FALSE(Refused());
  EXPECT_EQ(cache_.StateOf(kDep), State::kClosed);
}

TEST_F(WatchCacheTest, ReloadWithTheSameGenerationSwitchesToShadow) {
  ASSERT_TRUE(cache_.Apply(Change(v1::STATE_OPEN, 6), now_));
  ASSERT_TRUE(Refused());
  EXPECT_TRUE(
      cache_.Apply(Change(v1::STATE_OPEN, 6, "shadow", "reload"), now_));
  EXPECT_FALSE(Refused());
  EXPECT_EQ(cache_.StateOf(kDep), State::kOpen);
}

TEST_F(WatchCacheTest, EmptyModeFromAnOlderSidecarIsEnforced) {
  ASSERT_TRUE(cache_.Apply(Change(v1::STATE_OPEN, 1, ""), now_));
  std::optional<Decision> refusal = cache_.Refusal(kDep, now_);
  ASSERT_TRUE(refusal.has_value());
  EXPECT_EQ(refusal->source, DecisionSource::kLocal);
  EXPECT_EQ(refusal->reason, RejectReason::kOpen);
  EXPECT_EQ(refusal->retry_after, absl::Seconds(30));
  // Past the cooldown's end the sidecar decides (it grants the probe).
  EXPECT_FALSE(cache_.Refusal(kDep, now_ + absl::Seconds(30)).has_value());
}

TEST_F(WatchCacheTest, ForcedOpenShadowBreakerIsNotRefused) {
  ASSERT_TRUE(cache_.Apply(Change(v1::STATE_FORCED_OPEN, 2), now_));
  EXPECT_EQ(cache_.Refusal(kDep, now_)->reason, RejectReason::kForcedOpen);
  ASSERT_TRUE(cache_.Apply(Change(v1::STATE_FORCED_OPEN, 2, "shadow"), now_));
  EXPECT_FALSE(Refused());
}

TEST_F(WatchCacheTest, CreatedTurnsLocalGrantsOnAtItsGeneration) {
  // The first event of a dependency with no breaker yet: breakerd decides.
  ASSERT_TRUE(cache_.Apply(Local(v1::STATE_CLOSED, 0, false, "initial"), now_));
  EXPECT_FALSE(Grants());
  ASSERT_TRUE(cache_.Apply(Local(v1::STATE_CLOSED, 3, true, "created"), now_));
  const internal::CacheVerdict v = Decide();
  ASSERT_EQ(v.kind, internal::CacheVerdict::Kind::kGrant);
  ASSERT_NE(v.slot, nullptr);
  EXPECT_EQ(v.slot->dependency, kDep);
  EXPECT_EQ(v.slot->generation, 3u);
  // A retry (the caller says: no grant) goes to breakerd.
  EXPECT_EQ(Decide(/*may_grant=*/false).kind,
            internal::CacheVerdict::Kind::kAsk);
}

TEST_F(WatchCacheTest, EqualGenerationNoticesAreApplied) {
  // Closed by its probe, ramping: breakerd decides until the ramp ends.
  ASSERT_TRUE(
      cache_.Apply(Local(v1::STATE_CLOSED, 7, false, "probe_succeeded"), now_));
  EXPECT_FALSE(Grants());
  EXPECT_TRUE(
      cache_.Apply(Local(v1::STATE_CLOSED, 7, true, "ramp_done"), now_));
  ASSERT_TRUE(Grants());
  const std::shared_ptr<internal::LocalSlot> slot = Decide().slot;
  // A reload that keeps local decisions keeps the slot (same generation).
  EXPECT_TRUE(cache_.Apply(Local(v1::STATE_CLOSED, 7, true, "reload"), now_));
  EXPECT_EQ(Decide().slot, slot);
  // One that turns them off (the policy's local_decisions: false).
  EXPECT_TRUE(cache_.Apply(Local(v1::STATE_CLOSED, 7, false, "reload"), now_));
  EXPECT_FALSE(Grants());
  // A lower generation is ignored, whatever it says.
  EXPECT_FALSE(cache_.Apply(Local(v1::STATE_CLOSED, 6, true, "reload"), now_));
  EXPECT_FALSE(Grants());
}

TEST_F(WatchCacheTest, ATransitionEndsTheGrantsOfItsGeneration) {
  ASSERT_TRUE(cache_.Apply(Local(v1::STATE_CLOSED, 1, true, "created"), now_));
  const std::shared_ptr<internal::LocalSlot> slot = Decide().slot;
  ASSERT_NE(slot, nullptr);
  ASSERT_TRUE(cache_.Apply(
      Local(v1::STATE_OPEN, 2, false, "consecutive_failures"), now_));
  EXPECT_EQ(Decide().kind, internal::CacheVerdict::Kind::kRefuse);
  ASSERT_TRUE(
      cache_.Apply(Local(v1::STATE_CLOSED, 3, true, "probe_succeeded"), now_));
  // A new generation, a new slot: the old one's outcomes stay with it.
  ASSERT_TRUE(Grants());
  EXPECT_NE(Decide().slot, slot);
  EXPECT_EQ(Decide().slot->generation, 3u);
  EXPECT_EQ(slot->generation, 1u);
}

TEST_F(WatchCacheTest, ShadowAndForcedClosedAreNeverGrantedLocally) {
  // breakerd says local_decisions false for both; the cache checks too.
  ASSERT_TRUE(cache_.Apply(
      Local(v1::STATE_CLOSED, 1, true, "created", "shadow"), now_));
  EXPECT_FALSE(Grants());
  ASSERT_TRUE(cache_.Apply(
      Local(v1::STATE_FORCED_CLOSED, 2, true, "forced_closed"), now_));
  EXPECT_FALSE(Grants());
  EXPECT_EQ(Decide().kind, internal::CacheVerdict::Kind::kAsk);
}

TEST_F(WatchCacheTest, EvictedForgetsTheDependency) {
  ASSERT_TRUE(cache_.Apply(Local(v1::STATE_CLOSED, 4, true, "created"), now_));
  ASSERT_TRUE(Grants());
  // An older eviction is ignored like any older event.
  EXPECT_FALSE(
      cache_.Apply(Local(v1::STATE_CLOSED, 3, false, "evicted"), now_));
  EXPECT_TRUE(Grants());
  EXPECT_TRUE(cache_.Apply(Local(v1::STATE_CLOSED, 4, false, "evicted"), now_));
  EXPECT_FALSE(cache_.StateOf(kDep).has_value());
  EXPECT_EQ(Decide().kind, internal::CacheVerdict::Kind::kAsk);
  // Re-created above the evicted generation.
  EXPECT_TRUE(cache_.Apply(Local(v1::STATE_CLOSED, 5, true, "created"), now_));
  EXPECT_TRUE(Grants());
}

}  // namespace
}  // namespace breakerd::client

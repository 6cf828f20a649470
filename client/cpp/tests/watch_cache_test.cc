// The Watch cache alone: generations, modes and cooldowns, time passed in.
#include "breakerd/internal/watch_cache.h"

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

}  // namespace
}  // namespace breakerd::client

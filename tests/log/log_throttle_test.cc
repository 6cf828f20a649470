#include "server/log/log_throttle.h"

#include <optional>

#include "gtest/gtest.h"

namespace breakerd {
namespace {

constexpr int64_t kSecond = 1'000'000'000;

TEST(LogThrottleTest, FirstEventLogsThenOneLinePerIntervalWithTheCount) {
  LogThrottle throttle(absl::Seconds(1));
  EXPECT_EQ(throttle.Count(0), std::optional<uint64_t>(1));
  EXPECT_EQ(throttle.Count(kSecond / 2), std::nullopt);
  EXPECT_EQ(throttle.Count(kSecond - 1), std::nullopt);
  // The line due at the interval stands for the two held back and itself.
  EXPECT_EQ(throttle.Count(kSecond), std::optional<uint64_t>(3));
  EXPECT_EQ(throttle.Count(kSecond + 1), std::nullopt);
}

TEST(LogThrottleTest, ResetClosesTheRunAndTheNextEventLogsAtOnce) {
  LogThrottle throttle(absl::Minutes(1));
  EXPECT_EQ(throttle.Reset(), std::nullopt);  // nothing was logged
  EXPECT_EQ(throttle.Count(0), std::optional<uint64_t>(1));
  EXPECT_EQ(throttle.Count(1), std::nullopt);
  EXPECT_EQ(throttle.Count(2), std::nullopt);
  EXPECT_EQ(throttle.Reset(), std::optional<uint64_t>(2));
  EXPECT_EQ(throttle.Reset(), std::nullopt);
  EXPECT_EQ(throttle.Count(3), std::optional<uint64_t>(1));
}

}  // namespace
}  // namespace breakerd

// ScrapeLimiter: what /metrics scrapes may cost, on a simulated clock.
#include "server/metrics/scrape_limiter.h"

#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/engine/clock.h"

namespace breakerd {
namespace {

using ::testing::HasSubstr;

// The default cap of 10,000 breakers: a full scrape costs 10,010.
constexpr size_t kFullRegistry = 10000;

class ScrapeLimiterTest : public ::testing::Test {
 protected:
  ScrapeLimiterTest() : limiter_(&clock_, ScrapeLimits()) {}

  // Begins and ends one scrape; true if it was admitted.
  bool Scrape(size_t breakers) {
    const ScrapeLimiter::Admission a = limiter_.Begin(breakers);
    if (a.admitted) limiter_.End(a.slot);
    return a.admitted;
  }

  FakeClock clock_;
  ScrapeLimiter limiter_;
};

TEST_F(ScrapeLimiterTest, DefaultsAreTheDocumentedNumbers) {
  EXPECT_EQ(limiter_.limits().concurrent, 2);
  EXPECT_EQ(limiter_.limits().breakers_per_second, 10000);
  EXPECT_EQ(limiter_.limits().burst_breakers, 20000);
}

TEST_F(ScrapeLimiterTest, AThirdScrapeAtOnceIsRefusedUntilOneEnds) {
  const ScrapeLimiter::Admission first = limiter_.Begin(10);
  const ScrapeLimiter::Admission second = limiter_.Begin(10);
  ASSERT_TRUE(first.admitted);
  ASSERT_TRUE(second.admitted);
  EXPECT_NE(first.slot, second.slot);
  for (int slot : {first.slot, second.slot}) {
    EXPECT_GE(slot, 0);
    EXPECT_LT(slot, 2);
  }
  const ScrapeLimiter::Admission third = limiter_.Begin(10);
  EXPECT_FALSE(third.admitted);
  EXPECT_EQ(third.retry_after_seconds, 1);
  EXPECT_THAT(third.reason, HasSubstr("at most 2 scrapes"));
  limiter_.End(first.slot);
  const ScrapeLimiter::Admission again = limiter_.Begin(10);
  ASSERT_TRUE(again.admitted);
  EXPECT_EQ(again.slot, first.slot);  // the freed slot, not a third one
  limiter_.End(again.slot);
  limiter_.End(second.slot);
}

// Two Prometheus replicas scraping at the same moment both get through;
// one full scrape a second is the sustained rate.
TEST_F(ScrapeLimiterTest, FullScrapesBurstTwiceThenOnceASecond) {
  EXPECT_TRUE(Scrape(kFullRegistry));
  EXPECT_TRUE(Scrape(kFullRegistry));  // 20,000 - 2 * 10,010: in debt
  const ScrapeLimiter::Admission refused = limiter_.Begin(kFullRegistry);
  EXPECT_FALSE(refused.admitted);
  EXPECT_EQ(refused.retry_after_seconds, 1);
  EXPECT_THAT(refused.reason, HasSubstr("10000 breakers per second"));
  clock_.Advance(absl::Milliseconds(1));  // +10: the debt of 20 remains
  EXPECT_FALSE(Scrape(kFullRegistry));
  clock_.Advance(absl::Milliseconds(2));  // +20: paid back
  EXPECT_TRUE(Scrape(kFullRegistry));
  // From now on: one a second, whatever the attempts in between.
  for (int second = 0; second < 5; ++second) {
    EXPECT_FALSE(Scrape(kFullRegistry));
    clock_.Advance(absl::Milliseconds(500));
    EXPECT_FALSE(Scrape(kFullRegistry));
    clock_.Advance(absl::Milliseconds(502));
    EXPECT_TRUE(Scrape(kFullRegistry)) << second;
  }
}

// A registry bigger than a second's budget is still scraped, once per
// refill of its debt, and told how long that is.
TEST_F(ScrapeLimiterTest, ABigRegistryIsScrapedOncePerRefillOfItsDebt) {
  EXPECT_TRUE(Scrape(100000));  // 20,000 - 100,010: 80,010 in debt
  const ScrapeLimiter::Admission refused = limiter_.Begin(100000);
  EXPECT_FALSE(refused.admitted);
  EXPECT_EQ(refused.retry_after_seconds, 9);  // 8.001 s, rounded up
  clock_.Advance(absl::Seconds(8));
  EXPECT_FALSE(Scrape(100000));
  clock_.Advance(absl::Milliseconds(2));
  EXPECT_TRUE(Scrape(100000));
}

// A refused scrape costs nothing; a long idle spell refills to the burst,
// no further.
TEST_F(ScrapeLimiterTest, RefusalsAreFreeAndIdleTimeFillsOnlyTheBurst) {
  ASSERT_TRUE(Scrape(kFullRegistry));
  ASSERT_TRUE(Scrape(kFullRegistry));
  for (int i = 0; i < 1000; ++i) ASSERT_FALSE(Scrape(kFullRegistry));
  clock_.Advance(absl::Milliseconds(3));
  EXPECT_TRUE(Scrape(kFullRegistry));  // as if nobody had knocked
  clock_.Advance(absl::Hours(1));
  EXPECT_TRUE(Scrape(kFullRegistry));
  EXPECT_TRUE(Scrape(kFullRegistry));
  EXPECT_FALSE(Scrape(kFullRegistry));
}

// Small registries are charged their size plus kScrapeBaseCost: tests
// and tiny sidecars may poll /metrics often.
TEST_F(ScrapeLimiterTest, EmptyRegistriesPayTheBaseCostOnly) {
  const int per_burst = static_cast<int>(20000 / kScrapeBaseCost);
  for (int i = 0; i < per_burst; ++i) ASSERT_TRUE(Scrape(0)) << i;
  EXPECT_FALSE(Scrape(0));
}

}  // namespace
}  // namespace breakerd

#include "server/engine/policy.h"

#include "gtest/gtest.h"

namespace breakerd {
namespace {

TEST(GlobMatchTest, ExactAndStar) {
  EXPECT_TRUE(GlobMatch("openai/key-1", "openai/key-1"));
  EXPECT_FALSE(GlobMatch("openai/key-1", "openai/key-2"));
  EXPECT_TRUE(GlobMatch("openai/*", "openai/key-1"));
  EXPECT_TRUE(GlobMatch("openai/*", "openai/"));
  EXPECT_FALSE(GlobMatch("openai/*", "anthropic/key"));
  EXPECT_TRUE(GlobMatch("*", "anything/at/all"));
  EXPECT_TRUE(GlobMatch("*/prod-*", "stripe/prod-7"));
  EXPECT_FALSE(GlobMatch("*/prod-*", "stripe/dev-7"));
  EXPECT_TRUE(GlobMatch("a*b*c", "aXXbYYc"));
  EXPECT_FALSE(GlobMatch("a*b*c", "aXXbYY"));
  EXPECT_TRUE(GlobMatch("**", ""));
  EXPECT_FALSE(GlobMatch("", "x"));
}

TEST(PolicySetTest, FirstMatchWinsElseDefaults) {
  PolicySet set;
  auto specific = std::make_shared<Policy>();
  specific->match = "openai/prod";
  specific->consecutive_failures = 2;
  auto wide = std::make_shared<Policy>();
  wide->match = "openai/*";
  wide->consecutive_failures = 9;
  set.policies = {specific, wide};
  EXPECT_EQ(set.Match("openai/prod")->consecutive_failures, 2u);
  EXPECT_EQ(set.Match("openai/dev")->consecutive_failures, 9u);
  EXPECT_EQ(set.Match("stripe/x")->match, "defaults");
}

}  // namespace
}  // namespace breakerd

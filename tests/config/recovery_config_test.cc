// The per-policy `inflight:` and `recovery:` keys (DESIGN.md, "Hung calls,
// single-use permits, gentle recovery"): inflight.hang_after, recovery.ramp
// and recovery.start_share, parsed, inherited, validated and reloaded like
// every other policy key. The rest of the config module is in
// config_test.cc.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/config/config.h"
#include "server/engine/clock.h"
#include "server/engine/policy.h"
#include "server/engine/registry.h"
#include "tests/config/config_file_fixture.h"

namespace breakerd {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// --- parsing ----------------------------------------------------------------

TEST(RecoveryConfigTest, DefaultsAreOffWithAStartShareOfOneTenth) {
  for (const std::shared_ptr<const PolicySet>& set :
       {EmbeddedDefaults(), MustParse(""),
        MustParse("defaults: {inflight: {}, recovery: {}}\n"),
        MustParse("defaults:\n  inflight:\n  recovery:\n"),
        MustParse("defaults:\n"
                  "  inflight: { hang_after: 0s }\n"
                  "  recovery: { ramp: 0s, start_share: 0.1 }\n")}) {
    ASSERT_NE(set, nullptr);
    const Policy& d = *set->defaults;
    EXPECT_EQ(d.inflight.hang_after, absl::ZeroDuration());
    EXPECT_EQ(d.recovery.ramp, absl::ZeroDuration());
    EXPECT_EQ(d.recovery.start_share, 0.1);
    EXPECT_EQ(PermitHorizon(d), kDefaultPermitHorizon);
    EXPECT_EQ(d, Policy());
  }
}

TEST(RecoveryConfigTest, PolicyOverridesBothMaps) {
  std::shared_ptr<const PolicySet> set = MustParse(R"(
policies:
  - match: "openai/*"
    inflight: { hang_after: 2m }
    recovery: { ramp: 5m, start_share: 0.25 }
)");
  ASSERT_NE(set, nullptr);
  EXPECT_EQ(*set->defaults, Policy());
  ASSERT_EQ(set->policies.size(), 1u);
  const Policy& p = *set->policies[0];
  EXPECT_EQ(p.inflight.hang_after, absl::Minutes(2));
  EXPECT_EQ(p.recovery.ramp, absl::Minutes(5));
  EXPECT_EQ(p.recovery.start_share, 0.25);
  EXPECT_EQ(PermitHorizon(p), absl::Minutes(2));

  Policy expected;
  expected.match = "openai/*";
  expected.inflight.hang_after = absl::Minutes(2);
  expected.recovery.ramp = absl::Minutes(5);
  expected.recovery.start_share = 0.25;
  EXPECT_EQ(p, expected);
}

TEST(RecoveryConfigTest, PolicyInheritsFromDefaultsLeafByLeaf) {
  std::shared_ptr<const PolicySet> set = MustParse(R"(
defaults:
  inflight: { hang_after: 90s }
  recovery: { ramp: 10m, start_share: 0.2 }
policies:
  - match: "a"
    recovery: { start_share: 0.5 }
  - match: "b"
    inflight: { hang_after: 0s }
    recovery: { ramp: 0s }
  - match: "c"
)");
  ASSERT_NE(set, nullptr);
  EXPECT_EQ(set->defaults->inflight.hang_after, absl::Seconds(90));
  EXPECT_EQ(set->defaults->recovery.ramp, absl::Minutes(10));
  EXPECT_EQ(set->defaults->recovery.start_share, 0.2);
  ASSERT_EQ(set->policies.size(), 3u);
  // start_share given; ramp and hang_after inherited.
  const Policy& a = *set->policies[0];
  EXPECT_EQ(a.inflight.hang_after, absl::Seconds(90));
  EXPECT_EQ(a.recovery.ramp, absl::Minutes(10));
  EXPECT_EQ(a.recovery.start_share, 0.5);
  // Both switched off here; start_share still inherited.
  const Policy& b = *set->policies[1];
  EXPECT_EQ(b.inflight.hang_after, absl::ZeroDuration());
  EXPECT_EQ(b.recovery.ramp, absl::ZeroDuration());
  EXPECT_EQ(b.recovery.start_share, 0.2);
  EXPECT_EQ(PermitHorizon(b), kDefaultPermitHorizon);
  // Nothing given: all of it from defaults.
  const Policy& c = *set->policies[2];
  EXPECT_EQ(c.inflight.hang_after, absl::Seconds(90));
  EXPECT_EQ(c.recovery.ramp, absl::Minutes(10));
  EXPECT_EQ(c.recovery.start_share, 0.2);
}

TEST(RecoveryConfigTest, BoundsThemselvesAreAccepted) {
  std::shared_ptr<const PolicySet> set = MustParse(R"(
defaults:
  inflight: { hang_after: 5m }
  recovery: { ramp: 1h, start_share: 1 }
policies:
  - match: "a"
    inflight: { hang_after: 300s }
    recovery: { ramp: 60m, start_share: 0.001 }
  - match: "b"
    inflight: { hang_after: 1ms }
    recovery: { ramp: 1ms }
)");
  ASSERT_NE(set, nullptr);
  EXPECT_EQ(set->defaults->inflight.hang_after, kMaxHangAfter);
  EXPECT_EQ(set->defaults->recovery.ramp, absl::Hours(1));
  EXPECT_EQ(set->defaults->recovery.start_share, 1.0);
  EXPECT_EQ(set->policies[0]->inflight.hang_after, kMaxHangAfter);
  EXPECT_EQ(set->policies[0]->recovery.ramp, absl::Hours(1));
  EXPECT_EQ(set->policies[0]->recovery.start_share, 0.001);
  EXPECT_EQ(set->policies[1]->inflight.hang_after, absl::Milliseconds(1));
  EXPECT_EQ(set->policies[1]->recovery.ramp, absl::Milliseconds(1));
}

// --- bounds -----------------------------------------------------------------

TEST(RecoveryConfigTest, HangAfterLongerThanFiveMinutesIsRefused) {
  EXPECT_THAT(ErrorLines("defaults:\n  inflight: { hang_after: 6m }\n"),
              ElementsAre("test.yaml:2: defaults.inflight.hang_after: must be "
                          "0s (off) or between 1ms and 5m (got 6m)"));
  EXPECT_THAT(ErrorLines("policies:\n"
                         "  - match: a\n"
                         "    inflight:\n"
                         "      hang_after: 301s\n"),
              ElementsAre("test.yaml:4: policies[0].inflight.hang_after: must "
                          "be 0s (off) or between 1ms and 5m (got 301s)"));
}

// Found by fuzz/classify_fuzz: a sub-millisecond hang_after (0.25ns) was
// accepted, kept in whole nanoseconds as 0, and so never counted a call.
TEST(RecoveryConfigTest, DurationsShorterThanAMillisecondAreRefused) {
  EXPECT_THAT(ErrorLines("defaults:\n  inflight: { hang_after: 500us }\n"),
              ElementsAre("test.yaml:2: defaults.inflight.hang_after: must be "
                          "0s (off) or between 1ms and 5m (got 500us)"));
  EXPECT_THAT(ErrorLines("defaults:\n  recovery: { ramp: 0.25ns }\n"),
              ElementsAre("test.yaml:2: defaults.recovery.ramp: must be 0s "
                          "(off) or between 1ms and 1h (got 0.25ns)"));
}

TEST(RecoveryConfigTest, NegativeDurationsAreRefused) {
  EXPECT_THAT(ErrorLines("defaults:\n  inflight: { hang_after: -1s }\n"),
              ElementsAre("test.yaml:2: defaults.inflight.hang_after: must not "
                          "be negative (got \"-1s\")"));
  EXPECT_THAT(ErrorLines("policies:\n"
                         "  - match: a\n"
                         "    recovery: { ramp: -5m }\n"),
              ElementsAre("test.yaml:3: policies[0].recovery.ramp: must not "
                          "be negative (got \"-5m\")"));
}

TEST(RecoveryConfigTest, DurationsNeedAUnitEvenForZero) {
  EXPECT_THAT(ErrorLines("defaults:\n  inflight: { hang_after: 0 }\n"),
              ElementsAre(HasSubstr("test.yaml:2: defaults.inflight.hang_after:"
                                    " needs a unit")));
  EXPECT_THAT(ErrorLines("defaults:\n  recovery: { ramp: [1m] }\n"),
              ElementsAre(HasSubstr("test.yaml:2: defaults.recovery.ramp: must "
                                    "be a duration with a unit")));
}

TEST(RecoveryConfigTest, RampLongerThanAnHourIsRefused) {
  EXPECT_THAT(ErrorLines("defaults:\n  recovery: { ramp: 2h }\n"),
              ElementsAre("test.yaml:2: defaults.recovery.ramp: must be 0s "
                          "(off) or between 1ms and 1h (got 2h)"));
  EXPECT_THAT(ErrorLines("policies:\n"
                         "  - match: a\n"
                         "    recovery: { ramp: 61m }\n"),
              ElementsAre("test.yaml:3: policies[0].recovery.ramp: must be 0s "
                          "(off) or between 1ms and 1h (got 61m)"));
}

TEST(RecoveryConfigTest, StartShareOutsideZeroToOneIsRefused) {
  EXPECT_THAT(ErrorLines("defaults:\n  recovery: { start_share: 0 }\n"),
              ElementsAre("test.yaml:2: defaults.recovery.start_share: must be "
                          "greater than 0 and at most 1 (got 0)"));
  EXPECT_THAT(ErrorLines("defaults:\n  recovery: { start_share: 1.5 }\n"),
              ElementsAre("test.yaml:2: defaults.recovery.start_share: must be "
                          "greater than 0 and at most 1 (got 1.5)"));
  EXPECT_THAT(ErrorLines("policies:\n"
                         "  - match: a\n"
                         "    recovery: { start_share: -0.1 }\n"),
              ElementsAre("test.yaml:3: policies[0].recovery.start_share: "
                          "must be greater than 0 and at most 1 (got -0.1)"));
  EXPECT_THAT(ErrorLines("defaults:\n  recovery: { start_share: half }\n"),
              ElementsAre("test.yaml:2: defaults.recovery.start_share: must be "
                          "a number (got \"half\")"));
}

TEST(RecoveryConfigTest, UnknownKeyUnderEitherMapIsRefusedNamingItsPath) {
  EXPECT_THAT(ErrorLines("defaults:\n  inflight: { hang: 1m }\n"),
              ElementsAre("test.yaml:2: defaults.inflight.hang: unknown key "
                          "(known: hang_after)"));
  EXPECT_THAT(ErrorLines("policies:\n"
                         "  - match: a\n"
                         "    recovery:\n"
                         "      ramp: 1m\n"
                         "      start: 0.5\n"),
              ElementsAre("test.yaml:5: policies[0].recovery.start: unknown "
                          "key (known: ramp, start_share)"));
  EXPECT_THAT(ErrorLines("defaults:\n  inflight: 5m\n"),
              ElementsAre("test.yaml:2: defaults.inflight: must be a map with "
                          "keys hang_after (got \"5m\")"));
  EXPECT_THAT(ErrorLines("defaults:\n  recovery: [ramp]\n"),
              ElementsAre("test.yaml:2: defaults.recovery: must be a map with "
                          "keys ramp, start_share (got a list)"));
}

TEST(RecoveryConfigTest, EveryErrorIsReportedWithTheOthers) {
  EXPECT_THAT(
      ErrorLines("defaults:\n"
                 "  mode: x\n"
                 "  inflight: { hang_after: 6m }\n"
                 "  recovery: { ramp: -1s, start_share: 0, extra: 1 }\n"
                 "policies:\n"
                 "  - match: a\n"
                 "    inflight: { hang: 1s }\n"
                 "    recovery: { ramp: 2h, start_share: 1.5 }\n"),
      ElementsAre("test.yaml:2: defaults.mode: must be one of enforce, shadow "
                  "(got \"x\")",
                  "test.yaml:3: defaults.inflight.hang_after: must be 0s (off) "
                  "or between 1ms and 5m (got 6m)",
                  "test.yaml:4: defaults.recovery.ramp: must not be negative "
                  "(got \"-1s\")",
                  "test.yaml:4: defaults.recovery.start_share: must be "
                  "greater than 0 and at most 1 (got 0)",
                  "test.yaml:4: defaults.recovery.extra: unknown key (known: "
                  "ramp, start_share)",
                  "test.yaml:7: policies[0].inflight.hang: unknown key "
                  "(known: hang_after)",
                  "test.yaml:8: policies[0].recovery.ramp: must be 0s (off) or "
                  "between 1ms and 1h (got 2h)",
                  "test.yaml:8: policies[0].recovery.start_share: must be "
                  "greater than 0 and at most 1 (got 1.5)"));
}

TEST(RecoveryConfigTest, BadDefaultIsReportedOnceNotInEveryPolicy) {
  EXPECT_THAT(ErrorLines("defaults:\n"
                         "  inflight: { hang_after: 10m }\n"
                         "  recovery: { start_share: 2 }\n"
                         "policies:\n"
                         "  - match: a\n"
                         "  - match: b\n"
                         "    recovery: { ramp: 1m }\n"),
              ElementsAre(HasSubstr("test.yaml:2: defaults.inflight."),
                          HasSubstr("test.yaml:3: defaults.recovery.")));
}

// --- equality and reload ----------------------------------------------------

TEST(RecoveryConfigTest, PolicyDifferingOnlyInTheseKeysIsADifferentPolicy) {
  std::shared_ptr<const PolicySet> base =
      MustParse("policies:\n  - match: a\n");
  ASSERT_NE(base, nullptr);
  for (const char* keys :
       {"inflight: { hang_after: 1m }", "recovery: { ramp: 1m }",
        "recovery: { start_share: 0.5 }"}) {
    SCOPED_TRACE(keys);
    std::shared_ptr<const PolicySet> changed =
        MustParse(absl::StrCat("policies:\n  - match: a\n    ", keys, "\n"));
    ASSERT_NE(changed, nullptr);
    EXPECT_FALSE(*changed->policies[0] == *base->policies[0]);
  }
  // Writing the defaults out is the same policy.
  std::shared_ptr<const PolicySet> explicit_defaults = MustParse(
      "policies:\n  - match: a\n"
      "    inflight: { hang_after: 0s }\n"
      "    recovery: { ramp: 0s, start_share: 0.1 }\n");
  ASSERT_NE(explicit_defaults, nullptr);
  EXPECT_EQ(*explicit_defaults->policies[0], *base->policies[0]);
}

class RecoveryConfigReloadTest : public ConfigFileTest {};

TEST_F(RecoveryConfigReloadTest, ReloadChangingOnlyTheseKeysAppliesThem) {
  WriteConfig("policies:\n  - match: \"openai/*\"\n");
  absl::StatusOr<std::shared_ptr<const PolicySet>> initial =
      LoadConfigFile(path_);
  ASSERT_TRUE(initial.ok()) << initial.status();
  Registry registry(*initial, &clock_, /*permit_secret=*/42, &HalfUniform);
  ASSERT_TRUE(registry.Acquire("openai/key-1", /*attempt=*/0).ok());
  const std::shared_ptr<const Policy> old_policy =
      registry.policies()->Match("openai/key-1");
  ConfigReloader reloader(path_, &registry, nullptr, ReadConfigFile(path_));

  WriteConfig(
      "policies:\n  - match: \"openai/*\"\n"
      "    inflight: { hang_after: 45s }\n"
      "    recovery: { ramp: 2m, start_share: 0.3 }\n");
  ASSERT_TRUE(reloader.ReloadIfChanged().ok());
  EXPECT_EQ(reloader.successes(), 1u);

  const std::shared_ptr<const Policy> new_policy =
      registry.policies()->Match("openai/key-1");
  Policy expected = *old_policy;
  expected.inflight.hang_after = absl::Seconds(45);
  expected.recovery.ramp = absl::Minutes(2);
  expected.recovery.start_share = 0.3;
  EXPECT_EQ(*new_policy, expected);

  // A bad value is refused whole: the policy in force stays.
  WriteConfig(
      "policies:\n  - match: \"openai/*\"\n"
      "    recovery: { ramp: 2m, start_share: 0 }\n");
  EXPECT_FALSE(reloader.ReloadIfChanged().ok());
  EXPECT_EQ(reloader.failures(), 1u);
  EXPECT_EQ(*registry.policies()->Match("openai/key-1"), expected);
}

// --- documentation ----------------------------------------------------------

// The README's "every key with its default" block (section "Configuration")
// is a valid config that holds exactly the defaults.
TEST(RecoveryConfigTest, ReadmeConfigurationBlockHoldsTheNewKeysAtDefault) {
  std::ifstream in(std::string(BREAKERD_SOURCE_DIR) + "/README.md");
  ASSERT_TRUE(in.good());
  std::stringstream buffer;
  buffer << in.rdbuf();
  const std::string readme = buffer.str();
  const size_t section = readme.find("\n## Configuration\n");
  ASSERT_NE(section, std::string::npos);
  const size_t begin = readme.find("```yaml\n", section);
  ASSERT_NE(begin, std::string::npos);
  const size_t body = begin + std::string("```yaml\n").size();
  const size_t end = readme.find("```", body);
  ASSERT_NE(end, std::string::npos);
  const std::string block = readme.substr(body, end - body);
  EXPECT_THAT(block, HasSubstr("inflight:"));
  EXPECT_THAT(block, HasSubstr("recovery:"));

  std::shared_ptr<const PolicySet> set = MustParse(block);
  ASSERT_NE(set, nullptr);
  EXPECT_EQ(*set->defaults, *EmbeddedDefaults()->defaults);
}

}  // namespace
}  // namespace breakerd

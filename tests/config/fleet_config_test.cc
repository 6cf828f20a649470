// The per-policy `fleet:` keys (DESIGN.md, "Fleet mode"): share_window and
// quorum, parsed, inherited, validated and reloaded like every other policy
// key. The rest of the config module is in config_test.cc.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
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

TEST(FleetConfigTest, DefaultsShareTheWindowWithAQuorumOfTwo) {
  for (const std::shared_ptr<const PolicySet>& set :
       {EmbeddedDefaults(), MustParse(""), MustParse("defaults: {fleet: {}}\n"),
        MustParse("defaults:\n  fleet:\n")}) {
    ASSERT_NE(set, nullptr);
    EXPECT_TRUE(set->defaults->fleet.share_window);
    EXPECT_EQ(set->defaults->fleet.quorum, 2u);
    EXPECT_EQ(*set->defaults, Policy());
  }
}

TEST(FleetConfigTest, PolicyOverridesAndInheritsLeafByLeaf) {
  std::shared_ptr<const PolicySet> set = MustParse(R"(
defaults:
  fleet: { quorum: 3 }
policies:
  - match: "openai/*"
    fleet: { share_window: false }
  - match: "payments/*"
    fleet: { quorum: 1 }
  - match: "*"
)");
  ASSERT_NE(set, nullptr);
  EXPECT_TRUE(set->defaults->fleet.share_window);
  EXPECT_EQ(set->defaults->fleet.quorum, 3u);
  ASSERT_EQ(set->policies.size(), 3u);
  // share_window given, quorum inherited from defaults.
  EXPECT_FALSE(set->policies[0]->fleet.share_window);
  EXPECT_EQ(set->policies[0]->fleet.quorum, 3u);
  // quorum given, share_window inherited (the built-in default).
  EXPECT_TRUE(set->policies[1]->fleet.share_window);
  EXPECT_EQ(set->policies[1]->fleet.quorum, 1u);
  // Nothing given: all of it from defaults.
  EXPECT_TRUE(set->policies[2]->fleet.share_window);
  EXPECT_EQ(set->policies[2]->fleet.quorum, 3u);
}

TEST(FleetConfigTest, QuorumBoundsAreAccepted) {
  for (const char* quorum : {"1", "100"}) {
    SCOPED_TRACE(quorum);
    std::shared_ptr<const PolicySet> set =
        MustParse(absl::StrCat("defaults: {fleet: {quorum: ", quorum, "}}\n"));
    ASSERT_NE(set, nullptr);
    EXPECT_EQ(absl::StrCat(set->defaults->fleet.quorum), quorum);
  }
}

TEST(FleetConfigTest, ShareWindowTakesTheYamlBooleans) {
  for (const char* text : {"true", "True", "TRUE"}) {
    std::shared_ptr<const PolicySet> set = MustParse(
        absl::StrCat("defaults: {fleet: {share_window: false}}\n"
                     "policies:\n  - match: a\n    fleet: {share_window: ",
                     text, "}\n"));
    ASSERT_NE(set, nullptr) << text;
    EXPECT_TRUE(set->policies[0]->fleet.share_window) << text;
  }
  for (const char* text : {"false", "False", "FALSE"}) {
    std::shared_ptr<const PolicySet> set = MustParse(
        absl::StrCat("defaults: {fleet: {share_window: ", text, "}}\n"));
    ASSERT_NE(set, nullptr) << text;
    EXPECT_FALSE(set->defaults->fleet.share_window) << text;
  }
}

TEST(FleetConfigTest, QuorumOutOfRangeOrNotAnIntegerIsRefusedNamingTheKey) {
  EXPECT_THAT(ErrorLines("defaults:\n  fleet: {quorum: 0}\n"),
              ElementsAre("test.yaml:2: defaults.fleet.quorum: must be "
                          "between 1 and 100 (got 0)"));
  EXPECT_THAT(ErrorLines("defaults:\n  fleet:\n    quorum: 101\n"),
              ElementsAre("test.yaml:3: defaults.fleet.quorum: must be "
                          "between 1 and 100 (got 101)"));
  EXPECT_THAT(ErrorLines("defaults:\n  fleet: {quorum: two}\n"),
              ElementsAre("test.yaml:2: defaults.fleet.quorum: must be an "
                          "integer (got \"two\")"));
  EXPECT_THAT(ErrorLines("defaults:\n  fleet: {quorum: 1.5}\n"),
              ElementsAre(HasSubstr("defaults.fleet.quorum: must be an "
                                    "integer")));
}

TEST(FleetConfigTest, BadQuorumInAPolicyNamesThePolicyPath) {
  EXPECT_THAT(ErrorLines("policies:\n"
                         "  - match: a\n"
                         "  - match: b\n"
                         "    fleet: {quorum: 0}\n"
                         "  - match: c\n"
                         "    fleet: {quorum: 101}\n"
                         "  - match: d\n"
                         "    fleet: {quorum: two}\n"),
              ElementsAre("test.yaml:4: policies[1].fleet.quorum: must be "
                          "between 1 and 100 (got 0)",
                          "test.yaml:6: policies[2].fleet.quorum: must be "
                          "between 1 and 100 (got 101)",
                          "test.yaml:8: policies[3].fleet.quorum: must be an "
                          "integer (got \"two\")"));
}

TEST(FleetConfigTest, ShareWindowThatIsNotABooleanIsRefused) {
  EXPECT_THAT(ErrorLines("defaults:\n  fleet: {share_window: maybe}\n"),
              ElementsAre("test.yaml:2: defaults.fleet.share_window: must be "
                          "true or false (got \"maybe\")"));
  // YAML 1.1 spellings are not booleans here, nor are numbers.
  for (const char* text : {"yes", "no", "on", "off", "1", "0"}) {
    EXPECT_THAT(ErrorLines(absl::StrCat(
                    "policies:\n  - match: a\n    fleet: {share_window: ", text,
                    "}\n")),
                ElementsAre(absl::StrCat(
                    "test.yaml:3: policies[0].fleet.share_window: must be "
                    "true or false (got \"",
                    text, "\")")));
  }
  EXPECT_THAT(ErrorLines("defaults:\n  fleet: {share_window: [true]}\n"),
              ElementsAre(HasSubstr("test.yaml:2: defaults.fleet.share_window: "
                                    "must be true or false (got a list)")));
}

TEST(FleetConfigTest, UnknownKeyUnderFleetIsRefusedNamingItsPath) {
  EXPECT_THAT(ErrorLines("defaults:\n  fleet: {quorom: 2}\n"),
              ElementsAre("test.yaml:2: defaults.fleet.quorom: unknown key "
                          "(known: share_window, quorum)"));
  EXPECT_THAT(ErrorLines("policies:\n"
                         "  - match: a\n"
                         "    fleet:\n"
                         "      quorum: 3\n"
                         "      share: true\n"),
              ElementsAre("test.yaml:5: policies[0].fleet.share: unknown key "
                          "(known: share_window, quorum)"));
  EXPECT_THAT(ErrorLines("defaults:\n  fleet: 2\n"),
              ElementsAre(HasSubstr("test.yaml:2: defaults.fleet: must be a "
                                    "map with keys share_window, quorum")));
}

TEST(FleetConfigTest, EveryFleetErrorIsReportedWithTheOthers) {
  EXPECT_THAT(ErrorLines("defaults:\n"
                         "  mode: x\n"
                         "  fleet: {share_window: 2, quorum: 0, extra: 1}\n"
                         "policies:\n"
                         "  - match: a\n"
                         "    fleet: {quorum: 200}\n"),
              ElementsAre(HasSubstr("test.yaml:2: defaults.mode: "),
                          HasSubstr("test.yaml:3: defaults.fleet.share_window: "
                                    "must be true or false"),
                          HasSubstr("test.yaml:3: defaults.fleet.quorum: must "
                                    "be between 1 and 100"),
                          HasSubstr("test.yaml:3: defaults.fleet.extra: "
                                    "unknown key"),
                          HasSubstr("test.yaml:6: policies[0].fleet.quorum: "
                                    "must be between 1 and 100")));
}

TEST(FleetConfigTest, OnlyQuorumChangedIsADifferentPolicy) {
  std::shared_ptr<const PolicySet> before =
      MustParse("policies:\n  - match: a\n    fleet: {quorum: 2}\n");
  std::shared_ptr<const PolicySet> after =
      MustParse("policies:\n  - match: a\n    fleet: {quorum: 3}\n");
  ASSERT_NE(before, nullptr);
  ASSERT_NE(after, nullptr);
  EXPECT_FALSE(*after->policies[0] == *before->policies[0]);
  Policy expected = *before->policies[0];
  expected.fleet.quorum = 3;
  EXPECT_EQ(*after->policies[0], expected);

  std::shared_ptr<const PolicySet> unshared =
      MustParse("policies:\n  - match: a\n    fleet: {share_window: false}\n");
  ASSERT_NE(unshared, nullptr);
  EXPECT_FALSE(*unshared->policies[0] == *before->policies[0]);
}

// --- reload -----------------------------------------------------------------

class FleetConfigReloadTest : public ConfigFileTest {};

TEST_F(FleetConfigReloadTest, ReloadChangingOnlyQuorumAppliesTheNewPolicy) {
  WriteConfig("policies:\n  - match: \"openai/*\"\n    fleet: {quorum: 2}\n");
  absl::StatusOr<std::shared_ptr<const PolicySet>> initial =
      LoadConfigFile(path_);
  ASSERT_TRUE(initial.ok()) << initial.status();
  Registry registry(*initial, &clock_, /*permit_secret=*/42, &HalfUniform);
  ASSERT_TRUE(registry.Acquire("openai/key-1", /*attempt=*/0).ok());
  const std::shared_ptr<const Policy> old_policy =
      registry.policies()->Match("openai/key-1");
  std::vector<ReloadEvent> events;
  ConfigReloader reloader(
      path_, &registry,
      [&events](const ReloadEvent& e) { events.push_back(e); },
      ReadConfigFile(path_));

  WriteConfig("policies:\n  - match: \"openai/*\"\n    fleet: {quorum: 3}\n");
  ASSERT_TRUE(reloader.ReloadIfChanged().ok());
  ASSERT_EQ(events.size(), 1u);
  EXPECT_TRUE(events[0].ok);
  EXPECT_EQ(reloader.successes(), 1u);

  const std::shared_ptr<const Policy> new_policy =
      registry.policies()->Match("openai/key-1");
  EXPECT_EQ(new_policy->fleet.quorum, 3u);
  EXPECT_FALSE(*new_policy == *old_policy);
  Policy expected = *old_policy;
  expected.fleet.quorum = 3;
  EXPECT_EQ(*new_policy, expected);
}

}  // namespace
}  // namespace breakerd

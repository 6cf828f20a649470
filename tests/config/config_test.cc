#include "server/config/config.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <ostream>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/engine/clock.h"
#include "server/engine/outcome.h"
#include "server/engine/policy.h"
#include "server/engine/registry.h"
#include "server/engine/types.h"
#include "tests/config/config_file_fixture.h"

namespace breakerd {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::SizeIs;

// The message as a std::string, so that failed matchers print it as text.
std::string Msg(const absl::Status& status) {
  return std::string(status.message());
}

// --- parsing ----------------------------------------------------------------

TEST(ParseConfigTest, EmptyDocumentsGiveEmbeddedDefaults) {
  for (const char* yaml : {"", "\n", "# only a comment\n", "---\n", "{}",
                           "defaults:\n", "defaults:\npolicies:\nlimits:\n"}) {
    SCOPED_TRACE(yaml);
    std::shared_ptr<const PolicySet> set = MustParse(yaml);
    ASSERT_NE(set, nullptr);
    EXPECT_EQ(*set->defaults, Policy());
    EXPECT_EQ(set->defaults->match, "defaults");
    EXPECT_TRUE(set->policies.empty());
    EXPECT_EQ(set->limits.max_breakers, 10000u);
    EXPECT_EQ(set->limits.idle_ttl, absl::Minutes(10));
    EXPECT_EQ(set->source, kSource);
  }
}

TEST(ParseConfigTest, EmbeddedDefaultsAreTheDesignDefaults) {
  std::shared_ptr<const PolicySet> set = EmbeddedDefaults();
  ASSERT_NE(set, nullptr);
  EXPECT_EQ(set, EmbeddedDefaults());  // one shared object
  EXPECT_EQ(set->source, "embedded defaults");
  EXPECT_TRUE(set->policies.empty());
  const Policy& d = *set->defaults;
  EXPECT_EQ(d.match, "defaults");
  EXPECT_EQ(d.mode, Mode::kEnforce);
  EXPECT_EQ(d.consecutive_failures, 5u);
  EXPECT_EQ(d.failure_rate.threshold, 0.5);
  EXPECT_EQ(d.failure_rate.min_calls, 20u);
  EXPECT_EQ(d.failure_rate.window, absl::Seconds(30));
  EXPECT_EQ(d.slow_call_rate.threshold, 0);
  EXPECT_EQ(d.cooldown.base, absl::Seconds(30));
  EXPECT_EQ(d.cooldown.max, absl::Seconds(300));
  EXPECT_EQ(d.cooldown.jitter, 0.1);
  EXPECT_EQ(d.probe.lease, absl::Seconds(10));
  EXPECT_EQ(d.retry_budget.ttl, absl::Seconds(10));
  EXPECT_TRUE(d.fleet.share_window);
  EXPECT_EQ(d.fleet.quorum, 2u);
  EXPECT_TRUE(d.local_decisions);
  EXPECT_EQ(set->limits.max_breakers, 10000u);
  EXPECT_EQ(set->limits.max_chains, 100u);
}

TEST(ParseConfigTest, EveryKeyParses) {
  std::shared_ptr<const PolicySet> set = MustParse(R"(
defaults:
  mode: shadow
  consecutive_failures: 7
  failure_rate: { threshold: 0.25, min_calls: 40, window: 1m }
  slow_call_rate: { threshold: 0.75, min_calls: 15, duration: 2500ms }
  cooldown: { base: 5s, max: 10m, jitter: 0.2 }
  probe: { lease: 3s, required_successes: 3 }
  rate_limited: ignore
  retry_budget: { ratio: 0.5, min_per_second: 2.5, ttl: 20s }
  fleet: { share_window: false, quorum: 3 }
  local_decisions: false
policies:
  - match: "openai/*"
    mode: enforce
    local_decisions: true
    consecutive_failures: 0
    failure_rate: { threshold: 0, min_calls: 1, window: 1h }
    slow_call_rate: { threshold: 1, min_calls: 1000000, duration: 500us }
    cooldown: { base: 1ms, max: 24h, jitter: 0 }
    probe: { lease: 1h, required_successes: 1000 }
    rate_limited: count
    retry_budget: { ratio: 1000, min_per_second: 0, ttl: 1s }
    fleet: { share_window: true, quorum: 100 }
limits: { max_breakers: 123, idle_ttl: 1h }
)");
  ASSERT_NE(set, nullptr);

  const Policy& d = *set->defaults;
  EXPECT_EQ(d.match, "defaults");
  EXPECT_EQ(d.mode, Mode::kShadow);
  EXPECT_FALSE(d.local_decisions);
  EXPECT_TRUE(set->policies[0]->local_decisions);
  EXPECT_EQ(d.consecutive_failures, 7u);
  EXPECT_EQ(d.failure_rate.threshold, 0.25);
  EXPECT_EQ(d.failure_rate.min_calls, 40u);
  EXPECT_EQ(d.failure_rate.window, absl::Minutes(1));
  EXPECT_EQ(d.slow_call_rate.threshold, 0.75);
  EXPECT_EQ(d.slow_call_rate.min_calls, 15u);
  EXPECT_EQ(d.slow_call_rate.duration, absl::Milliseconds(2500));
  EXPECT_EQ(d.cooldown.base, absl::Seconds(5));
  EXPECT_EQ(d.cooldown.max, absl::Minutes(10));
  EXPECT_EQ(d.cooldown.jitter, 0.2);
  EXPECT_EQ(d.probe.lease, absl::Seconds(3));
  EXPECT_EQ(d.probe.required_successes, 3u);
  EXPECT_EQ(d.rate_limited, RateLimitedHandling::kIgnore);
  EXPECT_EQ(d.retry_budget.ratio, 0.5);
  EXPECT_EQ(d.retry_budget.min_per_second, 2.5);
  EXPECT_EQ(d.retry_budget.ttl, absl::Seconds(20));
  EXPECT_FALSE(d.fleet.share_window);
  EXPECT_EQ(d.fleet.quorum, 3u);

  ASSERT_EQ(set->policies.size(), 1u);
  const Policy& p = *set->policies[0];
  EXPECT_EQ(p.match, "openai/*");
  EXPECT_EQ(p.mode, Mode::kEnforce);
  EXPECT_EQ(p.consecutive_failures, 0u);
  EXPECT_EQ(p.failure_rate.threshold, 0);
  EXPECT_EQ(p.failure_rate.min_calls, 1u);
  EXPECT_EQ(p.failure_rate.window, absl::Hours(1));
  EXPECT_EQ(p.slow_call_rate.threshold, 1);
  EXPECT_EQ(p.slow_call_rate.min_calls, 1000000u);
  EXPECT_EQ(p.slow_call_rate.duration, absl::Microseconds(500));
  EXPECT_EQ(p.cooldown.base, absl::Milliseconds(1));
  EXPECT_EQ(p.cooldown.max, absl::Hours(24));
  EXPECT_EQ(p.cooldown.jitter, 0);
  EXPECT_EQ(p.probe.lease, absl::Hours(1));
  EXPECT_EQ(p.probe.required_successes, 1000u);
  EXPECT_EQ(p.rate_limited, RateLimitedHandling::kCount);
  EXPECT_EQ(p.retry_budget.ratio, 1000);
  EXPECT_EQ(p.retry_budget.min_per_second, 0);
  EXPECT_EQ(p.retry_budget.ttl, absl::Seconds(1));
  EXPECT_TRUE(p.fleet.share_window);
  EXPECT_EQ(p.fleet.quorum, 100u);

  EXPECT_EQ(set->limits.max_breakers, 123u);
  EXPECT_EQ(set->limits.idle_ttl, absl::Hours(1));
  EXPECT_EQ(set->source, kSource);
}

TEST(ParseConfigTest, PolicyInheritsParsedDefaultsLeafByLeaf) {
  std::shared_ptr<const PolicySet> set = MustParse(R"(
defaults:
  consecutive_failures: 9
  failure_rate: { threshold: 0.3, min_calls: 50, window: 1m }
  cooldown: { base: 10s }
policies:
  - match: "openai/*"
    failure_rate: { threshold: 0.9 }
    cooldown: { jitter: 0 }
)");
  ASSERT_NE(set, nullptr);
  ASSERT_EQ(set->policies.size(), 1u);

  Policy expected_defaults;
  expected_defaults.consecutive_failures = 9;
  expected_defaults.failure_rate = {0.3, 50, absl::Minutes(1)};
  expected_defaults.cooldown.base = absl::Seconds(10);
  EXPECT_EQ(*set->defaults, expected_defaults);

  // Everything the policy leaves out comes from the parsed defaults (not the
  // built-in ones), one leaf at a time.
  Policy expected = expected_defaults;
  expected.match = "openai/*";
  expected.failure_rate.threshold = 0.9;
  expected.cooldown.jitter = 0;
  EXPECT_EQ(*set->policies[0], expected);
  EXPECT_EQ(set->policies[0]->failure_rate.min_calls, 50u);
  EXPECT_EQ(set->policies[0]->failure_rate.window, absl::Minutes(1));
  EXPECT_EQ(set->policies[0]->cooldown.max, absl::Seconds(300));
}

TEST(ParseConfigTest, DefaultsApplyToPoliciesWhateverTheKeyOrder) {
  // `policies` written before `defaults` still inherits from them.
  std::shared_ptr<const PolicySet> set = MustParse(R"(
policies:
  - match: a
defaults:
  consecutive_failures: 11
)");
  ASSERT_NE(set, nullptr);
  ASSERT_EQ(set->policies.size(), 1u);
  EXPECT_EQ(set->policies[0]->consecutive_failures, 11u);
}

TEST(ParseConfigTest, PoliciesKeepFileOrderSoFirstMatchWins) {
  std::shared_ptr<const PolicySet> set = MustParse(R"(
policies:
  - match: "openai/gpt-4"
    consecutive_failures: 1
  - match: "openai/*"
    consecutive_failures: 2
  - match: "*"
    consecutive_failures: 3
)");
  ASSERT_NE(set, nullptr);
  ASSERT_EQ(set->policies.size(), 3u);
  EXPECT_EQ(set->policies[0]->match, "openai/gpt-4");
  EXPECT_EQ(set->policies[1]->match, "openai/*");
  EXPECT_EQ(set->policies[2]->match, "*");
  EXPECT_EQ(set->Match("openai/gpt-4")->consecutive_failures, 1u);
  EXPECT_EQ(set->Match("openai/o1")->consecutive_failures, 2u);
  EXPECT_EQ(set->Match("stripe/prod")->consecutive_failures, 3u);

  // Reversed, the catch-all shadows everything after it.
  set = MustParse(R"(
policies:
  - match: "*"
    consecutive_failures: 3
  - match: "openai/*"
    consecutive_failures: 2
)");
  ASSERT_NE(set, nullptr);
  EXPECT_EQ(set->Match("openai/o1")->match, "*");
}

TEST(ParseConfigTest, ExampleFileIsEmbeddedDefaultsPlusItsPolicies) {
  const std::string path =
      std::string(BREAKERD_SOURCE_DIR) + "/deploy/config/breakerd.yaml";
  absl::StatusOr<std::shared_ptr<const PolicySet>> set = LoadConfigFile(path);
  ASSERT_TRUE(set.ok()) << set.status();
  const PolicySet& example = **set;
  const PolicySet& embedded = *EmbeddedDefaults();

  EXPECT_EQ(example.source, path);
  EXPECT_EQ(*example.defaults, *embedded.defaults);
  EXPECT_EQ(example.limits.max_breakers, embedded.limits.max_breakers);
  EXPECT_EQ(example.limits.idle_ttl, embedded.limits.idle_ttl);

  ASSERT_EQ(example.policies.size(), 2u);
  Policy openai = *embedded.defaults;
  openai.match = "openai/*";
  EXPECT_EQ(*example.policies[0], openai);
  Policy payments = *embedded.defaults;
  payments.match = "payments/*";
  payments.mode = Mode::kShadow;
  payments.consecutive_failures = 3;
  payments.cooldown.base = absl::Seconds(5);
  EXPECT_EQ(*example.policies[1], payments);
}

// --- durations --------------------------------------------------------------

struct DurationCase {
  const char* text;
  absl::Duration want;
};
// Keeps test names readable in ctest (no raw parameter bytes).
void PrintTo(const DurationCase& c, std::ostream* os) { *os << c.text; }

class DurationTest : public ::testing::TestWithParam<DurationCase> {};

TEST_P(DurationTest, ParsesWithUnit) {
  const DurationCase& c = GetParam();
  std::shared_ptr<const PolicySet> set = MustParse(
      absl::StrCat("defaults:\n  slow_call_rate:\n    duration: ", c.text));
  ASSERT_NE(set, nullptr);
  EXPECT_EQ(set->defaults->slow_call_rate.duration, c.want) << c.text;
}

INSTANTIATE_TEST_SUITE_P(
    Units, DurationTest,
    ::testing::Values(DurationCase{"250ms", absl::Milliseconds(250)},
                      DurationCase{"30s", absl::Seconds(30)},
                      DurationCase{"10m", absl::Minutes(10)},
                      DurationCase{"1h", absl::Hours(1)},
                      DurationCase{"1.5s", absl::Milliseconds(1500)},
                      DurationCase{"500us", absl::Microseconds(500)},
                      DurationCase{"100ns", absl::Nanoseconds(100)},
                      DurationCase{"1m30s", absl::Seconds(90)},
                      DurationCase{"\"45s\"", absl::Seconds(45)}));

TEST(ParseConfigTest, BadDurationsAreRefusedNamingTheKey) {
  struct Bad {
    const char* text;
    const char* rule;
  };
  for (const Bad& bad : {
           Bad{"30", "needs a unit"},
           Bad{"0", "needs a unit"},
           Bad{"1.5", "needs a unit"},
           Bad{"-5s", "must not be negative"},
           Bad{"-1", "must not be negative"},
           Bad{"abc", "must be a duration with a unit"},
           Bad{"1d", "must be a duration with a unit"},
           Bad{"inf", "must be a duration with a unit"},
           Bad{"30 s", "must be a duration with a unit"},
           Bad{"[30s]", "must be a duration with a unit"},
       }) {
    SCOPED_TRACE(bad.text);
    absl::StatusOr<std::shared_ptr<const PolicySet>> set = ParseConfig(
        absl::StrCat("defaults:\n  failure_rate:\n    window: ", bad.text),
        kSource);
    ASSERT_FALSE(set.ok());
    EXPECT_EQ(set.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(Msg(set.status()),
                HasSubstr("test.yaml:3: defaults.failure_rate.window: "));
    EXPECT_THAT(Msg(set.status()), HasSubstr(bad.rule));
  }
}

// --- invalid configurations -------------------------------------------------

struct InvalidCase {
  const char* name;
  const char* yaml;
  int line;          // 1-based line the message names
  const char* path;  // full key path
  const char* rule;  // a distinctive part of the rule
};
void PrintTo(const InvalidCase& c, std::ostream* os) { *os << c.name; }

class InvalidConfigTest : public ::testing::TestWithParam<InvalidCase> {};

TEST_P(InvalidConfigTest, IsRefusedNamingFileLineKeyAndRule) {
  const InvalidCase& c = GetParam();
  absl::StatusOr<std::shared_ptr<const PolicySet>> set =
      ParseConfig(c.yaml, kSource);
  ASSERT_FALSE(set.ok()) << c.yaml;
  EXPECT_EQ(set.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(set.status()), HasSubstr(absl::StrCat("test.yaml:", c.line,
                                                        ": ", c.path, ": ")));
  EXPECT_THAT(Msg(set.status()), HasSubstr(c.rule));
  // Each case holds one problem: reported once, on one line.
  EXPECT_THAT(ConfigErrorLines(set.status()), SizeIs(1)) << Msg(set.status());
}

const InvalidCase kInvalidCases[] = {
    // mode, rate_limited
    {"ModeUnknown", "defaults:\n  mode: enforced\n", 2, "defaults.mode",
     "must be one of enforce, shadow (got \"enforced\")"},
    {"ModeList", "defaults:\n  mode: [enforce]\n", 2, "defaults.mode",
     "must be one of enforce, shadow (got a list)"},
    {"RateLimitedUnknown", "defaults:\n  rate_limited: drop\n", 2,
     "defaults.rate_limited", "must be one of count, ignore"},
    // consecutive_failures
    {"ConsecutiveNegative", "defaults:\n  consecutive_failures: -1\n", 2,
     "defaults.consecutive_failures", "must be between 0 and 1000000 (got -1)"},
    {"ConsecutiveTooLarge", "defaults:\n  consecutive_failures: 1000001\n", 2,
     "defaults.consecutive_failures", "must be between 0 and 1000000"},
    {"ConsecutiveNotAnInt", "defaults:\n  consecutive_failures: abc\n", 2,
     "defaults.consecutive_failures", "must be an integer (got \"abc\")"},
    {"ConsecutiveFraction", "defaults:\n  consecutive_failures: 2.5\n", 2,
     "defaults.consecutive_failures", "must be an integer (got \"2.5\")"},
    {"ConsecutiveMap", "defaults:\n  consecutive_failures: {a: 1}\n", 2,
     "defaults.consecutive_failures", "must be an integer (got a map)"},
    {"ConsecutiveEmpty", "defaults:\n  consecutive_failures:\n", 2,
     "defaults.consecutive_failures", "must be an integer (got nothing)"},
    // failure_rate
    {"FailureThresholdAboveOne",
     "policies:\n  - match: a\n    failure_rate:\n      threshold: 1.5\n", 4,
     "policies[0].failure_rate.threshold", "must be between 0 and 1 (got 1.5)"},
    {"FailureThresholdNegative",
     "defaults:\n  failure_rate: {threshold: -0.1}\n", 2,
     "defaults.failure_rate.threshold", "must be between 0 and 1"},
    {"FailureThresholdText", "defaults:\n  failure_rate: {threshold: high}\n",
     2, "defaults.failure_rate.threshold", "must be a number (got \"high\")"},
    {"FailureThresholdNan", "defaults:\n  failure_rate: {threshold: nan}\n", 2,
     "defaults.failure_rate.threshold", "must be a number"},
    {"FailureMinCallsZero", "defaults:\n  failure_rate: {min_calls: 0}\n", 2,
     "defaults.failure_rate.min_calls", "must be between 1 and 1000000"},
    {"FailureWindowTooShort", "defaults:\n  failure_rate: {window: 500ms}\n", 2,
     "defaults.failure_rate.window", "must be between 1s and 1h (got 500ms)"},
    {"FailureWindowTooLong", "defaults:\n  failure_rate: {window: 2h}\n", 2,
     "defaults.failure_rate.window", "must be between 1s and 1h"},
    {"FailureRateNotAMap", "defaults:\n  failure_rate: 0.5\n", 2,
     "defaults.failure_rate",
     "must be a map with keys threshold, min_calls, window"},
    // slow_call_rate
    {"SlowThresholdAboveOne", "defaults:\n  slow_call_rate: {threshold: 2}\n",
     2, "defaults.slow_call_rate.threshold", "must be between 0 and 1"},
    {"SlowMinCallsTooLarge",
     "defaults:\n  slow_call_rate: {min_calls: 1000001}\n", 2,
     "defaults.slow_call_rate.min_calls", "must be between 1 and 1000000"},
    {"SlowDurationZero", "defaults:\n  slow_call_rate: {duration: 0s}\n", 2,
     "defaults.slow_call_rate.duration",
     "must be greater than 0 and at most 1h"},
    {"SlowDurationTooLong", "defaults:\n  slow_call_rate: {duration: 61m}\n", 2,
     "defaults.slow_call_rate.duration",
     "must be greater than 0 and at most 1h (got 61m)"},
    // cooldown
    {"CooldownBaseZero", "defaults:\n  cooldown: {base: 0s}\n", 2,
     "defaults.cooldown.base", "must be between 1ms and 24h"},
    {"CooldownBaseTooLong", "defaults:\n  cooldown: {base: 25h}\n", 2,
     "defaults.cooldown.base", "must be between 1ms and 24h"},
    {"CooldownMaxTooLong", "defaults:\n  cooldown: {max: 25h}\n", 2,
     "defaults.cooldown.max", "must be between 1ms and 24h"},
    {"CooldownMaxBelowBase",
     "defaults:\n  cooldown:\n    base: 30s\n    max: 10s\n", 4,
     "defaults.cooldown.max", "must be at least cooldown.base (got 10s"},
    {"PolicyBaseAboveInheritedMax",
     "policies:\n  - match: a\n    cooldown:\n      base: 10m\n", 4,
     "policies[0].cooldown.base", "must be at most cooldown.max (got 10m"},
    {"CooldownJitterOne", "defaults:\n  cooldown: {jitter: 1}\n", 2,
     "defaults.cooldown.jitter", "must be at least 0 and less than 1 (got 1)"},
    {"CooldownJitterNegative", "defaults:\n  cooldown: {jitter: -0.1}\n", 2,
     "defaults.cooldown.jitter", "must be at least 0 and less than 1"},
    // probe
    {"ProbeLeaseZero", "defaults:\n  probe: {lease: 0s}\n", 2,
     "defaults.probe.lease", "must be between 1ms and 1h"},
    {"ProbeLeaseTooLong", "defaults:\n  probe: {lease: 2h}\n", 2,
     "defaults.probe.lease", "must be between 1ms and 1h"},
    {"ProbeSuccessesZero", "defaults:\n  probe: {required_successes: 0}\n", 2,
     "defaults.probe.required_successes", "must be between 1 and 1000"},
    {"ProbeSuccessesTooMany",
     "defaults:\n  probe: {required_successes: 1001}\n", 2,
     "defaults.probe.required_successes", "must be between 1 and 1000"},
    // retry_budget
    {"BudgetRatioTooLarge", "defaults:\n  retry_budget: {ratio: 1001}\n", 2,
     "defaults.retry_budget.ratio", "must be between 0 and 1000"},
    {"BudgetRatioNegative", "defaults:\n  retry_budget: {ratio: -1}\n", 2,
     "defaults.retry_budget.ratio", "must be between 0 and 1000"},
    {"BudgetMinPerSecondTooLarge",
     "defaults:\n  retry_budget: {min_per_second: 2000000}\n", 2,
     "defaults.retry_budget.min_per_second", "must be between 0 and 1000000"},
    {"BudgetTtlTooShort", "defaults:\n  retry_budget: {ttl: 500ms}\n", 2,
     "defaults.retry_budget.ttl", "must be between 1s and 1h"},
    {"BudgetTtlTooLong", "defaults:\n  retry_budget: {ttl: 2h}\n", 2,
     "defaults.retry_budget.ttl", "must be between 1s and 1h"},
    // limits
    {"MaxBreakersZero", "limits:\n  max_breakers: 0\n", 2,
     "limits.max_breakers", "must be between 1 and 10000000"},
    {"MaxBreakersTooMany", "limits:\n  max_breakers: 10000001\n", 2,
     "limits.max_breakers", "must be between 1 and 10000000"},
    {"IdleTtlTooShort", "limits:\n  idle_ttl: 0s\n", 2, "limits.idle_ttl",
     "must be between 1s and 720h"},
    {"IdleTtlTooLong", "limits:\n  idle_ttl: 721h\n", 2, "limits.idle_ttl",
     "must be between 1s and 720h"},
    {"IdleTtlBare", "limits:\n  idle_ttl: 600\n", 2, "limits.idle_ttl",
     "needs a unit"},
    // unknown and duplicate keys
    {"UnknownTopLevelKey", "defaults: {}\npolices: []\n", 2, "polices",
     "unknown key (known: defaults, policies, limits)"},
    {"UnknownDefaultsKey", "defaults:\n  mode: shadow\n  cooldwn: {}\n", 3,
     "defaults.cooldwn",
     "unknown key (known: mode, consecutive_failures, failure_rate, "
     "slow_call_rate, cooldown, probe, rate_limited, retry_budget, inflight, "
     "recovery, fleet, local_decisions)"},
    {"UnknownCooldownKey", "defaults:\n  cooldown:\n    jiter: 0.1\n", 3,
     "defaults.cooldown.jiter", "unknown key (known: base, max, jitter)"},
    {"UnknownPolicyProbeKey",
     "policies:\n  - match: a\n  - match: b\n    probe: {leese: 1s}\n", 4,
     "policies[1].probe.leese",
     "unknown key (known: lease, required_successes)"},
    {"UnknownLimitsKey", "limits:\n  max_breaker: 5\n", 2, "limits.max_breaker",
     "unknown key (known: max_breakers, idle_ttl, max_chains)"},
    {"MatchInDefaults", "defaults:\n  match: \"*\"\n", 2, "defaults.match",
     "unknown key"},
    {"DuplicateKey", "defaults:\n  mode: shadow\n  mode: enforce\n", 3,
     "defaults.mode", "duplicate key (first given on line 2)"},
    // shapes
    {"TopLevelList", "- defaults\n- policies\n", 1, "(top level)",
     "must be a map with keys defaults, policies, limits (got a list)"},
    {"TopLevelScalar", "garbage\n", 1, "(top level)", "must be a map"},
    {"DefaultsList", "defaults:\n  - mode: shadow\n", 1, "defaults",
     "must be a map with keys mode,"},
    {"PoliciesMap", "policies:\n  match: a\n", 1, "policies",
     "must be a list of policies"},
    {"PolicyScalar", "policies:\n  - openai/*\n", 2, "policies[0]",
     "must be a map with keys match,"},
    // The line of the "---" that starts the second document.
    {"SecondDocument", "defaults: {}\n---\nlimits: {}\n", 2, "(top level)",
     "must be a single YAML document (found 2)"},
    // match
    {"MatchMissing", "policies:\n  - match: a\n  - mode: shadow\n", 3,
     "policies[1].match", "required"},
    {"MatchEmpty", "policies:\n  - match: \"\"\n", 2, "policies[0].match",
     "must be 1-200 bytes of [A-Za-z0-9._:/@-] and '*' (got \"\")"},
    {"MatchWithSpace", "policies:\n  - match: open ai/*\n", 2,
     "policies[0].match", "must be 1-200 bytes"},
    {"MatchNull", "policies:\n  - match:\n", 2, "policies[0].match",
     "(got nothing)"},
    {"MatchList", "policies:\n  - match: [a, b]\n", 2, "policies[0].match",
     "(got a list)"},
    {"MatchDuplicate",
     "policies:\n  - match: \"openai/*\"\n  - match: b\n  - match: "
     "\"openai/*\"\n",
     4, "policies[2].match", "duplicate of policies[0].match (\"openai/*\")"},
};

INSTANTIATE_TEST_SUITE_P(Cases, InvalidConfigTest,
                         ::testing::ValuesIn(kInvalidCases),
                         [](const ::testing::TestParamInfo<InvalidCase>& info) {
                           return std::string(info.param.name);
                         });

TEST(ParseConfigTest, MatchLongerThan200BytesIsRefused) {
  const std::string ok(200, 'a');
  EXPECT_TRUE(
      ParseConfig(absl::StrCat("policies:\n  - match: ", ok), kSource).ok());
  absl::StatusOr<std::shared_ptr<const PolicySet>> set =
      ParseConfig(absl::StrCat("policies:\n  - match: ", ok, "a"), kSource);
  ASSERT_FALSE(set.ok());
  EXPECT_THAT(Msg(set.status()),
              HasSubstr("test.yaml:2: policies[0].match: must be 1-200 bytes"));
}

TEST(ParseConfigTest, SyntaxErrorNamesFileAndLine) {
  absl::StatusOr<std::shared_ptr<const PolicySet>> set =
      ParseConfig("defaults:\n  mode: shadow\nlimits: a: b\n", kSource);
  ASSERT_FALSE(set.ok());
  EXPECT_EQ(set.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(set.status()), HasSubstr("test.yaml:3: invalid YAML"));

  set = ParseConfig("defaults:\n  failure_rate: {threshold: 0.5\n", kSource);
  ASSERT_FALSE(set.ok());
  EXPECT_THAT(Msg(set.status()), HasSubstr("test.yaml:"));
  EXPECT_THAT(Msg(set.status()), HasSubstr("invalid YAML"));
}

// yaml-cpp 0.7.0's LoadAll never returns on these (jbeder/yaml-cpp#1040);
// before ParseConfig stopped using it, this test hung until ctest's timeout
// and grew without bound (inputs found by fuzz/config_fuzz, kept in
// fuzz/crashes/config_fuzz). A config edited into such a file must be
// refused like any other syntax error.
TEST(ParseConfigTest, StreamsThatStallYamlCppAreRefusedNotHung) {
  const struct {
    const char* yaml;
    const char* message;
  } cases[] = {
      {",", "test.yaml:1: invalid YAML at column 1: unexpected ','"},
      {",:", "test.yaml:1: invalid YAML at column 1: unexpected ','"},
      {"defaults: {}\n---\n,\n",
       "test.yaml:3: invalid YAML at column 1: unexpected ','"},
  };
  for (const auto& c : cases) {
    absl::StatusOr<std::shared_ptr<const PolicySet>> set =
        ParseConfig(c.yaml, kSource);
    ASSERT_FALSE(set.ok()) << c.yaml;
    EXPECT_EQ(set.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(Msg(set.status()), HasSubstr(c.message)) << c.yaml;
  }
  // Documents that do make progress are still counted.
  absl::StatusOr<std::shared_ptr<const PolicySet>> set =
      ParseConfig("---\n---\n---\n", kSource);
  ASSERT_FALSE(set.ok());
  EXPECT_THAT(Msg(set.status()),
              HasSubstr("must be a single YAML document (found 3)"));
}

TEST(ParseConfigTest, ErrorWithoutPositionStillNamesSource) {
  // An unclosed flow sequence at the very end: yaml-cpp reports the end of
  // input; the message must still name the file.
  absl::StatusOr<std::shared_ptr<const PolicySet>> set =
      ParseConfig("policies: [", "/etc/breakerd/config.yaml");
  ASSERT_FALSE(set.ok());
  EXPECT_THAT(Msg(set.status()), HasSubstr("/etc/breakerd/config.yaml"));
}

// --- every error reported
// -----------------------------------------------------

TEST(ParseConfigErrorsTest, EveryErrorIsReportedInFileOrder) {
  // limits comes first in the file but is parsed last; defaults are parsed
  // before the policies wherever they are written.
  const std::vector<std::string> lines = ErrorLines(R"(
limits: { max_breakers: 0 }
policies:
  - match: a
    failure_rate: { threshold: 1.5 }
  - match: b
    probe: { lease: 30 }
defaults:
  mode: enforced
)");
  EXPECT_THAT(
      lines,
      ElementsAre(
          "test.yaml:2: limits.max_breakers: must be between 1 and 10000000 "
          "(got 0)",
          "test.yaml:5: policies[0].failure_rate.threshold: must be between 0 "
          "and 1 (got 1.5)",
          "test.yaml:7: policies[1].probe.lease: needs a unit, such as 250ms, "
          "30s or 10m (units: ns, us, ms, s, m, h) (got \"30\")",
          "test.yaml:9: defaults.mode: must be one of enforce, shadow (got "
          "\"enforced\")"));
}

TEST(ParseConfigErrorsTest, UnknownKeyAndBadValueInTheSameMapAreBothReported) {
  EXPECT_THAT(ErrorLines("defaults:\n"
                         "  cooldown:\n"
                         "    jiter: 0.1\n"
                         "    base: 0s\n"),
              ElementsAre("test.yaml:3: defaults.cooldown.jiter: unknown key "
                          "(known: base, max, jitter)",
                          "test.yaml:4: defaults.cooldown.base: must be "
                          "between 1ms and 24h (got 0s)"));
  // On one line (a flow map): in column order.
  EXPECT_THAT(
      ErrorLines("defaults: {retry_budget: {ttl: 0s, ratio: -1, rati: 1}}\n"),
      ElementsAre(HasSubstr("defaults.retry_budget.ttl: must be between"),
                  HasSubstr("defaults.retry_budget.ratio: must be between"),
                  HasSubstr("defaults.retry_budget.rati: unknown key")));
}

TEST(ParseConfigErrorsTest, SingleErrorMessageIsUnchanged) {
  absl::StatusOr<std::shared_ptr<const PolicySet>> set = ParseConfig(
      "policies:\n  - match: a\n    failure_rate:\n      threshold: 1.5\n",
      kSource);
  ASSERT_FALSE(set.ok());
  EXPECT_EQ(set.status(),
            absl::InvalidArgumentError(
                "test.yaml:4: policies[0].failure_rate.threshold: must be "
                "between 0 and 1 (got 1.5)"));
}

TEST(ParseConfigErrorsTest, ValidConfigHasNoErrorLines) {
  absl::StatusOr<std::shared_ptr<const PolicySet>> set =
      ParseConfig("defaults: {mode: shadow}\n", kSource);
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_THAT(ConfigErrorLines(set.status()), IsEmpty());
}

TEST(ParseConfigErrorsTest, ListIsCappedWithACountOfTheRest) {
  std::string yaml = "policies:\n";
  const size_t policies = kMaxConfigErrors + 20;
  for (size_t i = 0; i < policies; ++i) {
    absl::StrAppend(&yaml, "  - match: \"p", i, "\"\n    bogus: 1\n");
  }
  const std::vector<std::string> lines = ErrorLines(yaml);
  ASSERT_THAT(lines, SizeIs(kMaxConfigErrors + 1));
  EXPECT_THAT(lines.front(), HasSubstr("policies[0].bogus: unknown key"));
  EXPECT_EQ(lines.back(),
            absl::StrCat("test.yaml: 20 more errors not shown (fix the first ",
                         kMaxConfigErrors, ")"));
}

TEST(ParseConfigErrorsTest, NoLineIsReportedTwice) {
  const std::vector<std::string> lines = ErrorLines(R"(
defaults:
  mode: [x]
  mode: y
  cooldown: { base: 10m, max: 1ms, jitter: 2 }
  probe: 3
policies:
  - match: "a b"
    mode: z
  - match: ok
    cooldown: { max: abc }
  - 7
  - mode: shadow
  - match: ok
    retry_budget: { ttl: 1d }
limits: { idle_ttl: 5, max_breakers: x, nope: 1 }
bogus: 1
)");
  EXPECT_EQ(std::set<std::string>(lines.begin(), lines.end()).size(),
            lines.size());
  EXPECT_THAT(lines, SizeIs(16));
  int previous_line = 0;
  for (const std::string& line : lines) {
    SCOPED_TRACE(line);
    ASSERT_THAT(line, ::testing::StartsWith("test.yaml:"));
    const int n = std::stoi(line.substr(std::string("test.yaml:").size()));
    EXPECT_GE(n, previous_line);
    previous_line = n;
  }
}

TEST(ParseConfigErrorsTest,
     KeyWithBadValueIsNotReportedAgainByTheCooldownRule) {
  // max is refused on its own: no second "base must be at most max".
  EXPECT_THAT(ErrorLines("defaults:\n  cooldown: {base: 10m, max: 25h}\n"),
              ElementsAre(HasSubstr("defaults.cooldown.max: must be between "
                                    "1ms and 24h (got 25h)")));
}

TEST(ParseConfigErrorsTest, BadDefaultsAreNotReportedAgainInEveryPolicy) {
  // The defaults' base conflicts with the built-in max: reported once, not
  // in the policies that inherit the pair.
  EXPECT_THAT(ErrorLines("defaults:\n"
                         "  cooldown: {base: 10m}\n"
                         "policies:\n"
                         "  - match: a\n"
                         "  - match: b\n"
                         "    cooldown: {jitter: 0}\n"),
              ElementsAre("test.yaml:2: defaults.cooldown.base: must be at "
                          "most cooldown.max (got 10m, max 5m)"));
  // The defaults' max is refused: a policy's base is not checked against a
  // max the file did not mean.
  EXPECT_THAT(ErrorLines("defaults:\n"
                         "  cooldown: {max: abc}\n"
                         "policies:\n"
                         "  - match: a\n"
                         "    cooldown: {base: 10m}\n"),
              ElementsAre(HasSubstr("test.yaml:2: defaults.cooldown.max: ")));
  // The whole defaults block is of the wrong shape: one error.
  EXPECT_THAT(ErrorLines("defaults: [shadow]\n"
                         "policies:\n"
                         "  - match: a\n"
                         "    cooldown: {max: 1s}\n"),
              ElementsAre(HasSubstr("test.yaml:1: defaults: must be a map")));
}

TEST(ParseConfigErrorsTest, ConflictWithAValidInheritedKeyIsStillReported) {
  // The defaults' base (10m) is a valid duration, in conflict with the
  // built-in max; the policy's max is a second, distinct conflict with it.
  EXPECT_THAT(ErrorLines("defaults:\n"
                         "  cooldown: {base: 10m}\n"
                         "policies:\n"
                         "  - match: a\n"
                         "    cooldown: {max: 1m}\n"
                         "  - match: b\n"
                         "    cooldown: {max: 1h}\n"),
              ElementsAre(HasSubstr("test.yaml:2: defaults.cooldown.base: "
                                    "must be at most cooldown.max"),
                          "test.yaml:5: policies[0].cooldown.max: must be at "
                          "least cooldown.base (got 1m, base 10m)"));
}

TEST(ParseConfigErrorsTest, PolicyOfTheWrongShapeIsOneError) {
  // Not "must be a map" and then "match: required".
  EXPECT_THAT(
      ErrorLines("policies:\n  - openai/*\n  - match: b\n    mode: x\n"),
      ElementsAre(HasSubstr("test.yaml:2: policies[0]: must be a map"),
                  HasSubstr("test.yaml:4: policies[1].mode: ")));
}

TEST(ParseConfigErrorsTest, PolicyWithBadMatchStillHasItsOtherKeysChecked) {
  EXPECT_THAT(ErrorLines("policies:\n"
                         "  - match: \"a b\"\n"
                         "    consecutive_failures: -1\n"
                         "  - consecutive_failures: 2\n"
                         "    probe: {required_successes: 0}\n"),
              ElementsAre(HasSubstr("test.yaml:2: policies[0].match: "),
                          HasSubstr("test.yaml:3: "
                                    "policies[0].consecutive_failures: "),
                          HasSubstr("test.yaml:4: policies[1].match: required"),
                          HasSubstr("test.yaml:5: "
                                    "policies[1].probe.required_successes: ")));
}

TEST(ParseConfigErrorsTest, NewlinesFromTheFileAreEscapedToKeepOneErrorALine) {
  EXPECT_THAT(
      ErrorLines("defaults:\n  mode: \"en\\nforce\"\n  \"a\\rb\": 1\n"),
      ElementsAre("test.yaml:2: defaults.mode: must be one of enforce, "
                  "shadow (got \"en\\nforce\")",
                  HasSubstr("test.yaml:3: defaults.a\\rb: unknown key")));
}

TEST(ParseConfigErrorsTest, SyntaxErrorIsTheOnlyError) {
  // Content errors before a syntax error cannot be told from the syntax
  // error's consequences: the document is not read at all.
  EXPECT_THAT(ErrorLines("defaults:\n  mode: x\nlimits: a: b\n"),
              ElementsAre(HasSubstr("test.yaml:3: invalid YAML")));
}

// --- files ------------------------------------------------------------------

// A fresh directory per test, removed afterwards.
class TempDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::path(::testing::TempDir()) /
           absl::StrCat("breakerd_config_test_", info->test_suite_name(), "_",
                        info->name(), "_", getpid());
    fs::remove_all(dir_);
    ASSERT_TRUE(fs::create_directories(dir_));
  }
  void TearDown() override {
    std::error_code ignored;
    fs::remove_all(dir_, ignored);
  }

  static void WriteFile(const fs::path& path, absl::string_view content) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << content;
    ASSERT_TRUE(out.good()) << path;
  }

  fs::path dir_;
};

using LoadConfigFileTest = TempDirTest;

TEST_F(LoadConfigFileTest, SetsSourceToThePath) {
  const fs::path path = dir_ / "config.yaml";
  WriteFile(path, "defaults:\n  consecutive_failures: 3\n");
  absl::StatusOr<std::shared_ptr<const PolicySet>> set =
      LoadConfigFile(path.string());
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_EQ((*set)->source, path.string());
  EXPECT_EQ((*set)->defaults->consecutive_failures, 3u);
}

TEST_F(LoadConfigFileTest, EmptyFileGivesDefaults) {
  const fs::path path = dir_ / "config.yaml";
  WriteFile(path, "");
  absl::StatusOr<std::shared_ptr<const PolicySet>> set =
      LoadConfigFile(path.string());
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_EQ(*(*set)->defaults, *EmbeddedDefaults()->defaults);
  EXPECT_TRUE((*set)->policies.empty());
}

TEST_F(LoadConfigFileTest, MissingFileIsNotFoundNamingThePath) {
  const std::string path = (dir_ / "nope.yaml").string();
  absl::StatusOr<std::shared_ptr<const PolicySet>> set = LoadConfigFile(path);
  ASSERT_FALSE(set.ok());
  EXPECT_EQ(set.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(Msg(set.status()), HasSubstr(path));
}

TEST_F(LoadConfigFileTest, DirectoryIsInvalidArgumentNamingThePath) {
  absl::StatusOr<std::shared_ptr<const PolicySet>> set =
      LoadConfigFile(dir_.string());
  ASSERT_FALSE(set.ok());
  EXPECT_EQ(set.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(set.status()), HasSubstr(dir_.string()));
  EXPECT_THAT(Msg(set.status()), HasSubstr("not a regular file"));
}

TEST_F(LoadConfigFileTest, OversizedFileIsRefused) {
  const fs::path path = dir_ / "big.yaml";
  WriteFile(path, std::string(kMaxConfigBytes + 1, '#'));
  absl::StatusOr<std::string> content = ReadConfigFile(path.string());
  ASSERT_FALSE(content.ok());
  EXPECT_EQ(content.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(content.status()), HasSubstr("larger than"));
}

TEST_F(LoadConfigFileTest, ParseErrorNamesThePathAndLine) {
  const fs::path path = dir_ / "config.yaml";
  WriteFile(path, "defaults:\n  cooldown:\n    base: 30s\n    jitter: 2\n");
  absl::StatusOr<std::shared_ptr<const PolicySet>> set =
      LoadConfigFile(path.string());
  ASSERT_FALSE(set.ok());
  EXPECT_EQ(set.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(
      Msg(set.status()),
      HasSubstr(absl::StrCat(path.string(), ":4: defaults.cooldown.jitter: ")));
}

TEST_F(LoadConfigFileTest, EveryErrorLineNamesThePath) {
  const fs::path path = dir_ / "config.yaml";
  WriteFile(path, "defaults:\n  mode: x\nlimits:\n  idle_ttl: 1\n");
  absl::StatusOr<std::shared_ptr<const PolicySet>> set =
      LoadConfigFile(path.string());
  ASSERT_FALSE(set.ok());
  EXPECT_THAT(
      ConfigErrorLines(set.status()),
      ElementsAre(
          HasSubstr(absl::StrCat(path.string(), ":2: defaults.mode: ")),
          HasSubstr(absl::StrCat(path.string(), ":4: limits.idle_ttl: "))));
}

// --- ConfigReloader
// -----------------------------------------------------------

double HalfUniform() { return 0.5; }  // jitter factor exactly 1

constexpr absl::string_view kInitialConfig = R"(
defaults:
  consecutive_failures: 5
  cooldown: { base: 30s, max: 300s, jitter: 0 }
policies:
  - match: "openai/*"
    consecutive_failures: 5
)";

constexpr absl::string_view kNewConfig = R"(
defaults:
  consecutive_failures: 5
  cooldown: { base: 30s, max: 300s, jitter: 0 }
policies:
  - match: "openai/*"
    consecutive_failures: 2
    failure_rate: { threshold: 0.25 }
    cooldown: { base: 5s }
)";

class ConfigReloaderTest : public TempDirTest {
 protected:
  void SetUp() override {
    TempDirTest::SetUp();
    path_ = (dir_ / "config.yaml").string();
    WriteFile(path_, kInitialConfig);
    absl::StatusOr<std::string> content = ReadConfigFile(path_);
    ASSERT_TRUE(content.ok()) << content.status();
    absl::StatusOr<std::shared_ptr<const PolicySet>> set =
        ParseConfig(*content, path_);
    ASSERT_TRUE(set.ok()) << set.status();
    registry_ = std::make_unique<Registry>(*set, &clock_, /*permit_secret=*/42,
                                           &HalfUniform);
    reloader_ = MakeReloader(*content);
  }

  std::unique_ptr<ConfigReloader> MakeReloader(
      std::optional<absl::StatusOr<std::string>> loaded_content) {
    return std::make_unique<ConfigReloader>(
        path_, registry_.get(),
        [this](const ReloadEvent& e) { events_.push_back(e); },
        std::move(loaded_content));
  }

  // One allowed call that times out. REQUIRES: the breaker lets it through.
  void CallFails(absl::string_view dependency) {
    absl::StatusOr<AcquireResult> acquired =
        registry_->Acquire(dependency, /*attempt=*/0);
    ASSERT_TRUE(acquired.ok()) << acquired.status();
    ASSERT_TRUE(acquired->allowed);
    ReportRequestFacts facts;
    facts.outcome.explicit_class = static_cast<int>(OutcomeClass::kTimeout);
    absl::StatusOr<ReportResult> reported =
        registry_->Report(dependency, acquired->permit, facts);
    ASSERT_TRUE(reported.ok()) << reported.status();
    EXPECT_EQ(reported->effect, Effect::kCountedFailure);
  }

  BreakerSnapshot Get(absl::string_view dependency) {
    absl::StatusOr<BreakerSnapshot> s = registry_->Get(dependency);
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? *s : BreakerSnapshot();
  }

  FakeClock clock_;
  std::string path_;
  std::unique_ptr<Registry> registry_;
  std::vector<ReloadEvent> events_;
  std::unique_ptr<ConfigReloader> reloader_;
};

TEST_F(ConfigReloaderTest, ReloadAppliesNewPolicyAndOpenBreakerKeepsItsState) {
  for (int i = 0; i < 5; ++i) CallFails("openai/key-1");
  const BreakerSnapshot before = Get("openai/key-1");
  ASSERT_EQ(before.state, State::kOpen);
  EXPECT_EQ(before.retry_after, absl::Seconds(30));

  WriteFile(path_, kNewConfig);
  ASSERT_TRUE(reloader_->Reload("signal").ok());
  EXPECT_EQ(reloader_->successes(), 1u);
  EXPECT_EQ(reloader_->failures(), 0u);
  ASSERT_EQ(events_.size(), 1u);
  EXPECT_TRUE(events_[0].ok);
  EXPECT_EQ(events_[0].source, path_);
  EXPECT_EQ(events_[0].trigger, "signal");
  EXPECT_EQ(events_[0].policies, 1u);
  EXPECT_TRUE(events_[0].error.empty());

  // The existing breaker: still open with its running cooldown, generation
  // and escalation, but now under the new policy.
  const BreakerSnapshot after = Get("openai/key-1");
  EXPECT_EQ(after.state, State::kOpen);
  EXPECT_EQ(after.generation, before.generation);
  EXPECT_EQ(after.escalation_level, before.escalation_level);
  EXPECT_EQ(after.retry_after, before.retry_after);
  EXPECT_EQ(after.policy, "openai/*");
  EXPECT_EQ(after.failure_rate_threshold, 0.25);
  EXPECT_EQ(registry_->policies()->Match("openai/key-1")->consecutive_failures,
            2u);
  EXPECT_EQ(registry_->policies()->source, path_);

  // A new breaker trips on the new threshold, with the new cooldown.
  CallFails("openai/key-2");
  EXPECT_EQ(Get("openai/key-2").state, State::kClosed);
  CallFails("openai/key-2");
  const BreakerSnapshot fresh = Get("openai/key-2");
  EXPECT_EQ(fresh.state, State::kOpen);
  EXPECT_EQ(fresh.retry_after, absl::Seconds(5));
}

TEST_F(ConfigReloaderTest, BadReloadKeepsPoliciesInForceAndCountsFailure) {
  const std::shared_ptr<const PolicySet> in_force = registry_->policies();

  WriteFile(path_, "defaults: [\n");  // not YAML
  absl::Status status = reloader_->Reload("signal");
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(status), HasSubstr(path_));
  EXPECT_EQ(registry_->policies(), in_force);

  WriteFile(path_, "defaults:\n  cooldwn: {base: 1s}\n");  // unknown key
  status = reloader_->Reload("signal");
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(status),
              HasSubstr(absl::StrCat(path_,
                                     ":2: defaults.cooldwn: unknown "
                                     "key")));
  EXPECT_EQ(registry_->policies(), in_force);

  EXPECT_EQ(reloader_->failures(), 2u);
  EXPECT_EQ(reloader_->successes(), 0u);
  ASSERT_EQ(events_.size(), 2u);
  for (const ReloadEvent& e : events_) {
    EXPECT_FALSE(e.ok);
    EXPECT_EQ(e.source, path_);
    EXPECT_EQ(e.trigger, "signal");
    EXPECT_THAT(e.error, HasSubstr(path_));
    EXPECT_EQ(e.policies, 1u);  // the set still in force
  }
  EXPECT_EQ(events_[1].error, status.message());
}

TEST_F(ConfigReloaderTest, ReloadOfMissingFileFailsWithNotFound) {
  const std::shared_ptr<const PolicySet> in_force = registry_->policies();
  fs::remove(path_);
  absl::Status status = reloader_->Reload("signal");
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(Msg(status), HasSubstr(path_));
  EXPECT_EQ(registry_->policies(), in_force);
  EXPECT_EQ(reloader_->failures(), 1u);
  ASSERT_EQ(events_.size(), 1u);
  EXPECT_FALSE(events_[0].ok);
}

// A --config missing at start was refused then (config_rejected, trigger
// startup): polling the same missing file is no new attempt, so no failed
// reload is counted for it; the file appearing is applied once.
TEST_F(ConfigReloaderTest, AFileMissingAtStartIsNotRefusedAgainByPolling) {
  fs::remove(path_);
  reloader_ = MakeReloader(ReadConfigFile(path_));
  EXPECT_TRUE(reloader_->ReloadIfChanged().ok());
  EXPECT_TRUE(reloader_->ReloadIfChanged().ok());
  EXPECT_EQ(reloader_->failures(), 0u);
  EXPECT_TRUE(events_.empty());

  WriteFile(path_, kNewConfig);
  EXPECT_TRUE(reloader_->ReloadIfChanged().ok());
  EXPECT_EQ(reloader_->successes(), 1u);
  ASSERT_EQ(events_.size(), 1u);
  EXPECT_TRUE(events_[0].ok);
}

TEST_F(ConfigReloaderTest, ReloadIfChangedDoesNothingWhileContentIsTheSame) {
  const std::shared_ptr<const PolicySet> in_force = registry_->policies();
  EXPECT_TRUE(reloader_->ReloadIfChanged().ok());
  WriteFile(path_, kInitialConfig);  // rewritten, same bytes
  EXPECT_TRUE(reloader_->ReloadIfChanged().ok());
  EXPECT_EQ(registry_->policies(), in_force);
  EXPECT_EQ(reloader_->successes(), 0u);
  EXPECT_EQ(reloader_->failures(), 0u);
  EXPECT_TRUE(events_.empty());
}

TEST_F(ConfigReloaderTest, ReloadIfChangedReloadsOnceWhenContentChanges) {
  const std::shared_ptr<const PolicySet> in_force = registry_->policies();
  WriteFile(path_, kNewConfig);
  EXPECT_TRUE(reloader_->ReloadIfChanged().ok());
  EXPECT_NE(registry_->policies(), in_force);
  const std::shared_ptr<const PolicySet> applied = registry_->policies();
  EXPECT_EQ(applied->Match("openai/x")->consecutive_failures, 2u);

  EXPECT_TRUE(reloader_->ReloadIfChanged().ok());
  EXPECT_TRUE(reloader_->ReloadIfChanged().ok());
  EXPECT_EQ(registry_->policies(), applied);
  EXPECT_EQ(reloader_->successes(), 1u);
  ASSERT_EQ(events_.size(), 1u);
  EXPECT_TRUE(events_[0].ok);
  EXPECT_EQ(events_[0].trigger, "file_change");
}

TEST_F(ConfigReloaderTest, BadFileIsRefusedOnceAndRetriedWhenItChanges) {
  const std::shared_ptr<const PolicySet> in_force = registry_->policies();
  WriteFile(path_, "defaults:\n  consecutive_failures: lots\n");
  EXPECT_EQ(reloader_->ReloadIfChanged().code(),
            absl::StatusCode::kInvalidArgument);
  // Polling the same bad content again: nothing new to report.
  EXPECT_TRUE(reloader_->ReloadIfChanged().ok());
  EXPECT_TRUE(reloader_->ReloadIfChanged().ok());
  EXPECT_EQ(reloader_->failures(), 1u);
  EXPECT_EQ(events_.size(), 1u);
  EXPECT_EQ(registry_->policies(), in_force);

  // A different bad file is refused (once) too.
  WriteFile(path_, "defaults:\n  consecutive_failures: -3\n");
  EXPECT_FALSE(reloader_->ReloadIfChanged().ok());
  EXPECT_TRUE(reloader_->ReloadIfChanged().ok());
  EXPECT_EQ(reloader_->failures(), 2u);

  // Fixed: applied.
  WriteFile(path_, kNewConfig);
  EXPECT_TRUE(reloader_->ReloadIfChanged().ok());
  EXPECT_EQ(reloader_->successes(), 1u);
  EXPECT_NE(registry_->policies(), in_force);
  ASSERT_EQ(events_.size(), 3u);
  EXPECT_FALSE(events_[0].ok);
  EXPECT_FALSE(events_[1].ok);
  EXPECT_TRUE(events_[2].ok);
  for (const ReloadEvent& e : events_) EXPECT_EQ(e.trigger, "file_change");
}

TEST_F(ConfigReloaderTest, SignalReloadOfBadFileIsNotRepeatedByPolling) {
  WriteFile(path_, "garbage: [\n");
  EXPECT_FALSE(reloader_->Reload("signal").ok());
  EXPECT_TRUE(reloader_->ReloadIfChanged().ok());
  EXPECT_EQ(reloader_->failures(), 1u);
  EXPECT_EQ(events_.size(), 1u);
}

TEST_F(ConfigReloaderTest, MissingFileIsReportedOnceWhilePolling) {
  const std::shared_ptr<const PolicySet> in_force = registry_->policies();
  fs::remove(path_);
  EXPECT_EQ(reloader_->ReloadIfChanged().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(reloader_->ReloadIfChanged().ok());
  EXPECT_EQ(reloader_->failures(), 1u);
  EXPECT_EQ(registry_->policies(), in_force);

  WriteFile(path_, kNewConfig);
  EXPECT_TRUE(reloader_->ReloadIfChanged().ok());
  EXPECT_EQ(reloader_->successes(), 1u);
  EXPECT_EQ(events_.size(), 2u);
}

TEST_F(ConfigReloaderTest, UnknownInitialContentIsAppliedAtFirstPoll) {
  reloader_ = MakeReloader(std::nullopt);
  EXPECT_TRUE(reloader_->ReloadIfChanged().ok());
  EXPECT_TRUE(reloader_->ReloadIfChanged().ok());
  EXPECT_EQ(reloader_->successes(), 1u);
  EXPECT_EQ(events_.size(), 1u);
}

TEST_F(ConfigReloaderTest, ReloadIfChangedFollowsConfigMapSymlinkSwap) {
  // The layout of a Kubernetes ConfigMap volume: the path goes through a
  // symlink that is atomically repointed to a new directory.
  const fs::path dir1 = dir_ / "dir1";
  const fs::path dir2 = dir_ / "dir2";
  fs::create_directories(dir1);
  fs::create_directories(dir2);
  WriteFile(dir1 / "config.yaml", kInitialConfig);
  WriteFile(dir2 / "config.yaml", kNewConfig);
  fs::create_directory_symlink("dir1", dir_ / "current");
  path_ = (dir_ / "current" / "config.yaml").string();

  absl::StatusOr<std::string> content = ReadConfigFile(path_);
  ASSERT_TRUE(content.ok()) << content.status();
  absl::StatusOr<std::shared_ptr<const PolicySet>> set =
      ParseConfig(*content, path_);
  ASSERT_TRUE(set.ok());
  registry_->ApplyPolicies(*set);
  reloader_ = MakeReloader(*content);

  EXPECT_TRUE(reloader_->ReloadIfChanged().ok());
  EXPECT_EQ(reloader_->successes(), 0u);

  fs::create_directory_symlink("dir2", dir_ / "current.tmp");
  fs::rename(dir_ / "current.tmp", dir_ / "current");  // atomic swap

  EXPECT_TRUE(reloader_->ReloadIfChanged().ok());
  EXPECT_EQ(reloader_->successes(), 1u);
  EXPECT_EQ(registry_->policies()->Match("openai/x")->consecutive_failures, 2u);
  EXPECT_EQ(registry_->policies()->source, path_);
  EXPECT_TRUE(reloader_->ReloadIfChanged().ok());
  EXPECT_EQ(reloader_->successes(), 1u);
  ASSERT_EQ(events_.size(), 1u);
  EXPECT_EQ(events_[0].trigger, "file_change");
}

}  // namespace
}  // namespace breakerd

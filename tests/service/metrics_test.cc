// Tests of what operators see: the /metrics families produced by
// RegistryCollector from the live Registry, and the JSON log lines (event
// "transition" and the escaping every line relies on).
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "prometheus/text_serializer.h"
#include "server/engine/clock.h"
#include "server/engine/policy.h"
#include "server/engine/registry.h"
#include "server/log/json_log.h"
#include "server/metrics/collector.h"

namespace breakerd {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

double HalfUniform() { return 0.5; }  // jitter factor exactly 1

std::shared_ptr<const PolicySet> TestPolicies() {
  auto defaults = std::make_shared<Policy>();
  defaults->cooldown.jitter = 0;  // cooldown exactly base
  auto set = std::make_shared<PolicySet>();
  set->defaults = defaults;
  set->source = "test";
  return set;
}

ReportRequestFacts Facts(OutcomeClass c, absl::Duration latency) {
  ReportRequestFacts f;
  f.outcome.explicit_class = static_cast<int>(c);
  f.latency = latency;
  return f;
}

class MetricsTest : public ::testing::Test {
 protected:
  MetricsTest()
      : registry_(TestPolicies(), &clock_, /*permit_secret=*/42, &HalfUniform) {
    ProcessStats stats;
    stats.version = "1.2.3";
    stats.reload_successes = [] { return uint64_t{3}; };
    stats.reload_failures = [] { return uint64_t{1}; };
    stats.watch_streams = [] { return uint64_t{7}; };
    collector_ = std::make_shared<RegistryCollector>(&registry_, stats);
  }

  // One Acquire (attempt 0) that must be allowed, then its Report.
  void Call(absl::string_view dep, OutcomeClass c, absl::Duration latency) {
    absl::StatusOr<AcquireResult> a = registry_.Acquire(dep, 0);
    ASSERT_TRUE(a.ok()) << a.status();
    ASSERT_TRUE(a->allowed);
    absl::StatusOr<ReportResult> r =
        registry_.Report(dep, a->permit, Facts(c, latency));
    ASSERT_TRUE(r.ok()) << r.status();
  }

  // The text exposition of one scrape.
  std::string Scrape() const {
    std::ostringstream out;
    prometheus::TextSerializer().Serialize(out, collector_->Collect());
    return out.str();
  }

  // Every sample of one scrape: `name{labels}` -> value.
  std::map<std::string, double> Samples() const {
    std::map<std::string, double> samples;
    for (absl::string_view line : absl::StrSplit(Scrape(), '\n')) {
      if (line.empty() || line[0] == '#') continue;
      const size_t space = line.rfind(' ');
      double value = 0;
      const absl::string_view text = line.substr(space + 1);
      if (text == "+Inf") {
        value = std::numeric_limits<double>::infinity();
      } else {
        EXPECT_TRUE(absl::SimpleAtod(text, &value)) << line;
      }
      samples[std::string(line.substr(0, space))] = value;
    }
    return samples;
  }

  FakeClock clock_;
  Registry registry_;
  std::shared_ptr<RegistryCollector> collector_;
};

TEST_F(MetricsTest, EmptyRegistryExportsProcessFamiliesOnly) {
  std::map<std::string, double> s = Samples();
  EXPECT_EQ(s.at("breakerd_breakers"), 0);
  EXPECT_EQ(s.at("breakerd_build_info{version=\"1.2.3\"}"), 1);
  EXPECT_EQ(s.at("breakerd_config_reloads_total{result=\"success\"}"), 3);
  EXPECT_EQ(s.at("breakerd_config_reloads_total{result=\"failure\"}"), 1);
  EXPECT_EQ(s.at("breakerd_unknown_permits_total"), 0);
  EXPECT_EQ(s.at("breakerd_watch_streams"), 7);
  for (const auto& [key, value] : s) {
    EXPECT_THAT(key, Not(HasSubstr("dependency="))) << key;
  }
}

TEST_F(MetricsTest, EveryFamilyHasHelpAndAType) {
  Call("openai/key-1", OutcomeClass::kSuccess, absl::Milliseconds(3));
  for (const prometheus::MetricFamily& f : collector_->Collect()) {
    EXPECT_THAT(f.help, Not(IsEmpty())) << f.name;
    EXPECT_THAT(f.name, ::testing::StartsWith("breakerd_"));
  }
  const std::string text = Scrape();
  EXPECT_THAT(text, HasSubstr("# TYPE breakerd_state gauge"));
  EXPECT_THAT(text, HasSubstr("# TYPE breakerd_transitions_total counter"));
  EXPECT_THAT(text,
              HasSubstr("# TYPE breakerd_call_duration_seconds histogram"));
  EXPECT_THAT(text, HasSubstr("0 closed"));
  EXPECT_THAT(text, HasSubstr("4 forced closed"));
}

TEST_F(MetricsTest, TrippedBreakerShowsOpenStateTransitionAndCounts) {
  const std::string dep = "openai/key-1";
  clock_.Advance(absl::Seconds(10));  // creates nothing yet
  Call(dep, OutcomeClass::kSuccess, absl::Milliseconds(3));
  clock_.Advance(absl::Seconds(10));
  for (int i = 0; i < 5; ++i) {
    Call(dep, OutcomeClass::kTimeout, absl::Milliseconds(200));
  }
  // Open now: the next Acquire is rejected at once.
  absl::StatusOr<AcquireResult> rejected = registry_.Acquire(dep, 0);
  ASSERT_TRUE(rejected.ok());
  EXPECT_FALSE(rejected->allowed);
  clock_.Advance(absl::Seconds(4));

  std::map<std::string, double> s = Samples();
  const std::string d = "dependency=\"openai/key-1\"";
  EXPECT_EQ(s.at("breakerd_state{" + d + "}"), 2);
  EXPECT_EQ(s.at("breakerd_transitions_total{" + d +
                 ",from=\"closed\",to=\"open\",reason=\"consecutive_"
                 "failures\"}"),
            1);
  EXPECT_EQ(s.at("breakerd_acquire_total{" + d + ",decision=\"allowed\"}"), 6);
  EXPECT_EQ(
      s.at("breakerd_acquire_total{" + d + ",decision=\"rejected_open\"}"), 1);
  EXPECT_EQ(s.count("breakerd_acquire_total{" + d + ",decision=\"probe\"}"),
            0u);
  EXPECT_EQ(s.at("breakerd_reports_total{" + d +
                 ",class=\"success\",effect=\"counted_success\"}"),
            1);
  EXPECT_EQ(s.at("breakerd_reports_total{" + d +
                 ",class=\"timeout\",effect=\"counted_failure\"}"),
            5);
  EXPECT_DOUBLE_EQ(s.at("breakerd_failure_rate{" + d + "}"), 5.0 / 6.0);
  EXPECT_DOUBLE_EQ(
      s.at("breakerd_state_seconds_total{" + d + ",state=\"closed\"}"), 10);
  EXPECT_DOUBLE_EQ(
      s.at("breakerd_state_seconds_total{" + d + ",state=\"open\"}"), 4);
  EXPECT_EQ(s.at("breakerd_breakers"), 1);

  // Histogram: one call of 3 ms, five of 200 ms; buckets are cumulative.
  const std::string h = "breakerd_call_duration_seconds_bucket{" + d;
  EXPECT_EQ(s.at(h + ",le=\"0.005\"}"), 1);
  EXPECT_EQ(s.at(h + ",le=\"0.1\"}"), 1);
  EXPECT_EQ(s.at(h + ",le=\"0.25\"}"), 6);
  EXPECT_EQ(s.at(h + ",le=\"120\"}"), 6);
  EXPECT_EQ(s.at(h + ",le=\"+Inf\"}"), 6);
  EXPECT_EQ(s.at("breakerd_call_duration_seconds_count{" + d + "}"), 6);
  EXPECT_DOUBLE_EQ(s.at("breakerd_call_duration_seconds_sum{" + d + "}"),
                   0.003 + 5 * 0.2);
}

TEST_F(MetricsTest, StateSecondsGrowWithTheClockAtScrapeTime) {
  const std::string dep = "pay/api";
  Call(dep, OutcomeClass::kSuccess, absl::ZeroDuration());
  clock_.Advance(absl::Seconds(2));
  const std::string key =
      "breakerd_state_seconds_total{dependency=\"pay/api\",state=\"closed\"}";
  EXPECT_DOUBLE_EQ(Samples().at(key), 2);
  // Nothing but time moves: the next scrape reads the registry again.
  clock_.Advance(absl::Milliseconds(1500));
  EXPECT_DOUBLE_EQ(Samples().at(key), 3.5);
  // No latency was reported: no histogram series for this breaker.
  EXPECT_THAT(Scrape(), Not(HasSubstr("breakerd_call_duration_seconds_count")));
}

TEST_F(MetricsTest, HalfOpenProbeAndCooldownTransitionsAreCounted) {
  const std::string dep = "db/main";
  for (int i = 0; i < 5; ++i) {
    Call(dep, OutcomeClass::kServerError, absl::ZeroDuration());
  }
  clock_.Advance(absl::Seconds(30));  // cooldown base, no jitter
  absl::StatusOr<AcquireResult> probe = registry_.Acquire(dep, 0);
  ASSERT_TRUE(probe.ok());
  ASSERT_TRUE(probe->probe);

  std::map<std::string, double> s = Samples();
  const std::string d = "dependency=\"db/main\"";
  EXPECT_EQ(s.at("breakerd_state{" + d + "}"), 1);
  EXPECT_EQ(s.at("breakerd_acquire_total{" + d + ",decision=\"probe\"}"), 1);
  EXPECT_EQ(s.at("breakerd_transitions_total{" + d +
                 ",from=\"open\",to=\"half_open\",reason=\"cooldown_"
                 "elapsed\"}"),
            1);

  ASSERT_TRUE(registry_
                  .Report(dep, probe->permit,
                          Facts(OutcomeClass::kSuccess, absl::ZeroDuration()))
                  .ok());
  s = Samples();
  EXPECT_EQ(s.at("breakerd_state{" + d + "}"), 0);
  EXPECT_EQ(s.at("breakerd_transitions_total{" + d +
                 ",from=\"half_open\",to=\"closed\",reason=\"probe_"
                 "succeeded\"}"),
            1);
}

TEST_F(MetricsTest, RetriesAndNeutralOutcomesAreLabelled) {
  const std::string dep = "llm/key";
  Call(dep, OutcomeClass::kAuthError, absl::ZeroDuration());
  absl::StatusOr<AcquireResult> retry = registry_.Acquire(dep, 1);
  ASSERT_TRUE(retry.ok());
  ASSERT_TRUE(retry->allowed);

  std::map<std::string, double> s = Samples();
  const std::string d = "dependency=\"llm/key\"";
  EXPECT_EQ(s.at("breakerd_retries_total{" + d + ",decision=\"granted\"}"), 1);
  EXPECT_EQ(s.count("breakerd_retries_total{" + d + ",decision=\"rejected\"}"),
            0u);
  EXPECT_EQ(s.at("breakerd_reports_total{" + d +
                 ",class=\"auth_error\",effect=\"neutral\"}"),
            1);
}

TEST_F(MetricsTest, ForcedStatesAreEncoded) {
  ASSERT_TRUE(registry_.ForceOpen("a").ok());
  ASSERT_TRUE(registry_.ForceClose("b").ok());
  std::map<std::string, double> s = Samples();
  EXPECT_EQ(s.at("breakerd_state{dependency=\"a\"}"), 3);
  EXPECT_EQ(s.at("breakerd_state{dependency=\"b\"}"), 4);
  EXPECT_EQ(s.at("breakerd_breakers"), 2);
}

TEST_F(MetricsTest, UnknownPermitsAreCounted) {
  const ReportRequestFacts ok =
      Facts(OutcomeClass::kSuccess, absl::ZeroDuration());
  // No breaker for the name (a permit from before a restart).
  EXPECT_FALSE(registry_.Report("gone/dep", 12345, ok).ok());
  EXPECT_EQ(Samples().at("breakerd_unknown_permits_total"), 1);
  // A breaker exists, but it never issued this permit.
  Call("b", OutcomeClass::kSuccess, absl::ZeroDuration());
  EXPECT_FALSE(registry_.Report("b", 12345, ok).ok());
  EXPECT_EQ(Samples().at("breakerd_unknown_permits_total"), 2);
}

TEST(StateGaugeValueTest, MatchesTheDocumentedEncoding) {
  EXPECT_EQ(StateGaugeValue(State::kClosed), 0);
  EXPECT_EQ(StateGaugeValue(State::kHalfOpen), 1);
  EXPECT_EQ(StateGaugeValue(State::kOpen), 2);
  EXPECT_EQ(StateGaugeValue(State::kForcedOpen), 3);
  EXPECT_EQ(StateGaugeValue(State::kForcedClosed), 4);
}

// ---------------------------------------------------------------------------
// JSON log lines.

std::string Json(absl::string_view s) {
  std::string out;
  AppendJsonString(s, &out);
  return out;
}

TEST(JsonLogTest, EscapesQuotesBackslashesAndControlCharacters) {
  EXPECT_EQ(Json("plain"), "\"plain\"");
  EXPECT_EQ(Json("a\"b\\c"), "\"a\\\"b\\\\c\"");
  EXPECT_EQ(Json("l1\nl2\r\t"), "\"l1\\nl2\\r\\t\"");
  EXPECT_EQ(Json(std::string("\x01\x1f\x7f", 3)), "\"\\u0001\\u001f\\u007f\"");
  EXPECT_EQ(Json(std::string("nul\0x", 5)), "\"nul\\u0000x\"");
}

TEST(JsonLogTest, KeepsValidUtf8AndReplacesInvalidBytes) {
  EXPECT_EQ(Json("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"),
            "\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\"");
  EXPECT_EQ(Json("bad\xff"), "\"bad\\ufffd\"");
  EXPECT_EQ(Json("trunc\xe2\x82"), "\"trunc\\ufffd\\ufffd\"");
  EXPECT_EQ(Json("overlong\xc0\xaf"), "\"overlong\\ufffd\\ufffd\"");
  EXPECT_EQ(Json("surrogate\xed\xa0\x80"),
            "\"surrogate\\ufffd\\ufffd\\ufffd\"");
}

TEST(JsonLogTest, LineHasTimestampLevelEventThenFieldsInOrder) {
  const absl::Time ts =
      absl::FromUnixMillis(1714564800123);  // 2024-05-01T12:00:00.123Z
  EXPECT_EQ(FormatLogLine(ts, LogLevel::kError, "config_rejected",
                          {{"source", "/etc/b.yaml"},
                           {"policies", 3},
                           {"ok", false},
                           {"rate", 0.25},
                           {"bad", std::numeric_limits<double>::infinity()}}),
            "{\"ts\":\"2024-05-01T12:00:00.123Z\",\"level\":\"error\","
            "\"event\":\"config_rejected\",\"source\":\"/etc/b.yaml\","
            "\"policies\":3,\"ok\":false,\"rate\":0.25,\"bad\":null}\n");
}

class CapturedLog {
 public:
  CapturedLog() {
    previous_ = SetLogWriterForTesting(
        [this](absl::string_view line) { lines_.emplace_back(line); });
  }
  ~CapturedLog() { SetLogWriterForTesting(previous_); }
  const std::vector<std::string>& lines() const { return lines_; }

 private:
  LogWriter previous_;
  std::vector<std::string> lines_;
};

TEST(JsonLogTest, TransitionLoggerWritesOneLinePerTransition) {
  CapturedLog log;
  FakeClock clock;
  TransitionLogger logger;
  Registry registry(TestPolicies(), &clock, 42, &HalfUniform);
  registry.AddObserver(&logger);
  for (int i = 0; i < 5; ++i) {
    absl::StatusOr<AcquireResult> a = registry.Acquire("x/y", 0);
    ASSERT_TRUE(a.ok());
    ASSERT_TRUE(registry
                    .Report("x/y", a->permit,
                            Facts(OutcomeClass::kTimeout, absl::ZeroDuration()))
                    .ok());
  }
  ASSERT_THAT(log.lines(), ::testing::SizeIs(1));
  const std::string& line = log.lines()[0];
  EXPECT_THAT(line, ::testing::StartsWith("{\"ts\":\""));
  EXPECT_THAT(line, ::testing::EndsWith("}\n"));
  EXPECT_THAT(line,
              HasSubstr("\"level\":\"warn\",\"event\":\"transition\","
                        "\"dependency\":\"x/y\",\"from\":\"closed\","
                        "\"to\":\"open\",\"reason\":\"consecutive_failures\","
                        "\"generation\":1,\"retry_after_ms\":30000,"
                        "\"escalation_level\":0,\"consecutive_failures\":5,"
                        "\"window_calls\":5,\"window_failures\":5,"
                        "\"window_slow\":0}"));
}

}  // namespace
}  // namespace breakerd

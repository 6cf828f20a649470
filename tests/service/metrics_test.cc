// Tests of what operators see: the /metrics families produced by
// RegistryCollector from the live Registry (the text /metrics serves, checked
// against prometheus-cpp's rendering of the same Collectable), the text
// format's building blocks, and the JSON log lines (event "transition" and
// the escaping every line relies on).
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "prometheus/text_serializer.h"
#include "server/engine/clock.h"
#include "server/engine/policy.h"
#include "server/engine/registry.h"
#include "server/log/json_log.h"
#include "server/metrics/collector.h"
#include "server/metrics/families.h"
#include "server/metrics/text_format.h"

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

// ---------------------------------------------------------------------------
// A parser for the text format, to compare two renderings as a Prometheus
// server would see them.

// One scrape as a Prometheus server stores it.
struct ParsedExposition {
  // Family name -> {HELP text, TYPE}.
  std::map<std::string, std::pair<std::string, std::string>> families;
  // `name{label="value",...}` (labels sorted by name, values C-escaped) ->
  // sample value.
  std::map<std::string, double> samples;
};

// Undoes the text format's escaping: \\, \n and (in label values) \".
std::string Unescape(absl::string_view text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '\\' || i + 1 == text.size()) {
      out.push_back(text[i]);
      continue;
    }
    const char next = text[++i];
    out.push_back(next == 'n' ? '\n' : next);
  }
  return out;
}

double ParseSampleValue(absl::string_view text) {
  if (text == "+Inf") return std::numeric_limits<double>::infinity();
  if (text == "-Inf") return -std::numeric_limits<double>::infinity();
  if (text == "NaN" || text == "Nan") {
    return std::numeric_limits<double>::quiet_NaN();
  }
  double value = 0;
  EXPECT_TRUE(absl::SimpleAtod(text, &value)) << "bad value: " << text;
  return value;
}

// Parses `text`, failing the test on a malformed line, a sample outside its
// family's block (after that family's TYPE line), a family described twice
// or a sample given twice.
ParsedExposition ParseExposition(absl::string_view text) {
  ParsedExposition out;
  EXPECT_TRUE(text.empty() || absl::EndsWith(text, "\n"));
  std::string family;  // the family whose HELP or TYPE came last
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    if (absl::ConsumePrefix(&line, "# HELP ")) {
      const std::pair<std::string, std::string> name_help =
          absl::StrSplit(line, absl::MaxSplits(' ', 1));
      family = name_help.first;
      EXPECT_EQ(out.families.count(family), 0u) << "described twice: " << line;
      out.families[family].first = Unescape(name_help.second);
      continue;
    }
    if (absl::ConsumePrefix(&line, "# TYPE ")) {
      const std::pair<std::string, std::string> name_type =
          absl::StrSplit(line, ' ');
      EXPECT_EQ(name_type.first, family) << "TYPE without its HELP: " << line;
      out.families[family].second = name_type.second;
      continue;
    }
    EXPECT_NE(line[0], '#') << line;

    const size_t name_end = line.find_first_of("{ ");
    const std::string name(line.substr(0, name_end));
    const std::string& type = out.families[family].second;
    const bool in_family =
        name == family || (type == "histogram" && (name == family + "_bucket" ||
                                                   name == family + "_sum" ||
                                                   name == family + "_count"));
    EXPECT_TRUE(in_family) << "outside its family (" << family << "): " << line;

    std::vector<std::string> labels;
    absl::string_view rest = line.substr(name_end);
    if (absl::ConsumePrefix(&rest, "{")) {
      while (!absl::ConsumePrefix(&rest, "}")) {
        absl::ConsumePrefix(&rest, ",");
        const size_t eq = rest.find("=\"");
        if (eq == absl::string_view::npos) {
          ADD_FAILURE() << "bad labels: " << line;
          return out;
        }
        const absl::string_view label = rest.substr(0, eq);
        rest.remove_prefix(eq + 2);
        size_t end = 0;
        while (end < rest.size() && rest[end] != '"') {
          end += rest[end] == '\\' ? 2 : 1;
        }
        labels.push_back(absl::StrCat(
            label, "=\"", absl::CEscape(Unescape(rest.substr(0, end))), "\""));
        rest.remove_prefix(std::min(end + 1, rest.size()));
      }
    }
    std::sort(labels.begin(), labels.end());
    EXPECT_TRUE(absl::ConsumePrefix(&rest, " ")) << line;
    const std::string key =
        labels.empty()
            ? name
            : absl::StrCat(name, "{", absl::StrJoin(labels, ","), "}");
    EXPECT_EQ(out.samples.count(key), 0u) << "given twice: " << line;
    out.samples[key] = ParseSampleValue(rest);
  }
  return out;
}

// prometheus-cpp writes 16 significant digits, which need not round-trip;
// the text writer writes the shortest form that does.
bool SameValue(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  if (a == b) return true;
  return std::fabs(a - b) <= 1e-15 * std::max(std::fabs(a), std::fabs(b));
}

// The same families (HELP, TYPE) and the same samples.
void ExpectSameExposition(const ParsedExposition& actual,
                          const ParsedExposition& expected) {
  EXPECT_EQ(actual.families, expected.families);
  std::set<std::string> actual_keys, expected_keys;
  for (const auto& [key, value] : actual.samples) actual_keys.insert(key);
  for (const auto& [key, value] : expected.samples) expected_keys.insert(key);
  EXPECT_EQ(actual_keys, expected_keys);
  for (const auto& [key, value] : actual.samples) {
    const auto it = expected.samples.find(key);
    if (it == expected.samples.end()) continue;
    EXPECT_TRUE(SameValue(value, it->second))
        << key << ": " << value << " vs " << it->second;
  }
}

// prometheus-cpp's text rendering of `collector`'s Collect().
std::string PrometheusCppText(const RegistryCollector& collector) {
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, collector.Collect());
  return out.str();
}

// What /metrics serves for `collector`; checks that it says what
// prometheus-cpp's rendering of the same Collectable says.
std::string ServedText(const RegistryCollector& collector) {
  std::string text;
  collector.AppendText(&text);
  ExpectSameExposition(ParseExposition(text),
                       ParseExposition(PrometheusCppText(collector)));
  return text;
}

// The last line of every scrape in these tests.
constexpr char kLastLine[] =
    "breakerd_batch_outcomes_total{result=\"refused\"} 0\n";

class MetricsTest : public ::testing::Test {
 protected:
  MetricsTest()
      : registry_(TestPolicies(), &clock_, /*permit_secret=*/42, &HalfUniform) {
    ProcessStats stats;
    stats.version = "1.2.3";
    stats.reload_successes = [] { return uint64_t{3}; };
    stats.reload_failures = [] { return uint64_t{1}; };
    stats.config_valid = [] { return false; };
    stats.watch_streams = [] { return uint64_t{7}; };
    stats.rpc_methods = [] {
      std::vector<RpcMethodStats> methods(2);
      methods[0].method = "Acquire";
      methods[0].handled[0] = 2;  // OK
      methods[0].handled[3] = 1;  // INVALID_ARGUMENT
      methods[0].latency_buckets[0] = 1;
      methods[0].latency_buckets[3] = 1;
      methods[0].latency_buckets[kRpcLatencyBuckets] = 1;
      methods[0].latency_sum_seconds = 0.5;
      methods[1].method = "Watch";  // nothing yet
      return methods;
    };
    stats_ = stats;
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

  // The text exposition of one scrape, as /metrics serves it (checked
  // against prometheus-cpp's rendering of the same scrape).
  std::string Scrape() const { return ServedText(*collector_); }

  // Every sample of one scrape: `name{labels}` -> value.
  std::map<std::string, double> Samples() const {
    std::map<std::string, double> samples;
    for (absl::string_view line : absl::StrSplit(Scrape(), '\n')) {
      if (line.empty() || line[0] == '#') continue;
      const size_t space = line.rfind(' ');
      samples[std::string(line.substr(0, space))] =
          ParseSampleValue(line.substr(space + 1));
    }
    return samples;
  }

  FakeClock clock_;
  Registry registry_;
  ProcessStats stats_;
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

// The seeds' monitoring list: an open episode's first probe and duration,
// the age of a state that is not closed, the policy's thresholds, and the
// named chains' tiers (process-wide, not per breaker).
TEST_F(MetricsTest, EpisodesThresholdsAndChainsAreExported) {
  for (int i = 0; i < 5; ++i) {
    Call("llm/primary", OutcomeClass::kTimeout, absl::Milliseconds(3));
  }
  clock_.Advance(absl::Seconds(12));  // open for 30 s: 12 s old
  std::map<std::string, double> s = Samples();
  EXPECT_EQ(s.at("breakerd_state_age_seconds{dependency=\"llm/primary\"}"), 12);
  EXPECT_EQ(s.at("breakerd_policy_threshold{dependency=\"llm/primary\","
                 "rule=\"failure_rate\"}"),
            0.5);
  EXPECT_EQ(s.at("breakerd_window_calls{dependency=\"llm/primary\"}"), 5);
  // The chain falls to its backup: tier 1; its call succeeds.
  const std::vector<std::string> chain = {"llm/primary", "llm/backup"};
  absl::StatusOr<AcquireFirstResult> r =
      registry_.AcquireFirst(chain, 0, {"llm", 0});
  ASSERT_TRUE(r.ok() && r->granted == 1);
  ReportRequestFacts f = Facts(OutcomeClass::kSuccess, absl::Milliseconds(2));
  f.chain = "llm";
  f.tier = 1;
  ASSERT_TRUE(registry_.Report("llm/backup", r->result.permit, f).ok());
  clock_.Advance(absl::Seconds(18));
  Call("llm/primary", OutcomeClass::kSuccess, absl::Milliseconds(3));  // probe
  s = Samples();
  EXPECT_EQ(s.count("breakerd_state_age_seconds{dependency=\"llm/primary\"}"),
            0u);  // closed again
  EXPECT_EQ(s.at("breakerd_open_episodes_total{dependency=\"llm/primary\","
                 "first_probe=\"succeeded\"}"),
            1);
  EXPECT_EQ(s.count("breakerd_open_episodes_total{dependency=\"llm/primary\","
                    "first_probe=\"failed\"}"),
            0u);
  EXPECT_EQ(s.at("breakerd_open_duration_seconds_bucket{dependency=\"llm/"
                 "primary\",le=\"10\"}"),
            0);
  EXPECT_EQ(s.at("breakerd_open_duration_seconds_bucket{dependency=\"llm/"
                 "primary\",le=\"30\"}"),
            1);
  EXPECT_EQ(s.at("breakerd_open_duration_seconds_sum{dependency=\"llm/"
                 "primary\"}"),
            30);
  EXPECT_EQ(s.at("breakerd_chain_decisions_total{chain=\"llm\",tier=\"1\"}"),
            1);
  EXPECT_EQ(s.at("breakerd_chain_outcomes_total{chain=\"llm\",tier=\"1\","
                 "class=\"success\"}"),
            1);
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
  EXPECT_EQ(s.at("breakerd_state{" + d + ",mode=\"enforce\"}"), 2);
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
  EXPECT_EQ(s.at("breakerd_state{" + d + ",mode=\"enforce\"}"), 1);
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
  EXPECT_EQ(s.at("breakerd_state{" + d + ",mode=\"enforce\"}"), 0);
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
  EXPECT_EQ(s.at("breakerd_state{dependency=\"a\",mode=\"enforce\"}"), 3);
  EXPECT_EQ(s.at("breakerd_state{dependency=\"b\",mode=\"enforce\"}"), 4);
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

// Single-use permits, hung calls and gentle recovery, as a scrape shows
// them (checked against prometheus-cpp's rendering like every scrape here).
TEST_F(MetricsTest, InflightHungCallsRampAndDuplicatesAreExported) {
  auto policy = std::make_shared<Policy>(*TestPolicies()->defaults);
  policy->inflight.hang_after = absl::Seconds(10);
  policy->recovery.ramp = absl::Seconds(100);
  policy->recovery.start_share = 0.1;
  auto policies = std::make_shared<PolicySet>(*TestPolicies());
  policies->defaults = policy;
  registry_.ApplyPolicies(policies);

  // svc/hang: one permit never reported, one reported in time.
  absl::StatusOr<AcquireResult> lost = registry_.Acquire("svc/hang", 0);
  ASSERT_TRUE(lost.ok() && lost->allowed);
  clock_.Advance(absl::Seconds(5));
  absl::StatusOr<AcquireResult> kept = registry_.Acquire("svc/hang", 0);
  ASSERT_TRUE(kept.ok() && kept->allowed);
  const std::string h = "{dependency=\"svc/hang\"}";
  std::map<std::string, double> s = Samples();
  EXPECT_EQ(s.at("breakerd_inflight" + h), 2);
  EXPECT_EQ(s.count("breakerd_hung_calls_total" + h), 0u);
  clock_.Advance(absl::Seconds(6));  // the first is hung, the second not
  ASSERT_TRUE(registry_
                  .Report("svc/hang", kept->permit,
                          Facts(OutcomeClass::kSuccess, absl::ZeroDuration()))
                  .ok());
  // Reported twice: the second changes nothing.
  ASSERT_TRUE(registry_
                  .Report("svc/hang", kept->permit,
                          Facts(OutcomeClass::kSuccess, absl::ZeroDuration()))
                  .ok());

  // svc/ramp: trips, its probe closes it, and it ramps.
  for (int i = 0; i < 5; ++i) {
    Call("svc/ramp", OutcomeClass::kTimeout, absl::ZeroDuration());
  }
  clock_.Advance(absl::Seconds(30));
  Call("svc/ramp", OutcomeClass::kSuccess, absl::ZeroDuration());  // probe
  absl::StatusOr<AcquireResult> retry = registry_.Acquire("svc/ramp", 1);
  ASSERT_TRUE(retry.ok());
  ASSERT_FALSE(retry->allowed);
  ASSERT_EQ(retry->reason, RejectReason::kRamp);

  s = Samples();
  EXPECT_EQ(s.at("breakerd_inflight" + h), 0);
  EXPECT_EQ(s.at("breakerd_hung_calls_total" + h), 1);
  EXPECT_EQ(s.at("breakerd_admit_share" + h), 1);
  EXPECT_EQ(s.at("breakerd_reports_total{dependency=\"svc/hang\",class="
                 "\"success\",effect=\"duplicate\"}"),
            1);
  EXPECT_EQ(s.at("breakerd_reports_total{dependency=\"svc/hang\",class="
                 "\"success\",effect=\"counted_success\"}"),
            1);
  const std::string r = "dependency=\"svc/ramp\"";
  EXPECT_DOUBLE_EQ(s.at("breakerd_admit_share{" + r + "}"), 0.1);
  EXPECT_EQ(
      s.at("breakerd_acquire_total{" + r + ",decision=\"rejected_ramp\"}"), 1);
  EXPECT_EQ(s.at("breakerd_state{" + r + ",mode=\"enforce\"}"), 0);
  clock_.Advance(absl::Seconds(50));
  EXPECT_DOUBLE_EQ(Samples().at("breakerd_admit_share{" + r + "}"), 0.55);

  // Without the dependency label: the hung calls summed, no gauges.
  const RegistryCollector omitted(&registry_, stats_, DependencyLabel::kOmit);
  const std::string text = ServedText(omitted);
  EXPECT_THAT(text, HasSubstr("\nbreakerd_hung_calls_total 1\n"));
  EXPECT_THAT(text, HasSubstr("breakerd_acquire_total{decision=\"rejected_"
                              "ramp\"} 1\n"));
  EXPECT_THAT(text, Not(HasSubstr("breakerd_inflight")));
  EXPECT_THAT(text, Not(HasSubstr("breakerd_admit_share")));
}

// A shadow breaker's ramp refuses nothing: the refusal it would have made
// is counted as shadow_rejected_ramp.
TEST_F(MetricsTest, ShadowRampRefusalsAreCountedAsShadowDecisions) {
  auto policy = std::make_shared<Policy>(*TestPolicies()->defaults);
  policy->mode = Mode::kShadow;
  policy->recovery.ramp = absl::Seconds(100);
  auto policies = std::make_shared<PolicySet>(*TestPolicies());
  policies->defaults = policy;
  registry_.ApplyPolicies(policies);
  for (int i = 0; i < 5; ++i) {
    Call("svc/s", OutcomeClass::kTimeout, absl::ZeroDuration());
  }
  clock_.Advance(absl::Seconds(30));
  Call("svc/s", OutcomeClass::kSuccess, absl::ZeroDuration());  // probe
  absl::StatusOr<AcquireResult> retry = registry_.Acquire("svc/s", 1);
  ASSERT_TRUE(retry.ok());
  EXPECT_TRUE(retry->allowed);
  EXPECT_EQ(retry->reason, RejectReason::kRamp);
  EXPECT_EQ(Samples().at("breakerd_acquire_total{dependency=\"svc/s\","
                         "decision=\"shadow_rejected_ramp\"}"),
            1);
}

// Every kind of sample at once: each state, every transition reason the
// engine records, shadow decisions, retries granted and refused, late and
// neutral reports, latencies in the first, middle and +Inf buckets, and a
// label value that needs escaping. The served text must say what
// prometheus-cpp's rendering of Collect() says.
// Fleet mode: the fleet's window as last read, per dependency, and the
// local opens the fleet never confirmed.
TEST_F(MetricsTest, FleetWindowAndUnconfirmedOpensAreExportedInFleetMode) {
  class ThreeMembers : public ProbeArbiter {
   public:
    bool Active() const override { return true; }
    void RequestClaim(absl::string_view, uint64_t, absl::Duration) override {}
    uint64_t Members() const override { return 3; }
  } fleet;
  registry_.SetProbeArbiter(&fleet);
  // dep/b trips on its own (quorum 2 of 3): unconfirmed until it closes.
  for (int i = 0; i < 5; ++i) {
    Call("dep/b", OutcomeClass::kTimeout, absl::Milliseconds(1));
  }
  clock_.Advance(absl::Seconds(30));
  absl::StatusOr<AcquireResult> probe = registry_.Acquire("dep/b", 0);
  ASSERT_TRUE(probe.ok() && probe->probe);
  ASSERT_TRUE(registry_
                  .Report("dep/b", probe->permit,
                          Facts(OutcomeClass::kSuccess, absl::ZeroDuration()))
                  .ok());
  Call("dep/a", OutcomeClass::kSuccess, absl::Milliseconds(1));
  FleetWindow window;
  window.calls = 40;
  window.failures = 10;
  window.sources = 1;
  registry_.ApplyFleetWindow("dep/a", window, 3);

  // Without a fleet (no fleet stats) none of it is exported...
  EXPECT_THAT(Scrape(), Not(HasSubstr("breakerd_fleet_")));
  // ...with one, it is.
  stats_.fleet_counters = [] { return FleetCounters{}; };
  collector_ = std::make_shared<RegistryCollector>(&registry_, stats_);
  std::map<std::string, double> s = Samples();
  EXPECT_EQ(s.at("breakerd_fleet_window_calls{dependency=\"dep/a\"}"), 40);
  EXPECT_EQ(s.at("breakerd_fleet_failure_rate{dependency=\"dep/a\"}"), 0.25);
  EXPECT_EQ(
      s.at("breakerd_fleet_unconfirmed_opens_total{dependency=\"dep/b\"}"), 1);
  EXPECT_EQ(s.count("breakerd_fleet_window_calls{dependency=\"dep/b\"}"), 0u)
      << "never read for dep/b";
  EXPECT_EQ(
      s.count("breakerd_fleet_unconfirmed_opens_total{dependency=\"dep/a\"}"),
      0u);
  // Older than the window (30 s), the read says nothing any more.
  clock_.Advance(absl::Seconds(31));
  EXPECT_EQ(Samples().at("breakerd_fleet_window_calls{dependency=\"dep/a\"}"),
            0);
}

TEST_F(MetricsTest, ServedTextMatchesPrometheusCppInEveryState) {
  auto shadow = std::make_shared<Policy>(*TestPolicies()->defaults);
  shadow->match = "shadow/*";
  shadow->mode = Mode::kShadow;
  auto policies = std::make_shared<PolicySet>(*TestPolicies());
  policies->policies.push_back(shadow);
  registry_.ApplyPolicies(policies);

  Call("svc/closed", OutcomeClass::kSuccess, absl::Milliseconds(3));
  Call("svc/closed", OutcomeClass::kSuccess, absl::Milliseconds(200));
  Call("svc/closed", OutcomeClass::kSuccess, absl::Seconds(500));  // +Inf
  Call("svc/closed", OutcomeClass::kAuthError, absl::ZeroDuration());

  // A permit taken before the trip reports late.
  absl::StatusOr<AcquireResult> early = registry_.Acquire("svc/open", 0);
  ASSERT_TRUE(early.ok() && early->allowed);
  for (const char* dep : {"svc/open", "svc/half-open", "svc/reclosed",
                          "svc/reopened", "shadow/x"}) {
    for (int i = 0; i < 5; ++i) {
      Call(dep, OutcomeClass::kTimeout, absl::Milliseconds(30));
    }
  }
  ASSERT_TRUE(registry_
                  .Report("svc/open", early->permit,
                          Facts(OutcomeClass::kSuccess, absl::ZeroDuration()))
                  .ok());
  ASSERT_TRUE(registry_.Acquire("svc/open", 0).ok());  // rejected: open
  ASSERT_TRUE(registry_.Acquire("svc/open", 1).ok());  // retry refused
  ASSERT_TRUE(registry_.Acquire("shadow/x", 0).ok());  // shadow rejection

  clock_.Advance(absl::Seconds(30));  // every cooldown ends
  for (const char* dep : {"svc/half-open", "svc/reclosed", "svc/reopened"}) {
    absl::StatusOr<AcquireResult> probe = registry_.Acquire(dep, 0);
    ASSERT_TRUE(probe.ok() && probe->probe) << dep;
    if (std::string(dep) == "svc/half-open") continue;  // probe in flight
    const OutcomeClass outcome = std::string(dep) == "svc/reclosed"
                                     ? OutcomeClass::kSuccess
                                     : OutcomeClass::kServerError;
    ASSERT_TRUE(
        registry_
            .Report(dep, probe->permit, Facts(outcome, absl::Milliseconds(7)))
            .ok());
  }
  ASSERT_TRUE(registry_.Acquire("svc/half-open", 0).ok());  // in flight

  ASSERT_TRUE(registry_.ForceOpen("svc/forced-open").ok());
  ASSERT_TRUE(registry_.Acquire("svc/forced-open", 0).ok());
  ASSERT_TRUE(registry_.ForceClose("svc/forced-closed").ok());
  ASSERT_TRUE(registry_.ForceOpen("svc/reset").ok());
  ASSERT_TRUE(registry_.Reset("svc/reset").ok());

  // Retries: the budget grants some, then refuses.
  Call("svc/retried", OutcomeClass::kSuccess, absl::ZeroDuration());
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(registry_.Acquire("svc/retried", 1).ok());
  }
  clock_.Advance(absl::Milliseconds(1234));  // fractional state seconds

  ProcessStats stats;
  stats.version = "2.0 \"rc\" C:\\breakerd\nsecond line";
  stats.reload_successes = [] { return uint64_t{1} << 60; };
  const RegistryCollector collector(&registry_, stats);
  const std::string text = ServedText(collector);
  // Hashed and omitted labels render the same in both writers too (and
  // the sums give each label combination once).
  for (DependencyLabel label :
       {DependencyLabel::kHash, DependencyLabel::kOmit}) {
    SCOPED_TRACE(DependencyLabelName(label));
    ServedText(RegistryCollector(&registry_, stats, label));
  }

  // The scenario produced what it meant to (else the comparison is weak).
  for (const char* expected :
       {"breakerd_state{dependency=\"svc/half-open\",mode=\"enforce\"} 1",
        "breakerd_state{dependency=\"svc/reopened\",mode=\"enforce\"} 2",
        "breakerd_state{dependency=\"svc/forced-open\",mode=\"enforce\"} 3",
        "breakerd_state{dependency=\"svc/forced-closed\",mode=\"enforce\"} 4",
        "breakerd_state{dependency=\"shadow/x\",mode=\"shadow\"} 1",
        "reason=\"probe_succeeded\"",
        "reason=\"probe_failed\"",
        "reason=\"forced_closed\"",
        "reason=\"reset\"",
        "decision=\"shadow_rejected_open\"",
        "decision=\"rejected_probe_in_flight\"",
        "decision=\"rejected_forced_open\"",
        "decision=\"rejected_retry_budget\"",
        "effect=\"late\"",
        "effect=\"neutral\"",
        "breakerd_retries_total{dependency=\"svc/open\",decision=\"rejected\"} "
        "1",
        "breakerd_retries_total{dependency=\"svc/"
        "retried\",decision=\"granted\"}",
        "{dependency=\"svc/closed\",le=\"120\"} 2",
        "{dependency=\"svc/closed\",le=\"+Inf\"} 3",
        "breakerd_build_info{version=\"2.0 \\\"rc\\\" C:\\\\breakerd\\nsecond "
        "line\"} 1",
        "breakerd_config_reloads_total{result=\"success\"} "
        "1152921504606846976"}) {
    EXPECT_THAT(text, HasSubstr(expected));
  }
}

// The exact text of a scrape of the fixture's stats and one breaker,
// "db/main", with one successful call of 3 ms, 2.5 s after it was created,
// with the dependency label as `label` says.
std::string OneBreakerText(DependencyLabel label) {
  auto header = [](FamilyId id) {
    const FamilyDef& f = Family(id);
    return absl::StrCat("# HELP ", f.name, " ", f.help, "\n# TYPE ", f.name,
                        " ", MetricKindName(f.kind), "\n");
  };
  // The labels of a per-breaker sample: `{dependency="...",<rest>}`, or
  // without the dependency for kOmit.
  const std::string dependency =
      label == DependencyLabel::kName   ? "dependency=\"db/main\""
      : label == DependencyLabel::kHash ? "dependency=\"hce95f71b99df0621\""
                                        : "";
  auto labels = [&](absl::string_view rest) {
    if (dependency.empty())
      return rest.empty() ? "" : absl::StrCat("{", rest, "}");
    return absl::StrCat("{", dependency, rest.empty() ? "" : ",", rest, "}");
  };
  const bool omit = label == DependencyLabel::kOmit;
  std::string buckets;
  for (const char* le : {"0.005", "0.01", "0.025", "0.05", "0.1", "0.25", "0.5",
                         "1", "2.5", "5", "10", "30", "60", "120", "+Inf"}) {
    absl::StrAppend(&buckets, "breakerd_call_duration_seconds_bucket",
                    labels(absl::StrCat("le=\"", le, "\"")), " 1\n");
  }
  std::string rpc_buckets, watch_buckets;
  const std::pair<const char*, int> kRpcBuckets[] = {
      {"1e-05", 1},   {"2.5e-05", 1}, {"5e-05", 1}, {"0.0001", 2},
      {"0.00025", 2}, {"0.0005", 2},  {"0.001", 2}, {"0.0025", 2},
      {"0.005", 2},   {"0.01", 2},    {"+Inf", 3}};
  for (const auto& [le, n] : kRpcBuckets) {
    absl::StrAppend(&rpc_buckets,
                    "breakerd_grpc_server_handling_seconds_bucket{method="
                    "\"Acquire\",le=\"",
                    le, "\"} ", n, "\n");
    absl::StrAppend(&watch_buckets,
                    "breakerd_grpc_server_handling_seconds_bucket{method="
                    "\"Watch\",le=\"",
                    le, "\"} 0\n");
  }
  return absl::StrCat(
      omit ? ""
           : absl::StrCat(header(FamilyId::kState), "breakerd_state",
                          labels("mode=\"enforce\""), " 0\n"),
      header(FamilyId::kTransitions), header(FamilyId::kAcquires),
      "breakerd_acquire_total", labels("decision=\"allowed\""), " 1\n",
      header(FamilyId::kReports), "breakerd_reports_total",
      labels("class=\"success\",effect=\"counted_success\""), " 1\n",
      omit ? ""
           : absl::StrCat(header(FamilyId::kFailureRate),
                          "breakerd_failure_rate", labels(""), " 0\n"),
      header(FamilyId::kStateSeconds), "breakerd_state_seconds_total",
      labels("state=\"closed\""), " 2.5\n", header(FamilyId::kCallDuration),
      buckets, "breakerd_call_duration_seconds_sum", labels(""), " 0.003\n",
      "breakerd_call_duration_seconds_count", labels(""), " 1\n",
      header(FamilyId::kRetries),
      omit ? ""
           : absl::StrCat(header(FamilyId::kInflight), "breakerd_inflight",
                          labels(""), " 0\n"),
      header(FamilyId::kHungCalls),
      omit ? ""
           : absl::StrCat(header(FamilyId::kAdmitShare), "breakerd_admit_share",
                          labels(""), " 1\n"),
      header(FamilyId::kOpenEpisodes), header(FamilyId::kOpenDuration),
      omit
          ? ""
          : absl::StrCat(
                header(FamilyId::kPolicyThreshold), "breakerd_policy_threshold",
                labels("rule=\"failure_rate\""), " 0.5\n",
                "breakerd_policy_threshold", labels("rule=\"min_calls\""),
                " 20\n", "breakerd_policy_threshold",
                labels("rule=\"consecutive_failures\""), " 5\n",
                header(FamilyId::kWindowCalls), "breakerd_window_calls",
                labels(""), " 1\n", header(FamilyId::kStateAge)),
      header(FamilyId::kClientDecisions), header(FamilyId::kBreakers),
      "breakerd_breakers 1\n", header(FamilyId::kBuildInfo),
      "breakerd_build_info{version=\"1.2.3\"} 1\n",
      header(FamilyId::kConfigReloads),
      "breakerd_config_reloads_total{result=\"success\"} 3\n"
      "breakerd_config_reloads_total{result=\"failure\"} 1\n",
      header(FamilyId::kConfigValid), "breakerd_config_valid 0\n",
      header(FamilyId::kUnknownPermits), "breakerd_unknown_permits_total 0\n",
      header(FamilyId::kWatchStreams), "breakerd_watch_streams 7\n",
      header(FamilyId::kGrpcHandled),
      "breakerd_grpc_server_handled_total{method=\"Acquire\",code=\"OK\"} "
      "2\n"
      "breakerd_grpc_server_handled_total{method=\"Acquire\",code="
      "\"INVALID_ARGUMENT\"} 1\n"
      "breakerd_grpc_server_handled_total{method=\"Watch\",code=\"OK\"} "
      "0\n",
      header(FamilyId::kGrpcHandlingSeconds), rpc_buckets,
      "breakerd_grpc_server_handling_seconds_sum{method=\"Acquire\"} "
      "0.5\n"
      "breakerd_grpc_server_handling_seconds_count{method=\"Acquire\"} "
      "3\n",
      watch_buckets,
      "breakerd_grpc_server_handling_seconds_sum{method=\"Watch\"} 0\n"
      "breakerd_grpc_server_handling_seconds_count{method=\"Watch\"} "
      "0\n",
      header(FamilyId::kChainDecisions), header(FamilyId::kChainOutcomes),
      header(FamilyId::kAcquireFirstSkipped),
      "breakerd_acquire_first_skipped_total{reason=\"max_breakers\"} 0\n",
      header(FamilyId::kBatchOutcomes),
      "breakerd_batch_outcomes_total{result=\"counted\"} 0\n"
      "breakerd_batch_outcomes_total{result=\"late\"} 0\n"
      "breakerd_batch_outcomes_total{result=\"refused\"} 0\n");
}

// The exact text for one breaker with one call.
TEST_F(MetricsTest, ServedTextIsExactForOneBreaker) {
  Call("db/main", OutcomeClass::kSuccess, absl::Milliseconds(3));
  clock_.Advance(absl::Milliseconds(2500));
  EXPECT_EQ(Scrape(), OneBreakerText(DependencyLabel::kName));
}

// --metrics-dependency-label=hash: the same text, with "h" + FNV-1a 64 of
// the name in place of the name.
TEST_F(MetricsTest, HashedLabelTextIsExactForOneBreaker) {
  Call("db/main", OutcomeClass::kSuccess, absl::Milliseconds(3));
  clock_.Advance(absl::Milliseconds(2500));
  const RegistryCollector hashed(&registry_, stats_, DependencyLabel::kHash);
  const std::string text = ServedText(hashed);
  EXPECT_EQ(text, OneBreakerText(DependencyLabel::kHash));
  EXPECT_THAT(text, Not(HasSubstr("db/main")));
}

// --metrics-dependency-label=omit: no dependency label, no breakerd_state
// and no breakerd_failure_rate.
TEST_F(MetricsTest, OmittedLabelTextIsExactForOneBreaker) {
  Call("db/main", OutcomeClass::kSuccess, absl::Milliseconds(3));
  clock_.Advance(absl::Milliseconds(2500));
  const RegistryCollector omitted(&registry_, stats_, DependencyLabel::kOmit);
  const std::string text = ServedText(omitted);
  EXPECT_EQ(text, OneBreakerText(DependencyLabel::kOmit));
  EXPECT_THAT(text, Not(HasSubstr("dependency=")));
  EXPECT_THAT(text, Not(HasSubstr("db/main")));
}

// Without the dependency label each counter and histogram is the sum over
// every dependency, and an evicted breaker's counts stay in the sums (a
// counter that went down would read as a reset to Prometheus).
TEST_F(MetricsTest, OmittedLabelSumsEveryDependencyAndKeepsEvictedCounts) {
  Call("svc/idle", OutcomeClass::kSuccess, absl::Milliseconds(3));
  Call("svc/down", OutcomeClass::kSuccess, absl::Milliseconds(3));
  for (int i = 0; i < 5; ++i) {
    Call("svc/down", OutcomeClass::kTimeout, absl::Milliseconds(200));
  }
  clock_.Advance(absl::Minutes(11));  // svc/idle idle; svc/down still open
  const RegistryCollector omitted(&registry_, stats_, DependencyLabel::kOmit);
  const std::string before = ServedText(omitted);
  for (const char* expected : {
           "breakerd_transitions_total{from=\"closed\",to=\"open\",reason="
           "\"consecutive_failures\"} 1\n",
           "breakerd_acquire_total{decision=\"allowed\"} 7\n",
           "breakerd_reports_total{class=\"success\",effect=\"counted_"
           "success\"} 2\n",
           "breakerd_reports_total{class=\"timeout\",effect=\"counted_"
           "failure\"} 5\n",
           "breakerd_state_seconds_total{state=\"closed\"} 660\n",
           "breakerd_call_duration_seconds_bucket{le=\"0.005\"} 2\n",
           "breakerd_call_duration_seconds_bucket{le=\"0.25\"} 7\n",
           "breakerd_call_duration_seconds_count 7\n",
           "breakerd_breakers 2\n",
       }) {
    EXPECT_THAT(before, HasSubstr(expected));
  }
  EXPECT_DOUBLE_EQ(
      ParseExposition(before).samples.at("breakerd_call_duration_seconds_sum"),
      0.003 + 0.003 + 5 * 0.2);
  EXPECT_THAT(before, Not(HasSubstr("breakerd_state{")));
  EXPECT_THAT(before, Not(HasSubstr("breakerd_failure_rate")));

  ASSERT_EQ(registry_.EvictIdle(), 1u);
  ASSERT_FALSE(registry_.Get("svc/idle").ok());
  std::string after = ServedText(omitted);
  // Everything the same but the number of breakers held.
  EXPECT_THAT(after, HasSubstr("breakerd_breakers 1\n"));
  absl::StrReplaceAll({{"breakerd_breakers 1\n", "breakerd_breakers 2\n"}},
                      &after);
  EXPECT_EQ(after, before);
}
// Long names need more room than the writer first sets aside per breaker.
TEST_F(MetricsTest, ServedTextIsCompleteWhenNamesAreLong) {
  for (char c : {'a', 'b', 'c'}) {
    const std::string dep(kMaxDependencyLength, c);
    Call(dep, OutcomeClass::kSuccess, absl::Milliseconds(3));
    Call(dep, OutcomeClass::kTimeout, absl::Seconds(1));
    ASSERT_TRUE(registry_.Acquire(dep, 1).ok());
  }
  const std::string text = Scrape();  // compared with prometheus-cpp's
  EXPECT_THAT(text, ::testing::EndsWith(kLastLine));
}

TEST_F(MetricsTest, AppendTextAppendsToWhatIsThere) {
  std::string text = "prefix\n";
  collector_->AppendText(&text);
  EXPECT_THAT(text, ::testing::StartsWith("prefix\n# HELP breakerd_state "));
  EXPECT_THAT(text, ::testing::EndsWith(kLastLine));
}

// /metrics streams the text: pieces of at least the chunk size (but the
// last), ending at a line end, never much bigger, that join to the whole
// text.
TEST_F(MetricsTest, StreamedPiecesJoinToTheWholeTextAndStayNearTheChunkSize) {
  for (int i = 0; i < 300; ++i) {
    Call(absl::StrCat("provider-", i % 7, "/key-", i), OutcomeClass::kSuccess,
         absl::Milliseconds(42));
  }
  std::string whole;
  collector_->AppendText(&whole);
  constexpr size_t kChunk = 4096;
  std::string buffer;
  std::vector<std::string> pieces;
  ASSERT_TRUE(collector_->WriteText(kChunk, &buffer, [&](absl::string_view p) {
    pieces.emplace_back(p);
    return true;
  }));
  ASSERT_GT(pieces.size(), 10u);
  EXPECT_EQ(absl::StrJoin(pieces, ""), whole);
  for (size_t i = 0; i < pieces.size(); ++i) {
    SCOPED_TRACE(absl::StrCat("piece ", i, " of ", pieces.size()));
    EXPECT_THAT(pieces[i], ::testing::EndsWith("\n"));
    if (i + 1 < pieces.size()) {
      EXPECT_GE(pieces[i].size(), kChunk);
    }
    // The chunk plus one shard's lines of one family (a histogram of 17
    // lines per breaker, a few breakers per shard).
    EXPECT_LT(pieces[i].size(), kChunk + 16 * 1024);
  }
  // The buffer holds one piece, not the text.
  EXPECT_LT(buffer.capacity(), 2 * (kChunk + 16 * 1024));
}

// A scrape whose client is gone stops rendering at the next piece.
TEST_F(MetricsTest, StreamingStopsWhenAWriteFails) {
  for (int i = 0; i < 300; ++i) {
    Call(absl::StrCat("dep/", i), OutcomeClass::kSuccess,
         absl::Milliseconds(42));
  }
  std::string buffer;
  int writes = 0;
  EXPECT_FALSE(collector_->WriteText(4096, &buffer, [&](absl::string_view) {
    ++writes;
    return writes < 2;
  }));
  EXPECT_EQ(writes, 2);
}

// ---------------------------------------------------------------------------
// The dependency label's hash: FNV-1a 64, the published test vectors.

TEST(DependencyLabelTest, HashIsFnv1a64OfTheNameInSixteenHexDigits) {
  EXPECT_EQ(Fnv1a64(""), 0xcbf29ce484222325u);
  EXPECT_EQ(Fnv1a64("a"), 0xaf63dc4c8601ec8cu);
  EXPECT_EQ(Fnv1a64("foobar"), 0x85944171f73967e8u);
  EXPECT_EQ(HashedDependencyLabel("a"), "haf63dc4c8601ec8c");
  EXPECT_EQ(HashedDependencyLabel("foobar"), "h85944171f73967e8");
  EXPECT_EQ(HashedDependencyLabel("db/main"), "hce95f71b99df0621");
  // Leading zero digits are kept: always 17 bytes.
  for (const char* name : {"x", "pay/api", "llm/openai@eu-1"}) {
    EXPECT_EQ(HashedDependencyLabel(name).size(), 17u) << name;
  }
}

TEST(DependencyLabelTest, FlagValuesAreExactlyNameHashOrOmit) {
  EXPECT_EQ(ParseDependencyLabel("name"), DependencyLabel::kName);
  EXPECT_EQ(ParseDependencyLabel("hash"), DependencyLabel::kHash);
  EXPECT_EQ(ParseDependencyLabel("omit"), DependencyLabel::kOmit);
  for (const char* bad : {"", "Name", "hashed", "none", " omit"}) {
    EXPECT_EQ(ParseDependencyLabel(bad), std::nullopt) << bad;
  }
  for (DependencyLabel label : {DependencyLabel::kName, DependencyLabel::kHash,
                                DependencyLabel::kOmit}) {
    EXPECT_EQ(ParseDependencyLabel(DependencyLabelName(label)), label);
    EXPECT_THAT(std::string(kDependencyLabelChoices),
                HasSubstr(DependencyLabelName(label)));
  }
}

// ---------------------------------------------------------------------------
// One breaker's samples straight from a snapshot (EmitBreakerSamples): the
// in-flight, hung-call and gentle-recovery families, and the decisions and
// effects they bring.

// Every counter and gauge sample fed to it: `name{label="value",...}` (in
// FamilyDef::labels order) -> value. Histograms are left out.
class RecordingSink final : public SampleSink {
 public:
  void AddSample(FamilyId family, LabelValues labels, double value) override {
    samples[Key(family, labels)] = value;
  }
  void AddCount(FamilyId family, LabelValues labels, uint64_t value) override {
    samples[Key(family, labels)] = static_cast<double>(value);
  }
  void AddHistogram(FamilyId, LabelValues, const HistogramSample&) override {}

  std::map<std::string, double> samples;

 private:
  static std::string Key(FamilyId family, LabelValues labels) {
    const FamilyDef& f = Family(family);
    std::vector<std::string> pairs;
    size_t i = 0;
    for (absl::string_view value : labels) {
      pairs.push_back(absl::StrCat(f.labels[i++], "=\"", value, "\""));
    }
    return pairs.empty()
               ? std::string(f.name)
               : absl::StrCat(f.name, "{", absl::StrJoin(pairs, ","), "}");
  }
};

std::map<std::string, double> BreakerSamples(const BreakerSnapshot& s) {
  RecordingSink sink;
  EmitBreakerSamples(s, AllFamilies(), &sink);
  return sink.samples;
}

TEST(BreakerSamplesTest, InflightHungCallsAndAdmitShareCarryTheSnapshot) {
  BreakerSnapshot s;
  s.dependency = "llm/key-1";
  s.inflight = 3;
  s.hung_calls = 7;
  s.admit_share = 0.25;
  const std::map<std::string, double> samples = BreakerSamples(s);
  const std::string d = "{dependency=\"llm/key-1\"}";
  EXPECT_EQ(samples.at("breakerd_inflight" + d), 3);
  EXPECT_EQ(samples.at("breakerd_hung_calls_total" + d), 7);
  EXPECT_EQ(samples.at("breakerd_admit_share" + d), 0.25);
  EXPECT_EQ(Family(FamilyId::kInflight).kind, MetricKind::kGauge);
  EXPECT_EQ(Family(FamilyId::kHungCalls).kind, MetricKind::kCounter);
  EXPECT_EQ(Family(FamilyId::kAdmitShare).kind, MetricKind::kGauge);
}

// The gauges are there for every breaker (0 in flight, share 1 when not
// ramping); the counter only once it has counted something.
TEST(BreakerSamplesTest, QuietBreakerHasItsGaugesButNoHungCounter) {
  BreakerSnapshot s;
  s.dependency = "db/main";
  const std::map<std::string, double> samples = BreakerSamples(s);
  EXPECT_EQ(samples.at("breakerd_inflight{dependency=\"db/main\"}"), 0);
  EXPECT_EQ(samples.at("breakerd_admit_share{dependency=\"db/main\"}"), 1);
  EXPECT_EQ(samples.count("breakerd_hung_calls_total{dependency=\"db/main\"}"),
            0u);
}

TEST(BreakerSamplesTest, RampRejectionsAreDecisions) {
  BreakerSnapshot s;
  s.dependency = "pay/api";
  s.acquires[static_cast<int>(Decision::kRejectedRamp)] = 4;
  s.acquires[static_cast<int>(Decision::kShadowRejectedRamp)] = 2;
  const std::map<std::string, double> samples = BreakerSamples(s);
  const std::string a = "breakerd_acquire_total{dependency=\"pay/api\",";
  EXPECT_EQ(samples.at(a + "decision=\"rejected_ramp\"}"), 4);
  EXPECT_EQ(samples.at(a + "decision=\"shadow_rejected_ramp\"}"), 2);
}

// A repeated Report is counted as effect "duplicate", whatever its class.
TEST(BreakerSamplesTest, DuplicateReportsAreAnEffectOfEveryClass) {
  BreakerSnapshot s;
  s.dependency = "pay/api";
  for (int c = 1; c < kOutcomeClassCount; ++c) {
    s.reports[c][static_cast<int>(Effect::kDuplicate)] = c;
  }
  const std::map<std::string, double> samples = BreakerSamples(s);
  for (int c = 1; c < kOutcomeClassCount; ++c) {
    const absl::string_view name =
        OutcomeClassName(static_cast<OutcomeClass>(c));
    EXPECT_EQ(samples.at(absl::StrCat(
                  "breakerd_reports_total{dependency=\"pay/api\",class=\"",
                  name, "\",effect=\"duplicate\"}")),
              c)
        << name;
  }
}

// Without the dependency label the hung-call counter is a sum like every
// counter; the two gauges, which the sums do not carry, are not exported.
TEST(BreakerSamplesTest, OmittedLabelKeepsTheHungCounterButNotTheGauges) {
  const ProcessStats stats;
  for (DependencyLabel label :
       {DependencyLabel::kName, DependencyLabel::kHash}) {
    EXPECT_TRUE(FamilyExported(FamilyId::kInflight, stats, label));
    EXPECT_TRUE(FamilyExported(FamilyId::kAdmitShare, stats, label));
    EXPECT_TRUE(FamilyExported(FamilyId::kHungCalls, stats, label));
  }
  EXPECT_FALSE(
      FamilyExported(FamilyId::kInflight, stats, DependencyLabel::kOmit));
  EXPECT_FALSE(
      FamilyExported(FamilyId::kAdmitShare, stats, DependencyLabel::kOmit));
  EXPECT_TRUE(
      FamilyExported(FamilyId::kHungCalls, stats, DependencyLabel::kOmit));
  BreakerSnapshot total;
  BreakerSnapshot one;
  one.hung_calls = 2;
  AddCounters(one, &total);
  AddCounters(one, &total);
  EXPECT_EQ(total.hung_calls, 4u);
}

// The per-breaker families are the ones whose first label is the
// dependency, and no family has more labels than kMaxLabels.
TEST(FamiliesTest, PerBreakerFamiliesLeadWithTheDependencyLabel) {
  for (int i = 0; i < kFamilyCount; ++i) {
    const FamilyId id = static_cast<FamilyId>(i);
    const FamilyDef& f = Family(id);
    EXPECT_LE(f.labels.size(), kMaxLabels) << f.name;
    const bool leads = !f.labels.empty() && f.labels[0] == "dependency";
    EXPECT_EQ(leads, PerBreakerFamily(id)) << f.name;
    for (size_t l = 1; l < f.labels.size(); ++l) {
      EXPECT_NE(f.labels[l], "dependency") << f.name;
    }
  }
}

// ---------------------------------------------------------------------------
// The text format's building blocks.

std::string LabelValue(absl::string_view s) {
  std::string out;
  AppendEscapedLabelValue(s, &out);
  return out;
}

std::string Help(absl::string_view s) {
  std::string out;
  AppendEscapedHelp(s, &out);
  return out;
}

std::string Value(double v) {
  std::string out;
  AppendSampleValue(v, &out);
  return out;
}

TEST(TextFormatTest, EscapesBackslashQuoteAndNewlineInLabelValues) {
  EXPECT_EQ(LabelValue("plain/dep-1.2:x@y"), "plain/dep-1.2:x@y");
  EXPECT_EQ(LabelValue("a\"b"), "a\\\"b");
  EXPECT_EQ(LabelValue("C:\\dir"), "C:\\\\dir");
  EXPECT_EQ(LabelValue("l1\nl2"), "l1\\nl2");
  EXPECT_EQ(LabelValue("\\\"\n"), "\\\\\\\"\\n");
  // Other bytes, UTF-8 included, stand for themselves.
  EXPECT_EQ(LabelValue("tab\there caf\xc3\xa9 \r"), "tab\there caf\xc3\xa9 \r");
  EXPECT_EQ(LabelValue(""), "");
}

TEST(TextFormatTest, EscapesBackslashAndNewlineInHelpButNotQuotes) {
  EXPECT_EQ(Help("say \"hi\""), "say \"hi\"");
  EXPECT_EQ(Help("a\\b\nc"), "a\\\\b\\nc");
}

TEST(TextFormatTest, HelpTextsNeedNoEscaping) {
  // prometheus-cpp writes HELP unescaped; the two renderings agree only
  // while no HELP text has a backslash or a newline.
  for (int i = 0; i < kFamilyCount; ++i) {
    const FamilyDef& f = Family(static_cast<FamilyId>(i));
    EXPECT_EQ(Help(f.help), f.help) << f.name;
  }
}

TEST(TextFormatTest, SampleValuesUsePrometheusSpellings) {
  EXPECT_EQ(Value(0), "0");
  EXPECT_EQ(Value(-0.0), "0");
  EXPECT_EQ(Value(4), "4");
  EXPECT_EQ(Value(1e6), "1000000");
  EXPECT_EQ(Value(0.1), "0.1");
  EXPECT_EQ(Value(2.5), "2.5");
  EXPECT_EQ(Value(-2), "-2");
  EXPECT_EQ(Value(5.0 / 6.0), "0.8333333333333334");
  EXPECT_EQ(Value(1e21), "1e+21");
  EXPECT_EQ(Value(1e-7), "1e-07");
  EXPECT_EQ(Value(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(Value(-std::numeric_limits<double>::infinity()), "-Inf");
  EXPECT_EQ(Value(std::numeric_limits<double>::quiet_NaN()), "NaN");
}

TEST(TextFormatTest, SampleValuesRoundTripExactly) {
  for (double v : {0.1 + 0.2, 1.0 / 3.0, 0.003 + 5 * 0.2, 123456.789e-3,
                   std::numeric_limits<double>::min(),
                   std::numeric_limits<double>::denorm_min(),
                   std::numeric_limits<double>::max(), 9007199254740993.0,
                   1e15 + 0.5, -1e-300}) {
    double parsed = 0;
    ASSERT_TRUE(absl::SimpleAtod(Value(v), &parsed)) << Value(v);
    EXPECT_EQ(parsed, v) << Value(v);
  }
}

TEST(TextFormatTest, ContentTypeNamesTheFormatVersion) {
  EXPECT_EQ(kTextFormatContentType, "text/plain; version=0.0.4; charset=utf-8");
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
  EXPECT_THAT(
      line,
      HasSubstr(
          "\"level\":\"warn\",\"event\":\"transition\","
          "\"dependency\":\"x/y\",\"from\":\"closed\","
          "\"to\":\"open\",\"reason\":\"consecutive_failures\","
          "\"mode\":\"enforce\",\"generation\":1,\"retry_after_ms\":30000,"
          "\"escalation_level\":0,\"consecutive_failures\":5,"
          "\"window_calls\":5,\"window_failures\":5,"
          "\"window_slow\":0}"));
}

}  // namespace
}  // namespace breakerd

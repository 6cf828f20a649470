// Soak tests: the real breakerd binary under sustained load, checked for what
// only time shows: errors under pressure, lost reports, and growth of
// resident memory or open file descriptors.
//
// SixtySecondsAtCapacity drives breakerd at this machine's capacity (a
// closed loop: a fixed number of calls always in flight) for
// BREAKERD_SOAK_SECONDS (default 60) with mixed outcomes over 1,000
// dependencies, some failing often enough to open, probe and close again
// under load, and a share of failed calls retried, while /metrics is
// scraped every second and the config file is swapped every 5 s.
// MillionPermitsNeverReportedDoNotGrowMemory shows that permits are not stored:
// a million of them left unreported cost nothing.
//
// The figures each test measures are printed and recorded as test
// properties (in the XML report with --gtest_output=xml).
//
// Time here is real time by nature (a soak is about wall-clock duration);
// the waits for breakerd to act are bounded polls. The only sleeps are the
// measurement periods and the 1 s pacing of the scraper and the driver.
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "breakerd/v1/breaker.grpc.pb.h"
#include "grpcpp/client_context.h"
#include "gtest/gtest.h"
#include "tests/e2e/breakerd_process.h"
#include "tests/soak/closed_loop_load.h"
#include "tests/soak/proc_stats.h"

namespace breakerd {
namespace {

namespace v1 = ::breakerd::v1;

constexpr int kDependencies = 1000;
// Every kFlakyEvery-th dependency is flaky: 50 of the 1,000.
constexpr int kFlakyEvery = 20;
// Calls kept in flight, and the channels (HTTP/2 connections) they share.
constexpr int kInflight = 32;
constexpr int kChannels = 4;
constexpr absl::Duration kCapacityPeriod = absl::Seconds(3);
constexpr absl::Duration kReloadEvery = absl::Seconds(5);
constexpr absl::Duration kStall = absl::Seconds(5);
// Share of failed calls the clients retry once (attempt = 1).
constexpr double kRetryShare = 0.3;

// Two valid configurations the soak alternates between. Short cooldowns so
// that flaky breakers open, probe and close many times under load; the
// second differs in every threshold, the window length and the probe rule.
constexpr char kConfigA[] = R"(defaults:
  consecutive_failures: 5
  failure_rate: { threshold: 0.5, min_calls: 20, window: 10s }
  cooldown: { base: 1s, max: 4s, jitter: 0.1 }
  probe: { lease: 5s, required_successes: 1 }
policies:
  - match: "soak/flaky-*"
    consecutive_failures: 3
    cooldown: { base: 500ms, max: 2s, jitter: 0.2 }
limits: { max_breakers: 10000, idle_ttl: 10m }
)";
constexpr char kConfigB[] = R"(defaults:
  consecutive_failures: 8
  failure_rate: { threshold: 0.6, min_calls: 30, window: 5s }
  cooldown: { base: 1s, max: 3s, jitter: 0.2 }
  probe: { lease: 5s, required_successes: 2 }
policies:
  - match: "soak/flaky-*"
    consecutive_failures: 4
    cooldown: { base: 1s, max: 2s, jitter: 0.1 }
limits: { max_breakers: 10000, idle_ttl: 10m }
)";

// Healthy: 85 % success, 10 % server errors and timeouts, 3 % 404, 2 % 429.
constexpr OutcomeMix kHealthyMix = {0.85, 0.05, 0.05, 0.03, 0.02};
// Flaky: failing more often than not, so its breaker trips in seconds.
constexpr OutcomeMix kFlakyMix = {0.40, 0.25, 0.20, 0.05, 0.10};

int SoakSeconds() {
  int seconds = 60;
  const char* env = std::getenv("BREAKERD_SOAK_SECONDS");
  if (env != nullptr && !absl::SimpleAtoi(env, &seconds)) {
    ADD_FAILURE() << "BREAKERD_SOAK_SECONDS is not a number: " << env;
  }
  return std::max(seconds, 10);
}

std::vector<LoadTarget> SoakTargets() {
  std::vector<LoadTarget> targets;
  for (int i = 0; i < kDependencies; ++i) {
    if (i % kFlakyEvery == 0) {
      targets.push_back({absl::StrFormat("soak/flaky-%03d", i), kFlakyMix});
    } else {
      targets.push_back({absl::StrFormat("soak/healthy-%03d", i), kHealthyMix});
    }
  }
  return targets;
}

std::vector<std::shared_ptr<grpc::Channel>> Channels(
    const BreakerdProcess& proc) {
  std::vector<std::shared_ptr<grpc::Channel>> channels;
  for (int i = 0; i < kChannels; ++i) channels.push_back(proc.Channel(i));
  return channels;
}

// Opens every breaker once before the load starts: Acquire and Report a
// server error (explicit outcome) until the Report answers OPEN, with one
// thread per channel. The load then probes and closes them within seconds,
// so every breaker soon exports every series it will ever export (the
// transitions, the open and half-open seconds, the rejections and probes)
// and the /metrics exposition reaches its full size during warm-up. Returns
// what was sent, to be counted with the load's own calls.
LoadCounts OpenEveryBreaker(
    const std::vector<std::shared_ptr<grpc::Channel>>& channels,
    const std::vector<LoadTarget>& targets) {
  constexpr int kMaxTries = 50;  // far above any consecutive_failures here
  std::vector<LoadCounts> counts(channels.size());
  std::vector<std::thread> threads;
  for (size_t t = 0; t < channels.size(); ++t) {
    threads.emplace_back([&, t] {
      std::unique_ptr<v1::Breaker::Stub> stub =
          v1::Breaker::NewStub(channels[t]);
      LoadCounts& c = counts[t];
      auto note = [&c](std::string what) {
        if (c.first_error.empty()) c.first_error = std::move(what);
      };
      for (size_t i = t; i < targets.size(); i += channels.size()) {
        const std::string& dependency = targets[i].dependency;
        bool open = false;
        for (int tries = 0; !open && tries < kMaxTries; ++tries) {
          grpc::ClientContext acquire_ctx;
          acquire_ctx.set_deadline(std::chrono::system_clock::now() +
                                   std::chrono::seconds(10));
          v1::AcquireRequest acquire;
          acquire.set_dependency(dependency);
          v1::AcquireResponse granted;
          grpc::Status s = stub->Acquire(&acquire_ctx, acquire, &granted);
          if (!s.ok()) {
            ++c.acquire_errors;
            note(absl::StrCat("prelude Acquire ", dependency, ": ",
                              s.error_message()));
            break;
          }
          ++c.acquires;
          if (!granted.allowed()) {
            ++c.rejected;
            note(absl::StrCat("prelude Acquire ", dependency,
                              " rejected while closed"));
            break;
          }
          ++c.allowed;
          grpc::ClientContext report_ctx;
          report_ctx.set_deadline(std::chrono::system_clock::now() +
                                  std::chrono::seconds(10));
          v1::ReportRequest report;
          report.set_dependency(dependency);
          report.set_permit(granted.permit());
          report.set_outcome(v1::OUTCOME_SERVER_ERROR);
          v1::ReportResponse answer;
          s = stub->Report(&report_ctx, report, &answer);
          if (!s.ok()) {
            ++c.report_errors;
            note(absl::StrCat("prelude Report ", dependency, ": ",
                              s.error_message()));
            break;
          }
          ++c.reports;
          ++c.reports_by_class[static_cast<int>(SentClass::kServerError)];
          ++c.reports_by_effect[answer.effect()];
          open = answer.state() == v1::STATE_OPEN;
        }
        if (!open) note(absl::StrCat("prelude: ", dependency, " did not open"));
      }
    });
  }
  for (std::thread& t : threads) t.join();
  LoadCounts total;
  for (const LoadCounts& c : counts) total.Add(c);
  return total;
}

// Sum of every sample named `name` whose labels include each of `labels`.
double SumOf(const std::vector<PromSample>& samples, absl::string_view name,
             const std::map<std::string, std::string>& labels = {}) {
  double sum = 0;
  for (const PromSample& s : samples) {
    if (s.name != name) continue;
    bool match = true;
    for (const auto& [k, v] : labels) {
      auto it = s.labels.find(k);
      if (it == s.labels.end() || it->second != v) match = false;
    }
    if (match) sum += s.value;
  }
  return sum;
}

// Sample lines (not comments, not blank) in an exposition.
size_t SampleLines(absl::string_view text) {
  size_t n = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    line = absl::StripAsciiWhitespace(line);
    if (!line.empty() && line[0] != '#') ++n;
  }
  return n;
}

// Scrapes /metrics once a second until stopped, checking each scrape: 200,
// every sample line parses, the process families are there, and the
// counters that must only grow (reports, reloads) never go back.
class Scraper {
 public:
  explicit Scraper(int port) : port_(port) {
    thread_ = std::thread([this] { Run(); });
  }
  ~Scraper() { Stop(); }

  void Stop() {
    stop_.store(true);
    if (thread_.joinable()) thread_.join();
  }

  // breakerd_config_reloads_total{result="success"} at the last good
  // scrape; -1 before any.
  double reload_successes() const { return reload_successes_.load(); }
  int scrapes() const { return scrapes_.load(); }
  // Size of the last 200 body.
  size_t body_bytes() const { return body_bytes_.load(); }
  // Scrapes that failed a check, and the first failure.
  int bad_scrapes() const {
    absl::MutexLock lock(&mu_);
    return bad_scrapes_;
  }
  std::string first_problem() const {
    absl::MutexLock lock(&mu_);
    return first_problem_;
  }
  absl::Duration slowest() const {
    absl::MutexLock lock(&mu_);
    return slowest_;
  }

 private:
  void Run() {
    absl::Time next = absl::Now();
    double last_reports = 0;
    double last_reloads = 0;
    while (!stop_.load()) {
      const absl::Time start = absl::Now();
      const HttpResponse r = HttpGet(port_, "/metrics");
      const absl::Duration took = absl::Now() - start;
      ++scrapes_;
      std::string problem;
      if (r.status != 200) {
        problem = absl::StrCat("status ", r.status);
      } else {
        body_bytes_.store(r.body.size());
        const std::vector<PromSample> samples = ParsePrometheus(r.body);
        const size_t lines = SampleLines(r.body);
        const double reports = SumOf(samples, "breakerd_reports_total");
        const double reloads = SumOf(samples, "breakerd_config_reloads_total",
                                     {{"result", "success"}});
        if (samples.size() != lines) {
          problem = absl::StrCat(lines - samples.size(), " of ", lines,
                                 " sample lines do not parse");
        } else if (SumOf(samples, "breakerd_build_info") != 1 ||
                   SumOf(samples, "breakerd_breakers") < 1) {
          problem = "breakerd_build_info or breakerd_breakers missing";
        } else if (reports < last_reports || reloads < last_reloads) {
          problem = absl::StrCat("a counter went back: reports ", last_reports,
                                 " -> ", reports, ", reloads ", last_reloads,
                                 " -> ", reloads);
        }
        last_reports = std::max(last_reports, reports);
        last_reloads = std::max(last_reloads, reloads);
        if (problem.empty()) reload_successes_.store(reloads);
      }
      {
        absl::MutexLock lock(&mu_);
        slowest_ = std::max(slowest_, took);
        if (!problem.empty()) {
          ++bad_scrapes_;
          if (first_problem_.empty()) {
            first_problem_ =
                absl::StrCat("scrape ", scrapes_.load(), ": ", problem);
          }
        }
      }
      next += absl::Seconds(1);
      while (!stop_.load() && absl::Now() < next) {
        absl::SleepFor(absl::Milliseconds(20));
      }
    }
  }

  const int port_;
  std::atomic<bool> stop_{false};
  std::atomic<double> reload_successes_{-1};
  std::atomic<int> scrapes_{0};
  std::atomic<size_t> body_bytes_{0};
  mutable absl::Mutex mu_;
  int bad_scrapes_ ABSL_GUARDED_BY(mu_) = 0;
  std::string first_problem_ ABSL_GUARDED_BY(mu_);
  absl::Duration slowest_ ABSL_GUARDED_BY(mu_) = absl::ZeroDuration();
  std::thread thread_;
};

// Prints one figure and records it as a test property.
void Figure(const std::string& key, const std::string& value) {
  std::printf("[soak] %s = %s\n", key.c_str(), value.c_str());
  std::fflush(stdout);
  ::testing::Test::RecordProperty(key, value);
}
void Figure(const std::string& key, double value) {
  Figure(key, absl::StrFormat("%.1f", value));
}
void Figure(const std::string& key, int64_t value) {
  Figure(key, absl::StrCat(value));
}
void Figure(const std::string& key, uint64_t value) {
  Figure(key, absl::StrCat(value));
}
void Figure(const std::string& key, int value) {
  Figure(key, absl::StrCat(value));
}

// Sleeps until `t` (the pacing of the driver's 1 s ticks).
void SleepUntil(absl::Time t) {
  const absl::Duration left = t - absl::Now();
  if (left > absl::ZeroDuration()) absl::SleepFor(left);
}

constexpr int64_t kMiB = 1024;  // in KiB

// 1. At capacity for BREAKERD_SOAK_SECONDS with scrapes and reloads: no RPC
// error, every report counted, memory and descriptors flat after warm-up.
TEST(SoakTest, SixtySecondsAtCapacity) {
  const int soak_seconds = SoakSeconds();
  // Warm-up: the first quarter (15 s of 60), after the prelude, the ramp-up
  // and the capacity measurement. By then every breaker exists and exports
  // its series, every connection is up and the allocator has its working
  // set.
  const int warmup_seconds = soak_seconds / 4;

  BreakerdProcess proc;
  const std::string config = proc.WriteFile("config.yaml", kConfigA);
  ASSERT_TRUE(proc.Start({"--config=" + config, "--config-poll-interval=1s"}));

  LoadOptions options;
  options.targets = SoakTargets();
  options.channels = Channels(proc);
  options.inflight = kInflight;
  options.retry_share = kRetryShare;
  const LoadCounts prelude =
      OpenEveryBreaker(options.channels, options.targets);
  ASSERT_EQ(prelude.acquire_errors + prelude.report_errors, 0u)
      << prelude.first_error;
  ASSERT_TRUE(prelude.first_error.empty()) << prelude.first_error;
  ClosedLoopLoad load(std::move(options));
  const absl::Time load_start = absl::Now();
  load.Start();
  // Ramp-up: every slot busy (a bounded poll).
  const absl::Time ramp_deadline = absl::Now() + absl::Seconds(30);
  while (load.completed() < 2 * kDependencies && absl::Now() < ramp_deadline) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  ASSERT_GE(load.completed(), 2u * kDependencies) << "no progress";

  // Capacity: what this closed loop completes on this machine right now.
  const absl::Time capacity_start = absl::Now();
  const uint64_t capacity_from = load.completed();
  absl::SleepFor(kCapacityPeriod);
  const double capacity = (load.completed() - capacity_from) /
                          absl::ToDoubleSeconds(absl::Now() - capacity_start);
  Figure("capacity_calls_per_second", capacity);

  Scraper scraper(proc.metrics_port());
  const absl::Time soak_start = absl::Now();
  const uint64_t soak_from = load.completed();
  std::optional<int64_t> rss_warm, rss_end;
  std::optional<int> fd_warm;
  uint64_t calls_at_warm = 0, calls_at_end = 0;
  int rewrites = 0, sighups = 0, late_reloads = 0;
  uint64_t last_completed = soak_from;
  absl::Time last_progress = soak_start;
  absl::Duration longest_stall = absl::ZeroDuration();
  uint64_t window_from = soak_from;
  std::string throughput;   // calls/s of each 5 s window
  std::string rss_series;   // VmRSS (KiB) at the end of each 5 s window
  std::string body_series;  // /metrics bytes at the end of each 5 s window
  for (int tick = 1; tick <= soak_seconds; ++tick) {
    SleepUntil(soak_start + absl::Seconds(tick));
    const absl::Time now = absl::Now();
    const uint64_t completed = load.completed();
    if (completed != last_completed) {
      last_completed = completed;
      last_progress = now;
    }
    longest_stall = std::max(longest_stall, now - last_progress);
    if (tick % 5 == 0) {
      absl::StrAppend(&throughput, throughput.empty() ? "" : " ",
                      (completed - window_from) / 5);
      window_from = completed;
      absl::StrAppend(&rss_series, rss_series.empty() ? "" : " ",
                      ResidentKiB(proc.pid()).value_or(-1));
      absl::StrAppend(&body_series, body_series.empty() ? "" : " ",
                      scraper.body_bytes());
    }
    // Descriptors: the fewest seen over three ticks from warm-up, so that a
    // scrape connection or a config read in progress does not count.
    if (tick >= warmup_seconds && tick < warmup_seconds + 3) {
      const std::optional<int> fds = OpenFdCount(proc.pid());
      ASSERT_TRUE(fds.has_value()) << "breakerd is gone";
      fd_warm = fd_warm.has_value() ? std::min(*fd_warm, *fds) : *fds;
    }
    if (tick == warmup_seconds) {
      rss_warm = ResidentKiB(proc.pid());
      calls_at_warm = completed;
    }
    if (tick == soak_seconds) {
      rss_end = ResidentKiB(proc.pid());
      calls_at_end = completed;
    }
    if (tick % static_cast<int>(absl::ToInt64Seconds(kReloadEvery)) == 0 &&
        tick < soak_seconds) {
      // The previous rewrite must have been applied by now (poll: 1 s).
      if (rewrites > 0 && scraper.reload_successes() < rewrites) {
        ++late_reloads;
      }
      ++rewrites;
      proc.WriteFile("config.yaml", rewrites % 2 == 1 ? kConfigB : kConfigA);
      // Every other rewrite is also signalled, as an operator would.
      if (rewrites % 2 == 0) {
        ASSERT_TRUE(proc.Signal(SIGHUP));
        ++sighups;
      }
    }
  }
  const absl::Duration soak_duration = absl::Now() - soak_start;
  const uint64_t soak_calls = load.completed() - soak_from;
  ASSERT_TRUE(load.Stop(absl::Seconds(30))) << "calls did not end";
  scraper.Stop();
  ASSERT_TRUE(proc.running()) << "breakerd died under load";

  // The last rewrite, too, must be applied: a bounded poll.
  std::string metrics;
  const absl::Time reload_deadline = absl::Now() + absl::Seconds(5);
  std::vector<PromSample> samples;
  do {
    metrics = proc.Metrics();
    samples = ParsePrometheus(metrics);
    if (SumOf(samples, "breakerd_config_reloads_total",
              {{"result", "success"}}) >= rewrites) {
      break;
    }
    absl::SleepFor(absl::Milliseconds(100));
  } while (absl::Now() < reload_deadline);

  // Descriptors once quiet; a closing scrape socket may take a moment.
  std::optional<int> fd_end;
  const absl::Time fd_deadline = absl::Now() + absl::Seconds(3);
  do {
    fd_end = OpenFdCount(proc.pid());
    if (!fd_end.has_value() || !fd_warm.has_value() || *fd_end <= *fd_warm) {
      break;
    }
    absl::SleepFor(absl::Milliseconds(50));
  } while (absl::Now() < fd_deadline);

  LoadCounts counts = load.Counts();
  counts.Add(prelude);
  const double server_reports = SumOf(samples, "breakerd_reports_total");
  const double server_acquires = SumOf(samples, "breakerd_acquire_total");
  const double server_granted =
      SumOf(samples, "breakerd_acquire_total", {{"decision", "allowed"}}) +
      SumOf(samples, "breakerd_acquire_total", {{"decision", "probe"}});
  const double reloads_ok =
      SumOf(samples, "breakerd_config_reloads_total", {{"result", "success"}});
  const double reloads_failed =
      SumOf(samples, "breakerd_config_reloads_total", {{"result", "failure"}});
  const double opens =
      SumOf(samples, "breakerd_transitions_total", {{"to", "open"}});
  const double probe_closes = SumOf(samples, "breakerd_transitions_total",
                                    {{"reason", "probe_succeeded"}});
  const double probe_reopens = SumOf(samples, "breakerd_transitions_total",
                                     {{"reason", "probe_failed"}});

  // The figures, for the record.
  Figure("soak_seconds", absl::ToDoubleSeconds(soak_duration));
  Figure("soak_calls_per_second",
         soak_calls / absl::ToDoubleSeconds(soak_duration));
  Figure("rpcs_per_second_whole_run",
         (counts.acquires + counts.reports) /
             absl::ToDoubleSeconds(absl::Now() - load_start));
  Figure("calls_per_second_each_5s", throughput);
  Figure("rss_kib_each_5s", rss_series);
  Figure("metrics_bytes_each_5s", body_series);
  Figure("acquires", counts.acquires);
  Figure("acquires_rejected", counts.rejected);
  Figure("retries", counts.retries);
  Figure("retries_allowed", counts.retries_allowed);
  Figure("probes", counts.probes);
  Figure("reports_sent", counts.reports);
  Figure("reports_counted", static_cast<int64_t>(server_reports));
  for (int c = 0; c < kSentClassCount; ++c) {
    Figure(absl::StrCat("reports_sent_",
                        SentClassLabel(static_cast<SentClass>(c))),
           counts.reports_by_class[c]);
  }
  Figure("reports_late", counts.reports_by_effect[v1::EFFECT_LATE]);
  Figure("rpc_errors", counts.acquire_errors + counts.report_errors);
  Figure("transitions_to_open", static_cast<int64_t>(opens));
  Figure("probe_succeeded", static_cast<int64_t>(probe_closes));
  Figure("probe_failed", static_cast<int64_t>(probe_reopens));
  Figure("config_rewrites", rewrites);
  Figure("config_sighups", sighups);
  Figure("config_reloads_success", static_cast<int64_t>(reloads_ok));
  Figure("scrapes", scraper.scrapes());
  Figure("slowest_scrape_ms", absl::ToDoubleMilliseconds(scraper.slowest()));
  Figure("longest_stall_ms", absl::ToDoubleMilliseconds(longest_stall));
  Figure("rss_warm_kib", rss_warm.value_or(-1));
  Figure("rss_end_kib", rss_end.value_or(-1));
  Figure("fd_warm", fd_warm.value_or(-1));
  Figure("fd_end", fd_end.value_or(-1));

  // No RPC error at all.
  EXPECT_EQ(counts.acquire_errors, 0u) << counts.first_error;
  EXPECT_EQ(counts.report_errors, 0u) << counts.first_error;
  EXPECT_GT(counts.reports, 0u);
  // Nothing lost: breakerd counted every Acquire and every Report sent (all
  // answered OK, above), each Report under the class it was sent as
  // (whichever of the three encodings carried it).
  EXPECT_EQ(server_acquires, counts.acquires);
  EXPECT_EQ(server_granted, counts.allowed);
  EXPECT_EQ(server_reports, counts.reports)
      << "reports sent and answered OK vs breakerd_reports_total";
  for (int c = 0; c < kSentClassCount; ++c) {
    const absl::string_view label = SentClassLabel(static_cast<SentClass>(c));
    EXPECT_EQ(SumOf(samples, "breakerd_reports_total",
                    {{"class", std::string(label)}}),
              counts.reports_by_class[c])
        << label;
  }
  EXPECT_GT(counts.retries, 0u);
  EXPECT_EQ(SumOf(samples, "breakerd_retries_total"), counts.retries);
  EXPECT_EQ(SumOf(samples, "breakerd_retries_total", {{"decision", "granted"}}),
            counts.retries_allowed);
  EXPECT_EQ(SumOf(samples, "breakerd_unknown_permits_total"), 0);
  EXPECT_EQ(SumOf(samples, "breakerd_breakers"), kDependencies);
  // Transitions really happened under load: breakers opened, and half-open
  // probes both closed and re-opened them.
  EXPECT_GT(opens, 0);
  EXPECT_GT(probe_closes, 0);
  EXPECT_GT(probe_reopens, 0);
  EXPECT_GT(counts.probes, 0u);
  // Never stalled: some call completed in every 5 s.
  EXPECT_LT(longest_stall, kStall);
  // Scrapes: every one 200 and parseable, counters monotonic.
  EXPECT_EQ(scraper.bad_scrapes(), 0) << scraper.first_problem();
  EXPECT_GE(scraper.scrapes(), soak_seconds - 2);
  // Reloads: every rewrite applied (before the next one), none refused; a
  // SIGHUP after the poll already applied the change is one more success.
  EXPECT_EQ(late_reloads, 0);
  EXPECT_GE(reloads_ok, rewrites);
  EXPECT_LE(reloads_ok, rewrites + sighups);
  EXPECT_EQ(reloads_failed, 0);

  // Resident memory flat after warm-up. By then every breaker exists and
  // exports every series it will (OpenEveryBreaker), the connections are
  // open, and each of the metrics server's two worker threads has built the
  // full exposition a few times (its malloc arena keeps that buffer for the
  // next scrape: a step of about 4x the exposition when it first outgrows
  // breakerd's size estimate, hence the prelude). Past that, each call costs
  // O(1) memory: fixed-size breakers, no per-permit state. The bound: 4 MiB
  // of allocator and gRPC slack plus 8 bytes per call after warm-up. A leak
  // of even one malloc chunk (32 bytes on 64-bit glibc) per call exceeds it
  // from 175,000 calls on, i.e. at 3,900 calls/s over the 45 s.
  ASSERT_TRUE(rss_warm.has_value() && rss_end.has_value());
  const uint64_t calls_after_warm = calls_at_end - calls_at_warm;
  const int64_t rss_bound =
      4 * kMiB + static_cast<int64_t>(8 * calls_after_warm / 1024);
  Figure("calls_after_warm", calls_after_warm);
  Figure("rss_bound_kib", rss_bound);
  EXPECT_LT(*rss_end - *rss_warm, rss_bound)
      << "VmRSS " << *rss_warm << " KiB at " << warmup_seconds << " s, "
      << *rss_end << " KiB at " << soak_seconds << " s";
  // Descriptors: connections are made once (the load's channels) or closed
  // after use (each scrape, each config read); growth would show one leak
  // per scrape (~1/s) or per reload (every 5 s). +2 leaves room for one
  // scrape socket and one config read caught open.
  ASSERT_TRUE(fd_warm.has_value() && fd_end.has_value());
  EXPECT_LE(*fd_end, *fd_warm + 2);
}

// 2. Permits are self-checking tags, not stored: a million Acquires whose
// permits are never reported leave resident memory where it was after the
// first 100,000 (a stored permit of even 5 bytes would show).
TEST(SoakTest, MillionPermitsNeverReportedDoNotGrowMemory) {
  constexpr int64_t kAcquires = 1'000'000;
  constexpr uint64_t kWarm = 100'000;
  constexpr int kKeptPerSlot = 2;

  // Over the unix socket (as a sidecar's application may call it): the
  // cheapest transport, so that the million calls take less time.
  BreakerdProcess proc;
  ASSERT_TRUE(proc.Start({}, /*with_unix_socket=*/true));

  LoadOptions options;
  for (int i = 0; i < 4; ++i) {
    options.targets.push_back({absl::StrCat("soak/never-reported-", i), {}});
  }
  for (int i = 0; i < kChannels; ++i) {
    options.channels.push_back(proc.ChannelTo(proc.unix_address(), i));
  }
  options.inflight = kInflight;
  options.report = false;
  options.max_acquires = kAcquires;
  options.keep_permits_per_slot = kKeptPerSlot;
  ClosedLoopLoad load(std::move(options));
  const absl::Time start = absl::Now();
  load.Start();

  const absl::Time warm_deadline = absl::Now() + absl::Seconds(60);
  while (load.completed() < kWarm && absl::Now() < warm_deadline) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  ASSERT_GE(load.completed(), kWarm) << "too slow";
  const std::optional<int64_t> rss_warm = ResidentKiB(proc.pid());
  const std::optional<int> fd_warm = OpenFdCount(proc.pid());
  const uint64_t warm_at = load.completed();

  ASSERT_TRUE(load.WaitDone(absl::Seconds(200))) << "calls did not end";
  const absl::Duration took = absl::Now() - start;
  const std::optional<int64_t> rss_end = ResidentKiB(proc.pid());
  const std::optional<int> fd_end = OpenFdCount(proc.pid());
  const LoadCounts counts = load.Counts();

  Figure("acquires", counts.acquires);
  Figure("seconds", absl::ToDoubleSeconds(took));
  Figure("acquires_per_second", counts.acquires / absl::ToDoubleSeconds(took));
  Figure("rss_at_warm_kib", rss_warm.value_or(-1));
  Figure("warm_measured_at_acquires", warm_at);
  Figure("rss_end_kib", rss_end.value_or(-1));
  Figure("fd_warm", fd_warm.value_or(-1));
  Figure("fd_end", fd_end.value_or(-1));

  EXPECT_EQ(counts.acquire_errors, 0u) << counts.first_error;
  EXPECT_EQ(counts.acquires, static_cast<uint64_t>(kAcquires));
  EXPECT_EQ(counts.allowed, static_cast<uint64_t>(kAcquires))
      << "a closed breaker with no reports allows every call";

  const std::vector<PromSample> samples = ParsePrometheus(proc.Metrics());
  EXPECT_EQ(SumOf(samples, "breakerd_acquire_total", {{"decision", "allowed"}}),
            kAcquires);
  EXPECT_EQ(SumOf(samples, "breakerd_reports_total"), 0);
  EXPECT_EQ(SumOf(samples, "breakerd_breakers"), 4);

  // 900,000 permits out past the warm measurement. Stored at even 5 bytes
  // each they would take 4.3 MiB.
  ASSERT_TRUE(rss_warm.has_value() && rss_end.has_value());
  EXPECT_LT(*rss_end - *rss_warm, 4 * kMiB)
      << "VmRSS " << *rss_warm << " KiB after " << warm_at << " Acquires, "
      << *rss_end << " KiB after " << kAcquires;
  ASSERT_TRUE(fd_warm.has_value() && fd_end.has_value());
  EXPECT_LE(*fd_end, *fd_warm);

  // Yet the oldest permits are still good: breakerd checks them, it does
  // not look them up.
  const std::vector<std::pair<std::string, uint64_t>> kept =
      load.kept_permits();
  ASSERT_EQ(kept.size(), static_cast<size_t>(kInflight * kKeptPerSlot));
  std::unique_ptr<v1::Breaker::Stub> stub = proc.BreakerStub();
  for (const auto& [dependency, permit] : kept) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() +
                     std::chrono::seconds(5));
    v1::ReportRequest request;
    request.set_dependency(dependency);
    request.set_permit(permit);
    request.set_outcome(v1::OUTCOME_SUCCESS);
    v1::ReportResponse response;
    const grpc::Status status = stub->Report(&ctx, request, &response);
    ASSERT_TRUE(status.ok())
        << dependency << " permit " << permit << ": " << status.error_message();
    EXPECT_EQ(response.effect(), v1::EFFECT_COUNTED_SUCCESS);
  }
}

}  // namespace
}  // namespace breakerd

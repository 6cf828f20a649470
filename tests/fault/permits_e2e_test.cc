// Hung calls, single-use permits, gentle recovery and eviction under a
// permit, against the real breakerd binary over gRPC (DESIGN.md "Hung
// calls, single-use permits, gentle recovery"). Real time, short configured
// durations; the exact rules are proven on the fake clock in
// tests/engine/permits_test.cc.
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "breakerd/v1/breaker.grpc.pb.h"
#include "gtest/gtest.h"
#include "tests/e2e/breakerd_process.h"
#include "tests/fault/fault_util.h"

namespace breakerd {
namespace fault {
namespace {

class PermitsE2eTest : public ::testing::Test {
 protected:
  ::testing::AssertionResult StartWith(const std::string& config_yaml,
                                       std::vector<std::string> flags = {}) {
    flags.push_back("--config=" + proc_.WriteFile("config.yaml", config_yaml));
    ::testing::AssertionResult started = proc_.Start(flags);
    if (started) stub_ = proc_.BreakerStub();
    return started;
  }

  // The breakerd_transitions_total sample of `dependency` for one reason.
  std::optional<double> Transitions(const std::string& dependency,
                                    const std::string& from,
                                    const std::string& to,
                                    const std::string& reason) {
    return MetricValue(
        proc_, absl::StrCat("breakerd_transitions_total{dependency=\"",
                            dependency, "\",from=\"", from, "\",to=\"", to,
                            "\",reason=\"", reason, "\"}"));
  }

  // First attempts made now, one at a time; the admitted ones are reported
  // with `outcome`. Returns how many were admitted.
  int Attempts(const std::string& dependency, int n,
               v1::Outcome outcome = v1::OUTCOME_SUCCESS) {
    int admitted = 0;
    for (int i = 0; i < n; ++i) {
      Result<v1::AcquireResponse> a = Acquire(stub_.get(), dependency);
      EXPECT_TRUE(a.status.ok()) << Describe(a.status);
      if (a.response.allowed()) {
        ++admitted;
        EXPECT_TRUE(
            Report(stub_.get(), dependency, a.response.permit(), outcome)
                .status.ok());
      } else {
        EXPECT_EQ(a.response.reason(), v1::REJECT_REASON_RAMP);
      }
    }
    return admitted;
  }

  // Waits out the cooldown, then sends the probe with `outcome`.
  void Probe(const std::string& dependency, v1::Outcome outcome) {
    v1::AcquireResponse probe;
    ASSERT_TRUE(WaitUntil(
        [&] {
          Result<v1::AcquireResponse> a = Acquire(stub_.get(), dependency);
          probe = a.response;
          return a.status.ok() && a.response.probe();
        },
        absl::Seconds(10)));
    ASSERT_TRUE(
        Report(stub_.get(), dependency, probe.permit(), outcome).status.ok());
  }

  BreakerdProcess proc_;
  std::unique_ptr<v1::Breaker::Stub> stub_;
};

TEST_F(PermitsE2eTest, TwentyHungCallsOpenTheBreakerOnTheNextAcquire) {
  ASSERT_TRUE(StartWith(R"(
defaults:
  failure_rate: { threshold: 0.5, min_calls: 20, window: 30s }
  cooldown: { base: 60s, jitter: 0 }
  inflight: { hang_after: 1s }
)"));
  const std::string dep = "hung/upstream";
  for (int i = 0; i < 20; ++i) {
    Result<v1::AcquireResponse> a = Acquire(stub_.get(), dep);
    ASSERT_TRUE(a.status.ok() && a.response.allowed()) << Describe(a.status);
  }
  EXPECT_EQ(GetState(stub_.get(), dep).response.inflight(), 20u);
  absl::SleepFor(absl::Milliseconds(1100));
  // A scrape shows; it does not move the breaker.
  EXPECT_EQ(GetState(stub_.get(), dep).response.state(), v1::STATE_CLOSED);
  Result<v1::AcquireResponse> next = Acquire(stub_.get(), dep);
  ASSERT_TRUE(next.status.ok());
  EXPECT_FALSE(next.response.allowed());
  EXPECT_EQ(next.response.reason(), v1::REJECT_REASON_OPEN);
  Result<v1::BreakerStatus> s = GetState(stub_.get(), dep);
  EXPECT_EQ(s.response.state(), v1::STATE_OPEN);
  EXPECT_EQ(s.response.consecutive_failures(), 0u);
  EXPECT_EQ(s.response.inflight(), 0u);
  EXPECT_EQ(Transitions(dep, "closed", "open", "hung_calls"), 1);
  EXPECT_EQ(MetricValue(proc_, absl::StrCat("breakerd_hung_calls_total{"
                                            "dependency=\"",
                                            dep, "\"}")),
            20);
}

TEST_F(PermitsE2eTest, ARepeatedReportIsADuplicateAndChangesNothing) {
  ASSERT_TRUE(StartWith("defaults: { consecutive_failures: 5 }\n"));
  const std::string dep = "retried/report";
  for (int i = 0; i < 3; ++i) {
    Result<v1::AcquireResponse> a = Acquire(stub_.get(), dep);
    ASSERT_TRUE(a.status.ok());
    EXPECT_EQ(Report(stub_.get(), dep, a.response.permit(), v1::OUTCOME_TIMEOUT)
                  .response.effect(),
              v1::EFFECT_COUNTED_FAILURE);
    Result<v1::ReportResponse> again =
        Report(stub_.get(), dep, a.response.permit(), v1::OUTCOME_TIMEOUT);
    ASSERT_TRUE(again.status.ok()) << Describe(again.status);
    EXPECT_EQ(again.response.effect(), v1::EFFECT_DUPLICATE);
  }
  Result<v1::BreakerStatus> s = GetState(stub_.get(), dep);
  EXPECT_EQ(s.response.state(), v1::STATE_CLOSED);
  EXPECT_EQ(s.response.consecutive_failures(), 3u);
  EXPECT_EQ(MetricValue(proc_, absl::StrCat("breakerd_reports_total{"
                                            "dependency=\"",
                                            dep,
                                            "\",class=\"timeout\","
                                            "effect=\"duplicate\"}")),
            3);
}

TEST_F(PermitsE2eTest, ARampAdmitsAFewThenAllAndATripDuringItEscalates) {
  ASSERT_TRUE(StartWith(R"(
defaults:
  consecutive_failures: 3
  failure_rate: { threshold: 0 }
  cooldown: { base: 300ms, max: 10s, jitter: 0 }
  recovery: { ramp: 2s, start_share: 0.1 }
)"));
  const std::string dep = "coming/back";
  EXPECT_EQ(Attempts(dep, 3, v1::OUTCOME_TIMEOUT), 3);
  ASSERT_EQ(GetState(stub_.get(), dep).response.state(), v1::STATE_OPEN);
  Probe(dep, v1::OUTCOME_SUCCESS);
  const absl::Time closed = absl::Now();
  ASSERT_EQ(GetState(stub_.get(), dep).response.state(), v1::STATE_CLOSED);
  EXPECT_LT(GetState(stub_.get(), dep).response.admit_share(), 0.5);

  // Early in the ramp: about a tenth (the share grows while we count).
  const int early = Attempts(dep, 40);
  const double share_after = GetState(stub_.get(), dep).response.admit_share();
  EXPECT_GE(early, 3) << "share at the end: " << share_after;
  EXPECT_LE(early, 4 + static_cast<int>(40 * share_after))
      << "share at the end: " << share_after;
  // A retry is never allowed while ramping.
  if (share_after < 1) {
    Result<v1::AcquireResponse> retry = Acquire(stub_.get(), dep, 1);
    EXPECT_FALSE(retry.response.allowed());
    EXPECT_EQ(retry.response.reason(), v1::REJECT_REASON_RAMP);
  }
  absl::SleepFor(closed + absl::Milliseconds(2100) - absl::Now());
  EXPECT_EQ(Attempts(dep, 40), 40);
  EXPECT_EQ(GetState(stub_.get(), dep).response.admit_share(), 1.0);

  // Open again, a failed probe (escalation 1), a good one: the ramp starts
  // at escalation 1, and three failures during it re-open at level 2.
  EXPECT_EQ(Attempts(dep, 3, v1::OUTCOME_TIMEOUT), 3);
  Probe(dep, v1::OUTCOME_TIMEOUT);
  Probe(dep, v1::OUTCOME_SUCCESS);
  ASSERT_EQ(GetState(stub_.get(), dep).response.escalation_level(), 1u);
  int failures = 0;
  for (int i = 0; i < 200 && failures < 3; ++i) {
    Result<v1::AcquireResponse> a = Acquire(stub_.get(), dep);
    if (!a.response.allowed()) continue;
    Report(stub_.get(), dep, a.response.permit(), v1::OUTCOME_TIMEOUT);
    ++failures;
  }
  Result<v1::BreakerStatus> s = GetState(stub_.get(), dep);
  EXPECT_EQ(s.response.state(), v1::STATE_OPEN);
  EXPECT_EQ(s.response.escalation_level(), 2u);
  EXPECT_EQ(Transitions(dep, "closed", "open", "ramp_failed"), 1);
  EXPECT_GE(
      MetricValue(proc_, absl::StrCat("breakerd_acquire_total{"
                                      "dependency=\"",
                                      dep, "\",decision=\"rejected_ramp\"}"))
          .value_or(0),
      30);
}

// The issue's report: five calls longer than idle_ttl, reported as
// timeouts, were refused (the breaker had been evicted under them).
TEST_F(PermitsE2eTest, ABreakerWithPermitsOutOutlivesItsIdleTtl) {
  ASSERT_TRUE(StartWith(R"(
defaults:
  consecutive_failures: 5
  cooldown: { base: 60s, jitter: 0 }
limits: { idle_ttl: 1s }
)",
                        {"--evict-interval=100ms"}));
  const std::string dep = "slow/upstream";
  std::vector<uint64_t> permits;
  for (int i = 0; i < 5; ++i) {
    Result<v1::AcquireResponse> a = Acquire(stub_.get(), dep);
    ASSERT_TRUE(a.status.ok());
    permits.push_back(a.response.permit());
  }
  absl::SleepFor(absl::Milliseconds(1500));  // several eviction passes
  for (uint64_t permit : permits) {
    Result<v1::ReportResponse> r =
        Report(stub_.get(), dep, permit, v1::OUTCOME_TIMEOUT);
    ASSERT_TRUE(r.status.ok()) << Describe(r.status);
  }
  EXPECT_EQ(GetState(stub_.get(), dep).response.state(), v1::STATE_OPEN);
}

}  // namespace
}  // namespace fault
}  // namespace breakerd

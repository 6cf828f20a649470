// Fleet mode's evidence end to end: real breakerd processes on a real
// redis-server, syncing every 50 ms. One sick pod opens alone; failures
// spread over the fleet open everyone; a quorum of trips opens the rest;
// the upstream's Retry-After holds everywhere. The fleet's clock is Redis's:
// a sidecar whose clock is a minute off (libfaketime, from Debian's
// faketime package) still ends a cooldown with the others.
#include <signal.h>
#include <unistd.h>

#include <array>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "tests/e2e/breakerd_process.h"
#include "tests/e2e/fleet_harness.h"

namespace breakerd {
namespace {

constexpr char kLibFaketime[] =
    "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1";

// Five timeouts open a breaker for 3 s, published at once (quorum 1).
constexpr char kSkewConfig[] = R"(
defaults:
  consecutive_failures: 5
  failure_rate: { threshold: 0 }
  cooldown: { base: 3s, max: 12s, jitter: 0 }
  probe: { lease: 1s }
  fleet: { quorum: 1 }
)";

// Quorum 2. Defaults: five failures in a row open for 1 s. "spread/*" and
// "rate/*": the failure-rate rule alone (at least 20 / 10 calls in 10 s).
constexpr char kEvidenceConfig[] = R"(
defaults:
  consecutive_failures: 5
  failure_rate: { threshold: 0 }
  cooldown: { base: 1s, max: 4s, jitter: 0 }
  probe: { lease: 1s }
  fleet: { quorum: 2 }
policies:
  - match: "spread/*"
    consecutive_failures: 0
    failure_rate: { threshold: 0.5, min_calls: 20, window: 10s }
  - match: "rate/*"
    consecutive_failures: 0
    failure_rate: { threshold: 0.5, min_calls: 10, window: 10s }
)";

class FleetEvidenceTest : public FleetTest {
 protected:
  // n sidecars on kEvidenceConfig, each counting all n as members.
  void StartFleet(int n) {
    for (int i = 0; i < n; ++i) {
      StartSidecar({"--fleet-sync-interval=50ms"}, kEvidenceConfig);
    }
    for (auto& p : sidecars_) {
      BreakerdProcess* proc = p.get();
      ASSERT_TRUE(WaitUntil([proc, n] {
        return Sample(proc->Metrics(), "breakerd_fleet_members") == n;
      })) << proc->Log();
    }
  }
  void Calls(int i, const std::string& dep, int successes, int failures) {
    for (int n = 0; n < successes + failures; ++n) {
      Acquired a = Acquire(stubs_[i].get(), dep);
      ASSERT_TRUE(a.status.ok() && a.response.allowed())
          << "sidecar " << i << " call " << n;
      ASSERT_TRUE(
          Report(stubs_[i].get(), dep, a.response.permit(),
                 n < successes ? v1::OUTCOME_SUCCESS : v1::OUTCOME_TIMEOUT)
              .ok());
    }
  }
  // The value of `selector` on sidecar i's /metrics (-1 if absent).
  double Metric(int i, const std::string& selector) {
    return Sample(sidecars_[i]->Metrics(), selector).value_or(-1);
  }
  // The half-open probe through sidecar i (the fleet-wide claim takes a
  // round trip to Redis: ask until granted), reported as a success.
  void ProbeSucceeds(int i, const std::string& dep) {
    std::optional<uint64_t> permit;
    ASSERT_TRUE(WaitUntil([&] {
      Acquired a = Acquire(stubs_[i].get(), dep);
      if (a.status.ok() && a.response.probe()) permit = a.response.permit();
      return permit.has_value();
    })) << "no probe granted on sidecar "
        << i;
    ASSERT_TRUE(
        Report(stubs_[i].get(), dep, *permit, v1::OUTCOME_SUCCESS).ok());
  }
  bool AllIn(const std::string& dep, v1::State state) {
    for (auto& stub : stubs_) {
      if (StateOf(stub.get(), dep) != state) return false;
    }
    return true;
  }
};

// Sidecar 0 sees only timeouts (its node is sick); 1 and 2 only successes.
// 0 opens alone, for two cooldowns and more the others allow every call,
// and when 0's episode ends it is counted as never confirmed.
TEST_F(FleetEvidenceTest, ALoneSickPodOpensAloneAndIsCountedUnconfirmed) {
  StartFleet(3);
  const std::string dep = "sick/dep";
  Trip(0, dep);
  const absl::Time until = absl::Now() + absl::Milliseconds(2500);
  while (absl::Now() < until) {
    Calls(1, dep, 1, 0);
    Calls(2, dep, 1, 0);
    absl::SleepFor(absl::Milliseconds(20));
  }
  EXPECT_EQ(StateOf(stubs_[1].get(), dep), v1::STATE_CLOSED);
  EXPECT_EQ(StateOf(stubs_[2].get(), dep), v1::STATE_CLOSED);
  const std::string unconfirmed = absl::StrCat(
      "breakerd_fleet_unconfirmed_opens_total{dependency=\"", dep, "\"}");
  EXPECT_EQ(Metric(0, unconfirmed), -1);  // not over yet
  ProbeSucceeds(0, dep);
  ASSERT_EQ(StateOf(stubs_[0].get(), dep), v1::STATE_CLOSED);
  EXPECT_EQ(Metric(0, unconfirmed), 1);
  EXPECT_EQ(Metric(0, "breakerd_fleet_events_total{event=\"published\"}"), 0);
  for (int i = 1; i < 3; ++i) {
    EXPECT_EQ(Metric(i, unconfirmed), -1) << "sidecar " << i;
  }
}

// Two sidecars at equal traffic, one failing every call: its own rate rule
// opens it, but the fleet's window (50 % of 20 calls) holds one source.
TEST_F(FleetEvidenceTest, OneFailingOfTwoAtEqualTrafficDoesNotOpenTheFleet) {
  StartFleet(2);
  const std::string dep = "rate/dep";
  Calls(0, dep, 0, 10);
  ASSERT_EQ(StateOf(stubs_[0].get(), dep), v1::STATE_OPEN);
  absl::SleepFor(absl::Milliseconds(300));  // flushed
  Calls(1, dep, 10, 0);
  ASSERT_TRUE(WaitUntil([&] {
    std::optional<v1::BreakerStatus> s = GetState(stubs_[1].get(), dep);
    return s.has_value() && s->fleet_window_calls() == 20;
  })) << "sidecar 1 never read the fleet's 20 calls";
  std::optional<v1::BreakerStatus> s = GetState(stubs_[1].get(), dep);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->fleet_window_failures(), 10u);
  EXPECT_EQ(s->state(), v1::STATE_CLOSED);
  absl::SleepFor(absl::Milliseconds(300));
  EXPECT_EQ(StateOf(stubs_[1].get(), dep), v1::STATE_CLOSED);
  EXPECT_NEAR(Metric(1, absl::StrCat("breakerd_fleet_failure_rate{dependency="
                                     "\"",
                                     dep, "\"}")),
              0.5, 1e-9);
}

// Three sidecars each see 8 calls and 5 failures: none reaches min_calls
// (20) alone; the fleet's window (24 calls, 15 failures, 3 sources) opens
// all three, reason fleet_failure_rate. After the fleet's probe closes
// them, the old failures do not open them again.
TEST_F(FleetEvidenceTest, SpreadOutFailuresOpenEverySidecarByTheFleetsWindow) {
  StartFleet(3);
  const std::string dep = "spread/dep";
  // 3 successes, then 5 timeouts on each. The fleet may cross before the
  // last sidecar's last calls (20 of its calls at 50 % are flushed already,
  // e.g. on a slow sanitizer build): a call refused then is refused
  // because the fleet opened.
  for (int i = 0; i < 3; ++i) {
    for (int n = 0; n < 8; ++n) {
      Acquired a = Acquire(stubs_[i].get(), dep);
      ASSERT_TRUE(a.status.ok());
      if (!a.response.allowed()) {
        ASSERT_EQ(a.response.reason(), v1::REJECT_REASON_OPEN)
            << "sidecar " << i << " call " << n;
        break;
      }
      ASSERT_TRUE(Report(stubs_[i].get(), dep, a.response.permit(),
                         n < 3 ? v1::OUTCOME_SUCCESS : v1::OUTCOME_TIMEOUT)
                      .ok());
    }
  }
  EXPECT_TRUE(WaitUntil([&] { return AllIn(dep, v1::STATE_OPEN); }))
      << "not every sidecar opened";
  // Every sidecar opened on the fleet's window, none on its own.
  const std::string transition =
      absl::StrCat("breakerd_transitions_total{dependency=\"", dep,
                   "\",from=\"closed\",to=\"open\",reason=\"");
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(Metric(i, transition + "fleet_failure_rate\"}"), 1) << i;
    EXPECT_EQ(Metric(i, transition + "failure_rate\"}"), -1) << i;
  }

  absl::SleepFor(absl::Seconds(1));  // the cooldown
  ProbeSucceeds(0, dep);
  ASSERT_TRUE(WaitUntil([&] { return AllIn(dep, v1::STATE_CLOSED); }));
  for (int i = 0; i < 3; ++i) Calls(i, dep, 1, 0);
  absl::SleepFor(absl::Milliseconds(500));
  for (int i = 0; i < 3; ++i) {
    std::optional<v1::BreakerStatus> s = GetState(stubs_[i].get(), dep);
    ASSERT_TRUE(s.has_value());
    EXPECT_EQ(s->state(), v1::STATE_CLOSED) << "sidecar " << i;
    EXPECT_EQ(s->fleet_window_failures(), 0u) << "sidecar " << i;
  }
}

// Two of three trip on their own: the third opens without a failure.
TEST_F(FleetEvidenceTest, AQuorumOfTripsOpensTheSidecarThatSawNoFailure) {
  StartFleet(3);
  const std::string dep = "quorum/dep";
  Calls(2, dep, 1, 0);
  Trip(0, dep);
  absl::SleepFor(absl::Milliseconds(300));
  ASSERT_EQ(StateOf(stubs_[2].get(), dep), v1::STATE_CLOSED)
      << "one trip is not a quorum";
  Trip(1, dep);
  EXPECT_TRUE(
      WaitUntil([&] { return StateOf(stubs_[2].get(), dep) == v1::STATE_OPEN; },
                absl::Seconds(2)));
  EXPECT_EQ(Metric(1, "breakerd_fleet_events_total{event=\"confirmed_open\"}"),
            1);
}

// Five 429s whose Retry-After (3 s) is longer than the cooldown (1 s) on
// one sidecar: the upstream's limit holds for every pod, at once, until
// that time.
TEST_F(FleetEvidenceTest, AnUpstreamsRetryAfterOpensEverySidecarUntilThatTime) {
  StartFleet(3);
  const std::string dep = "limited/dep";
  for (int n = 0; n < 5; ++n) {
    Acquired a = Acquire(stubs_[0].get(), dep);
    ASSERT_TRUE(a.status.ok() && a.response.allowed());
    grpc::ClientContext ctx;
    v1::ReportRequest req;
    req.set_dependency(dep);
    req.set_permit(a.response.permit());
    req.set_outcome(v1::OUTCOME_RATE_LIMITED);
    req.mutable_retry_after()->set_seconds(3);
    v1::ReportResponse resp;
    ASSERT_TRUE(stubs_[0]->Report(&ctx, req, &resp).ok());
  }
  const absl::Time tripped = absl::Now();
  ASSERT_EQ(StateOf(stubs_[0].get(), dep), v1::STATE_OPEN);
  EXPECT_TRUE(
      WaitUntil([&] { return AllIn(dep, v1::STATE_OPEN); }, absl::Seconds(1)));
  absl::SleepFor(tripped + absl::Seconds(2) - absl::Now());
  EXPECT_TRUE(AllIn(dep, v1::STATE_OPEN)) << "not held until the Retry-After";
  EXPECT_TRUE(WaitUntil([&] { return AllIn(dep, v1::STATE_HALF_OPEN); },
                        absl::Seconds(3)));
}

// The operator's newest decision wins on every pod. The issue's sequence:
// ForceOpen through A (B follows), SIGTERM A (its state file keeps
// forced_open), Reset through B, restart A. A used to come back
// FORCED_OPEN and refuse everything while B was closed.
TEST_F(FleetEvidenceTest, AResetMadeWhileAPodWasDownWinsWhenItComesBack) {
  const std::string token = scratch_.WriteFile("admin-token", kFleetAdminToken);
  const std::vector<std::string> a_flags = {
      "--admin-token-file=" + token,
      "--state-file=" + scratch_.dir() + "/a.state",
      "--fleet-sync-interval=50ms"};
  StartSidecar(a_flags, kEvidenceConfig);
  StartSidecar({"--admin-token-file=" + token, "--fleet-sync-interval=50ms"},
               kEvidenceConfig);
  const std::string dep = "override/dep";
  v1::AdminResponse response;
  ASSERT_TRUE(ForceOpen(sidecars_[0].get(), dep, &response).ok());
  ASSERT_TRUE(WaitUntil(
      [&] { return StateOf(stubs_[1].get(), dep) == v1::STATE_FORCED_OPEN; }));
  ASSERT_TRUE(sidecars_[0]->Signal(SIGTERM));
  ASSERT_EQ(sidecars_[0]->WaitExit(kWait), 0);
  absl::SleepFor(absl::Milliseconds(50));  // a later decision, by any clock
  ASSERT_TRUE(ResetBreaker(sidecars_[1].get(), dep).ok());
  ASSERT_EQ(StateOf(stubs_[1].get(), dep), v1::STATE_CLOSED);

  StartSidecar(a_flags, kEvidenceConfig);  // A again, as sidecar 2
  EXPECT_TRUE(WaitUntil([&] {
    return StateOf(stubs_[2].get(), dep) == v1::STATE_CLOSED;
  })) << "A came back "
      << v1::State_Name(StateOf(stubs_[2].get(), dep));
  absl::SleepFor(absl::Milliseconds(300));
  EXPECT_EQ(StateOf(stubs_[2].get(), dep), v1::STATE_CLOSED);
  EXPECT_EQ(StateOf(stubs_[1].get(), dep), v1::STATE_CLOSED);
  Acquired a = Acquire(stubs_[2].get(), dep);
  EXPECT_TRUE(a.status.ok() && a.response.allowed());
}

// The same with the Reset made while Redis was away: B used to take the
// stored ForceOpen back when Redis returned.
TEST_F(FleetEvidenceTest, AResetMadeWhileRedisWasAwayWinsWhenItReturns) {
  const std::string token = scratch_.WriteFile("admin-token", kFleetAdminToken);
  for (int i = 0; i < 2; ++i) {
    StartSidecar({"--admin-token-file=" + token, "--fleet-sync-interval=50ms"},
                 kEvidenceConfig);
  }
  const std::string dep = "override/away";
  v1::AdminResponse response;
  ASSERT_TRUE(ForceOpen(sidecars_[0].get(), dep, &response).ok());
  ASSERT_TRUE(WaitUntil(
      [&] { return StateOf(stubs_[1].get(), dep) == v1::STATE_FORCED_OPEN; }));
  redis_->Kill();
  for (auto& p : sidecars_) {
    BreakerdProcess* proc = p.get();
    ASSERT_TRUE(WaitUntil([proc] { return FleetConnected(proc) == 0; }));
  }
  ASSERT_TRUE(ResetBreaker(sidecars_[1].get(), dep).ok());
  ASSERT_TRUE(redis_->Start(redis_->port()));
  for (auto& p : sidecars_) {
    BreakerdProcess* proc = p.get();
    ASSERT_TRUE(WaitUntil([proc] { return FleetConnected(proc) == 1; }));
  }
  // A hears B's newer Reset; B does not take the stored ForceOpen back.
  EXPECT_TRUE(WaitUntil([&] {
    return StateOf(stubs_[0].get(), dep) == v1::STATE_CLOSED;
  })) << "A stayed "
      << v1::State_Name(StateOf(stubs_[0].get(), dep));
  absl::SleepFor(absl::Milliseconds(300));
  EXPECT_EQ(StateOf(stubs_[1].get(), dep), v1::STATE_CLOSED);
  EXPECT_EQ(StateOf(stubs_[0].get(), dep), v1::STATE_CLOSED);
}

bool Sanitized() {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  return true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
  return true;
#else
  return false;
#endif
#else
  return false;
#endif
}

// Sidecars 1 and 2 run with their wall clocks 60 s ahead and 60 s behind
// (the monotonic clock, which the engine times cooldowns with, is left
// alone: only the wall clock differs between nodes). Sidecar 0 trips;
// each must leave OPEN within a second of sidecar 0, not a minute early
// (at once) or late.
TEST_F(FleetTest, ACooldownEndsTogetherOnNodesAMinuteAheadAndBehind) {
  if (Sanitized()) {
    GTEST_SKIP() << "libfaketime is preloaded, which the sanitizer runtimes "
                    "refuse; the release suite runs this test";
  }
  ASSERT_EQ(access(kLibFaketime, R_OK), 0)
      << kLibFaketime << " is missing: apt-get install faketime";
  const std::array<const char*, 3> offsets = {"", "+60s", "-60s"};
  for (const char* offset : offsets) {
    std::vector<std::string> env;
    if (*offset != '\0') {
      env = {absl::StrCat("LD_PRELOAD=", kLibFaketime),
             absl::StrCat("FAKETIME=", offset),
             "FAKETIME_DONT_FAKE_MONOTONIC=1", "FAKETIME_DONT_RESET=1"};
    }
    StartSidecar({"--fleet-sync-interval=50ms"}, kSkewConfig, env);
  }

  const std::string dep = "skew/dep";
  for (int i = 0; i < 3; ++i) Succeed(i, dep);
  Trip(0, dep);
  const absl::Time tripped = absl::Now();
  // Everyone holds the open period...
  for (int i = 1; i < 3; ++i) {
    EXPECT_TRUE(WaitUntil(
        [&] { return StateOf(stubs_[i].get(), dep) == v1::STATE_OPEN; },
        absl::Seconds(2)))
        << "sidecar " << i << " (" << offsets[i] << ") did not open";
  }
  // ...and leaves it when the origin does.
  std::array<std::optional<absl::Time>, 3> left;
  const absl::Time give_up = tripped + absl::Seconds(10);
  while (absl::Now() < give_up &&
         !(left[0].has_value() && left[1].has_value() && left[2].has_value())) {
    for (int i = 0; i < 3; ++i) {
      if (!left[i].has_value() &&
          StateOf(stubs_[i].get(), dep) == v1::STATE_HALF_OPEN) {
        left[i] = absl::Now();
      }
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
  ASSERT_TRUE(left[0].has_value()) << "the origin never went half-open";
  EXPECT_GE(*left[0] - tripped, absl::Milliseconds(2500));
  for (int i = 1; i < 3; ++i) {
    ASSERT_TRUE(left[i].has_value())
        << "sidecar " << i << " (" << offsets[i]
        << ") was still open 10 s after a 3 s cooldown began";
    EXPECT_LT(absl::AbsDuration(*left[i] - *left[0]), absl::Seconds(1))
        << "sidecar " << i << " (" << offsets[i] << ") left OPEN "
        << absl::FormatDuration(*left[i] - *left[0]) << " after the origin";
  }
}

}  // namespace
}  // namespace breakerd

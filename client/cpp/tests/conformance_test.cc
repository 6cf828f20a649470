// The client conformance scenarios (client/conformance/SCENARIOS.md) that
// apply to C++, each against the real breakerd binary with the numbers the
// scenario gives. Where the scenario is about time (burst, restart,
// hung-sidecar, wait-ready) the client has its defaults, a 20 ms
// decision_timeout; where it checks what breakerd counted or answered
// (shadow, cancel-call, classifier-raises, closed, soft-failure,
// first-non-retryable, ramp) it has a 2 s one, so that a loaded machine
// cannot turn a decision the check needs into a FAIL_OPEN. log-flap, which
// needs no breakerd, is in change_log_test.cc; cancel-acquire and pre-fork
// do not apply to C++.
#include <signal.h>

#include <atomic>
#include <chrono>
#include <iostream>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "breakerd/client.h"
#include "client_fixture.h"
#include "gmock/gmock.h"
#include "grpcpp/client_context.h"
#include "gtest/gtest.h"
#include "tests/e2e/breakerd_process.h"

namespace breakerd::client {
namespace {

using ::testing::HasSubstr;

class ConformanceTest : public ClientTest {
 protected:
  // Waits (at most 3 s, the scenarios' allowance for reports on their way)
  // until breakerd has one report for each permit it granted for `dep`.
  bool EveryPermitReported(const std::string& dep) {
    return WaitUntil([&] { return ReportsFor(dep) == Granted(dep); },
                     absl::Seconds(3));
  }

  // What GuardedBurst saw.
  struct Burst {
    int ran_once = 0;    // calls that ran once, as their own
    int own_result = 0;  // calls that returned their own (OK) status
    uint64_t failed_open = 0;
    // CPUs other programs kept busy meanwhile (OtherProcessesCpu).
    double other_cpus = 0;
    absl::Duration took;
  };

  // `calls` guarded calls of `dep` through `client`, one per thread,
  // started at once; each upstream call returns at once.
  Burst GuardedBurst(Client* client, const std::string& dep, int calls) {
    std::vector<int> ran(calls, 0);
    std::vector<absl::Status> results(calls, absl::UnknownError("not run"));
    absl::Notification go;
    std::vector<std::thread> threads;
    threads.reserve(calls);
    for (int i = 0; i < calls; ++i) {
      threads.emplace_back([&, i] {
        go.WaitForNotification();
        // A C++ guarded call returns its value through its captures: each
        // adds its own index + 1 to its own slot (so: ran once, its own).
        results[i] = client->Do(dep, [&, i] {
          ran[i] += i + 1;
          return absl::OkStatus();
        });
      });
    }
    const uint64_t fail_open = client->stats().fail_open;
    const OtherProcessesCpu others(proc_.pid());
    const absl::Time start = absl::Now();
    go.Notify();
    for (std::thread& t : threads) t.join();
    Burst b;
    b.took = absl::Now() - start;
    b.other_cpus = others.Cpus();
    b.failed_open = client->stats().fail_open - fail_open;
    for (int i = 0; i < calls; ++i) {
      b.ran_once += ran[i] == i + 1;
      b.own_result += results[i].ok();
    }
    return b;
  }

  // Waits until `client` decides `dep` with breakerd (a first decision on
  // a loaded machine can take longer than 20 ms), reporting the permit.
  bool DecidesWithBreakerd(Client* client, const std::string& dep) {
    return WaitUntil([&] {
      absl::StatusOr<Permit> p = client->Acquire(dep);
      return p.ok() && p->decision().source == DecisionSource::kSidecar;
    });
  }
};

// conformance: burst
// 1,000 threads, one guarded call each, started at once on a healthy
// breakerd, after a warm-up of 100 decided by breakerd. A shared machine
// delays any process now and then by more than the 20 ms decision_timeout,
// and a decision answered late fails open, as it should: a burst with one
// is tried again (at most 5 bursts, each of a new dependency) only when
// other programs kept half a CPU or more busy meanwhile; one beside less
// fails the test, and so do 5 busy ones.
TEST_F(ConformanceTest, AThousandConcurrentCallsNeverFailOpen) {
  auto client = NewClientAsConfigured();
  constexpr int kCalls = 1000;
  constexpr int kWarmUp = 100;
  constexpr int kBursts = 5;
  constexpr double kBusy = 0.5;
  std::vector<std::string> excused;
  for (int burst = 1; burst <= kBursts; ++burst) {
    // gRPC starts its threads lazily: first a burst of 100 that breakerd
    // decides alone (retried until one does, as the machine allows).
    ASSERT_TRUE(WaitUntil([&] {
      return GuardedBurst(client.get(), "burst/warm-up", kWarmUp).failed_open ==
             0;
    })) << "no burst of "
        << kWarmUp << " without a decision failed open";
    const std::string dep = absl::StrCat("burst/dep-", burst);
    const double allowed = Acquires(dep, "allowed");
    const Burst b = GuardedBurst(client.get(), dep, kCalls);
    std::cout << kCalls << " guarded calls in " << b.took << ": "
              << b.failed_open << " failed open (other programs kept "
              << b.other_cpus << " CPUs busy)" << std::endl;
    EXPECT_EQ(b.ran_once, kCalls) << "a call did not run, or ran twice";
    EXPECT_EQ(b.own_result, kCalls) << "a call did not return its result";
    if (b.failed_open == 0) {
      EXPECT_EQ(Acquires(dep, "allowed") - allowed, kCalls);
      EXPECT_TRUE(EveryPermitReported(dep))
          << Granted(dep) << " granted, " << ReportsFor(dep) << " reported";
      return;
    }
    ASSERT_GE(b.other_cpus, kBusy)
        << b.failed_open << " of " << kCalls
        << " decisions failed open on a machine otherwise idle (other "
           "programs kept "
        << b.other_cpus << " CPUs busy); client log:\n"
        << LogText();
    excused.push_back(absl::StrCat(b.failed_open, " failed open beside ",
                                   b.other_cpus, " busy CPUs"));
  }
  FAIL() << "every burst ran on a machine kept busy by other programs: "
         << absl::StrJoin(excused, "; ");
}

// conformance: restart
// After an outage long enough for gRPC's default reconnect backoff (1 s,
// x1.6 per attempt, up to 120 s) to grow past 2 s, the client decides with
// breakerd again within 1.5 s of its restart, and a force-open made at the
// restart is honoured. The stand-in holding the port sees each connection
// attempt, and breakerd restarts just after the first one past kMinOutage,
// so the test measures the client's whole wait for its next attempt.
TEST_F(ConformanceTest, BackWithinASecondAndAHalfOfARestartAfterAnOutage) {
  auto client = NewClientAsConfigured();
  const std::string dep = "restart/dep";
  ASSERT_TRUE(DecidesWithBreakerd(client.get(), dep));

  const std::string address = proc_.tcp_address();
  const int port = PortOf(address);
  ASSERT_GT(port, 0) << address;
  ASSERT_TRUE(proc_.Signal(SIGKILL));
  ASSERT_TRUE(proc_.WaitExit(kWait).has_value());
  std::unique_ptr<PortHolder> holder;
  ASSERT_TRUE(WaitUntil([&] {
    holder = std::make_unique<PortHolder>(port);
    return holder->listening();
  }));
  const absl::Time crashed = absl::Now();
  // With gRPC's default backoff the attempts come about 0, 1 and 2.6 s into
  // the outage (each wait +-20%) and the next one 2.56 s (+-20%) after that:
  // past 2 s of outage, an uncapped client is at least 2 s away from its
  // next attempt.
  constexpr absl::Duration kMinOutage = absl::Seconds(2);
  bool all_fail_open = true;
  ASSERT_TRUE(WaitUntil(
      [&] {
        absl::StatusOr<Permit> p = client->Acquire(dep);
        all_fail_open &=
            p.ok() && p->decision().source == DecisionSource::kFailOpen;
        return holder->last_attempt() >= crashed + kMinOutage;
      },
      absl::Seconds(15)))
      << "no connection attempt from the client after " << kMinOutage
      << " of outage";
  EXPECT_TRUE(all_fail_open);
  holder.reset();
  BreakerdProcess again;
  ASSERT_NO_FATAL_FAILURE(StartBreakerd(&again, {"--listen=" + address}));
  const absl::Time restarted = absl::Now();
  ForceOpen(dep, &again);

  // Measured past the limit too, so a failure says how long it took.
  std::optional<Decision> back;
  WaitUntil(
      [&] {
        absl::StatusOr<Permit> p = client->Acquire(dep);
        if (p.ok() && p->decision().source != DecisionSource::kFailOpen) {
          back = p->decision();
        }
        return back.has_value();
      },
      absl::Seconds(20));
  const absl::Duration took = absl::Now() - restarted;
  ASSERT_TRUE(back.has_value())
      << "still failing open " << took << " after the restart";
  // From breakerd, or local once the Watch stream has learnt it too.
  EXPECT_FALSE(back->allowed);
  EXPECT_EQ(back->reason, RejectReason::kForcedOpen);
  EXPECT_TRUE(back->source == DecisionSource::kSidecar ||
              back->source == DecisionSource::kLocal)
      << DecisionSourceName(back->source);
  EXPECT_LT(took, absl::Milliseconds(1500))
      << "decisions came from breakerd again " << took
      << " after its restart (outage " << restarted - crashed << ")";
  std::cout << "back " << took << " after the restart, outage "
            << restarted - crashed << std::endl;
}

// conformance: hung-sidecar
TEST_F(ConformanceTest, HungSidecarCostsOneDecisionTimeoutThenNoRpc) {
  auto open_client = NewClientAsConfigured();
  ClientOptions closed_options;
  closed_options.fail_mode = FailMode::kClosed;
  auto closed_client = NewClientAsConfigured(closed_options);
  const std::string dep = "hung/dep";
  ASSERT_TRUE(DecidesWithBreakerd(open_client.get(), dep));
  ASSERT_TRUE(DecidesWithBreakerd(closed_client.get(), dep));

  ASSERT_TRUE(proc_.Signal(SIGSTOP));
  ASSERT_TRUE(WaitUntil([&] { return IsStopped(proc_.pid()); }));

  for (auto [client, source] :
       {std::pair{open_client.get(), DecisionSource::kFailOpen},
        std::pair{closed_client.get(), DecisionSource::kFailClosed}}) {
    SCOPED_TRACE(DecisionSourceName(source));
    const absl::Time start = absl::Now();
    absl::StatusOr<Permit> first = client->Acquire(dep);
    const absl::Duration first_took = absl::Now() - start;
    ASSERT_TRUE(first.ok());
    EXPECT_EQ(first->decision().source, source);
    EXPECT_LT(first_took, absl::Milliseconds(20 + 100));

    const uint64_t away = client->stats().away_decisions;
    constexpr int kNext = 100;
    int with_source = 0;
    const absl::Time next_start = absl::Now();
    for (int i = 0; i < kNext; ++i) {
      absl::StatusOr<Permit> p = client->Acquire(dep);
      with_source += p.ok() && p->decision().source == source &&
                     p->allowed() == (source == DecisionSource::kFailOpen);
    }
    const absl::Duration next_took = absl::Now() - next_start;
    EXPECT_EQ(with_source, kNext);
    // Counted as decided with no RPC.
    EXPECT_EQ(client->stats().away_decisions - away, kNext);
    EXPECT_LT(next_took, absl::Milliseconds(100));
  }
  EXPECT_EQ(open_client->stats().fail_open, 101u);
  EXPECT_EQ(closed_client->stats().fail_closed, 101u);

  ASSERT_TRUE(proc_.Signal(SIGCONT));
  const absl::Time resumed = absl::Now();
  for (Client* client : {open_client.get(), closed_client.get()}) {
    EXPECT_TRUE(WaitUntil(
        [&] {
          absl::StatusOr<Permit> p = client->Acquire(dep);
          return p.ok() && p->decision().source == DecisionSource::kSidecar;
        },
        resumed + absl::Milliseconds(1500) - absl::Now()))
        << "not deciding with breakerd " << absl::Now() - resumed
        << " after SIGCONT";
  }
}

// conformance: report-while-away
TEST_F(ConformanceTest, AReportMadeWhileAwayIsHeldAndSentWhenBack) {
  // 200 ms: a decision the scenario needs from breakerd (the probe) stays
  // one on a loaded machine, and a stopped breakerd is marked away soon.
  ClientOptions options;
  options.decision_timeout = absl::Milliseconds(200);
  auto client = NewClient(options);
  auto tripper = NewClient({}, /*distinct_id=*/1);
  // short/*: opens after 3 failures, cools down in 1 s.
  const std::string dep = "short/held";
  Trip(tripper.get(), dep);
  const uint64_t report_errors = client->stats().report_errors;

  // Waits out the cooldown: the first guarded call let through holds the
  // probe permit.
  absl::Time resumed = absl::InfinitePast();
  int ran = 0;
  absl::Status result;
  ASSERT_TRUE(WaitUntil(
      [&] {
        result = client->Do(dep, [&] {
          ++ran;
          // While the call runs: breakerd stopped, and an Acquire of
          // another dependency marks it away.
          if (!proc_.Signal(SIGSTOP) ||
              !WaitUntil([&] { return IsStopped(proc_.pid()); })) {
            return absl::InternalError("SIGSTOP");
          }
          absl::StatusOr<Permit> other = client->Acquire("held/other");
          if (!other.ok() ||
              other->decision().source != DecisionSource::kFailOpen) {
            return absl::InternalError("not failed open while stopped");
          }
          // Decided with no RPC: marked away.
          const uint64_t away = client->stats().away_decisions;
          (void)client->Acquire("held/other");
          if (client->stats().away_decisions != away + 1) {
            return absl::InternalError("not marked away");
          }
          if (!proc_.Signal(SIGCONT)) return absl::InternalError("SIGCONT");
          resumed = absl::Now();
          return absl::OkStatus();  // its Report made while still away
        });
        return !IsBreakerOpen(result);
      },
      absl::Seconds(5)));
  ASSERT_TRUE(result.ok()) << result;
  ASSERT_EQ(ran, 1);
  ASSERT_EQ(Acquires(dep, "probe"), 1) << "the guarded call had no probe";

  // Closed within 2 s of SIGCONT: the held Report was sent once back.
  auto stub = proc_.BreakerStub();
  const auto state = [&] {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() +
                     std::chrono::seconds(1));
    v1::GetStateRequest request;
    request.set_dependency(dep);
    v1::BreakerStatus status;
    return stub->GetState(&ctx, request, &status).ok() ? status.state()
                                                       : v1::STATE_UNSPECIFIED;
  };
  EXPECT_TRUE(WaitUntil([&] { return state() == v1::STATE_CLOSED; },
                        resumed + absl::Seconds(2) - absl::Now()))
      << "state " << v1::State_Name(state()) << " " << absl::Now() - resumed
      << " after SIGCONT";
  // The 3 failures, and the probe's success.
  EXPECT_EQ(ReportsFor(dep), 4);
  EXPECT_EQ(client->stats().report_errors, report_errors);
  // No caller is refused PROBE_IN_FLIGHT.
  absl::StatusOr<Permit> next = tripper->Acquire(dep);
  ASSERT_TRUE(next.ok());
  EXPECT_TRUE(next->allowed()) << RejectReasonName(next->decision().reason);
  next->Report(Outcome::Success()).IgnoreError();
}

// At most 1,024 Reports are held while away: past that the oldest is
// dropped, counted in report_errors; the others are sent once back.
TEST_F(ConformanceTest, PastTheBoundTheOldestHeldReportIsDropped) {
  ClientOptions options;
  options.decision_timeout = absl::Milliseconds(500);
  auto client = NewClient(options);
  constexpr int kBound = 1024;
  std::vector<Permit> permits;
  permits.reserve(kBound + 1);
  for (int i = 0; i <= kBound; ++i) {
    absl::StatusOr<Permit> p =
        client->Acquire(i == 0 ? "bound/oldest" : "bound/rest");
    ASSERT_TRUE(p.ok());
    ASSERT_EQ(p->decision().source, DecisionSource::kSidecar);
    permits.push_back(std::move(*p));
  }
  ASSERT_TRUE(proc_.Signal(SIGSTOP));
  ASSERT_TRUE(WaitUntil([&] { return IsStopped(proc_.pid()); }));
  ASSERT_EQ(client->Acquire("bound/other")->decision().source,
            DecisionSource::kFailOpen);
  for (Permit& p : permits) EXPECT_TRUE(p.Report(Outcome::Success()).ok());
  EXPECT_EQ(client->stats().report_errors, 1u);
  ASSERT_TRUE(proc_.Signal(SIGCONT));
  EXPECT_TRUE(WaitUntil([&] { return ReportsFor("bound/rest") == kBound; },
                        absl::Seconds(5)));
  EXPECT_EQ(ReportsFor("bound/oldest"), 0);
  EXPECT_EQ(client->stats().report_errors, 1u);
}

// conformance: cancel-call
// The one way a C++ caller abandons a guarded call: the Permit is dropped
// unreported (its destructor) while the upstream call runs.
TEST_F(ConformanceTest, APermitDroppedUnreportedIsReportedCancelledOnce) {
  auto client = NewClient();
  const std::string dep = "cancel/call";
  constexpr int kCalls = 5;
  for (int i = 0; i < kCalls; ++i) {
    absl::StatusOr<Permit> permit = client->Acquire(dep);
    ASSERT_TRUE(permit.ok());
    ASSERT_TRUE(permit->allowed());
    ASSERT_EQ(permit->decision().source, DecisionSource::kSidecar);
    // The upstream call would run here; the caller gives up on it and
    // leaves the scope.
    EXPECT_FALSE(permit->reported());
  }
  EXPECT_TRUE(
      WaitUntil([&] { return Reports(dep, "cancelled", "neutral") == kCalls; },
                absl::Seconds(3)));
  EXPECT_EQ(ReportsFor(dep), kCalls) << "a report of another class";
  EXPECT_EQ(Granted(dep), kCalls);
  EXPECT_EQ(client->stats().report_errors, 0u);
  // Neutral: the breaker (three failures open it) is still closed.
  absl::StatusOr<Permit> next = client->Acquire(dep);
  ASSERT_TRUE(next.ok());
  EXPECT_TRUE(next->allowed());
  EXPECT_EQ(next->decision().source, DecisionSource::kSidecar);
  EXPECT_EQ(next->decision().state, State::kClosed);
  next->Report(Outcome::Success()).IgnoreError();
}

// conformance: shadow
TEST_F(ConformanceTest, ShadowBreakerOpenInTheCacheIsNeverRefused) {
  auto client = NewClient();
  ASSERT_TRUE(WaitUntil([&] { return client->WatchConnected(); }));
  // Shadow: breakerd opens the breaker and says so on the Watch stream...
  const std::string dep = "payments/psp";
  Trip(client.get(), dep);
  ASSERT_TRUE(
      WaitUntil([&] { return client->CachedState(dep) == State::kOpen; }));
  const ClientStats before = client->stats();
  const double granted = SumFor("breakerd_acquire_total", dep);

  // ...but allows every call, so the client asks it instead of refusing.
  constexpr int kCalls = 20;
  int ran = 0;
  for (int i = 0; i < kCalls; ++i) {
    EXPECT_TRUE(client
                    ->Do(dep,
                         [&] {
                           ++ran;
                           return absl::OkStatus();
                         })
                    .ok());
  }
  EXPECT_EQ(ran, kCalls);
  // Every decision from breakerd: none local, none failed open.
  const ClientStats after = client->stats();
  EXPECT_EQ(after.local_rejections, before.local_rejections);
  EXPECT_EQ(after.fail_open, before.fail_open);
  EXPECT_EQ(SumFor("breakerd_acquire_total", dep) - granted, kCalls);
  absl::StatusOr<Permit> permit = client->Acquire(dep);
  ASSERT_TRUE(permit.ok());
  EXPECT_TRUE(permit->allowed());
  EXPECT_EQ(permit->decision().source, DecisionSource::kSidecar);
  absl::StatusOr<Permit> first = client->AcquireFirst({dep});
  ASSERT_TRUE(first.ok());
  EXPECT_TRUE(first->allowed());
  EXPECT_EQ(first->decision().source, DecisionSource::kSidecar);

  // Control: an enforced breaker tripped the same way is refused locally.
  Trip(client.get(), "enforced/psp");
  ASSERT_TRUE(WaitUntil(
      [&] { return client->CachedState("enforced/psp") == State::kOpen; }));
  absl::StatusOr<Permit> refused = client->Acquire("enforced/psp");
  ASSERT_TRUE(refused.ok());
  EXPECT_FALSE(refused->allowed());
  EXPECT_EQ(refused->decision().source, DecisionSource::kLocal);
}

// conformance: classifier-raises
TEST_F(ConformanceTest, AClassifierThatThrowsStillReportsThePermitOnce) {
  ClientOptions options;
  options.classifier = [](const absl::Status&) -> Outcome {
    throw std::runtime_error("classifier bug");
  };
  auto client = NewClient(options);
  const auto plain_error = [] { return absl::UnknownError("plain error"); };

  try {
    client->Do("classify/do", plain_error).IgnoreError();
    ADD_FAILURE() << "Do did not throw";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "classifier bug");
  }
  int calls = 0;
  EXPECT_THROW(client
                   ->Retry("classify/retry",
                           [&] {
                             ++calls;
                             return plain_error();
                           })
                   .IgnoreError(),
               std::runtime_error);
  EXPECT_EQ(calls, 1);
  EXPECT_THROW(client
                   ->First({"classify/first", "classify/other"},
                           [&](absl::string_view) { return plain_error(); })
                   .IgnoreError(),
               std::runtime_error);

  // Each permit reported once, as the default classifier makes of a plain
  // error.
  for (const std::string dep :
       {"classify/do", "classify/retry", "classify/first"}) {
    SCOPED_TRACE(dep);
    EXPECT_TRUE(EveryPermitReported(dep));
    EXPECT_EQ(Granted(dep), 1);
    EXPECT_EQ(Reports(dep, "server_error", "counted_failure"), 1);
  }
  EXPECT_EQ(Granted("classify/other"), 0);
}

// conformance: closed
TEST_F(ConformanceTest, AClosedClientFailsAtOnceWithNoRpc) {
  auto client = NewClient();
  const std::string dep = "closed/dep";
  absl::StatusOr<Permit> held = client->Acquire(dep);
  ASSERT_TRUE(held.ok());
  ASSERT_EQ(held->decision().source, DecisionSource::kSidecar);
  const double acquires = SumFor("breakerd_acquire_total", dep);

  client->Close();
  client->Close();  // twice is fine

  int calls = 0;
  const auto call = [&] {
    ++calls;
    return absl::OkStatus();
  };
  const absl::Time start = absl::Now();
  std::vector<absl::Status> results = {
      client->Acquire(dep).status(),
      client->AcquireFirst({dep, "closed/other"}).status(),
      client->Do(dep, call),
      client->Retry(dep, call),
      client->First({dep, "closed/other"},
                    [&](absl::string_view) { return call(); }),
  };
  const absl::Duration took = absl::Now() - start;
  for (const absl::Status& s : results) {
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
    EXPECT_THAT(s.message(), HasSubstr("breakerd client is closed"));
    EXPECT_FALSE(IsBreakerOpen(s));
  }
  EXPECT_EQ(calls, 0);
  EXPECT_LT(took, absl::Milliseconds(100)) << "not at once";
  EXPECT_FALSE(client->WaitForConnected(absl::Seconds(5)));
  EXPECT_LT(absl::Now() - start, absl::Milliseconds(200));

  // A Report after close is dropped and counted, not raised.
  absl::StatusOr<ReportResult> report = held->Report(Outcome::Success());
  EXPECT_EQ(report.status().code(), absl::StatusCode::kFailedPrecondition);
  const ClientStats stats = client->stats();
  EXPECT_EQ(stats.report_errors, 1u);
  EXPECT_EQ(stats.fail_open, 0u);
  EXPECT_EQ(stats.fail_closed, 0u);
  EXPECT_EQ(SumFor("breakerd_acquire_total", dep), acquires);
  EXPECT_EQ(ReportsFor(dep), 0);
}

// conformance: soft-failure
TEST_F(ConformanceTest, ASoftFailureIsReportedAndNotRetried) {
  auto client = NewClient();
  const std::string dep = "soft/model";
  RetryOptions options;
  options.max_attempts = 3;
  int calls = 0;
  // UNAVAILABLE alone would be retried: the outcome attached decides.
  absl::Status s = client->Retry(
      dep,
      [&] {
        ++calls;
        return Classified(absl::UnavailableError("refused: content filter"),
                          Outcome::Of(OutcomeKind::kSoftFailure));
      },
      options);
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(s.message(), "refused: content filter");
  EXPECT_FALSE(IsBreakerOpen(s));
  EXPECT_TRUE(EveryPermitReported(dep));
  EXPECT_EQ(Reports(dep, "soft_failure", "counted_success"), 1);
  EXPECT_EQ(ReportsFor(dep), 1);
}

// conformance: first-non-retryable
TEST_F(ConformanceTest, FirstStopsAfterAFailureNotWorthRetrying) {
  auto client = NewClient();
  std::vector<std::string> called;
  absl::Status a_error = absl::InvalidArgumentError("bad request");
  const auto chain = [&](absl::string_view dep) {
    called.push_back(std::string(dep));
    return dep == "first/a" ? a_error : absl::OkStatus();
  };

  absl::Status s = client->First({"first/a", "first/b"}, chain);
  EXPECT_EQ(s, a_error);
  EXPECT_THAT(called, ::testing::ElementsAre("first/a"));
  EXPECT_EQ(Reports("first/a", "bad_request", "neutral"), 1);

  called.clear();
  a_error = absl::InternalError("server error");
  s = client->First({"first/a", "first/b"}, chain);
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_THAT(called, ::testing::ElementsAre("first/a", "first/b"));
  EXPECT_EQ(Reports("first/a", "server_error", "counted_failure"), 1);
  EXPECT_EQ(Reports("first/b", "success", "counted_success"), 1);
  // Without a chain name breakerd counts no chain.
  for (const PromSample& sample : ParsePrometheus(proc_.Metrics())) {
    if ((sample.name == "breakerd_chain_decisions_total" ||
         sample.name == "breakerd_chain_outcomes_total") &&
        sample.value != 0) {
      ADD_FAILURE() << sample.name << " " << sample.value;
    }
  }
}

// conformance: ramp
TEST_F(ConformanceTest, ARampRefusalIsARefusalFromTheSidecar) {
  auto client = NewClient();
  const std::string dep = "ramp/cpp";
  // Open it over gRPC (three failures), then close it with the probe once
  // its 1 s cooldown has passed: it is ramping.
  auto stub = proc_.BreakerStub();
  const auto acquire = [&](v1::AcquireResponse* out) {
    grpc::ClientContext ctx;
    v1::AcquireRequest request;
    request.set_dependency(dep);
    return stub->Acquire(&ctx, request, out).ok();
  };
  const auto report = [&](uint64_t permit, v1::Outcome outcome) {
    grpc::ClientContext ctx;
    v1::ReportRequest request;
    request.set_dependency(dep);
    request.set_permit(permit);
    request.set_outcome(outcome);
    v1::ReportResponse response;
    return stub->Report(&ctx, request, &response).ok();
  };
  for (int i = 0; i < 3; ++i) {
    v1::AcquireResponse granted;
    ASSERT_TRUE(acquire(&granted) && granted.allowed()) << i;
    ASSERT_TRUE(report(granted.permit(), v1::OUTCOME_SERVER_ERROR));
  }
  ASSERT_TRUE(WaitUntil([&] {
    v1::AcquireResponse probe;
    return acquire(&probe) && probe.probe() &&
           report(probe.permit(), v1::OUTCOME_SUCCESS);
  })) << "no probe within the wait";

  absl::StatusOr<Permit> retry = client->Acquire(dep, 1);
  ASSERT_TRUE(retry.ok()) << retry.status();
  const Decision& d = retry->decision();
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.permit, 0u);
  EXPECT_EQ(d.reason, RejectReason::kRamp);
  EXPECT_EQ(d.source, DecisionSource::kSidecar);
  EXPECT_EQ(d.state, State::kClosed);

  RetryOptions options;
  options.max_attempts = 3;
  options.base = absl::Milliseconds(1);
  options.max_backoff = absl::Milliseconds(5);
  int calls = 0;
  absl::Status s = client->Retry(
      dep,
      [&] {
        ++calls;
        return absl::InternalError("upstream 500");
      },
      options);
  EXPECT_LE(calls, 1) << "the first attempt at most";
  ASSERT_TRUE(IsBreakerOpen(s)) << s;
  EXPECT_EQ(RefusalOf(s)->reason, RejectReason::kRamp);
  EXPECT_EQ(RefusalOf(s)->source, DecisionSource::kSidecar);
}

// conformance: wait-ready
TEST_F(ConformanceTest, WaitForConnectedWaitsForBreakerdOrItsTimeout) {
  const std::string address = absl::StrCat("127.0.0.1:", UnusedPort());
  ClientOptions options = QuietOptions();
  options.target = address;
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Create(options);
  ASSERT_TRUE(client.ok()) << client.status();

  std::atomic<bool> ready{false};
  std::thread waiter(
      [&] { ready = (*client)->WaitForConnected(absl::Seconds(10)); });
  absl::SleepFor(absl::Milliseconds(300));
  BreakerdProcess later;
  StartBreakerd(&later, {"--listen=" + address});
  waiter.join();
  EXPECT_TRUE(ready);
  absl::StatusOr<Permit> p = (*client)->Acquire("ready/dep");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->decision().source, DecisionSource::kSidecar);

  // Nothing listening: false when the 500 ms are up, not later.
  options.target = absl::StrCat("127.0.0.1:", UnusedPort());
  absl::StatusOr<std::unique_ptr<Client>> lonely = Client::Create(options);
  ASSERT_TRUE(lonely.ok()) << lonely.status();
  const absl::Time start = absl::Now();
  EXPECT_FALSE((*lonely)->WaitForConnected(absl::Milliseconds(500)));
  const absl::Duration took = absl::Now() - start;
  EXPECT_GE(took, absl::Milliseconds(450));
  EXPECT_LT(took, absl::Milliseconds(700));
}

}  // namespace
}  // namespace breakerd::client

// The C++ client against the real breakerd binary over real sockets: the
// guard, outcome classes, local refusal, fail-open, the away probe, retry,
// the fallback chain, Close and the classifier. The conformance scenarios
// (client/conformance/SCENARIOS.md) are in conformance_test.cc.
#include "breakerd/client.h"

#include <signal.h>
#include <sys/wait.h>

#include <fstream>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "breakerd/internal/convert.h"
#include "breakerd/internal/statuses.h"
#include "breakerd/v1/breaker.pb.h"
#include "client_fixture.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/e2e/breakerd_process.h"

namespace breakerd::client {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST_F(ClientTest, GuardReportsEachOutcomeClass) {
  auto client = NewClient();
  const auto ok = [] { return absl::OkStatus(); };
  EXPECT_TRUE(client->Do("guard/ok", ok).ok());
  EXPECT_EQ(Reports("guard/ok", "success", "counted_success"), 1);

  EXPECT_EQ(client
                ->Do("guard/unavailable",
                     [] { return absl::UnavailableError("refused"); })
                .code(),
            absl::StatusCode::kUnavailable);
  EXPECT_EQ(Reports("guard/unavailable", "connection_error", "counted_failure"),
            1);

  EXPECT_EQ(client
                ->Do("guard/deadline",
                     [] { return absl::DeadlineExceededError("slow"); })
                .code(),
            absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(Reports("guard/deadline", "timeout", "counted_failure"), 1);

  EXPECT_EQ(
      client->Do("guard/bad", [] { return absl::InvalidArgumentError("x"); })
          .code(),
      absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Reports("guard/bad", "bad_request", "neutral"), 1);

  // HTTP statuses through the two-step permit.
  for (auto [status, cls, effect] :
       std::vector<std::tuple<int, std::string, std::string>>{
           {200, "success", "counted_success"},
           {503, "server_error", "counted_failure"},
           {404, "bad_request", "neutral"},
           {429, "rate_limited", "counted_failure"},
           {401, "auth_error", "neutral"}}) {
    const std::string dep = absl::StrCat("guard/http-", status);
    absl::StatusOr<Permit> permit = client->Acquire(dep);
    ASSERT_TRUE(permit.ok());
    ASSERT_TRUE(permit->allowed());
    EXPECT_EQ(permit->decision().source, DecisionSource::kSidecar);
    absl::StatusOr<ReportResult> r =
        permit->Report(Outcome::FromHttpStatus(status, "7"));
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(Reports(dep, cls, effect), 1) << status;
  }

  // A permit dropped unreported reports CANCELLED (neutral).
  {
    absl::StatusOr<Permit> permit = client->Acquire("guard/dropped");
    ASSERT_TRUE(permit.ok() && permit->allowed());
  }
  EXPECT_EQ(Reports("guard/dropped", "cancelled", "neutral"), 1);

  // A refused guard does not make the call.
  ForceOpen("guard/forced");
  int calls = 0;
  absl::Status refused = client->Do("guard/forced", [&] {
    ++calls;
    return absl::OkStatus();
  });
  EXPECT_EQ(calls, 0);
  ASSERT_TRUE(IsBreakerOpen(refused)) << refused;
  std::optional<Decision> refusal = RefusalOf(refused);
  ASSERT_TRUE(refusal.has_value());
  EXPECT_EQ(refusal->reason, RejectReason::kForcedOpen);
  EXPECT_EQ(refusal->dependency, "guard/forced");
  EXPECT_THAT(refused.message(), HasSubstr("guard/forced"));
}

TEST_F(ClientTest, InvalidNameIsAnErrorNotFailOpen) {
  auto client = NewClient();
  absl::StatusOr<Permit> permit = client->Acquire("bad name with spaces");
  EXPECT_EQ(permit.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(permit.status().message(), HasSubstr("dependency"));
  EXPECT_EQ(client->stats().fail_open, 0u);
}

TEST_F(ClientTest, OpenedByOneClientIsRefusedLocallyByAnother) {
  auto tripper = NewClient({}, 1);
  auto watcher = NewClient({}, 2);
  ASSERT_TRUE(WaitUntil([&] { return watcher->WatchConnected(); }));
  Trip(tripper.get(), "shared/dep");
  ASSERT_TRUE(WaitUntil(
      [&] { return watcher->CachedState("shared/dep") == State::kOpen; }));

  const double allowed = Acquires("shared/dep", "allowed");
  const double rejected = Acquires("shared/dep", "rejected_open");
  absl::StatusOr<Permit> permit = watcher->Acquire("shared/dep");
  ASSERT_TRUE(permit.ok());
  EXPECT_FALSE(permit->allowed());
  EXPECT_EQ(permit->decision().source, DecisionSource::kLocal);
  EXPECT_EQ(permit->decision().reason, RejectReason::kOpen);
  EXPECT_GT(permit->decision().retry_after, absl::Seconds(20));
  // Retries are refused locally too.
  absl::StatusOr<Permit> retry = watcher->Acquire("shared/dep", 1);
  ASSERT_TRUE(retry.ok());
  EXPECT_EQ(retry->decision().source, DecisionSource::kLocal);
  EXPECT_EQ(watcher->stats().local_rejections, 2u);
  // breakerd saw neither.
  EXPECT_EQ(Acquires("shared/dep", "allowed"), allowed);
  EXPECT_EQ(Acquires("shared/dep", "rejected_open"), rejected);

  // A forced-open breaker is refused locally as well.
  ForceOpen("shared/forced");
  ASSERT_TRUE(WaitUntil([&] {
    return watcher->CachedState("shared/forced") == State::kForcedOpen;
  }));
  absl::StatusOr<Permit> forced = watcher->Acquire("shared/forced");
  ASSERT_TRUE(forced.ok());
  EXPECT_EQ(forced->decision().source, DecisionSource::kLocal);
  EXPECT_EQ(forced->decision().reason, RejectReason::kForcedOpen);
}

TEST_F(ClientTest, OpenPastItsCooldownGoesToTheSidecar) {
  auto client = NewClient();
  ASSERT_TRUE(WaitUntil([&] { return client->WatchConnected(); }));
  Trip(client.get(), "short/dep");
  ASSERT_TRUE(WaitUntil(
      [&] { return client->CachedState("short/dep") == State::kOpen; }));
  // The 1 s cooldown ends; the next Acquire goes to breakerd, which grants
  // the probe.
  ASSERT_TRUE(WaitUntil(
      [&] {
        absl::StatusOr<Permit> p = client->Acquire("short/dep");
        if (!p.ok() || p->decision().source != DecisionSource::kSidecar) {
          return false;
        }
        EXPECT_TRUE(p->allowed());
        EXPECT_TRUE(p->decision().probe);
        p->Report(Outcome::Success()).IgnoreError();
        return true;
      },
      absl::Seconds(10)));
  EXPECT_TRUE(WaitUntil(
      [&] { return client->CachedState("short/dep") == State::kClosed; }));
}

TEST_F(ClientTest, FailsOpenPromptlyWhenBreakerdIsStopped) {
  ClientOptions options;
  options.decision_timeout = absl::Milliseconds(200);
  auto client = NewClient(options, 1);
  ClientOptions closed_options;
  closed_options.decision_timeout = absl::Milliseconds(200);
  closed_options.fail_mode = FailMode::kClosed;
  auto closed = NewClient(closed_options, 2);
  ASSERT_TRUE(WaitUntil([&] { return client->WatchConnected(); }));
  Trip(client.get(), "stop/dep");
  ASSERT_TRUE(WaitUntil(
      [&] { return client->CachedState("stop/dep") == State::kOpen; }));

  ASSERT_TRUE(proc_.Signal(SIGKILL));
  ASSERT_TRUE(proc_.WaitExit(kWait).has_value());
  // The stream's end clears the cache: decisions go to the (absent)
  // sidecar, not to a stale local answer.
  ASSERT_TRUE(WaitUntil([&] { return !client->WatchConnected(); }));
  EXPECT_EQ(client->CachedState("stop/dep"), std::nullopt);

  const absl::Time start = absl::Now();
  absl::StatusOr<Permit> permit = client->Acquire("stop/dep");
  const absl::Duration took = absl::Now() - start;
  ASSERT_TRUE(permit.ok());
  EXPECT_TRUE(permit->allowed());
  EXPECT_EQ(permit->decision().source, DecisionSource::kFailOpen);
  EXPECT_EQ(permit->decision().permit, 0u);
  EXPECT_LT(took, absl::Seconds(1));
  // Nothing is sent for a fail-open permit.
  EXPECT_TRUE(permit->Report(Outcome::Success()).ok());
  EXPECT_EQ(client->stats().report_errors, 0u);

  int calls = 0;
  EXPECT_TRUE(client
                  ->Do("stop/other",
                       [&] {
                         ++calls;
                         return absl::OkStatus();
                       })
                  .ok());
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(client->stats().fail_open, 2u);
  // Logged once, not once per call.
  EXPECT_EQ(LogLines("unreachable"), 1);

  absl::Status refused = closed->Do("stop/other", [&] {
    ++calls;
    return absl::OkStatus();
  });
  EXPECT_EQ(calls, 1);
  ASSERT_TRUE(IsBreakerOpen(refused)) << refused;
  EXPECT_EQ(RefusalOf(refused)->source, DecisionSource::kFailClosed);
  EXPECT_EQ(closed->stats().fail_closed, 1u);
  // The stream keeps trying to come back.
  EXPECT_TRUE(WaitUntil([&] { return client->stats().watch_reconnects >= 2; }));

  // A Report made while away is held, not counted; Close drops it, counted.
  EXPECT_TRUE(client
                  ->Report("stop/dep", /*permit=*/42, Outcome::Success(),
                           absl::Milliseconds(1))
                  .ok());
  EXPECT_EQ(client->stats().report_errors, 0u);
  client->Close();
  EXPECT_EQ(client->stats().report_errors, 1u);
}

TEST_F(ClientTest, HungSidecarIsNotAskedUntilItIsBack) {
  ClientOptions options;
  options.decision_timeout = absl::Milliseconds(200);
  auto client = NewClient(options);
  absl::StatusOr<Permit> held = client->Acquire("away/dep");
  ASSERT_TRUE(held.ok());
  ASSERT_TRUE(held->allowed());
  ASSERT_EQ(held->decision().source, DecisionSource::kSidecar);

  // Hung, not gone: the connection stays up, nothing answers.
  ASSERT_TRUE(proc_.Signal(SIGSTOP));
  ASSERT_TRUE(WaitUntil([&] { return IsStopped(proc_.pid()); }));

  // The first Acquire waits out its deadline and marks breakerd away...
  absl::StatusOr<Permit> first = client->Acquire("away/dep");
  ASSERT_TRUE(first.ok());
  EXPECT_TRUE(first->allowed());
  EXPECT_EQ(first->decision().source, DecisionSource::kFailOpen);
  EXPECT_EQ(client->stats().fail_open, 1u);
  EXPECT_EQ(client->stats().away_decisions, 0u);

  // ...the ones after it decide with no RPC.
  constexpr int kMore = 5;
  for (int i = 0; i < kMore; ++i) {
    absl::StatusOr<Permit> p = client->Acquire("away/dep", i % 2);
    ASSERT_TRUE(p.ok());
    EXPECT_TRUE(p->allowed());
    EXPECT_EQ(p->decision().source, DecisionSource::kFailOpen);
    EXPECT_EQ(p->decision().permit, 0u);
  }
  absl::StatusOr<Permit> chain = client->AcquireFirst({"away/a", "away/b"});
  ASSERT_TRUE(chain.ok());
  EXPECT_EQ(chain->decision().source, DecisionSource::kFailOpen);
  EXPECT_EQ(chain->decision().dependency, "away/a");
  EXPECT_EQ(client->stats().away_decisions, kMore + 1u);
  EXPECT_EQ(client->stats().fail_open, kMore + 2u);

  // A Report made while away is held: not sent yet, not an error, not
  // waited for.
  absl::StatusOr<ReportResult> report = held->Report(Outcome::Success());
  EXPECT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(client->stats().report_errors, 0u);
  EXPECT_EQ(LogLines("unreachable"), 1);

  // The health check notices it is back; then Acquire asks it again.
  ASSERT_TRUE(proc_.Signal(SIGCONT));
  EXPECT_TRUE(WaitUntil(
      [&] {
        absl::StatusOr<Permit> p = client->Acquire("away/dep");
        return p.ok() && p->decision().source == DecisionSource::kSidecar;
      },
      absl::Seconds(3)));
  EXPECT_TRUE(WaitUntil([&] { return LogLines(" back (") == 1; }));
  EXPECT_EQ(LogLines("unreachable"), 1);
  // ...and the held Report is sent once breakerd is back.
  EXPECT_TRUE(WaitUntil(
      [&] { return Reports("away/dep", "success", "counted_success") == 1; },
      absl::Seconds(3)));
  EXPECT_EQ(client->stats().report_errors, 0u);
}

TEST_F(ClientTest, RetryNeverRetriesWhileOpen) {
  auto client = NewClient();
  RetryOptions options;
  options.max_attempts = 5;
  options.base = absl::Milliseconds(1);
  options.max_backoff = absl::Milliseconds(5);

  int calls = 0;
  absl::Status s = client->Retry(
      "retry/down",
      [&] {
        ++calls;
        return absl::InternalError("upstream 500");
      },
      options);
  // Three failures open the breaker; the fourth Acquire is refused and the
  // helper stops there.
  EXPECT_EQ(calls, 3);
  ASSERT_TRUE(IsBreakerOpen(s)) << s;
  EXPECT_THAT(s.message(), HasSubstr("upstream 500"));
  EXPECT_EQ(RefusalOf(s)->reason, RejectReason::kOpen);
  EXPECT_EQ(Acquires("retry/down", "allowed"), 3);

  calls = 0;
  s = client->Retry(
      "retry/bad",
      [&] {
        ++calls;
        return absl::InvalidArgumentError("bad request");
      },
      options);
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);

  calls = 0;
  s = client->Retry(
      "retry/flaky",
      [&] {
        return ++calls == 1 ? absl::UnavailableError("once") : absl::OkStatus();
      },
      options);
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(Reports("retry/flaky", "success", "counted_success"), 1);
}

TEST_F(ClientTest, FallbackChainSkipsAnOpenDependency) {
  auto client = NewClient();
  ForceOpen("chain/a");
  std::vector<std::string> called;
  auto record = [&](absl::string_view dep) {
    called.push_back(std::string(dep));
    return absl::OkStatus();
  };
  EXPECT_TRUE(client->First({"chain/a", "chain/b"}, record).ok());
  EXPECT_THAT(called, ElementsAre("chain/b"));

  // A failed call moves the chain on to the next dependency.
  called.clear();
  absl::Status s =
      client->First({"chain/b", "chain/c"}, [&](absl::string_view dep) {
        called.push_back(std::string(dep));
        return dep == "chain/b" ? absl::UnavailableError("b down")
                                : absl::OkStatus();
      });
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_THAT(called, ElementsAre("chain/b", "chain/c"));
  EXPECT_EQ(Reports("chain/b", "connection_error", "counted_failure"), 1);

  // All open: the breaker-open status, no call.
  ForceOpen("chain/d");
  called.clear();
  s = client->First({"chain/a", "chain/d"}, record);
  EXPECT_TRUE(IsBreakerOpen(s)) << s;
  EXPECT_TRUE(called.empty());
}

TEST_F(ClientTest, WatchReconnectsAfterBreakerdRestarts) {
  ClientOptions options;
  options.watch_backoff_max = absl::Milliseconds(200);
  auto client = NewClient(options);
  ASSERT_TRUE(WaitUntil([&] { return client->WatchConnected(); }));
  const std::string address = proc_.tcp_address();
  ASSERT_TRUE(proc_.Signal(SIGTERM));
  ASSERT_TRUE(proc_.WaitExit(kWait).has_value());
  ASSERT_TRUE(WaitUntil([&] { return !client->WatchConnected(); }));

  // The same address again (the client's channel points there).
  BreakerdProcess again;
  StartBreakerd(&again, {"--listen=" + address});
  ASSERT_TRUE(
      WaitUntil([&] { return client->WatchConnected(); }, absl::Seconds(15)));
  // A breaker opened by someone else is learnt from the new stream.
  ClientOptions other_options;
  other_options.target = address;
  other_options.watch = false;
  auto other = Client::Create(other_options);
  ASSERT_TRUE(other.ok());
  Trip(other->get(), "restart/dep");
  EXPECT_TRUE(WaitUntil(
      [&] { return client->CachedState("restart/dep") == State::kOpen; }));
  EXPECT_GE(client->stats().watch_reconnects, 1u);
}

TEST_F(ClientTest, ExampleRunsAgainstTheSidecar) {
  const std::string log = proc_.dir() + "/example.log";
  // Counts below assume breakerd answers every decision: on a loaded
  // machine 20 ms can pass, and a fail-open call would not be counted.
  setenv("BREAKERD_DECISION_TIMEOUT_MS", "2000", 1);
  pid_t pid;
  ASSERT_EQ(SpawnLogged({BREAKERD_CLIENT_EXAMPLE, proc_.tcp_address(), "fail"},
                        log, &pid),
            0);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  std::ifstream in(log);
  std::stringstream out;
  out << in.rdbuf();
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << out.str();
  // Default policy here: 3 failures open; the rest are refused without
  // calling the upstream; the chain falls back to example/backup.
  EXPECT_THAT(out.str(), HasSubstr("summary: ok=0 failed=3 refused=5 "
                                   "upstream_calls=3"));
  EXPECT_THAT(out.str(), HasSubstr("fallback chain: ok via example/backup"));
}

TEST_F(ClientTest, AGuardedCallThatThrowsIsReportedAsAServerError) {
  auto client = NewClient();
  EXPECT_THROW(client
                   ->Do("throws/dep",
                        []() -> absl::Status {
                          throw std::runtime_error("upstream library threw");
                        })
                   .IgnoreError(),
               std::runtime_error);
  EXPECT_TRUE(WaitUntil([&] {
    return Reports("throws/dep", "server_error", "counted_failure") == 1;
  }));
  EXPECT_EQ(ReportsFor("throws/dep"), 1);
}

TEST_F(ClientTest, TheClassifierDecidesWhatIsReportedAndRetried) {
  ClientOptions options;
  // A model's refusal comes back as RESOURCE_EXHAUSTED "refused" here.
  options.classifier = [](const absl::Status& s) {
    return s.message() == "refused" ? Outcome::Of(OutcomeKind::kSoftFailure)
                                    : Outcome::FromStatus(s);
  };
  auto client = NewClient(options);
  int calls = 0;
  absl::Status s = client->Retry("classified/model", [&] {
    ++calls;
    return absl::ResourceExhaustedError("refused");
  });
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(calls, 1) << "a soft failure is not retried";
  EXPECT_EQ(Reports("classified/model", "soft_failure", "counted_success"), 1);
  // Anything else: the default classification.
  EXPECT_EQ(client
                ->Do("classified/other",
                     [] { return absl::ResourceExhaustedError("quota"); })
                .code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(Reports("classified/other", "rate_limited", "counted_failure"), 1);
}

TEST(OutcomeTest, AClassifiedStatusCarriesItsOutcome) {
  const absl::Status soft = Classified(absl::UnavailableError("content filter"),
                                       Outcome::Of(OutcomeKind::kSoftFailure));
  EXPECT_EQ(soft.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(soft.message(), "content filter");
  const Outcome o = Outcome::FromStatus(soft);
  EXPECT_EQ(o.kind, OutcomeKind::kSoftFailure);
  EXPECT_FALSE(o.grpc_code.has_value());
  EXPECT_FALSE(o.Retryable());
  // Without it, UNAVAILABLE is a connection error worth retrying.
  EXPECT_TRUE(Outcome::FromStatus(absl::UnavailableError("x")).Retryable());

  const Outcome http = Outcome::FromStatus(Classified(
      absl::InternalError("503"), Outcome::FromHttpStatus(503, "120")));
  EXPECT_EQ(http.http_status, 503u);
  EXPECT_EQ(http.retry_after, absl::Seconds(120));
  EXPECT_TRUE(http.Retryable());

  // The gRPC codes retried are those breakerd counts as failures: ABORTED
  // (a conflict of the request) is a bad request to it, not retried.
  EXPECT_FALSE(Outcome::FromStatus(absl::AbortedError("x")).Retryable());
  EXPECT_TRUE(Outcome::FromStatus(absl::DataLossError("x")).Retryable());
  EXPECT_TRUE(
      Outcome::FromStatus(absl::ResourceExhaustedError("x")).Retryable());

  // An OK status carries nothing: a success.
  EXPECT_TRUE(
      Classified(absl::OkStatus(), Outcome::Of(OutcomeKind::kTimeout)).ok());
  EXPECT_EQ(Outcome::FromStatus(absl::OkStatus()).grpc_code, 0);
}

// Gentle recovery's refusal and a repeated Report's effect, read from the
// wire: a ramp refusal is a refusal like any other (the breaker-open error,
// its reason kept), whose wait may be zero.
TEST(ConvertTest, RampRefusalAndDuplicateEffectReadFromTheWire) {
  v1::AcquireResponse response;
  response.set_allowed(false);
  response.set_state(v1::STATE_CLOSED);
  response.set_reason(v1::REJECT_REASON_RAMP);
  const Decision d = internal::DecisionFrom(response, "svc/ramp");
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.state, State::kClosed);
  EXPECT_EQ(d.reason, RejectReason::kRamp);
  EXPECT_EQ(d.retry_after, absl::ZeroDuration());
  EXPECT_EQ(d.source, DecisionSource::kSidecar);
  EXPECT_EQ(RejectReasonName(RejectReason::kRamp), "REJECT_REASON_RAMP");

  const absl::Status refused = internal::RefusedStatus(d, "");
  EXPECT_TRUE(IsBreakerOpen(refused));
  EXPECT_THAT(refused.message(), ::testing::HasSubstr("REJECT_REASON_RAMP"));
  const std::optional<Decision> back = RefusalOf(refused);
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->reason, RejectReason::kRamp);
  EXPECT_EQ(back->retry_after, absl::ZeroDuration());

  EXPECT_EQ(internal::FromProto(v1::EFFECT_DUPLICATE),
            ReportEffect::kDuplicate);
  EXPECT_EQ(internal::ToProto(ReportEffect::kDuplicate), v1::EFFECT_DUPLICATE);
  // A value from a newer breakerd reads as the zero value.
  EXPECT_EQ(internal::FromProto(static_cast<v1::Effect>(v1::Effect_MAX + 1)),
            ReportEffect::kUnspecified);
}

}  // namespace
}  // namespace breakerd::client

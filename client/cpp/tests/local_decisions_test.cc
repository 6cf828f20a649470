// Local decisions against the real breakerd (client/README.md, "Local
// decisions"; the local-* scenarios of client/conformance/SCENARIOS.md):
// first attempts granted in the process while the Watch stream allows it,
// their outcomes, the local refusals and the fail-open decisions sent in
// ReportBatch, and what turns the fast path off. breakerd runs with the
// conformance config, where local/* and local-short/* allow local decisions
// (five failures in a row open them; local-short/* cools down in 1 s). The
// bounds are loose: sanitizer builds and a loaded machine run these too.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
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

// The environment of a child process of local-probe (LocalProbeChild).
constexpr char kProbeAddressEnv[] = "BREAKERD_LOCAL_PROBE_ADDRESS";
constexpr char kProbeDependencyEnv[] = "BREAKERD_LOCAL_PROBE_DEPENDENCY";
constexpr char kProbeDirEnv[] = "BREAKERD_LOCAL_PROBE_DIR";

absl::Status Ok() { return absl::OkStatus(); }

// Reads a whole file; empty if it cannot.
std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)),
                     std::istreambuf_iterator<char>());
}

void WriteFile(const std::string& path, absl::string_view content) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp);
    out << content;
  }
  std::rename(tmp.c_str(), path.c_str());
}

// The sum of the samples of `name` in `metrics` whose labels include every
// one of `labels`.
double SumOf(absl::string_view metrics, absl::string_view name,
             const std::map<std::string, std::string>& labels) {
  double sum = 0;
  for (const PromSample& s : ParsePrometheus(metrics)) {
    if (s.name != name) continue;
    bool match = true;
    for (const auto& [key, value] : labels) {
      auto it = s.labels.find(key);
      match &= it != s.labels.end() && it->second == value;
    }
    if (match) sum += s.value;
  }
  return sum;
}

class LocalDecisionsTest : public ClientTest {
 protected:
  double Sum(absl::string_view name,
             const std::map<std::string, std::string>& labels) {
    return SumOf(proc_.Metrics(), name, labels);
  }
  // RPCs breakerd handled, of every code.
  double Handled(const std::string& method) {
    return Sum("breakerd_grpc_server_handled_total", {{"method", method}});
  }
  double ReportsOfClass(const std::string& dep, const std::string& cls) {
    return Sum("breakerd_reports_total", {{"dependency", dep}, {"class", cls}});
  }
  double ClientDecisions(const std::string& dep, const std::string& decision) {
    return Sum("breakerd_client_decisions_total",
               {{"dependency", dep}, {"decision", decision}});
  }

  // Creates `dep`'s breaker (a guarded call decided by breakerd), then
  // makes two-step Acquires, each reported as a success through its permit,
  // until one is granted locally (the "created" event has reached the
  // cache), and waits until breakerd has counted every one of them, so that
  // a test's deltas start from a settled count. False if no local grant
  // came within `wait`.
  bool UntilGrantedLocally(Client* client, const std::string& dep,
                           absl::Duration wait = absl::Seconds(5)) {
    if (!client->Do(dep, Ok).ok()) return false;
    int local = 0;
    const bool granted = WaitUntil(
        [&] {
          absl::StatusOr<Permit> p = client->Acquire(dep);
          if (!p.ok()) return false;
          const bool is_local =
              p->allowed() && p->decision().source == DecisionSource::kLocal;
          local += is_local;
          EXPECT_TRUE(p->Report(Outcome::Success()).ok());
          return is_local;
        },
        wait);
    return granted && Settled(dep, local);
  }

  // Waits until breakerd has counted `local` local grants of `dep` and a
  // report for each of its grants.
  bool Settled(const std::string& dep, double local) {
    return WaitUntil(
        [&] {
          return Acquires(dep, "allowed_local") == local &&
                 ReportsFor(dep) == Granted(dep) + local;
        },
        absl::Seconds(5));
  }
};

// conformance: local-fast-path
TEST_F(LocalDecisionsTest, TenThousandGuardedCallsMakeNoRpcEach) {
  auto client = NewClient();
  const std::string dep = "local/fast-cpp";
  ASSERT_TRUE(UntilGrantedLocally(client.get(), dep));
  const double acquires = Handled("Acquire");
  const double reports = Handled("Report");
  const double batches = Handled("ReportBatch");
  const double decided = SumFor("breakerd_acquire_total", dep);
  const double local = Acquires(dep, "allowed_local");
  const double successes = ReportsOfClass(dep, "success");

  constexpr int kCalls = 10000;
  int ran = 0;
  for (int i = 0; i < kCalls; ++i) {
    ASSERT_TRUE(client
                    ->Do(dep,
                         [&] {
                           ++ran;
                           return absl::OkStatus();
                         })
                    .ok());
  }
  client->Close();  // flushes

  EXPECT_EQ(ran, kCalls);
  EXPECT_EQ(Handled("Acquire") - acquires, 0) << "an Acquire RPC per call";
  EXPECT_EQ(Handled("Report") - reports, 0) << "a Report RPC per call";
  EXPECT_GE(Handled("ReportBatch") - batches, 1);
  EXPECT_EQ(Acquires(dep, "allowed_local") - local, kCalls);
  EXPECT_EQ(SumFor("breakerd_acquire_total", dep) - decided, kCalls)
      << "decisions other than allowed_local";
  EXPECT_EQ(ReportsOfClass(dep, "success") - successes, kCalls);
  EXPECT_EQ(client->stats().dropped_outcomes, 0u);
}

// conformance: local-two-step
TEST_F(LocalDecisionsTest, ATwoStepLocalGrantIsReportedThroughTheBatch) {
  auto client = NewClient();
  const std::string dep = "local/two-step-cpp";
  ASSERT_TRUE(UntilGrantedLocally(client.get(), dep));
  const double report_rpcs = Handled("Report");
  const double server_errors = ReportsOfClass(dep, "server_error");

  absl::StatusOr<Permit> permit = client->Acquire(dep);
  ASSERT_TRUE(permit.ok()) << permit.status();
  const Decision& d = permit->decision();
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(d.source, DecisionSource::kLocal);
  EXPECT_EQ(d.permit, 0u);
  EXPECT_EQ(d.state, State::kClosed);

  const absl::Time start = absl::Now();
  absl::StatusOr<ReportResult> result =
      permit->Report(Outcome::Of(OutcomeKind::kServerError));
  const absl::Duration took = absl::Now() - start;
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->effect, ReportEffect::kUnspecified) << "no effect yet";
  EXPECT_EQ(result->state, State::kUnspecified);
  EXPECT_LT(took, absl::Milliseconds(50)) << "not at once";
  EXPECT_TRUE(permit->reported());

  EXPECT_TRUE(WaitUntil(
      [&] { return ReportsOfClass(dep, "server_error") - server_errors == 1; },
      absl::Seconds(3)));
  EXPECT_EQ(Handled("Report"), report_rpcs) << "a Report RPC was sent";

  // The raw form with permit 0 sends nothing.
  absl::StatusOr<ReportResult> raw = client->Report(
      dep, 0, Outcome::Of(OutcomeKind::kServerError), absl::Milliseconds(1));
  ASSERT_TRUE(raw.ok()) << raw.status();
  EXPECT_EQ(raw->effect, ReportEffect::kUnspecified);
  // Nothing to wait for: a flush would have come within this.
  EXPECT_FALSE(WaitUntil(
      [&] { return ReportsOfClass(dep, "server_error") - server_errors != 1; },
      absl::Milliseconds(300)));
  EXPECT_EQ(Handled("Report"), report_rpcs);
  EXPECT_EQ(client->stats().report_errors, 0u);
}

// conformance: local-trip
TEST_F(LocalDecisionsTest, FiveLocalFailuresTripItAndTheCacheRefusesLocally) {
  auto client = NewClient();
  const std::string dep = "local/trip-cpp";
  ASSERT_TRUE(UntilGrantedLocally(client.get(), dep));
  const double acquire_rpcs = Handled("Acquire");
  const uint64_t refusals = client->stats().local_rejections;

  for (int i = 0; i < 5; ++i) {
    absl::Status s =
        client->Do(dep, [] { return absl::InternalError("upstream 500"); });
    ASSERT_EQ(s.code(), absl::StatusCode::kInternal) << s;
  }
  const absl::Time fifth = absl::Now();
  EXPECT_EQ(Handled("Acquire"), acquire_rpcs) << "not all granted locally";

  int made = 0;
  int ran = 0;
  absl::Status refused;
  while (absl::Now() - fifth < absl::Seconds(10)) {
    ++made;
    refused = client->Do(dep, [&] {
      ++ran;
      return absl::OkStatus();
    });
    if (IsBreakerOpen(refused)) break;
  }
  const absl::Duration reaction = absl::Now() - fifth;
  ASSERT_TRUE(IsBreakerOpen(refused)) << "never refused: " << refused;
  std::cout << "refused locally " << reaction << " after the fifth failure, "
            << made << " calls later" << std::endl;
  EXPECT_EQ(RefusalOf(refused)->source, DecisionSource::kLocal);
  EXPECT_EQ(RefusalOf(refused)->reason, RejectReason::kOpen);
  EXPECT_LT(reaction, absl::Seconds(2));
  EXPECT_EQ(ran, made - 1) << "a call before the refusal did not run";
  EXPECT_EQ(
      Sum("breakerd_transitions_total", {{"dependency", dep},
                                         {"from", "closed"},
                                         {"to", "open"},
                                         {"reason", "consecutive_failures"}}),
      1);
  auto stub = proc_.BreakerStub();
  grpc::ClientContext ctx;
  v1::GetStateRequest get;
  get.set_dependency(dep);
  v1::BreakerStatus status;
  ASSERT_TRUE(stub->GetState(&ctx, get, &status).ok());
  EXPECT_EQ(status.state(), v1::STATE_OPEN);

  for (int i = 0; i < 20; ++i) {
    absl::Status s = client->Do(dep, Ok);
    ASSERT_TRUE(IsBreakerOpen(s)) << s;
    EXPECT_EQ(RefusalOf(s)->source, DecisionSource::kLocal);
  }
  client->Close();
  const uint64_t counted = client->stats().local_rejections - refusals;
  EXPECT_EQ(counted, 21u);
  EXPECT_GE(ClientDecisions(dep, "refused_local"), 21);
  EXPECT_EQ(ClientDecisions(dep, "refused_local"),
            static_cast<double>(counted));
}

// The child processes of local-probe: each a process of its own, started by
// the test (the test binary again, this test alone), with its own client.
// Skipped when run otherwise.
TEST(LocalProbeChild, OneGuardedCallOnceTheCooldownIsOver) {
  const char* address = std::getenv(kProbeAddressEnv);
  const char* dep_env = std::getenv(kProbeDependencyEnv);
  const char* dir_env = std::getenv(kProbeDirEnv);
  if (address == nullptr || dep_env == nullptr || dir_env == nullptr) {
    GTEST_SKIP() << "a child process of the local-probe scenario";
  }
  const std::string dep = dep_env;
  const std::string me = absl::StrCat(dir_env, "/child-", getpid());
  ClientOptions options;
  options.target = address;
  // The defaults but decision_timeout: a loaded machine must not turn the
  // decision the scenario counts into a fail-open.
  options.decision_timeout = absl::Seconds(2);
  auto client = Client::Create(options);
  ASSERT_TRUE(client.ok()) << client.status();
  ASSERT_TRUE((*client)->WaitForConnected(kWait));
  ASSERT_TRUE(WaitUntil(
      [&] { return (*client)->CachedState(dep) == State::kClosed; }, kWait));
  WriteFile(me + ".ready", "ready");
  // The test trips the breaker: wait until the cache says so (no Acquire
  // before: its success would break the five failures in a row).
  ASSERT_TRUE(
      WaitUntil([&] { return (*client)->CachedState(dep) == State::kOpen; },
                absl::Seconds(20)));
  absl::StatusOr<Permit> refused = (*client)->Acquire(dep);
  ASSERT_TRUE(refused.ok());
  ASSERT_FALSE(refused->allowed());
  ASSERT_EQ(refused->decision().source, DecisionSource::kLocal);
  absl::SleepFor(refused->decision().retry_after + absl::Milliseconds(20));
  bool ran = false;
  absl::Status s = (*client)->Do(dep, [&] {
    ran = true;
    absl::SleepFor(absl::Milliseconds(300));
    return absl::OkStatus();
  });
  std::string result;
  if (ran) {
    result = absl::StrCat("ran ", s.ok() ? "ok" : s.ToString());
  } else if (std::optional<Decision> d = RefusalOf(s)) {
    result = absl::StrCat("refused ", DecisionSourceName(d->source), " ",
                          RejectReasonName(d->reason));
  } else {
    result = absl::StrCat("error ", s.ToString());
  }
  (*client)->Close();  // flushes
  WriteFile(me + ".result", result);
}

// conformance: local-probe
TEST_F(LocalDecisionsTest, OneOfThreeProcessesProbesAndNoneGrantsLocally) {
  auto client = NewClient();
  const std::string dep = "local-short/probe-cpp";
  ASSERT_TRUE(UntilGrantedLocally(client.get(), dep));
  const double local = Acquires(dep, "allowed_local");
  const double probes = Acquires(dep, "probe");

  char exe[PATH_MAX] = {};
  const ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  ASSERT_GT(n, 0);
  constexpr int kChildren = 3;
  std::vector<pid_t> pids(kChildren, -1);
  for (int i = 0; i < kChildren; ++i) {
    ASSERT_EQ(
        SpawnLogged({exe, "--gtest_filter=LocalProbeChild.*"},
                    absl::StrCat(proc_.dir(), "/child", i, ".log"), &pids[i],
                    {absl::StrCat(kProbeAddressEnv, "=", proc_.tcp_address()),
                     absl::StrCat(kProbeDependencyEnv, "=", dep),
                     absl::StrCat(kProbeDirEnv, "=", proc_.dir())}),
        0);
  }
  const auto child_file = [&](int i, absl::string_view what) {
    return absl::StrCat(proc_.dir(), "/child-", pids[i], ".", what);
  };
  const auto child_logs = [&] {
    std::string logs;
    for (int i = 0; i < kChildren; ++i) {
      absl::StrAppend(&logs, "--- child ", i, "\n",
                      ReadFile(absl::StrCat(proc_.dir(), "/child", i, ".log")));
    }
    return logs;
  };
  // Children are slow to start on a loaded machine (and under sanitizers).
  ASSERT_TRUE(WaitUntil(
      [&] {
        for (int i = 0; i < kChildren; ++i) {
          if (ReadFile(child_file(i, "ready")).empty()) return false;
        }
        return true;
      },
      absl::Seconds(30)))
      << child_logs();

  // Five failures, granted locally, open it for 1 s.
  for (int i = 0; i < 5; ++i) {
    ASSERT_EQ(client->Do(dep, [] { return absl::InternalError("500"); }).code(),
              absl::StatusCode::kInternal);
  }
  std::vector<std::string> results;
  for (int i = 0; i < kChildren; ++i) {
    int status = 0;
    ASSERT_TRUE(
        WaitUntil([&] { return waitpid(pids[i], &status, WNOHANG) == pids[i]; },
                  absl::Seconds(30)))
        << child_logs();
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << child_logs();
    results.push_back(ReadFile(child_file(i, "result")));
  }
  int ran = 0;
  for (const std::string& r : results) {
    if (absl::StartsWith(r, "ran")) {
      ++ran;
      EXPECT_EQ(r, "ran ok");
    } else {
      EXPECT_THAT(
          r, ::testing::AnyOf("refused sidecar REJECT_REASON_PROBE_IN_FLIGHT",
                              "refused local REJECT_REASON_OPEN"));
    }
  }
  EXPECT_EQ(ran, 1) << ::testing::PrintToString(results) << child_logs();
  EXPECT_EQ(Acquires(dep, "probe") - probes, 1);
  EXPECT_EQ(Sum("breakerd_transitions_total", {{"dependency", dep},
                                               {"from", "half_open"},
                                               {"to", "closed"},
                                               {"reason", "probe_succeeded"}}),
            1);
  // The five failures were the last local grants: none by the children.
  client->Close();
  EXPECT_EQ(Acquires(dep, "allowed_local") - local, 5);
}

// conformance: local-stream-drop
TEST_F(LocalDecisionsTest, NoLocalGrantOnceTheStreamEndsAndDecisionsReachBack) {
  auto client = NewClientAsConfigured();
  const std::string dep = "local/drop-cpp";
  ASSERT_TRUE(UntilGrantedLocally(client.get(), dep));

  const std::string address = proc_.tcp_address();
  ASSERT_TRUE(proc_.Signal(SIGKILL));
  ASSERT_TRUE(proc_.WaitExit(kWait).has_value());
  // The client learns that the stream ended (the connection closed).
  ASSERT_TRUE(WaitUntil([&] { return !client->WatchConnected(); }, kWait));
  const uint64_t fail_open = client->stats().fail_open;
  constexpr int kDown = 20;
  for (int i = 0; i < kDown; ++i) {
    absl::StatusOr<Permit> p = client->Acquire(dep);
    ASSERT_TRUE(p.ok());
    EXPECT_EQ(p->decision().source, DecisionSource::kFailOpen)
        << DecisionSourceName(p->decision().source);
    p->Report(Outcome::Success()).IgnoreError();
    int ran = 0;
    EXPECT_TRUE(client
                    ->Do(dep,
                         [&] {
                           ++ran;
                           return absl::OkStatus();
                         })
                    .ok());
    EXPECT_EQ(ran, 1);
  }
  EXPECT_EQ(client->stats().fail_open - fail_open, 2u * kDown);

  BreakerdProcess again;
  ASSERT_NO_FATAL_FAILURE(StartBreakerd(&again, {"--listen=" + address}));
  const absl::Time restarted = absl::Now();
  std::optional<Decision> first;
  ASSERT_TRUE(WaitUntil(
      [&] {
        absl::StatusOr<Permit> p = client->Acquire(dep);
        if (!p.ok()) return false;
        if (p->decision().source == DecisionSource::kFailOpen) return false;
        first = p->decision();
        p->Report(Outcome::Success()).IgnoreError();
        return true;
      },
      absl::Seconds(10)))
      << "not back";
  const absl::Time back = absl::Now();
  std::cout << "back " << back - restarted << " after the restart" << std::endl;
  EXPECT_EQ(first->source, DecisionSource::kSidecar)
      << DecisionSourceName(first->source);
  EXPECT_TRUE(first->allowed);
  EXPECT_EQ(Sample(again.Metrics(),
                   absl::StrCat("breakerd_acquire_total{dependency=\"", dep,
                                "\",decision=\"allowed\"}"))
                .value_or(0),
            1);
  const uint64_t made = client->stats().fail_open - fail_open;
  const auto counted = [&] {
    return SumOf(again.Metrics(), "breakerd_client_decisions_total",
                 {{"dependency", dep}, {"decision", "fail_open"}});
  };
  EXPECT_TRUE(WaitUntil([&] { return counted() == static_cast<double>(made); },
                        back + absl::Seconds(3) - absl::Now()))
      << counted() << " of " << made << " fail-open decisions counted";
}

// conformance: local-off
TEST_F(LocalDecisionsTest, WithLocalDecisionsOffEveryCallAsksBreakerd) {
  ClientOptions options;
  options.local_decisions = false;
  auto client = NewClient(options);
  const std::string dep = "local/off-cpp";
  ASSERT_TRUE(client->Do(dep, Ok).ok());
  // The "created" event reached the cache; still, breakerd decides.
  ASSERT_TRUE(WaitUntil([&] { return client->CachedState(dep).has_value(); },
                        absl::Seconds(2)));
  absl::StatusOr<Permit> p = client->Acquire(dep);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->decision().source, DecisionSource::kSidecar);
  ASSERT_TRUE(p->Report(Outcome::Success()).ok());

  const double allowed = Acquires(dep, "allowed");
  const double report_rpcs = Handled("Report");
  for (int i = 0; i < 100; ++i) ASSERT_TRUE(client->Do(dep, Ok).ok());
  EXPECT_EQ(Acquires(dep, "allowed") - allowed, 100);
  EXPECT_EQ(Acquires(dep, "allowed_local"), 0);
  EXPECT_EQ(Handled("Report") - report_rpcs, 100);
  client->Close();
  EXPECT_EQ(Handled("ReportBatch"), 0) << "no batch with local decisions off";
}

// A named chain's first candidate granted locally: no AcquireFirst RPC,
// and breakerd counts the chain's decision (tier 0) and outcome from the
// batch.
TEST_F(LocalDecisionsTest, ANamedChainGrantsItsFirstCandidateLocally) {
  auto client = NewClient();
  const std::string primary = "local/chain-primary-cpp";
  ASSERT_TRUE(UntilGrantedLocally(client.get(), primary));
  const double acquire_firsts = Handled("AcquireFirst");

  std::vector<std::string> called;
  absl::Status s = client->First({primary, "local/chain-backup-cpp"},
                                 [&](absl::string_view dep) {
                                   called.push_back(std::string(dep));
                                   return absl::OkStatus();
                                 },
                                 {"local-chain-cpp"});
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_THAT(called, ::testing::ElementsAre(primary));
  EXPECT_EQ(Handled("AcquireFirst"), acquire_firsts);
  EXPECT_TRUE(WaitUntil(
      [&] {
        return Sum("breakerd_chain_decisions_total",
                   {{"chain", "local-chain-cpp"}, {"tier", "0"}}) == 1 &&
               Sum("breakerd_chain_outcomes_total",
                   {{"chain", "local-chain-cpp"},
                    {"tier", "0"},
                    {"class", "success"}}) == 1;
      },
      absl::Seconds(3)));
  // A retry is never granted locally.
  absl::StatusOr<Permit> retry = client->AcquireFirst({primary}, 1);
  ASSERT_TRUE(retry.ok());
  EXPECT_EQ(retry->decision().source, DecisionSource::kSidecar);
  retry->Report(Outcome::Success()).IgnoreError();
}

}  // namespace
}  // namespace breakerd::client

// Fault tests against the real breakerd binary: what happens when the world
// around the sidecar misbehaves. A client dies holding the probe; SIGTERM
// arrives under load; the process crashes right after an operator override;
// the metrics port or the unix socket's directory is unusable; a flag is
// unknown; the config file is replaced by garbage, truncated or deleted while
// running, or is invalid at start; a Watch client stops reading; Reports race
// Admin calls under open Watch streams.
//
// Time-based rules use short configured leases with jitter 0; every wait is
// a bounded poll.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "breakerd/v1/breaker.grpc.pb.h"
#include "grpc/grpc.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"
#include "gtest/gtest.h"
#include "tests/e2e/breakerd_process.h"
#include "tests/fault/fault_util.h"

namespace breakerd {
namespace fault {
namespace {

constexpr char kAdminToken[] = "fault-admin-token-3c9e";

// True in ASan and TSan builds (scripts/sanitize.sh), where breakerd's RSS
// measures the sanitizer's allocator (ASan's quarantine keeps what is freed,
// TSan's shadow grows with each new address touched) more than breakerd.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitizerBuild = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
constexpr bool kSanitizerBuild = true;
#else
constexpr bool kSanitizerBuild = false;
#endif
#else
constexpr bool kSanitizerBuild = false;
#endif

// Every test expects breakerd to outlive it unless it says otherwise: a
// crash under a fault shows up here even if the test's own checks missed it.
class FaultE2eTest : public ::testing::Test {
 protected:
  void TearDown() override {
    if (proc_.running() && !expect_exit_) {
      EXPECT_FALSE(proc_.Exited())
          << "breakerd died during the test (see its log below)";
    }
  }

  std::string WriteAdminToken() {
    return proc_.WriteFile("admin-token", kAdminToken);
  }

  BreakerdProcess proc_;
  bool expect_exit_ = false;
};

// --- a client dies holding the probe -----------------------------------------

// The first line of `path` that starts with `prefix`, if any yet.
std::optional<std::string> LineStartingWith(const std::string& path,
                                            absl::string_view prefix) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (absl::StartsWith(line, prefix)) return line;
  }
  return std::nullopt;
}

// The value of `key=` in a "k=v k=v" line.
std::optional<uint64_t> FieldOf(absl::string_view line, absl::string_view key) {
  for (absl::string_view part : absl::StrSplit(line, ' ')) {
    if (!absl::ConsumePrefix(&part, key) || !absl::ConsumePrefix(&part, "=")) {
      continue;
    }
    uint64_t value = 0;
    if (absl::SimpleAtoi(part, &value)) return value;
  }
  return std::nullopt;
}

// A separate application process takes the half-open probe and is killed
// before it reports. Nobody else probes while its lease runs; once the
// lease lapses the next caller gets the probe, and a Report arriving late
// with the dead client's permit changes nothing.
TEST_F(FaultE2eTest, ClientKilledHoldingTheProbeFreesItWhenTheLeaseLapses) {
  constexpr absl::Duration kLease = absl::Milliseconds(1500);
  const std::string config = proc_.WriteFile("config.yaml", R"(
defaults:
  consecutive_failures: 1
  failure_rate: { threshold: 0 }
  cooldown: { base: 100ms, max: 100ms, jitter: 0 }
  probe: { lease: 1500ms }
)");
  ASSERT_TRUE(proc_.Start({"--config=" + config}));
  auto stub = proc_.BreakerStub();
  const std::string dep = "svc/probe-holder-dies";

  Result<v1::AcquireResponse> first = Acquire(stub.get(), dep);
  ASSERT_TRUE(first.status.ok()) << Describe(first.status);
  ASSERT_TRUE(
      Report(stub.get(), dep, first.response.permit(), v1::OUTCOME_TIMEOUT)
          .status.ok());
  ASSERT_TRUE(WaitUntil([&] {
    return GetState(stub.get(), dep).response.state() == v1::STATE_HALF_OPEN;
  })) << "the 100 ms cooldown did not end";

  const std::string client_log = proc_.dir() + "/probe-client.log";
  pid_t client = -1;
  const absl::Time spawned = absl::Now();
  ASSERT_EQ(SpawnLogged({FAULT_PROBE_CLIENT, proc_.tcp_address(), dep},
                        client_log, &client),
            0);
  std::optional<std::string> line;
  const bool answered = WaitUntil(
      [&] {
        line = LineStartingWith(client_log, "allowed=");
        return line.has_value();
      },
      absl::Seconds(10));
  if (!answered) {
    kill(client, SIGKILL);
    WaitChild(client, absl::Seconds(5));
    std::ifstream in(client_log);
    FAIL() << "the client process printed no Acquire result:\n" << in.rdbuf();
  }
  const absl::Time granted_by = absl::Now();
  ASSERT_EQ(FieldOf(*line, "allowed"), 1u) << *line;
  ASSERT_EQ(FieldOf(*line, "probe"), 1u) << *line;
  const std::optional<uint64_t> dead_permit = FieldOf(*line, "permit");
  ASSERT_TRUE(dead_permit.has_value()) << *line;

  // While the client lives, the probe is its: everyone else is refused
  // (checked unless a very loaded machine let the lease run out already).
  Result<v1::AcquireResponse> refused = Acquire(stub.get(), dep);
  ASSERT_TRUE(refused.status.ok()) << Describe(refused.status);
  if (absl::Now() < spawned + kLease) {
    EXPECT_FALSE(refused.response.allowed());
    EXPECT_EQ(refused.response.reason(), v1::REJECT_REASON_PROBE_IN_FLIGHT)
        << refused.response.DebugString();
  }

  ASSERT_EQ(kill(client, SIGKILL), 0) << std::strerror(errno);
  EXPECT_EQ(WaitChild(client, absl::Seconds(5)), 128 + SIGKILL);

  // The dead client's connection is gone; its probe is not freed by that,
  // only by the lease.
  absl::Time reprobed;
  Result<v1::AcquireResponse> next;
  ASSERT_TRUE(WaitUntil(
      [&] {
        next = Acquire(stub.get(), dep);
        reprobed = absl::Now();
        if (!next.status.ok() || next.response.allowed()) return true;
        EXPECT_EQ(next.response.reason(), v1::REJECT_REASON_PROBE_IN_FLIGHT)
            << next.response.DebugString();
        return false;
      },
      kLease + absl::Seconds(5)))
      << "no caller got the probe after the dead client's lease";
  ASSERT_TRUE(next.status.ok()) << Describe(next.status);
  EXPECT_TRUE(next.response.probe()) << next.response.DebugString();
  // Not before the lease: it started after `spawned` (with a little slack
  // for the test's clock against breakerd's monotonic one).
  EXPECT_GE(reprobed - spawned, kLease - absl::Milliseconds(100))
      << "the probe was handed out again before the lease lapsed";
  EXPECT_LE(reprobed - granted_by, kLease + absl::Seconds(3));

  // The dead client's permit, arriving now, is late: nothing moves.
  Result<v1::ReportResponse> late =
      Report(stub.get(), dep, *dead_permit, v1::OUTCOME_SERVER_ERROR);
  ASSERT_TRUE(late.status.ok()) << Describe(late.status);
  EXPECT_EQ(late.response.effect(), v1::EFFECT_LATE);
  EXPECT_EQ(late.response.state(), v1::STATE_HALF_OPEN);

  Result<v1::ReportResponse> closed =
      Report(stub.get(), dep, next.response.permit(), v1::OUTCOME_SUCCESS);
  ASSERT_TRUE(closed.status.ok()) << Describe(closed.status);
  EXPECT_EQ(closed.response.effect(), v1::EFFECT_COUNTED_SUCCESS);
  EXPECT_EQ(closed.response.state(), v1::STATE_CLOSED);
}

// --- SIGTERM under load ------------------------------------------------------

// One Report a load thread sent, identified by its latency in milliseconds
// (unique per call), which --trace-file records for every Report breakerd
// accepted.
struct SentReport {
  int64_t id = 0;
  grpc::StatusCode code = grpc::StatusCode::OK;
  std::string message;
};

// The latency_ms of every line of a --trace-file.
std::set<int64_t> TracedIds(const std::string& path) {
  std::set<int64_t> ids;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    size_t pos = line.find("\"latency_ms\":");
    if (pos == std::string::npos) continue;
    pos += std::strlen("\"latency_ms\":");
    const size_t end = line.find_first_of(",}", pos);
    int64_t id = 0;
    if (absl::SimpleAtoi(line.substr(pos, end - pos), &id)) ids.insert(id);
  }
  return ids;
}

// Eight clients on their own connections call Acquire and Report as fast
// as they can; SIGTERM arrives mid-stream. Every call breakerd took (every
// Report it recorded in the trace) must come back OK to its client; every
// call that fails must be one breakerd never took, and fail with
// UNAVAILABLE only: no CANCELLED, INTERNAL or DEADLINE_EXCEEDED. breakerd
// exits 0.
TEST_F(FaultE2eTest, SigtermUnderLoadAnswersEveryCallItTook) {
  const std::string trace = proc_.dir() + "/trace.jsonl";
  ASSERT_TRUE(proc_.Start({"--trace-file=" + trace, "--shutdown-grace=10s"}));
  constexpr int kThreads = 8;
  constexpr int kReportsBeforeSigterm = 1000;

  std::atomic<int64_t> next_id{1};
  std::atomic<int> ok_reports{0};
  std::atomic<bool> stop{false};
  std::vector<std::vector<SentReport>> reports(kThreads);
  std::vector<std::vector<grpc::Status>> failed_acquires(kThreads);
  std::vector<std::thread> threads;
  struct StopLoad {
    std::atomic<bool>& stop;
    std::vector<std::thread>& threads;
    ~StopLoad() {
      stop.store(true);
      for (std::thread& t : threads) {
        if (t.joinable()) t.join();
      }
    }
  } stop_load{stop, threads};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      auto stub = v1::Breaker::NewStub(proc_.Channel(t));
      const std::string dep = absl::StrCat("load/", t);
      while (!stop.load()) {
        Result<v1::AcquireResponse> a = Acquire(stub.get(), dep);
        if (!a.status.ok()) {
          failed_acquires[t].push_back(a.status);
          return;
        }
        SentReport sent;
        sent.id = next_id.fetch_add(1);
        Result<v1::ReportResponse> r =
            Report(stub.get(), dep, a.response.permit(), v1::OUTCOME_SUCCESS,
                   absl::Milliseconds(sent.id));
        sent.code = r.status.error_code();
        sent.message = r.status.error_message();
        reports[t].push_back(sent);
        if (!r.status.ok()) return;
        ok_reports.fetch_add(1);
      }
    });
  }
  const bool loaded =
      WaitUntil([&] { return ok_reports.load() >= kReportsBeforeSigterm; },
                absl::Seconds(20));
  EXPECT_TRUE(loaded) << ok_reports.load() << " reports in 20 s";
  expect_exit_ = true;
  ASSERT_TRUE(proc_.Signal(SIGTERM));
  const int ok_at_sigterm = ok_reports.load();
  std::optional<int> code = proc_.WaitExit(absl::Seconds(15));
  stop.store(true);
  for (std::thread& t : threads) t.join();
  ASSERT_TRUE(code.has_value()) << "breakerd did not exit after SIGTERM";
  EXPECT_EQ(*code, 0);

  // Every call breakerd took was answered OK (the trace proves which ones it
  // took). A call it never took may fail with UNAVAILABLE, or, in the last
  // milliseconds, CANCELLED: gRPC 1.51's Server::Shutdown cancels calls that
  // reached the transport but were not yet handed to a handler. Both mean
  // "not processed" and every client fails open on both; nothing else
  // (INTERNAL, a connection reset) is acceptable.
  constexpr char kOnlyUnavailable[] =
      "a call breakerd did not take may fail with UNAVAILABLE or CANCELLED "
      "only";
  auto not_processed = [](grpc::StatusCode code) {
    return code == grpc::StatusCode::UNAVAILABLE ||
           code == grpc::StatusCode::CANCELLED;
  };
  const std::set<int64_t> traced = TracedIds(trace);
  std::map<std::string, int> failures;  // "<code>: <message>" -> count
  int ok = 0, failed = 0;
  for (const std::vector<SentReport>& per_thread : reports) {
    for (const SentReport& r : per_thread) {
      const bool took = traced.count(r.id) > 0;
      if (r.code == grpc::StatusCode::OK) {
        ++ok;
        EXPECT_TRUE(took) << "Report " << r.id << " answered OK, not traced";
        continue;
      }
      ++failed;
      EXPECT_FALSE(took) << "breakerd took Report " << r.id
                         << " but its client got code " << r.code << ": "
                         << r.message;
      EXPECT_TRUE(not_processed(r.code))
          << kOnlyUnavailable << "; Report " << r.id << ": code " << r.code
          << ": " << r.message;
      ++failures[absl::StrCat(r.code, ": ", r.message)];
    }
  }
  for (const std::vector<grpc::Status>& per_thread : failed_acquires) {
    for (const grpc::Status& s : per_thread) {
      EXPECT_TRUE(not_processed(s.error_code()))
          << kOnlyUnavailable << "; Acquire: " << Describe(s);
      ++failures[absl::StrCat(s.error_code(), ": ", s.error_message())];
    }
  }
  EXPECT_EQ(traced.size(), static_cast<size_t>(ok))
      << "the trace holds Reports no client sent or saw answered";
  std::cout << "[ figures  ] " << ok << " Reports OK (" << ok - ok_at_sigterm
            << " after SIGTERM was sent), " << failed
            << " failed; failed calls by code and message:\n";
  for (const auto& [what, count] : failures) {
    std::cout << "[ figures  ]   " << count << " x " << what << "\n";
  }
}

// --- a crash after an override -----------------------------------------------

// Starts `proc` with the admin token and `state_file`.
::testing::AssertionResult StartWithStateFile(BreakerdProcess& proc,
                                              const std::string& state_file) {
  return proc.Start(
      {"--admin-token-file=" + proc.WriteFile("admin-token", kAdminToken),
       "--state-file=" + state_file});
}

// Kills `proc` with SIGKILL (no shutdown, no state written) and reaps it.
::testing::AssertionResult Crash(BreakerdProcess& proc) {
  if (!proc.Signal(SIGKILL)) {
    return ::testing::AssertionFailure() << "cannot send SIGKILL";
  }
  std::optional<int> code = proc.WaitExit(absl::Seconds(10));
  if (code != 128 + SIGKILL) {
    return ::testing::AssertionFailure()
           << "exit code " << code.value_or(-1) << " after SIGKILL";
  }
  return ::testing::AssertionSuccess();
}

// The breakers ListStates returns in a forced state, as "name state".
std::vector<std::string> ForcedBreakers(v1::Breaker::Stub* stub) {
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + kRpcTimeout));
  v1::ListStatesResponse list;
  grpc::Status status = stub->ListStates(&ctx, v1::ListStatesRequest(), &list);
  EXPECT_TRUE(status.ok()) << Describe(status);
  std::vector<std::string> forced;
  for (const v1::BreakerStatus& b : list.breakers()) {
    if (b.state() == v1::STATE_FORCED_OPEN ||
        b.state() == v1::STATE_FORCED_CLOSED) {
      forced.push_back(
          absl::StrCat(b.dependency(), " ", v1::State_Name(b.state())));
    }
  }
  return forced;
}

// The runbook's sequence: force-open, SIGTERM (the state file holds the
// override), restart, reset, crash, restart. The reset was written when it
// was made, so the override does not come back.
TEST(OverrideCrashE2eTest, ResetOverrideStaysResetAfterACrash) {
  BreakerdProcess scratch;  // only for its temporary directory
  const std::string state = scratch.dir() + "/state";
  const std::string dep = "search/api";
  const std::string bearer = BearerToken(kAdminToken);
  {
    BreakerdProcess first;
    ASSERT_TRUE(StartWithStateFile(first, state));
    auto admin = first.AdminStub();
    Result<v1::AdminResponse> forced =
        Admin(admin.get(), AdminOp::kForceOpen, dep, bearer);
    ASSERT_TRUE(forced.status.ok()) << Describe(forced.status);
    ASSERT_TRUE(first.Signal(SIGTERM));
    ASSERT_EQ(first.WaitExit(absl::Seconds(15)), 0) << first.Log();
  }
  {
    BreakerdProcess second;
    ASSERT_TRUE(StartWithStateFile(second, state));
    auto stub = second.BreakerStub();
    ASSERT_EQ(GetState(stub.get(), dep).response.state(), v1::STATE_FORCED_OPEN)
        << "the override written at SIGTERM is read back";
    auto admin = second.AdminStub();
    Result<v1::AdminResponse> reset =
        Admin(admin.get(), AdminOp::kReset, dep, bearer);
    ASSERT_TRUE(reset.status.ok()) << Describe(reset.status);
    ASSERT_EQ(reset.response.status().state(), v1::STATE_CLOSED);
    ASSERT_TRUE(Crash(second)) << second.Log();
  }
  BreakerdProcess third;
  ASSERT_TRUE(StartWithStateFile(third, state));
  auto stub = third.BreakerStub();
  Result<v1::BreakerStatus> s = GetState(stub.get(), dep);
  if (s.status.ok()) {
    EXPECT_EQ(s.response.state(), v1::STATE_CLOSED)
        << "the reset override came back: " << s.response.DebugString();
  } else {
    EXPECT_EQ(s.status.error_code(), grpc::StatusCode::NOT_FOUND)
        << Describe(s.status);
  }
  EXPECT_EQ(ForcedBreakers(stub.get()), std::vector<std::string>());
  Result<v1::AcquireResponse> a = Acquire(stub.get(), dep);
  ASSERT_TRUE(a.status.ok()) << Describe(a.status);
  EXPECT_TRUE(a.response.allowed()) << a.response.DebugString();
}

// An override is on disk before the Admin call answers: a crash right after
// it (no SIGTERM, no time for a background write) keeps it.
TEST(OverrideCrashE2eTest, ForceOpenSurvivesACrashRightAfterTheAnswer) {
  BreakerdProcess scratch;  // only for its temporary directory
  const std::string state = scratch.dir() + "/state";
  const std::string dep = "search/api";
  {
    BreakerdProcess first;
    ASSERT_TRUE(StartWithStateFile(first, state));
    auto admin = first.AdminStub();
    Result<v1::AdminResponse> forced =
        Admin(admin.get(), AdminOp::kForceOpen, dep, BearerToken(kAdminToken));
    ASSERT_TRUE(forced.status.ok()) << Describe(forced.status);
    ASSERT_TRUE(Crash(first)) << first.Log();
  }
  BreakerdProcess again;
  ASSERT_TRUE(StartWithStateFile(again, state));
  auto stub = again.BreakerStub();
  Result<v1::BreakerStatus> s = GetState(stub.get(), dep);
  ASSERT_TRUE(s.status.ok())
      << "the override was lost in the crash: " << Describe(s.status) << "\n"
      << again.Log();
  EXPECT_EQ(s.response.state(), v1::STATE_FORCED_OPEN);
  Result<v1::AcquireResponse> a = Acquire(stub.get(), dep);
  ASSERT_TRUE(a.status.ok()) << Describe(a.status);
  EXPECT_FALSE(a.response.allowed());
  EXPECT_EQ(a.response.reason(), v1::REJECT_REASON_FORCED_OPEN);
}

// --- startup failures --------------------------------------------------------

// A metrics port someone else holds: a clear error naming it, and exit 1
// before serving.
TEST_F(FaultE2eTest, MetricsPortTakenExitsNonZeroNamingThePort) {
  HeldPort held;
  ASSERT_GT(held.port(), 0);
  const std::string address = absl::StrCat("127.0.0.1:", held.port());
  expect_exit_ = true;
  StartupFailure f =
      ExpectStartupFailure(proc_, {"--metrics-listen=" + address});
  ASSERT_TRUE(f.exit_code.has_value()) << "still running; log:\n" << f.log;
  EXPECT_EQ(*f.exit_code, 1) << f.log;
  const std::string error = LogLinesWith(f.log, "\"event\":\"startup_failed\"");
  EXPECT_TRUE(absl::StrContains(error, "metrics-listen " + address))
      << "the error should name the flag and the port:\n"
      << f.log;
  EXPECT_TRUE(absl::StrContains(error, "address in use")) << f.log;
  EXPECT_FALSE(absl::StrContains(f.log, "\"event\":\"serving\"")) << f.log;
}

// The same for the gRPC port.
TEST_F(FaultE2eTest, GrpcPortTakenExitsNonZeroNamingThePort) {
  HeldPort held;
  ASSERT_GT(held.port(), 0);
  const std::string address = absl::StrCat("127.0.0.1:", held.port());
  expect_exit_ = true;
  StartupFailure f = ExpectStartupFailure(proc_, {"--listen=" + address});
  ASSERT_TRUE(f.exit_code.has_value()) << "still running; log:\n" << f.log;
  EXPECT_EQ(*f.exit_code, 1) << f.log;
  const std::string error = LogLinesWith(f.log, "\"event\":\"startup_failed\"");
  EXPECT_TRUE(absl::StrContains(error, "listen " + address)) << f.log;
  EXPECT_TRUE(absl::StrContains(error, "address in use")) << f.log;
}

TEST_F(FaultE2eTest, UnixSocketInMissingDirectoryExitsNonZero) {
  const std::string missing = proc_.dir() + "/no-such-dir";
  const std::string address = "unix:" + missing + "/breakerd.sock";
  expect_exit_ = true;
  StartupFailure f = ExpectStartupFailure(proc_, {"--listen=" + address});
  ASSERT_TRUE(f.exit_code.has_value()) << "still running; log:\n" << f.log;
  EXPECT_EQ(*f.exit_code, 1) << f.log;
  const std::string error = LogLinesWith(f.log, "\"event\":\"startup_failed\"");
  EXPECT_TRUE(absl::StrContains(error, "listen " + address)) << f.log;
  EXPECT_TRUE(absl::StrContains(error, "directory " + missing)) << f.log;
  EXPECT_TRUE(absl::StrContains(error, "does not exist")) << f.log;
  EXPECT_FALSE(std::filesystem::exists(missing));
}

// A directory breakerd may not create files in. Root ignores permission
// bits, so as root the child drops to nobody (65534) before exec.
TEST_F(FaultE2eTest, UnixSocketInUnwritableDirectoryExitsNonZero) {
  char templ[] = "/tmp/bkd-ro-XXXXXX";
  ASSERT_NE(mkdtemp(templ), nullptr) << std::strerror(errno);
  const std::string dir = templ;
  ASSERT_EQ(chmod(dir.c_str(), 0555), 0) << std::strerror(errno);
  const std::string address = "unix:" + dir + "/breakerd.sock";
  const std::string log_path = proc_.dir() + "/unwritable.log";
  const std::vector<std::string> args = {BREAKERD_BINARY, "--listen=" + address,
                                         "--metrics-listen=127.0.0.1:0"};
  pid_t pid = -1;
  int rc;
  if (geteuid() == 0) {
    rc = SpawnLoggedAs(args, log_path, 65534, 65534, &pid);
    if (rc == EACCES || rc == EPERM) {
      rmdir(dir.c_str());
      GTEST_SKIP() << "cannot run " << BREAKERD_BINARY
                   << " as nobody (65534): " << std::strerror(rc);
    }
  } else {
    rc = SpawnLogged(args, log_path, &pid);
  }
  ASSERT_EQ(rc, 0) << std::strerror(rc);
  std::optional<int> code = WaitChild(pid, absl::Seconds(10));
  std::ifstream in(log_path);
  const std::string log((std::istreambuf_iterator<char>(in)),
                        std::istreambuf_iterator<char>());
  const bool socket_left = std::filesystem::exists(dir + "/breakerd.sock");
  rmdir(dir.c_str());
  ASSERT_TRUE(code.has_value()) << "did not exit; log:\n" << log;
  EXPECT_EQ(*code, 1) << log;
  const std::string error = LogLinesWith(log, "\"event\":\"startup_failed\"");
  EXPECT_TRUE(absl::StrContains(error, "listen " + address)) << log;
  EXPECT_TRUE(absl::StrContains(error, "permission denied")) << log;
  EXPECT_FALSE(socket_left);
}

// An unknown flag and a flag with a bad value are bad flags: exit 2, as
// --help says, with a log line naming the flag (Abseil's own parser would
// exit 1).
TEST(FlagsE2eTest, UnknownFlagAndBadFlagValueExitTwoNamingTheFlag) {
  for (const auto& [flag, named] :
       std::vector<std::pair<std::string, std::string>>{
           {"--no-such-flag", "--no-such-flag"},
           {"--redis-db=abc", "--redis-db"}}) {
    SCOPED_TRACE(flag);
    BreakerdProcess proc;
    StartupFailure f = ExpectStartupFailure(proc, {flag});
    ASSERT_TRUE(f.exit_code.has_value()) << "still running; log:\n" << f.log;
    EXPECT_EQ(*f.exit_code, 2) << f.log;
    const std::string error =
        LogLinesWith(f.log, "\"event\":\"startup_failed\"");
    EXPECT_TRUE(absl::StrContains(error, named))
        << "the log line should name " << named << ":\n"
        << f.log;
  }
}

// --- the config file goes bad while running ----------------------------------

constexpr char kGoodConfig[] = R"(defaults:
  failure_rate: { threshold: 0 }
  cooldown: { base: 60s, jitter: 0 }
policies:
  - match: "svc/*"
    consecutive_failures: 2
)";

class ConfigFaultTest : public FaultE2eTest {
 protected:
  void SetUp() override {
    config_ = proc_.WriteFile("config.yaml", kGoodConfig);
    ASSERT_TRUE(
        proc_.Start({"--config=" + config_, "--config-poll-interval=50ms"}));
    stub_ = proc_.BreakerStub();
  }

  // The policy a breaker created now gets.
  std::string PolicyOfNewBreaker(const std::string& dependency) {
    Result<v1::AcquireResponse> a = Acquire(stub_.get(), dependency);
    EXPECT_TRUE(a.status.ok()) << Describe(a.status);
    Result<v1::BreakerStatus> s = GetState(stub_.get(), dependency);
    EXPECT_TRUE(s.status.ok()) << Describe(s.status);
    return s.response.policy();
  }

  double Reloads(absl::string_view result) {
    return MetricValue(proc_, absl::StrCat("breakerd_config_reloads_total{"
                                           "result=\"",
                                           result, "\"}"))
        .value_or(-1);
  }

  // Waits for the poll to notice the change: one more config_rejected line
  // (or a config_reloaded one, which is then a failure).
  void ExpectRefused(const std::string& what, absl::string_view error_part) {
    SCOPED_TRACE(what);
    const std::string rejected = "\"event\":\"config_rejected\"";
    ASSERT_TRUE(WaitUntil([&] {
      return proc_.CountInLog(rejected) > rejected_ ||
             proc_.CountInLog("\"event\":\"config_reloaded\"") > 0;
    })) << "the poll did not notice";
    if (proc_.CountInLog("\"event\":\"config_reloaded\"") > 0) {
      ADD_FAILURE() << "the bad file was taken: a new svc/* breaker now gets "
                       "policy \""
                    << PolicyOfNewBreaker("svc/taken")
                    << "\" instead of \"svc/*\"\n"
                    << LogLinesWith(proc_.Log(), "config_reloaded");
      return;
    }
    ++rejected_;
    EXPECT_EQ(proc_.CountInLog(rejected), rejected_);
    const std::vector<std::string> lines = absl::StrSplit(
        LogLinesWith(proc_.Log(), rejected), '\n', absl::SkipEmpty());
    ASSERT_FALSE(lines.empty());
    EXPECT_TRUE(absl::StrContains(lines.back(), error_part)) << lines.back();
    EXPECT_EQ(Reloads("failure"), rejected_);
    EXPECT_EQ(Reloads("success"), 0);
    // The original policy still applies, to old and new breakers alike.
    EXPECT_EQ(PolicyOfNewBreaker(absl::StrCat("svc/after-", rejected_)),
              "svc/*");
    EXPECT_EQ(GetState(stub_.get(), "svc/before").response.policy(), "svc/*");
  }

  std::string config_;
  std::unique_ptr<v1::Breaker::Stub> stub_;
  int rejected_ = 0;
};

// Garbage, a truncation mid-file, then deletion: each refused whole and
// counted, the original policies stay in force and breakerd keeps serving;
// a good file afterwards is picked up by the same poll.
TEST_F(ConfigFaultTest, GarbageTruncationAndDeletionKeepTheOldConfig) {
  ASSERT_EQ(PolicyOfNewBreaker("svc/before"), "svc/*");

  constexpr char kGarbage[] = "\x00\x01\xfe\xff: [[{{\n\t- ]]\n";
  proc_.WriteFile("config.yaml", std::string(kGarbage, sizeof(kGarbage) - 1));
  ExpectRefused("garbage", config_ + ":");

  // Cut inside "{ threshold: 0 }": an unclosed flow map. truncate(2) shrinks
  // the file in one step, so the poll never sees it empty.
  proc_.WriteFile("config.yaml", kGoodConfig);
  const std::string good(kGoodConfig);
  const size_t cut = good.find("threshold") + 5;
  ASSERT_EQ(truncate(config_.c_str(), static_cast<off_t>(cut)), 0)
      << std::strerror(errno);
  ExpectRefused("truncated", "invalid YAML");

  ASSERT_EQ(unlink(config_.c_str()), 0) << std::strerror(errno);
  ExpectRefused("deleted", "cannot open config file");

  // Still the 2-failure policy, by behaviour too (the defaults need 5).
  const std::string dep = "svc/trips-at-two";
  for (int i = 0; i < 2; ++i) {
    Result<v1::AcquireResponse> a = Acquire(stub_.get(), dep);
    ASSERT_TRUE(a.status.ok()) << Describe(a.status);
    ASSERT_TRUE(a.response.allowed());
    ASSERT_TRUE(
        Report(stub_.get(), dep, a.response.permit(), v1::OUTCOME_TIMEOUT)
            .status.ok());
  }
  EXPECT_EQ(GetState(stub_.get(), dep).response.state(), v1::STATE_OPEN);

  // A good file again: taken at the next poll.
  proc_.WriteFile("config.yaml", R"(policies:
  - match: "api/*"
    consecutive_failures: 3
)");
  ASSERT_TRUE(
      proc_.WaitForLog("\"event\":\"config_reloaded\"", absl::Seconds(5)));
  EXPECT_EQ(PolicyOfNewBreaker("api/new"), "api/*");
  EXPECT_EQ(Reloads("success"), 1);
  // A missing file is reported once, not at every poll.
  EXPECT_EQ(proc_.CountInLog("cannot open config file"), 1);
}

// A config file truncated to zero bytes (what `> file` or an editor's
// O_TRUNC leaves for a moment) is a torn write, not a request to drop every
// policy: the old config should stay, and the refusal be counted.
TEST_F(ConfigFaultTest, TruncationToZeroBytesKeepsTheOldConfig) {
  ASSERT_EQ(PolicyOfNewBreaker("svc/before"), "svc/*");
  ASSERT_EQ(truncate(config_.c_str(), 0), 0) << std::strerror(errno);
  ExpectRefused("truncated to 0 bytes", "empty");
}

// --- an invalid config at start ----------------------------------------------

// kGoodConfig with a typo in a key: one error.
constexpr char kTypoConfig[] = R"(defaults:
  failure_rate: { threshold: 0 }
  cooldown: { base: 60s, jitter: 0 }
policies:
  - match: "svc/*"
    consecutive_failure: 2
)";

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)),
                     std::istreambuf_iterator<char>());
}

std::string LastGoodConfigPath(const std::string& state_file) {
  return state_file + ".last-good-config";
}

std::optional<double> ConfigValid(const BreakerdProcess& proc) {
  return MetricValue(proc, "breakerd_config_valid");
}

// Acquires `dependency` (creating its breaker) and returns the policy it
// got.
std::string PolicyOf(v1::Breaker::Stub* stub, const std::string& dependency) {
  Result<v1::AcquireResponse> a = Acquire(stub, dependency);
  EXPECT_TRUE(a.status.ok()) << Describe(a.status);
  Result<v1::BreakerStatus> s = GetState(stub, dependency);
  EXPECT_TRUE(s.status.ok()) << Describe(s.status);
  return s.response.policy();
}

// Reports `n` timeouts on `dependency`; each Acquire must be allowed.
void ReportTimeouts(v1::Breaker::Stub* stub, const std::string& dependency,
                    int n) {
  for (int i = 0; i < n; ++i) {
    Result<v1::AcquireResponse> a = Acquire(stub, dependency);
    ASSERT_TRUE(a.status.ok()) << Describe(a.status);
    ASSERT_TRUE(a.response.allowed()) << a.response.DebugString();
    ASSERT_TRUE(
        Report(stub, dependency, a.response.permit(), v1::OUTCOME_TIMEOUT)
            .status.ok());
  }
}

// A ConfigMap typo reaches a pod that starts after an earlier one ran on the
// good file: the pod serves on the last good config kept beside the state
// file, and says so (log line, breakerd_config_valid 0).
TEST(ConfigSafetyE2eTest, InvalidConfigAtStartServesOnTheLastGoodConfig) {
  BreakerdProcess scratch;  // only for its temporary directory
  const std::string state = scratch.dir() + "/state";
  const std::string last_good = LastGoodConfigPath(state);
  const std::string config = scratch.WriteFile("config.yaml", kGoodConfig);
  {
    BreakerdProcess earlier;
    ASSERT_TRUE(earlier.Start({"--config=" + config, "--state-file=" + state}));
    EXPECT_EQ(ConfigValid(earlier), 1);
    ASSERT_TRUE(earlier.Signal(SIGTERM));
    ASSERT_EQ(earlier.WaitExit(absl::Seconds(15)), 0) << earlier.Log();
  }
  ASSERT_EQ(ReadFile(last_good), kGoodConfig)
      << "the earlier run did not keep its config beside the state file";

  scratch.WriteFile("config.yaml", kTypoConfig);
  BreakerdProcess proc;
  ASSERT_TRUE(proc.Start({"--config=" + config, "--state-file=" + state}));
  EXPECT_EQ(ConfigValid(proc), 0);
  const std::string log = proc.Log();
  EXPECT_TRUE(
      absl::StrContains(LogLinesWith(log, "\"event\":\"config_rejected\""),
                        "consecutive_failure"))
      << "the refusal should name the bad key:\n"
      << log;
  const std::string fallback =
      LogLinesWith(log, "\"event\":\"config_fallback\"");
  EXPECT_TRUE(absl::StrContains(fallback, last_good))
      << "the fallback should name the last good config " << last_good << ":\n"
      << log;

  // The last good policy is in force: svc/* trips at 2 (the defaults need 5).
  auto stub = proc.BreakerStub();
  const std::string dep = "svc/checkout";
  ReportTimeouts(stub.get(), dep, 2);
  Result<v1::BreakerStatus> s = GetState(stub.get(), dep);
  ASSERT_TRUE(s.status.ok()) << Describe(s.status);
  EXPECT_EQ(s.response.state(), v1::STATE_OPEN);
  EXPECT_EQ(s.response.policy(), "svc/*");
  // The invalid file is not kept as the last good one.
  EXPECT_EQ(ReadFile(last_good), kGoodConfig);
}

// The same typo with no last good config: the embedded defaults, loudly.
TEST(ConfigSafetyE2eTest, InvalidConfigWithNoLastGoodServesOnTheDefaults) {
  BreakerdProcess proc;
  const std::string state = proc.dir() + "/state";
  const std::string config = proc.WriteFile("config.yaml", kTypoConfig);
  ASSERT_TRUE(proc.Start({"--config=" + config, "--state-file=" + state}));
  EXPECT_EQ(ConfigValid(proc), 0);
  EXPECT_TRUE(absl::StrContains(
      LogLinesWith(proc.Log(), "\"event\":\"config_fallback\""),
      "embedded defaults"))
      << proc.Log();

  auto stub = proc.BreakerStub();
  const std::string dep = "svc/checkout";
  EXPECT_EQ(PolicyOf(stub.get(), dep), "defaults");
  ReportTimeouts(stub.get(), dep, 2);
  EXPECT_EQ(GetState(stub.get(), dep).response.state(), v1::STATE_CLOSED)
      << "the defaults open at 5 consecutive failures, not 2";
  EXPECT_FALSE(std::filesystem::exists(LastGoodConfigPath(state)))
      << "an invalid file must not become the last good config";
}

// --strict-config: an invalid file stops the start instead.
TEST(ConfigSafetyE2eTest, StrictConfigExitsTwoOnAnInvalidConfig) {
  BreakerdProcess proc;
  const std::string config = proc.WriteFile("config.yaml", kTypoConfig);
  StartupFailure f =
      ExpectStartupFailure(proc, {"--config=" + config, "--strict-config"});
  ASSERT_TRUE(f.exit_code.has_value()) << "still running; log:\n" << f.log;
  EXPECT_EQ(*f.exit_code, 2) << f.log;
  EXPECT_TRUE(
      absl::StrContains(LogLinesWith(f.log, "\"event\":\"config_rejected\""),
                        "consecutive_failure"))
      << f.log;
  EXPECT_FALSE(absl::StrContains(f.log, "\"event\":\"serving\"")) << f.log;
}

// Started on an invalid file, breakerd takes the fixed file at the next poll
// (valid again, kept as the last good config); a bad file later is refused,
// counted, and makes it invalid again while the good config stays in force.
TEST(ConfigSafetyE2eTest, FixedConfigIsValidAgainAndABadReloadIsInvalid) {
  BreakerdProcess proc;
  const std::string state = proc.dir() + "/state";
  const std::string last_good = LastGoodConfigPath(state);
  const std::string config = proc.WriteFile("config.yaml", kTypoConfig);
  ASSERT_TRUE(proc.Start({"--config=" + config, "--state-file=" + state,
                          "--config-poll-interval=100ms"}));
  auto stub = proc.BreakerStub();
  EXPECT_EQ(ConfigValid(proc), 0);
  EXPECT_EQ(PolicyOf(stub.get(), "svc/before"), "defaults");

  proc.WriteFile("config.yaml", kGoodConfig);
  ASSERT_TRUE(WaitUntil([&] { return ConfigValid(proc) == 1; }))
      << "the fixed file was not taken:\n"
      << proc.Log();
  EXPECT_TRUE(WaitUntil([&] { return ReadFile(last_good) == kGoodConfig; }))
      << "the fixed file was not kept as the last good config";
  EXPECT_EQ(PolicyOf(stub.get(), "svc/after-fix"), "svc/*");
  EXPECT_EQ(GetState(stub.get(), "svc/before").response.policy(), "svc/*")
      << "a reload re-applies policies to existing breakers";

  const double failures_before =
      MetricValue(proc, "breakerd_config_reloads_total{result=\"failure\"}")
          .value_or(-1);
  ASSERT_GE(failures_before, 0);
  proc.WriteFile("config.yaml", R"(defaults:
  cooldown: { base: 0s }
)");
  ASSERT_TRUE(WaitUntil([&] { return ConfigValid(proc) == 0; }))
      << "the bad file did not make the config invalid:\n"
      << proc.Log();
  EXPECT_GT(
      MetricValue(proc, "breakerd_config_reloads_total{result=\"failure\"}")
          .value_or(-1),
      failures_before);
  EXPECT_EQ(PolicyOf(stub.get(), "svc/after-bad"), "svc/*")
      << "the good config stays in force";
  EXPECT_EQ(ReadFile(last_good), kGoodConfig);
}

// Runs `breakerd args...` to completion (bounded); returns its exit code
// (nullopt if it did not finish) and everything it printed.
std::optional<int> RunBreakerd(const std::vector<std::string>& args,
                               const std::string& log_path,
                               std::string* output) {
  std::vector<std::string> argv = {BREAKERD_BINARY};
  argv.insert(argv.end(), args.begin(), args.end());
  pid_t pid = -1;
  if (SpawnLogged(argv, log_path, &pid) != 0) return std::nullopt;
  std::optional<int> code = WaitChild(pid, absl::Seconds(10));
  *output = ReadFile(log_path);
  return code;
}

// `breakerd --check-config FILE`, for CI before a ConfigMap ships: every
// error on a line of its own (FILE:LINE: key: rule), exit 2; a valid file
// exits 0. Nothing is started.
TEST(ConfigSafetyE2eTest, CheckConfigListsEveryErrorAndExitsTwo) {
  BreakerdProcess scratch;  // only for its temporary directory
  const std::string bad = scratch.WriteFile("bad.yaml", R"(defaults:
  mode: sideways
  cooldown: { base: 60s, jitter: 0 }
policies:
  - match: "svc/*"
    consecutive_failure: 2
limits: { max_breakers: 0 }
)");
  std::string output;
  std::optional<int> code = RunBreakerd(
      {"--check-config", bad}, scratch.dir() + "/check-bad.log", &output);
  ASSERT_TRUE(code.has_value()) << "did not exit:\n" << output;
  EXPECT_EQ(*code, 2) << output;
  std::vector<std::string> errors;
  for (absl::string_view line : absl::StrSplit(output, '\n')) {
    if (absl::StartsWith(line, bad + ":") &&
        !absl::StartsWith(line, bad + ": ")) {
      errors.emplace_back(line);
    }
  }
  const std::vector<std::string> want_prefixes = {
      bad + ":2: defaults.mode: ",
      bad + ":6: policies[0].consecutive_failure: ",
      bad + ":7: limits.max_breakers: ",
  };
  ASSERT_EQ(errors.size(), want_prefixes.size()) << output;
  for (size_t i = 0; i < errors.size(); ++i) {
    EXPECT_TRUE(absl::StartsWith(errors[i], want_prefixes[i]))
        << "error " << i << ": " << errors[i];
    EXPECT_GT(errors[i].size(), want_prefixes[i].size())
        << "error " << i << " names no rule: " << errors[i];
  }
  EXPECT_FALSE(absl::StrContains(output, "\"event\":\"serving\"")) << output;

  const std::string good = scratch.WriteFile("good.yaml", kGoodConfig);
  code = RunBreakerd({"--check-config", good},
                     scratch.dir() + "/check-good.log", &output);
  ASSERT_TRUE(code.has_value()) << "did not exit:\n" << output;
  EXPECT_EQ(*code, 0) << output;
  EXPECT_TRUE(absl::StrContains(output, good)) << output;
  EXPECT_FALSE(absl::StrContains(output, "\"event\":\"serving\"")) << output;
}

// --- a Watch client that never reads -----------------------------------------

// A channel whose transport takes little before its application reads: a
// 1 KiB stream window and no BDP probing (which would grow it). A default
// client's transport accepts megabytes for a stream nobody reads (in a trial
// run, 10000 transitions of a 200-byte name did not fill it), and meanwhile
// breakerd's writes complete and its queue stays empty; this client pushes
// back at once, so what fills is breakerd's queue for it.
std::shared_ptr<grpc::Channel> TightChannel(const BreakerdProcess& proc,
                                            int distinct_id) {
  grpc::ChannelArguments args;
  args.SetInt("breakerd.e2e.channel_id", distinct_id);
  args.SetInt(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, 1024);
  args.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  return grpc::CreateCustomChannel(proc.tcp_address(),
                                   grpc::InsecureChannelCredentials(), args);
}

// Four Watch clients open a stream each and never read; a fifth reads
// everything. Transitions pile up behind the four until each passes
// --watch-queue (16): breakerd ends those streams (RESOURCE_EXHAUSTED,
// naming the limit, seen once the client finally reads), the watch-stream
// gauge drops, breakerd's memory stays put however many transitions
// follow, and the reading client misses nothing.
TEST_F(FaultE2eTest, WatchClientsThatNeverReadAreCutOffAndMemoryStaysBounded) {
  constexpr int kSlowStreams = 4;
  constexpr int kMaxFlips = 2000;
  constexpr int kExtraFlips = 500;
  ASSERT_TRUE(proc_.Start(
      {"--admin-token-file=" + WriteAdminToken(), "--watch-queue=16"}));
  const std::string dep = "flip/" + std::string(195, 'x');  // 200 bytes
  const std::string bearer = BearerToken(kAdminToken);
  auto admin = v1::Admin::NewStub(proc_.Channel(100));

  // Each client on its own connection, as separate applications would be.
  std::vector<std::unique_ptr<v1::Breaker::Stub>> slow_stubs;
  std::vector<std::unique_ptr<WatchCall>> slow;
  for (int i = 0; i < kSlowStreams; ++i) {
    slow_stubs.push_back(v1::Breaker::NewStub(TightChannel(proc_, i)));
    slow.push_back(
        StartWatch(slow_stubs.back().get(), {dep}, absl::Seconds(120)));
  }
  auto reader_stub = v1::Breaker::NewStub(proc_.Channel(kSlowStreams));
  std::unique_ptr<WatchCall> reader =
      StartWatch(reader_stub.get(), {dep}, absl::Seconds(120));
  // Written by `reading` only; read after it is joined.
  std::vector<v1::StateChange> seen;
  std::atomic<size_t> seen_count{0};
  std::thread reading([&] {
    v1::StateChange change;
    while (reader->reader->Read(&change)) {
      seen.push_back(change);
      seen_count.store(seen.size());
    }
  });
  struct StopReading {
    std::thread& thread;
    WatchCall& call;
    ~StopReading() {
      if (!thread.joinable()) return;
      call.ctx.TryCancel();
      thread.join();
    }
  } stop_reading{reading, *reader};

  ASSERT_TRUE(WaitUntil([&] {
    return MetricValue(proc_, "breakerd_watch_streams") == kSlowStreams + 1;
  })) << "the streams did not all subscribe";
  const int64_t rss_before = ResidentKiB(proc_.pid());
  ASSERT_GT(rss_before, 0);

  // Flips in pairs; after each pair, waits for the reading client to catch
  // up. Then at most 4 transitions wait in breakerd's queue for it, well
  // under 16, however slowly a loaded machine completes breakerd's writes
  // (a burst of 20 did cut a reading client in a trial at load 13). Only
  // the non-reading clients fall behind.
  int flips = 0;
  auto flip_batch = [&] {
    for (int i = 0; i < 2; ++i, ++flips) {
      EXPECT_TRUE(
          Admin(admin.get(), AdminOp::kForceOpen, dep, bearer).status.ok());
      EXPECT_TRUE(
          Admin(admin.get(), AdminOp::kForceClose, dep, bearer).status.ok());
    }
    const size_t want = 1 + 2 * static_cast<size_t>(flips);
    return WaitUntil([&] { return seen_count.load() >= want; },
                     absl::Seconds(10));
  };
  while (flips < kMaxFlips &&
         MetricValue(proc_, "breakerd_watch_streams") != 1) {
    ASSERT_TRUE(flip_batch()) << "the reading client fell behind";
  }
  ASSERT_EQ(MetricValue(proc_, "breakerd_watch_streams"), 1)
      << "the non-reading streams were still open after " << flips << " flips";
  const int flips_to_cut = flips;
  const int64_t rss_cut = ResidentKiB(proc_.pid());
  while (flips < flips_to_cut + kExtraFlips) {
    ASSERT_TRUE(flip_batch()) << "the reading client fell behind";
  }
  const int64_t rss_after = ResidentKiB(proc_.pid());
  std::cout << "[ figures  ] streams cut after " << flips_to_cut
            << " flips; breakerd VmRSS " << rss_before << " KiB before, "
            << rss_cut << " KiB when cut, " << rss_after << " KiB after "
            << kExtraFlips << " more flips\n";
  // Queued for nobody, the 1000 transitions after the cut would hold about
  // 0.4 MiB per stream (a trial with --watch-queue=1000000 grew breakerd by
  // ~400 bytes per queued message); bounded, they hold nothing.
  if (!kSanitizerBuild) {
    EXPECT_LT(rss_after - rss_cut, 768)
        << "breakerd's memory grew with transitions nobody reads";
  }

  for (int i = 0; i < kSlowStreams; ++i) {
    int messages = 0;
    grpc::Status s = DrainWatch(*slow[i], &messages);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
        << "stream " << i << ": " << Describe(s);
    EXPECT_EQ(s.error_message(),
              "watch: client reads too slowly (queue limit 16)");
    EXPECT_LT(messages, 2 * flips_to_cut)
        << "stream " << i << " was not cut off";
  }

  // The reading client got the initial state and every transition, in
  // order, and is still subscribed.
  const size_t want = 1 + 2 * static_cast<size_t>(flips);
  EXPECT_EQ(MetricValue(proc_, "breakerd_watch_streams"), 1)
      << "the reading client was cut off too";
  reader->ctx.TryCancel();
  reading.join();
  EXPECT_EQ(reader->reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
  ASSERT_EQ(seen.size(), want);
  for (size_t i = 1; i < seen.size(); ++i) {
    ASSERT_EQ(seen[i].generation(), seen[i - 1].generation() + 1) << i;
  }
}

// --- Watch order under racing transitions ------------------------------------

// A Watch stream read on a thread of its own, on its own connection: every
// event is kept in the order it arrived.
class WatchRecorder {
 public:
  WatchRecorder(std::shared_ptr<grpc::Channel> channel,
                const std::vector<std::string>& names)
      : stub_(v1::Breaker::NewStub(std::move(channel))),
        call_(StartWatch(stub_.get(), names, absl::Seconds(120))),
        thread_([this] { Read(); }) {}

  ~WatchRecorder() {
    call_->ctx.TryCancel();
    thread_.join();
  }

  WatchRecorder(const WatchRecorder&) = delete;
  WatchRecorder& operator=(const WatchRecorder&) = delete;

  std::vector<v1::StateChange> events() const {
    absl::MutexLock lock(&mu_);
    return events_;
  }

  // Waits until at least `n` events have arrived.
  bool WaitForEvents(size_t n,
                     absl::Duration timeout = absl::Seconds(5)) const {
    return WaitUntil(
        [&] {
          absl::MutexLock lock(&mu_);
          return events_.size() >= n;
        },
        timeout);
  }

  // How the stream ended; nullopt while it is open.
  std::optional<grpc::Status> end() const {
    absl::MutexLock lock(&mu_);
    return end_;
  }

 private:
  void Read() {
    v1::StateChange change;
    while (call_->reader->Read(&change)) {
      absl::MutexLock lock(&mu_);
      events_.push_back(change);
    }
    grpc::Status status = call_->reader->Finish();
    absl::MutexLock lock(&mu_);
    end_ = std::move(status);
  }

  std::unique_ptr<v1::Breaker::Stub> stub_;
  std::unique_ptr<WatchCall> call_;
  mutable absl::Mutex mu_;
  std::vector<v1::StateChange> events_ ABSL_GUARDED_BY(mu_);
  std::optional<grpc::Status> end_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;  // last: starts once the members above exist
};

// What one stream showed: each dependency's last event, and every place a
// dependency's generation went back.
struct StreamOrder {
  std::map<std::string, v1::StateChange> last;
  std::vector<std::string> backwards;
};

StreamOrder OrderOf(const std::vector<v1::StateChange>& events) {
  StreamOrder order;
  for (size_t i = 0; i < events.size(); ++i) {
    const v1::StateChange& e = events[i];
    auto it = order.last.find(e.dependency());
    if (it != order.last.end() && e.generation() < it->second.generation()) {
      order.backwards.push_back(absl::StrCat(
          "event ", i, ": ", e.dependency(), " generation ",
          it->second.generation(), " (", v1::State_Name(it->second.state()),
          ") then ", e.generation(), " (", v1::State_Name(e.state()), ")"));
    }
    order.last[e.dependency()] = e;
  }
  return order;
}

// True if a watcher holding `event` agrees with the server's `status`: the
// same generation and state. HALF_OPEN is derived from the clock, so an OPEN
// event whose cooldown has since run out agrees with HALF_OPEN at the same
// generation (the client derives it from retry_after).
bool Agrees(const v1::StateChange& event, const v1::BreakerStatus& status) {
  if (event.generation() != status.generation()) return false;
  if (event.state() == status.state()) return true;
  return event.state() == v1::STATE_OPEN &&
         status.state() == v1::STATE_HALF_OPEN;
}

// Reporters trip breakers (2 failures, 20 ms cooldowns, failed probes) while
// operators force them open, closed and reset them, all on the same three
// dependencies and on connections of their own, with three Watch streams
// open throughout (all dependencies, and two with names). On every stream a
// dependency's generation never goes back, and once the racing stops each
// stream's last event for each dependency agrees with GetState: a watcher
// never keeps refusing a breaker the server has closed.
TEST_F(FaultE2eTest, WatchStreamsKeepEachBreakersOrderWhileReportsRaceAdmin) {
  constexpr int kTransitions = 900;
  constexpr absl::Duration kMaxRacing = absl::Seconds(8);
  constexpr int kReporters = 4;
  constexpr int kOperators = 2;
  const std::string config = proc_.WriteFile("config.yaml", R"(defaults:
  consecutive_failures: 2
  failure_rate: { threshold: 0 }
  cooldown: { base: 20ms, max: 20ms, jitter: 0 }
  probe: { lease: 1s }
)");
  ASSERT_TRUE(proc_.Start({"--config=" + config,
                           "--admin-token-file=" + WriteAdminToken(),
                           "--watch-queue=100000"}));
  const std::vector<std::string> deps = {"race/a", "race/b", "race/c"};
  auto stub = proc_.BreakerStub();
  for (const std::string& dep : deps) {
    ASSERT_TRUE(Acquire(stub.get(), dep).response.allowed());
  }

  std::vector<std::unique_ptr<WatchRecorder>> streams;
  const std::vector<std::vector<std::string>> stream_names = {
      {}, {"race/a", "race/b", "race/c"}, {"race/b"}};
  for (size_t i = 0; i < stream_names.size(); ++i) {
    streams.push_back(std::make_unique<WatchRecorder>(
        proc_.Channel(static_cast<int>(i)), stream_names[i]));
  }
  for (size_t i = 0; i < streams.size(); ++i) {
    const size_t initial =
        stream_names[i].empty() ? deps.size() : stream_names[i].size();
    ASSERT_TRUE(streams[i]->WaitForEvents(initial))
        << "stream " << i << " did not send its initial states";
  }

  std::atomic<bool> stop{false};
  std::atomic<int> rpc_errors{0};
  std::vector<std::thread> racers;
  struct StopRacers {
    std::atomic<bool>& stop;
    std::vector<std::thread>& threads;
    ~StopRacers() {
      stop.store(true);
      for (std::thread& t : threads) {
        if (t.joinable()) t.join();
      }
    }
  } stop_racers{stop, racers};
  for (int r = 0; r < kReporters; ++r) {
    racers.emplace_back([&, r] {
      auto racer = v1::Breaker::NewStub(proc_.Channel(10 + r));
      for (size_t n = r; !stop.load(); ++n) {
        const std::string& dep = deps[n % deps.size()];
        Result<v1::AcquireResponse> a = Acquire(racer.get(), dep);
        if (!a.status.ok()) {
          rpc_errors.fetch_add(1);
          continue;
        }
        if (!a.response.allowed()) continue;
        if (!Report(racer.get(), dep, a.response.permit(), v1::OUTCOME_TIMEOUT)
                 .status.ok()) {
          rpc_errors.fetch_add(1);
        }
      }
    });
  }
  const std::string bearer = BearerToken(kAdminToken);
  for (int o = 0; o < kOperators; ++o) {
    racers.emplace_back([&, o] {
      auto admin = v1::Admin::NewStub(proc_.Channel(20 + o));
      std::mt19937 random(1234 + o);
      while (!stop.load()) {
        const std::string& dep = deps[random() % deps.size()];
        // Mostly resets, so the reporters keep tripping what was reset.
        const uint32_t pick = random() % 4;
        const AdminOp op = pick == 0   ? AdminOp::kForceOpen
                           : pick == 1 ? AdminOp::kForceClose
                                       : AdminOp::kReset;
        if (!Admin(admin.get(), op, dep, bearer).status.ok()) {
          rpc_errors.fetch_add(1);
        }
      }
    });
  }
  const absl::Time started = absl::Now();
  const size_t enough = deps.size() + kTransitions;
  WaitUntil([&] { return streams[0]->events().size() >= enough; }, kMaxRacing);
  stop.store(true);
  for (std::thread& t : racers) t.join();
  const absl::Duration raced = absl::Now() - started;
  EXPECT_EQ(rpc_errors.load(), 0);

  // Whether stream i asked for `dep` (no names: all).
  auto watches = [&](size_t i, const std::string& dep) {
    const std::vector<std::string>& names = stream_names[i];
    return names.empty() ||
           std::find(names.begin(), names.end(), dep) != names.end();
  };
  // Quiet now: wait (bounded) until every stream has caught up with the
  // server's generation of every dependency.
  std::map<std::string, v1::BreakerStatus> server;
  auto caught_up = [&] {
    for (const std::string& dep : deps) {
      Result<v1::BreakerStatus> s = GetState(stub.get(), dep);
      if (!s.status.ok()) return false;
      server[dep] = s.response;
    }
    for (size_t i = 0; i < streams.size(); ++i) {
      StreamOrder order = OrderOf(streams[i]->events());
      for (const std::string& dep : deps) {
        if (!watches(i, dep)) continue;
        auto it = order.last.find(dep);
        if (it == order.last.end() ||
            it->second.generation() < server[dep].generation()) {
          return false;
        }
      }
    }
    return true;
  };
  WaitUntil(caught_up, absl::Seconds(5));

  const std::vector<v1::StateChange> all = streams[0]->events();
  const size_t transitions = all.size() - deps.size();
  std::map<std::string, int> by_reason;
  for (size_t i = deps.size(); i < all.size(); ++i)
    ++by_reason[all[i].reason()];
  std::cout << "[ figures  ] " << transitions << " transitions in " << raced
            << ": " << absl::StrJoin(by_reason, ", ", absl::PairFormatter(" "))
            << "\n";
  EXPECT_GE(transitions, 300u) << "too few transitions to show anything";
  for (size_t i = 0; i < streams.size(); ++i) {
    SCOPED_TRACE(absl::StrCat(
        "stream ", i, " (",
        stream_names[i].empty() ? "all" : absl::StrJoin(stream_names[i], ","),
        ")"));
    EXPECT_FALSE(streams[i]->end().has_value())
        << "the stream ended: " << Describe(*streams[i]->end());
    StreamOrder order = OrderOf(streams[i]->events());
    EXPECT_EQ(order.backwards.size(), 0u)
        << "generations went back:\n"
        << absl::StrJoin(order.backwards, "\n");
    for (const std::string& dep : deps) {
      if (!watches(i, dep)) {
        EXPECT_EQ(order.last.count(dep), 0u) << dep << " was not asked for";
        continue;
      }
      auto it = order.last.find(dep);
      ASSERT_NE(it, order.last.end()) << dep;
      EXPECT_TRUE(Agrees(it->second, server[dep]))
          << dep << ": the stream's last event is "
          << v1::State_Name(it->second.state()) << " at generation "
          << it->second.generation() << ", the server says "
          << v1::State_Name(server[dep].state()) << " at generation "
          << server[dep].generation();
    }
  }
}

// --- the mode on Watch -------------------------------------------------------

// Every Watch event says whether the breaker enforces, so a client never
// refuses a shadow breaker locally: the initial state and the transitions of
// a shadow breaker say "shadow", an enforcing one's "enforce"; a reload that
// moves a breaker to shadow sends an event (reason "reload") with the new
// mode at the same generation, and a new stream's initial states carry it.
TEST_F(FaultE2eTest, WatchEventsCarryTheModeAndAReloadToShadowIsAnEvent) {
  constexpr char kConfig[] = R"(defaults:
  consecutive_failures: 2
  failure_rate: { threshold: 0 }
  cooldown: { base: 60s, jitter: 0 }
policies:
  - match: "shadow/*"
    mode: shadow
)";
  const std::string config = proc_.WriteFile("config.yaml", kConfig);
  ASSERT_TRUE(proc_.Start({"--config=" + config, "--config-poll-interval=0"}));
  auto stub = proc_.BreakerStub();
  const std::string shadow = "shadow/psp";
  const std::string enforced = "enforce/psp";

  WatchRecorder watch(proc_.Channel(1), {shadow, enforced});
  ASSERT_TRUE(watch.WaitForEvents(2));
  std::vector<v1::StateChange> events = watch.events();
  ASSERT_EQ(events.size(), 2u);
  for (const v1::StateChange& e : events) {
    EXPECT_EQ(e.reason(), "initial") << e.DebugString();
    EXPECT_EQ(e.mode(), e.dependency() == shadow ? "shadow" : "enforce")
        << e.DebugString();
  }

  ReportTimeouts(stub.get(), shadow, 2);
  ReportTimeouts(stub.get(), enforced, 2);
  ASSERT_TRUE(watch.WaitForEvents(4));
  events = watch.events();
  ASSERT_EQ(events.size(), 4u);
  EXPECT_EQ(events[2].dependency(), shadow);
  EXPECT_EQ(events[2].state(), v1::STATE_OPEN);
  EXPECT_EQ(events[2].mode(), "shadow") << events[2].DebugString();
  EXPECT_EQ(events[3].dependency(), enforced);
  EXPECT_EQ(events[3].state(), v1::STATE_OPEN);
  EXPECT_EQ(events[3].mode(), "enforce") << events[3].DebugString();
  const v1::StateChange opened = events[3];
  Result<v1::AcquireResponse> a = Acquire(stub.get(), shadow);
  ASSERT_TRUE(a.status.ok()) << Describe(a.status);
  EXPECT_TRUE(a.response.allowed()) << "shadow mode never refuses";

  proc_.WriteFile("config.yaml", absl::StrCat(kConfig, R"(  - match: "enforce/*"
    mode: shadow
)"));
  ASSERT_TRUE(proc_.Signal(SIGHUP));
  ASSERT_TRUE(watch.WaitForEvents(5)) << "no event for the mode change:\n"
                                      << LogLinesWith(proc_.Log(), "config_");
  events = watch.events();
  const v1::StateChange& reload = events[4];
  EXPECT_EQ(reload.dependency(), enforced) << reload.DebugString();
  EXPECT_EQ(reload.reason(), "reload");
  EXPECT_EQ(reload.mode(), "shadow");
  EXPECT_EQ(reload.state(), v1::STATE_OPEN) << "a reload moves no state";
  EXPECT_EQ(reload.generation(), opened.generation())
      << "a reload is not a transition";
  Result<v1::BreakerStatus> s = GetState(stub.get(), enforced);
  ASSERT_TRUE(s.status.ok()) << Describe(s.status);
  EXPECT_EQ(s.response.mode(), "shadow");
  EXPECT_EQ(s.response.generation(), opened.generation());
  a = Acquire(stub.get(), enforced);
  ASSERT_TRUE(a.status.ok()) << Describe(a.status);
  EXPECT_TRUE(a.response.allowed())
      << "now in shadow: " << a.response.DebugString();

  // A stream that starts now gets the new mode in its initial states.
  WatchRecorder later(proc_.Channel(2), {});
  ASSERT_TRUE(later.WaitForEvents(2));
  for (const v1::StateChange& e : later.events()) {
    EXPECT_EQ(e.reason(), "initial") << e.DebugString();
    EXPECT_EQ(e.mode(), "shadow") << e.DebugString();
  }
}

}  // namespace
}  // namespace fault
}  // namespace breakerd

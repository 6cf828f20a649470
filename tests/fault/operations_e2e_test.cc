// Operator mishaps against the real breakerd binary: the process crashes
// right after an operator override; a flag is unknown or badly valued; the
// config file is replaced by garbage, truncated or deleted while running, or
// is invalid at start (DESIGN.md "Configuration": a policy typo must not take
// the pod down).
//
// Every wait is a bounded poll.
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

// A --state-file whose directory is missing: reported at start (not at the
// first override that would be lost), counted, logged once however many
// writes fail, and written as soon as the directory appears, so the
// override made meanwhile survives a crash.
TEST(OverrideCrashE2eTest, AStateFileThatCannotBeWrittenIsReportedAndRetried) {
  BreakerdProcess scratch;  // only for its temporary directory
  const std::string dir = scratch.dir() + "/not-yet";
  const std::string state = dir + "/state";
  const std::string dep = "search/api";
  {
    BreakerdProcess first;
    ASSERT_TRUE(StartWithStateFile(first, state));
    EXPECT_TRUE(
        first.WaitForLog("\"event\":\"state_save_failed\"", absl::Seconds(1)))
        << "a state file that cannot be written is reported at start\n"
        << first.Log();
    EXPECT_GE(
        MetricValue(first, "breakerd_state_save_failures_total").value_or(0),
        1);
    auto admin = first.AdminStub();
    Result<v1::AdminResponse> forced =
        Admin(admin.get(), AdminOp::kForceOpen, dep, BearerToken(kAdminToken));
    ASSERT_TRUE(forced.status.ok()) << Describe(forced.status);
    // The maintenance loop keeps trying (every second): more failures, one
    // log line.
    ASSERT_TRUE(WaitUntil([&] {
      return MetricValue(first, "breakerd_state_save_failures_total")
                 .value_or(0) >= 3;
    }));
    const std::vector<std::string> failed_lines =
        absl::StrSplit(LogLinesWith(first.Log(), "state_save_failed"), '\n',
                       absl::SkipEmpty());
    EXPECT_EQ(failed_lines.size(), 1u) << first.Log();
    ASSERT_EQ(mkdir(dir.c_str(), 0700), 0);
    ASSERT_TRUE(first.WaitForLog("\"event\":\"state_save_recovered\"",
                                 absl::Seconds(5)))
        << first.Log();
    ASSERT_TRUE(Crash(first)) << first.Log();
  }
  BreakerdProcess again;
  ASSERT_TRUE(StartWithStateFile(again, state));
  auto stub = again.BreakerStub();
  Result<v1::BreakerStatus> s = GetState(stub.get(), dep);
  ASSERT_TRUE(s.status.ok()) << Describe(s.status) << "\n" << again.Log();
  EXPECT_EQ(s.response.state(), v1::STATE_FORCED_OPEN);
  EXPECT_EQ(MetricValue(again, "breakerd_state_save_failures_total"), 0);
}

// An unknown flag and a flag with a bad value are bad flags: exit 2, as
// --help says, with a log line naming the flag (Abseil's own parser would
// exit 1).
TEST(FlagsE2eTest, UnknownFlagAndBadFlagValueExitTwoNamingTheFlag) {
  for (const auto& [flag, named] :
       std::vector<std::pair<std::string, std::string>>{
           {"--no-such-flag", "--no-such-flag"},
           {"--redis-db=abc", "--redis-db"},
           {"--read-all-breakers-per-second=0",
            "read-all-breakers-per-second: must be at least 1"}}) {
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

}  // namespace
}  // namespace fault
}  // namespace breakerd

// End-to-end tests of breakerctl: each test starts the real breakerd (see
// BreakerdProcess) with an admin token file, drives it over gRPC, and runs
// the real breakerctl binary as a child process, checking its stdout, stderr
// and exit code the way an operator's shell would see them.
//
// Every wait is bounded and polls; nothing sleeps a fixed time and assumes.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <iterator>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "breakerd/v1/breaker.grpc.pb.h"
#include "grpcpp/client_context.h"
#include "gtest/gtest.h"
#include "tests/e2e/breakerd_process.h"
#include "yaml-cpp/yaml.h"

extern char** environ;

namespace breakerd {
namespace {

namespace v1 = ::breakerd::v1;

constexpr char kAdminToken[] = "ctl-admin-token-91c2";
constexpr absl::Duration kCtlTimeout = absl::Seconds(10);
constexpr absl::Duration kPoll = absl::Milliseconds(5);

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A breakerctl child process with stdout and stderr in files under `dir`.
class CtlProcess {
 public:
  CtlProcess(const std::string& dir, int id)
      : out_path_(absl::StrCat(dir, "/ctl", id, ".out")),
        err_path_(absl::StrCat(dir, "/ctl", id, ".err")) {}
  ~CtlProcess() {
    if (pid_ > 0 && !exit_code_.has_value()) {
      kill(pid_, SIGKILL);
      Wait(absl::Seconds(5));
    }
  }

  bool Start(const std::vector<std::string>& args) {
    std::vector<std::string> all = {BREAKERCTL_BINARY};
    all.insert(all.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (std::string& a : all) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&actions, 1, out_path_.c_str(),
                                     O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&actions, 2, err_path_.c_str(),
                                     O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    sigset_t empty, defaults;
    sigemptyset(&empty);
    sigemptyset(&defaults);
    for (int s : {SIGINT, SIGTERM, SIGPIPE}) sigaddset(&defaults, s);
    posix_spawnattr_setsigmask(&attr, &empty);
    posix_spawnattr_setsigdefault(&attr, &defaults);
    posix_spawnattr_setflags(&attr,
                             POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    const int rc = posix_spawn(&pid_, all[0].c_str(), &actions, &attr,
                               argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
    command_ = absl::StrJoin(all, " ");
    return rc == 0;
  }

  // The exit code (128 + signal if killed), or nullopt after `timeout`.
  std::optional<int> Wait(absl::Duration timeout) {
    const absl::Time deadline = absl::Now() + timeout;
    while (!exit_code_.has_value()) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        exit_code_ =
            WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        break;
      }
      if (absl::Now() >= deadline) return std::nullopt;
      absl::SleepFor(kPoll);
    }
    return exit_code_;
  }

  // Waits until stdout contains `substring`; false on timeout or exit.
  bool WaitForOutput(absl::string_view substring, absl::Duration timeout) {
    const absl::Time deadline = absl::Now() + timeout;
    while (absl::Now() < deadline) {
      if (absl::StrContains(out(), substring)) return true;
      if (Wait(absl::ZeroDuration()).has_value()) {
        return absl::StrContains(out(), substring);
      }
      absl::SleepFor(kPoll);
    }
    return false;
  }

  void Signal(int signo) { kill(pid_, signo); }
  std::string out() const { return ReadFile(out_path_); }
  std::string err() const { return ReadFile(err_path_); }
  const std::string& command() const { return command_; }

 private:
  std::string out_path_;
  std::string err_path_;
  std::string command_;
  pid_t pid_ = -1;
  std::optional<int> exit_code_;
};

struct CtlResult {
  int exit_code = -1;
  std::string out;
  std::string err;
  std::string command;
};

std::ostream& operator<<(std::ostream& os, const CtlResult& r) {
  return os << "`" << r.command << "` exited " << r.exit_code << "\nstdout:\n"
            << r.out << "stderr:\n"
            << r.err;
}

class BreakerctlTest : public ::testing::Test {
 protected:
  void SetUp() override {
    token_file_ =
        proc_.WriteFile("admin-token", absl::StrCat(kAdminToken, "\n"));
    const std::string config = proc_.WriteFile("config.yaml", R"(
defaults:
  consecutive_failures: 5
  cooldown: { base: 60s, jitter: 0 }
)");
    ASSERT_TRUE(
        proc_.Start({"--config=" + config, "--admin-token-file=" + token_file_},
                    /*with_unix_socket=*/true));
    stub_ = proc_.BreakerStub();
  }

  // Runs breakerctl --target=<breakerd> <args...> to completion.
  CtlResult Ctl(std::vector<std::string> args, bool with_target = true) {
    if (with_target) {
      args.insert(args.begin(), "--target=" + proc_.tcp_address());
    }
    CtlProcess ctl(proc_.dir(), next_id_++);
    CtlResult r;
    if (!ctl.Start(args)) {
      ADD_FAILURE() << "cannot spawn " << BREAKERCTL_BINARY;
      return r;
    }
    std::optional<int> code = ctl.Wait(kCtlTimeout);
    EXPECT_TRUE(code.has_value()) << ctl.command() << " did not exit";
    r.exit_code = code.value_or(-1);
    r.out = ctl.out();
    r.err = ctl.err();
    r.command = ctl.command();
    return r;
  }

  // Five timeouts: the default policy opens `dependency`.
  void Trip(const std::string& dependency) {
    for (int i = 0; i < 5; ++i) {
      grpc::ClientContext actx;
      actx.set_deadline(std::chrono::system_clock::now() +
                        std::chrono::seconds(5));
      v1::AcquireRequest acquire;
      acquire.set_dependency(dependency);
      v1::AcquireResponse granted;
      ASSERT_TRUE(stub_->Acquire(&actx, acquire, &granted).ok());
      ASSERT_TRUE(granted.allowed());
      grpc::ClientContext rctx;
      rctx.set_deadline(std::chrono::system_clock::now() +
                        std::chrono::seconds(5));
      v1::ReportRequest report;
      report.set_dependency(dependency);
      report.set_permit(granted.permit());
      report.set_outcome(v1::OUTCOME_TIMEOUT);
      v1::ReportResponse reported;
      ASSERT_TRUE(stub_->Report(&rctx, report, &reported).ok());
    }
    ASSERT_EQ(State(dependency), v1::STATE_OPEN);
  }

  // Acquires once so that a closed breaker exists for `dependency`.
  void Touch(const std::string& dependency) {
    grpc::ClientContext ctx;
    v1::AcquireRequest acquire;
    acquire.set_dependency(dependency);
    v1::AcquireResponse granted;
    ASSERT_TRUE(stub_->Acquire(&ctx, acquire, &granted).ok());
  }

  v1::State State(const std::string& dependency) {
    grpc::ClientContext ctx;
    v1::GetStateRequest request;
    request.set_dependency(dependency);
    v1::BreakerStatus status;
    if (!stub_->GetState(&ctx, request, &status).ok()) {
      return v1::STATE_UNSPECIFIED;
    }
    return status.state();
  }

  BreakerdProcess proc_;
  std::string token_file_;
  std::unique_ptr<v1::Breaker::Stub> stub_;
  int next_id_ = 0;
};

// The data line of `dependency` in a `list` table, split into columns.
std::vector<std::string> TableRow(const std::string& table,
                                  absl::string_view dependency) {
  for (absl::string_view line : absl::StrSplit(table, '\n')) {
    std::vector<std::string> cols =
        absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (!cols.empty() && cols[0] == dependency) return cols;
  }
  return {};
}

TEST_F(BreakerctlTest, ListShowsTheOpenBreakerAsTableAndJson) {
  Touch("b/healthy");
  Trip("a/tripped");

  CtlResult table = Ctl({"list"});
  ASSERT_EQ(table.exit_code, 0) << table;
  const std::vector<std::string> header = TableRow(table.out, "DEPENDENCY");
  EXPECT_EQ(header,
            std::vector<std::string>(
                {"DEPENDENCY", "STATE", "GEN", "RETRY_AFTER", "CALLS",
                 "FAILURES", "RATE", "CONSEC", "ESCALATION", "POLICY", "MODE"}))
      << table;
  const std::vector<std::string> open = TableRow(table.out, "a/tripped");
  ASSERT_EQ(open.size(), 11u) << table;
  EXPECT_EQ(open[1], "open");
  EXPECT_EQ(open[2], "1") << "one transition";
  EXPECT_EQ(open[7], "5") << "consecutive failures";
  EXPECT_EQ(open[10], "enforce");
  const std::vector<std::string> closed = TableRow(table.out, "b/healthy");
  ASSERT_EQ(closed.size(), 11u) << table;
  EXPECT_EQ(closed[1], "closed");
  EXPECT_LT(table.out.find("a/tripped"), table.out.find("b/healthy"))
      << "sorted by name";

  CtlResult json = Ctl({"--json", "list"});
  ASSERT_EQ(json.exit_code, 0) << json;
  YAML::Node array = YAML::Load(json.out);  // JSON is YAML
  ASSERT_TRUE(array.IsSequence()) << json;
  ASSERT_EQ(array.size(), 2u) << json;
  EXPECT_EQ(array[0]["dependency"].as<std::string>(), "a/tripped");
  EXPECT_EQ(array[0]["state"].as<std::string>(), "STATE_OPEN");
  EXPECT_EQ(array[0]["consecutive_failures"].as<int>(), 5);
  EXPECT_EQ(array[1]["dependency"].as<std::string>(), "b/healthy");
  EXPECT_EQ(array[1]["state"].as<std::string>(), "STATE_CLOSED");
}

TEST_F(BreakerctlTest, ListOverUnixSocketWithFlagAfterCommand) {
  Trip("a/tripped");
  CtlResult r = Ctl({"list", "--json", "--target", proc_.unix_address()},
                    /*with_target=*/false);
  ASSERT_EQ(r.exit_code, 0) << r;
  EXPECT_TRUE(absl::StrContains(r.out, "\"state\":\"STATE_OPEN\"")) << r;
}

TEST_F(BreakerctlTest, GetPrintsOneBreakerAndUnknownIsNotFound) {
  Trip("a/tripped");
  CtlResult text = Ctl({"get", "a/tripped"});
  ASSERT_EQ(text.exit_code, 0) << text;
  EXPECT_TRUE(absl::StrContains(text.out, "dependency: a/tripped\n")) << text;
  EXPECT_TRUE(absl::StrContains(text.out, "state: open\n")) << text;
  EXPECT_TRUE(absl::StrContains(text.out, "consecutive_failures: 5\n")) << text;

  CtlResult json = Ctl({"get", "a/tripped", "--json"});
  ASSERT_EQ(json.exit_code, 0) << json;
  YAML::Node object = YAML::Load(json.out);
  ASSERT_TRUE(object.IsMap()) << json;
  EXPECT_EQ(object["state"].as<std::string>(), "STATE_OPEN");
  EXPECT_EQ(object["generation"].as<std::string>(), "1");
  // Every field, the Duration ones included (an open breaker's time left).
  ASSERT_TRUE(object["retry_after"].IsScalar()) << json;
  EXPECT_TRUE(absl::EndsWith(object["retry_after"].as<std::string>(), "s"))
      << json;
  Touch("b/healthy");  // its permit not reported: one call in flight
  CtlResult closed = Ctl({"get", "b/healthy", "--json"});
  ASSERT_EQ(closed.exit_code, 0) << closed;
  const YAML::Node healthy = YAML::Load(closed.out);
  EXPECT_EQ(healthy["retry_after"].as<std::string>(), "0s") << closed;
  EXPECT_EQ(healthy["admit_share"].as<double>(), 1) << closed;
  EXPECT_EQ(healthy["inflight"].as<std::string>(), "1") << closed;
  CtlResult closed_text = Ctl({"get", "b/healthy"});
  ASSERT_EQ(closed_text.exit_code, 0) << closed_text;
  EXPECT_TRUE(absl::StrContains(closed_text.out,
                                "probe_in_flight: false\n"
                                "admit_share: 1.0000\n"
                                "inflight: 1\n"))
      << closed_text;

  CtlResult missing = Ctl({"get", "never/seen"});
  EXPECT_EQ(missing.exit_code, 1) << missing;
  EXPECT_TRUE(absl::StartsWith(missing.err, "breakerctl: NOT_FOUND: "))
      << missing;
  EXPECT_EQ(missing.out, "");
}

TEST_F(BreakerctlTest, ForceOpenForceCloseAndResetWithTheToken) {
  Trip("a/tripped");
  Touch("b/healthy");

  CtlResult open =
      Ctl({"--token-file=" + token_file_, "force-open", "b/healthy"});
  ASSERT_EQ(open.exit_code, 0) << open;
  EXPECT_TRUE(absl::StrContains(open.out, "state: forced_open\n")) << open;
  EXPECT_EQ(State("b/healthy"), v1::STATE_FORCED_OPEN);

  CtlResult close =
      Ctl({"--token", kAdminToken, "--json", "force-close", "b/healthy"});
  ASSERT_EQ(close.exit_code, 0) << close;
  EXPECT_TRUE(absl::StrContains(close.out, "\"state\":\"STATE_FORCED_CLOSED\""))
      << close;
  EXPECT_EQ(State("b/healthy"), v1::STATE_FORCED_CLOSED);

  CtlResult reset =
      Ctl({"--token=" + std::string(kAdminToken), "reset", "a/tripped"});
  ASSERT_EQ(reset.exit_code, 0) << reset;
  EXPECT_TRUE(absl::StrContains(reset.out, "state: closed\n")) << reset;
  EXPECT_TRUE(absl::StrContains(reset.out, "consecutive_failures: 0\n"))
      << reset;
  EXPECT_EQ(State("a/tripped"), v1::STATE_CLOSED);
}

TEST_F(BreakerctlTest, AdminWithoutTheRightTokenIsUnauthenticated) {
  Trip("a/tripped");
  const std::string wrong = "not-the-token-5d1e";
  const std::vector<std::vector<std::string>> refused = {
      {"reset", "a/tripped"},
      {"--token=" + wrong, "reset", "a/tripped"},
      {"--token-file=" + proc_.WriteFile("wrong-token", wrong), "force-close",
       "a/tripped"},
      {"--token=" + wrong, "force-open", "a/tripped"},
  };
  for (const auto& args : refused) {
    CtlResult r = Ctl(args);
    EXPECT_EQ(r.exit_code, 1) << r;
    EXPECT_TRUE(absl::StartsWith(r.err, "breakerctl: UNAUTHENTICATED")) << r;
    EXPECT_FALSE(absl::StrContains(r.err + r.out, wrong))
        << "the token is printed: " << r;
    EXPECT_EQ(State("a/tripped"), v1::STATE_OPEN) << r;
  }
}

// --token-file is read by breakerd's own secret-file reader: what breakerd
// would refuse as --admin-token-file, breakerctl refuses before any RPC,
// naming the flag and the rule, never the secret.
TEST_F(BreakerctlTest, TokenFileHasBreakerdsRules) {
  Trip("a/tripped");
  const std::string placeholder = "REPLACE-ME-example-placeholder-77";
  const std::vector<std::pair<std::string, std::string>> bad = {
      {proc_.WriteFile("empty-token", "  \n"), "the file is empty"},
      {proc_.WriteFile("placeholder-token", placeholder), "placeholder"},
      {proc_.WriteFile("spaced-token", "two words-5d1e"), "printable ASCII"},
      {proc_.dir() + "/no-such-token", "cannot open"},
      {proc_.dir(), "not a regular file"},  // it used to abort
  };
  for (const auto& [file, rule] : bad) {
    CtlResult r = Ctl({"--token-file=" + file, "force-close", "a/tripped"});
    EXPECT_EQ(r.exit_code, 2) << r;
    EXPECT_TRUE(absl::StartsWith(r.err, "breakerctl: --token-file " + file))
        << r;
    EXPECT_TRUE(absl::StrContains(r.err, rule)) << rule << "\n" << r;
    EXPECT_FALSE(absl::StrContains(r.err, placeholder)) << r;
    EXPECT_FALSE(absl::StrContains(r.err, "words-5d1e")) << r;
    EXPECT_EQ(State("a/tripped"), v1::STATE_OPEN) << r;
  }
}

TEST_F(BreakerctlTest, WatchPrintsTheInitialStateThenTransitions) {
  Trip("a/tripped");
  Touch("b/healthy");
  CtlProcess watch(proc_.dir(), 100);
  ASSERT_TRUE(watch.Start(
      {"--target=" + proc_.tcp_address(), "watch", "a/tripped", "b/healthy"}));
  ASSERT_TRUE(
      watch.WaitForOutput("a/tripped none -> open "
                          "reason=initial gen=1",
                          kCtlTimeout))
      << watch.out() << watch.err();
  ASSERT_TRUE(
      watch.WaitForOutput("b/healthy none -> closed "
                          "reason=initial gen=0",
                          kCtlTimeout))
      << watch.out() << watch.err();

  CtlResult open =
      Ctl({"--token-file=" + token_file_, "force-open", "b/healthy"});
  ASSERT_EQ(open.exit_code, 0) << open;
  EXPECT_TRUE(watch.WaitForOutput(
      "b/healthy closed -> forced_open reason=forced_open gen=1", kCtlTimeout))
      << watch.out() << watch.err();
  // Every line names the mode (a shadow breaker refuses nothing).
  EXPECT_TRUE(
      watch.WaitForOutput("gen=1 retry_after=0 mode=enforce", kCtlTimeout))
      << watch.out();
  EXPECT_TRUE(open.err.empty()) << open;  // no shadow note for enforce

  watch.Signal(SIGINT);  // Ctrl-C: the stream is cancelled, exit 0
  std::optional<int> code = watch.Wait(kCtlTimeout);
  ASSERT_TRUE(code.has_value()) << "watch ignored SIGINT";
  EXPECT_EQ(*code, 0) << watch.err();
}

TEST_F(BreakerctlTest, WatchJsonPrintsOneObjectPerLine) {
  Touch("b/healthy");
  CtlProcess watch(proc_.dir(), 101);
  ASSERT_TRUE(watch.Start(
      {"--target=" + proc_.tcp_address(), "--json", "watch", "b/healthy"}));
  ASSERT_TRUE(watch.WaitForOutput("\"reason\":\"initial\"", kCtlTimeout))
      << watch.out() << watch.err();
  Trip("b/healthy");
  ASSERT_TRUE(
      watch.WaitForOutput("\"reason\":\"consecutive_failures\"", kCtlTimeout))
      << watch.out() << watch.err();
  watch.Signal(SIGKILL);
  watch.Wait(kCtlTimeout);
  std::vector<std::string> lines =
      absl::StrSplit(watch.out(), '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 2u) << watch.out();
  YAML::Node change = YAML::Load(lines[1]);
  // Each line says when it was received (RFC 3339 UTC), as the text does.
  for (const std::string& line : lines) {
    EXPECT_TRUE(absl::StartsWith(line, "{\"received_at\":\"20")) << line;
  }
  absl::Time received;
  std::string error;
  ASSERT_TRUE(absl::ParseTime("%Y-%m-%dT%H:%M:%E*SZ",
                              change["received_at"].as<std::string>(),
                              &received, &error))
      << error;
  EXPECT_LT(absl::AbsDuration(absl::Now() - received), absl::Minutes(5));
  EXPECT_EQ(change["retry_after"].as<std::string>().back(), 's');
  EXPECT_EQ(change["dependency"].as<std::string>(), "b/healthy");
  EXPECT_EQ(change["previous"].as<std::string>(), "STATE_CLOSED");
  EXPECT_EQ(change["state"].as<std::string>(), "STATE_OPEN");
}

TEST_F(BreakerctlTest, UsageErrorsExitTwoAndHelpListsCommands) {
  const std::vector<std::vector<std::string>> usage_errors = {
      {"frobnicate"},
      {},
      {"get"},
      {"list", "extra"},
      {"--no-such-flag", "list"},
      {"--timeout=soon", "list"},
      {"--token=a", "--token-file=" + token_file_, "reset", "x"},
  };
  for (const auto& args : usage_errors) {
    CtlResult r = Ctl(args);
    EXPECT_EQ(r.exit_code, 2) << r;
    EXPECT_TRUE(absl::StartsWith(r.err, "breakerctl: ")) << r;
    EXPECT_EQ(r.out, "") << r;
  }

  CtlResult help = Ctl({"--help"}, /*with_target=*/false);
  ASSERT_EQ(help.exit_code, 0) << help;
  for (const char* word :
       {"list", "get DEP", "watch [DEP...]", "force-open DEP",
        "force-close DEP", "reset DEP", "simulate", "hash-label NAME...",
        "--target=ADDR", "--token=TOKEN", "--token-file=PATH", "--json",
        "--timeout=DURATION"}) {
    EXPECT_TRUE(absl::StrContains(help.out, word)) << word << "\n" << help;
  }
}

TEST_F(BreakerctlTest, UnreachableTargetIsUnavailable) {
  CtlResult r = Ctl({"--target=unix:" + proc_.dir() + "/nobody.sock",
                     "--timeout=500ms", "list"},
                    /*with_target=*/false);
  EXPECT_EQ(r.exit_code, 1) << r;
  EXPECT_TRUE(absl::StartsWith(r.err, "breakerctl: UNAVAILABLE") ||
              absl::StartsWith(r.err, "breakerctl: DEADLINE_EXCEEDED"))
      << r;
}

// hash-label prints, for each name, the label a breakerd started with
// --metrics-dependency-label=hash exports for it ("h" + FNV-1a 64; the
// values below come from the published algorithm, computed outside
// breakerd). It needs no server: the names are hashed locally.
TEST(BreakerctlHashLabelTest, PrintsTheLabelBreakerdExportsForEachName) {
  BreakerdProcess proc;
  ASSERT_TRUE(proc.Start({"--metrics-dependency-label=hash"}));
  auto stub = proc.BreakerStub();
  for (const char* dep : {"db/main", "pay/api"}) {
    grpc::ClientContext ctx;
    v1::AcquireRequest acquire;
    acquire.set_dependency(dep);
    v1::AcquireResponse granted;
    ASSERT_TRUE(stub->Acquire(&ctx, acquire, &granted).ok()) << dep;
  }
  CtlProcess ctl(proc.dir(), 0);
  ASSERT_TRUE(ctl.Start({"hash-label", "db/main", "pay/api"}));
  ASSERT_EQ(ctl.Wait(kCtlTimeout), 0) << ctl.err();
  EXPECT_EQ(ctl.out(),
            "db/main\thce95f71b99df0621\npay/api\thfe6030c37d534b36\n");
  const std::string metrics = proc.Metrics();
  for (absl::string_view line :
       absl::StrSplit(ctl.out(), '\n', absl::SkipEmpty())) {
    const std::pair<std::string, std::string> name_label =
        absl::StrSplit(line, '\t');
    EXPECT_EQ(Sample(metrics,
                     absl::StrCat("breakerd_state{dependency=\"",
                                  name_label.second, "\",mode=\"enforce\"}")),
              0)
        << name_label.first << "\n"
        << metrics;
    EXPECT_FALSE(absl::StrContains(metrics, name_label.first));
  }

  // No name: a usage error.
  CtlProcess bad(proc.dir(), 1);
  ASSERT_TRUE(bad.Start({"hash-label"}));
  EXPECT_EQ(bad.Wait(kCtlTimeout), 2) << bad.command();
  EXPECT_EQ(bad.out(), "") << bad.command();
  EXPECT_TRUE(absl::StartsWith(bad.err(), "breakerctl: ")) << bad.err();
}

// Names breakerd would refuse among valid ones: every valid name still gets
// its label, in order; each refused one gets an error naming its position
// and showing it escaped (short); the exit code is 2.
TEST(BreakerctlHashLabelTest, ARefusedNameIsNamedAndTheOthersStillPrinted) {
  BreakerdProcess files;  // only for its temporary directory
  CtlProcess ctl(files.dir(), 0);
  const std::string long_name = "x " + std::string(100, 'y');
  ASSERT_TRUE(ctl.Start({"hash-label", "db/main", "bad name!", "dep-00001",
                         "tab\there", long_name}));
  EXPECT_EQ(ctl.Wait(kCtlTimeout), 2) << ctl.err();
  EXPECT_EQ(ctl.out(),
            "db/main\thce95f71b99df0621\ndep-00001\thd11142d798415fc0\n");
  const std::vector<std::string> errors =
      absl::StrSplit(ctl.err(), '\n', absl::SkipEmpty());
  ASSERT_EQ(errors.size(), 3u) << ctl.err();
  EXPECT_TRUE(absl::StartsWith(
      errors[0],
      "breakerctl: hash-label: argument 2 \"bad name!\": byte 3 "
      "(0x20) is not allowed"))
      << errors[0];
  EXPECT_TRUE(absl::StartsWith(
      errors[1],
      "breakerctl: hash-label: argument 4 \"tab\\there\": byte 3 "
      "(0x09) is not allowed"))
      << errors[1];
  EXPECT_TRUE(absl::StartsWith(
      errors[2], absl::StrCat("breakerctl: hash-label: argument 5 \"x ",
                              std::string(30, 'y'), "\"...: ")))
      << errors[2];
}

// simulate needs no server: the temporary directory of an unstarted
// BreakerdProcess holds its files.
TEST(BreakerctlSimulateTest, ReplaysATraceThroughTheEngine) {
  BreakerdProcess files;
  const std::string config = files.WriteFile("policy.yaml", R"(
defaults:
  consecutive_failures: 3
  cooldown: { base: 10s, jitter: 0 }
)");
  const std::string trace = files.WriteFile("trace.jsonl", R"(
{"t": "2026-11-30T12:00:00.000Z", "dependency": "llm/a", "outcome": "timeout"}
{"t": "2026-11-30T12:00:01.000Z", "dependency": "llm/a", "outcome": 503}
{"t": "2026-11-30T12:00:02.000Z", "dependency": "llm/a", "grpc_code": 14}
{"t": "2026-11-30T12:00:03.000Z", "dependency": "llm/a", "outcome": "success"}
{"t": "2026-11-30T12:00:04.000Z", "dependency": "llm/a", "outcome": "success"}
{"t": "2026-11-30T12:00:13.000Z", "dependency": "llm/a", "outcome": "success"}
{"t": "2026-11-30T12:00:14.000Z", "dependency": "llm/a", "outcome": "success"}
{"t": "2026-11-30T12:00:01.500Z", "dependency": "db", "outcome": "success"}
)");
  CtlProcess ctl(files.dir(), 0);
  ASSERT_TRUE(ctl.Start({"simulate", "--config=" + config, "--trace", trace}));
  std::optional<int> code = ctl.Wait(kCtlTimeout);
  ASSERT_EQ(code, 0) << ctl.err();
  const std::string out = ctl.out();
  EXPECT_TRUE(absl::StrContains(
      out, "db: 1 calls, 1 allowed, 0 refused, 0 probes; final state closed"))
      << out;
  EXPECT_TRUE(absl::StrContains(out,
                                "llm/a: 7 calls, 5 allowed, 2 refused "
                                "(open 2), 1 probes; final state closed"))
      << out;
  EXPECT_TRUE(absl::StrContains(out,
                                "+2.000s (2026-11-30T12:00:02.000Z)  "
                                "closed -> open (consecutive_failures)"))
      << out;
  EXPECT_TRUE(absl::StrContains(out,
                                "+13.000s (2026-11-30T12:00:13.000Z)  "
                                "probe allowed"))
      << out;
  EXPECT_TRUE(absl::StrContains(out, "-> closed (probe_succeeded)")) << out;

  const std::string bad =
      files.WriteFile("bad.jsonl", "{\"t\": 1, \"outcome\": \"timeout\"}\n");
  CtlProcess refused(files.dir(), 1);
  ASSERT_TRUE(
      refused.Start({"simulate", "--config=" + config, "--trace=" + bad}));
  EXPECT_EQ(refused.Wait(kCtlTimeout), 2);
  EXPECT_TRUE(absl::StrContains(refused.err(), "line 1: \"dependency\""))
      << refused.err();
}

// A policy with gentle recovery: after the probe closes the breaker, the
// replay refuses first attempts past the ramp's share, counted as "ramp".
TEST(BreakerctlSimulateTest, RampRefusalsAreCountedByTheirReason) {
  BreakerdProcess files;
  const std::string config = files.WriteFile("policy.yaml", R"(
defaults:
  consecutive_failures: 3
  cooldown: { base: 10s, jitter: 0 }
  recovery: { ramp: 100s, start_share: 0.5 }
)");
  const std::string trace = files.WriteFile("trace.jsonl", R"(
{"t": 0, "dependency": "llm/r", "outcome": "timeout"}
{"t": 1, "dependency": "llm/r", "outcome": "timeout"}
{"t": 2, "dependency": "llm/r", "outcome": "timeout"}
{"t": 13, "dependency": "llm/r", "outcome": "success"}
{"t": 14, "dependency": "llm/r", "outcome": "success"}
{"t": 15, "dependency": "llm/r", "outcome": "success"}
{"t": 16, "dependency": "llm/r", "outcome": "success"}
{"t": 17, "dependency": "llm/r", "outcome": "success"}
)");
  CtlProcess ctl(files.dir(), 0);
  ASSERT_TRUE(ctl.Start({"simulate", "--config=" + config, "--trace", trace}));
  ASSERT_EQ(ctl.Wait(kCtlTimeout), 0) << ctl.err();
  const std::string out = ctl.out();
  EXPECT_TRUE(absl::StrContains(out, "llm/r: 8 calls, ")) << out;
  EXPECT_TRUE(absl::StrContains(out, " refused (ramp ")) << out;
  EXPECT_FALSE(absl::StrContains(out, "open 1")) << out;
  EXPECT_TRUE(absl::StrContains(out, "-> closed (probe_succeeded)")) << out;
}

// One trace record for simulate: a call to `dependency` that ended (or, with
// no outcome in `fields`, was last seen) at `t` seconds.
std::string TraceLine(double t, absl::string_view dependency,
                      absl::string_view fields = "") {
  return absl::StrCat("{\"t\": ", t, ", \"dependency\": \"", dependency, "\"",
                      fields.empty() ? "" : ", ", fields, "}\n");
}

// Runs `breakerctl simulate` (plus `extra` flags) to its end; the process
// for its output.
std::unique_ptr<CtlProcess> Simulate(const BreakerdProcess& files,
                                     const std::string& config,
                                     const std::string& trace, int id,
                                     std::vector<std::string> extra = {}) {
  auto ctl = std::make_unique<CtlProcess>(files.dir(), id);
  std::vector<std::string> args = {"simulate", "--config=" + config,
                                   "--trace=" + trace};
  args.insert(args.end(), extra.begin(), extra.end());
  EXPECT_TRUE(ctl->Start(args));
  EXPECT_EQ(ctl->Wait(kCtlTimeout), 0) << ctl->err();
  return ctl;
}

// Records with no outcome are calls that never reported. With hang_after
// 1s, the 20 calls begun at 0.00 .. 0.19 s count as hung by 1.19 s: the
// call at 1.10 s still goes (only the earliest had hung, fewer than
// min_calls), the one at 1.19 s finds the breaker open with reason
// hung_calls. No call of the trace had reported yet: the first Report
// (the 1.10 s call's, at 3.10 s) comes late. With hang_after off, a call
// that never reports only stays in flight.
TEST(BreakerctlSimulateTest, HungCallsOpenTheBreakerBeforeAnyReport) {
  BreakerdProcess files;
  const std::string config = files.WriteFile("policy.yaml", R"(
defaults:
  consecutive_failures: 0
  failure_rate: { threshold: 0.5, min_calls: 20, window: 30s }
  cooldown: { base: 10s, jitter: 0 }
  inflight: { hang_after: 1s }
policies:
  - match: "nohang/*"
    inflight: { hang_after: 0s }
)");
  std::string lines;
  for (int i = 0; i < 20; ++i) {
    // Begun at i/100 s, still out 5 s later.
    lines += TraceLine(5 + i / 100.0, "llm/h", "\"latency_ms\": 5000");
  }
  lines +=
      TraceLine(3.1, "llm/h", "\"outcome\": \"success\", \"latency_ms\": 2000");
  lines += TraceLine(1.19, "llm/h", "\"outcome\": \"success\"");
  lines += TraceLine(2, "nohang/x", "\"latency_ms\": 500");
  lines += TraceLine(2, "nohang/x", "\"outcome\": 200, \"latency_ms\": 100");
  const std::string trace = files.WriteFile("trace.jsonl", lines);

  std::unique_ptr<CtlProcess> text = Simulate(files, config, trace, 0);
  EXPECT_EQ(text->out(),
            "llm/h: 22 calls, 21 allowed, 1 refused (open 1), 0 probes, "
            "20 never reported, 20 hung, 1 late reports; final state open\n"
            "  decisions: allowed 21, rejected_open 1\n"
            "  +1.190s  closed -> open (hung_calls) cooldown 10s\n"
            "nohang/x: 2 calls, 2 allowed, 0 refused, 0 probes, "
            "1 never reported, 1 in flight at the end; final state closed\n"
            "  decisions: allowed 2\n");
  EXPECT_TRUE(absl::StrContains(
      text->err(),
      "21 record(s) without outcome, http_status or grpc_code (the first "
      "at line 1): replayed as calls that never reported"))
      << text->err();

  std::unique_ptr<CtlProcess> json =
      Simulate(files, config, trace, 1, {"--json"});
  const std::vector<std::string> objects =
      absl::StrSplit(json->out(), '\n', absl::SkipEmpty());
  ASSERT_EQ(objects.size(), 2u) << json->out();
  const YAML::Node hung = YAML::Load(objects[0]);
  EXPECT_EQ(hung["dependency"].as<std::string>(), "llm/h");
  EXPECT_EQ(hung["hung_calls"].as<int>(), 20);
  EXPECT_EQ(hung["never_reported"].as<int>(), 20);
  EXPECT_EQ(hung["inflight"].as<int>(), 0);
  EXPECT_EQ(hung["decisions"]["rejected_open"].as<int>(), 1);
  ASSERT_EQ(hung["timeline"].size(), 1u) << objects[0];
  EXPECT_EQ(hung["timeline"][0]["offset_seconds"].as<double>(), 1.19);
  EXPECT_EQ(hung["timeline"][0]["event"].as<std::string>(),
            "closed -> open (hung_calls) cooldown 10s");
  EXPECT_EQ(YAML::Load(objects[1])["inflight"].as<int>(), 1) << objects[1];
}

// Gentle recovery: after the probe (begun at 12 s, reported at 12.5 s: the
// call at 12.2 s finds it in flight) closes the breaker, a 40 s ramp from a
// share of 0.1 admits 12 of the 100 first attempts of its first second and
// 98 of the 100 of its last; after it, every call goes.
TEST(BreakerctlSimulateTest, RecoveryRampAdmitsARisingShare) {
  BreakerdProcess files;
  const std::string config = files.WriteFile("policy.yaml", R"(
defaults:
  consecutive_failures: 3
  cooldown: { base: 10s, jitter: 0 }
  recovery: { ramp: 40s, start_share: 0.1 }
)");
  std::string lines;
  for (int t : {0, 1, 2, 5}) {
    lines += TraceLine(t, "llm/r", "\"outcome\": \"timeout\"");
  }
  lines +=
      TraceLine(12.5, "llm/r", "\"outcome\": \"success\", \"latency_ms\": 500");
  lines += TraceLine(12.2, "llm/r", "\"outcome\": \"success\"");
  for (double from : {12.51, 51.5, 53.01}) {
    for (int k = 0; k < 100; ++k) {
      lines += TraceLine(from + k / 100.0, "llm/r", "\"outcome\": \"success\"");
    }
  }
  const std::string trace = files.WriteFile("trace.jsonl", lines);

  std::unique_ptr<CtlProcess> text = Simulate(files, config, trace, 0);
  EXPECT_EQ(text->out(),
            "llm/r: 306 calls, 214 allowed, 92 refused (open 1, "
            "probe_in_flight 1, ramp 90), 1 probes; final state closed\n"
            "  decisions: allowed 213, probe 1, rejected_open 1, "
            "rejected_probe_in_flight 1, rejected_ramp 90\n"
            "  +2.000s  closed -> open (consecutive_failures) cooldown 10s\n"
            "  +12.000s  open -> half_open (cooldown_elapsed)\n"
            "  +12.000s  probe allowed\n"
            "  +12.500s  half_open -> closed (probe_succeeded)\n"
            "  +12.500s  ramp begins: admit share 0.10, rising to 1 over 40s\n"
            "  +52.500s  ramp complete: 110 of 200 first attempts admitted (by "
            "quarter of the ramp: 12/100, 0/0, 0/0, 98/100)\n");

  std::unique_ptr<CtlProcess> json =
      Simulate(files, config, trace, 1, {"--json"});
  const YAML::Node report = YAML::Load(json->out());
  EXPECT_EQ(report["refused"].as<int>(), 92) << json->out();
  EXPECT_EQ(report["decisions"]["rejected_ramp"].as<int>(), 90);
  EXPECT_EQ(report["decisions"]["shadow_rejected_ramp"].as<int>(), 0);
  EXPECT_EQ(report["decisions"]["allowed"].as<int>(), 213);
}

// A trip while the ramp runs re-opens the breaker with reason ramp_failed at
// the next escalation level (cooldown 20 s, not 10 s); once a later ramp has
// completed, a trip is an ordinary one again, at the base cooldown.
TEST(BreakerctlSimulateTest, TripDuringTheRampIsRampFailed) {
  BreakerdProcess files;
  const std::string config = files.WriteFile("policy.yaml", R"(
defaults:
  consecutive_failures: 3
  cooldown: { base: 10s, max: 300s, jitter: 0 }
  recovery: { ramp: 40s, start_share: 0.5 }
)");
  std::string lines;
  for (int t : {0, 1, 2}) {
    lines += TraceLine(t, "llm/f", "\"outcome\": \"timeout\"");
  }
  lines += TraceLine(12, "llm/f", "\"outcome\": \"success\"");
  for (int k = 0; k < 5; ++k) {  // 13 s .. 15 s: 3 admitted, 3 failures
    lines += TraceLine(13 + k / 2.0, "llm/f", "\"outcome\": \"timeout\"");
  }
  for (int t : {16, 35, 36}) {
    lines += TraceLine(t, "llm/f", "\"outcome\": \"success\"");
  }
  for (int t : {76, 77, 78}) {
    lines += TraceLine(t, "llm/f", "\"outcome\": \"timeout\"");
  }
  const std::string trace = files.WriteFile("trace.jsonl", lines);

  std::unique_ptr<CtlProcess> text = Simulate(files, config, trace, 0);
  EXPECT_EQ(text->out(),
            "llm/f: 15 calls, 12 allowed, 3 refused (open 1, ramp 2), "
            "2 probes; final state open\n"
            "  decisions: allowed 10, probe 2, rejected_open 1, "
            "rejected_ramp 2\n"
            "  +2.000s  closed -> open (consecutive_failures) cooldown 10s\n"
            "  +12.000s  open -> half_open (cooldown_elapsed)\n"
            "  +12.000s  probe allowed\n"
            "  +12.000s  half_open -> closed (probe_succeeded)\n"
            "  +12.000s  ramp begins: admit share 0.50, rising to 1 over 40s\n"
            "  +15.000s  ramp failed after 3s: 3 of 5 first attempts admitted "
            "(by quarter of the ramp: 3/5)\n"
            "  +15.000s  closed -> open (ramp_failed) cooldown 20s\n"
            "  +35.000s  open -> half_open (cooldown_elapsed)\n"
            "  +35.000s  probe allowed\n"
            "  +35.000s  half_open -> closed (probe_succeeded)\n"
            "  +35.000s  ramp begins: admit share 0.50, rising to 1 over 40s\n"
            "  +75.000s  ramp complete: 1 of 1 first attempts admitted (by "
            "quarter of the ramp: 1/1, 0/0, 0/0, 0/0)\n"
            "  +78.000s  closed -> open (consecutive_failures) cooldown 10s\n");
}

// The sidecar's --trace-file is a trace `simulate` replays: the same policy
// opens the breaker at the same call.
TEST(BreakerctlSimulateTest, ReplaysATraceWrittenByTheSidecar) {
  BreakerdProcess proc;
  const std::string config = proc.WriteFile("policy.yaml", R"(
defaults:
  consecutive_failures: 5
  cooldown: { base: 60s, jitter: 0 }
)");
  const std::string trace = proc.dir() + "/trace.jsonl";
  ASSERT_TRUE(proc.Start({"--config=" + config, "--trace-file=" + trace}));
  auto stub = proc.BreakerStub();
  for (int i = 0; i < 7; ++i) {
    grpc::ClientContext actx;
    v1::AcquireRequest acquire;
    acquire.set_dependency("llm/traced");
    v1::AcquireResponse granted;
    ASSERT_TRUE(stub->Acquire(&actx, acquire, &granted).ok());
    ASSERT_TRUE(granted.allowed()) << i;
    grpc::ClientContext rctx;
    v1::ReportRequest report;
    report.set_dependency("llm/traced");
    report.set_permit(granted.permit());
    if (i < 2) {
      report.set_http_status(200);
      report.mutable_latency()->set_nanos(120000000);
    } else {
      report.set_outcome(v1::OUTCOME_TIMEOUT);
    }
    v1::ReportResponse reported;
    ASSERT_TRUE(stub->Report(&rctx, report, &reported).ok());
  }
  std::ifstream in(trace);
  const std::string written((std::istreambuf_iterator<char>(in)),
                            std::istreambuf_iterator<char>());
  EXPECT_EQ(std::count(written.begin(), written.end(), '\n'), 7) << written;
  EXPECT_TRUE(absl::StrContains(written, "\"latency_ms\":120")) << written;
  EXPECT_TRUE(absl::StrContains(written, "\"http_status\":200")) << written;

  CtlProcess ctl(proc.dir(), 0);
  ASSERT_TRUE(ctl.Start({"simulate", "--config=" + config, "--trace", trace}));
  ASSERT_EQ(ctl.Wait(kCtlTimeout), 0) << ctl.err();
  EXPECT_TRUE(absl::StrContains(ctl.out(), "llm/traced: 7 calls, 7 allowed"))
      << ctl.out();
  EXPECT_TRUE(
      absl::StrContains(ctl.out(), "closed -> open (consecutive_failures)"))
      << ctl.out();
}

}  // namespace
}  // namespace breakerd

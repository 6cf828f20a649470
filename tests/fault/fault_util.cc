#include "tests/fault/fault_util.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <grp.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "tests/e2e/watch_notices.h"
#include "tests/soak/proc_stats.h"

extern char** environ;

namespace breakerd {
namespace fault {
namespace {

constexpr absl::Duration kPollInterval = absl::Milliseconds(5);

void SetDeadline(grpc::ClientContext* ctx) {
  ctx->set_deadline(absl::ToChronoTime(absl::Now() + kRpcTimeout));
}

}  // namespace

std::string Describe(const grpc::Status& status) {
  return absl::StrCat("code ", status.error_code(), ": ",
                      status.error_message());
}

Result<v1::AcquireResponse> Acquire(v1::Breaker::Stub* stub,
                                    const std::string& dependency,
                                    uint32_t attempt) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  v1::AcquireRequest request;
  request.set_dependency(dependency);
  request.set_attempt(attempt);
  Result<v1::AcquireResponse> r;
  r.status = stub->Acquire(&ctx, request, &r.response);
  return r;
}

Result<v1::ReportResponse> Report(v1::Breaker::Stub* stub,
                                  const std::string& dependency,
                                  uint64_t permit, v1::Outcome outcome,
                                  absl::Duration latency) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  v1::ReportRequest request;
  request.set_dependency(dependency);
  request.set_permit(permit);
  request.set_outcome(outcome);
  if (latency > absl::ZeroDuration()) {
    const int64_t ns = absl::ToInt64Nanoseconds(latency);
    request.mutable_latency()->set_seconds(ns / 1000000000);
    request.mutable_latency()->set_nanos(static_cast<int32_t>(ns % 1000000000));
  }
  Result<v1::ReportResponse> r;
  r.status = stub->Report(&ctx, request, &r.response);
  return r;
}

Result<v1::AcquireFirstResponse> AcquireFirst(
    v1::Breaker::Stub* stub, const std::vector<std::string>& dependencies) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  v1::AcquireFirstRequest request;
  for (const std::string& d : dependencies) request.add_dependencies(d);
  Result<v1::AcquireFirstResponse> r;
  r.status = stub->AcquireFirst(&ctx, request, &r.response);
  return r;
}

Result<v1::BreakerStatus> GetState(v1::Breaker::Stub* stub,
                                   const std::string& dependency) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  v1::GetStateRequest request;
  request.set_dependency(dependency);
  Result<v1::BreakerStatus> r;
  r.status = stub->GetState(&ctx, request, &r.response);
  return r;
}

std::vector<std::string> BreakerNames(v1::Breaker::Stub* stub) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  v1::ListStatesResponse response;
  grpc::Status status =
      stub->ListStates(&ctx, v1::ListStatesRequest(), &response);
  if (!status.ok()) {
    ADD_FAILURE() << "ListStates: " << Describe(status);
    return {};
  }
  std::vector<std::string> names;
  for (const v1::BreakerStatus& b : response.breakers()) {
    names.push_back(b.dependency());
  }
  std::sort(names.begin(), names.end());
  return names;
}

Result<v1::AdminResponse> Admin(v1::Admin::Stub* stub, AdminOp op,
                                const std::string& dependency,
                                std::optional<std::string> authorization) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  if (authorization.has_value()) {
    ctx.AddMetadata("authorization", *authorization);
  }
  Result<v1::AdminResponse> r;
  switch (op) {
    case AdminOp::kForceOpen: {
      v1::ForceOpenRequest request;
      request.set_dependency(dependency);
      r.status = stub->ForceOpen(&ctx, request, &r.response);
      break;
    }
    case AdminOp::kForceClose: {
      v1::ForceCloseRequest request;
      request.set_dependency(dependency);
      r.status = stub->ForceClose(&ctx, request, &r.response);
      break;
    }
    case AdminOp::kReset: {
      v1::ResetRequest request;
      request.set_dependency(dependency);
      r.status = stub->Reset(&ctx, request, &r.response);
      break;
    }
  }
  return r;
}

std::unique_ptr<WatchCall> StartWatch(v1::Breaker::Stub* stub,
                                      const std::vector<std::string>& names,
                                      absl::Duration deadline) {
  auto call = std::make_unique<WatchCall>();
  call->ctx.set_deadline(absl::ToChronoTime(absl::Now() + deadline));
  v1::WatchRequest request;
  for (const std::string& n : names) request.add_dependencies(n);
  call->reader = stub->Watch(&call->ctx, request);
  return call;
}

grpc::Status DrainWatch(WatchCall& call, int* messages) {
  v1::StateChange change;
  int n = 0;
  while (ReadChange(*call.reader, &change)) ++n;
  if (messages != nullptr) *messages = n;
  return call.reader->Finish();
}

bool WaitUntil(const std::function<bool()>& done, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    if (done()) return true;
    absl::SleepFor(kPollInterval);
  }
  return done();
}

std::optional<double> MetricValue(const BreakerdProcess& proc,
                                  absl::string_view selector) {
  return Sample(proc.Metrics(), selector);
}

int64_t ResidentKiB(pid_t pid) {
  return breakerd::ResidentKiB(pid).value_or(-1);
}

int64_t PeakResidentKiB(pid_t pid) {
  return breakerd::PeakResidentKiB(pid).value_or(-1);
}

HeldPort::HeldPort() {
  fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd_ < 0) return;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = 0;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      listen(fd_, 1) != 0 ||
      getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    return;
  }
  port_ = ntohs(addr.sin_port);
}

HeldPort::~HeldPort() {
  if (fd_ >= 0) close(fd_);
}

StartupFailure ExpectStartupFailure(BreakerdProcess& proc,
                                    const std::vector<std::string>& flags) {
  StartupFailure failure;
  if (proc.Start(flags)) {
    ADD_FAILURE() << "breakerd served with flags that should stop it; log:\n"
                  << proc.Log();
  }
  failure.exit_code = proc.WaitExit(absl::Seconds(10));
  failure.log = proc.Log();
  return failure;
}

std::string LogLinesWith(absl::string_view log, absl::string_view substring) {
  std::string out;
  for (absl::string_view line : absl::StrSplit(log, '\n')) {
    if (absl::StrContains(line, substring)) absl::StrAppend(&out, line, "\n");
  }
  return out;
}

int SpawnLoggedAs(std::vector<std::string> args, const std::string& log_path,
                  uid_t uid, gid_t gid, pid_t* pid) {
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  // Everything the child needs is prepared here: between fork and exec only
  // async-signal-safe calls are allowed (this process runs gRPC threads).
  const int log_fd =
      open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (log_fd < 0) return errno;
  const int null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (null_fd < 0) {
    const int err = errno;
    close(log_fd);
    return err;
  }
  int report[2];  // the child writes its errno here if a step fails
  if (pipe2(report, O_CLOEXEC) != 0) {
    const int err = errno;
    close(log_fd);
    close(null_fd);
    return err;
  }
  const pid_t child = fork();
  if (child == 0) {
    sigset_t empty;
    sigemptyset(&empty);
    sigprocmask(SIG_SETMASK, &empty, nullptr);
    for (int s : {SIGHUP, SIGTERM, SIGINT, SIGPIPE}) signal(s, SIG_DFL);
    int err = 0;
    if (dup2(null_fd, 0) < 0 || dup2(log_fd, 1) < 0 || dup2(log_fd, 2) < 0 ||
        setgroups(0, nullptr) != 0 || setgid(gid) != 0 || setuid(uid) != 0) {
      err = errno;
    } else {
      execve(argv[0], argv.data(), environ);
      err = errno;
    }
    ssize_t ignored = write(report[1], &err, sizeof(err));
    (void)ignored;
    _exit(127);
  }
  const int fork_errno = errno;
  close(report[1]);
  close(log_fd);
  close(null_fd);
  if (child < 0) {
    close(report[0]);
    return fork_errno;
  }
  int child_errno = 0;
  ssize_t n;
  do {
    n = read(report[0], &child_errno, sizeof(child_errno));
  } while (n < 0 && errno == EINTR);
  close(report[0]);
  if (n == static_cast<ssize_t>(sizeof(child_errno))) {
    while (waitpid(child, nullptr, 0) < 0 && errno == EINTR) {
    }
    return child_errno != 0 ? child_errno : ECHILD;
  }
  *pid = child;  // exec succeeded: the pipe closed without a report
  return 0;
}

std::optional<int> WaitChild(pid_t pid, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    int status = 0;
    const pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) {
      if (WIFEXITED(status)) return WEXITSTATUS(status);
      if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
      return -1;
    }
    if (r < 0 && errno != EINTR) return std::nullopt;
    if (absl::Now() >= deadline) {
      kill(pid, SIGKILL);
      while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
      return std::nullopt;
    }
    absl::SleepFor(kPollInterval);
  }
}

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

}  // namespace fault
}  // namespace breakerd

// Shared helpers of the fault, limit and security end-to-end tests: thin
// wrappers over the Breaker and Admin RPCs (each bounded by a deadline), a
// bounded poll, and the process-level probes those tests need (a port held
// by someone else, a process's resident memory, a child started under
// another user).
//
// Thread-safety: every function is safe to call from any thread; a
// WatchCall and a HeldPort belong to one thread at a time.
#ifndef BREAKERD_TESTS_FAULT_FAULT_UTIL_H_
#define BREAKERD_TESTS_FAULT_FAULT_UTIL_H_

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "breakerd/v1/breaker.grpc.pb.h"
#include "grpcpp/client_context.h"
#include "grpcpp/support/status.h"
#include "grpcpp/support/sync_stream.h"
#include "gtest/gtest.h"
#include "tests/e2e/breakerd_process.h"

namespace breakerd {
namespace fault {

namespace v1 = ::breakerd::v1;

inline constexpr char kAdminToken[] = "fault-admin-token-3c9e";

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

// Every unary call here gives up after this long: a hung call fails the
// test with DEADLINE_EXCEEDED instead of hanging it.
inline constexpr absl::Duration kRpcTimeout = absl::Seconds(5);

// "code N (NAME): message", for failure output.
std::string Describe(const grpc::Status& status);

template <typename Response>
struct Result {
  grpc::Status status;
  Response response;
};

// `attempt` 0 is a first try, more a retry.
Result<v1::AcquireResponse> Acquire(v1::Breaker::Stub* stub,
                                    const std::string& dependency,
                                    uint32_t attempt = 0);
// Reports an explicit `outcome`; `latency` is sent if positive.
Result<v1::ReportResponse> Report(
    v1::Breaker::Stub* stub, const std::string& dependency, uint64_t permit,
    v1::Outcome outcome, absl::Duration latency = absl::ZeroDuration());
Result<v1::AcquireFirstResponse> AcquireFirst(
    v1::Breaker::Stub* stub, const std::vector<std::string>& dependencies);
Result<v1::BreakerStatus> GetState(v1::Breaker::Stub* stub,
                                   const std::string& dependency);

// The dependency of every breaker ListStates returns, sorted. Adds a test
// failure (and returns {}) if the call fails.
std::vector<std::string> BreakerNames(v1::Breaker::Stub* stub);

enum class AdminOp { kForceOpen, kForceClose, kReset };

// One Admin call on `dependency`. `authorization`: the metadata value to
// send ("Bearer <token>"), or nullopt to send none.
Result<v1::AdminResponse> Admin(v1::Admin::Stub* stub, AdminOp op,
                                const std::string& dependency,
                                std::optional<std::string> authorization);

// An open Watch stream. The context's deadline is a safety net only.
struct WatchCall {
  grpc::ClientContext ctx;
  std::unique_ptr<grpc::ClientReader<v1::StateChange>> reader;
};

// Starts Watch(names) on `stub`; nothing is read yet.
std::unique_ptr<WatchCall> StartWatch(
    v1::Breaker::Stub* stub, const std::vector<std::string>& names,
    absl::Duration deadline = absl::Seconds(30));

// Reads until the stream ends and returns its status; *messages (if not
// null) gets how many messages were read.
grpc::Status DrainWatch(WatchCall& call, int* messages = nullptr);

// Polls `done` every few milliseconds until it returns true (true) or
// `timeout` passes (false; `done` is asked once more at the end).
bool WaitUntil(const std::function<bool()>& done,
               absl::Duration timeout = absl::Seconds(5));

// The value of `selector` (see Sample) in a fresh scrape of `proc`, nullopt
// if absent.
std::optional<double> MetricValue(const BreakerdProcess& proc,
                                  absl::string_view selector);

// VmRSS (resident memory) and VmHWM (its peak) of `pid` in KiB, from
// /proc/<pid>/status (tests/soak/proc_stats.h); -1 if unreadable.
int64_t ResidentKiB(pid_t pid);
int64_t PeakResidentKiB(pid_t pid);

// A TCP socket bound to 127.0.0.1 on a free port and listening, held until
// destruction: "another process has this port".
class HeldPort {
 public:
  HeldPort();
  ~HeldPort();
  HeldPort(const HeldPort&) = delete;
  HeldPort& operator=(const HeldPort&) = delete;

  // The port, or -1 if no socket could be bound.
  int port() const { return port_; }

 private:
  int fd_ = -1;
  int port_ = -1;
};

// Why breakerd did not start: its exit code (nullopt if it did not exit
// within the bound, in which case it was killed) and its log.
struct StartupFailure {
  std::optional<int> exit_code;
  std::string log;
};

// Starts `proc` with `flags` (see BreakerdProcess::Start) expecting it to
// exit before serving. Adds a test failure if it serves instead.
StartupFailure ExpectStartupFailure(BreakerdProcess& proc,
                                    const std::vector<std::string>& flags);

// The log lines containing `substring`, joined with newlines.
std::string LogLinesWith(absl::string_view log, absl::string_view substring);

// Like SpawnLogged, but the child drops to `uid`/`gid` (no supplementary
// groups) before exec. Returns 0 and sets *pid on success; otherwise the
// errno of the step that failed (in the child: its exec or its setuid).
int SpawnLoggedAs(std::vector<std::string> args, const std::string& log_path,
                  uid_t uid, gid_t gid, pid_t* pid);

// Waits at most `timeout` for child `pid` to exit; returns its exit code
// (128 + signal if killed), or nullopt (then the child is killed and reaped).
std::optional<int> WaitChild(pid_t pid, absl::Duration timeout);

// Reports `n` timeouts on `dependency`; each Acquire must be allowed
// (fails the test otherwise).
void ReportTimeouts(v1::Breaker::Stub* stub, const std::string& dependency,
                    int n);

}  // namespace fault
}  // namespace breakerd

#endif  // BREAKERD_TESTS_FAULT_FAULT_UTIL_H_

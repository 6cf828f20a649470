// What the C++ client's end-to-end tests share: a fixture that runs the real
// breakerd binary on free loopback ports (tests/e2e/breakerd_process.h) and
// makes clients of it, reads breakerd's /metrics, and stands in for a dead
// sidecar (PortHolder).
//
// Thread-safety: a fixture is used from its test's thread; the clients it
// makes log from their own threads (LogLines is locked).
#ifndef BREAKERD_CLIENT_CPP_TESTS_CLIENT_FIXTURE_H_
#define BREAKERD_CLIENT_CPP_TESTS_CLIENT_FIXTURE_H_

#include <sys/types.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "breakerd/client.h"
#include "gtest/gtest.h"
#include "tests/e2e/breakerd_process.h"

namespace breakerd::client {

inline constexpr char kToken[] = "client-test-token";
inline constexpr absl::Duration kWait = absl::Seconds(5);

// The config every client's suite starts breakerd with
// (client/conformance/breakerd.yaml): three failures in a row open a breaker
// for 30 s (long enough that no test sees the cooldown end); "short/*" cools
// down in 1 s; "payments/*" opens the same way but in shadow mode (breakerd
// allows every call); "ramp/*" cools down in 1 s and, once its probe has
// closed it, recovers gently over 60 s (no retry admitted meanwhile).
inline constexpr char kConfigPath[] = BREAKERD_CLIENT_TEST_CONFIG;

// True once `pid` is stopped (SIGSTOP delivered: state T in /proc).
bool IsStopped(pid_t pid);

// How many CPUs, on average, processes other than this one and `pid` (its
// breakerd) kept busy from construction until Cpus(): the burst scenario's
// measure of a machine loaded by other programs. The machine's busy time
// in /proc/stat less the two processes' utime + stime in /proc/<pid>/stat,
// which count their threads that have exited (a burst's threads exit
// before it ends; tests/soak/proc_stats.h's ProcessCpuNanos reads only the
// live ones, and it has no /proc/stat reader). Clock ticks: over a burst of
// a few hundred ms, exact to about 0.1 CPU. Linux only.
class OtherProcessesCpu {
 public:
  explicit OtherProcessesCpu(pid_t pid);

  double Cpus() const;

 private:
  // CPU time of this process and pid_, in clock ticks.
  int64_t OwnTicks() const;

  // Constant after construction.
  const pid_t pid_;
  const int64_t busy_ticks_;
  const int64_t own_ticks_;
  const absl::Time start_;
};

// A loopback TCP port nothing listens on right now (bound to port 0 and
// released): for a client made before its breakerd starts.
int UnusedPort();

// The port of "host:port".
int PortOf(const std::string& address);

// Holds a crashed breakerd's port until destroyed, so nothing else takes it
// before the restart, and stands in for the dead sidecar: accepts each
// connection and closes it at once (to a gRPC client, a failed connection
// attempt), noting when, so a test can restart breakerd right after one of
// the client's attempts.
class PortHolder {
 public:
  // Listens on 127.0.0.1:`port`; listening() says whether it could.
  explicit PortHolder(int port);
  ~PortHolder();

  PortHolder(const PortHolder&) = delete;
  PortHolder& operator=(const PortHolder&) = delete;

  bool listening() const { return listening_; }

  // When the latest connection came (InfinitePast: none yet).
  absl::Time last_attempt() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void AcceptLoop();

  // Constant after construction.
  const int fd_;
  const bool listening_;

  std::atomic<bool> stopping_{false};
  mutable absl::Mutex mu_;
  absl::Time last_attempt_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  std::thread accept_thread_;
};

class ClientTest : public ::testing::Test {
 protected:
  void SetUp() override;
  // A test that stopped breakerd may have failed before continuing it.
  void TearDown() override;

  // Starts `proc` with kConfig and the admin token, plus `extra` flags.
  void StartBreakerd(BreakerdProcess* proc,
                     std::vector<std::string> extra = {});

  // A client of proc_ with its own channel (distinct_id) and quiet logs
  // (kept in log_lines_; see LogLines). A default decision_timeout becomes
  // a generous 2 s, for tests that need every decision from breakerd on a
  // loaded machine.
  std::unique_ptr<Client> NewClient(ClientOptions options = {},
                                    int distinct_id = 0);

  // A client of proc_ that makes its channel itself (with the client's
  // channel arguments), quiet and with the generous timeout as NewClient's.
  std::unique_ptr<Client> NewClientOwningItsChannel(ClientOptions options);

  // A client of proc_ that makes its channel itself, with `options` as
  // given (the conformance scenarios run with the client's defaults, a
  // 20 ms decision_timeout), quiet, connected.
  std::unique_ptr<Client> NewClientAsConfigured(ClientOptions options = {});

  // Client::Create for proc_'s address, logging into log_lines_, and a wait
  // for the channel to connect.
  std::unique_ptr<Client> NewConnectedClient(ClientOptions options,
                                             bool generous_timeout = true);

  // Options that log into log_lines_.
  ClientOptions QuietOptions(ClientOptions options = {});

  // How many lines the clients have logged that contain `substring` (the
  // client logs from its own threads too).
  int LogLines(absl::string_view substring) ABSL_LOCKS_EXCLUDED(log_mu_);
  // Every line the clients have logged, one per line (for failure messages).
  std::string LogText() ABSL_LOCKS_EXCLUDED(log_mu_);

  // The value of a /metrics sample, 0 if absent.
  double Metric(const std::string& selector);
  double Reports(const std::string& dep, const std::string& cls,
                 const std::string& effect);
  double Acquires(const std::string& dep, const std::string& decision);
  // The sum of every sample of `name` whose `dependency` label is `dep`
  // (whatever its other labels), 0 if none.
  double SumFor(absl::string_view name, absl::string_view dep);
  // Permits breakerd granted for `dep` (decision allowed or probe).
  double Granted(const std::string& dep);
  // Reports breakerd received for `dep`, of every class.
  double ReportsFor(const std::string& dep);

  // Forces `dep` open on `proc` (default: proc_), waiting for the
  // connection (a just restarted breakerd).
  void ForceOpen(const std::string& dep, const BreakerdProcess* proc = nullptr);

  // Opens `dep` with three counted failures through `client`.
  void Trip(Client* client, const std::string& dep);

  BreakerdProcess proc_;
  absl::Mutex log_mu_;
  std::vector<std::string> log_lines_ ABSL_GUARDED_BY(log_mu_);
};

}  // namespace breakerd::client

#endif  // BREAKERD_CLIENT_CPP_TESTS_CLIENT_FIXTURE_H_

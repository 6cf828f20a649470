// End-to-end test support: runs the real `breakerd` binary as a child process
// on free ports, and talks to it over gRPC, raw HTTP and signals.
//
// Typical use in a test:
//   BreakerdProcess proc;
//   std::string config = proc.WriteFile("config.yaml", "defaults: ...");
//   ASSERT_TRUE(proc.Start({"--config=" + config}));
//   auto stub = proc.BreakerStub();
//   ...
//
// Every wait here is bounded and polls with a short interval; nothing sleeps
// a fixed time and assumes.
//
// Thread-safety: a BreakerdProcess is used from the test's main thread; the
// channels and stubs it hands out are thread-safe as gRPC's are. The free
// functions are pure.
#ifndef BREAKERD_TESTS_E2E_BREAKERD_PROCESS_H_
#define BREAKERD_TESTS_E2E_BREAKERD_PROCESS_H_

#include <sys/types.h>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "breakerd/v1/breaker.grpc.pb.h"
#include "grpcpp/channel.h"
#include "gtest/gtest.h"

namespace breakerd {

// True in ASan and TSan builds (scripts/sanitize.sh): breakerd runs 2-15x
// slower, and its RSS measures the sanitizer's allocator (ASan's quarantine
// keeps what is freed, TSan's shadow grows with each new address touched)
// more than breakerd. Latency budgets and memory bounds allow for it.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr bool kSanitizerBuild = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
inline constexpr bool kSanitizerBuild = true;
#else
inline constexpr bool kSanitizerBuild = false;
#endif
#else
inline constexpr bool kSanitizerBuild = false;
#endif

// One sample line of the Prometheus text exposition format.
struct PromSample {
  std::string name;
  std::map<std::string, std::string> labels;
  double value = 0;
};

// Parses every sample line of `text` (comments and blank lines skipped,
// label values unescaped). Lines that do not parse are skipped.
std::vector<PromSample> ParsePrometheus(absl::string_view text);

// The value of the one sample whose name and label set equal `selector`'s,
// e.g. `breakerd_state{dependency="x"}` or `breakerd_up` (no labels). Label
// order does not matter; the label sets must be equal (not a subset).
// Returns nullopt if no such sample exists or the selector does not parse.
std::optional<double> Sample(absl::string_view text,
                             absl::string_view selector);

struct HttpResponse {
  // The status code; -1 if the request failed (no connection, no answer,
  // unparseable answer).
  int status = -1;
  std::string headers;
  // De-chunked if the answer was chunked.
  std::string body;
};

// A TCP connection to 127.0.0.1:`port` whose receives and sends give up
// after `timeout`; -1 on failure. `receive_buffer` > 0 shrinks the socket's
// receive buffer first: a client that then stops reading stalls the
// server's writes within a few kilobytes. The caller closes the socket.
int ConnectLoopback(int port, absl::Duration timeout, int receive_buffer = 0);

// GET http://127.0.0.1:<port><path> over a raw socket (HTTP/1.0,
// Connection: close), bounded by `timeout`.
HttpResponse HttpGet(int port, absl::string_view path,
                     absl::Duration timeout = absl::Seconds(5));

// Polls `done` every 5 ms until it returns true or `timeout` passes; returns
// its last answer. For conditions with no event to wait on.
bool WaitUntil(const std::function<bool()>& done,
               absl::Duration timeout = absl::Seconds(10));

// Metadata value for Admin calls: "Bearer <token>".
std::string BearerToken(absl::string_view token);

// Starts args[0] with args, stdin from /dev/null, stdout and stderr to
// `log_path` (truncated), no blocked signals, this process's environment
// plus `extra_env` ("NAME=value", later ones win). Returns posix_spawn's
// result (0 on success) and sets *pid.
int SpawnLogged(std::vector<std::string> args, const std::string& log_path,
                pid_t* pid, std::vector<std::string> extra_env = {});

class BreakerdProcess {
 public:
  // Creates a private temporary directory (removed by the destructor).
  BreakerdProcess();
  // Kills the process (SIGKILL) if it still runs, reaps it, prints its log
  // if the current test failed, and removes the temporary directory.
  ~BreakerdProcess();

  BreakerdProcess(const BreakerdProcess&) = delete;
  BreakerdProcess& operator=(const BreakerdProcess&) = delete;

  // The per-test temporary directory (short, so unix socket paths fit).
  const std::string& dir() const { return dir_; }

  // Writes `content` to dir()/name atomically (temporary file + rename, as
  // a ConfigMap update would look) and returns the full path.
  std::string WriteFile(absl::string_view name, absl::string_view content);

  // Starts `breakerd --listen=127.0.0.1:0[,unix:<dir>/breakerd.sock]
  // --metrics-listen=127.0.0.1:0 <extra_flags...>` with stdout and stderr
  // going to dir()/breakerd.log, and waits (at most `timeout`) for the
  // "serving" log line. Fails, with the log, if the line does not come, the
  // process exits first, or the line cannot be parsed.
  // REQUIRES: not started yet.
  ::testing::AssertionResult Start(
      const std::vector<std::string>& extra_flags = {},
      bool with_unix_socket = false,
      absl::Duration timeout = absl::Seconds(10));

  // Variables ("NAME=value") added to breakerd's environment at Start,
  // e.g. libfaketime's LD_PRELOAD and FAKETIME.
  void set_extra_environment(std::vector<std::string> env) {
    extra_env_ = std::move(env);
  }

  pid_t pid() const { return pid_; }
  bool running() const { return pid_ > 0 && !exit_code_.has_value(); }

  // The actual addresses from the serving line, in order, e.g.
  // {"127.0.0.1:43125", "unix:/tmp/x/breakerd.sock"}.
  const std::vector<std::string>& grpc_addresses() const {
    return grpc_addresses_;
  }
  // The first TCP address ("127.0.0.1:43125").
  std::string tcp_address() const;
  // The unix address ("unix:/path"), empty if none.
  std::string unix_address() const;
  // The path the unix socket was asked for (set even before Start).
  std::string unix_socket_path() const { return dir_ + "/breakerd.sock"; }
  int metrics_port() const { return metrics_port_; }

  // An insecure channel to the first TCP address (or to `address`). Each
  // call makes a new channel; channels with identical arguments share one
  // connection unless `distinct_id` >= 0 sets a distinguishing argument.
  std::shared_ptr<grpc::Channel> Channel(int distinct_id = -1) const;
  std::shared_ptr<grpc::Channel> ChannelTo(const std::string& address,
                                           int distinct_id = -1) const;
  std::unique_ptr<breakerd::v1::Breaker::Stub> BreakerStub() const;
  std::unique_ptr<breakerd::v1::Admin::Stub> AdminStub() const;

  // GET on the metrics port.
  HttpResponse Get(absl::string_view path) const;
  // The /metrics body; empty (and a test failure) if the scrape fails.
  std::string Metrics() const;

  // Sends `signo` to the process. Returns false if it cannot be delivered.
  bool Signal(int signo);

  // True if the process has exited (reaps it without blocking).
  bool Exited() { return ReapNoHang(); }

  // Waits at most `timeout` for the process to exit. Returns its exit code
  // (128 + signal number if a signal killed it), or nullopt on timeout.
  std::optional<int> WaitExit(absl::Duration timeout);

  // Everything the process has written to stdout/stderr so far.
  std::string Log() const;
  // Occurrences of `substring` in Log().
  int CountInLog(absl::string_view substring) const;
  // Waits at most `timeout` until `substring` occurs at least `min_count`
  // times in the log. Returns false on timeout or if the process exited
  // before.
  bool WaitForLog(absl::string_view substring, absl::Duration timeout,
                  int min_count = 1);

 private:
  // Reaps the child without blocking; true if it has exited.
  bool ReapNoHang();

  std::string dir_;
  std::string log_path_;
  std::vector<std::string> extra_env_;
  pid_t pid_ = -1;
  std::optional<int> exit_code_;
  std::vector<std::string> grpc_addresses_;
  int metrics_port_ = -1;
};

}  // namespace breakerd

#endif  // BREAKERD_TESTS_E2E_BREAKERD_PROCESS_H_

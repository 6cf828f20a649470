// The abusers of abuse_bench: child processes that loop one full-registry
// read against breakerd as fast as it answers, ignoring refusals, as an
// abusive local caller would. This file holds both sides of one abuser and
// the pipe protocol between them:
//   - RunAbuser, the child's main loop (abuse_bench --abuse=MODE);
//   - AbuserProcess, the parent's handle on one child.
// Protocol: the child prints "ready" on stdout once connected, loops until
// its stdin reaches EOF (the operation in flight is then cancelled and not
// counted), prints one "result ..." line (AbuseCounts::ResultLine) and
// exits 0.
#ifndef BREAKERD_BENCH_ABUSE_ABUSER_H_
#define BREAKERD_BENCH_ABUSE_ABUSER_H_

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "grpcpp/grpcpp.h"

namespace breakerd {
namespace bench {

// What an abuser loops.
enum class AbuseMode {
  kWatchFirst,     // Watch(all), cancelled at the first message
  kWatchSnapshot,  // Watch(all), the whole initial snapshot read, cancelled
  kListStates,     // ListStates
};

// "watch_first", "watch_snapshot", "list_states".
const char* AbuseModeName(AbuseMode mode);
std::optional<AbuseMode> ParseAbuseMode(absl::string_view name);

// One abuser's operations, or several abusers' summed.
struct AbuseCounts {
  uint64_t ok = 0;        // completed (for Watch: the wanted messages read)
  uint64_t refused = 0;   // RESOURCE_EXHAUSTED
  uint64_t other = 0;     // any other failure
  uint64_t messages = 0;  // Watch messages read
  double seconds = 0;     // from "ready" to the stop (summed: the longest)
  std::string first_error;

  // Counts an operation that ended with `s`.
  void Classify(const grpc::Status& s);
  // Adds `other`'s counts; keeps the first error seen.
  void Add(const AbuseCounts& other);

  // The protocol's result line, without the newline, and its parser (false
  // if `line` is not one).
  std::string ResultLine() const;
  static bool ParseResultLine(absl::string_view line, AbuseCounts* out);
};

struct AbuserOptions {
  AbuseMode mode = AbuseMode::kWatchFirst;
  std::string target;  // breakerd's gRPC address
  // kWatchSnapshot: messages in a complete initial snapshot (>= 1).
  int snapshot_size = 0;
  // Nice value the child gives itself before starting any thread.
  int nice = 0;
};

// The child's side: connects, prints "ready", loops until stdin closes,
// prints the result line. Returns the exit code (2 if it cannot connect or
// the options are invalid). REQUIRES: called before any other thread exists.
int RunAbuser(const AbuserOptions& options);

// The parent's handle on one abuser child.
//
// Thread-safety: not thread-safe; one thread drives one AbuserProcess.
class AbuserProcess {
 public:
  AbuserProcess() = default;
  AbuserProcess(const AbuserProcess&) = delete;
  AbuserProcess& operator=(const AbuserProcess&) = delete;
  // Kills the child (SIGKILL) if it is still running.
  ~AbuserProcess();

  // Starts `exe` with `args` (which must make it call RunAbuser) and waits
  // (at most 15 s) for its "ready" line. False, with `error`, if it did not
  // start. REQUIRES: called once.
  bool Start(const std::string& exe, const std::vector<std::string>& args,
             std::string* error);

  // Asks the child to stop (closes its stdin); does not wait.
  void AskToStop();

  // Asks the child to stop, then waits (at most 15 s) for its result line
  // and its exit. False, with `error`, if it did not report or exit cleanly
  // (then it is killed). REQUIRES: Start succeeded.
  bool Collect(AbuseCounts* counts, std::string* error);

 private:
  void CloseStdout();
  void Kill();

  pid_t pid_ = 0;
  int stdin_ = -1;   // the write end of the child's stdin
  int stdout_ = -1;  // the read end of the child's stdout
};

}  // namespace bench
}  // namespace breakerd

#endif  // BREAKERD_BENCH_ABUSE_ABUSER_H_

// How a benchmark client's main() starts (bench/load, bench/abuse).
//
// Thread-safety: call once, first thing in main(), before any thread.
#ifndef BREAKERD_BENCH_COMMON_INIT_H_
#define BREAKERD_BENCH_COMMON_INIT_H_

#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace breakerd {
namespace bench {

// Sets the usage message to `usage`, parses the command line, and switches
// off absl::Mutex deadlock detection: Debian's Abseil leaves it on, and
// gRPC locks absl::Mutex on every call, so the client would take more of
// the CPU it shares with the servers (breakerd and echo_server switch it
// off too).
inline void InitBenchmark(int argc, char** argv, absl::string_view usage) {
  absl::SetProgramUsageMessage(usage);
  absl::ParseCommandLine(argc, argv);
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
}

}  // namespace bench
}  // namespace breakerd

#endif  // BREAKERD_BENCH_COMMON_INIT_H_

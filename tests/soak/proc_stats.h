// What a soak test watches in the process under test, read from /proc:
// resident memory and open file descriptors. Linux only.
//
// Thread-safety: pure functions of /proc; callable from any thread.
#ifndef BREAKERD_TESTS_SOAK_PROC_STATS_H_
#define BREAKERD_TESTS_SOAK_PROC_STATS_H_

#include <sys/types.h>

#include <cstdint>
#include <optional>

namespace breakerd {

// VmRSS of `pid` in KiB (from /proc/<pid>/status); nullopt if the process
// is gone or the line cannot be read.
std::optional<int64_t> ResidentKiB(pid_t pid);

// Number of entries in /proc/<pid>/fd; nullopt if the directory cannot be
// read (process gone, or not ours).
std::optional<int> OpenFdCount(pid_t pid);

}  // namespace breakerd

#endif  // BREAKERD_TESTS_SOAK_PROC_STATS_H_

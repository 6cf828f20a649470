// What a test or a benchmark watches in a process on this machine, read
// from /proc: memory from /proc/<pid>/status, CPU time, open file
// descriptors, and the machine's load average. Linux only. The one home of
// these readers: the soak, fault and metrics tests and bench/load and
// bench/abuse all use them.
//
// Thread-safety: pure functions of /proc; callable from any thread.
#ifndef BREAKERD_TESTS_SOAK_PROC_STATS_H_
#define BREAKERD_TESTS_SOAK_PROC_STATS_H_

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"

namespace breakerd {

// The value of the "`field`: N kB" line of /proc/<pid>/status (`field`
// without the colon, e.g. "VmRSS"), in KiB; nullopt if the process is gone
// or the line is missing or cannot be read.
std::optional<int64_t> StatusKiB(pid_t pid, absl::string_view field);

// VmRSS (resident memory) of `pid` in KiB; as StatusKiB.
std::optional<int64_t> ResidentKiB(pid_t pid);

// VmHWM (peak resident memory) of `pid` in KiB; as StatusKiB.
std::optional<int64_t> PeakResidentKiB(pid_t pid);

// Number of entries in /proc/<pid>/fd; nullopt if the directory cannot be
// read (process gone, or not ours).
std::optional<int> OpenFdCount(pid_t pid);

// CPU time used so far by every thread of `pid`, in nanoseconds, from
// /proc/<pid>/task/*/schedstat (exact, unlike the 10 ms ticks of
// /proc/<pid>/stat). 0 if pid <= 0 or unreadable. Threads that have exited
// are not counted (gRPC's server threads live as long as the server).
uint64_t ProcessCpuNanos(pid_t pid);

// The first three fields of /proc/loadavg ("0.52 0.58 0.59").
std::string ReadLoadAverage();

}  // namespace breakerd

#endif  // BREAKERD_TESTS_SOAK_PROC_STATS_H_

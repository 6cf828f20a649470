// The report of one breakerd_load run: the human table and the JSON file,
// both with each breakerd call's ratios to the floors (echo, the primary
// floor, and health). bench/load/README.md explains how to read them.
//
// Ratios of a breakerd call to a floor: latency is call / (n x floor), QPS
// is call x n / floor, where n is the RPCs in one call (2 for the pair). So
// 1.0 is "as fast as the floor" both ways; above 1.0 is worse for latency,
// below 1.0 is worse for QPS. The target (DESIGN.md: p50 and QPS within
// 1.1x of the floor, p99 within 1.5x) is informational only.
//
// Thread-safety: free functions without shared state.
#ifndef BREAKERD_BENCH_LOAD_LOAD_REPORT_H_
#define BREAKERD_BENCH_LOAD_LOAD_REPORT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "bench/load/load_results.h"

namespace breakerd {
namespace bench {

// How a run was made and how it went, beside its Rows.
struct RunInfo {
  std::string transport;      // "tcp" or "unix"
  std::string target, floor;  // the addresses, as given
  int inflight = 0, channels = 0, dependencies = 0, rounds = 0;
  double warmup = 0, duration = 0;      // seconds per measurement
  double wall_seconds = 0;              // of all measurements
  absl::Time date;                      // when the measurements started
  std::string load_before, load_after;  // /proc/loadavg
  uint64_t failures = 0;                // failed calls, over every row
  std::string first_error;              // the first failed call's, or ""
};

// The table printed on stdout: the settings, a line per measured call, the
// ratios to each floor, and the failures if any.
std::string FormatTable(const RunInfo& run, const std::vector<Row>& rows);

// The JSON document written by --json: this machine, the settings, a row
// per measured call (with per-round figures), and the ratios to each floor.
std::string FormatJson(const RunInfo& run, const std::vector<Row>& rows);

}  // namespace bench
}  // namespace breakerd

#endif  // BREAKERD_BENCH_LOAD_LOAD_REPORT_H_

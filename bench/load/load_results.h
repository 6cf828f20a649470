// What breakerd_load measures and what one run produced: the call kinds,
// and per kind the latency histogram merged over the rounds, each round's
// statistics, the failed calls and the serving process's CPU time. The
// driver (load_driver.h) fills these; the report (load_report.h) reads them.
//
// Thread-safety: plain values, not thread-safe; the driver fills a Row only
// after its call slots have stopped.
#ifndef BREAKERD_BENCH_LOAD_LOAD_RESULTS_H_
#define BREAKERD_BENCH_LOAD_LOAD_RESULTS_H_

#include <cstdint>
#include <vector>

#include "bench/load/latency_histogram.h"

namespace breakerd {
namespace bench {

enum class CallKind { kEcho, kHealth, kAcquire, kReport, kPair };
inline constexpr CallKind kAllKinds[] = {CallKind::kEcho, CallKind::kHealth,
                                         CallKind::kAcquire, CallKind::kReport,
                                         CallKind::kPair};

// The name of `kind` in --calls, the table and the JSON: "echo", "health",
// "acquire", "report", "pair".
inline const char* KindName(CallKind kind) {
  switch (kind) {
    case CallKind::kEcho:
      return "echo";
    case CallKind::kHealth:
      return "health";
    case CallKind::kAcquire:
      return "acquire";
    case CallKind::kReport:
      return "report";
    case CallKind::kPair:
      return "pair";
  }
  return "?";
}

struct Stats {
  uint64_t calls = 0;
  double seconds = 0;
  double p50_us = 0, p90_us = 0, p99_us = 0;
  double qps() const { return seconds > 0 ? calls / seconds : 0; }
};

// The statistics of the calls in `h`, timed over `seconds`.
inline Stats StatsOf(const LatencyHistogram& h, double seconds) {
  Stats s;
  s.calls = h.count();
  s.seconds = seconds;
  s.p50_us = h.Quantile(0.50) / 1000.0;
  s.p90_us = h.Quantile(0.90) / 1000.0;
  s.p99_us = h.Quantile(0.99) / 1000.0;
  return s;
}

// Every measurement of one call kind, merged over the rounds.
struct Row {
  explicit Row(CallKind k) : kind(k) {}
  CallKind kind;
  LatencyHistogram merged;
  double seconds = 0;
  std::vector<Stats> rounds;
  uint64_t failures = 0;
  // The serving process's CPU time over the measurements (warmup and tail
  // included) and the calls (pairs) completed in that time; 0 without a pid.
  uint64_t server_cpu_ns = 0;
  uint64_t completed = 0;
  Stats total() const { return StatsOf(merged, seconds); }
  double server_cpu_us_per_call() const {
    return completed > 0 ? server_cpu_ns / 1000.0 / completed : 0;
  }
};

}  // namespace bench
}  // namespace breakerd

#endif  // BREAKERD_BENCH_LOAD_LOAD_RESULTS_H_

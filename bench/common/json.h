// What the benchmarks' hand-written JSON reports (bench/load, bench/abuse)
// share: strings escaped as breakerd's own log lines are
// (server/log/json_log.h), the date, and the machine the run was on.
//
// Thread-safety: free functions without shared state.
#ifndef BREAKERD_BENCH_COMMON_JSON_H_
#define BREAKERD_BENCH_COMMON_JSON_H_

#include <initializer_list>
#include <string>
#include <utility>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace breakerd {
namespace bench {

// `s` as a JSON string literal, quotes included.
std::string JsonString(absl::string_view s);

// `t` as a JSON string, UTC to the second: "2024-05-01T12:00:00Z".
std::string JsonDate(absl::Time t);

// A JSON object describing this machine: the `first` members ({key, JSON
// value} pairs, in order), then "cores" and "kernel", then
// "loadavg_before" and "loadavg_after" (ReadLoadAverage's text at the
// start and the end of the run).
std::string JsonMachine(
    std::initializer_list<std::pair<absl::string_view, std::string>> first,
    absl::string_view loadavg_before, absl::string_view loadavg_after);

}  // namespace bench
}  // namespace breakerd

#endif  // BREAKERD_BENCH_COMMON_JSON_H_

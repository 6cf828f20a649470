// The Prometheus text exposition format (version 0.0.4) of breakerd's
// metrics, written straight into one string: what /metrics serves.
//
// prometheus-cpp's path (Collect() into MetricFamily objects, then its
// TextSerializer over an ostream) costs over ten times as much for the same
// samples (bench/scrape_bench). The output carries the same families, HELP
// and TYPE lines, label names and values (histogram "le" values included)
// and sample values as prometheus-cpp's rendering of
// RegistryCollector::Collect(); only the spelling of values may differ
// (shortest round-trip form here, where prometheus-cpp writes 16
// significant digits; "NaN" for its "Nan") and histogram lines come in the
// conventional order (buckets, _sum, _count).
//
// Thread-safety: every function is thread-safe; AppendTextExposition takes
// the Registry's shard locks one at a time (see EmitSamples).
#ifndef BREAKERD_SERVER_METRICS_TEXT_FORMAT_H_
#define BREAKERD_SERVER_METRICS_TEXT_FORMAT_H_

#include <string>

#include "absl/strings/string_view.h"
#include "server/engine/registry.h"
#include "server/metrics/families.h"

namespace breakerd {

// The Content-Type of AppendTextExposition's output.
inline constexpr absl::string_view kTextFormatContentType =
    "text/plain; version=0.0.4; charset=utf-8";

// Appends the exposition of one scrape of `registry` and `stats` to `out`:
// every family of families.h in FamilyId order, each as "# HELP", "# TYPE"
// and its samples (a family without samples keeps its HELP and TYPE).
void AppendTextExposition(const Registry& registry, const ProcessStats& stats,
                          std::string* out);

// Building blocks, exposed for tests.

// A label value between its double quotes: backslash, double quote and
// newline escaped as \\, \" and \n; every other byte as is.
void AppendEscapedLabelValue(absl::string_view value, std::string* out);
// A HELP text: backslash and newline escaped as \\ and \n.
void AppendEscapedHelp(absl::string_view help, std::string* out);
// A sample value: a whole number below 1e15 as an integer ("42",
// "1000000"), any other finite value as the shortest text that parses back
// to exactly it ("0.1", "0.8333333333333334", "1e+21"), or +Inf, -Inf, NaN.
void AppendSampleValue(double value, std::string* out);

}  // namespace breakerd

#endif  // BREAKERD_SERVER_METRICS_TEXT_FORMAT_H_

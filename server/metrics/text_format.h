// The Prometheus text exposition format (version 0.0.4) of breakerd's
// metrics, written straight into one string: what /metrics serves.
//
// prometheus-cpp's path (Collect() into MetricFamily objects, then its
// TextSerializer over an ostream) costs hundreds of milliseconds for 10k
// breakers; this writer renders the same samples (families.h decides them
// for both) in one pass over the Registry at a small fraction of that. The
// output carries the same families, HELP and TYPE lines, label names and
// values, and sample values as RegistryCollector::Collect() serialized by
// prometheus-cpp; only number spelling may differ (shortest round-trip form
// here, e.g. "1e+06", "NaN") and histogram lines come in the conventional
// order (buckets, _sum, _count).
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
// A sample value: the shortest text that parses back to exactly `value`
// ("0.1", "42", "1e+21"), or +Inf, -Inf, NaN.
void AppendSampleValue(double value, std::string* out);

}  // namespace breakerd

#endif  // BREAKERD_SERVER_METRICS_TEXT_FORMAT_H_

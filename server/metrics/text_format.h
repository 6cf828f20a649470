// The Prometheus text exposition format (version 0.0.4) of breakerd's
// metrics, written straight from the Registry: what /metrics serves.
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
// /metrics streams the text (WriteTextExposition): a scrape holds one piece
// of about kExpositionChunkBytes at a time, never the whole text (~18 MB at
// 10,000 breakers with histograms), so what a scrape costs in memory does
// not grow with the registry.
//
// Thread-safety: every function is thread-safe; both take the Registry's
// shard locks one at a time (see WriteTextExposition).
#ifndef BREAKERD_SERVER_METRICS_TEXT_FORMAT_H_
#define BREAKERD_SERVER_METRICS_TEXT_FORMAT_H_

#include <string>

#include "absl/functional/function_ref.h"
#include "absl/strings/string_view.h"
#include "server/engine/registry.h"
#include "server/metrics/dependency_label.h"
#include "server/metrics/families.h"

namespace breakerd {

// The Content-Type of the exposition.
inline constexpr absl::string_view kTextFormatContentType =
    "text/plain; version=0.0.4; charset=utf-8";

// The size of the pieces /metrics writes the exposition in.
inline constexpr size_t kExpositionChunkBytes = 64 << 10;

// Hands the exposition of one scrape of `registry` and `stats` to `write`
// in consecutive pieces, as it is rendered: every exported family of
// families.h in FamilyId order, each as "# HELP", "# TYPE" and its samples
// (a family without samples keeps its HELP and TYPE), with the dependency
// label as `label` says. Each piece ends at a line end and holds at least
// `chunk_bytes` (the last one may hold less), at most `chunk_bytes` plus
// the lines one Registry shard adds to one family. It is built in
// `*buffer`, whose capacity is kept (reuse it between scrapes so that its
// memory stays put).
//
// kName and kHash read the Registry once per per-breaker family, one shard
// at a time, writing that shard's lines with its lock held (quick; `write`
// never runs with a lock held); kOmit reads it once
// (Registry::SumCounters). Returns true once every piece was written, false
// as soon as `write` returns false (the rest is not rendered).
bool WriteTextExposition(const Registry& registry, const ProcessStats& stats,
                         DependencyLabel label, size_t chunk_bytes,
                         std::string* buffer,
                         absl::FunctionRef<bool(absl::string_view)> write);

// The same text appended to `out` whole: for tests and benchmarks.
void AppendTextExposition(const Registry& registry, const ProcessStats& stats,
                          std::string* out,
                          DependencyLabel label = DependencyLabel::kName);

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

#include "bench/load/load_report.h"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "bench/common/json.h"

namespace breakerd {
namespace bench {
namespace {

std::string ReadCpuModel() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (absl::StartsWith(line, "model name")) {
      const size_t colon = line.find(':');
      if (colon != std::string::npos) {
        return std::string(absl::StripAsciiWhitespace(line.substr(colon + 1)));
      }
    }
  }
  return "unknown";
}

// A number in the JSON: two decimals.
std::string Num(double v) { return absl::StrFormat("%.2f", v); }

// Ratios of a breakerd call to a floor (load_report.h): its latency against
// `timed` floor calls, its QPS x `rpcs` against the floor's QPS.
struct Ratio {
  double p50 = 0, p99 = 0, qps = 0;
};

Ratio RatioOf(const Stats& call, const Stats& floor, double timed,
              double rpcs) {
  Ratio r;
  if (floor.p50_us > 0) r.p50 = call.p50_us / (timed * floor.p50_us);
  if (floor.p99_us > 0) r.p99 = call.p99_us / (timed * floor.p99_us);
  if (floor.qps() > 0) r.qps = call.qps() * rpcs / floor.qps();
  return r;
}

// The DESIGN.md target of load_report.h's overview.
bool WithinTarget(const Ratio& r) {
  return r.p50 <= 1.1 && r.qps >= 1 / 1.1 && r.p99 <= 1.5;
}

// min, median, max of `v` (sorted in place); zeros when empty.
std::array<double, 3> Spread(std::vector<double> v) {
  if (v.empty()) return {0, 0, 0};
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  const double median = n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2.0;
  return {v.front(), median, v.back()};
}

// A breakerd call compared with the floors.
struct Compared {
  const char* name;
  CallKind kind;
  double timed;  // RPCs in the timed region of one call
  double rpcs;   // RPCs the server serves per call
};
// A timed Report needs a fresh permit (single-use permits): each is preceded
// by an untimed Acquire, which the server serves too.
constexpr Compared kCompared[] = {{"acquire", CallKind::kAcquire, 1, 1},
                                  {"report", CallKind::kReport, 1, 2},
                                  {"pair", CallKind::kPair, 2, 2}};
constexpr CallKind kFloors[] = {CallKind::kEcho, CallKind::kHealth};

const Row& RowOf(const std::vector<Row>& rows, CallKind kind) {
  for (const Row& r : rows) {
    if (r.kind == kind) return r;
  }
  return rows.front();
}

// Per-round ratios of `c` to `floor`, round k against round k (the floor
// and the call ran next to each other in time).
std::vector<Ratio> RoundRatios(const std::vector<Row>& rows, const Compared& c,
                               CallKind floor) {
  const Row& call = RowOf(rows, c.kind);
  const Row& base = RowOf(rows, floor);
  std::vector<Ratio> out;
  for (size_t k = 0; k < call.rounds.size() && k < base.rounds.size(); ++k) {
    out.push_back(RatioOf(call.rounds[k], base.rounds[k], c.timed, c.rpcs));
  }
  return out;
}

}  // namespace

std::string FormatTable(const RunInfo& run, const std::vector<Row>& rows) {
  std::string t;
  absl::StrAppendFormat(
      &t,
      "breakerd_load: transport %s, inflight %d, channels %d, dependencies "
      "%d, %d x (%.2fs warmup + %.2fs) per call, %.1fs, load average %s -> "
      "%s\n",
      run.transport.c_str(), run.inflight, run.channels, run.dependencies,
      run.rounds, run.warmup, run.duration, run.wall_seconds,
      run.load_before.c_str(), run.load_after.c_str());
  absl::StrAppendFormat(&t, "%-8s %9s %9s %9s %9s %9s %7s %14s\n", "call",
                        "qps", "p50_us", "p90_us", "p99_us", "calls", "failed",
                        "srv_cpu_us/call");
  for (const Row& r : rows) {
    if (r.rounds.empty()) continue;
    const Stats s = r.total();
    absl::StrAppendFormat(&t,
                          "%-8s %9.0f %9.1f %9.1f %9.1f %9llu %7llu %14.1f\n",
                          KindName(r.kind), s.qps(), s.p50_us, s.p90_us,
                          s.p99_us, static_cast<unsigned long long>(s.calls),
                          static_cast<unsigned long long>(r.failures),
                          r.server_cpu_us_per_call());
  }
  absl::StrAppendFormat(&t, "%-18s %6s %6s %6s  %-20s  %s\n",
                        "ratio (1 = floor)", "p50", "p99", "qps",
                        "p50 per round", "target: p50<=1.1 p99<=1.5 qps>=0.91");
  for (CallKind floor : kFloors) {
    const Stats base = RowOf(rows, floor).total();
    for (const Compared& c : kCompared) {
      if (RowOf(rows, c.kind).rounds.empty() || base.calls == 0) continue;
      const Ratio r =
          RatioOf(RowOf(rows, c.kind).total(), base, c.timed, c.rpcs);
      std::vector<double> p50s;
      for (const Ratio& k : RoundRatios(rows, c, floor)) p50s.push_back(k.p50);
      const std::array<double, 3> spread = Spread(p50s);
      absl::StrAppendFormat(
          &t, "%-18s %6.3f %6.3f %6.3f  %-20s  %s\n",
          absl::StrCat(c.name, c.timed > 1 ? "/2x" : "/", KindName(floor))
              .c_str(),
          r.p50, r.p99, r.qps,
          absl::StrFormat("%.2f..%.2f..%.2f", spread[0], spread[1], spread[2])
              .c_str(),
          WithinTarget(r) ? "within" : "OUTSIDE");
    }
  }
  if (run.failures > 0) {
    absl::StrAppendFormat(&t, "FAILED calls: %llu; first error: %s\n",
                          static_cast<unsigned long long>(run.failures),
                          run.first_error.c_str());
  }
  return t;
}

std::string FormatJson(const RunInfo& run, const std::vector<Row>& rows) {
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  std::string j = "{\n";
  absl::StrAppend(&j, "  \"machine\": ",
                  JsonMachine({{"host", JsonString(host)},
                               {"cpu", JsonString(ReadCpuModel())}},
                              run.load_before, run.load_after),
                  ",\n");
  absl::StrAppend(&j, "  \"date\": ", JsonDate(run.date), ",\n");
  absl::StrAppend(&j, "  \"transport\": ", JsonString(run.transport), ",\n");
  absl::StrAppend(&j, "  \"target\": ", JsonString(run.target), ",\n");
  absl::StrAppend(&j, "  \"floor\": ", JsonString(run.floor), ",\n");
  absl::StrAppend(&j, "  \"inflight\": ", run.inflight, ",\n");
  absl::StrAppend(&j, "  \"channels\": ", run.channels, ",\n");
  absl::StrAppend(&j, "  \"dependencies\": ", run.dependencies, ",\n");
  absl::StrAppend(&j, "  \"rounds\": ", run.rounds, ",\n");
  absl::StrAppend(&j, "  \"warmup_s\": ", Num(run.warmup), ",\n");
  absl::StrAppend(&j, "  \"duration_s\": ", Num(run.duration), ",\n");
  absl::StrAppend(&j, "  \"wall_s\": ", Num(run.wall_seconds), ",\n");
  absl::StrAppend(&j,
                  "  \"report_permits\": \"each from an untimed Acquire just "
                  "before its Report (permits are single-use)\",\n");
  absl::StrAppend(&j, "  \"failures\": ", run.failures, ",\n");
  absl::StrAppend(&j, "  \"first_error\": ", JsonString(run.first_error),
                  ",\n");
  absl::StrAppend(&j, "  \"rows\": [");
  bool first_row = true;
  for (const Row& r : rows) {
    if (r.rounds.empty()) continue;
    const Stats s = r.total();
    absl::StrAppend(
        &j, first_row ? "\n" : ",\n",
        "    {\"call\": ", JsonString(KindName(r.kind)),
        ", \"qps\": ", Num(s.qps()), ", \"p50_us\": ", Num(s.p50_us),
        ", \"p90_us\": ", Num(s.p90_us), ", \"p99_us\": ", Num(s.p99_us),
        ", \"calls\": ", s.calls, ", \"failures\": ", r.failures,
        ", \"server_cpu_us_per_call\": ", Num(r.server_cpu_us_per_call()),
        ", \"per_round\": [");
    for (size_t k = 0; k < r.rounds.size(); ++k) {
      const Stats& rs = r.rounds[k];
      absl::StrAppend(&j, k > 0 ? ", " : "", "{\"qps\": ", Num(rs.qps()),
                      ", \"p50_us\": ", Num(rs.p50_us),
                      ", \"p99_us\": ", Num(rs.p99_us), "}");
    }
    absl::StrAppend(&j, "]}");
    first_row = false;
  }
  absl::StrAppend(&j, "\n  ],\n");
  absl::StrAppend(
      &j,
      "  \"ratios\": {\n"
      "    \"definition\": \"latency: call / (t x floor), t = RPCs timed (2 "
      "for the pair); qps: call x n / floor, n = RPCs served per call (2 for "
      "the pair, and for report: its untimed Acquire); 1.0 = as fast as the "
      "floor. "
      "p50/p99/qps from all rounds merged; *_rounds: [min, median, max] of "
      "the per-round ratios\",\n"
      "    \"primary_floor\": \"echo\"");
  for (CallKind floor : kFloors) {
    const Stats base = RowOf(rows, floor).total();
    if (base.calls == 0) continue;
    absl::StrAppend(&j, ",\n    \"vs_", KindName(floor), "\": {");
    bool first = true;
    for (const Compared& c : kCompared) {
      if (RowOf(rows, c.kind).rounds.empty()) continue;
      const Ratio r =
          RatioOf(RowOf(rows, c.kind).total(), base, c.timed, c.rpcs);
      std::vector<double> p50s, qpss;
      for (const Ratio& k : RoundRatios(rows, c, floor)) {
        p50s.push_back(k.p50);
        qpss.push_back(k.qps);
      }
      const std::array<double, 3> p50_spread = Spread(p50s);
      const std::array<double, 3> qps_spread = Spread(qpss);
      absl::StrAppend(
          &j, first ? "\n" : ",\n", "      \"", c.name,
          "\": {\"p50\": ", absl::StrFormat("%.3f", r.p50),
          ", \"p99\": ", absl::StrFormat("%.3f", r.p99),
          ", \"qps\": ", absl::StrFormat("%.3f", r.qps), ", \"p50_rounds\": ",
          absl::StrFormat("[%.3f, %.3f, %.3f]", p50_spread[0], p50_spread[1],
                          p50_spread[2]),
          ", \"qps_rounds\": ",
          absl::StrFormat("[%.3f, %.3f, %.3f]", qps_spread[0], qps_spread[1],
                          qps_spread[2]),
          ", \"within_target\": ", WithinTarget(r) ? "true" : "false", "}");
      first = false;
    }
    absl::StrAppend(&j, "\n    }");
  }
  absl::StrAppend(&j, "\n  }\n}\n");
  return j;
}

}  // namespace bench
}  // namespace breakerd

#include "tools/breakerctl/simulate.h"

#include <algorithm>
#include <array>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "server/config/config.h"
#include "server/engine/clock.h"
#include "server/engine/outcome.h"
#include "server/engine/registry.h"
#include "server/engine/types.h"
#include "yaml-cpp/yaml.h"

namespace breakerd::ctl {
namespace {

// One line of the trace: one call.
struct TraceRecord {
  // When the call ended: the record's "t" (breakerd's --trace-file writes
  // it when the Report arrives), from the trace's origin.
  absl::Duration end;
  // Set when the trace gave an RFC 3339 time.
  std::optional<absl::Time> at;
  std::string dependency;
  // Unset: the call never reported (no outcome, http_status or grpc_code).
  std::optional<RawOutcome> outcome;
  absl::Duration latency = absl::ZeroDuration();
  size_t line = 0;

  // When the call began: its Acquire.
  absl::Duration start() const { return end - latency; }
};

struct Trace {
  // Sorted by start (ties in file order).
  std::vector<TraceRecord> records;
  // For RFC 3339 traces: the time of offset zero, the earliest start.
  std::optional<absl::Time> origin;
  // The latest "t": where the simulation ends.
  absl::Duration horizon;
  // Records without an outcome, and the line of the first.
  size_t unreported = 0;
  size_t first_unreported_line = 0;
};

// A step of the replay: a record's Acquire or its Report.
struct Step {
  absl::Duration at;
  // Index into Trace::records: at the same instant, calls go in the order
  // they began, and a call's Acquire comes before its own Report.
  size_t record;
  bool report;
};

// A recovery ramp (recovery.ramp) as the simulation saw it. The admitted
// share rises with time, so the first attempts are counted by quarter of
// the ramp.
struct RampWatch {
  absl::Duration start;
  absl::Duration length;
  std::array<uint64_t, 4> attempts{};
  std::array<uint64_t, 4> admitted{};

  // The quarter of the ramp `at` falls in (0..3).
  size_t Quarter(absl::Duration at) const {
    const double f = absl::FDivDuration(at - start, length);
    return static_cast<size_t>(std::clamp(f * 4, 0.0, 3.0));
  }
};

// What the simulation saw for one dependency.
struct DependencyReport {
  uint64_t calls = 0;
  uint64_t allowed = 0;
  uint64_t refused = 0;
  uint64_t probes = 0;
  // Allowed calls whose record has no outcome: never reported.
  uint64_t never_reported = 0;
  // Reports for an earlier generation: the breaker had moved on while the
  // call was out.
  uint64_t late_reports = 0;
  std::map<std::string, uint64_t> refused_by_reason;
  // Lines of the timeline, in order: (offset, text).
  std::vector<std::pair<absl::Duration, std::string>> timeline;
  // The ramp running now, if any.
  std::optional<RampWatch> ramp;
  // Set by the Recorder when the breaker closes; the replay then looks for
  // a ramp and clears it.
  bool closed = false;
  // Read from the engine at the end of the trace.
  std::string final_state = "closed";
  uint64_t hung_calls = 0;
  uint64_t inflight = 0;
  std::array<uint64_t, kDecisionCount> decisions{};

  // Ends the running ramp at `at` with a timeline line that starts with
  // `how` ("ramp complete", ...).
  void EndRamp(absl::Duration at, absl::string_view how) {
    if (!ramp.has_value()) return;
    uint64_t attempts = 0;
    uint64_t admitted = 0;
    std::vector<std::string> quarters;
    const size_t last = ramp->Quarter(at);
    for (size_t q = 0; q <= last; ++q) {
      attempts += ramp->attempts[q];
      admitted += ramp->admitted[q];
      quarters.push_back(
          absl::StrCat(ramp->admitted[q], "/", ramp->attempts[q]));
    }
    timeline.emplace_back(
        at, absl::StrCat(how, ": ", admitted, " of ", attempts,
                         " first attempts admitted (by quarter of the ramp: ",
                         absl::StrJoin(quarters, ", "), ")"));
    ramp.reset();
  }
};

absl::Status LineError(size_t line, absl::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat("line ", line, ": ", message));
}

// A field that is absent or null.
bool Missing(const YAML::Node& node) { return !node || node.IsNull(); }

absl::StatusOr<TraceRecord> ParseLine(const std::string& text, size_t line) {
  YAML::Node node;
  try {
    node = YAML::Load(text);  // a JSON object is a YAML flow mapping
  } catch (const YAML::Exception& e) {
    return LineError(line, absl::StrCat("not a JSON object: ", e.what()));
  }
  if (!node.IsMap()) return LineError(line, "not a JSON object");
  TraceRecord record;
  record.line = line;
  RawOutcome outcome;
  bool has_outcome = false;
  try {
    if (!node["dependency"] || !node["dependency"].IsScalar()) {
      return LineError(line, "\"dependency\" (a string) is required");
    }
    record.dependency = node["dependency"].as<std::string>();
    const YAML::Node t = node["t"];
    if (!t || !t.IsScalar()) {
      return LineError(line, "\"t\" (RFC 3339 time or seconds) is required");
    }
    double seconds = 0;
    absl::Time at;
    std::string err;
    if (YAML::convert<double>::decode(t, seconds)) {
      record.end = absl::Seconds(seconds);
    } else if (absl::ParseTime(absl::RFC3339_full, t.as<std::string>(), &at,
                               &err)) {
      record.at = at;
    } else {
      return LineError(line, absl::StrCat("\"t\": not RFC 3339 or seconds: ",
                                          t.as<std::string>()));
    }
    if (const YAML::Node o = node["outcome"]; !Missing(o)) {
      has_outcome = true;
      uint32_t status = 0;
      if (YAML::convert<uint32_t>::decode(o, status)) {
        outcome.http_status = status;  // "outcome": 503
      } else {
        const std::string name = absl::AsciiStrToLower(o.as<std::string>());
        const std::optional<OutcomeClass> c = OutcomeClassFromName(name);
        if (!c.has_value()) {
          return LineError(line,
                           absl::StrCat("unknown outcome \"", name, "\""));
        }
        outcome.explicit_class = static_cast<int>(*c);
      }
    }
    if (const YAML::Node h = node["http_status"]; !Missing(h)) {
      has_outcome = true;
      outcome.http_status = h.as<uint32_t>();
    }
    if (const YAML::Node g = node["grpc_code"]; !Missing(g)) {
      has_outcome = true;
      outcome.grpc_code = g.as<int32_t>();
    }
    if (const YAML::Node l = node["latency_ms"]; !Missing(l)) {
      const double ms = l.as<double>();
      if (!(ms >= 0)) return LineError(line, "\"latency_ms\" must be >= 0");
      record.latency = absl::Milliseconds(ms);
    }
  } catch (const YAML::Exception& e) {
    return LineError(line, e.what());
  }
  if (has_outcome) {
    absl::StatusOr<OutcomeClass> cls = Classify(outcome);
    if (!cls.ok()) return LineError(line, cls.status().message());
    record.outcome = outcome;
  }
  return record;
}

absl::StatusOr<Trace> ReadTrace(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  Trace trace;
  std::vector<TraceRecord>& records = trace.records;
  std::string text;
  size_t line = 0;
  while (std::getline(in, text)) {
    ++line;
    if (absl::StripAsciiWhitespace(text).empty()) continue;
    absl::StatusOr<TraceRecord> r = ParseLine(text, line);
    if (!r.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": ", r.status().message()));
    }
    if (!r->outcome.has_value() && trace.unreported++ == 0) {
      trace.first_unreported_line = line;
    }
    records.push_back(*std::move(r));
  }
  if (records.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": no events"));
  }
  const bool absolute = records[0].at.has_value();
  for (const TraceRecord& r : records) {
    if (r.at.has_value() != absolute) {
      return absl::InvalidArgumentError(absl::StrCat(
          path, ": line ", r.line,
          ": mixes RFC 3339 times and seconds offsets; use one kind"));
    }
  }
  if (absolute) {
    // Offset zero is the first call's start.
    absl::Time origin = absl::InfiniteFuture();
    for (const TraceRecord& r : records) {
      origin = std::min(origin, *r.at - r.latency);
    }
    for (TraceRecord& r : records) r.end = *r.at - origin;
    trace.origin = origin;
  }
  std::stable_sort(records.begin(), records.end(),
                   [](const TraceRecord& a, const TraceRecord& b) {
                     return a.start() < b.start();
                   });
  trace.horizon = records[0].end;
  for (const TraceRecord& r : records) {
    trace.horizon = std::max(trace.horizon, r.end);
  }
  return trace;
}

// The replay's steps in time order (see Step).
std::vector<Step> Schedule(const std::vector<TraceRecord>& records) {
  std::vector<Step> steps;
  steps.reserve(2 * records.size());
  for (size_t i = 0; i < records.size(); ++i) {
    steps.push_back(Step{records[i].start(), i, false});
    if (records[i].outcome.has_value()) {
      steps.push_back(Step{records[i].end, i, true});
    }
  }
  std::sort(steps.begin(), steps.end(), [](const Step& a, const Step& b) {
    return std::tie(a.at, a.record, a.report) <
           std::tie(b.at, b.record, b.report);
  });
  return steps;
}

// Collects transitions into the per-dependency reports. The simulation is
// single-threaded; the Registry calls this synchronously.
class Recorder final : public TransitionObserver {
 public:
  explicit Recorder(std::map<std::string, DependencyReport>* reports)
      : reports_(reports) {}
  void set_now(absl::Duration offset) { now_ = offset; }
  void OnTransition(const Transition& t) override {
    // Created, evicted, ramp done, reload: not state changes (the ramp's
    // end is reported from the share).
    if (!IsStateChange(t.reason)) return;
    DependencyReport& report = (*reports_)[t.dependency];
    // A ramp ends with the closed state; the engine's reason says how
    // (ramp_failed for a trip).
    if (report.ramp.has_value() && t.from == State::kClosed &&
        t.to != State::kClosed) {
      report.EndRamp(
          now_, absl::StrCat("ramp failed after ",
                             absl::FormatDuration(now_ - report.ramp->start)));
    }
    if (t.to == State::kClosed) report.closed = true;
    std::string text = absl::StrCat(StateName(t.from), " -> ", StateName(t.to),
                                    " (", TransitionReasonName(t.reason), ")");
    if (t.to == State::kOpen) {
      absl::StrAppend(&text, " cooldown ", absl::FormatDuration(t.retry_after));
    }
    report.timeline.emplace_back(now_, std::move(text));
  }

 private:
  std::map<std::string, DependencyReport>* const reports_;
  absl::Duration now_;
};

double HalfUniform() { return 0.5; }  // jitter: the middle, reproducibly

// Why a call was refused, as the <why> of breakerd_acquire_total's
// rejected_<why> decisions.
absl::string_view RefusalName(RejectReason reason) {
  switch (reason) {
    case RejectReason::kNone:
    case RejectReason::kOpen:
      return "open";
    case RejectReason::kProbeInFlight:
      return "probe_in_flight";
    case RejectReason::kRetryBudget:
      return "retry_budget";
    case RejectReason::kForcedOpen:
      return "forced_open";
    case RejectReason::kRamp:
      return "ramp";
  }
  return "open";
}

std::string When(absl::Duration offset, std::optional<absl::Time> origin) {
  std::string out = absl::StrFormat("%+.3fs", absl::ToDoubleSeconds(offset));
  if (origin.has_value()) {
    absl::StrAppend(&out, " (",
                    absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", *origin + offset,
                                     absl::UTCTimeZone()),
                    ")");
  }
  return out;
}

// Ends the ramp of `report` if it has run its course by `now`: its line
// goes at the instant it completed.
void EndRampIfComplete(DependencyReport& report, absl::Duration now) {
  if (report.ramp.has_value() &&
      now >= report.ramp->start + report.ramp->length) {
    const absl::Duration end = report.ramp->start + report.ramp->length;
    report.EndRamp(end, "ramp complete");
  }
}

// After a call that closed the breaker: starts watching the ramp, if the
// engine ramps (its admit share is below 1).
void WatchRamp(const Registry& registry, const PolicySet& policies,
               const std::string& dependency, absl::Duration now,
               DependencyReport& report) {
  if (!report.closed) return;
  report.closed = false;
  absl::StatusOr<BreakerSnapshot> s = registry.Get(dependency);
  if (!s.ok() || s->state != State::kClosed || s->admit_share >= 1) return;
  RampWatch ramp;
  ramp.start = now;
  ramp.length = policies.Match(dependency)->recovery.ramp;
  if (ramp.length <= absl::ZeroDuration()) return;
  report.ramp = ramp;
  report.timeline.emplace_back(
      now, absl::StrFormat("ramp begins: admit share %.2f, rising to 1 over %s",
                           s->admit_share, absl::FormatDuration(ramp.length)));
}

// One dependency's report as one line of JSON.
std::string ReportJson(const std::string& name,
                       const DependencyReport& report) {
  std::string timeline;
  for (const auto& [offset, text] : report.timeline) {
    if (!timeline.empty()) timeline += ",";
    absl::StrAppend(&timeline, "{\"offset_seconds\":",
                    absl::StrFormat("%.3f", absl::ToDoubleSeconds(offset)),
                    ",\"event\":\"", text, "\"}");
  }
  std::string decisions;
  for (int d = 0; d < kDecisionCount; ++d) {
    absl::StrAppend(&decisions, d == 0 ? "" : ",", "\"",
                    DecisionName(static_cast<Decision>(d)),
                    "\":", report.decisions[d]);
  }
  // Dependency names are bytes of kDependencyNameAlphabet and timeline
  // texts are ours: nothing to escape.
  return absl::StrCat(
      "{\"dependency\":\"", name, "\",\"calls\":", report.calls,
      ",\"allowed\":", report.allowed, ",\"refused\":", report.refused,
      ",\"probes\":", report.probes, ",\"decisions\":{", decisions,
      "},\"never_reported\":", report.never_reported,
      ",\"hung_calls\":", report.hung_calls, ",\"inflight\":", report.inflight,
      ",\"late_reports\":", report.late_reports, ",\"final_state\":\"",
      report.final_state, "\",\"timeline\":[", timeline, "]}\n");
}

// One dependency's report as text: a summary line, the engine's decisions,
// then the timeline.
std::string ReportText(const std::string& name, const DependencyReport& report,
                       std::optional<absl::Time> origin) {
  std::string out =
      absl::StrCat(name, ": ", report.calls, " calls, ", report.allowed,
                   " allowed, ", report.refused, " refused");
  if (!report.refused_by_reason.empty()) {
    std::vector<std::string> reasons;
    for (const auto& [reason, n] : report.refused_by_reason) {
      reasons.push_back(absl::StrCat(reason, " ", n));
    }
    absl::StrAppend(&out, " (", absl::StrJoin(reasons, ", "), ")");
  }
  absl::StrAppend(&out, ", ", report.probes, " probes");
  if (report.never_reported > 0) {
    absl::StrAppend(&out, ", ", report.never_reported, " never reported");
  }
  if (report.hung_calls > 0) {
    absl::StrAppend(&out, ", ", report.hung_calls, " hung");
  }
  if (report.inflight > 0) {
    absl::StrAppend(&out, ", ", report.inflight, " in flight at the end");
  }
  if (report.late_reports > 0) {
    absl::StrAppend(&out, ", ", report.late_reports, " late reports");
  }
  absl::StrAppend(&out, "; final state ", report.final_state, "\n");
  std::vector<std::string> decisions;
  for (int d = 0; d < kDecisionCount; ++d) {
    if (report.decisions[d] == 0) continue;
    decisions.push_back(absl::StrCat(DecisionName(static_cast<Decision>(d)),
                                     " ", report.decisions[d]));
  }
  if (!decisions.empty()) {
    absl::StrAppend(&out, "  decisions: ", absl::StrJoin(decisions, ", "),
                    "\n");
  }
  for (const auto& [offset, text] : report.timeline) {
    absl::StrAppend(&out, "  ", When(offset, origin), "  ", text, "\n");
  }
  return out;
}

}  // namespace

int RunSimulate(const std::string& config_path, const std::string& trace_path,
                bool json, std::ostream& out, std::ostream& err) {
  absl::StatusOr<std::shared_ptr<const PolicySet>> policies =
      LoadConfigFile(config_path);
  if (!policies.ok()) {
    err << "breakerctl: " << policies.status().message() << "\n";
    return 2;
  }
  absl::StatusOr<Trace> trace = ReadTrace(trace_path);
  if (!trace.ok()) {
    err << "breakerctl: " << trace.status().message() << "\n";
    return 2;
  }
  if (trace->unreported > 0) {
    err << "breakerctl: note: " << trace_path << ": " << trace->unreported
        << " record(s) without outcome, http_status or grpc_code (the first "
           "at line "
        << trace->first_unreported_line
        << "): replayed as calls that never reported\n";
  }
  const std::vector<TraceRecord>& records = trace->records;

  std::map<std::string, DependencyReport> reports;
  FakeClock clock;
  Recorder recorder(&reports);
  Registry registry(*policies, &clock, /*permit_secret=*/1, &HalfUniform);
  registry.AddObserver(&recorder);
  // The permit of each record's call; 0 while not acquired, or refused.
  std::vector<uint64_t> permits(records.size(), 0);
  const std::vector<Step> steps = Schedule(records);
  absl::Duration now = steps.front().at;
  for (const Step& step : steps) {
    clock.Advance(step.at - now);
    now = step.at;
    recorder.set_now(now);
    const TraceRecord& record = records[step.record];
    DependencyReport& report = reports[record.dependency];
    EndRampIfComplete(report, now);
    if (step.report) {
      if (permits[step.record] == 0) continue;  // refused: never made
      ReportRequestFacts facts;
      facts.outcome = *record.outcome;
      facts.latency = record.latency;
      absl::StatusOr<ReportResult> r =
          registry.Report(record.dependency, permits[step.record], facts);
      if (!r.ok()) {
        err << "breakerctl: " << trace_path << ": line " << record.line << ": "
            << r.status().message() << "\n";
        return 2;
      }
      if (r->effect == Effect::kLate) ++report.late_reports;
      WatchRamp(registry, **policies, record.dependency, now, report);
      continue;
    }
    ++report.calls;
    absl::StatusOr<AcquireResult> a = registry.Acquire(record.dependency, 0);
    if (!a.ok()) {
      err << "breakerctl: " << trace_path << ": line " << record.line << ": "
          << a.status().message() << "\n";
      return 2;
    }
    if (report.ramp.has_value()) {  // still ramping after this Acquire
      const size_t q = report.ramp->Quarter(now);
      ++report.ramp->attempts[q];
      if (a->reason != RejectReason::kRamp) ++report.ramp->admitted[q];
    }
    if (!a->allowed) {
      ++report.refused;
      ++report.refused_by_reason[std::string(RefusalName(a->reason))];
      continue;
    }
    ++report.allowed;
    permits[step.record] = a->permit;
    if (!record.outcome.has_value()) ++report.never_reported;
    if (a->probe) {
      ++report.probes;
      report.timeline.emplace_back(now, "probe allowed");
    }
    WatchRamp(registry, **policies, record.dependency, now, report);
  }

  // The trace ends at its latest "t": calls still out are in flight then.
  clock.Advance(trace->horizon - now);
  now = trace->horizon;
  for (auto& [name, report] : reports) {
    EndRampIfComplete(report, now);
    absl::StatusOr<BreakerSnapshot> s = registry.Get(name);
    if (!s.ok()) continue;
    if (report.ramp.has_value()) {
      report.EndRamp(now, absl::StrFormat("ramp still running at the end "
                                          "(admit share %.2f)",
                                          s->admit_share));
    }
    report.final_state = std::string(StateName(s->state));
    report.hung_calls = s->hung_calls;
    report.inflight = s->inflight;
    report.decisions = s->acquires;
  }

  for (const auto& [name, report] : reports) {
    out << (json ? ReportJson(name, report)
                 : ReportText(name, report, trace->origin));
  }
  return 0;
}

}  // namespace breakerd::ctl

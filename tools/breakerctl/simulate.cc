#include "tools/breakerctl/simulate.h"

#include <algorithm>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "server/config/config.h"
#include "server/engine/clock.h"
#include "server/engine/outcome.h"
#include "server/engine/registry.h"
#include "server/engine/types.h"
#include "yaml-cpp/yaml.h"

namespace breakerd::ctl {
namespace {

// One line of the trace.
struct TraceEvent {
  // From the start of the trace (the earliest event).
  absl::Duration offset;
  // Set when the trace gave an RFC 3339 time.
  std::optional<absl::Time> at;
  std::string dependency;
  RawOutcome outcome;
  absl::Duration latency = absl::ZeroDuration();
  size_t line = 0;
};

// What the simulation saw for one dependency.
struct DependencyReport {
  uint64_t calls = 0;
  uint64_t allowed = 0;
  uint64_t refused = 0;
  uint64_t probes = 0;
  std::map<std::string, uint64_t> refused_by_reason;
  // Lines of the timeline, in order: (offset, text).
  std::vector<std::pair<absl::Duration, std::string>> timeline;
  std::string final_state = "closed";
};

absl::Status LineError(size_t line, absl::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat("line ", line, ": ", message));
}

absl::StatusOr<TraceEvent> ParseLine(const std::string& text, size_t line) {
  YAML::Node node;
  try {
    node = YAML::Load(text);  // a JSON object is a YAML flow mapping
  } catch (const YAML::Exception& e) {
    return LineError(line, absl::StrCat("not a JSON object: ", e.what()));
  }
  if (!node.IsMap()) return LineError(line, "not a JSON object");
  TraceEvent event;
  event.line = line;
  try {
    if (!node["dependency"] || !node["dependency"].IsScalar()) {
      return LineError(line, "\"dependency\" (a string) is required");
    }
    event.dependency = node["dependency"].as<std::string>();
    const YAML::Node t = node["t"];
    if (!t || !t.IsScalar()) {
      return LineError(line, "\"t\" (RFC 3339 time or seconds) is required");
    }
    double seconds = 0;
    absl::Time at;
    std::string err;
    if (YAML::convert<double>::decode(t, seconds)) {
      event.offset = absl::Seconds(seconds);
    } else if (absl::ParseTime(absl::RFC3339_full, t.as<std::string>(), &at,
                               &err)) {
      event.at = at;
    } else {
      return LineError(line, absl::StrCat("\"t\": not RFC 3339 or seconds: ",
                                          t.as<std::string>()));
    }
    if (const YAML::Node o = node["outcome"]) {
      uint32_t status = 0;
      if (YAML::convert<uint32_t>::decode(o, status)) {
        event.outcome.http_status = status;  // "outcome": 503
      } else {
        const std::string name = absl::AsciiStrToLower(o.as<std::string>());
        const std::optional<OutcomeClass> c = OutcomeClassFromName(name);
        if (!c.has_value()) {
          return LineError(line,
                           absl::StrCat("unknown outcome \"", name, "\""));
        }
        event.outcome.explicit_class = static_cast<int>(*c);
      }
    }
    if (const YAML::Node h = node["http_status"]) {
      event.outcome.http_status = h.as<uint32_t>();
    }
    if (const YAML::Node g = node["grpc_code"]) {
      event.outcome.grpc_code = g.as<int32_t>();
    }
    if (const YAML::Node l = node["latency_ms"]) {
      event.latency = absl::Milliseconds(l.as<double>());
    }
  } catch (const YAML::Exception& e) {
    return LineError(line, e.what());
  }
  absl::StatusOr<OutcomeClass> cls = Classify(event.outcome);
  if (!cls.ok()) return LineError(line, cls.status().message());
  return event;
}

absl::StatusOr<std::vector<TraceEvent>> ReadTrace(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::vector<TraceEvent> events;
  std::string text;
  size_t line = 0;
  while (std::getline(in, text)) {
    ++line;
    if (absl::StripAsciiWhitespace(text).empty()) continue;
    absl::StatusOr<TraceEvent> e = ParseLine(text, line);
    if (!e.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": ", e.status().message()));
    }
    events.push_back(*std::move(e));
  }
  if (events.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": no events"));
  }
  const bool absolute = events[0].at.has_value();
  for (const TraceEvent& e : events) {
    if (e.at.has_value() != absolute) {
      return absl::InvalidArgumentError(absl::StrCat(
          path, ": line ", e.line,
          ": mixes RFC 3339 times and seconds offsets; use one kind"));
    }
  }
  if (absolute) {
    absl::Time start = absl::InfiniteFuture();
    for (const TraceEvent& e : events) start = std::min(start, *e.at);
    for (TraceEvent& e : events) e.offset = *e.at - start;
  }
  std::stable_sort(events.begin(), events.end(),
                   [](const TraceEvent& a, const TraceEvent& b) {
                     return a.offset < b.offset;
                   });
  return events;
}

// Collects transitions into the per-dependency reports. The simulation is
// single-threaded; the Registry calls this synchronously.
class Recorder final : public TransitionObserver {
 public:
  explicit Recorder(std::map<std::string, DependencyReport>* reports)
      : reports_(reports) {}
  void set_now(absl::Duration offset) { now_ = offset; }
  void OnTransition(const Transition& t) override {
    std::string text = absl::StrCat(StateName(t.from), " -> ", StateName(t.to),
                                    " (", TransitionReasonName(t.reason), ")");
    if (t.to == State::kOpen) {
      absl::StrAppend(&text, " cooldown ", absl::FormatDuration(t.retry_after));
    }
    (*reports_)[t.dependency].timeline.emplace_back(now_, std::move(text));
  }

 private:
  std::map<std::string, DependencyReport>* const reports_;
  absl::Duration now_;
};

double HalfUniform() { return 0.5; }  // jitter: the middle, reproducibly

std::string When(absl::Duration offset, std::optional<absl::Time> start) {
  std::string out = absl::StrFormat("+%.3fs", absl::ToDoubleSeconds(offset));
  if (start.has_value()) {
    absl::StrAppend(&out, " (",
                    absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", *start + offset,
                                     absl::UTCTimeZone()),
                    ")");
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
  absl::StatusOr<std::vector<TraceEvent>> events = ReadTrace(trace_path);
  if (!events.ok()) {
    err << "breakerctl: " << events.status().message() << "\n";
    return 2;
  }
  std::optional<absl::Time> start;
  if ((*events)[0].at.has_value()) start = *(*events)[0].at;

  std::map<std::string, DependencyReport> reports;
  FakeClock clock;
  Recorder recorder(&reports);
  Registry registry(*policies, &clock, /*permit_secret=*/1, &HalfUniform);
  registry.AddObserver(&recorder);
  absl::Duration now = absl::ZeroDuration();
  for (const TraceEvent& e : *events) {
    clock.Advance(e.offset - now);
    now = e.offset;
    recorder.set_now(now);
    DependencyReport& report = reports[e.dependency];
    ++report.calls;
    absl::StatusOr<AcquireResult> a = registry.Acquire(e.dependency, 0);
    if (!a.ok()) {
      err << "breakerctl: " << trace_path << ": line " << e.line << ": "
          << a.status().message() << "\n";
      return 2;
    }
    if (!a->allowed) {
      ++report.refused;
      ++report.refused_by_reason
            [a->reason == RejectReason::kProbeInFlight ? "probe_in_flight"
             : a->reason == RejectReason::kForcedOpen  ? "forced_open"
             : a->reason == RejectReason::kRetryBudget ? "retry_budget"
                                                       : "open"];
      continue;
    }
    ++report.allowed;
    if (a->probe) {
      ++report.probes;
      report.timeline.emplace_back(now, "probe allowed");
    }
    ReportRequestFacts facts;
    facts.outcome = e.outcome;
    facts.latency = e.latency;
    absl::StatusOr<ReportResult> r =
        registry.Report(e.dependency, a->permit, facts);
    if (!r.ok()) {
      err << "breakerctl: " << trace_path << ": line " << e.line << ": "
          << r.status().message() << "\n";
      return 2;
    }
  }
  for (auto& [name, report] : reports) {
    absl::StatusOr<BreakerSnapshot> s = registry.Get(name);
    if (s.ok()) report.final_state = std::string(StateName(s->state));
  }

  for (const auto& [name, report] : reports) {
    if (json) {
      std::string timeline;
      for (const auto& [offset, text] : report.timeline) {
        if (!timeline.empty()) timeline += ",";
        absl::StrAppend(&timeline, "{\"offset_seconds\":",
                        absl::StrFormat("%.3f", absl::ToDoubleSeconds(offset)),
                        ",\"event\":\"", text, "\"}");
      }
      // Dependency names are bytes of kDependencyNameAlphabet: nothing to
      // escape.
      out << "{\"dependency\":\"" << name << "\",\"calls\":" << report.calls
          << ",\"allowed\":" << report.allowed
          << ",\"refused\":" << report.refused
          << ",\"probes\":" << report.probes << ",\"final_state\":\""
          << report.final_state << "\",\"timeline\":[" << timeline << "]}\n";
      continue;
    }
    out << name << ": " << report.calls << " calls, " << report.allowed
        << " allowed, " << report.refused << " refused";
    if (!report.refused_by_reason.empty()) {
      out << " (";
      bool first = true;
      for (const auto& [reason, n] : report.refused_by_reason) {
        out << (first ? "" : ", ") << reason << " " << n;
        first = false;
      }
      out << ")";
    }
    out << ", " << report.probes << " probes; final state "
        << report.final_state << "\n";
    for (const auto& [offset, text] : report.timeline) {
      out << "  " << When(offset, start) << "  " << text << "\n";
    }
  }
  return 0;
}

}  // namespace breakerd::ctl

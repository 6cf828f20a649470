// config_fuzz: arbitrary bytes as a YAML config file -> ParseConfig
// (server/config/config.h).
//
// Invariants, each an abort when broken:
//  - ParseConfig never throws or crashes; it returns OK or INVALID_ARGUMENT
//    whose message is one or more errors, one a line (ConfigErrorLines gives
//    them back exactly, no line empty), each line starting with the source
//    name ("every error names the source"), no line twice, in file order
//    (line numbers never decrease; errors without a line come last).
//  - Parsing is deterministic: the same text gives the same policy set or
//    the same error, code and message.
//  - An OK set honours every documented range (deploy/config/breakerd.yaml):
//    thresholds in [0, 1], min_calls 1..1000000, windows 1s..1h, cooldown
//    1ms <= base <= max <= 24h, 0 <= jitter < 1, lease 1ms..1h,
//    required_successes 1..1000, ratio 0..1000, min_per_second 0..1000000,
//    ttl 1s..1h, inflight.hang_after 0..5m, recovery.ramp 0..1h,
//    0 < recovery.start_share <= 1, fleet.quorum 1..100, max_breakers
//    1..10000000, idle_ttl 1s..720h; every match is 1-200 bytes of
//    [A-Za-z0-9._:/@-*], unique, and the defaults' is "defaults"; source is
//    the given name.
//  - An OK set written back as YAML (every key, explicit) parses to an
//    equal set: nothing is lost or rounded between the text and the value.
//
//  - A stream on which Debian 12's yaml-cpp 0.7.0 YAML::LoadAll would never
//    return ("," or ",:", jbeder/yaml-cpp#1040; LoadAllWouldLoop, an
//    independent check) is refused with INVALID_ARGUMENT, quickly.
//
// FINDING, FIXED (fuzz/crashes/config_fuzz/, fuzz/RESULTS.md): ParseConfig
// called YAML::LoadAll and so hung, allocating without bound, on such a
// stream; it now counts documents itself and stops where the parser stalls.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "fuzz/fuzz_check.h"
#include "server/config/config.h"
#include "server/config/yaml_events.h"
#include "server/engine/policy.h"
#include "yaml-cpp/exceptions.h"
#include "yaml-cpp/parser.h"

namespace breakerd {
namespace {

constexpr absl::string_view kSource = "fuzz.yaml";

std::string Describe(
    const absl::StatusOr<std::shared_ptr<const PolicySet>>& r) {
  return r.ok() ? std::string("OK") : r.status().ToString();
}

bool InRange(absl::Duration d, absl::Duration lo, absl::Duration hi) {
  return d >= lo && d <= hi;
}

bool InRange(double v, double lo, double hi) {
  return std::isfinite(v) && v >= lo && v <= hi;
}

bool IsMatchByte(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
         (c >= '0' && c <= '9') || c == '.' || c == '_' || c == ':' ||
         c == '/' || c == '@' || c == '-' || c == '*';
}

std::string PolicyName(const Policy& p) {
  return absl::StrCat("\"", p.match, "\"");
}

// Every documented range of one policy.
void CheckPolicy(const Policy& p) {
  const std::string who = PolicyName(p);
  FUZZ_CHECK(p.mode == Mode::kEnforce || p.mode == Mode::kShadow, who);
  FUZZ_CHECK(p.consecutive_failures <= 1000000, who);
  FUZZ_CHECK(InRange(p.failure_rate.threshold, 0, 1), who, " ",
             p.failure_rate.threshold);
  FUZZ_CHECK(
      p.failure_rate.min_calls >= 1 && p.failure_rate.min_calls <= 1000000,
      who);
  FUZZ_CHECK(InRange(p.failure_rate.window, absl::Seconds(1), absl::Hours(1)),
             who, " ", absl::FormatDuration(p.failure_rate.window));
  FUZZ_CHECK(InRange(p.slow_call_rate.threshold, 0, 1), who);
  FUZZ_CHECK(
      p.slow_call_rate.min_calls >= 1 && p.slow_call_rate.min_calls <= 1000000,
      who);
  FUZZ_CHECK(p.slow_call_rate.duration > absl::ZeroDuration() &&
                 p.slow_call_rate.duration <= absl::Hours(1),
             who, " ", absl::FormatDuration(p.slow_call_rate.duration));
  FUZZ_CHECK(InRange(p.cooldown.base, absl::Milliseconds(1), absl::Hours(24)),
             who, " ", absl::FormatDuration(p.cooldown.base));
  FUZZ_CHECK(InRange(p.cooldown.max, absl::Milliseconds(1), absl::Hours(24)),
             who, " ", absl::FormatDuration(p.cooldown.max));
  FUZZ_CHECK(p.cooldown.base <= p.cooldown.max, who, " base ",
             absl::FormatDuration(p.cooldown.base), " max ",
             absl::FormatDuration(p.cooldown.max));
  FUZZ_CHECK(std::isfinite(p.cooldown.jitter) && p.cooldown.jitter >= 0 &&
                 p.cooldown.jitter < 1,
             who, " ", p.cooldown.jitter);
  FUZZ_CHECK(InRange(p.probe.lease, absl::Milliseconds(1), absl::Hours(1)),
             who);
  FUZZ_CHECK(
      p.probe.required_successes >= 1 && p.probe.required_successes <= 1000,
      who);
  FUZZ_CHECK(p.rate_limited == RateLimitedHandling::kCount ||
                 p.rate_limited == RateLimitedHandling::kIgnore,
             who);
  FUZZ_CHECK(InRange(p.retry_budget.ratio, 0, 1000), who);
  FUZZ_CHECK(InRange(p.retry_budget.min_per_second, 0, 1000000), who);
  FUZZ_CHECK(InRange(p.retry_budget.ttl, absl::Seconds(1), absl::Hours(1)),
             who);
  FUZZ_CHECK(
      InRange(p.inflight.hang_after, absl::ZeroDuration(), kMaxHangAfter), who,
      " ", absl::FormatDuration(p.inflight.hang_after));
  FUZZ_CHECK(InRange(p.recovery.ramp, absl::ZeroDuration(), absl::Hours(1)),
             who, " ", absl::FormatDuration(p.recovery.ramp));
  FUZZ_CHECK(
      InRange(p.recovery.start_share, 0, 1) && p.recovery.start_share > 0, who,
      " ", p.recovery.start_share);
  FUZZ_CHECK(p.fleet.quorum >= 1 && p.fleet.quorum <= 100, who);
}

void CheckSet(const PolicySet& set) {
  FUZZ_CHECK(set.source == kSource, set.source);
  FUZZ_CHECK(set.defaults != nullptr);
  FUZZ_CHECK(set.defaults->match == "defaults", set.defaults->match);
  CheckPolicy(*set.defaults);
  std::set<std::string> seen;
  for (const auto& p : set.policies) {
    FUZZ_CHECK(p != nullptr);
    FUZZ_CHECK(!p->match.empty() && p->match.size() <= kMaxMatchLength,
               p->match.size());
    for (char c : p->match) {
      FUZZ_CHECK(IsMatchByte(c), "match ", PolicyName(*p), " byte ",
                 static_cast<int>(static_cast<unsigned char>(c)));
    }
    FUZZ_CHECK(seen.insert(p->match).second, "duplicate match ",
               PolicyName(*p));
    CheckPolicy(*p);
  }
  FUZZ_CHECK(
      set.limits.max_breakers >= 1 && set.limits.max_breakers <= 10000000,
      set.limits.max_breakers);
  FUZZ_CHECK(
      InRange(set.limits.idle_ttl, absl::Seconds(1), absl::Hours(24 * 30)),
      absl::FormatDuration(set.limits.idle_ttl));
}

// The message of a failed parse: one error a line, each naming the source,
// each once, in file order.
void CheckErrorLines(const absl::Status& s) {
  const std::vector<std::string> lines = ConfigErrorLines(s);
  FUZZ_CHECK(!lines.empty(), s.ToString());
  FUZZ_CHECK(absl::StrJoin(lines, "\n") == s.message(),
             "an empty line in: ", s.ToString());
  std::set<std::string> seen;
  int64_t previous_line = 0;
  bool positionless_seen = false;
  for (const std::string& line : lines) {
    FUZZ_CHECK(absl::StartsWith(line, kSource),
               "line without the source: ", line);
    FUZZ_CHECK(seen.insert(line).second, "line reported twice: ", line);
    // "SOURCE:LINE: ..." or, without a position, "SOURCE: ...".
    const absl::string_view rest =
        absl::string_view(line).substr(kSource.size());
    const size_t colon = rest.find(':', 1);
    int64_t n = 0;
    if (absl::StartsWith(rest, ":") && colon != absl::string_view::npos &&
        absl::SimpleAtoi(rest.substr(1, colon - 1), &n)) {
      FUZZ_CHECK(!positionless_seen,
                 "line number after a positionless error: ", line);
      FUZZ_CHECK(n >= previous_line, "out of file order: ", line, "\n",
                 s.ToString());
      previous_line = n;
    } else {
      positionless_seen = true;
    }
  }
}

bool SameSet(const PolicySet& a, const PolicySet& b) {
  if (!(*a.defaults == *b.defaults)) return false;
  if (a.policies.size() != b.policies.size()) return false;
  for (size_t i = 0; i < a.policies.size(); ++i) {
    if (!(*a.policies[i] == *b.policies[i])) return false;
  }
  return a.limits.max_breakers == b.limits.max_breakers &&
         a.limits.idle_ttl == b.limits.idle_ttl && a.source == b.source;
}

// A number written so that it reads back exactly.
std::string Num(double v) { return absl::StrFormat("%.17g", v); }
// FormatDuration writes zero as a bare "0", which the config refuses.
std::string Dur(absl::Duration d) {
  return absl::StrCat(
      "\"", d == absl::ZeroDuration() ? "0s" : absl::FormatDuration(d), "\"");
}

// One policy's keys as YAML flow mappings, every key explicit.
std::string PolicyYaml(const Policy& p) {
  return absl::StrCat(
      "mode: ", p.mode == Mode::kShadow ? "shadow" : "enforce",
      ", consecutive_failures: ", p.consecutive_failures,
      ", failure_rate: {threshold: ", Num(p.failure_rate.threshold),
      ", min_calls: ", p.failure_rate.min_calls,
      ", window: ", Dur(p.failure_rate.window), "}",
      ", slow_call_rate: {threshold: ", Num(p.slow_call_rate.threshold),
      ", min_calls: ", p.slow_call_rate.min_calls,
      ", duration: ", Dur(p.slow_call_rate.duration), "}",
      ", cooldown: {base: ", Dur(p.cooldown.base),
      ", max: ", Dur(p.cooldown.max), ", jitter: ", Num(p.cooldown.jitter), "}",
      ", probe: {lease: ", Dur(p.probe.lease),
      ", required_successes: ", p.probe.required_successes, "}",
      ", rate_limited: ",
      p.rate_limited == RateLimitedHandling::kIgnore ? "ignore" : "count",
      ", retry_budget: {ratio: ", Num(p.retry_budget.ratio),
      ", min_per_second: ", Num(p.retry_budget.min_per_second),
      ", ttl: ", Dur(p.retry_budget.ttl), "}",
      ", inflight: {hang_after: ", Dur(p.inflight.hang_after), "}",
      ", recovery: {ramp: ", Dur(p.recovery.ramp),
      ", start_share: ", Num(p.recovery.start_share), "}",
      ", fleet: {share_window: ", p.fleet.share_window ? "true" : "false",
      ", quorum: ", p.fleet.quorum, "}");
}

std::string SetYaml(const PolicySet& set) {
  std::string out =
      absl::StrCat("defaults: {", PolicyYaml(*set.defaults), "}\n");
  if (!set.policies.empty()) {
    absl::StrAppend(&out, "policies:\n");
    for (const auto& p : set.policies) {
      absl::StrAppend(&out, "  - {match: \"", p->match, "\", ", PolicyYaml(*p),
                      "}\n");
    }
  }
  absl::StrAppend(&out, "limits: {max_breakers: ", set.limits.max_breakers,
                  ", idle_ttl: ", Dur(set.limits.idle_ttl), "}\n");
  return out;
}

// True if YAML::LoadAll would loop forever on `text`: the parser keeps
// reporting documents without consuming input. A real document consumes at
// least one byte, so more documents than bytes means the loop.
bool LoadAllWouldLoop(absl::string_view text) {
  std::istringstream in{std::string(text)};
  YAML::Parser parser(in);
  IgnoringEventHandler ignore;
  try {
    for (size_t documents = 0; documents <= text.size() + 1; ++documents) {
      if (!parser.HandleNextDocument(ignore)) return false;
    }
  } catch (const YAML::Exception&) {
    return false;  // a syntax error: LoadAll throws too, which is handled
  }
  return true;
}

}  // namespace
}  // namespace breakerd

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace breakerd;  // NOLINT
  const absl::string_view text(reinterpret_cast<const char*>(data), size);
  const bool would_loop = LoadAllWouldLoop(text);

  const absl::StatusOr<std::shared_ptr<const PolicySet>> first =
      ParseConfig(text, kSource);
  const absl::StatusOr<std::shared_ptr<const PolicySet>> second =
      ParseConfig(text, kSource);

  // Deterministic.
  FUZZ_CHECK(first.ok() == second.ok(), Describe(first), " vs ",
             Describe(second));
  FUZZ_CHECK(!would_loop || !first.ok(),
             "a stream that stalls yaml-cpp's LoadAll was accepted");
  if (!first.ok()) {
    const absl::Status& s = first.status();
    FUZZ_CHECK(s.code() == absl::StatusCode::kInvalidArgument, s.ToString());
    FUZZ_CHECK(!s.message().empty());
    CheckErrorLines(s);
    FUZZ_CHECK(s == second.status(), s.ToString(), " vs ",
               second.status().ToString());
    return 0;
  }
  FUZZ_CHECK(*first != nullptr && *second != nullptr);
  FUZZ_CHECK(SameSet(**first, **second), "two parses differ");

  const PolicySet& set = **first;
  CheckSet(set);

  // Written back with every key explicit, it reads the same.
  const std::string yaml = SetYaml(set);
  const absl::StatusOr<std::shared_ptr<const PolicySet>> again =
      ParseConfig(yaml, kSource);
  FUZZ_CHECK(again.ok(), Describe(again), "\n--- re-emitted:\n", yaml);
  FUZZ_CHECK(SameSet(set, **again), "re-emitted set differs\n--- re-emitted:\n",
             yaml, "--- and re-emitted from the re-parse:\n", SetYaml(**again));
  return 0;
}

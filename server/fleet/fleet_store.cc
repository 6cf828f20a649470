#include "server/fleet/fleet_store.h"

#include <algorithm>
#include <optional>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "server/engine/dependency_name.h"
#include "server/engine/registry.h"

namespace breakerd {

namespace {

absl::string_view KindName(ExternalState::Kind kind) {
  switch (kind) {
    case ExternalState::Kind::kOpen:
      return "open";
    case ExternalState::Kind::kClosed:
      return "closed";
    case ExternalState::Kind::kForcedOpen:
      return "forced_open";
    case ExternalState::Kind::kForcedClosed:
      return "forced_closed";
    case ExternalState::Kind::kReset:
      return "reset";
  }
  return "unknown";
}

// A field's text for an error message: escaped, and cut short if long.
std::string Quote(absl::string_view field) {
  constexpr size_t kMaxShown = 32;
  return absl::StrCat("\"", absl::CHexEscape(field.substr(0, kMaxShown)),
                      field.size() > kMaxShown ? "\"..." : "\"");
}

// Plain decimal digits (no sign, no spaces), at most `max`.
std::optional<uint64_t> ParseDecimal(absl::string_view s, uint64_t max) {
  if (s.empty() || s.size() > 20) return std::nullopt;
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    const uint64_t digit = static_cast<uint64_t>(c - '0');
    if (v > (max - digit) / 10) return std::nullopt;
    v = v * 10 + digit;
  }
  return v;
}

}  // namespace

std::string FormatFleetBody(const FleetMessage& m) {
  return absl::StrCat(m.origin, " ", KindName(m.kind), " ",
                      m.open_until_unix_ms, " ", m.escalation_level, " ",
                      m.dependency);
}

absl::StatusOr<FleetMessage> ParseFleetMessage(absl::string_view text) {
  if (text.size() > kMaxFleetMessageBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("fleet message: longer than ", kMaxFleetMessageBytes,
                     " bytes: ", Quote(text)));
  }
  std::vector<absl::string_view> f = absl::StrSplit(text, ' ');
  if (f.size() != 6) {
    return absl::InvalidArgumentError(absl::StrCat(
        "fleet message: want 6 fields (got ", f.size(), "): ", Quote(text)));
  }
  FleetMessage m;
  std::optional<uint64_t> version = ParseDecimal(f[0], kMaxFleetVersion);
  if (!version.has_value() || *version == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("fleet message: version must be 1..", kMaxFleetVersion,
                     " (got ", Quote(f[0]), ")"));
  }
  m.version = *version;
  if (f[1].empty() || f[1].size() > kMaxFleetOriginBytes ||
      !std::all_of(f[1].begin(), f[1].end(),
                   [](char c) { return c > ' ' && c < 0x7f; })) {
    return absl::InvalidArgumentError(
        absl::StrCat("fleet message: origin must be 1-", kMaxFleetOriginBytes,
                     " bytes of printable ASCII (got ", Quote(f[1]), ")"));
  }
  m.origin = std::string(f[1]);
  bool known = false;
  for (ExternalState::Kind k :
       {ExternalState::Kind::kOpen, ExternalState::Kind::kClosed,
        ExternalState::Kind::kForcedOpen, ExternalState::Kind::kForcedClosed,
        ExternalState::Kind::kReset}) {
    if (f[2] == KindName(k)) {
      m.kind = k;
      known = true;
    }
  }
  if (!known) {
    return absl::InvalidArgumentError(
        absl::StrCat("fleet message: unknown kind ", Quote(f[2])));
  }
  std::optional<uint64_t> until = ParseDecimal(f[3], kMaxFleetUnixMs);
  if (!until.has_value()) {
    return absl::InvalidArgumentError(
        absl::StrCat("fleet message: open_until must be 0..", kMaxFleetUnixMs,
                     " (got ", Quote(f[3]), ")"));
  }
  m.open_until_unix_ms = static_cast<int64_t>(*until);
  std::optional<uint64_t> escalation = ParseDecimal(f[4], kMaxFleetEscalation);
  if (!escalation.has_value()) {
    return absl::InvalidArgumentError(
        absl::StrCat("fleet message: escalation must be 0..",
                     kMaxFleetEscalation, " (got ", Quote(f[4]), ")"));
  }
  m.escalation_level = static_cast<uint32_t>(*escalation);
  if (absl::Status s = ValidateDependency(f[5]); !s.ok()) {
    // The rule, and a short escaped prefix: never the name itself, which
    // may be a megabyte.
    return absl::InvalidArgumentError(absl::StrCat(
        "fleet message: dependency must be 1-", kMaxDependencyLength,
        " bytes of ", kDependencyNameAlphabet, " (got ", Quote(f[5]), ")"));
  }
  m.dependency = std::string(f[5]);
  return m;
}

}  // namespace breakerd

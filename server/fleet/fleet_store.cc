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

absl::string_view FleetKindName(ExternalState::Kind kind) {
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

std::string FormatFleetMessage(const FleetMessage& m) {
  return absl::StrCat(m.version, " v", kFleetFormat, " ", m.stored_unix_ms, " ",
                      m.origin, " ", FleetKindName(m.kind), " ",
                      m.open_until_unix_ms, " ", m.escalation_level, " ",
                      m.reason, " ", m.dependency);
}

namespace {

// "v<digits>": a format tag. (Format 1 had none: its second field is an
// origin, "host/pid/hex", which always holds a '/'.)
std::optional<uint64_t> FormatTag(absl::string_view field) {
  if (field.size() < 2 || field[0] != 'v') return std::nullopt;
  return ParseDecimal(field.substr(1), 1'000'000);
}

absl::Status FieldError(absl::string_view field, absl::string_view rule,
                        absl::string_view got) {
  return absl::InvalidArgumentError(absl::StrCat(
      "fleet message: ", field, " must be ", rule, " (got ", Quote(got), ")"));
}

}  // namespace

absl::StatusOr<FleetMessage> ParseFleetMessage(absl::string_view text) {
  if (text.size() > kMaxFleetMessageBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("fleet message: longer than ", kMaxFleetMessageBytes,
                     " bytes: ", Quote(text)));
  }
  std::vector<absl::string_view> f = absl::StrSplit(text, ' ');
  FleetMessage m;
  m.format = 1;
  if (f.size() >= 2) {
    if (std::optional<uint64_t> tag = FormatTag(f[1]); tag.has_value()) {
      if (*tag != kFleetFormat) {
        return absl::UnimplementedError(absl::StrCat(
            "fleet message: format v", *tag, " is unknown here (this sidecar ",
            "reads v1 and v", kFleetFormat, "): ignored"));
      }
      m.format = kFleetFormat;
    }
  }
  // Format 1: version origin kind until escalation dependency.
  // Format 2: version v2 stored origin kind until escalation reason
  // dependency.
  const size_t want = m.format == 1 ? 6 : 9;
  if (f.size() != want) {
    return absl::InvalidArgumentError(
        absl::StrCat("fleet message: want ", want, " fields in format v",
                     m.format, " (got ", f.size(), "): ", Quote(text)));
  }
  std::optional<uint64_t> version = ParseDecimal(f[0], kMaxFleetVersion);
  if (!version.has_value() || *version == 0) {
    return FieldError("version", absl::StrCat("1..", kMaxFleetVersion), f[0]);
  }
  m.version = *version;
  size_t i = 1;
  if (m.format == kFleetFormat) {
    std::optional<uint64_t> stored = ParseDecimal(f[2], kMaxFleetUnixMs);
    if (!stored.has_value()) {
      return FieldError("stored", absl::StrCat("0..", kMaxFleetUnixMs), f[2]);
    }
    m.stored_unix_ms = static_cast<int64_t>(*stored);
    i = 3;
  }
  const absl::string_view origin = f[i], kind = f[i + 1], until = f[i + 2],
                          escalation = f[i + 3], dependency = f.back();
  if (m.format == kFleetFormat) {
    const absl::string_view reason = f[i + 4];
    if (reason.empty() || reason.size() > kMaxFleetReasonBytes ||
        !std::all_of(reason.begin(), reason.end(), [](char c) {
          return (c >= 'a' && c <= 'z') || c == '_';
        })) {
      return FieldError(
          "reason", absl::StrCat("1-", kMaxFleetReasonBytes, " bytes of a-z _"),
          reason);
    }
    m.reason = std::string(reason);
  }
  if (origin.empty() || origin.size() > kMaxFleetOriginBytes ||
      !std::all_of(origin.begin(), origin.end(),
                   [](char c) { return c > ' ' && c < 0x7f; })) {
    return FieldError(
        "origin",
        absl::StrCat("1-", kMaxFleetOriginBytes, " bytes of printable ASCII"),
        origin);
  }
  m.origin = std::string(origin);
  bool known = false;
  for (ExternalState::Kind k :
       {ExternalState::Kind::kOpen, ExternalState::Kind::kClosed,
        ExternalState::Kind::kForcedOpen, ExternalState::Kind::kForcedClosed,
        ExternalState::Kind::kReset}) {
    if (kind == FleetKindName(k)) {
      m.kind = k;
      known = true;
    }
  }
  if (!known) {
    return absl::InvalidArgumentError(
        absl::StrCat("fleet message: unknown kind ", Quote(kind)));
  }
  std::optional<uint64_t> end = ParseDecimal(until, kMaxFleetUnixMs);
  if (!end.has_value()) {
    return FieldError("open_until", absl::StrCat("0..", kMaxFleetUnixMs),
                      until);
  }
  m.open_until_unix_ms = static_cast<int64_t>(*end);
  std::optional<uint64_t> level = ParseDecimal(escalation, kMaxFleetEscalation);
  if (!level.has_value()) {
    return FieldError("escalation", absl::StrCat("0..", kMaxFleetEscalation),
                      escalation);
  }
  m.escalation_level = static_cast<uint32_t>(*level);
  if (absl::Status s = ValidateDependency(dependency); !s.ok()) {
    // The rule, and a short escaped prefix: never the name itself, which
    // may be a megabyte.
    return FieldError("dependency",
                      absl::StrCat("1-", kMaxDependencyLength, " bytes of ",
                                   kDependencyNameAlphabet),
                      dependency);
  }
  m.dependency = std::string(dependency);
  return m;
}

}  // namespace breakerd

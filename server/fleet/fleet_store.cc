#include "server/fleet/fleet_store.h"

#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

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

}  // namespace

std::string FormatFleetBody(const FleetMessage& m) {
  return absl::StrCat(m.origin, " ", KindName(m.kind), " ",
                      m.open_until_unix_ms, " ", m.escalation_level, " ",
                      m.dependency);
}

absl::StatusOr<FleetMessage> ParseFleetMessage(absl::string_view text) {
  std::vector<absl::string_view> f = absl::StrSplit(text, ' ');
  if (f.size() != 6) {
    return absl::InvalidArgumentError(
        absl::StrCat("fleet message: want 6 fields (got ", f.size(), ")"));
  }
  FleetMessage m;
  if (!absl::SimpleAtoi(f[0], &m.version) || m.version == 0) {
    return absl::InvalidArgumentError("fleet message: version");
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
  if (!known) return absl::InvalidArgumentError("fleet message: kind");
  if (!absl::SimpleAtoi(f[3], &m.open_until_unix_ms)) {
    return absl::InvalidArgumentError("fleet message: open_until");
  }
  if (!absl::SimpleAtoi(f[4], &m.escalation_level) || m.escalation_level > 64) {
    return absl::InvalidArgumentError("fleet message: escalation");
  }
  m.dependency = std::string(f[5]);
  if (m.origin.empty() || m.dependency.empty()) {
    return absl::InvalidArgumentError("fleet message: empty field");
  }
  return m;
}

}  // namespace breakerd

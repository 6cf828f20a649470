#include "breakerd/internal/watch_cache.h"

#include "breakerd/internal/convert.h"
#include "breakerd/internal/proto_duration.h"

namespace breakerd::client::internal {

Mode ModeFromName(absl::string_view name) {
  return name == "shadow" ? Mode::kShadow : Mode::kEnforce;
}

bool WatchCache::Apply(const v1::StateChange& change, absl::Duration now) {
  auto [it, inserted] = entries_.try_emplace(change.dependency());
  Entry& e = it->second;
  if (!inserted && change.generation() < e.generation) return false;
  e.state = FromProto(change.state());
  e.mode = ModeFromName(change.mode());
  e.generation = change.generation();
  e.open_until = now + FromProto(change.retry_after());
  return true;
}

std::optional<Decision> WatchCache::Refusal(absl::string_view dependency,
                                            absl::Duration now) const {
  auto it = entries_.find(dependency);
  if (it == entries_.end()) return std::nullopt;
  const Entry& e = it->second;
  if (e.mode == Mode::kShadow) return std::nullopt;
  Decision d;
  d.dependency = std::string(dependency);
  d.source = DecisionSource::kLocal;
  d.state = e.state;
  if (e.state == State::kForcedOpen) {
    d.reason = RejectReason::kForcedOpen;
  } else if (e.state == State::kOpen) {
    const absl::Duration left = e.open_until - now;
    if (left <= absl::ZeroDuration()) return std::nullopt;
    d.reason = RejectReason::kOpen;
    d.retry_after = left;
  } else {
    return std::nullopt;
  }
  return d;
}

std::optional<State> WatchCache::StateOf(absl::string_view dependency) const {
  auto it = entries_.find(dependency);
  if (it == entries_.end()) return std::nullopt;
  return it->second.state;
}

}  // namespace breakerd::client::internal

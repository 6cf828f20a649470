#include "breakerd/internal/watch_cache.h"

#include <utility>

#include "breakerd/internal/convert.h"
#include "breakerd/internal/proto_duration.h"

namespace breakerd::client::internal {
namespace {

// The Watch notice that a breaker is gone (StateChange.reason).
constexpr char kEvicted[] = "evicted";

}  // namespace

Mode ModeFromName(absl::string_view name) {
  return name == "shadow" ? Mode::kShadow : Mode::kEnforce;
}

bool WatchCache::Apply(const v1::StateChange& change, absl::Duration now) {
  auto it = entries_.find(change.dependency());
  if (it != entries_.end() && change.generation() < it->second.generation) {
    return false;
  }
  if (change.reason() == kEvicted) {
    if (it != entries_.end()) entries_.erase(it);
    return true;
  }
  if (it == entries_.end()) {
    it = entries_.try_emplace(change.dependency()).first;
  }
  Entry& e = it->second;
  e.state = FromProto(change.state());
  e.mode = ModeFromName(change.mode());
  e.generation = change.generation();
  e.open_until = now + FromProto(change.retry_after());
  const bool grants = e.state == State::kClosed && change.local_decisions() &&
                      e.mode == Mode::kEnforce;
  if (!grants) {
    e.slot.reset();
  } else if (e.slot == nullptr || e.slot->generation != e.generation) {
    e.slot = std::make_shared<LocalSlot>(change.dependency(), e.generation);
  }
  return true;
}

CacheVerdict WatchCache::Decide(absl::string_view dependency, bool may_grant,
                                absl::FunctionRef<absl::Duration()> now) const {
  CacheVerdict v;
  auto it = entries_.find(dependency);
  if (it == entries_.end()) return v;
  const Entry& e = it->second;
  if (e.slot != nullptr) {
    if (may_grant) {
      v.kind = CacheVerdict::Kind::kGrant;
      v.slot = e.slot;
    }
    return v;
  }
  if (e.mode == Mode::kShadow) return v;
  if (e.state == State::kForcedOpen) {
    v.reason = RejectReason::kForcedOpen;
  } else if (e.state == State::kOpen) {
    const absl::Duration left = e.open_until - now();
    if (left <= absl::ZeroDuration()) return v;
    v.reason = RejectReason::kOpen;
    v.retry_after = left;
  } else {
    return v;
  }
  v.kind = CacheVerdict::Kind::kRefuse;
  v.state = e.state;
  return v;
}

std::optional<Decision> WatchCache::Refusal(absl::string_view dependency,
                                            absl::Duration now) const {
  const CacheVerdict v =
      Decide(dependency, /*may_grant=*/false, [now] { return now; });
  if (v.kind != CacheVerdict::Kind::kRefuse) return std::nullopt;
  Decision d;
  d.dependency = std::string(dependency);
  d.source = DecisionSource::kLocal;
  d.state = v.state;
  d.reason = v.reason;
  d.retry_after = v.retry_after;
  return d;
}

std::optional<State> WatchCache::StateOf(absl::string_view dependency) const {
  auto it = entries_.find(dependency);
  if (it == entries_.end()) return std::nullopt;
  return it->second.state;
}

}  // namespace breakerd::client::internal

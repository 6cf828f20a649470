#include "server/state/state_saver.h"

#include <utility>
#include <vector>

#include "server/state/state_file.h"

namespace breakerd {

StateSaver::StateSaver(const Registry* registry, std::string path,
                       std::function<absl::Time()> wall_now,
                       std::function<int64_t(absl::string_view)> decided_at)
    : registry_(registry),
      path_(std::move(path)),
      wall_now_(std::move(wall_now)),
      decided_at_(std::move(decided_at)) {}

void StateSaver::OnTransition(const Transition& t) {
  if (!IsStateChange(t.reason)) return;  // nothing the file holds moved
  switch (t.reason) {
    case TransitionReason::kCooldownElapsed:  // derived from the saved end
    case TransitionReason::kReload:           // not a state change
      break;
    default:
      stale_.store(true, std::memory_order_release);
  }
}

absl::StatusOr<size_t> StateSaver::SaveIfStale() {
  MutexLock lock(&write_mu_);
  if (!stale_.load(std::memory_order_acquire)) return 0;
  return WriteLocked();
}

absl::StatusOr<size_t> StateSaver::Save() {
  MutexLock lock(&write_mu_);
  return WriteLocked();
}

absl::StatusOr<size_t> StateSaver::WriteLocked() {
  // Cleared before collecting: an override made while the file is written
  // marks it stale again, so it is never lost.
  stale_.store(false, std::memory_order_release);
  const std::vector<SavedBreaker> breakers =
      CollectState(*registry_, wall_now_(), decided_at_);
  if (absl::Status s = WriteStateFile(path_, breakers); !s.ok()) {
    stale_.store(true, std::memory_order_release);
    return s;
  }
  return breakers.size();
}

}  // namespace breakerd

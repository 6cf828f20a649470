#include "server/engine/mutex.h"

#include <mutex>

namespace breakerd {

void DisableDeadlockDetection() {
#ifndef BREAKERD_STD_MUTEX
  static std::once_flag once;
  std::call_once(once, [] {
    absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  });
#endif
}

}  // namespace breakerd

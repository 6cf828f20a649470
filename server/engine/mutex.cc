#include "server/engine/mutex.h"

#include <sched.h>

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

void SpinLock::LockSlow() {
  for (int spins = 0;; ++spins) {
    // Wait on a plain load (no cache-line ping-pong), then try again.
    while (held_.load(std::memory_order_relaxed)) {
      if (spins < 64) {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
        ++spins;
      } else {
        sched_yield();
      }
    }
    if (!held_.exchange(true, std::memory_order_acquire)) return;
  }
}

}  // namespace breakerd

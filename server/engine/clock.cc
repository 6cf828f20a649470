#include "server/engine/clock.h"

#include <chrono>

namespace breakerd {

int64_t MonotonicClock::NowNanos() const {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

MonotonicClock* MonotonicClock::Get() {
  static MonotonicClock* const clock = new MonotonicClock();
  return clock;
}

// One day past the epoch, so that "now - something" never underflows in tests.
FakeClock::FakeClock() : nanos_(int64_t{86400} * 1000000000) {}

int64_t FakeClock::NowNanos() const {
  return nanos_.load(std::memory_order_acquire);
}

void FakeClock::Advance(absl::Duration d) {
  nanos_.fetch_add(absl::ToInt64Nanoseconds(d), std::memory_order_acq_rel);
}

}  // namespace breakerd

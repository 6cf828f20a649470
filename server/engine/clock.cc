#include "server/engine/clock.h"

#include <chrono>

namespace breakerd {

absl::Time MonotonicClock::Now() const {
  return absl::UnixEpoch() +
         absl::FromChrono(std::chrono::steady_clock::now().time_since_epoch());
}

MonotonicClock* MonotonicClock::Get() {
  static MonotonicClock* const clock = new MonotonicClock();
  return clock;
}

// One day past the epoch, so that "now - something" never underflows in tests.
FakeClock::FakeClock() : nanos_(int64_t{86400} * 1000000000) {}

absl::Time FakeClock::Now() const {
  return absl::UnixEpoch() +
         absl::Nanoseconds(nanos_.load(std::memory_order_acquire));
}

void FakeClock::Advance(absl::Duration d) {
  nanos_.fetch_add(absl::ToInt64Nanoseconds(d), std::memory_order_acq_rel);
}

}  // namespace breakerd

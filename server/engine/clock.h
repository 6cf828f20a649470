// Time source for the engine. Every time-based rule reads a Clock, never the
// system directly, so tests drive time with FakeClock and never sleep.
//
// Thread-safety: Now() may be called from any thread concurrently; FakeClock
// setters are also thread-safe.
#ifndef BREAKERD_SERVER_ENGINE_CLOCK_H_
#define BREAKERD_SERVER_ENGINE_CLOCK_H_

#include <atomic>
#include <cstdint>

#include "absl/time/time.h"

namespace breakerd {

class Clock {
 public:
  virtual ~Clock() = default;
  // A monotonic instant, in nanoseconds. Only differences between two values
  // are meaningful; the absolute value is not wall-clock time.
  virtual int64_t NowNanos() const = 0;
  // The same instant as an absl::Time (cheap: inline conversion).
  absl::Time Now() const { return absl::FromUnixNanos(NowNanos()); }
};

// The process's monotonic clock: CLOCK_MONOTONIC_COARSE where its
// resolution is at most 10 ms (cheap to read), else CLOCK_MONOTONIC.
class MonotonicClock final : public Clock {
 public:
  int64_t NowNanos() const override;
  // A shared instance; never destroyed.
  static MonotonicClock* Get();
};

// A clock that moves only when told to. Starts at an arbitrary fixed instant.
class FakeClock final : public Clock {
 public:
  FakeClock();
  int64_t NowNanos() const override;
  void Advance(absl::Duration d);

 private:
  std::atomic<int64_t> nanos_;
};

}  // namespace breakerd

#endif  // BREAKERD_SERVER_ENGINE_CLOCK_H_

// Internal to breakerd::client, not part of its API (that is
// breakerd/client.h).
//
// Time for the client's time-based rules (the availability log's rate
// limit), injected so that tests move it by hand (Debian's Abseil has no
// absl::Clock interface). Clock is a monotonic clock; Timer runs a task once
// after a delay. SteadyClock and ThreadTimer are the real ones.
//
// Thread-safety: implementations are thread-safe.
#ifndef BREAKERD_CLIENT_CPP_INCLUDE_BREAKERD_INTERNAL_CLOCK_H_
#define BREAKERD_CLIENT_CPP_INCLUDE_BREAKERD_INTERNAL_CLOCK_H_

#include <functional>
#include <map>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace breakerd::client::internal {

class Clock {
 public:
  virtual ~Clock() = default;
  // Monotonic: only differences mean anything.
  virtual absl::Duration Now() = 0;
};

class Timer {
 public:
  virtual ~Timer() = default;
  // Runs `task` once, `delay` from now (at once if not positive), on a
  // thread of the timer's, never on the caller's. May drop the task when
  // the timer is stopped.
  virtual void Schedule(std::function<void()> task, absl::Duration delay) = 0;
};

// std::chrono::steady_clock.
class SteadyClock final : public Clock {
 public:
  absl::Duration Now() override;
};

// A Timer with one thread, started by the first Schedule (a client whose
// logs never hold a line back never starts it).
class ThreadTimer final : public Timer {
 public:
  ThreadTimer() = default;
  // Stop().
  ~ThreadTimer() override;

  ThreadTimer(const ThreadTimer&) = delete;
  ThreadTimer& operator=(const ThreadTimer&) = delete;

  void Schedule(std::function<void()> task, absl::Duration delay) override
      ABSL_LOCKS_EXCLUDED(mu_);

  // Drops the tasks not yet run, waits for one running to end and joins
  // the thread; later Schedules are dropped. Idempotent.
  // REQUIRES: not called from a task.
  void Stop() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void Loop() ABSL_LOCKS_EXCLUDED(mu_);

  absl::Mutex mu_;
  // Signalled when a task is scheduled or the timer stops.
  absl::CondVar changed_;
  // Due time (absl::Now()) -> task; equal times run in the order scheduled.
  std::multimap<absl::Time, std::function<void()>> tasks_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_ ABSL_GUARDED_BY(mu_);
};

}  // namespace breakerd::client::internal

#endif  // BREAKERD_CLIENT_CPP_INCLUDE_BREAKERD_INTERNAL_CLOCK_H_

#include "breakerd/internal/clock.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "absl/time/clock.h"

namespace breakerd::client::internal {

absl::Duration SteadyClock::Now() {
  return absl::FromChrono(std::chrono::steady_clock::now().time_since_epoch());
}

ThreadTimer::~ThreadTimer() { Stop(); }

void ThreadTimer::Schedule(std::function<void()> task, absl::Duration delay) {
  absl::MutexLock lock(&mu_);
  if (stopping_) return;
  tasks_.emplace(absl::Now() + std::max(delay, absl::ZeroDuration()),
                 std::move(task));
  changed_.Signal();
  if (!thread_.joinable()) thread_ = std::thread([this] { Loop(); });
}

void ThreadTimer::Stop() {
  std::thread thread;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    tasks_.clear();
    changed_.Signal();
    thread = std::move(thread_);
  }
  if (thread.joinable()) thread.join();
}

void ThreadTimer::Loop() {
  mu_.Lock();
  while (!stopping_) {
    if (tasks_.empty()) {
      changed_.Wait(&mu_);
      continue;
    }
    const absl::Time due = tasks_.begin()->first;
    if (due > absl::Now()) {
      changed_.WaitWithDeadline(&mu_, due);
      continue;
    }
    // Run outside the lock: the task takes its own.
    std::function<void()> task = std::move(tasks_.begin()->second);
    tasks_.erase(tasks_.begin());
    mu_.Unlock();
    task();
    mu_.Lock();
  }
  mu_.Unlock();
}

}  // namespace breakerd::client::internal

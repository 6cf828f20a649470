// breakerd's mutexes, carrying the Abseil thread-safety annotations so
// clang -Wthread-safety checks every ABSL_GUARDED_BY field.
//
// Normal builds use absl::Mutex: 8 bytes and a single compare-and-swap to
// lock or unlock uncontended (about half the instructions of a pthread
// mutex, and far fewer than a pthread rwlock), with the deadlock detection
// that Debian's Abseil build turns on switched off once (see
// DisableDeadlockDetection) because it costs a global graph lookup per lock.
// ThreadSanitizer builds use std::mutex / std::shared_mutex instead:
// Debian's prebuilt Abseil is not instrumented, so TSan could not see its
// synchronization and would report false races.
//
// Thread-safety: these are the synchronization primitives.
#ifndef BREAKERD_SERVER_ENGINE_MUTEX_H_
#define BREAKERD_SERVER_ENGINE_MUTEX_H_

#include "absl/base/thread_annotations.h"

#if defined(__SANITIZE_THREAD__)
#define BREAKERD_STD_MUTEX 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define BREAKERD_STD_MUTEX 1
#endif
#endif

#include <atomic>

#include "absl/time/time.h"

#ifdef BREAKERD_STD_MUTEX
#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <shared_mutex>
#else
#include "absl/synchronization/mutex.h"
#endif

namespace breakerd {

// Turns off absl::Mutex's debug-build deadlock detection, once per process.
// Thread-safe; cheap after the first call.
void DisableDeadlockDetection();

#ifdef BREAKERD_STD_MUTEX
using ExclusiveImpl = std::mutex;
using SharedImpl = std::shared_mutex;
using CondVarImpl = std::condition_variable;
#define BREAKERD_LOCK lock
#define BREAKERD_UNLOCK unlock
#define BREAKERD_RLOCK lock_shared
#define BREAKERD_RUNLOCK unlock_shared
#else
using ExclusiveImpl = absl::Mutex;
using SharedImpl = absl::Mutex;
using CondVarImpl = absl::CondVar;
#define BREAKERD_LOCK Lock
#define BREAKERD_UNLOCK Unlock
#define BREAKERD_RLOCK ReaderLock
#define BREAKERD_RUNLOCK ReaderUnlock
#endif

// An exclusive lock.
class ABSL_LOCKABLE Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;
  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { mu_.BREAKERD_LOCK(); }
  void Unlock() ABSL_UNLOCK_FUNCTION() { mu_.BREAKERD_UNLOCK(); }

 private:
  friend class CondVar;
  ExclusiveImpl mu_;
};

// A lock for critical sections of a few hundred nanoseconds taken millions
// of times a second: the Registry's shard locks. Uncontended, locking is one
// atomic exchange and unlocking one release store, all inline (an
// absl::Mutex lock and unlock cost about 60 instructions in out-of-line
// calls). A contended caller spins briefly on a plain load, then yields
// the CPU between tries, so a holder that was preempted gets to run.
// Not fair, not reentrant; no condition variable. ThreadSanitizer sees the
// atomics, so it is instrumented in every build.
class ABSL_LOCKABLE SpinLock {
 public:
  SpinLock() = default;
  SpinLock(const SpinLock&) = delete;
  SpinLock& operator=(const SpinLock&) = delete;
  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() {
    if (!held_.exchange(true, std::memory_order_acquire)) return;
    LockSlow();
  }
  void Unlock() ABSL_UNLOCK_FUNCTION() {
    held_.store(false, std::memory_order_release);
  }

 private:
  void LockSlow();
  std::atomic<bool> held_{false};
};

// A condition variable for Mutex. Waits may return spuriously: wait in a
// loop that re-checks the condition. Whoever changes what a waiter waits for
// calls SignalAll after the change (under the mutex or after it).
class CondVar {
 public:
  CondVar() = default;
  CondVar(const CondVar&) = delete;
  CondVar& operator=(const CondVar&) = delete;

  // REQUIRES: `mu` held. Releases it while waiting, holds it again on return.
  void Wait(Mutex* mu) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
#ifdef BREAKERD_STD_MUTEX
    std::unique_lock<std::mutex> lock(mu->mu_, std::adopt_lock);
    cv_.wait(lock);
    lock.release();
#else
    cv_.Wait(&mu->mu_);
#endif
  }

  // As Wait, for at most `timeout` (absl::InfiniteDuration(): no bound).
  // Returns true if the time ran out, false if woken (or spuriously).
  bool WaitWithTimeout(Mutex* mu, absl::Duration timeout)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    if (timeout == absl::InfiniteDuration()) {
      Wait(mu);
      return false;
    }
#ifdef BREAKERD_STD_MUTEX
    // Capped so that now + timeout cannot overflow steady_clock; a wait
    // that returns early is a spurious wakeup, which callers handle.
    std::unique_lock<std::mutex> lock(mu->mu_, std::adopt_lock);
    const bool timed_out =
        cv_.wait_for(lock, absl::ToChronoNanoseconds(
                               std::min(timeout, absl::Hours(24)))) ==
        std::cv_status::timeout;
    lock.release();
    return timed_out;
#else
    return cv_.WaitWithTimeout(&mu->mu_, timeout);
#endif
  }

  // Wakes every waiter.
  void SignalAll() {
#ifdef BREAKERD_STD_MUTEX
    cv_.notify_all();
#else
    cv_.SignalAll();
#endif
  }

 private:
  CondVarImpl cv_;
};

// A reader/writer lock.
class ABSL_LOCKABLE SharedMutex {
 public:
  SharedMutex() = default;
  SharedMutex(const SharedMutex&) = delete;
  SharedMutex& operator=(const SharedMutex&) = delete;
  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { mu_.BREAKERD_LOCK(); }
  void Unlock() ABSL_UNLOCK_FUNCTION() { mu_.BREAKERD_UNLOCK(); }
  void ReaderLock() ABSL_SHARED_LOCK_FUNCTION() { mu_.BREAKERD_RLOCK(); }
  void ReaderUnlock() ABSL_UNLOCK_FUNCTION() { mu_.BREAKERD_RUNLOCK(); }

 private:
  SharedImpl mu_;
};

// Holds `mu` exclusively for its scope.
template <typename M>
class ABSL_SCOPED_LOCKABLE ScopedLock {
 public:
  explicit ScopedLock(M* mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : mu_(mu) {
    mu_->Lock();
  }
  ~ScopedLock() ABSL_UNLOCK_FUNCTION() { mu_->Unlock(); }
  ScopedLock(const ScopedLock&) = delete;
  ScopedLock& operator=(const ScopedLock&) = delete;

 private:
  M* const mu_;
};
using MutexLock = ScopedLock<Mutex>;
using SpinLockHolder = ScopedLock<SpinLock>;
using WriterMutexLock = ScopedLock<SharedMutex>;

// Holds `mu` shared for its scope.
class ABSL_SCOPED_LOCKABLE ReaderMutexLock {
 public:
  explicit ReaderMutexLock(SharedMutex* mu) ABSL_SHARED_LOCK_FUNCTION(mu)
      : mu_(mu) {
    mu_->ReaderLock();
  }
  ~ReaderMutexLock() ABSL_UNLOCK_FUNCTION() { mu_->ReaderUnlock(); }
  ReaderMutexLock(const ReaderMutexLock&) = delete;
  ReaderMutexLock& operator=(const ReaderMutexLock&) = delete;

 private:
  SharedMutex* const mu_;
};

}  // namespace breakerd

#undef BREAKERD_LOCK
#undef BREAKERD_UNLOCK
#undef BREAKERD_RLOCK
#undef BREAKERD_RUNLOCK

#endif  // BREAKERD_SERVER_ENGINE_MUTEX_H_

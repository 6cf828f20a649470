// breakerd's mutexes: thin wrappers over std::mutex and std::shared_mutex
// that carry the Abseil thread-safety annotations, so clang -Wthread-safety
// checks every ABSL_GUARDED_BY field.
//
// Why not absl::Mutex: Debian's prebuilt Abseil is not instrumented for
// ThreadSanitizer (TSan cannot see its synchronization and reports false
// races), and it is built with deadlock detection on, which costs a graph
// lookup per lock on the hot path. pthread mutexes are intercepted by TSan
// and cost ~20 ns uncontended.
//
// Thread-safety: these are the synchronization primitives.
#ifndef BREAKERD_SERVER_ENGINE_MUTEX_H_
#define BREAKERD_SERVER_ENGINE_MUTEX_H_

#include <mutex>
#include <shared_mutex>

#include "absl/base/thread_annotations.h"

namespace breakerd {

// An exclusive lock.
class ABSL_LOCKABLE Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;
  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { mu_.lock(); }
  void Unlock() ABSL_UNLOCK_FUNCTION() { mu_.unlock(); }
  // For std::condition_variable_any.
  void lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { mu_.lock(); }
  void unlock() ABSL_UNLOCK_FUNCTION() { mu_.unlock(); }

 private:
  std::mutex mu_;
};

// A reader/writer lock.
class ABSL_LOCKABLE SharedMutex {
 public:
  SharedMutex() = default;
  SharedMutex(const SharedMutex&) = delete;
  SharedMutex& operator=(const SharedMutex&) = delete;
  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { mu_.lock(); }
  void Unlock() ABSL_UNLOCK_FUNCTION() { mu_.unlock(); }
  void ReaderLock() ABSL_SHARED_LOCK_FUNCTION() { mu_.lock_shared(); }
  void ReaderUnlock() ABSL_UNLOCK_FUNCTION() { mu_.unlock_shared(); }

 private:
  std::shared_mutex mu_;
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

#endif  // BREAKERD_SERVER_ENGINE_MUTEX_H_

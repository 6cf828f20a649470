// breakerd's mutex: absl::Mutex in normal builds (8 bytes, fast), and
// std::shared_mutex under ThreadSanitizer, because Debian's prebuilt Abseil
// is not instrumented and TSan cannot see absl::Mutex's synchronization.
// Either way it carries the Abseil thread-safety annotations, so clang
// -Wthread-safety checks every ABSL_GUARDED_BY field.
//
// Thread-safety: it is the synchronization primitive.
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

#ifdef BREAKERD_STD_MUTEX
#include <shared_mutex>
#else
#include "absl/synchronization/mutex.h"
#endif

namespace breakerd {

class ABSL_LOCKABLE Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

#ifdef BREAKERD_STD_MUTEX
  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { mu_.lock(); }
  void Unlock() ABSL_UNLOCK_FUNCTION() { mu_.unlock(); }
  void ReaderLock() ABSL_SHARED_LOCK_FUNCTION() { mu_.lock_shared(); }
  void ReaderUnlock() ABSL_UNLOCK_FUNCTION() { mu_.unlock_shared(); }

 private:
  std::shared_mutex mu_;
#else
  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { mu_.Lock(); }
  void Unlock() ABSL_UNLOCK_FUNCTION() { mu_.Unlock(); }
  void ReaderLock() ABSL_SHARED_LOCK_FUNCTION() { mu_.ReaderLock(); }
  void ReaderUnlock() ABSL_UNLOCK_FUNCTION() { mu_.ReaderUnlock(); }

 private:
  absl::Mutex mu_;
#endif
};

class ABSL_SCOPED_LOCKABLE MutexLock {
 public:
  explicit MutexLock(Mutex* mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : mu_(mu) {
    mu_->Lock();
  }
  ~MutexLock() ABSL_UNLOCK_FUNCTION() { mu_->Unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex* const mu_;
};

class ABSL_SCOPED_LOCKABLE ReaderMutexLock {
 public:
  explicit ReaderMutexLock(Mutex* mu) ABSL_SHARED_LOCK_FUNCTION(mu) : mu_(mu) {
    mu_->ReaderLock();
  }
  ~ReaderMutexLock() ABSL_UNLOCK_FUNCTION() { mu_->ReaderUnlock(); }
  ReaderMutexLock(const ReaderMutexLock&) = delete;
  ReaderMutexLock& operator=(const ReaderMutexLock&) = delete;

 private:
  Mutex* const mu_;
};

}  // namespace breakerd

#endif  // BREAKERD_SERVER_ENGINE_MUTEX_H_

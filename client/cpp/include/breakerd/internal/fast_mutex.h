// Internal to breakerd::client, not part of its API (that is
// breakerd/client.h).
//
// The locks of the client's fast path (a guarded call granted locally):
// every such call takes the Watch cache's lock for reading and one lock of
// the outcome batch, each held for a hash lookup or an append. They are
// spin locks (one exchange to lock, one store to unlock, uncontended), not
// absl::Mutex: Debian's Abseil keeps absl::Mutex's deadlock detection on
// unless the application turns it off, and then each lock costs a global
// graph lookup (about 80 ns here, a third of the fast path's budget); a
// pthread mutex costs about 20 ns a lock and unlock. A waiter spins a
// little, then yields its CPU, then sleeps (a holder preempted on a busy
// machine gets to run, and so do gRPC's threads). The annotations keep clang's
// -Wthread-safety checking what they guard; ThreadSanitizer sees the atomics.
//
// StdMutex is std::mutex with the annotations, for the locks around the
// fast path (the batch's flusher side): it blocks instead of spinning, and
// ThreadSanitizer sees it, which it cannot do for Debian's uninstrumented
// absl::Mutex.
//
// FastMutex is a plain spin lock. ShardedSharedMutex is a reader-writer lock
// for data read on every call and written rarely (the Watch cache): one
// FastMutex per shard of threads; a reader locks its thread's shard only
// (readers on different threads rarely share a cache line), a writer locks
// every shard.
//
// Thread-safety: these are the synchronization primitives.
#ifndef BREAKERD_CLIENT_CPP_INCLUDE_BREAKERD_INTERNAL_FAST_MUTEX_H_
#define BREAKERD_CLIENT_CPP_INCLUDE_BREAKERD_INTERNAL_FAST_MUTEX_H_

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <mutex>
#include <thread>

#include "absl/base/thread_annotations.h"

namespace breakerd::client::internal {

class ABSL_LOCKABLE FastMutex {
 public:
  FastMutex() = default;
  FastMutex(const FastMutex&) = delete;
  FastMutex& operator=(const FastMutex&) = delete;

  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() {
    if (held_.exchange(true, std::memory_order_acquire)) LockSlow();
  }
  void Unlock() ABSL_UNLOCK_FUNCTION() {
    held_.store(false, std::memory_order_release);
  }

 private:
  // Spins a little, then yields, then sleeps: with hundreds of threads on
  // two cores (a burst of guarded calls, one thread each), waiters that
  // only spin or yield keep the holder and gRPC's own threads from the CPU
  // for milliseconds, and Acquire answers arrive after their deadline (the
  // `burst` conformance test saw 476 of 1,000 fail open). Uncontended, the
  // lock is still one exchange.
  void LockSlow() {
    for (int waits = 0;; ++waits) {
      // Wait on a plain load (no cache-line ping-pong), then try again.
      while (held_.load(std::memory_order_relaxed)) {
        if (waits < 64) {
#if defined(__x86_64__) || defined(__i386__)
          __builtin_ia32_pause();
#endif
        } else if (waits < 80) {
          std::this_thread::yield();
        } else {
          std::this_thread::sleep_for(std::chrono::microseconds(20));
        }
        ++waits;
      }
      if (!held_.exchange(true, std::memory_order_acquire)) return;
    }
  }

  std::atomic<bool> held_{false};
};

class ABSL_LOCKABLE StdMutex {
 public:
  StdMutex() = default;
  StdMutex(const StdMutex&) = delete;
  StdMutex& operator=(const StdMutex&) = delete;

  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { mu_.lock(); }
  void Unlock() ABSL_UNLOCK_FUNCTION() { mu_.unlock(); }

 private:
  std::mutex mu_;
};

// Holds a StdMutex for its scope.
class ABSL_SCOPED_LOCKABLE StdLock {
 public:
  explicit StdLock(StdMutex* mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : mu_(mu) {
    mu_->Lock();
  }
  ~StdLock() ABSL_UNLOCK_FUNCTION() { mu_->Unlock(); }

  StdLock(const StdLock&) = delete;
  StdLock& operator=(const StdLock&) = delete;

 private:
  StdMutex* const mu_;
};

// Holds a FastMutex for its scope.
class ABSL_SCOPED_LOCKABLE FastLock {
 public:
  explicit FastLock(FastMutex* mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : mu_(mu) {
    mu_->Lock();
  }
  ~FastLock() ABSL_UNLOCK_FUNCTION() { mu_->Unlock(); }

  FastLock(const FastLock&) = delete;
  FastLock& operator=(const FastLock&) = delete;

 private:
  FastMutex* const mu_;
};

// The shard of the calling thread, 0 to kThreadShards - 1: threads take
// shards round robin as they first ask.
inline constexpr size_t kThreadShards = 8;
inline size_t ThreadShard() {
  static std::atomic<size_t> next{0};
  thread_local const size_t shard =
      next.fetch_add(1, std::memory_order_relaxed) % kThreadShards;
  return shard;
}

class ABSL_LOCKABLE ShardedSharedMutex {
 public:
  ShardedSharedMutex() = default;
  ShardedSharedMutex(const ShardedSharedMutex&) = delete;
  ShardedSharedMutex& operator=(const ShardedSharedMutex&) = delete;

  // Every shard, in order.
  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    for (Shard& s : shards_) s.mu.Lock();
  }
  void Unlock() ABSL_UNLOCK_FUNCTION() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    for (size_t i = shards_.size(); i > 0; --i) shards_[i - 1].mu.Unlock();
  }

  // The calling thread's shard; returns it, for ReaderUnlock.
  size_t ReaderLock()
      ABSL_SHARED_LOCK_FUNCTION() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    const size_t shard = ThreadShard();
    shards_[shard].mu.Lock();
    return shard;
  }
  void ReaderUnlock(size_t shard)
      ABSL_UNLOCK_FUNCTION() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    shards_[shard].mu.Unlock();
  }

 private:
  struct alignas(64) Shard {
    FastMutex mu;
  };
  std::array<Shard, kThreadShards> shards_;
};

class ABSL_SCOPED_LOCKABLE ShardedReaderLock {
 public:
  explicit ShardedReaderLock(const ShardedSharedMutex* mu)
      ABSL_SHARED_LOCK_FUNCTION(mu)
      : mu_(const_cast<ShardedSharedMutex*>(mu)), shard_(mu_->ReaderLock()) {}
  ~ShardedReaderLock() ABSL_UNLOCK_FUNCTION() { mu_->ReaderUnlock(shard_); }

  ShardedReaderLock(const ShardedReaderLock&) = delete;
  ShardedReaderLock& operator=(const ShardedReaderLock&) = delete;

 private:
  ShardedSharedMutex* const mu_;
  const size_t shard_;
};

class ABSL_SCOPED_LOCKABLE ShardedWriterLock {
 public:
  explicit ShardedWriterLock(ShardedSharedMutex* mu)
      ABSL_EXCLUSIVE_LOCK_FUNCTION(mu)
      : mu_(mu) {
    mu_->Lock();
  }
  ~ShardedWriterLock() ABSL_UNLOCK_FUNCTION() { mu_->Unlock(); }

  ShardedWriterLock(const ShardedWriterLock&) = delete;
  ShardedWriterLock& operator=(const ShardedWriterLock&) = delete;

 private:
  ShardedSharedMutex* const mu_;
};

}  // namespace breakerd::client::internal

#endif  // BREAKERD_CLIENT_CPP_INCLUDE_BREAKERD_INTERNAL_FAST_MUTEX_H_

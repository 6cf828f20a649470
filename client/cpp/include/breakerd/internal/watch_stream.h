// Internal to breakerd::client, not part of its API (that is
// breakerd/client.h).
//
// WatchStream: the client's one Watch stream (every dependency) and the
// WatchCache it feeds (client/README.md, "Local refusal", "Local
// decisions"). A thread of its own reads the stream into the cache; when
// the stream ends or fails, the cache is cleared at once (every decision
// goes to breakerd: no local grant without a live stream) and the stream
// is started again after a full-jitter backoff, doubling from
// backoff_initial to backoff_max, and back to backoff_initial after a
// stream that was live. The stream is live once breakerd's headers say it
// is subscribed, or its first message arrives.
//
// Thread-safety: thread-safe.
#ifndef BREAKERD_CLIENT_CPP_INCLUDE_BREAKERD_INTERNAL_WATCH_STREAM_H_
#define BREAKERD_CLIENT_CPP_INCLUDE_BREAKERD_INTERNAL_WATCH_STREAM_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "breakerd/client.h"
#include "breakerd/internal/clock.h"
#include "breakerd/internal/fast_mutex.h"
#include "breakerd/internal/watch_cache.h"
#include "breakerd/v1/breaker.grpc.pb.h"
#include "grpcpp/client_context.h"

namespace breakerd::client::internal {

class WatchStream {
 public:
  struct Options {
    // The client's stub. Outlives the stream.
    v1::Breaker::Stub* stub = nullptr;
    // Monotonic time, for the cooldown ends. Outlives the stream.
    Clock* clock = nullptr;
    // The reconnect backoff. REQUIRES: 0 < initial <= max.
    absl::Duration backoff_initial = absl::Milliseconds(100);
    absl::Duration backoff_max = absl::Seconds(5);
    // A wait drawn uniformly from [0, upper] (full jitter).
    std::function<absl::Duration(absl::Duration upper)> jitter;
    // Called after each message, on the stream's thread with no lock of
    // the stream held: breakerd is there.
    std::function<void()> on_message;
  };

  // Starts the stream's thread.
  // REQUIRES: every field of `options` set.
  explicit WatchStream(Options options);
  // Stop().
  ~WatchStream();

  WatchStream(const WatchStream&) = delete;
  WatchStream& operator=(const WatchStream&) = delete;

  // Ends the stream and joins its thread; the cache stays empty.
  // Idempotent.
  void Stop() ABSL_LOCKS_EXCLUDED(mu_);

  // The cache's decision for `dependency` now (WatchCache::Decide): one
  // lookup under a shared lock, the clock read only for an open breaker.
  CacheVerdict Decide(absl::string_view dependency, bool may_grant) const
      ABSL_LOCKS_EXCLUDED(cache_mu_);
  // The state the cache holds for `dependency` (nullopt: unknown, or the
  // stream is down).
  std::optional<State> CachedState(absl::string_view dependency) const
      ABSL_LOCKS_EXCLUDED(cache_mu_);
  // True while the stream is live.
  bool connected() const ABSL_LOCKS_EXCLUDED(mu_);
  // Times the stream ended and was started again.
  uint64_t reconnects() const {
    return reconnects_.load(std::memory_order_relaxed);
  }

 private:
  // One stream at a time until Stop.
  void Loop() ABSL_LOCKS_EXCLUDED(mu_, cache_mu_);

  // Constant after construction.
  const Options options_;

  std::atomic<uint64_t> reconnects_{0};

  mutable absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool connected_ ABSL_GUARDED_BY(mu_) = false;
  // The stream's context, for Stop to cancel it.
  grpc::ClientContext* context_ ABSL_GUARDED_BY(mu_) = nullptr;
  // Read by every decision, written by the stream's thread: a lock of its
  // own, cheap to share (fast_mutex.h).
  mutable ShardedSharedMutex cache_mu_;
  WatchCache cache_ ABSL_GUARDED_BY(cache_mu_);
  std::thread thread_;
};

}  // namespace breakerd::client::internal

#endif  // BREAKERD_CLIENT_CPP_INCLUDE_BREAKERD_INTERNAL_WATCH_STREAM_H_

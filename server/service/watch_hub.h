// WatchHub fans breaker transitions out to Watch streams.
//
// It is a TransitionObserver: the Registry calls OnTransition on the request
// path, and the hub queues a StateChange on every stream that watches that
// dependency without ever waiting for a client. Each stream writes one
// message at a time from its own queue; a stream whose client falls more
// than `max_queue` messages behind is ended with RESOURCE_EXHAUSTED so that a
// stuck client costs bounded memory.
//
// Memory is bounded for all streams together too:
//   - a Watch of every dependency reads its initial states lazily, one
//     Registry shard at a time, the next only once the previous one is
//     written: a stream that does not read holds about 1/256 of the
//     breakers' states, not all of them;
//   - at most `max_queued_total` messages wait in all queues together; past
//     it, a stream holding at least its fair share (max_queued_total /
//     streams) is ended with RESOURCE_EXHAUSTED when it is handed one more;
//   - a Watch of every dependency is admitted by the ReadLimiter (charged
//     the registry's size), so looping it cannot take the CPU that others'
//     Acquire needs.
//
// Wiring: the hub does not register itself; call
// registry->AddObserver(&hub) before serving. Shutdown() before
// grpc::Server::Shutdown(), and destroy the hub only after the server has
// shut down (every stream's OnDone calls back into the hub).
//
// Thread-safety: every public method is thread-safe.
#ifndef BREAKERD_SERVER_SERVICE_WATCH_HUB_H_
#define BREAKERD_SERVER_SERVICE_WATCH_HUB_H_

#include <atomic>
#include <cstddef>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "breakerd/v1/breaker.grpc.pb.h"
#include "grpcpp/server_context.h"
#include "grpcpp/support/server_callback.h"
#include "server/engine/mutex.h"
#include "server/engine/registry.h"
#include "server/engine/types.h"
#include "server/service/read_limiter.h"

namespace breakerd {

class WatchHub final : public TransitionObserver {
 public:
  // Response header of a Watch stream that is subscribed (value "1").
  static constexpr absl::string_view kSubscribedHeader =
      "breakerd-watch-subscribed";

  // Most dependencies one Watch request may name.
  static constexpr size_t kMaxWatchDependencies = 64;

  // Most messages queued for all streams together, by default (about 16 MB
  // of StateChange messages).
  static constexpr size_t kDefaultMaxQueuedTotal = 65536;

  // REQUIRES: `registry` is non-null and outlives the hub, and so does
  // `read_limiter` if not null (null: Watch of every dependency is not
  // limited). `max_streams`: most concurrent Watch streams (default 1024);
  // `max_queue`: most transitions queued for one stream behind the write in
  // flight (default 1024; the initial states and notices do not count);
  // `max_queued_total`: see above.
  explicit WatchHub(Registry* registry, size_t max_streams = 1024,
                    size_t max_queue = 1024,
                    ReadLimiter* read_limiter = nullptr,
                    size_t max_queued_total = kDefaultMaxQueuedTotal);
  // REQUIRES: no stream is open (Shutdown(), then grpc::Server::Shutdown()
  // has returned).
  ~WatchHub() override;

  WatchHub(const WatchHub&) = delete;
  WatchHub& operator=(const WatchHub&) = delete;

  // Queues `t` on every stream watching t.dependency (and on every stream
  // watching all). Never blocks on a client; never calls the Registry.
  void OnTransition(const Transition& t) override;

  // Starts one Watch stream for `request` and returns its reactor, which
  // gRPC owns (it deletes itself after OnDone). The stream is subscribed
  // before the current states are read, so no transition is missed. A bad
  // request (INVALID_ARGUMENT naming dependencies[i] or the name limit), too
  // many streams (RESOURCE_EXHAUSTED) or a hub that is shut down
  // (UNAVAILABLE) ends the stream at once with that status.
  // REQUIRES: called from a Breaker::CallbackService Watch handler.
  // A subscribed stream sends its response headers at once, carrying
  // kSubscribedHeader (when `context` is given), before any state.
  grpc::ServerWriteReactor<v1::StateChange>* StartStream(
      const v1::WatchRequest& request,
      grpc::CallbackServerContext* context = nullptr);

  // Ends every open stream with UNAVAILABLE "breakerd is shutting down" and
  // refuses new ones, so that grpc::Server::Shutdown() does not wait on
  // them. Idempotent.
  void Shutdown();

  // Streams receiving transitions: open and not ending. A stream stops
  // counting (against max_streams too) as soon as its end is decided.
  size_t active_streams() const;

  // Messages queued for all streams together (initial states included).
  size_t queued_messages() const {
    return queued_total_.load(std::memory_order_relaxed);
  }

 private:
  class Stream;

  // Adds `stream` to the fan-out. Returns UNAVAILABLE after Shutdown and
  // RESOURCE_EXHAUSTED at max_streams.
  absl::Status Subscribe(Stream* stream);
  // Removes `stream`; once this returns the hub takes no new reference to
  // it. Idempotent; a stream never subscribed is ignored.
  void Unsubscribe(Stream* stream);

  // Constant after construction.
  Registry* const registry_;
  const size_t max_streams_;
  const size_t max_queue_;
  ReadLimiter* const read_limiter_;
  const size_t max_queued_total_;

  // Messages queued in all streams; streams subscribed (streams_.size(),
  // readable without mu_).
  std::atomic<size_t> queued_total_{0};
  std::atomic<size_t> subscribed_{0};

  mutable SharedMutex mu_;
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
  // Every subscribed stream.
  absl::flat_hash_set<Stream*> streams_ ABSL_GUARDED_BY(mu_);
  // The subscribed streams that named no dependency (they watch all).
  absl::flat_hash_set<Stream*> watch_all_ ABSL_GUARDED_BY(mu_);
  // dependency -> the subscribed streams that named it.
  absl::flat_hash_map<std::string, absl::flat_hash_set<Stream*>> by_name_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace breakerd

#endif  // BREAKERD_SERVER_SERVICE_WATCH_HUB_H_

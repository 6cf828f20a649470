// breakerd's grpc.health.v1.Health service, in place of gRPC's default one
// (grpc::EnableDefaultHealthCheckService), which bounds nothing: every
// Health/Watch stream it admits stays open and costs memory for as long as
// its client keeps it (20,000 streams held 346 MB).
//
// Same wire behaviour as gRPC's default service (and health.proto):
// - a status per service name, "" meaning the whole server ("" is SERVING
//   from construction, as in gRPC's);
// - Check answers the status, or NOT_FOUND for a name with none;
// - Watch sends the current status at once (SERVICE_UNKNOWN for a name with
//   none, and the stream stays open), then a new message whenever that
//   status changes, and only then.
// Bounded where the default is not:
// - at most `max_watch_streams` Watch streams at once (kMaxHealthWatchStreams
//   in breakerd); beyond, a new one ends with RESOURCE_EXHAUSTED naming the
//   limit;
// - each stream keeps at most one message besides the one being written:
//   changes that come while a write is in flight collapse into the latest,
//   so a client that does not read costs constant memory;
// - service names longer than kMaxHealthServiceNameBytes are refused with
//   INVALID_ARGUMENT (gRPC's default refuses them as unparseable).
//
// Wiring: register it with the grpc::ServerBuilder, with the default service
// disabled (grpc::EnableDefaultHealthCheckService(false)). Shutdown() before
// grpc::Server::Shutdown() so the server does not wait on Watch streams
// (but for one whose client stopped reading: give Server::Shutdown a
// deadline); destroy the service only after the server has shut down (every
// stream's OnDone calls back into it).
//
// Thread-safety: every public method is thread-safe; gRPC calls the
// handlers concurrently.
#ifndef BREAKERD_SERVER_SERVICE_HEALTH_SERVICE_H_
#define BREAKERD_SERVER_SERVICE_HEALTH_SERVICE_H_

#include <cstddef>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/server_context.h"
#include "grpcpp/support/server_callback.h"
#include "server/engine/mutex.h"

namespace breakerd {

// Most concurrent Health/Watch streams breakerd admits. Kubernetes probes
// and the clients' away probe use Check; Watch is for a proxy or a mesh
// health checker, a few per pod.
inline constexpr size_t kMaxHealthWatchStreams = 64;

// Longest service name Check and Watch accept, in bytes (gRPC's default
// service's limit too).
inline constexpr size_t kMaxHealthServiceNameBytes = 200;

class HealthService final : public grpc::health::v1::Health::CallbackService {
 public:
  using ServingStatus = grpc::health::v1::HealthCheckResponse::ServingStatus;

  // `max_watch_streams`: most concurrent Watch streams.
  explicit HealthService(size_t max_watch_streams = kMaxHealthWatchStreams);
  // REQUIRES: no Watch stream is open (Shutdown(), then
  // grpc::Server::Shutdown() has returned).
  ~HealthService() override;

  HealthService(const HealthService&) = delete;
  HealthService& operator=(const HealthService&) = delete;

  // Sets `service`'s status (creating it); the streams watching it get the
  // new status if it changed. After Shutdown() every status stays
  // NOT_SERVING: `serving` is ignored (a new name is added NOT_SERVING).
  void SetServingStatus(absl::string_view service, bool serving)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Sets the status of every service known (with "") — the draining path.
  // Nothing after Shutdown().
  void SetServingStatus(bool serving) ABSL_LOCKS_EXCLUDED(mu_);

  // Sets every status to NOT_SERVING for good, ends every Watch stream with
  // UNAVAILABLE "breakerd is shutting down" and refuses new ones the same
  // way. A stream's last status change goes out before its end: a client
  // that reads sees NOT_SERVING, then the end; the end of a stream whose
  // client stopped reading with a change still to send waits until the
  // call is cancelled (grpc::Server::Shutdown's deadline does). Check keeps
  // answering. Idempotent.
  void Shutdown() ABSL_LOCKS_EXCLUDED(mu_);

  // Watch streams open and not ending. A stream stops counting (against
  // max_watch_streams too) as soon as its end is decided.
  size_t active_watches() const ABSL_LOCKS_EXCLUDED(mu_);

  // Statuses waiting behind a write in flight, over every subscribed
  // stream: at most one per stream, however many changes came (they
  // collapse into the latest), so a stream costs constant memory.
  size_t waiting_statuses() const ABSL_LOCKS_EXCLUDED(mu_);

  // OK with SERVING or NOT_SERVING; NOT_FOUND for a service with no status
  // (do not retry: a name breakerd does not serve); INVALID_ARGUMENT for a
  // name longer than kMaxHealthServiceNameBytes.
  grpc::ServerUnaryReactor* Check(
      grpc::CallbackServerContext* context,
      const grpc::health::v1::HealthCheckRequest* request,
      grpc::health::v1::HealthCheckResponse* response) override;

  // The current status, then each change. Ends with INVALID_ARGUMENT for a
  // name longer than kMaxHealthServiceNameBytes, RESOURCE_EXHAUSTED at
  // max_watch_streams (retry later), UNAVAILABLE once shut down (retry
  // another time: breakerd is stopping), CANCELLED when the client goes.
  grpc::ServerWriteReactor<grpc::health::v1::HealthCheckResponse>* Watch(
      grpc::CallbackServerContext* context,
      const grpc::health::v1::HealthCheckRequest* request) override;

 private:
  class Stream;

  // Adds `stream` (watching `stream->service()`) and hands it the current
  // status, in one step under mu_ so no change is missed or reordered.
  // UNAVAILABLE after Shutdown, RESOURCE_EXHAUSTED at max_watch_streams_.
  absl::Status Subscribe(Stream* stream) ABSL_LOCKS_EXCLUDED(mu_);
  // Removes `stream`; once this returns the service takes no new reference
  // to it. Idempotent; a stream never subscribed is ignored.
  void Unsubscribe(Stream* stream) ABSL_LOCKS_EXCLUDED(mu_);
  // Hands `status`, `service`'s new status, to the streams watching it;
  // each gets a reference that the caller drops with FlushAndUnref after
  // releasing mu_ (no call into gRPC under mu_).
  void NotifyLocked(const std::string& service, ServingStatus status,
                    std::vector<Stream*>* notified)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Issues what each stream in `notified` has due and drops the reference
  // NotifyLocked took.
  static void FlushAndUnref(const std::vector<Stream*>& notified);

  // Constant after construction.
  const size_t max_watch_streams_;

  mutable Mutex mu_;
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
  // service name -> SERVING or NOT_SERVING. Only SetServingStatus adds
  // names (a Watch of an unknown name adds none).
  absl::flat_hash_map<std::string, ServingStatus> statuses_
      ABSL_GUARDED_BY(mu_);
  // Every subscribed stream (at most max_watch_streams_: a change scans
  // them all).
  absl::flat_hash_set<Stream*> streams_ ABSL_GUARDED_BY(mu_);
};

}  // namespace breakerd

#endif  // BREAKERD_SERVER_SERVICE_HEALTH_SERVICE_H_

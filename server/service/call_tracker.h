// Counts the gRPC calls in flight on the server, from the moment a call is
// accepted until gRPC has finished it (status sent). Graceful shutdown uses
// it: breakerd's unary calls finish in microseconds, so once nothing is in
// flight the server can close idle client connections at once instead of
// waiting out the grace period for clients to hang up.
//
// Thread-safety: thread-safe; active() may be read from any thread.
#ifndef BREAKERD_SERVER_SERVICE_CALL_TRACKER_H_
#define BREAKERD_SERVER_SERVICE_CALL_TRACKER_H_

#include <grpcpp/support/server_interceptor.h>

#include <atomic>
#include <cstdint>
#include <memory>

namespace breakerd {

class CallTracker {
 public:
  CallTracker() = default;
  CallTracker(const CallTracker&) = delete;
  CallTracker& operator=(const CallTracker&) = delete;

  // A factory for grpc::ServerBuilder::experimental().SetInterceptorCreators.
  // REQUIRES: this tracker outlives the server.
  std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>
  MakeInterceptorFactory();

  // Calls accepted and not yet finished.
  int64_t active() const { return active_.load(std::memory_order_acquire); }
  // Calls accepted since start.
  uint64_t started() const { return started_.load(std::memory_order_relaxed); }

 private:
  class Interceptor;
  class Factory;

  std::atomic<int64_t> active_{0};
  std::atomic<uint64_t> started_{0};
};

}  // namespace breakerd

#endif  // BREAKERD_SERVER_SERVICE_CALL_TRACKER_H_

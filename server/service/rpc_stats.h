// Server-side handling numbers for breakerd's own RPCs: per method and gRPC
// status code, the calls handled; per method, a histogram of the time from
// the handler's entry to its Finish (taken just before it)
// (std::chrono::steady_clock, not the engine's clock). Exported as
// breakerd_grpc_server_handled_total and breakerd_grpc_server_handling_seconds
// by the metrics layer, which reads Snapshot() (rpc_method_stats.h).
//
// Recording costs two clock reads and three relaxed atomic adds, no lock and
// no allocation. Each method's counters sit on their own cache lines.
//
// Watch is counted when the stream is set up (code OK), with the set-up
// time as its latency; how the stream later ends is not counted here.
//
// Thread-safety: thread-safe.
#ifndef BREAKERD_SERVER_SERVICE_RPC_STATS_H_
#define BREAKERD_SERVER_SERVICE_RPC_STATS_H_

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <vector>

#include "absl/strings/string_view.h"
#include "grpcpp/support/server_callback.h"
#include "grpcpp/support/status.h"
#include "server/service/rpc_method_stats.h"

namespace breakerd {

enum class RpcMethod : int {
  kAcquire,
  kReport,
  kAcquireFirst,
  kGetState,
  kListStates,
  kWatch,
  kForceOpen,
  kForceClose,
  kReset,
  kReportBatch,
};
inline constexpr int kRpcMethodCount = 10;

// The method's name as in the proto ("Acquire", "ForceOpen", ...).
absl::string_view RpcMethodName(RpcMethod method);

class RpcStats {
 public:
  using Clock = std::chrono::steady_clock;

  RpcStats() = default;
  RpcStats(const RpcStats&) = delete;
  RpcStats& operator=(const RpcStats&) = delete;

  // Counts one handled call of `method` that ended with `code` after
  // `elapsed`. A code outside 0..16 is counted as UNKNOWN.
  void Record(RpcMethod method, int code, Clock::duration elapsed);

  // Times one unary call from construction to Finish. `stats` may be null
  // (nothing is counted and the clock is not read).
  class Call {
   public:
    Call(RpcStats* stats, RpcMethod method)
        : stats_(stats),
          method_(method),
          start_(stats != nullptr ? Clock::now() : Clock::time_point()) {}
    Call(const Call&) = delete;
    Call& operator=(const Call&) = delete;

    // Counts the call, then finishes `reactor` with `status`. (Counted
    // first so that a client that has its response sees its call counted.)
    void Finish(grpc::ServerUnaryReactor* reactor, const grpc::Status& status) {
      Done(status.error_code());
      reactor->Finish(status);
    }
    // Counts the call as ended with `code` now.
    void Done(int code) {
      if (stats_ != nullptr) {
        stats_->Record(method_, code, Clock::now() - start_);
      }
    }

   private:
    RpcStats* const stats_;
    const RpcMethod method_;
    const Clock::time_point start_;
  };

  // Calls of `method` handled with `code` so far.
  uint64_t handled(RpcMethod method, int code) const;
  // Calls of `method` observed by its latency histogram so far.
  uint64_t latency_count(RpcMethod method) const;

  // Every method's numbers, in RpcMethod order (for ProcessStats).
  std::vector<RpcMethodStats> Snapshot() const;

 private:
  struct alignas(64) PerMethod {
    std::array<std::atomic<uint64_t>, kGrpcCodeCount> handled{};
    // Per bucket (not cumulative); the last one is above every bound.
    std::array<std::atomic<uint64_t>, kRpcLatencyBuckets + 1> buckets{};
    std::atomic<uint64_t> sum_nanos{0};
  };
  std::array<PerMethod, kRpcMethodCount> methods_;
};

}  // namespace breakerd

#endif  // BREAKERD_SERVER_SERVICE_RPC_STATS_H_

// The numbers breakerd counts about its own RPCs, as plain values: what
// RpcStats (rpc_stats.h) records and snapshots, and what the metrics layer
// reads to export breakerd_grpc_server_handled_total and
// breakerd_grpc_server_handling_seconds (server/metrics/families.h,
// ProcessStats::rpc_methods). The service owns these definitions; metrics
// depends on them, never the other way round, and this header pulls in
// neither gRPC nor Prometheus.
//
// Thread-safety: constants and plain values.
#ifndef BREAKERD_SERVER_SERVICE_RPC_METHOD_STATS_H_
#define BREAKERD_SERVER_SERVICE_RPC_METHOD_STATS_H_

#include <array>
#include <cstdint>

#include "absl/strings/string_view.h"
#include "server/engine/outcome.h"

namespace breakerd {

// Finite bucket bounds of breakerd_grpc_server_handling_seconds, in seconds.
inline constexpr int kRpcLatencyBuckets = 10;
inline constexpr std::array<double, kRpcLatencyBuckets>
    kRpcLatencyBucketBounds = {0.00001, 0.000025, 0.00005, 0.0001, 0.00025,
                               0.0005,  0.001,    0.0025,  0.005,  0.01};

// One RPC method's server-side handling numbers (RpcStats::Snapshot()
// fills them).
struct RpcMethodStats {
  absl::string_view method;  // as in the proto: "Acquire", "ForceOpen", ...
  // Calls handled, by gRPC status code.
  std::array<uint64_t, kGrpcCodeCount> handled{};
  // Calls per latency bucket (not cumulative), one per
  // kRpcLatencyBucketBounds entry, then the calls above the last bound.
  std::array<uint64_t, kRpcLatencyBuckets + 1> latency_buckets{};
  double latency_sum_seconds = 0;
};

}  // namespace breakerd

#endif  // BREAKERD_SERVER_SERVICE_RPC_METHOD_STATS_H_

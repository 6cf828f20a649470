#include "server/service/rpc_stats.h"

namespace breakerd {
namespace {

constexpr absl::string_view kMethodNames[kRpcMethodCount] = {
    "Acquire", "Report",    "AcquireFirst", "GetState", "ListStates",
    "Watch",   "ForceOpen", "ForceClose",   "Reset",    "ReportBatch",
};

// kRpcLatencyBucketBounds in nanoseconds, so that recording compares
// integers.
constexpr std::array<int64_t, kRpcLatencyBuckets> BoundNanos() {
  std::array<int64_t, kRpcLatencyBuckets> nanos{};
  for (int b = 0; b < kRpcLatencyBuckets; ++b) {
    nanos[b] = static_cast<int64_t>(kRpcLatencyBucketBounds[b] * 1e9 + 0.5);
  }
  return nanos;
}
constexpr std::array<int64_t, kRpcLatencyBuckets> kBoundNanos = BoundNanos();

constexpr int kUnknownCode = 2;

}  // namespace

absl::string_view RpcMethodName(RpcMethod method) {
  const int i = static_cast<int>(method);
  return i >= 0 && i < kRpcMethodCount ? kMethodNames[i] : "unknown";
}

void RpcStats::Record(RpcMethod method, int code, Clock::duration elapsed) {
  PerMethod& m = methods_[static_cast<int>(method)];
  if (code < 0 || code >= kGrpcCodeCount) code = kUnknownCode;
  m.handled[code].fetch_add(1, std::memory_order_relaxed);
  int64_t nanos =
      std::chrono::duration_cast<std::chrono::nanoseconds>(elapsed).count();
  if (nanos < 0) nanos = 0;
  int b = 0;
  while (b < kRpcLatencyBuckets && nanos > kBoundNanos[b]) ++b;
  m.buckets[b].fetch_add(1, std::memory_order_relaxed);
  m.sum_nanos.fetch_add(static_cast<uint64_t>(nanos),
                        std::memory_order_relaxed);
}

uint64_t RpcStats::handled(RpcMethod method, int code) const {
  return methods_[static_cast<int>(method)].handled[code].load(
      std::memory_order_relaxed);
}

uint64_t RpcStats::latency_count(RpcMethod method) const {
  uint64_t n = 0;
  for (const auto& b : methods_[static_cast<int>(method)].buckets) {
    n += b.load(std::memory_order_relaxed);
  }
  return n;
}

std::vector<RpcMethodStats> RpcStats::Snapshot() const {
  std::vector<RpcMethodStats> out(kRpcMethodCount);
  for (int i = 0; i < kRpcMethodCount; ++i) {
    const PerMethod& m = methods_[i];
    RpcMethodStats& s = out[i];
    s.method = kMethodNames[i];
    for (int c = 0; c < kGrpcCodeCount; ++c) {
      s.handled[c] = m.handled[c].load(std::memory_order_relaxed);
    }
    for (int b = 0; b <= kRpcLatencyBuckets; ++b) {
      s.latency_buckets[b] = m.buckets[b].load(std::memory_order_relaxed);
    }
    s.latency_sum_seconds =
        static_cast<double>(m.sum_nanos.load(std::memory_order_relaxed)) * 1e-9;
  }
  return out;
}

}  // namespace breakerd

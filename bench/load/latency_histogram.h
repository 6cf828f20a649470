// LatencyHistogram: an HDR-style log-linear histogram of durations in
// nanoseconds, for the load tool's hot path. Every power of two above 1 µs
// is split into kSubBuckets linear buckets, so any recorded value is known
// to within 1/kSubBuckets (0.1 %); values below kSubBuckets ns are exact.
// Record() is a few arithmetic operations and one increment: no allocation,
// no lock. Values above kMaxNanos (about 18 minutes) are clamped.
//
// Thread-safety: not thread-safe. The load tool gives each call slot its own
// histogram (a slot has one call in flight at a time, so its callbacks never
// overlap) and merges them after the slots have stopped.
#ifndef BREAKERD_BENCH_LOAD_LATENCY_HISTOGRAM_H_
#define BREAKERD_BENCH_LOAD_LATENCY_HISTOGRAM_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace breakerd {
namespace bench {

class LatencyHistogram {
 public:
  static constexpr int kSubBits = 10;
  static constexpr uint64_t kSubBuckets = uint64_t{1} << kSubBits;
  static constexpr int kMaxBits = 40;
  static constexpr uint64_t kMaxNanos = (uint64_t{1} << kMaxBits) - 1;
  static constexpr size_t kBuckets = (kMaxBits - kSubBits + 1) * kSubBuckets;

  // Allocates every bucket up front (256 KiB).
  LatencyHistogram() : counts_(kBuckets, 0) {}

  void Record(uint64_t nanos) {
    ++counts_[Index(std::min(nanos, kMaxNanos))];
    ++total_;
  }

  // Adds every count of `other`.
  void Merge(const LatencyHistogram& other) {
    for (size_t i = 0; i < kBuckets; ++i) counts_[i] += other.counts_[i];
    total_ += other.total_;
  }

  void Clear() {
    std::fill(counts_.begin(), counts_.end(), 0);
    total_ = 0;
  }

  uint64_t count() const { return total_; }

  // The value at quantile `q` (0 < q <= 1) in nanoseconds: the midpoint of
  // the bucket holding the ceil(q * count())-th smallest value. 0 when empty.
  double Quantile(double q) const {
    if (total_ == 0) return 0;
    const uint64_t rank = std::max<uint64_t>(
        1, static_cast<uint64_t>(std::ceil(q * static_cast<double>(total_))));
    uint64_t seen = 0;
    for (size_t i = 0; i < kBuckets; ++i) {
      seen += counts_[i];
      if (seen >= rank) return Midpoint(i);
    }
    return Midpoint(kBuckets - 1);
  }

 private:
  static size_t Index(uint64_t v) {
    if (v < kSubBuckets) return static_cast<size_t>(v);
    const int shift = (63 - __builtin_clzll(v)) - kSubBits;
    return static_cast<size_t>((shift + 1) * kSubBuckets +
                               ((v >> shift) - kSubBuckets));
  }

  static double Midpoint(size_t index) {
    if (index < kSubBuckets) return static_cast<double>(index);
    const int shift = static_cast<int>(index / kSubBuckets) - 1;
    const uint64_t mantissa = index % kSubBuckets + kSubBuckets;
    const double low = static_cast<double>(mantissa << shift);
    return low + static_cast<double>(uint64_t{1} << shift) / 2.0 - 0.5;
  }

  std::vector<uint64_t> counts_;
  uint64_t total_ = 0;
};

}  // namespace bench
}  // namespace breakerd

#endif  // BREAKERD_BENCH_LOAD_LATENCY_HISTOGRAM_H_

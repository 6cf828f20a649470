// A sliding time window of fixed buckets: O(1) memory, no allocation per
// event. The window [now - width * kBuckets, now] is approximated at bucket
// granularity: an event leaves the window between width * (kBuckets - 1)
// and width * kBuckets after it happened.
//
// Thread-safety: none; the owner (a Breaker) guards it with its mutex.
#ifndef BREAKERD_SERVER_ENGINE_BUCKET_RING_H_
#define BREAKERD_SERVER_ENGINE_BUCKET_RING_H_

#include <array>
#include <cstdint>

#include "absl/time/time.h"

namespace breakerd {

template <int kCounters, int kBuckets = 10>
class BucketRing {
 public:
  using Counts = std::array<uint64_t, kCounters>;

  // Adds `delta` to the bucket holding `now`. REQUIRES: width > 0.
  void Add(absl::Time now, absl::Duration width, int counter,
           uint32_t delta = 1) {
    Bucket& b = Current(now, width);
    b.counts[counter] += delta;
  }

  // The sums over the buckets still inside the window at `now`.
  Counts Sum(absl::Time now, absl::Duration width) const {
    const uint32_t epoch = EpochOf(now, width);
    Counts sum{};
    for (const Bucket& b : buckets_) {
      if (static_cast<uint32_t>(epoch - b.epoch) >= kBuckets) continue;
      for (int i = 0; i < kCounters; ++i) sum[i] += b.counts[i];
    }
    return sum;
  }

  void Clear() { buckets_ = {}; }

  // Re-buckets for a new width, keeping the totals still in the window: they
  // are folded into the current bucket under the new width.
  void Rebucket(absl::Time now, absl::Duration old_width,
                absl::Duration new_width) {
    const Counts kept = Sum(now, old_width);
    Clear();
    Bucket& b = Current(now, new_width);
    for (int i = 0; i < kCounters; ++i) {
      b.counts[i] = static_cast<uint32_t>(kept[i]);
    }
  }

 private:
  struct Bucket {
    // Epoch numbers are wrapped to 32 bits; only differences are used.
    uint32_t epoch = 0;
    std::array<uint32_t, kCounters> counts{};
  };

  static uint32_t EpochOf(absl::Time now, absl::Duration width) {
    // Plain 64-bit nanoseconds: good for 292 years of monotonic time, and
    // much cheaper than absl::IDivDuration on the hot path.
    return static_cast<uint32_t>(
        absl::ToInt64Nanoseconds(now - absl::UnixEpoch()) /
        absl::ToInt64Nanoseconds(width));
  }

  Bucket& Current(absl::Time now, absl::Duration width) {
    const uint32_t epoch = EpochOf(now, width);
    Bucket& b = buckets_[epoch % kBuckets];
    if (b.epoch != epoch) {
      b.epoch = epoch;
      b.counts = {};
    }
    return b;
  }

  std::array<Bucket, kBuckets> buckets_{};
};

}  // namespace breakerd

#endif  // BREAKERD_SERVER_ENGINE_BUCKET_RING_H_

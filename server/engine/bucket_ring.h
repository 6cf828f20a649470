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

namespace breakerd {

template <int kCounters, int kBuckets = 10>
class BucketRing {
 public:
  using Counts = std::array<uint64_t, kCounters>;

  // Times are in nanoseconds of the engine's Clock (Clock::NowNanos).
  // Adds `delta` to the bucket holding `now`. REQUIRES: width > 0.
  void Add(int64_t now, int64_t width, int counter, uint32_t delta = 1) {
    Bucket& b = Current(now, width);
    b.counts[counter] += delta;
    if (cache_valid_ && cache_epoch_ == b.epoch) cache_[counter] += delta;
  }

  // The sums over the buckets still inside the window at `now`.
  // O(1) while the current bucket does not change (the sums are cached),
  // O(kBuckets) at the first call in a new bucket.
  Counts Sum(int64_t now, int64_t width) const {
    const uint32_t epoch = EpochOf(now, width);
    if (cache_valid_ && cache_epoch_ == epoch) return cache_;
    Counts sum{};
    for (const Bucket& b : buckets_) {
      if (static_cast<uint32_t>(epoch - b.epoch) >= kBuckets) continue;
      for (int i = 0; i < kCounters; ++i) sum[i] += b.counts[i];
    }
    cache_ = sum;
    cache_epoch_ = epoch;
    cache_valid_ = true;
    return sum;
  }

  void Clear() {
    buckets_ = {};
    cache_valid_ = false;
  }

  // Re-buckets for a new width, keeping the totals still in the window: they
  // are folded into the current bucket under the new width.
  void Rebucket(int64_t now, int64_t old_width, int64_t new_width) {
    const Counts kept = Sum(now, old_width);
    Clear();  // also drops the cache, which was for the old width
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

  static uint32_t EpochOf(int64_t now, int64_t width) {
    return static_cast<uint32_t>(now / width);
  }

  Bucket& Current(int64_t now, int64_t width) {
    const uint32_t epoch = EpochOf(now, width);
    Bucket& b = buckets_[epoch % kBuckets];
    if (b.epoch != epoch) {
      b.epoch = epoch;
      b.counts = {};
    }
    return b;
  }

  std::array<Bucket, kBuckets> buckets_{};
  // The sums for cache_epoch_, kept up to date by Add. Mutable: Sum is
  // logically const; the owner's lock serializes every access.
  mutable Counts cache_{};
  mutable uint32_t cache_epoch_ = 0;
  mutable bool cache_valid_ = false;
};

}  // namespace breakerd

#endif  // BREAKERD_SERVER_ENGINE_BUCKET_RING_H_

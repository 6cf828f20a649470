// A sliding time window of fixed buckets: O(1) memory, no allocation per
// event. The window [now - width * kBuckets, now] is approximated at bucket
// granularity: an event leaves the window between width * (kBuckets - 1)
// and width * kBuckets after it happened.
//
// Only the newest bucket's epoch is stored; the others are implied by their
// position (bucket i holds epoch head - ((head - i) mod kBuckets)), which
// keeps a ring of 10 buckets of 3 counters at 120 bytes of counts.
//
// Thread-safety: none; the owner (a Breaker) is serialized by its Registry.
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
  // Adds `delta` to the bucket holding `now`. REQUIRES: width > 0, `now`
  // never earlier than in a previous call with the same width.
  void Add(int64_t now, int64_t width, int counter, uint32_t delta = 1) {
    const uint32_t epoch = EpochOf(now, width);
    Advance(epoch, now, width);
    buckets_[epoch % kBuckets][counter] += delta;
    if (cache_valid_ && cache_epoch_ == epoch) cache_[counter] += delta;
  }

  // The sums over the buckets still inside the window at `now`: O(1) while
  // the current bucket does not change (the sums are cached), O(kBuckets)
  // at the first call in a new bucket.
  Counts Sum(int64_t now, int64_t width) const {
    const uint32_t epoch = EpochOf(now, width);
    Counts sum{};
    if (cache_valid_ && cache_epoch_ == epoch) {
      for (int i = 0; i < kCounters; ++i) sum[i] = cache_[i];
      return sum;
    }
    // Buckets for epochs after head_ (up to `epoch`) hold stale counts
    // that the next Add clears: skip them.
    const uint32_t gap = epoch - head_;
    if (gap < kBuckets) {
      for (uint32_t age = 0; age < kBuckets - gap; ++age) {
        const auto& b =
            buckets_[(head_ % kBuckets + kBuckets - age) % kBuckets];
        for (int i = 0; i < kCounters; ++i) sum[i] += b[i];
      }
    }
    for (int i = 0; i < kCounters; ++i) {
      cache_[i] = static_cast<uint32_t>(sum[i]);
    }
    cache_epoch_ = epoch;
    cache_valid_ = true;
    return sum;
  }

  // Takes back up to `delta` from the bucket that held `at` (an earlier
  // Add), if the ring still holds it; a count never goes below zero.
  // Returns true if the whole delta was taken.
  bool Sub(int64_t at, int64_t width, int counter, uint32_t delta = 1) {
    const uint32_t epoch = EpochOf(at, width);
    if (head_ - epoch >= static_cast<uint32_t>(kBuckets)) return false;
    uint32_t& c = buckets_[epoch % kBuckets][counter];
    const uint32_t taken = c < delta ? c : delta;
    c -= taken;
    cache_valid_ = false;
    return taken == delta;
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
    head_ = static_cast<uint32_t>(now / new_width);
    head_start_ = now - now % new_width;
    for (int i = 0; i < kCounters; ++i) {
      buckets_[head_ % kBuckets][i] = static_cast<uint32_t>(kept[i]);
    }
  }

 private:
  uint32_t EpochOf(int64_t now, int64_t width) const {
    // Within the newest bucket, the usual case, no division is needed (a
    // 64-bit division costs tens of cycles, several times per call).
    if (static_cast<uint64_t>(now - head_start_) <
        static_cast<uint64_t>(width)) {
      return head_;
    }
    // Plain 64-bit nanoseconds; epochs wrap at 32 bits, only differences
    // are used.
    return static_cast<uint32_t>(now / width);
  }

  // Makes `epoch` (which holds `now`) the newest bucket, clearing the
  // buckets it skips over.
  void Advance(uint32_t epoch, int64_t now, int64_t width) {
    const uint32_t gap = epoch - head_;
    if (gap == 0) return;
    head_start_ = now - now % width;
    if (gap >= kBuckets) {
      buckets_ = {};
    } else {
      for (uint32_t i = 1; i <= gap; ++i) buckets_[(head_ + i) % kBuckets] = {};
    }
    head_ = epoch;
  }

  std::array<std::array<uint32_t, kCounters>, kBuckets> buckets_{};
  uint32_t head_ = 0;       // epoch of the newest bucket
  int64_t head_start_ = 0;  // and when it began (Clock nanoseconds)
  // The sums for cache_epoch_, kept up to date by Add. Mutable: Sum is
  // logically const; the owner serializes every access.
  mutable std::array<uint32_t, kCounters> cache_{};
  mutable uint32_t cache_epoch_ = 0;
  mutable bool cache_valid_ = false;
};

}  // namespace breakerd

#endif  // BREAKERD_SERVER_ENGINE_BUCKET_RING_H_

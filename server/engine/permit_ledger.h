// What a breaker remembers of the permits it issued recently: which were
// reported (so a repeated Report is known as a duplicate), how many are
// still out, and which were counted as hung (inflight.hang_after).
//
// Permits are numbered by the breaker in issue order (a 32-bit count that
// wraps; a permit carries its low kSeqBits). The ledger keeps one bit per
// permit in a ring that grows with the traffic of the permit horizon, and
// issue buckets of about horizon / kBucketsPerHorizon each, which hold the
// counts the hang rule and breakerd_inflight need. A bucket never spans two
// generations of the breaker. Buckets older than the horizon are dropped
// (a hung bucket is kept while its hung count may still be in the
// failure-rate window, so the real Report can replace it); the breaker
// frees the whole ledger once it is empty, so an idle breaker costs nothing
// here.
//
// Bounds: at most kMaxBits permits (2^22, i.e. 10,000 calls/s over 7
// minutes) and kMaxBuckets buckets are tracked; past either, the oldest
// bucket is forgotten early (its permits are then treated as older than the
// horizon).
//
// Thread-safety: none; the owner (a Breaker) is serialized by its Registry.
#ifndef BREAKERD_SERVER_ENGINE_PERMIT_LEDGER_H_
#define BREAKERD_SERVER_ENGINE_PERMIT_LEDGER_H_

#include <cstdint>
#include <memory>

#include "absl/container/inlined_vector.h"

namespace breakerd {

class PermitLedger {
 public:
  static constexpr int kSeqBits = 22;
  static constexpr uint32_t kSeqMask = (uint32_t{1} << kSeqBits) - 1;
  static constexpr uint32_t kMaxBits = uint32_t{1} << kSeqBits;
  static constexpr int kBucketsPerHorizon = 16;
  static constexpr size_t kMaxBuckets = 64;

  // `bucket_width_ns` > 0: how long one issue bucket takes new permits.
  explicit PermitLedger(int64_t bucket_width_ns);

  PermitLedger(const PermitLedger&) = delete;
  PermitLedger& operator=(const PermitLedger&) = delete;

  // Records permit number `seq`, issued at `now_ns` in the generation whose
  // first permit number is `generation_first_seq`. REQUIRES: seq is one
  // more than the previous call's (the first call may start anywhere), and
  // now_ns never goes back. Returns true if the permit began a new issue
  // bucket.
  bool Issue(uint32_t seq, int64_t now_ns, uint32_t generation_first_seq);

  enum class Seen : uint8_t {
    kUntracked,    // older than anything tracked: apply as without a ledger
    kFirst,        // first report of a tracked permit
    kFirstOfHung,  // first report of a permit already counted as hung
    kDuplicate,    // reported before: change nothing
  };
  struct Mark {
    Seen seen = Seen::kUntracked;
    // kFirstOfHung: when its hung count was added (Clock nanoseconds).
    int64_t hung_at_ns = 0;
  };
  // Marks the permit whose low bits are `seq_low` reported. `next_seq`: the
  // number the breaker will give its next permit.
  Mark MarkReported(uint32_t seq_low, uint32_t next_seq);

  // The hang rule: every bucket of the generation that began at
  // `generation_first_seq` whose newest permit was issued at least
  // `hang_ns` before `now_ns` counts its unreported permits as hung, once.
  // Returns how many were counted now. Hung buckets whose counts fall in
  // the same window bucket (`window_bucket_ns` wide) are merged.
  uint64_t CountHung(int64_t now_ns, int64_t hang_ns, int64_t window_bucket_ns,
                     uint32_t generation_first_seq);

  // Drops buckets older than `horizon_ns` (hung ones only once their hung
  // count is `window_ns` old). With `keep_unswept`, a bucket of the
  // generation from `generation_first_seq` that CountHung has not counted
  // yet is kept (and everything after it).
  void Expire(int64_t now_ns, int64_t horizon_ns, int64_t window_ns,
              bool keep_unswept = false, uint32_t generation_first_seq = 0);

  // Permits out: not reported, not counted as hung, and issued less than
  // `horizon_ns` ago or (with `count_hung`) waiting for CountHung in a
  // bucket of the generation from `generation_first_seq`.
  uint64_t Inflight(int64_t now_ns, int64_t horizon_ns, bool count_hung = false,
                    uint32_t generation_first_seq = 0) const;

  bool empty() const { return buckets_.empty(); }

  // The owner's note of when the ledger next needs tending (Clock
  // nanoseconds): a lower bound it keeps itself.
  int64_t due_ns() const { return due_ns_; }
  void set_due_ns(int64_t due_ns) { due_ns_ = due_ns; }

  // The earliest time a bucket becomes hung (`hang_ns` > 0 and
  // `count_hung`: buckets of the generation from `generation_first_seq`)
  // or may be dropped (Expire's rule).
  int64_t NextDue(int64_t hang_ns, bool count_hung,
                  uint32_t generation_first_seq, int64_t horizon_ns,
                  int64_t window_ns) const;

  // Bytes held, for the memory figures.
  size_t MemoryBytes() const;

 private:
  struct Bucket {
    uint32_t first_seq = 0;
    uint32_t issued = 0;
    uint32_t reported = 0;
    // Counted as hung and not replaced by their real report since.
    uint32_t hung = 0;
    int64_t start_ns = 0;
    int64_t last_ns = 0;
    // When its hung count went into the window; 0: not counted as hung.
    int64_t hung_at_ns = 0;
  };

  uint32_t first_tracked() const { return buckets_.front().first_seq; }
  uint64_t* words() { return bits_ != nullptr ? bits_.get() : small_bits_; }
  uint64_t& Word(uint32_t seq) { return words()[(seq >> 6) & word_mask_]; }
  // Makes room for the bit of `seq`: grows the ring, or forgets the oldest
  // buckets once it is at kMaxBits.
  void Reserve(uint32_t seq);
  void DropFront();
  Bucket* BucketOf(uint32_t seq);

  const int64_t bucket_width_ns_;
  int64_t due_ns_ = 0;
  // Oldest first. One inline, and the first two words of the ring: a
  // breaker with light traffic allocates the ledger and nothing else.
  absl::InlinedVector<Bucket, 1> buckets_;
  uint64_t small_bits_[2] = {0, 0};
  std::unique_ptr<uint64_t[]> bits_;  // once the ring outgrows small_bits_
  uint32_t word_mask_ = 1;  // words in the ring - 1 (a power of two - 1)
};

}  // namespace breakerd

#endif  // BREAKERD_SERVER_ENGINE_PERMIT_LEDGER_H_

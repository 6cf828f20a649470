#include "server/engine/permit_ledger.h"

#include <algorithm>
#include <cstring>

namespace breakerd {
namespace {

// True if `seq` comes before `from` (32-bit numbers that wrap; the ledger
// never spans more than 2^22 of them).
bool Before(uint32_t seq, uint32_t from) {
  return static_cast<int32_t>(seq - from) < 0;
}

}  // namespace

PermitLedger::PermitLedger(int64_t bucket_width_ns)
    : bucket_width_ns_(std::max<int64_t>(1, bucket_width_ns)) {}

bool PermitLedger::Issue(uint32_t seq, int64_t now_ns,
                         uint32_t generation_first_seq) {
  if (buckets_.empty()) {
    // Whatever the ring held is older than anything tracked from now on.
    Word(seq) = 0;
  } else if ((seq & 63) == 0) {
    // A new word: the ring may need to grow. Its previous bits belonged to
    // permits the ring no longer tracks (Reserve keeps a word of margin).
    Reserve(seq);
    Word(seq) = 0;
  }
  bool new_bucket = false;
  if (buckets_.empty() ||
      now_ns - buckets_.back().start_ns >= bucket_width_ns_ ||
      Before(buckets_.back().first_seq, generation_first_seq) ||
      buckets_.back().hung_at_ns != 0) {
    Bucket b;
    b.first_seq = seq;
    b.start_ns = now_ns;
    buckets_.push_back(b);
    if (buckets_.size() > kMaxBuckets) DropFront();
    new_bucket = true;
  }
  Bucket& b = buckets_.back();
  ++b.issued;
  b.last_ns = now_ns;
  return new_bucket;
}

void PermitLedger::Reserve(uint32_t seq) {
  while (!buckets_.empty()) {
    const uint32_t count = word_mask_ + 1;
    // From the first tracked permit's word to seq's, plus one spare word.
    const uint32_t span = ((seq - (first_tracked() & ~uint32_t{63})) >> 6) + 2;
    if (span <= count) return;
    if (uint64_t{count} * 64 >= kMaxBits) {
      DropFront();
      continue;
    }
    const uint32_t grown = count * 2;
    std::unique_ptr<uint64_t[]> bits(new uint64_t[grown]());
    const uint32_t new_mask = grown - 1;
    // Every tracked word moves to its place in the larger ring.
    const uint32_t first_word = first_tracked() >> 6;
    const uint32_t used =
        ((seq - 1 - (first_tracked() & ~uint32_t{63})) >> 6) + 1;
    for (uint32_t i = 0; i < used; ++i) {
      const uint32_t w = first_word + i;
      bits[w & new_mask] = words()[w & word_mask_];
    }
    bits_ = std::move(bits);
    word_mask_ = new_mask;
  }
}

void PermitLedger::DropFront() { buckets_.erase(buckets_.begin()); }

PermitLedger::Bucket* PermitLedger::BucketOf(uint32_t seq) {
  for (auto it = buckets_.rbegin(); it != buckets_.rend(); ++it) {
    if (seq - it->first_seq < it->issued) return &*it;
  }
  return nullptr;
}

PermitLedger::Mark PermitLedger::MarkReported(uint32_t seq_low,
                                              uint32_t next_seq) {
  Mark m;
  if (buckets_.empty()) return m;
  const uint32_t newest = next_seq - 1;
  const uint32_t seq = newest - ((newest - seq_low) & kSeqMask);
  if (seq - first_tracked() > newest - first_tracked()) return m;
  uint64_t& word = Word(seq);
  const uint64_t bit = uint64_t{1} << (seq & 63);
  if ((word & bit) != 0) {
    m.seen = Seen::kDuplicate;
    return m;
  }
  word |= bit;
  m.seen = Seen::kFirst;
  Bucket* b = BucketOf(seq);
  if (b == nullptr) return m;  // cannot happen: seq is tracked
  ++b->reported;
  if (b->hung_at_ns != 0 && b->hung > 0) {
    --b->hung;
    m.seen = Seen::kFirstOfHung;
    m.hung_at_ns = b->hung_at_ns;
  }
  return m;
}

uint64_t PermitLedger::CountHung(int64_t now_ns, int64_t hang_ns,
                                 int64_t window_bucket_ns,
                                 uint32_t generation_first_seq) {
  uint64_t counted = 0;
  for (size_t i = 0; i < buckets_.size(); ++i) {
    Bucket& b = buckets_[i];
    if (Before(b.first_seq, generation_first_seq) || b.hung_at_ns != 0) {
      continue;
    }
    if (now_ns - b.last_ns < hang_ns) break;  // the rest are newer
    b.hung = b.issued - b.reported;
    b.hung_at_ns = std::max<int64_t>(now_ns, 1);
    counted += b.hung;
    // Hung buckets whose counts went into the same window bucket are one:
    // at most one per window bucket is kept for the real reports.
    if (i > 0) {
      Bucket& p = buckets_[i - 1];
      if (p.hung_at_ns != 0 && !Before(p.first_seq, generation_first_seq) &&
          p.hung_at_ns / window_bucket_ns == b.hung_at_ns / window_bucket_ns) {
        p.issued += b.issued;
        p.reported += b.reported;
        p.hung += b.hung;
        p.last_ns = b.last_ns;
        buckets_.erase(buckets_.begin() + static_cast<ptrdiff_t>(i));
        --i;
      }
    }
  }
  return counted;
}

void PermitLedger::Expire(int64_t now_ns, int64_t horizon_ns, int64_t window_ns,
                          bool keep_unswept, uint32_t generation_first_seq) {
  while (!buckets_.empty()) {
    const Bucket& f = buckets_.front();
    if (keep_unswept && f.hung_at_ns == 0 &&
        !Before(f.first_seq, generation_first_seq)) {
      return;
    }
    if (now_ns - f.last_ns < horizon_ns) return;
    if (f.hung_at_ns != 0 && f.hung > 0 && now_ns - f.hung_at_ns < window_ns) {
      return;
    }
    DropFront();
  }
}

int64_t PermitLedger::NextDue(int64_t hang_ns, bool count_hung,
                              uint32_t generation_first_seq, int64_t horizon_ns,
                              int64_t window_ns) const {
  int64_t due = INT64_MAX;
  if (buckets_.empty()) return due;
  const Bucket& f = buckets_.front();
  due = f.hung_at_ns != 0 && f.hung > 0
            ? std::max(f.last_ns + horizon_ns, f.hung_at_ns + window_ns)
            : f.last_ns + horizon_ns;
  if (count_hung && hang_ns > 0) {
    for (const Bucket& b : buckets_) {
      if (b.hung_at_ns == 0 && !Before(b.first_seq, generation_first_seq)) {
        due = std::min(due, b.last_ns + hang_ns);
        break;  // the first unswept one is the oldest
      }
    }
  }
  return due;
}

uint64_t PermitLedger::Inflight(int64_t now_ns, int64_t horizon_ns,
                                bool count_hung,
                                uint32_t generation_first_seq) const {
  uint64_t out = 0;
  for (const Bucket& b : buckets_) {
    if (b.hung_at_ns != 0) continue;
    if (now_ns - b.last_ns < horizon_ns ||
        (count_hung && !Before(b.first_seq, generation_first_seq))) {
      out += b.issued - b.reported;
    }
  }
  return out;
}

size_t PermitLedger::MemoryBytes() const {
  size_t bytes = sizeof(*this);
  if (buckets_.capacity() > 1) bytes += buckets_.capacity() * sizeof(Bucket);
  if (bits_ != nullptr) bytes += (size_t{word_mask_} + 1) * sizeof(uint64_t);
  return bytes;
}

}  // namespace breakerd

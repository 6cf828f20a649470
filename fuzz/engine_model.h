// Models of what a breaker keeps about its permits and its recovery, for the
// oracles of classify_fuzz and service_fuzz: written from DESIGN.md ("Hung
// calls, single-use permits, gentle recovery") and from the rules that
// server/engine/permit_ledger.h and server/engine/breaker.h document, not
// from the engine's code, so that the harnesses can say exactly which
// Report is a duplicate, which permits count as hung and when, what the
// ramp admits, and which breaker eviction may take.
//
// LedgerModel: the permits one breaker issued, numbered from 0 in issue
// order. Issue buckets take new permits for horizon / 16 from their first
// (a new generation, or a bucket already counted as hung, starts a new
// one; past 64 buckets the oldest is forgotten). A permit is tracked (a
// second Report of it is a duplicate) from its issue until its bucket is
// dropped: at an Acquire or Report of the breaker (Tend) or at the
// Registry's eviction pass (ReleaseIdle), once the bucket's newest permit
// is a horizon old and any hung count it holds has left the failure-rate
// window. With inflight.hang_after on, Tend first counts as hung the
// unreported permits of every bucket of the current generation whose
// newest permit is hang_after old (while the breaker counts outcomes:
// closed or forced closed); hung buckets whose counts went into the same
// window bucket are merged. Tending is lazy: only an Acquire or Report at
// or after the ledger's due time tends it, and the due time is set when a
// bucket starts (its hang time, or its horizon with the hang rule off) and
// after each tending (the earliest time the front bucket may be dropped or
// the oldest bucket not yet counted may hang). So a bucket whose hung
// count its real reports have all replaced may stay (and its permits stay
// known) until the due time set before. A permit is out (Inflight) until
// reported or counted as hung while its bucket is within the horizon, or,
// hang rule on, while it waits to be counted.
//
// RampModel: gentle recovery's admission by count: every first attempt
// earns the share of the moment in millionths of a call, a whole call
// admits one; the first attempt after the close goes through.
//
// Thread-safety: plain values; the harnesses use them from one thread.
#ifndef BREAKERD_FUZZ_ENGINE_MODEL_H_
#define BREAKERD_FUZZ_ENGINE_MODEL_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/time/time.h"
#include "fuzz/fuzz_check.h"
#include "server/engine/policy.h"
#include "server/engine/types.h"

namespace breakerd {
namespace fuzz {

// True while a breaker in state `s` counts outcomes (and so hung calls).
inline bool Counting(State s) {
  return s == State::kClosed || s == State::kForcedClosed;
}

// True if `w` crosses the failure-rate or slow-call-rate rule of `p`.
inline bool RateRuleHolds(const Policy& p, const WindowCounts& w) {
  const bool rate = p.failure_rate.threshold > 0 &&
                    w.calls >= p.failure_rate.min_calls &&
                    static_cast<double>(w.failures) >=
                        p.failure_rate.threshold * static_cast<double>(w.calls);
  const bool slow =
      p.slow_call_rate.threshold > 0 && w.calls >= p.slow_call_rate.min_calls &&
      static_cast<double>(w.slow) >=
          p.slow_call_rate.threshold * static_cast<double>(w.calls);
  return rate || slow;
}

// The width of one of the failure-rate window's 10 buckets, in Clock
// nanoseconds (microsecond resolution, as the engine keeps it).
inline int64_t WindowBucketNs(const Policy& p) {
  return std::max<int64_t>(
             1, absl::ToInt64Microseconds(p.failure_rate.window) / 10) *
         1000;
}

// True if a count added to the window at `at_ns` is still in the window's
// sums at `now_ns` (the newest 10 buckets).
inline bool InWindow(const Policy& p, int64_t at_ns, int64_t now_ns) {
  const int64_t width = WindowBucketNs(p);
  return now_ns / width - at_ns / width < 10;
}

class LedgerModel {
 public:
  enum class Seen { kUntracked, kFirst, kFirstOfHung, kDuplicate };
  struct Mark {
    Seen seen = Seen::kUntracked;
    // kFirstOfHung: when its hung count went into the window.
    int64_t hung_at_ns = 0;
  };

  explicit LedgerModel(const Policy& p)
      : hang_ns_(absl::ToInt64Nanoseconds(p.inflight.hang_after)),
        hang_on_(p.inflight.hang_after > absl::ZeroDuration()),
        horizon_ns_(absl::ToInt64Nanoseconds(PermitHorizon(p))),
        window_ns_(absl::ToInt64Nanoseconds(p.failure_rate.window)),
        window_bucket_ns_(WindowBucketNs(p)),
        bucket_ns_(std::max<int64_t>(1, horizon_ns_ / kBucketsPerHorizon)) {}

  // The breaker moved to a new generation: permits issued from now on are
  // its.
  void NewGeneration() { generation_first_ = next_; }

  // Issues the next permit at `now_ns`; returns its number.
  uint32_t Issue(int64_t now_ns) {
    const uint32_t index = next_++;
    reported_.push_back(false);
    if (buckets_.empty()) due_ns_ = INT64_MAX;
    if (buckets_.empty() || now_ns - buckets_.back().start_ns >= bucket_ns_ ||
        buckets_.back().first < generation_first_ ||
        buckets_.back().hung_at_ns != 0) {
      Bucket b;
      b.first = index;
      b.start_ns = now_ns;
      buckets_.push_back(b);
      if (buckets_.size() > kMaxBuckets) buckets_.erase(buckets_.begin());
      due_ns_ =
          std::min(due_ns_, now_ns + (hang_ns_ > 0 ? hang_ns_ : horizon_ns_));
    }
    ++buckets_.back().issued;
    buckets_.back().last_ns = now_ns;
    return index;
  }

  // An Acquire or Report reached the breaker, in state `state` just
  // before. Counts hung permits (returned) and drops what is no longer
  // needed.
  uint64_t Tend(int64_t now_ns, State state) {
    if (buckets_.empty() || now_ns < due_ns_) return 0;
    uint64_t counted = 0;
    if (hang_ns_ > 0 && Counting(state)) {
      for (size_t i = 0; i < buckets_.size(); ++i) {
        Bucket& b = buckets_[i];
        if (b.first < generation_first_ || b.hung_at_ns != 0) continue;
        if (now_ns - b.last_ns < hang_ns_) break;
        b.hung = b.issued - b.reported;
        b.hung_at_ns = std::max<int64_t>(now_ns, 1);
        counted += b.hung;
        if (i == 0) continue;
        Bucket& p = buckets_[i - 1];
        if (p.hung_at_ns != 0 && p.first >= generation_first_ &&
            p.hung_at_ns / window_bucket_ns_ ==
                b.hung_at_ns / window_bucket_ns_) {
          p.issued += b.issued;
          p.reported += b.reported;
          p.hung += b.hung;
          p.last_ns = b.last_ns;
          buckets_.erase(buckets_.begin() + static_cast<ptrdiff_t>(i));
          --i;
        }
      }
    }
    Expire(now_ns, /*keep_unswept=*/false);
    if (!buckets_.empty()) due_ns_ = NextDue(Counting(state));
    hung_total_ += counted;
    return counted;
  }

  // The Registry's eviction pass over a breaker in state `state`: drops
  // what is no longer needed, keeping a bucket that has yet to be counted
  // as hung.
  void ReleaseIdle(int64_t now_ns, State state) {
    Expire(now_ns, /*keep_unswept=*/hang_on_ && Counting(state));
  }

  // A Report of permit `index` (after Tend).
  Mark MarkReported(uint32_t index) {
    Mark m;
    if (!Tracked(index)) return m;
    if (reported_[index]) {
      m.seen = Seen::kDuplicate;
      return m;
    }
    reported_[index] = true;
    m.seen = Seen::kFirst;
    for (Bucket& b : buckets_) {
      if (index < b.first || index - b.first >= b.issued) continue;
      ++b.reported;
      if (b.hung_at_ns != 0 && b.hung > 0) {
        --b.hung;
        m.seen = Seen::kFirstOfHung;
        m.hung_at_ns = b.hung_at_ns;
      }
      break;
    }
    return m;
  }

  // True while a Report of permit `index` would be known as a repeat.
  bool Tracked(uint32_t index) const {
    return !buckets_.empty() && index >= buckets_.front().first &&
           index < next_;
  }
  // True if permit `index` was reported while tracked.
  bool Reported(uint32_t index) const {
    return index < reported_.size() && reported_[index];
  }

  // Permits out in a breaker in state `state`: not reported, in a bucket
  // not counted as hung whose newest permit is younger than the horizon,
  // or (hang rule on, breaker counting) of the current generation and
  // waiting to be counted as hung at the next Acquire or Report.
  uint64_t Inflight(int64_t now_ns, State state) const {
    const bool waiting = hang_on_ && Counting(state);
    uint64_t out = 0;
    for (const Bucket& b : buckets_) {
      if (b.hung_at_ns != 0) continue;
      if (now_ns - b.last_ns < horizon_ns_ ||
          (waiting && b.first >= generation_first_)) {
        out += b.issued - b.reported;
      }
    }
    return out;
  }

  uint64_t hung_total() const { return hung_total_; }
  uint32_t issued() const { return next_; }
  size_t buckets() const { return buckets_.size(); }

 private:
  static constexpr int64_t kBucketsPerHorizon = 16;
  static constexpr size_t kMaxBuckets = 64;

  struct Bucket {
    uint32_t first = 0;
    uint32_t issued = 0;
    uint32_t reported = 0;
    uint32_t hung = 0;
    int64_t start_ns = 0;
    int64_t last_ns = 0;
    int64_t hung_at_ns = 0;  // 0: not counted as hung
  };

  // When Tend next has something to do.
  int64_t NextDue(bool counting) const {
    const Bucket& f = buckets_.front();
    int64_t due = f.last_ns + horizon_ns_;
    if (f.hung_at_ns != 0 && f.hung > 0) {
      due = std::max(due, f.hung_at_ns + window_ns_);
    }
    if (counting && hang_ns_ > 0) {
      for (const Bucket& b : buckets_) {
        if (b.hung_at_ns == 0 && b.first >= generation_first_) {
          due = std::min(due, b.last_ns + hang_ns_);
          break;
        }
      }
    }
    return due;
  }

  void Expire(int64_t now_ns, bool keep_unswept) {
    while (!buckets_.empty()) {
      const Bucket& f = buckets_.front();
      if (keep_unswept && f.hung_at_ns == 0 && f.first >= generation_first_) {
        return;
      }
      if (now_ns - f.last_ns < horizon_ns_) return;
      if (f.hung_at_ns != 0 && f.hung > 0 && now_ns - f.hung_at_ns < window_ns_)
        return;
      buckets_.erase(buckets_.begin());
    }
  }

  const int64_t hang_ns_;
  const bool hang_on_;
  const int64_t horizon_ns_;
  const int64_t window_ns_;
  const int64_t window_bucket_ns_;
  const int64_t bucket_ns_;
  uint32_t next_ = 0;
  uint32_t generation_first_ = 0;
  std::vector<Bucket> buckets_;
  std::vector<bool> reported_;  // by permit number
  int64_t due_ns_ = INT64_MAX;
  uint64_t hung_total_ = 0;
};

class RampModel {
 public:
  explicit RampModel(const Policy& p)
      : ramp_ns_(absl::ToInt64Nanoseconds(p.recovery.ramp)),
        ramp_on_(p.recovery.ramp > absl::ZeroDuration()),
        start_share_(p.recovery.start_share) {}

  // A probe success closed the breaker at `now_ns`, at escalation
  // `escalation`: the ramp starts (if the policy ramps).
  void Close(int64_t now_ns, uint32_t escalation) {
    if (!ramp_on_) return;
    start_ns_ = std::max<int64_t>(now_ns, 1);
    credit_ = kUnit - static_cast<uint32_t>(start_share_ * kUnit + 0.5);
    escalation_ = escalation;
  }
  // Anything else that ends the ramp (an open, an override, a reset).
  void Stop() { start_ns_ = 0; }

  // True from the close until an Acquire finds the ramp complete (or
  // something else ends it).
  bool active() const { return start_ns_ != 0; }
  // The escalation the breaker kept at the close.
  uint32_t escalation() const { return escalation_; }

  // The share of first attempts admitted at `now_ns`.
  double Share(int64_t now_ns) const {
    if (start_ns_ == 0) return 1;
    const int64_t elapsed = now_ns - start_ns_;
    if (ramp_ns_ <= 0 || elapsed >= ramp_ns_) return 1;
    return start_share_ + (1 - start_share_) * static_cast<double>(elapsed) /
                              static_cast<double>(ramp_ns_);
  }
  bool Ramping(int64_t now_ns) const { return Share(now_ns) < 1; }
  // Active, but its time is over: the next Acquire or eviction pass ends
  // it.
  bool RunItsCourse(int64_t now_ns) const {
    return active() && !Ramping(now_ns);
  }

  // An Acquire in a closed breaker while active. Returns true if the ramp
  // admits it (the retry budget may still refuse a retry); a ramp found
  // complete ends (and with it the kept escalation).
  bool Admits(int64_t now_ns, bool retry) {
    const double share = Share(now_ns);
    if (share >= 1) {
      start_ns_ = 0;
      return true;
    }
    if (retry) return false;
    credit_ += static_cast<uint32_t>(share * kUnit + 0.5);
    if (credit_ < kUnit) return false;
    credit_ -= kUnit;
    return true;
  }

 private:
  static constexpr uint32_t kUnit = 1000000;
  const int64_t ramp_ns_;
  const bool ramp_on_;
  const double start_share_;
  int64_t start_ns_ = 0;
  uint32_t credit_ = 0;
  uint32_t escalation_ = 0;
};

// A permit's check is a 17-bit tag (one bit always set): a value a breaker
// never issued passes it with probability 2^-17 (DESIGN.md: a random value
// is refused with probability at least 1 - 2^-16), and is then taken for
// the permit its other bits name, which no model can follow. The
// harnesses count, for the whole process, the forged values that reached a
// breaker's check and those it took, and abort when more were taken than
// chance explains (1 + 2^-14 of those tried: 8 times the tag's odds).
class ForgedPermits {
 public:
  static void Refused() { ++tried_; }
  // A forged value was taken (`what`: the call, for the message).
  static void Accepted(absl::string_view what) {
    ++tried_;
    ++accepted_;
    FUZZ_CHECK(accepted_ <= 1 + tried_ / (uint64_t{1} << 14), what,
               ": a permit never issued was accepted; ", accepted_, " of ",
               tried_,
               " forged permits so far, far more than the tag's "
               "2^-17 explains");
  }

 private:
  static inline uint64_t tried_ = 0;
  static inline uint64_t accepted_ = 0;
};

}  // namespace fuzz
}  // namespace breakerd

#endif  // BREAKERD_FUZZ_ENGINE_MODEL_H_

#include "server/engine/token_bucket.h"

#include <algorithm>
#include <cassert>

namespace breakerd {
namespace {

constexpr int64_t kNanosPerSecond = 1000 * 1000 * 1000;

}  // namespace

TokenBucket::TokenBucket(const Clock* clock, int64_t per_second,
                         int64_t capacity)
    : clock_(clock),
      per_second_(per_second),
      capacity_nanos_(capacity * kNanosPerSecond),
      tokens_nanos_(capacity_nanos_),
      last_refill_(clock->NowNanos()) {
  assert(per_second >= 1 && capacity >= 1);
}

int64_t TokenBucket::TryTake(int64_t cost) {
  const int64_t now = clock_->NowNanos();
  // Only the time the bucket takes to fill counts: no overflow, however
  // long it stayed idle.
  const int64_t to_fill = (capacity_nanos_ - tokens_nanos_) / per_second_ + 1;
  const int64_t elapsed = std::clamp<int64_t>(now - last_refill_, 0, to_fill);
  last_refill_ = std::max(last_refill_, now);
  tokens_nanos_ =
      std::min(capacity_nanos_, tokens_nanos_ + elapsed * per_second_);
  if (tokens_nanos_ <= 0) return -tokens_nanos_ / per_second_ + 1;
  tokens_nanos_ -= cost * kNanosPerSecond;
  return 0;
}

}  // namespace breakerd

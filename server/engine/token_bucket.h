// A token bucket that admits while it is not empty and then charges the
// whole cost, so it may go into debt by one admission. Used to bound reads
// of the whole registry (ListStates, Watch of everything, /metrics scrapes):
// whatever the registry's size, one read gets through once the debt is
// paid, and on average reads cost at most `per_second` a second.
//
// Thread-safety: not synchronized; the owner guards it with its own mutex.
#ifndef BREAKERD_SERVER_ENGINE_TOKEN_BUCKET_H_
#define BREAKERD_SERVER_ENGINE_TOKEN_BUCKET_H_

#include <cstdint>

#include "server/engine/clock.h"

namespace breakerd {

class TokenBucket {
 public:
  // Starts full. REQUIRES: `clock` outlives the bucket; per_second >= 1 and
  // capacity >= 1.
  TokenBucket(const Clock* clock, int64_t per_second, int64_t capacity);

  // If the bucket is not empty now, takes `cost` (going into debt if it is
  // more than what is there) and returns 0; otherwise takes nothing and
  // returns the nanoseconds until it is not empty (at least 1).
  int64_t TryTake(int64_t cost);

  int64_t per_second() const { return per_second_; }

 private:
  const Clock* const clock_;
  const int64_t per_second_;
  const int64_t capacity_nanos_;
  // Tokens scaled by 1e9 (nanosecond precision); negative while in debt.
  int64_t tokens_nanos_;
  int64_t last_refill_;
};

}  // namespace breakerd

#endif  // BREAKERD_SERVER_ENGINE_TOKEN_BUCKET_H_

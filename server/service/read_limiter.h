// ReadLimiter bounds how fast callers may read the whole Registry.
//
// A read of every breaker (ListStates, a Watch of every dependency) costs
// CPU in proportion to the number of breakers, on the same threads and the
// same shard locks as everyone's Acquire. Without a bound, one local caller
// looping such reads at 10,000 breakers pushes other callers' Acquire past
// their deadline. The limiter is a TokenBucket counted in breakers read,
// refilling at `per_second` and holding one second of reads.
//
// Thread-safety: thread-safe.
#ifndef BREAKERD_SERVER_SERVICE_READ_LIMITER_H_
#define BREAKERD_SERVER_SERVICE_READ_LIMITER_H_

#include <cstddef>
#include <cstdint>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "server/engine/clock.h"
#include "server/engine/mutex.h"
#include "server/engine/token_bucket.h"

namespace breakerd {

class ReadLimiter {
 public:
  // Breakers read per second by default (about five full reads a second at
  // the default cap of 10,000 breakers).
  static constexpr int64_t kDefaultPerSecond = 50000;

  // REQUIRES: `clock` outlives the limiter; per_second > 0.
  ReadLimiter(const Clock* clock, int64_t per_second);

  ReadLimiter(const ReadLimiter&) = delete;
  ReadLimiter& operator=(const ReadLimiter&) = delete;

  // Admits a read of `breakers` breakers and charges it, or returns
  // RESOURCE_EXHAUSTED naming `what`, the limit and when to retry (nothing
  // charged then).
  absl::Status Admit(size_t breakers, absl::string_view what)
      ABSL_LOCKS_EXCLUDED(mu_);

 private:
  Mutex mu_;
  TokenBucket bucket_ ABSL_GUARDED_BY(mu_);
};

}  // namespace breakerd

#endif  // BREAKERD_SERVER_SERVICE_READ_LIMITER_H_

#include "server/service/read_limiter.h"

#include "absl/strings/str_cat.h"

namespace breakerd {

ReadLimiter::ReadLimiter(const Clock* clock, int64_t per_second)
    : bucket_(clock, per_second, /*capacity=*/per_second) {}

absl::Status ReadLimiter::Admit(size_t breakers, absl::string_view what) {
  MutexLock lock(&mu_);
  const int64_t wait_nanos = bucket_.TryTake(static_cast<int64_t>(breakers));
  if (wait_nanos == 0) return absl::OkStatus();
  // Until the debt is paid back, plus a millisecond.
  return absl::ResourceExhaustedError(absl::StrCat(
      what, ": reads of every breaker are limited to ", bucket_.per_second(),
      " breakers per second (--read-all-breakers-per-second); retry in ",
      wait_nanos / 1000000 + 1, " ms"));
}

}  // namespace breakerd

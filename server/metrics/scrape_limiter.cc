#include "server/metrics/scrape_limiter.h"

#include <algorithm>
#include <cassert>

#include "absl/strings/str_cat.h"

namespace breakerd {
namespace {

constexpr int64_t kNanosPerSecond = 1000 * 1000 * 1000;

}  // namespace

ScrapeLimiter::ScrapeLimiter(const Clock* clock, ScrapeLimits limits)
    : limits_(limits),
      busy_(static_cast<size_t>(std::max(limits.concurrent, 1)), false),
      bucket_(clock, limits.breakers_per_second, limits.burst_breakers) {
  assert(limits.concurrent >= 1);
}

ScrapeLimiter::Admission ScrapeLimiter::Begin(size_t breakers) {
  Admission a;
  MutexLock lock(&mu_);
  const auto free_slot = std::find(busy_.begin(), busy_.end(), false);
  if (free_slot == busy_.end()) {
    a.reason = absl::StrCat("at most ", limits_.concurrent,
                            " scrapes are served at once; retry");
    a.retry_after_seconds = 1;
    return a;
  }
  const int64_t wait_nanos =
      bucket_.TryTake(static_cast<int64_t>(breakers) + kScrapeBaseCost);
  if (wait_nanos > 0) {
    // Until the debt is paid back (the bucket is positive again).
    a.retry_after_seconds =
        (wait_nanos + kNanosPerSecond - 1) / kNanosPerSecond;
    a.reason = absl::StrCat(
        "scrapes are limited to reading ", limits_.breakers_per_second,
        " breakers per second; retry in ", a.retry_after_seconds, " s");
    return a;
  }
  *free_slot = true;
  a.admitted = true;
  a.slot = static_cast<int>(free_slot - busy_.begin());
  return a;
}

void ScrapeLimiter::End(int slot) {
  MutexLock lock(&mu_);
  assert(slot >= 0 && static_cast<size_t>(slot) < busy_.size() && busy_[slot]);
  busy_[slot] = false;
}

}  // namespace breakerd

// ScrapeLimiter bounds what /metrics scrapes may cost, whoever sends them
// (the metrics port answers any peer that reaches it, SECURITY.md):
//   - at most `concurrent` scrapes are rendered at once; each holds one
//     piece of the exposition (text_format.h), so memory stays at
//     `concurrent` pieces however many clients loop;
//   - a token bucket counted in breakers read: it refills at
//     `breakers_per_second` up to `burst_breakers`, a scrape is admitted
//     while the bucket is not empty and is then charged the registry's size
//     plus kScrapeBaseCost, so the bucket may go into debt by one scrape.
//     Whatever the registry's size, a scrape gets through at least once per
//     refill of that debt, and on average scrapes read at most
//     `breakers_per_second` breakers a second (their CPU is in proportion).
// A refused scrape is told why and when to retry (the HTTP answer is 503
// with Retry-After); it is charged nothing.
//
// Thread-safety: thread-safe.
#ifndef BREAKERD_SERVER_METRICS_SCRAPE_LIMITER_H_
#define BREAKERD_SERVER_METRICS_SCRAPE_LIMITER_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "server/engine/clock.h"
#include "server/engine/mutex.h"
#include "server/engine/token_bucket.h"

namespace breakerd {

// What every scrape is charged on top of the registry's size: the process
// families, HTTP and the headers cost about as much as this many breakers.
inline constexpr int64_t kScrapeBaseCost = 10;

struct ScrapeLimits {
  static constexpr int kDefaultConcurrent = 2;
  static constexpr int64_t kDefaultBreakersPerSecond = 10000;
  static constexpr int64_t kDefaultBurstBreakers = 20000;

  // Scrapes rendered at once; one more is refused until one ends.
  int concurrent = kDefaultConcurrent;
  // Breakers read per second by scrapes, on average: 10,000 is one full
  // scrape a second at the default cap of 10,000 breakers, five times what
  // two Prometheus servers scraping every 10 s need.
  int64_t breakers_per_second = kDefaultBreakersPerSecond;
  // What the bucket holds when full: 20,000 lets two full scrapes at the
  // default cap through at the same moment (two Prometheus replicas).
  int64_t burst_breakers = kDefaultBurstBreakers;
};

class ScrapeLimiter {
 public:
  // REQUIRES: `clock` outlives the limiter; limits.concurrent,
  // limits.breakers_per_second and limits.burst_breakers are >= 1.
  ScrapeLimiter(const Clock* clock, ScrapeLimits limits);

  ScrapeLimiter(const ScrapeLimiter&) = delete;
  ScrapeLimiter& operator=(const ScrapeLimiter&) = delete;

  struct Admission {
    bool admitted = false;
    // Admitted: the scrape's slot, 0 <= slot < limits().concurrent, which
    // no other scrape in progress has (a caller keeps scratch memory per
    // slot).
    int slot = -1;
    // Refused: why, one line for the answer's body, and when to retry in
    // whole seconds (at least 1), for Retry-After.
    std::string reason;
    int64_t retry_after_seconds = 0;
  };

  // Admits a scrape of a registry of `breakers` breakers, charging it, or
  // refuses it (nothing charged). REQUIRES: End(slot) is called once for
  // every admitted scrape, when its answer is written.
  Admission Begin(size_t breakers) ABSL_LOCKS_EXCLUDED(mu_);
  void End(int slot) ABSL_LOCKS_EXCLUDED(mu_);

  const ScrapeLimits& limits() const { return limits_; }

 private:
  // Constant after construction.
  const ScrapeLimits limits_;

  Mutex mu_;
  // Slots of the scrapes in progress.
  std::vector<bool> busy_ ABSL_GUARDED_BY(mu_);
  // Breakers that scrapes may read.
  TokenBucket bucket_ ABSL_GUARDED_BY(mu_);
};

}  // namespace breakerd

#endif  // BREAKERD_SERVER_METRICS_SCRAPE_LIMITER_H_

// LogThrottle: at most one log line per interval for an event that can
// recur fast (a refused Admin call, a failed write), each line giving how
// many events it stands for, so a flood costs one line per interval and
// loses no count.
//
// Thread-safety: thread-safe.
#ifndef BREAKERD_SERVER_LOG_LOG_THROTTLE_H_
#define BREAKERD_SERVER_LOG_LOG_THROTTLE_H_

#include <cstdint>
#include <optional>

#include "absl/base/thread_annotations.h"
#include "absl/time/time.h"
#include "server/engine/mutex.h"

namespace breakerd {

class LogThrottle {
 public:
  explicit LogThrottle(absl::Duration interval)
      : interval_nanos_(absl::ToInt64Nanoseconds(interval)) {}

  LogThrottle(const LogThrottle&) = delete;
  LogThrottle& operator=(const LogThrottle&) = delete;

  // Counts one event at `now_nanos` (a monotonic clock's reading). When a
  // line is due (the first event since construction or Reset(), or the
  // interval has passed since the last line), returns the events it stands
  // for: this one and those counted since the last line. Else nullopt.
  std::optional<uint64_t> Count(int64_t now_nanos) ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(&mu_);
    ++unlogged_;
    if (logging_ && now_nanos - last_line_nanos_ < interval_nanos_) {
      return std::nullopt;
    }
    logging_ = true;
    last_line_nanos_ = now_nanos;
    const uint64_t events = unlogged_;
    unlogged_ = 0;
    return events;
  }

  // Ends a run of events (e.g. writes work again): if a line was logged
  // since the last Reset(), returns the events counted since that line
  // (for a closing line) and makes the next event's line due at once; else
  // nullopt.
  std::optional<uint64_t> Reset() ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(&mu_);
    if (!logging_) return std::nullopt;
    logging_ = false;
    const uint64_t events = unlogged_;
    unlogged_ = 0;
    return events;
  }

 private:
  const int64_t interval_nanos_;
  Mutex mu_;
  uint64_t unlogged_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t last_line_nanos_ ABSL_GUARDED_BY(mu_) = 0;
  // A line was logged since construction or the last Reset().
  bool logging_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace breakerd

#endif  // BREAKERD_SERVER_LOG_LOG_THROTTLE_H_

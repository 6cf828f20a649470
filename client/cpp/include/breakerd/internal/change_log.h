// Internal to breakerd::client, not part of its API (that is
// breakerd/client.h).
//
// ChangeLog: the log lines of one condition that goes wrong and right again
// (breakerd unreachable / back, Acquire answered with errors / again,
// Reports failing / accepted), rate limited so that a condition flapping
// around a borderline deadline cannot flood the log (client/README.md,
// "Fail-open"). The same rule, and the same wording, as the Java client's
// ChangeLog and the Node and Python clients' change logs.
//
// Each direction (the "wrong" line and the "right" line) is logged at most
// once per interval (10 s), so both lines of one outage are logged at once.
// A change that comes sooner is not logged but counted; the next line says
// how many changes were not logged: "<message> (N changes not logged since
// the previous line)". When changes were held back, one line with the
// current state (the latest message of that direction) is logged as soon as
// that direction's interval allows, so the last line always tells how
// things are.
//
// The log owns the condition's state, which starts right: Wrong() and
// Right() change it (a call that changes nothing is ignored), so concurrent
// callers cannot leave the log saying the opposite of the last change.
//
// Thread-safety: thread-safe. Lines go to the sink under the log's lock, in
// the order of the changes: the sink must not call back into the client.
#ifndef BREAKERD_CLIENT_CPP_INCLUDE_BREAKERD_INTERNAL_CHANGE_LOG_H_
#define BREAKERD_CLIENT_CPP_INCLUDE_BREAKERD_INTERNAL_CHANGE_LOG_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "breakerd/internal/clock.h"

namespace breakerd::client::internal {

class ChangeLog {
 public:
  // The shortest time between two lines of the same direction.
  static constexpr absl::Duration kInterval = absl::Seconds(10);

  // REQUIRES: `sink` set; `clock` and `timer` outlive the log, and the
  // timer runs no task of this log after the log is destroyed (stop it
  // first); interval positive.
  ChangeLog(std::function<void(absl::string_view)> sink, Clock* clock,
            Timer* timer, absl::Duration interval = kInterval);

  ChangeLog(const ChangeLog&) = delete;
  ChangeLog& operator=(const ChangeLog&) = delete;

  // Whether the condition is wrong now: a cheap check (no lock) before
  // building a message.
  bool wrong() const { return wrong_.load(std::memory_order_acquire); }

  // The condition went wrong: logs `message` or counts the change. Returns
  // false, doing nothing, if it was wrong already.
  bool Wrong(std::string message) ABSL_LOCKS_EXCLUDED(mu_) {
    return Change(true, std::move(message));
  }
  // The condition is right again: logs `message` or counts the change.
  // Returns false, doing nothing, if it was right already.
  bool Right(std::string message) ABSL_LOCKS_EXCLUDED(mu_) {
    return Change(false, std::move(message));
  }

 private:
  // Per direction: index 0 right, 1 wrong.
  struct Direction {
    std::string latest;
    std::optional<absl::Duration> last_logged;
  };

  bool Change(bool to_wrong, std::string message) ABSL_LOCKS_EXCLUDED(mu_);
  // The held-back state, once its direction's interval is over.
  void Flush() ABSL_LOCKS_EXCLUDED(mu_);
  // Writes the current direction's latest line.
  // REQUIRES: MayLog for it.
  void Emit(absl::Duration now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool MayLog(bool direction, absl::Duration now) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // At most one flush is pending; it re-checks what to write when it runs.
  void ScheduleFlush(bool direction, absl::Duration now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Constant after construction.
  const std::function<void(absl::string_view)> sink_;
  Clock* const clock_;
  Timer* const timer_;
  const absl::Duration interval_;

  absl::Mutex mu_;
  // Written under mu_; read without it by wrong().
  std::atomic<bool> wrong_{false};
  Direction directions_[2] ABSL_GUARDED_BY(mu_);
  // Changes not logged since the last line.
  uint64_t unlogged_ ABSL_GUARDED_BY(mu_) = 0;
  bool flush_scheduled_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace breakerd::client::internal

#endif  // BREAKERD_CLIENT_CPP_INCLUDE_BREAKERD_INTERNAL_CHANGE_LOG_H_

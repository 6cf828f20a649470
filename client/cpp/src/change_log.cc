#include "breakerd/internal/change_log.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace breakerd::client::internal {

ChangeLog::ChangeLog(std::function<void(absl::string_view)> sink, Clock* clock,
                     Timer* timer, absl::Duration interval)
    : sink_(std::move(sink)),
      clock_(clock),
      timer_(timer),
      interval_(interval) {}

bool ChangeLog::Change(bool to_wrong, std::string message) {
  absl::MutexLock lock(&mu_);
  if (wrong_.load(std::memory_order_relaxed) == to_wrong) return false;
  wrong_.store(to_wrong, std::memory_order_release);
  directions_[to_wrong].latest = std::move(message);
  const absl::Duration now = clock_->Now();
  if (MayLog(to_wrong, now)) {
    Emit(now);
  } else {
    ++unlogged_;
    ScheduleFlush(to_wrong, now);
  }
  return true;
}

void ChangeLog::Flush() {
  absl::MutexLock lock(&mu_);
  flush_scheduled_ = false;
  // A change since then was logged, with the count.
  if (unlogged_ == 0) return;
  const bool wrong = wrong_.load(std::memory_order_relaxed);
  const absl::Duration now = clock_->Now();
  if (MayLog(wrong, now)) {
    Emit(now);
  } else {
    ScheduleFlush(wrong, now);
  }
}

void ChangeLog::Emit(absl::Duration now) {
  Direction& d = directions_[wrong_.load(std::memory_order_relaxed)];
  std::string text = d.latest;
  if (unlogged_ > 0) {
    absl::StrAppend(&text, " (", unlogged_,
                    unlogged_ == 1 ? " change" : " changes",
                    " not logged since the previous line)");
  }
  d.last_logged = now;
  unlogged_ = 0;
  sink_(text);
}

bool ChangeLog::MayLog(bool direction, absl::Duration now) const {
  const std::optional<absl::Duration>& last =
      directions_[direction].last_logged;
  return !last.has_value() || now - *last >= interval_;
}

void ChangeLog::ScheduleFlush(bool direction, absl::Duration now) {
  if (flush_scheduled_) return;
  flush_scheduled_ = true;
  const std::optional<absl::Duration>& last =
      directions_[direction].last_logged;
  timer_->Schedule([this] { Flush(); }, last.value_or(now) + interval_ - now);
}

}  // namespace breakerd::client::internal

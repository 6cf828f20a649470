// StateSaver keeps the --state-file current, not only at SIGTERM (DESIGN.md
// "Restarts": overrides are written when they change), so that a crash
// brings back neither an override that `reset` removed nor an outage that
// has since healed.
//
// It is a TransitionObserver: every transition that changes what the file
// holds (an open, a close, an override, a reset; made here, applied from the
// fleet or restored) marks the file stale. Open -> half-open does not: the
// file keeps the cooldown end, from which half-open follows. The file is
// rewritten (CollectState + WriteStateFile, atomic) by SaveIfStale(), which
// the Admin service calls after each override, before it answers, and the
// maintenance loop calls every second; Save() writes unconditionally
// (shutdown).
//
// Thread-safety: every method is thread-safe; writes are serialized.
#ifndef BREAKERD_SERVER_STATE_STATE_SAVER_H_
#define BREAKERD_SERVER_STATE_STATE_SAVER_H_

#include <atomic>
#include <cstddef>
#include <functional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/engine/mutex.h"
#include "server/engine/registry.h"

namespace breakerd {

class StateSaver final : public TransitionObserver {
 public:
  // REQUIRES: registry non-null and outlives the saver; `path` non-empty.
  // `wall_now`: the wall clock cooldown ends are written in.
  // `decided_at` (fleet mode): a forced breaker's decision time by the
  // fleet's clock, written beside it (CollectState).
  StateSaver(const Registry* registry, std::string path,
             std::function<absl::Time()> wall_now = &absl::Now,
             std::function<int64_t(absl::string_view)> decided_at = nullptr);

  StateSaver(const StateSaver&) = delete;
  StateSaver& operator=(const StateSaver&) = delete;

  // Marks the file stale when t changes what it holds. Never does I/O.
  void OnTransition(const Transition& t) override;

  // Writes the file if it went stale since the last write. Returns
  // the breakers written, 0 when nothing was stale, or the write error (the
  // file is then still marked stale, so the next call tries again).
  absl::StatusOr<size_t> SaveIfStale() ABSL_LOCKS_EXCLUDED(write_mu_);

  // Writes the file now. Returns the breakers written or the write error.
  absl::StatusOr<size_t> Save() ABSL_LOCKS_EXCLUDED(write_mu_);

  const std::string& path() const { return path_; }

 private:
  absl::StatusOr<size_t> WriteLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);

  // Constant after construction.
  const Registry* const registry_;
  const std::string path_;
  const std::function<absl::Time()> wall_now_;
  const std::function<int64_t(absl::string_view)> decided_at_;

  std::atomic<bool> stale_{false};
  // WriteStateFile uses one temporary name per path and process.
  Mutex write_mu_;
};

}  // namespace breakerd

#endif  // BREAKERD_SERVER_STATE_STATE_SAVER_H_

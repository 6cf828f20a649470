// StateSaver keeps the --state-file current when an operator override
// changes (DESIGN.md "Restarts": overrides are written when they change, not
// only at SIGTERM), so a crash after `reset` cannot bring back the
// forced_open that the reset removed.
//
// It is a TransitionObserver: a forced_open, forced_closed or reset
// transition (made here, applied from the fleet or restored) marks the file
// stale. The file is rewritten (CollectState + WriteStateFile, atomic) by
// SaveIfStale(), which the Admin service calls after each override, before it
// answers, and the maintenance loop calls for overrides applied from the
// fleet; Save() writes unconditionally (shutdown).
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
  StateSaver(const Registry* registry, std::string path,
             std::function<absl::Time()> wall_now = &absl::Now);

  StateSaver(const StateSaver&) = delete;
  StateSaver& operator=(const StateSaver&) = delete;

  // Marks the file stale when t changes an override. Never does I/O.
  void OnTransition(const Transition& t) override;

  // Writes the file if an override changed since the last write. Returns
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

  std::atomic<bool> stale_{false};
  // WriteStateFile uses one temporary name per path and process.
  Mutex write_mu_;
};

}  // namespace breakerd

#endif  // BREAKERD_SERVER_STATE_STATE_SAVER_H_

// StateKeeper: the --state-file over a process's life, with what it logs.
// At start it restores the breakers the file holds (RestoreState; a missing
// or unreadable file is logged as "state_file_skipped", never fatal) and
// writes the file once, so that a directory that is missing or read-only is
// reported at start rather than at the first override that would be lost.
// While serving, Persist() (each second, and after each Admin override)
// writes it if it went stale; at shutdown SaveFinal() writes it whatever
// changed.
//
// A path that holds something other than a state file (ReadStateFile's
// FAILED_PRECONDITION: the token file named by a typo, a FIFO) is never
// written over: "state_file_skipped" is logged as an error saying so, and
// the process runs without saving state. A missing or empty file, or a
// state file that does not parse, is taken over.
//
// A failed write is counted (breakerd_state_save_failures_total) and logged
// as "state_save_failed" when writes start failing, then at most once per
// kStateSaveFailureLogInterval while they keep failing, and once
// ("state_save_recovered") when a write works again.
//
// Thread-safety: every method is thread-safe.
#ifndef BREAKERD_SERVER_STATE_STATE_KEEPER_H_
#define BREAKERD_SERVER_STATE_STATE_KEEPER_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/engine/registry.h"
#include "server/log/log_throttle.h"
#include "server/state/state_saver.h"

namespace breakerd {

// How often the --state-file is rewritten when breakers opened or closed
// (operator overrides are written before the Admin call answers).
inline constexpr absl::Duration kStateSaveInterval = absl::Seconds(1);
// While writes keep failing, one state_save_failed line per this interval.
inline constexpr absl::Duration kStateSaveFailureLogInterval = absl::Minutes(1);

class StateKeeper {
 public:
  // Restores `registry` from the file at `path` (entries whose cooldown
  // ended longer than `stale_after` ago are skipped), registers the saver as
  // an observer of `registry`, and writes the file once. REQUIRES: registry
  // outlives the keeper; path non-empty. `decided_at`: as StateSaver's.
  StateKeeper(Registry* registry, std::string path, absl::Duration stale_after,
              std::function<int64_t(absl::string_view)> decided_at = nullptr);

  StateKeeper(const StateKeeper&) = delete;
  StateKeeper& operator=(const StateKeeper&) = delete;

  // Writes the file if a breaker's saved state changed since the last write.
  // Nothing when saving is off.
  void Persist();
  // Writes the file now and logs "state_saved" (shutdown). Nothing when
  // saving is off.
  void SaveFinal();

  // False if the path held something other than a state file at start: the
  // file is then never written.
  bool saving() const { return saving_; }

  // Failed writes since start.
  uint64_t save_failures() const {
    return save_failures_.load(std::memory_order_relaxed);
  }

 private:
  // Sets saving_ to false if the file must not be written over.
  void Restore(Registry* registry, absl::Duration stale_after);
  // Counts and logs (rate-limited) the outcome of a write; a `final`
  // failure (at shutdown) is logged whatever the rate limit says.
  void OnSaved(const absl::StatusOr<size_t>& saved, bool final = false);

  const std::string path_;
  // Set by the constructor, then only read.
  bool saving_ = true;
  StateSaver saver_;
  std::atomic<uint64_t> save_failures_{0};
  // The state_save_failed line.
  LogThrottle failure_log_{kStateSaveFailureLogInterval};
};

}  // namespace breakerd

#endif  // BREAKERD_SERVER_STATE_STATE_KEEPER_H_

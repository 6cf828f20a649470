#include "server/state/state_keeper.h"

#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "server/engine/clock.h"
#include "server/log/json_log.h"
#include "server/state/state_file.h"

namespace breakerd {

StateKeeper::StateKeeper(Registry* registry, std::string path,
                         absl::Duration stale_after,
                         std::function<int64_t(absl::string_view)> decided_at)
    : path_(path),
      saver_(registry, std::move(path), &absl::Now, std::move(decided_at)) {
  Restore(registry, stale_after);
  if (!saving_) return;
  registry->AddObserver(&saver_);
  OnSaved(saver_.Save());
}

void StateKeeper::Restore(Registry* registry, absl::Duration stale_after) {
  absl::StatusOr<std::vector<SavedBreaker>> saved = ReadStateFile(path_);
  if (absl::IsFailedPrecondition(saved.status())) {
    // Not ours (the token file, by a typo): writing would destroy it.
    saving_ = false;
    LogEvent(LogLevel::kError, "state_file_skipped",
             {{"path", path_},
              {"error", saved.status().message()},
              {"why",
               "not a breakerd state file: breakerd will not save state "
               "there (open breakers and operator overrides will not "
               "survive a restart); point --state-file at a file of its "
               "own"}});
    return;
  }
  if (!saved.ok()) {
    // Never fatal: start fresh.
    LogEvent(
        absl::IsNotFound(saved.status()) ? LogLevel::kInfo : LogLevel::kWarn,
        "state_file_skipped",
        {{"path", path_}, {"error", saved.status().message()}});
    return;
  }
  const RestoreStats stats =
      RestoreState(registry, *saved, absl::Now(), stale_after);
  LogEvent(LogLevel::kInfo, "state_restored",
           {{"path", path_},
            {"restored", int64_t{stats.restored}},
            {"skipped_stale", int64_t{stats.skipped_stale}},
            {"failed", int64_t{stats.failed}}});
}

void StateKeeper::Persist() {
  if (!saving_) return;
  OnSaved(saver_.SaveIfStale());
}

void StateKeeper::SaveFinal() {
  if (!saving_) return;
  absl::StatusOr<size_t> saved = saver_.Save();
  OnSaved(saved, /*final=*/true);
  if (!saved.ok()) return;
  LogEvent(LogLevel::kInfo, "state_saved",
           {{"path", path_}, {"breakers", static_cast<int64_t>(*saved)}});
}

void StateKeeper::OnSaved(const absl::StatusOr<size_t>& saved, bool final) {
  if (saved.ok()) {
    if (const std::optional<uint64_t> failures = failure_log_.Reset();
        failures.has_value()) {
      LogEvent(
          LogLevel::kInfo, "state_save_recovered",
          {{"path", path_}, {"failures", static_cast<int64_t>(*failures)}});
    }
    return;
  }
  save_failures_.fetch_add(1, std::memory_order_relaxed);
  std::optional<uint64_t> failures =
      failure_log_.Count(MonotonicClock::Get()->NowNanos());
  // The shutdown's failure is the last word: logged whatever the throttle
  // says, with the failures not logged since the previous line.
  if (!failures.has_value() && final) failures = failure_log_.Reset();
  if (!failures.has_value()) return;
  LogEvent(LogLevel::kError, "state_save_failed",
           {{"path", path_},
            {"error", saved.status().message()},
            {"failures", static_cast<int64_t>(*failures)},
            {"why", final ? "at shutdown: open breakers and operator "
                            "overrides will not survive this restart"
                          : "open breakers and operator overrides will not "
                            "survive a restart until a write works (tried "
                            "again every second)"}});
}

}  // namespace breakerd

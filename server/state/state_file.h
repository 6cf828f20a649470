// The --state-file: what a restarted sidecar must not forgive (DESIGN.md
// "Restarts"). On shutdown every breaker that is not plain closed (open or
// half-open with its cooldown end and escalation, forced open, forced
// closed) is collected from the Registry and written atomically; on start
// the file is read back and applied with TransitionReason::kRestored,
// skipping open entries whose cooldown ended long ago.
//
// The file is text, one breaker per line after a versioned header:
//
//   breakerd-state 2
//   <dependency> <state> <open_until_unix_ms> <escalation> <decided_unix_ms>
//
// <state> is "open", "forced_open" or "forced_closed"; <open_until_unix_ms>
// is the wall-clock end of the cooldown (milliseconds since the Unix epoch,
// 0 for the forced states); <escalation> is the number of cooldown doublings
// so far, 0..kMaxSavedEscalation; <decided_unix_ms>, for a forced state in
// fleet mode, is when the operator decided it by the fleet's clock (0:
// unknown, and always 0 for open), so that after a restart the newest
// decision still wins fleet-wide. Version 1 files (four fields, no
// decision time) are read too. Fields are separated by single spaces and
// every line, the last included, ends in '\n'. Wall-clock time is used
// because the monotonic clock does not survive a restart.
//
// Thread-safety: every function is thread-safe (the Registry is). Two
// concurrent WriteStateFile calls for the same path in one process share a
// temporary file name and must not overlap.
#ifndef BREAKERD_SERVER_STATE_STATE_FILE_H_
#define BREAKERD_SERVER_STATE_STATE_FILE_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "server/engine/registry.h"
#include "server/engine/types.h"

namespace breakerd {

// The header line, without its '\n'.
inline constexpr absl::string_view kStateFileHeader = "breakerd-state 2";
// The header of version 1 (read, never written).
inline constexpr absl::string_view kStateFileHeaderV1 = "breakerd-state 1";
// A state file (or text) larger than this, or with more lines, is refused
// unread, and WriteStateFile refuses to write one.
inline constexpr size_t kMaxStateFileBytes = size_t{64} << 20;  // 64 MiB
inline constexpr size_t kMaxStateFileLines = 1000000;           // header too
// The largest escalation written or accepted. Every cooldown is capped at
// the policy's max long before 64 doublings, so a breaker escalated further
// behaves the same at 64; CollectState clamps to it.
inline constexpr uint32_t kMaxSavedEscalation = 64;
// The largest open_until_unix_ms accepted (the last millisecond of 9999).
inline constexpr int64_t kMaxSavedUnixMillis = 253402300799999;

// One saved breaker.
struct SavedBreaker {
  std::string dependency;
  // kOpen (a half-open breaker is saved as open with the cooldown end),
  // kForcedOpen or kForcedClosed. FormatState writes kHalfOpen as "open"
  // and leaves kClosed out.
  State state = State::kOpen;
  // kOpen: the wall-clock end of the cooldown, in Unix milliseconds (a
  // half-open breaker: when it was saved). 0 for the forced states.
  int64_t open_until_unix_ms = 0;
  // Cooldown doublings so far (kept beneath a forced state too).
  uint32_t escalation_level = 0;
  // Forced states: when the operator decided it, by the fleet's clock (Unix
  // ms); 0 if unknown (no fleet, or a version 1 file).
  int64_t decided_unix_ms = 0;

  bool operator==(const SavedBreaker& other) const;
};

// Every breaker of `registry` that is not plain closed, sorted by
// dependency: open and half-open as kOpen with open_until = now_wall +
// retry_after rounded up to the millisecond (never shorter than the
// cooldown left), forced open, forced closed. Escalation above
// kMaxSavedEscalation is clamped.
// `decided_at`, if set, gives a forced breaker's decided_unix_ms (fleet
// mode: FleetSync::DecidedAt).
std::vector<SavedBreaker> CollectState(
    const Registry& registry, absl::Time now_wall,
    const std::function<int64_t(absl::string_view)>& decided_at = nullptr);

// The file's text: the header line, then one line per breaker in the given
// order.
std::string FormatState(absl::Span<const SavedBreaker> breakers);

// Parses the text of a state file, strictly: nothing is returned unless
// every line is valid. INVALID_ARGUMENT naming the line, the field and the
// rule (e.g. "line 3: escalation: must be an integer 0..64") for a missing
// or unsupported header, a line without exactly 5 (version 1: 4)
// space-separated fields, a
// bad dependency name, an unknown state, an out-of-range number, a
// dependency seen twice, a missing final newline, or text over
// kMaxStateFileBytes / kMaxStateFileLines.
absl::StatusOr<std::vector<SavedBreaker>> ParseState(absl::string_view text);

// Writes FormatState(breakers) to `path` atomically: to "<path>.tmp.<pid>"
// in the same directory, fsync, rename over `path`, fsync the directory. A
// reader sees the old file or the new one, never a mix; on failure the
// temporary file is removed and `path` is left as it was (unless only the
// directory fsync failed). Errors name the path and the errno text, with
// the code of the errno (absl::ErrnoToStatus); RESOURCE_EXHAUSTED, writing
// nothing, if the text would be over kMaxStateFileBytes or
// kMaxStateFileLines.
absl::Status WriteStateFile(const std::string& path,
                            absl::Span<const SavedBreaker> breakers);

// Writes `text` to `path` as WriteStateFile does (temporary file, fsync,
// rename, directory fsync), with the same guarantees and errors, without
// the size check.
absl::Status WriteFileAtomically(const std::string& path,
                                 absl::string_view text);

// Reads and parses `path`. NOT_FOUND if it does not exist (the caller logs
// and starts fresh); an I/O error names the path and errno text;
// FAILED_PRECONDITION if `path` holds something that is not a state file
// of any version (not a regular file, or a non-empty file whose first line
// is not "breakerd-state <digits>": the token file named by mistake), which
// the caller must not write over; otherwise ParseState's errors, prefixed
// with "<path>: ". No message quotes a first line that is not a header.
absl::StatusOr<std::vector<SavedBreaker>> ReadStateFile(
    const std::string& path);

struct RestoreStats {
  // Entries applied.
  int restored = 0;
  // Open entries whose cooldown ended more than stale_after ago.
  int skipped_stale = 0;
  // Entries the registry refused (e.g. past max_breakers, a bad name) or
  // with a state that is never saved (kClosed).
  int failed = 0;
};

// Applies `breakers` to `registry` with Registry::ApplyExternal(...,
// TransitionReason::kRestored), one by one; a refused entry is counted and
// the rest still applied. Forced states are restored as such, with their
// escalation beneath (as an elapsed open period, which only the operator's
// Reset ends). kOpen (and kHalfOpen) entries open with the cooldown left,
// open_until - now_wall: zero or less means half-open now, with the
// escalation kept so a failed probe escalates from it; an entry whose
// cooldown ended more than `stale_after` before now_wall is skipped.
// REQUIRES: registry non-null.
RestoreStats RestoreState(Registry* registry,
                          absl::Span<const SavedBreaker> breakers,
                          absl::Time now_wall, absl::Duration stale_after);

}  // namespace breakerd

#endif  // BREAKERD_SERVER_STATE_STATE_FILE_H_

// Internal to breakerd::client, not part of its API (that is
// breakerd/client.h); the client's tests include it.
//
// WatchCache: what the client's Watch stream has said about each dependency,
// and the local decision it implies (client/README.md, "Local refusal" and
// "Local decisions"): a refusal while the breaker is open, a grant of a
// first attempt while its latest event allows local decisions. Time is
// passed in by the caller (monotonic, as an absl::Duration since an
// arbitrary epoch), so the cache has no clock of its own.
//
// Thread-safety: thread-compatible. Const methods may run concurrently;
// anything else needs external synchronization (the Client holds its cache
// under its own mutex).
#ifndef BREAKERD_CLIENT_CPP_INCLUDE_BREAKERD_INTERNAL_WATCH_CACHE_H_
#define BREAKERD_CLIENT_CPP_INCLUDE_BREAKERD_INTERNAL_WATCH_CACHE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "breakerd/client.h"
#include "breakerd/internal/local_batch.h"
#include "breakerd/v1/breaker.pb.h"

namespace breakerd::client::internal {

// A breaker's policy mode, from StateChange.mode.
enum class Mode {
  kEnforce,  // "enforce", and "" from a sidecar older than the field
  kShadow,   // "shadow": the sidecar always allows, so never refuse locally
};

// "shadow" -> kShadow; anything else (including "") -> kEnforce.
Mode ModeFromName(absl::string_view name);

// What the cache decides for a call, with no RPC.
struct CacheVerdict {
  enum class Kind {
    kAsk,     // breakerd decides
    kGrant,   // a first attempt granted locally, from `slot`
    kRefuse,  // refused locally: `state`, `reason`, `retry_after`
  };
  Kind kind = Kind::kAsk;
  std::shared_ptr<LocalSlot> slot;
  State state = State::kUnspecified;
  RejectReason reason = RejectReason::kNone;
  absl::Duration retry_after;
};

class WatchCache {
 public:
  // Records `change`, received at monotonic time `now`: the state, the mode,
  // whether it allows local decisions, the generation and (for OPEN) the
  // cooldown end now + retry_after. An "evicted" event forgets the
  // dependency. Returns false, changing nothing, if the cache holds a
  // higher generation for the dependency (an equal generation is applied:
  // a "reload" event changes the mode or local_decisions without a
  // transition, a "ramp_done" one turns local decisions on).
  bool Apply(const v1::StateChange& change, absl::Duration now);

  // The decision for `dependency`: a refusal (as Refusal), else a grant when
  // `may_grant` and the latest event says CLOSED with local_decisions in
  // enforce mode (the slot of that event: the caller counts the grant),
  // else kAsk. `now` is read only for an OPEN breaker.
  CacheVerdict Decide(absl::string_view dependency, bool may_grant,
                      absl::FunctionRef<absl::Duration()> now) const;

  // The local refusal for `dependency` at monotonic time `now` (source
  // kLocal, reason kOpen with retry_after = time left, or kForcedOpen), or
  // nullopt if the call goes to the sidecar: unknown, closed, half-open,
  // open at or past its cooldown end, forced closed, or shadow mode.
  std::optional<Decision> Refusal(absl::string_view dependency,
                                  absl::Duration now) const;

  // The state held for `dependency`; nullopt if unknown.
  std::optional<State> StateOf(absl::string_view dependency) const;

  // Forgets everything (the stream ended).
  void Clear() { entries_.clear(); }

 private:
  struct Entry {
    State state = State::kUnspecified;
    Mode mode = Mode::kEnforce;
    uint64_t generation = 0;
    absl::Duration open_until;  // monotonic; meaningful when OPEN
    // Set while the entry allows local grants (CLOSED, local_decisions,
    // enforce): the slot of (dependency, generation).
    std::shared_ptr<LocalSlot> slot;
  };

  absl::flat_hash_map<std::string, Entry> entries_;
};

}  // namespace breakerd::client::internal

#endif  // BREAKERD_CLIENT_CPP_INCLUDE_BREAKERD_INTERNAL_WATCH_CACHE_H_

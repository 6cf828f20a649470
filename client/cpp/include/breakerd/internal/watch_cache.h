// Internal to breakerd::client, not part of its API (that is
// breakerd/client.h); the client's tests include it.
//
// WatchCache: what the client's Watch stream has said about each dependency,
// and the local refusal it implies (client/README.md, "Local refusal").
// Time is passed in by the caller (monotonic, as an absl::Duration since an
// arbitrary epoch), so the cache has no clock of its own.
//
// Thread-safety: thread-compatible. Const methods may run concurrently;
// anything else needs external synchronization (the Client holds its cache
// under its own mutex).
#ifndef BREAKERD_CLIENT_CPP_INCLUDE_BREAKERD_INTERNAL_WATCH_CACHE_H_
#define BREAKERD_CLIENT_CPP_INCLUDE_BREAKERD_INTERNAL_WATCH_CACHE_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "breakerd/client.h"
#include "breakerd/v1/breaker.pb.h"

namespace breakerd::client::internal {

// A breaker's policy mode, from StateChange.mode.
enum class Mode {
  kEnforce,  // "enforce", and "" from a sidecar older than the field
  kShadow,   // "shadow": the sidecar always allows, so never refuse locally
};

// "shadow" -> kShadow; anything else (including "") -> kEnforce.
Mode ModeFromName(absl::string_view name);

class WatchCache {
 public:
  // Records `change`, received at monotonic time `now`: the state, the mode,
  // the generation and (for OPEN) the cooldown end now + retry_after.
  // Returns false, changing nothing, if the cache holds a higher generation
  // for the dependency (an equal generation is applied: a "reload" event
  // changes the mode without a transition).
  bool Apply(const v1::StateChange& change, absl::Duration now);

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
  };

  absl::flat_hash_map<std::string, Entry> entries_;
};

}  // namespace breakerd::client::internal

#endif  // BREAKERD_CLIENT_CPP_INCLUDE_BREAKERD_INTERNAL_WATCH_CACHE_H_

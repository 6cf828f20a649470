// The shared store of fleet mode, as FleetSync needs it: publish a breaker's
// state with a per-dependency version, claim and release the fleet-wide
// probe, read the states stored, and receive what other sidecars publish.
// RedisStore is the real one; tests use an in-memory fake.
//
// Thread-safety: every method but Wake() is called from one thread (the
// fleet thread) only; Wake() may be called from any thread.
#ifndef BREAKERD_SERVER_FLEET_FLEET_STORE_H_
#define BREAKERD_SERVER_FLEET_FLEET_STORE_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "server/engine/types.h"

namespace breakerd {

// The fleet's wire format: every stored state and published message
// starts "<version> v<format> ". A sidecar reads kFleetFormat and the
// untagged format 1 of earlier releases (so a rolling upgrade follows the
// pods not yet upgraded); it ignores and counts any other.
inline constexpr int kFleetFormat = 2;

// One breaker state as the fleet shares it.
struct FleetMessage {
  std::string dependency;
  // Assigned by the store, increasing per dependency.
  uint64_t version = 0;
  // kFleetFormat, or 1 for a message from an earlier release.
  int format = kFleetFormat;
  // When the store stored it, by the fleet's clock (Redis TIME, Unix
  // milliseconds), or for an operator's decision when it was made (by the
  // origin's estimate of the fleet's clock): orders decisions fleet-wide.
  // 0 in format 1.
  int64_t stored_unix_ms = 0;
  // The sidecar that published it (FleetSync's id).
  std::string origin;
  ExternalState::Kind kind = ExternalState::Kind::kOpen;
  // kOpen: the end of the cooldown in Unix milliseconds: by the fleet's
  // clock (the store's) in kFleetFormat, by the origin's own in format 1.
  int64_t open_until_unix_ms = 0;
  // kOpen: the escalation level.
  uint32_t escalation_level = 0;
  // Why the origin moved (TransitionReasonName: "consecutive_failures",
  // "fleet_failure_rate", "forced_open", ...); empty in format 1.
  std::string reason;
};

// A state to publish: the store stamps it with its version and its clock.
struct FleetPublish {
  std::string dependency;
  std::string origin;
  ExternalState::Kind kind = ExternalState::Kind::kOpen;
  // kOpen: the cooldown left now; the store adds its own time to it.
  absl::Duration open_remaining = absl::ZeroDuration();
  uint32_t escalation_level = 0;
  // TransitionReasonName of the origin's transition.
  std::string reason;
  // An operator's decision: when it was made, by the fleet's clock (Unix
  // ms), stored as the message's time; 0: the store's time now.
  int64_t decided_unix_ms = 0;
};

struct PublishAnswer {
  // 0: not published, because it is an operator's decision older than the
  // decision the store holds (superseded_by, raw as ReadStates').
  uint64_t version = 0;
  // The store's clock when it answered (Unix milliseconds).
  int64_t store_unix_ms = 0;
  std::string superseded_by;
};

// Bounds on what is accepted from the store (anyone who can write to the
// Redis can write there, so nothing read is trusted to be well formed).
// A whole message: the largest a sidecar writes is about 420 bytes
// (20 + 3 + 13 + 128 + 13 + 15 + 2 + 200 and the spaces).
inline constexpr size_t kMaxFleetMessageBytes = 512;
// The origin: a sidecar's id (host/pid/hex; Linux host names are at most
// 64 bytes), printable ASCII without spaces.
inline constexpr size_t kMaxFleetOriginBytes = 128;
// Versions come from Redis INCR, a signed 64-bit integer.
inline constexpr uint64_t kMaxFleetVersion = INT64_MAX;
// 9999-12-31T23:59:59.999Z: later cooldown ends are not wall-clock times.
inline constexpr int64_t kMaxFleetUnixMs = 253402300799999;
inline constexpr uint32_t kMaxFleetEscalation = 64;
// A reason: lower_snake_case, as TransitionReasonName.
inline constexpr size_t kMaxFleetReasonBytes = 32;
// The store's incarnation: an origin, "@" and a time.
inline constexpr size_t kMaxIncarnationBytes = 256;

// The kind's wire name ("open", "closed", "forced_open", ...).
absl::string_view FleetKindName(ExternalState::Kind kind);
// The whole wire text of m in kFleetFormat: "<version> v2 <stored_unix_ms>
// <origin> <kind> <open_until_unix_ms> <escalation> <reason> <dependency>".
// (The Redis store builds the same text inside its publish script, where the
// time is the store's.)
std::string FormatFleetMessage(const FleetMessage& m);
// Parses and validates a wire text: at most kMaxFleetMessageBytes (checked
// before anything else), version 1..kMaxFleetVersion, origin
// 1..kMaxFleetOriginBytes of printable ASCII, a known kind, times
// 0..kMaxFleetUnixMs, escalation 0..kMaxFleetEscalation, all in plain
// decimal digits, a reason of 1..kMaxFleetReasonBytes of [a-z_], and the
// dependency by ValidateDependency. Returns
// INVALID_ARGUMENT naming the field, or UNIMPLEMENTED for a format this
// sidecar does not know ("v3 ..."); the message quotes at most a short
// escaped prefix of the offending text, never the whole.
absl::StatusOr<FleetMessage> ParseFleetMessage(absl::string_view text);

struct ClaimAnswer {
  bool won = false;
  // The lease left: the full lease if won, else the holder's.
  absl::Duration lease = absl::ZeroDuration();
};

// One dependency's share of a window sync (FleetStore::SyncWindows).
struct WindowSync {
  std::string dependency;
  // Counted outcomes gained since the last sync (may be negative later,
  // when a count is replaced).
  int64_t calls = 0;
  int64_t failures = 0;
  int64_t slow = 0;
  // The fleet's buckets: `buckets` of `width` make the window; the width is
  // part of the keys, so policies with different windows never mix.
  absl::Duration width = absl::Seconds(3);
  int buckets = 10;
  // This sidecar tripped the dependency locally (once per episode).
  bool tripped = false;
};

struct HeartbeatAnswer {
  uint64_t members = 0;
  // The store's clock (Unix milliseconds).
  int64_t store_unix_ms = 0;
  // At most kMaxIncarnationBytes (a longer stored value is cut).
  std::string incarnation;
};

class FleetStore {
 public:
  virtual ~FleetStore() = default;

  // (Re)connects and subscribes. Until it returns OK, nothing else is
  // called; after any error, Connect() is called again before anything else.
  virtual absl::Status Connect() = 0;
  // Drops the connections (after an error, or before Connect again).
  virtual void Disconnect() = 0;

  // Stores p as the dependency's state (expiring after `ttl`; zero: never)
  // and publishes it, atomically, under the next version and stamped with
  // the store's clock (kFleetFormat), and answers both; except an
  // operator's decision older than the decision stored, which is neither
  // stored nor published (version 0, and the stored one).
  virtual absl::StatusOr<PublishAnswer> Publish(const FleetPublish& p,
                                                absl::Duration ttl) = 0;
  // SET probe-key owner NX PX lease, or the holder's lease left.
  virtual absl::StatusOr<ClaimAnswer> ClaimProbe(absl::string_view dependency,
                                                 absl::string_view owner,
                                                 absl::Duration lease) = 0;
  // Deletes the probe key if `owner` still holds it.
  virtual absl::Status ReleaseProbe(absl::string_view dependency,
                                    absl::string_view owner) = 0;
  // Every stored state, as the raw text "<version> <body>" for
  // ParseFleetMessage; a value longer than kMaxFleetMessageBytes may be
  // cut to kMaxFleetMessageBytes + 1 bytes (still too long: refused).
  virtual absl::StatusOr<std::vector<std::string>> ReadStates() = 0;
  // Records member `id` as alive now (by the store's own clock, so that the
  // members' clocks do not matter), forgets members not heard from for
  // longer than `ttl`, and answers how many are alive, `id` included, and
  // the store's incarnation: a value kept in the store, set to a new one
  // (`id` and the store's time) by the first heartbeat that finds none. A store
  // that forgets its keys (FLUSHALL, a restart without persistence, eviction)
  // comes back with another incarnation. Also the round trip that notices a
  // dead or hung store while idle.
  virtual absl::StatusOr<HeartbeatAnswer> Heartbeat(absl::string_view id,
                                                    absl::Duration ttl) = 0;
  // For each sync, in one pipelined round trip: adds the counts gained to
  // the current bucket (by the store's clock) of the dependency's fleet
  // window, records `id` among the window's sources if it gained failures
  // or slow calls and among its trips if it tripped, forgets buckets older
  // than the window, and answers the window's sums (in the order given).
  // Every key expires with the window.
  virtual absl::StatusOr<std::vector<FleetWindow>> SyncWindows(
      absl::string_view id, const std::vector<WindowSync>& syncs) = 0;
  // A fleet open of `dependency` closed: its window (of this `width`) is
  // emptied, so the failures from before the close no longer count.
  virtual absl::Status EndEpisode(absl::string_view dependency,
                                  absl::Duration width) = 0;
  // Waits at most `timeout` for published messages (or Wake()) and returns
  // the payloads that arrived (possibly none), raw and cut as ReadStates':
  // the caller parses, validates and counts them.
  virtual absl::StatusOr<std::vector<std::string>> Receive(
      absl::Duration timeout) = 0;
  // Makes a Receive in progress (or the next one) return at once.
  virtual void Wake() = 0;
};

}  // namespace breakerd

#endif  // BREAKERD_SERVER_FLEET_FLEET_STORE_H_

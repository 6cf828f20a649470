// The shared store of fleet mode, as FleetSync needs it: publish a breaker's
// state with a per-dependency version, claim and release the fleet-wide
// probe, read the states stored, and receive what other sidecars publish.
// RedisStore is the real one; tests use an in-memory fake.
//
// Thread-safety: every method but Wake() is called from one thread (the
// fleet thread) only; Wake() may be called from any thread.
#ifndef BREAKERD_SERVER_FLEET_FLEET_STORE_H_
#define BREAKERD_SERVER_FLEET_FLEET_STORE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "server/engine/types.h"

namespace breakerd {

// One breaker state as the fleet shares it.
struct FleetMessage {
  std::string dependency;
  // Assigned by the store, increasing per dependency; 0 before publishing.
  uint64_t version = 0;
  // The sidecar that published it (FleetSync's id).
  std::string origin;
  ExternalState::Kind kind = ExternalState::Kind::kOpen;
  // kOpen: wall-clock end of the cooldown, in Unix milliseconds.
  int64_t open_until_unix_ms = 0;
  // kOpen: the escalation level.
  uint32_t escalation_level = 0;
};

// The wire form (store value and pub/sub payload) without the version:
// "<origin> <kind> <open_until_unix_ms> <escalation> <dependency>".
std::string FormatFleetBody(const FleetMessage& m);
// Parses "<version> " + body. INVALID_ARGUMENT naming the field if it does
// not parse (a message from a newer or foreign writer is skipped, not
// applied).
absl::StatusOr<FleetMessage> ParseFleetMessage(absl::string_view text);

struct ClaimAnswer {
  bool won = false;
  // The lease left: the full lease if won, else the holder's.
  absl::Duration lease = absl::ZeroDuration();
};

class FleetStore {
 public:
  virtual ~FleetStore() = default;

  // (Re)connects and subscribes. Until it returns OK, nothing else is
  // called; after any error, Connect() is called again before anything else.
  virtual absl::Status Connect() = 0;
  // Drops the connections (after an error, or before Connect again).
  virtual void Disconnect() = 0;

  // Stores m as the dependency's state (expiring after `ttl`; zero: never)
  // and publishes it, atomically, under the next version, which it returns.
  virtual absl::StatusOr<uint64_t> Publish(const FleetMessage& m,
                                           absl::Duration ttl) = 0;
  // SET probe-key owner NX PX lease, or the holder's lease left.
  virtual absl::StatusOr<ClaimAnswer> ClaimProbe(absl::string_view dependency,
                                                 absl::string_view owner,
                                                 absl::Duration lease) = 0;
  // Deletes the probe key if `owner` still holds it.
  virtual absl::Status ReleaseProbe(absl::string_view dependency,
                                    absl::string_view owner) = 0;
  // Every stored state.
  virtual absl::StatusOr<std::vector<FleetMessage>> ReadStates() = 0;
  // A round trip, to notice a dead or hung store while idle.
  virtual absl::Status Ping() = 0;
  // Waits at most `timeout` for published messages (or Wake()) and returns
  // those that arrived (possibly none). Unparseable ones are dropped.
  virtual absl::StatusOr<std::vector<FleetMessage>> Receive(
      absl::Duration timeout) = 0;
  // Makes a Receive in progress (or the next one) return at once.
  virtual void Wake() = 0;
};

}  // namespace breakerd

#endif  // BREAKERD_SERVER_FLEET_FLEET_STORE_H_

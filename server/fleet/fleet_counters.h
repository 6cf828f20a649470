// What a fleet sidecar counts (FleetSync::counters()), in a header of its
// own: the metrics layer reads it without linking the fleet.
#ifndef BREAKERD_SERVER_FLEET_FLEET_COUNTERS_H_
#define BREAKERD_SERVER_FLEET_FLEET_COUNTERS_H_

#include <cstdint>

namespace breakerd {

// Counters since start (breakerd_fleet_events_total{event}).
struct FleetCounters {
  uint64_t published = 0;
  uint64_t publish_failures = 0;
  uint64_t applied = 0;
  uint64_t duplicates = 0;
  uint64_t claims_won = 0;
  uint64_t claims_lost = 0;
  uint64_t connects = 0;
  uint64_t disconnects = 0;
  // Messages refused: malformed, out of range, or an implausible version.
  uint64_t refused = 0;
  // Times the store was found to have forgotten the fleet's keys (its
  // incarnation changed while connected) and this sidecar re-synced.
  uint64_t store_resets = 0;
  // Messages in a format this sidecar does not know (a newer release's),
  // ignored.
  uint64_t unknown_versions = 0;
  // Window syncs (one pipelined round trip each), and local trips the
  // fleet confirmed (by its window or a quorum of trips) and published.
  uint64_t window_syncs = 0;
  uint64_t confirmed_opens = 0;
  // Operator decisions received that were older than the newest this
  // sidecar knew for the dependency: ignored.
  uint64_t stale_decisions = 0;
};

}  // namespace breakerd

#endif  // BREAKERD_SERVER_FLEET_FLEET_COUNTERS_H_

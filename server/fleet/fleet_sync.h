// FleetSync: fleet mode's coordinator. It keeps the breakers of this
// sidecar in step with the fleet's through a FleetStore, on one thread of
// its own, so the request path never waits on the store:
//
// - Local transitions (as a TransitionObserver) to open, closed after a
//   probe, forced open/closed and reset are queued (latest per dependency)
//   and published with a per-dependency version. Cooldown ends travel in
//   the store's clock (Redis TIME), never a node's own: each sidecar keeps
//   the offset between the two from its round trips, so a node whose
//   clock is a minute off still ends a cooldown with the others.
// - What others publish is applied to the local breaker
//   (Registry::ApplyExternal, reason "fleet"), once: messages whose version
//   is not newer than the last seen for that dependency are dropped, as are
//   our own.
// - Nothing read from the store is trusted: every message is validated
//   (ParseFleetMessage) before anything is kept or logged; a version more
//   than max_version_jump above the last seen (0 if none) is refused, so
//   one forged message cannot make the real ones look old. Refused
//   messages are counted (FleetCounters::refused) and logged at most once
//   per log_interval, quoting only a short escaped prefix. The last
//   versions seen are kept for at most max_tracked_versions dependencies
//   (least recently updated dropped first) and forgotten state_ttl after
//   their last update: a store's version key expires with its state, and
//   the version that restarts from 1 after that must not look old.
// - Half-open probes are claimed fleet-wide (as the ProbeArbiter): the
//   engine asks without waiting and refuses meanwhile; the answer comes
//   back through Registry::SetProbeClaim. The claim is released when the
//   probe's result moves the breaker.
// - When the store fails, Active() turns false (every breaker probes on its
//   own), pending claims are answered "won" (a local claim), unpublished
//   states are kept, the change is logged once, and the thread reconnects
//   with backoff; on reconnect it re-reads the stored states (open and
//   forced ones are applied), then publishes what it kept.
//
// Thread-safety: every public method is thread-safe. Wiring: construct,
// registry->SetProbeArbiter(&sync) and registry->AddObserver(&sync) before
// serving, Start(), and Stop() before the Registry goes away.
#ifndef BREAKERD_SERVER_FLEET_FLEET_SYNC_H_
#define BREAKERD_SERVER_FLEET_FLEET_SYNC_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <list>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/time/time.h"
#include "server/engine/mutex.h"
#include "server/engine/registry.h"
#include "server/fleet/fleet_counters.h"
#include "server/fleet/fleet_store.h"

namespace breakerd {

struct FleetOptions {
  // This sidecar's id in the fleet (origin of what it publishes; owner of
  // the probes it claims). Must be unique per process and contain no space.
  std::string id;
  // Reconnect backoff, doubling from min to max.
  absl::Duration reconnect_min = absl::Milliseconds(200);
  absl::Duration reconnect_max = absl::Seconds(2);
  // How often this sidecar heartbeats (--fleet-sync-interval): the round
  // trip that also notices a dead or hung store while idle. A member not
  // heard from for kMemberTtlIntervals of these drops out of members().
  absl::Duration heartbeat_interval = absl::Milliseconds(250);
  // Stored closed/reset states expire after this; open states this long
  // after their cooldown ends; forced states never.
  absl::Duration state_ttl = absl::Minutes(10);
  // This node's wall clock: backoff, log budgets, version ages, and the
  // offset to the store's clock (the fleet's), measured at each round trip
  // that reads it.
  std::function<absl::Time()> wall_now = [] { return absl::Now(); };
  // Most dependencies whose last version is remembered (the default is
  // limits.max_breakers' default).
  size_t max_tracked_versions = 10000;
  // A received version more than this above the last seen (or above 0 when
  // none was seen) is refused. A state read on (re)join is the baseline.
  uint64_t max_version_jump = 1'000'000;
  // At most one fleet_message_refused and one fleet_apply_failed line per
  // interval; the rest are counted in the next line's "suppressed".
  absl::Duration log_interval = absl::Seconds(1);
};

// A member silent for this many heartbeat intervals is no longer counted.
inline constexpr int kMemberTtlIntervals = 4;

class FleetSync final : public TransitionObserver, public ProbeArbiter {
 public:
  // REQUIRES: registry and store non-null; registry outlives this.
  FleetSync(Registry* registry, std::unique_ptr<FleetStore> store,
            FleetOptions options);
  // Stops the thread if running.
  ~FleetSync() override;

  FleetSync(const FleetSync&) = delete;
  FleetSync& operator=(const FleetSync&) = delete;

  // Starts the fleet thread (which connects first). REQUIRES: once.
  void Start();
  // Stops and joins the thread. Idempotent.
  void Stop();

  // One round of the fleet thread's loop: (re)connect if needed, serve
  // queued claims, releases and publishes, ping if idle, and wait at most
  // `wait` for messages. Tests call it directly instead of Start().
  // REQUIRES: the thread is not running.
  void RunOnce(absl::Duration wait);

  // ProbeArbiter.
  bool Active() const override {
    return connected_.load(std::memory_order_acquire);
  }
  void RequestClaim(absl::string_view dependency, uint64_t generation,
                    absl::Duration lease) override;
  uint64_t Members() const override { return members(); }

  // TransitionObserver.
  void OnTransition(const Transition& t) override;

  bool connected() const { return Active(); }
  // The fleet's live members (this sidecar included) at the last
  // heartbeat; 0 while the store is unreachable (breakerd_fleet_members).
  uint64_t members() const { return members_.load(std::memory_order_relaxed); }
  FleetCounters counters() const;
  // When the newest operator decision known for `dependency` was made, by
  // the fleet's clock (Unix ms); 0 if none is known (the state file keeps
  // it beside a forced state).
  int64_t DecidedAt(absl::string_view dependency) const;
  // How many dependencies' last versions are remembered (at most
  // max_tracked_versions). REQUIRES: the thread is not running (tests).
  size_t tracked_versions() const { return last_version_.size(); }

 private:
  struct Claim {
    std::string dependency;
    uint64_t generation;
    absl::Duration lease;
  };
  // A state waiting to be published.
  struct Pending {
    FleetPublish state;
    // kOpen: when its cooldown ends, by this node's clock (the time left is
    // taken when it is sent).
    absl::Time open_until;
  };

  // Connects and re-reads the stored states; false (and backoff) on error.
  bool Join();
  // After a store error: disconnected, logged once, claims answered local.
  void Lost(const absl::Status& status);
  // Heartbeats (FleetStore::Heartbeat), keeps the members' count and
  // schedules the next one. A changed incarnation means the store forgot
  // its keys: counted (store_resets), logged ("fleet_store_reset"), the
  // versions seen forgotten and the stored states read again.
  absl::Status Heartbeat();
  // Flushes what every breaker counted since the last sync to the fleet's
  // windows and applies the sums read back (Registry::ApplyFleetWindow);
  // queues the publication of local trips they confirm.
  absl::Status SyncWindows();
  // The fleet window's bucket width for `dependency` (its policy's window /
  // kFleetWindowBuckets).
  absl::Duration WindowWidth(absl::string_view dependency) const;
  // The store's clock read at `store_unix_ms` in a round trip from `sent`
  // to `received` (this node's clock): keeps store_offset_.
  void LearnStoreClock(int64_t store_unix_ms, absl::Time sent,
                       absl::Time received);
  // The store's clock now, as this node best knows it.
  absl::Time StoreNow() const;
  // Answers every queued claim "won": the local breaker decides alone.
  void AnswerClaimsLocally();
  // Parses, validates and applies a message read from the store.
  void ApplyText(absl::string_view text, bool rejoin);
  void Apply(const FleetMessage& m, bool rejoin);
  void Refuse(absl::string_view why, bool rejoin);
  // The last version seen for `dependency`, unless forgotten (never seen,
  // dropped by the bound, or older than state_ttl).
  std::optional<uint64_t> LastVersion(const std::string& dependency,
                                      absl::Time now);
  // Remembers `version` as the last seen, now; drops the least recently
  // updated entry beyond max_tracked_versions.
  void RecordVersion(const std::string& dependency, uint64_t version,
                     absl::Time now);
  struct OperatorDecision {
    ExternalState::Kind kind;
    int64_t unix_ms;
    // Who made it (a sidecar's id; empty: read back from the state file).
    // Two decisions made in the same millisecond are ordered by it, the
    // same way on every pod.
    std::string origin;
    // Read back from the state file (or held when the store forgot its
    // keys) and not yet told to the fleet: after a join (or the store's
    // reset) it is published unless the store held a newer one.
    bool restored = false;
  };
  // After a join: publishes the decisions read back from the state file
  // that the store did not supersede (made while the store was away, or
  // forgotten by it).
  void PublishRestoredDecisions() ABSL_LOCKS_EXCLUDED(mu_);
  // Keeps d as the dependency's newest known decision (bounded).
  void RecordDecision(const std::string& dependency, const OperatorDecision& d)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Rate limit of one kind of log line.
  struct LogBudget {
    absl::Time next = absl::InfinitePast();
    uint64_t suppressed = 0;
  };
  // True if a line may be written now; then *suppressed is how many were
  // held back since the last one written.
  bool TakeLogBudget(LogBudget* budget, uint64_t* suppressed);
  // The pending work, taken under mu_.
  void TakeWork(std::vector<Claim>* claims, std::vector<Pending>* publishes,
                std::vector<std::string>* releases);
  void Bump(uint64_t FleetCounters::*field);

  Registry* const registry_;
  const std::unique_ptr<FleetStore> store_;
  const FleetOptions options_;

  std::atomic<bool> connected_{false};
  std::atomic<uint64_t> members_{0};
  std::atomic<bool> stop_{false};
  std::thread thread_;

  mutable Mutex mu_;
  std::vector<Claim> claims_ ABSL_GUARDED_BY(mu_);
  // Latest unpublished state per dependency, in first-queued order.
  absl::flat_hash_map<std::string, Pending> publishes_ ABSL_GUARDED_BY(mu_);
  std::deque<std::string> publish_order_ ABSL_GUARDED_BY(mu_);
  // Dependencies whose probe result arrived: release our claim if we hold it.
  absl::flat_hash_set<std::string> releases_ ABSL_GUARDED_BY(mu_);
  FleetCounters counters_ ABSL_GUARDED_BY(mu_);
  // The newest operator decision (forced state or reset) known per
  // dependency, and when it was made by the fleet's clock (Unix ms; 0:
  // unknown, older than any). At most max_tracked_versions.
  // The last stamp given to a decision made here: each is later than the
  // one before, also within one millisecond.
  int64_t last_decision_unix_ms_ ABSL_GUARDED_BY(mu_) = 0;
  absl::flat_hash_map<std::string, OperatorDecision> decisions_
      ABSL_GUARDED_BY(mu_);

  // Fleet thread only.
  struct Seen {
    uint64_t version;
    absl::Time updated;
    std::list<std::string>::iterator order;
  };
  // At most max_tracked_versions entries; version_order_ lists their keys,
  // least recently updated first.
  absl::flat_hash_map<std::string, Seen> last_version_;
  std::list<std::string> version_order_;
  LogBudget refused_log_;
  LogBudget apply_failed_log_;
  absl::flat_hash_set<std::string> held_claims_;
  absl::Duration backoff_;
  absl::Time next_connect_ = absl::InfinitePast();
  absl::Time next_heartbeat_ = absl::InfinitePast();
  absl::Time next_window_sync_ = absl::InfinitePast();
  // The store's clock minus this node's (the fleet's clock is the store's:
  // cooldown ends cross nodes in it), from the last round trip.
  // (Nanoseconds; read by OnTransition on request threads.)
  std::atomic<int64_t> store_offset_ns_{0};
  // The store's incarnation seen since the last join; empty before.
  std::string incarnation_;
  bool ever_connected_ = false;
  bool logged_down_ = false;
};

}  // namespace breakerd

#endif  // BREAKERD_SERVER_FLEET_FLEET_SYNC_H_

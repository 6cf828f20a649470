// The Registry: the one map of breakers in the process. The gRPC request
// path, the admin path, the metrics collector and fleet sync all read and
// write these same objects, so what /metrics shows is what traffic gets.
//
// Breakers are created lazily on first use with the first policy that
// matches, capped at limits.max_breakers, and evicted when idle.
//
// Thread-safety: every method is thread-safe. The map is split into
// kShards shards, each with its own mutex, which also serializes every
// operation on the breakers of that shard: Acquire and Report take exactly
// one lock (one shard's), so there is no global lock on the hot path, and
// threads working on different dependencies rarely meet (1 / kShards).
#ifndef BREAKERD_SERVER_ENGINE_REGISTRY_H_
#define BREAKERD_SERVER_ENGINE_REGISTRY_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "server/engine/breaker.h"
#include "server/engine/chain_stats.h"
#include "server/engine/clock.h"
#include "server/engine/mutex.h"
#include "server/engine/name_hash.h"
#include "server/engine/outcome.h"
#include "server/engine/policy.h"
#include "server/engine/types.h"

namespace breakerd {

// Receives every transition of every breaker (and the kReload events of
// Breaker::SetPolicy), with the lock of the breaker's shard held: each
// breaker's events arrive in the order they happened, so a Watch stream
// never sees a dependency's generation go back. Implementations: the JSON
// logger, the Watch hub, fleet sync, the override journal.
// REQUIRES of implementations: thread-safe, quick, never blocks on I/O of
// another party, never calls back into the Registry from OnTransition.
class TransitionObserver {
 public:
  virtual ~TransitionObserver() = default;
  virtual void OnTransition(const Transition& t) = 0;
};

// Checks a dependency name: 1-200 bytes of kDependencyNameAlphabet
// (dependency_name.h). Returns
// INVALID_ARGUMENT naming `field` and the rule.
absl::Status ValidateDependency(absl::string_view name,
                                absl::string_view field = "dependency");

inline constexpr size_t kMaxDependencyLength = 200;

struct ReportRequestFacts {
  RawOutcome outcome;
  absl::Duration latency = absl::ZeroDuration();
  absl::Duration retry_after = absl::ZeroDuration();
  // A call granted through a named fallback chain (empty: none), at this
  // tier of it (ChainStats).
  absl::string_view chain;
  uint32_t tier = 0;
};

// A fallback chain as the caller names it (empty name: not counted).
struct ChainPosition {
  absl::string_view chain;
  // The tier of the first candidate in the caller's full chain.
  uint32_t first_tier = 0;
};

// A ReportBatch (DESIGN.md "Local decisions"), read from the wire; the
// views point into the request.
struct LocalOutcomeFacts {
  RawOutcome outcome;
  absl::Duration latency = absl::ZeroDuration();
  absl::Duration retry_after = absl::ZeroDuration();
  absl::string_view chain;
  uint32_t tier = 0;
};
struct DependencyBatchFacts {
  absl::string_view dependency;
  // The generation of the Watch event the client decided on.
  uint64_t generation = 0;
  uint32_t grants = 0;
  std::vector<LocalOutcomeFacts> outcomes;
};
struct ChainDecisionFacts {
  absl::string_view chain;
  bool none = false;
  uint32_t tier = 0;
  uint32_t count = 0;
};
struct ClientDecisionFacts {
  absl::string_view dependency;
  uint32_t refused_local = 0;
  uint32_t fail_open = 0;
  uint32_t fail_closed = 0;
};
struct BatchFacts {
  absl::string_view client_id;
  uint64_t sequence = 0;
  std::vector<DependencyBatchFacts> dependencies;
  std::vector<ChainDecisionFacts> chains;
  std::vector<ClientDecisionFacts> decisions;
};
struct BatchResult {
  uint32_t counted = 0;
  uint32_t late = 0;
  uint32_t refused = 0;
  // The same client id and sequence was applied already: nothing was.
  bool repeated = false;
};

struct AcquireFirstResult {
  // Index into the request's list of the dependency granted; -1 if none.
  int granted = -1;
  // For the granted dependency; for none granted: the last candidate
  // decided's result with retry_after the shortest wait of the candidates
  // that have one (a forced-open candidate has none: zero if no other).
  AcquireResult result;
  // Candidates passed over because no breaker could be created for them
  // (limits.max_breakers reached).
  uint32_t skipped_at_cap = 0;
};

class Registry {
 public:
  // REQUIRES: policies non-null; clock outlives the registry.
  // permit_secret 0 picks a random one.
  Registry(std::shared_ptr<const PolicySet> policies, const Clock* clock,
           uint64_t permit_secret = 0, UniformSource uniform = &DefaultUniform);
  ~Registry();

  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  // Adds an observer. REQUIRES: called before any other thread uses the
  // registry; `observer` outlives it.
  void AddObserver(TransitionObserver* observer);

  // INVALID_ARGUMENT for a bad name; RESOURCE_EXHAUSTED naming max_breakers
  // when a new breaker would pass the cap.
  absl::StatusOr<AcquireResult> Acquire(absl::string_view dependency,
                                        uint32_t attempt);

  // Tries each dependency in order; the first allowed wins and the rest are
  // not touched. A name repeated in the list is tried once (at its first
  // place). A candidate with no breaker that the cap (max_breakers) keeps
  // from being created is skipped, counted (skipped_at_cap and
  // acquire_first_skipped()); RESOURCE_EXHAUSTED only when that leaves no
  // candidate decided. INVALID_ARGUMENT (naming dependencies[i], chain or
  // first_tier) before anything is decided if any name is bad, the list is
  // empty or longer than kMaxAcquireFirst, or the chain's last tier would
  // pass kMaxChainTier. With a chain name, the decision is counted in
  // chains(): the granted candidate's tier (first_tier + its index), or
  // none.
  absl::StatusOr<AcquireFirstResult> AcquireFirst(
      absl::Span<const std::string> dependencies, uint32_t attempt,
      ChainPosition chain = {});
  static constexpr size_t kMaxAcquireFirst = 16;

  // INVALID_ARGUMENT for a bad name, a bad outcome, a bad chain name or a
  // tier past kMaxChainTier, or a permit this process never issued for this
  // dependency; nothing changes then. With facts.chain, the outcome (unless
  // a duplicate) is counted in chains().
  absl::StatusOr<ReportResult> Report(absl::string_view dependency,
                                      uint64_t permit,
                                      const ReportRequestFacts& facts);

  // A Watch client's batch of local decisions (Breaker::ApplyLocal per
  // dependency; a dependency with no breaker: its outcomes are late),
  // chain decisions and decisions made without the sidecar (created if
  // need be, subject to the cap). INVALID_ARGUMENT naming the field before
  // anything is applied for a bad name, outcome, duration, chain or tier;
  // RESOURCE_EXHAUSTED past kMaxBatchOutcomes outcomes (or kMaxBatchEntries
  // entries of a list). A batch whose client id and sequence were applied
  // already (or are older than the last kBatchSequenceWindow of that client)
  // is not applied again: `repeated`.
  absl::StatusOr<BatchResult> ReportBatch(const BatchFacts& batch);
  static constexpr size_t kMaxBatchOutcomes = 1000;
  // RESOURCE_EXHAUSTED naming the limit if a batch of `outcomes` outcomes
  // is past kMaxBatchOutcomes (the service checks it before reading one).
  static absl::Status CheckBatchOutcomes(size_t outcomes);
  static constexpr size_t kMaxBatchEntries = 1000;
  static constexpr uint64_t kBatchSequenceWindow = 64;
  // Outcomes of batches since start: counted, late, refused.
  std::array<uint64_t, 3> batch_outcomes() const {
    return {batch_counted_.load(std::memory_order_relaxed),
            batch_late_.load(std::memory_order_relaxed),
            batch_refused_.load(std::memory_order_relaxed)};
  }

  // NOT_FOUND if no breaker exists for the name.
  absl::StatusOr<BreakerSnapshot> Get(absl::string_view dependency) const;
  // Every breaker, in no particular order.
  std::vector<BreakerSnapshot> List() const;
  // Calls fn for each breaker's snapshot, one shard locked at a time
  // (exclusively: the lock Acquire and Report take, so fn must be quick).
  // fn must not call back into the registry.
  void ForEach(const std::function<void(const BreakerSnapshot&)>& fn) const;
  // The same for one shard (0 <= shard < kShardCount) only, its lock held
  // while fn runs: reading shard by shard, a caller holds at most
  // one shard's snapshots at a time (about size() / kShardCount).
  static constexpr size_t kShardCount = 256;
  void ForEachInShard(
      size_t shard,
      const std::function<void(const BreakerSnapshot&)>& fn) const;
  // Sums (AddCounters) the counters of every breaker held and of every
  // breaker evicted since the registry was created into `total`, in one
  // read that each eviction falls entirely before or after: a total that
  // never goes down, whatever is evicted (what /metrics exports without a
  // dependency label). Returns the number of breakers held. Takes the
  // shard locks one at a time, and holds EvictIdle off meanwhile.
  size_t SumCounters(BreakerSnapshot* total) const
      ABSL_LOCKS_EXCLUDED(evict_mu_);

  // Admin overrides; ForceOpen/ForceClose create the breaker if needed
  // (subject to the cap), Reset returns NOT_FOUND for an unknown name.
  absl::StatusOr<BreakerSnapshot> ForceOpen(absl::string_view dependency);
  absl::StatusOr<BreakerSnapshot> ForceClose(absl::string_view dependency);
  absl::StatusOr<BreakerSnapshot> Reset(absl::string_view dependency);

  // Fleet mode: the arbiter of half-open probes (null: none). REQUIRES:
  // called before any other method, and `arbiter` outlives the registry.
  void SetProbeArbiter(ProbeArbiter* arbiter) { context_.arbiter = arbiter; }

  // Applies a state decided elsewhere (Breaker::ApplyExternal), creating
  // the breaker if needed (subject to the cap); observers see the
  // transition marked external. INVALID_ARGUMENT for a bad name.
  absl::StatusOr<BreakerSnapshot> ApplyExternal(absl::string_view dependency,
                                                const ExternalState& state,
                                                TransitionReason reason);

  // The fleet's answer to a probe claim (Breaker::SetProbeClaim). Unknown
  // names are ignored.
  void SetProbeClaim(absl::string_view dependency, uint64_t generation,
                     bool won, absl::Duration lease);

  // Fleet mode: every breaker that counted outcomes (or tripped locally)
  // since the last call, with what it gained (Breaker::TakeFleetDelta).
  // One shard locked at a time; the request path only appends a name to
  // its shard's queue, once per breaker between two calls.
  std::vector<FleetDelta> TakeFleetDeltas();
  // Fleet mode: the fleet's sums over the named breaker's window
  // (Breaker::ApplyFleetWindow); observers see a transition it makes.
  // Unknown names change nothing (a default effect).
  FleetWindowEffect ApplyFleetWindow(absl::string_view dependency,
                                     const FleetWindow& window,
                                     uint64_t members);

  // Swaps in a new policy set and re-applies it to every existing breaker in
  // place (state, counters, escalation and generation survive).
  void ApplyPolicies(std::shared_ptr<const PolicySet> policies);
  std::shared_ptr<const PolicySet> policies() const;

  // Removes idle breakers (see Breaker::IsIdle); returns how many. Their
  // counters are kept, summed, for SumCounters. Also frees the permit
  // ledgers that hold nothing within their horizon any more
  // (Breaker::ReleaseIdleMemory); *ledgers_released (if not null) gets how
  // many.
  size_t EvictIdle(size_t* ledgers_released = nullptr)
      ABSL_LOCKS_EXCLUDED(evict_mu_);

  size_t size() const { return count_.load(std::memory_order_relaxed); }
  // The generation a breaker created now starts at: above every generation
  // an evicted breaker reached (0 until something is evicted).
  uint64_t generation_floor() const {
    return generation_floor_.load(std::memory_order_relaxed);
  }
  // Reports refused because the permit was never issued, since start.
  uint64_t unknown_permits() const {
    return unknown_permits_.load(std::memory_order_relaxed);
  }
  // AcquireFirst candidates skipped at the breaker cap, since start.
  uint64_t acquire_first_skipped() const {
    return acquire_first_skipped_.load(std::memory_order_relaxed);
  }
  // Named fallback chains: decisions and outcomes by tier.
  const ChainStats& chains() const { return chains_; }

  const Clock* clock() const { return clock_; }

 private:
  static constexpr size_t kShards = kShardCount;
  static constexpr int kShardShift = 56;  // 64 - log2(kShards)
  struct Shard {
    mutable SpinLock mu;
    // Keys view the breaker's own name (no second copy of every name).
    absl::flat_hash_map<absl::string_view, std::unique_ptr<Breaker>, NameHasher,
                        NameEq>
        map ABSL_GUARDED_BY(mu);
    // Fleet mode: names of breakers with outcomes for the fleet thread.
    std::vector<std::string> fleet_queue ABSL_GUARDED_BY(mu);
    // Bumped whenever a breaker leaves the map: a breaker remembered
    // (Located::remembered) is still there while this has not moved.
    uint64_t evictions ABSL_GUARDED_BY(mu) = 0;
  };

  // Where a dependency's breaker is: the shard, and the breaker itself if
  // this thread's last lookup in this registry was for the same name (then
  // no hash and no probe are needed, once the shard's lock confirms it).
  struct Located {
    size_t shard = 0;
    size_t hash = 0;  // 0 when remembered (computed only if needed)
    bool remembered = false;
  };
  Located Locate(absl::string_view dependency) const;
  // The breaker for `dependency` in `shard` (its lock held), or null;
  // remembers a found one for this thread.
  Breaker* FindLocked(Shard& shard, const Located& where,
                      absl::string_view dependency)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(shard.mu);
  // Remembers `b`, found in `shard`, for this thread's next lookup.
  void Remember(const Shard& shard, size_t index, Breaker* b)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(shard.mu);

  Shard& ShardFor(absl::string_view dependency) const;
  // Runs fn on the named breaker with its shard locked, creating the
  // breaker if `create` and it does not exist (checking the name first).
  template <typename Fn>
  auto WithBreaker(absl::string_view dependency, bool create, Fn&& fn)
      -> absl::StatusOr<decltype(fn(std::declval<Breaker&>()))>;
  // Tells every observer. REQUIRES: the lock of t's shard is held.
  void Notify(const Transition& t);
  // Notify(**t) if *t holds a transition, which it then drops (for the
  // reused per-thread slot of the hot path).
  void NotifyAndClear(std::optional<Transition>* t);
  // Runs an admin override on the named breaker and notifies observers.
  absl::StatusOr<BreakerSnapshot> Administer(absl::string_view dependency,
                                             bool create,
                                             Transition (Breaker::*op)());
  // Acquire without the up-front name check (WithBreaker checks names it
  // does not find).
  absl::StatusOr<AcquireResult> AcquireValidated(absl::string_view dependency,
                                                 uint32_t attempt);

  const Clock* const clock_;
  // Tells this registry apart from every other one of the process, for the
  // per-thread lookup memory (a new registry may reuse a freed address).
  const uint64_t id_;
  // Constant once serving (SetProbeArbiter comes before).
  BreakerContext context_;
  std::vector<TransitionObserver*> observers_;  // fixed before serving

  mutable std::array<Shard, kShards> shards_;
  std::atomic<size_t> count_{0};
  // Above every generation an evicted breaker reached: new breakers start
  // here, so a re-created breaker's generations continue upward.
  std::atomic<uint64_t> generation_floor_{0};
  std::atomic<uint64_t> unknown_permits_{0};
  std::atomic<uint64_t> acquire_first_skipped_{0};
  ChainStats chains_;
  std::atomic<uint64_t> batch_counted_{0};
  std::atomic<uint64_t> batch_late_{0};
  std::atomic<uint64_t> batch_refused_{0};

  // Batches applied, per client id: the highest sequence and which of the
  // kBatchSequenceWindow below it were seen (bit i: highest - i).
  struct BatchesSeen {
    uint64_t highest = 0;
    uint64_t seen = 0;
    int64_t last_ns = 0;
  };
  // True (and remembered) if (client_id, sequence) is new.
  bool FirstTimeBatch(absl::string_view client_id, uint64_t sequence);
  static constexpr size_t kMaxBatchClients = 10000;
  Mutex batches_mu_;
  absl::flat_hash_map<std::string, BatchesSeen> batches_
      ABSL_GUARDED_BY(batches_mu_);

  // Serializes EvictIdle and SumCounters (taken before any shard lock).
  mutable Mutex evict_mu_;
  // The counters of every breaker evicted so far, summed.
  BreakerSnapshot evicted_counters_ ABSL_GUARDED_BY(evict_mu_);

  Mutex reload_mu_;  // serializes ApplyPolicies
  mutable SharedMutex policies_mu_;
  std::shared_ptr<const PolicySet> policies_ ABSL_GUARDED_BY(policies_mu_);
};

}  // namespace breakerd

#endif  // BREAKERD_SERVER_ENGINE_REGISTRY_H_

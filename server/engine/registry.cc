#include "server/engine/registry.h"

#include <algorithm>
#include <atomic>
#include <cassert>
#include <optional>
#include <string>
#include <utility>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "server/engine/dependency_name.h"

namespace breakerd {
namespace {

uint64_t RandomSecret() {
  absl::BitGen gen;
  uint64_t s = 0;
  while (s == 0) s = absl::Uniform<uint64_t>(gen);
  return s;
}

// The transition slot of the hot path, one per thread and reused: a fresh
// std::optional<Transition> per call is zero-filled (about 120 bytes with
// GCC's optional), a tenth of the pair's instructions. Observers never call
// back into the Registry, so a thread is never in two calls at once.
std::optional<Transition>& TransitionSlot() {
  thread_local std::optional<Transition> slot;
  return slot;
}

// This thread's last lookup: a caller that asks about the same dependency
// again (an Acquire and its Report; a hot dependency) skips the name hash
// and the map probe. Valid only while the shard's eviction count is
// unchanged, checked under the shard's lock.
struct LastLookup {
  uint64_t registry_id = 0;  // 0: nothing remembered
  size_t shard = 0;
  uint64_t evictions = 0;
  Breaker* breaker = nullptr;
  std::string name;
};
LastLookup& Last() {
  thread_local LastLookup last;
  return last;
}

std::atomic<uint64_t> next_registry_id{1};

}  // namespace

absl::Status ValidateDependency(absl::string_view name,
                                absl::string_view field) {
  if (name.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": must not be empty (1-", kMaxDependencyLength,
                     " bytes of ", kDependencyNameAlphabet, ")"));
  }
  if (name.size() > kMaxDependencyLength) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": must be at most ", kMaxDependencyLength,
                     " bytes (got ", name.size(), ")"));
  }
  for (size_t i = 0; i < name.size(); ++i) {
    if (!IsDependencyNameByte(name[i])) {
      const unsigned char c = static_cast<unsigned char>(name[i]);
      return absl::InvalidArgumentError(absl::StrCat(
          field, ": byte ", i, " (0x", absl::Hex(c, absl::kZeroPad2),
          ") is not allowed; use only ", kDependencyNameAlphabet));
    }
  }
  return absl::OkStatus();
}

Registry::Registry(std::shared_ptr<const PolicySet> policies,
                   const Clock* clock, uint64_t permit_secret,
                   UniformSource uniform)
    : clock_(clock),
      id_(next_registry_id.fetch_add(1, std::memory_order_relaxed)),
      context_{clock, permit_secret != 0 ? permit_secret : RandomSecret(),
               uniform},
      chains_([this] { return this->policies()->limits.max_chains; }),
      policies_(std::move(policies)) {
  DisableDeadlockDetection();
}

Registry::~Registry() = default;

void Registry::AddObserver(TransitionObserver* observer) {
  observers_.push_back(observer);
}

Registry::Shard& Registry::ShardFor(absl::string_view dependency) const {
  return shards_[HashName(dependency) >> kShardShift];
}

void Registry::Notify(const Transition& t) {
  for (TransitionObserver* o : observers_) o->OnTransition(t);
}

void Registry::NotifyAndClear(std::optional<Transition>* t) {
  if (!t->has_value()) return;
  Notify(**t);
  t->reset();
}

std::shared_ptr<const PolicySet> Registry::policies() const {
  ReaderMutexLock lock(&policies_mu_);
  return policies_;
}

template <typename Fn>
auto Registry::WithBreaker(absl::string_view dependency, bool create, Fn&& fn)
    -> absl::StatusOr<decltype(fn(std::declval<Breaker&>()))> {
  const Located where = Locate(dependency);
  Shard& shard = shards_[where.shard];
  SpinLockHolder lock(&shard.mu);
  if (Breaker* b = FindLocked(shard, where, dependency); b != nullptr) {
    return fn(*b);
  }
  {
    // Only valid names are ever inserted, so a name found needs no check.
    if (absl::Status s = ValidateDependency(dependency); !s.ok()) return s;
    if (!create) {
      return absl::NotFoundError(
          absl::StrCat("dependency: no breaker for \"", dependency,
                       "\" (breakers are created by the first Acquire)"));
    }
    // Read the policies while holding the shard lock, so a concurrent
    // ApplyPolicies either is seen here or sees this breaker.
    const std::shared_ptr<const PolicySet> set = policies();
    const size_t max = set->limits.max_breakers;
    if (count_.fetch_add(1, std::memory_order_relaxed) >= max) {
      count_.fetch_sub(1, std::memory_order_relaxed);
      return absl::ResourceExhaustedError(absl::StrCat(
          "limits.max_breakers: ", max,
          " breakers exist already; cannot track \"", dependency,
          "\" (raise limits.max_breakers or use fewer dependency names)"));
    }
    auto breaker = std::make_unique<Breaker>(
        std::string(dependency), set->Match(dependency), &context_,
        generation_floor_.load(std::memory_order_relaxed));
    Breaker* b = breaker.get();
    const absl::string_view key = breaker->dependency();
    shard.map.emplace(key, std::move(breaker));
    Remember(shard, where.shard, b);
    // Watch clients learn of it (and of its generation) before any event
    // of the call that created it.
    if (!observers_.empty()) Notify(b->Notice(TransitionReason::kCreated));
    return fn(*b);
  }
}

Registry::Located Registry::Locate(absl::string_view dependency) const {
  const LastLookup& last = Last();
  if (last.registry_id == id_ && last.name == dependency) {
    return Located{last.shard, 0, true};
  }
  // One hash per call: it picks the shard (top bits) and is reused by the
  // shard's map (which uses the low bits).
  const size_t hash = HashName(dependency);
  return Located{hash >> kShardShift, hash, false};
}

Breaker* Registry::FindLocked(Shard& shard, const Located& where,
                              absl::string_view dependency) {
  const LastLookup& last = Last();
  if (where.remembered && last.evictions == shard.evictions) {
    return last.breaker;
  }
  const size_t hash = where.remembered ? HashName(dependency) : where.hash;
  auto it = shard.map.find(dependency, hash);
  if (it == shard.map.end()) return nullptr;
  Remember(shard, where.shard, it->second.get());
  return it->second.get();
}

void Registry::Remember(const Shard& shard, size_t index, Breaker* b) {
  LastLookup& last = Last();
  last.registry_id = id_;
  last.shard = index;
  last.evictions = shard.evictions;
  last.breaker = b;
  last.name.assign(b->dependency().data(), b->dependency().size());
}

absl::StatusOr<AcquireResult> Registry::AcquireValidated(
    absl::string_view dependency, uint32_t attempt) {
  return WithBreaker(dependency, /*create=*/true, [&](Breaker& b) {
    std::optional<Transition>& transition = TransitionSlot();
    AcquireResult r = b.Acquire(attempt, &transition);
    NotifyAndClear(&transition);
    return r;
  });
}

absl::StatusOr<AcquireResult> Registry::Acquire(absl::string_view dependency,
                                                uint32_t attempt) {
  return AcquireValidated(dependency, attempt);  // WithBreaker validates
}

// A chain's name and the tier of its first candidate (`first_tier`) and of
// its last (`last_tier`); `tier_field` is the request's field.
static absl::Status ValidateChain(absl::string_view chain, uint32_t first_tier,
                                  uint64_t last_tier,
                                  absl::string_view tier_field) {
  if (chain.empty()) {
    if (first_tier == 0) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat(
        tier_field, ": ", first_tier, " needs a chain name (chain is empty)"));
  }
  if (absl::Status s = ValidateDependency(chain, "chain"); !s.ok()) return s;
  if (last_tier > kMaxChainTier) {
    return absl::InvalidArgumentError(
        absl::StrCat(tier_field, ": a chain's tiers are 0 to ", kMaxChainTier,
                     " (this request reaches tier ", last_tier, ")"));
  }
  return absl::OkStatus();
}

absl::StatusOr<AcquireFirstResult> Registry::AcquireFirst(
    absl::Span<const std::string> dependencies, uint32_t attempt,
    ChainPosition chain) {
  if (dependencies.empty()) {
    return absl::InvalidArgumentError(
        "dependencies: must name at least one dependency");
  }
  if (dependencies.size() > kMaxAcquireFirst) {
    return absl::InvalidArgumentError(absl::StrCat(
        "dependencies: at most ", kMaxAcquireFirst,
        " names in one AcquireFirst (got ", dependencies.size(), ")"));
  }
  for (size_t i = 0; i < dependencies.size(); ++i) {
    if (absl::Status s = ValidateDependency(
            dependencies[i], absl::StrCat("dependencies[", i, "]"));
        !s.ok()) {
      return s;
    }
  }
  if (absl::Status s = ValidateChain(
          chain.chain, chain.first_tier,
          uint64_t{chain.first_tier} + dependencies.size() - 1, "first_tier");
      !s.ok()) {
    return s;
  }
  AcquireFirstResult out;
  absl::Status cap;  // the last candidate the cap passed over
  bool decided = false;
  absl::Duration shortest = absl::InfiniteDuration();
  for (size_t i = 0; i < dependencies.size(); ++i) {
    // A repeated name was decided at its first place.
    if (std::find(dependencies.begin(), dependencies.begin() + i,
                  dependencies[i]) != dependencies.begin() + i) {
      continue;
    }
    absl::StatusOr<AcquireResult> r =
        AcquireValidated(dependencies[i], attempt);
    if (absl::IsResourceExhausted(r.status())) {
      // No breaker for it and none may be created: the next candidate may
      // still be granted.
      ++out.skipped_at_cap;
      acquire_first_skipped_.fetch_add(1, std::memory_order_relaxed);
      cap = r.status();
      continue;
    }
    if (!r.ok()) return r.status();
    decided = true;
    out.result = *r;
    if (r->allowed) {
      out.granted = static_cast<int>(i);
      if (!chain.chain.empty()) {
        chains_.CountDecision(chain.chain, chain.first_tier + i);
      }
      return out;
    }
    // A forced-open candidate opens again only when an operator says so:
    // it has no wait to offer.
    if (r->reason != RejectReason::kForcedOpen) {
      shortest = std::min(shortest, r->retry_after);
    }
  }
  if (!decided) return cap;
  out.result.retry_after =
      shortest == absl::InfiniteDuration() ? absl::ZeroDuration() : shortest;
  if (!chain.chain.empty()) {
    chains_.CountDecision(chain.chain, ChainStats::kNoneTier);
  }
  return out;
}

absl::StatusOr<ReportResult> Registry::Report(absl::string_view dependency,
                                              uint64_t permit,
                                              const ReportRequestFacts& facts) {
  if (permit == 0) {
    return absl::InvalidArgumentError(
        "permit: required (the nonzero value returned by Acquire)");
  }
  absl::StatusOr<OutcomeClass> outcome = Classify(facts.outcome);
  if (!outcome.ok()) return outcome.status();
  if (facts.latency < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("latency: must not be negative");
  }
  if (facts.retry_after < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("retry_after: must not be negative");
  }
  if (absl::Status s =
          ValidateChain(facts.chain, facts.tier, facts.tier, "tier");
      !s.ok()) {
    return s;
  }
  ReportInput in{*outcome, facts.latency, facts.retry_after};
  // The lookup of WithBreaker, inline: the hot path builds one StatusOr.
  const Located where = Locate(dependency);
  Shard& shard = shards_[where.shard];
  std::optional<absl::StatusOr<ReportResult>> found;
  {
    SpinLockHolder lock(&shard.mu);
    if (Breaker* found_breaker = FindLocked(shard, where, dependency);
        found_breaker != nullptr) {
      Breaker& b = *found_breaker;
      std::optional<Transition>& transition = TransitionSlot();
      found.emplace(b.Report(permit, in, &transition));
      NotifyAndClear(&transition);
      // Once per breaker between two TakeFleetDeltas.
      if (context_.arbiter != nullptr && b.QueueForFleet()) {
        shard.fleet_queue.emplace_back(dependency);
      }
    }
  }
  if (!found.has_value()) {
    // Only valid names are ever inserted, so a name found needs no check.
    if (absl::Status s = ValidateDependency(dependency); !s.ok()) return s;
    found.emplace(absl::InvalidArgumentError(absl::StrCat(
        "permit: ", permit,
        " was not issued by this breakerd for dependency \"", dependency,
        "\" (no breaker exists for it: a permit from before a restart, or "
        "one older than the permit horizon of a breaker evicted since?)")));
  }
  if (!found->ok()) {
    unknown_permits_.fetch_add(1, std::memory_order_relaxed);
  } else if (!facts.chain.empty() && (*found)->effect != Effect::kDuplicate) {
    chains_.CountOutcome(facts.chain, facts.tier, *outcome);
  }
  return *std::move(found);
}

absl::StatusOr<BreakerSnapshot> Registry::Get(
    absl::string_view dependency) const {
  if (absl::Status s = ValidateDependency(dependency); !s.ok()) return s;
  Shard& shard = ShardFor(dependency);
  SpinLockHolder lock(&shard.mu);
  auto it = shard.map.find(dependency);
  if (it == shard.map.end()) {
    return absl::NotFoundError(
        absl::StrCat("dependency: no breaker for \"", dependency,
                     "\" (breakers are created by the first Acquire)"));
  }
  return it->second->Snapshot();
}

void Registry::ForEach(
    const std::function<void(const BreakerSnapshot&)>& fn) const {
  for (size_t shard = 0; shard < kShards; ++shard) ForEachInShard(shard, fn);
}

void Registry::ForEachInShard(
    size_t shard, const std::function<void(const BreakerSnapshot&)>& fn) const {
  assert(shard < kShards);
  const Shard& s = shards_[shard];
  SpinLockHolder lock(&s.mu);
  for (const auto& [name, breaker] : s.map) fn(breaker->Snapshot());
}

size_t Registry::SumCounters(BreakerSnapshot* total) const {
  MutexLock evict_lock(&evict_mu_);
  AddCounters(evicted_counters_, total);
  size_t breakers = 0;
  for (const Shard& shard : shards_) {
    SpinLockHolder lock(&shard.mu);
    for (const auto& [name, breaker] : shard.map) {
      AddCounters(breaker->Snapshot(), total);
      ++breakers;
    }
  }
  return breakers;
}

std::vector<BreakerSnapshot> Registry::List() const {
  std::vector<BreakerSnapshot> out;
  out.reserve(size());
  ForEach([&](const BreakerSnapshot& s) { out.push_back(s); });
  return out;
}

absl::StatusOr<BreakerSnapshot> Registry::Administer(
    absl::string_view dependency, bool create, Transition (Breaker::*op)()) {
  return WithBreaker(dependency, create, [&](Breaker& b) {
    Notify((b.*op)());
    return b.Snapshot();
  });
}

absl::StatusOr<BreakerSnapshot> Registry::ForceOpen(
    absl::string_view dependency) {
  return Administer(dependency, /*create=*/true, &Breaker::ForceOpen);
}

absl::StatusOr<BreakerSnapshot> Registry::ForceClose(
    absl::string_view dependency) {
  return Administer(dependency, /*create=*/true, &Breaker::ForceClose);
}

absl::StatusOr<BreakerSnapshot> Registry::Reset(absl::string_view dependency) {
  return Administer(dependency, /*create=*/false, &Breaker::Reset);
}

absl::StatusOr<BreakerSnapshot> Registry::ApplyExternal(
    absl::string_view dependency, const ExternalState& state,
    TransitionReason reason) {
  return WithBreaker(dependency, /*create=*/true, [&](Breaker& b) {
    if (std::optional<Transition> t = b.ApplyExternal(state, reason)) {
      Notify(*t);
    }
    return b.Snapshot();
  });
}

void Registry::SetProbeClaim(absl::string_view dependency, uint64_t generation,
                             bool won, absl::Duration lease) {
  WithBreaker(dependency, /*create=*/false, [&](Breaker& b) {
    b.SetProbeClaim(generation, won, lease);
    return true;
  }).IgnoreError();
}

std::vector<FleetDelta> Registry::TakeFleetDeltas() {
  std::vector<FleetDelta> out;
  std::vector<std::string> names;
  for (Shard& shard : shards_) {
    SpinLockHolder lock(&shard.mu);
    if (shard.fleet_queue.empty()) continue;
    names.clear();
    names.swap(shard.fleet_queue);
    for (const std::string& name : names) {
      auto it = shard.map.find(name);
      if (it == shard.map.end()) continue;  // evicted since
      FleetDelta d = it->second->TakeFleetDelta();
      if (d.gained.calls == 0 && !d.tripped) continue;  // queued twice
      out.push_back(std::move(d));
    }
  }
  return out;
}

FleetWindowEffect Registry::ApplyFleetWindow(absl::string_view dependency,
                                             const FleetWindow& window,
                                             uint64_t members) {
  absl::StatusOr<FleetWindowEffect> effect =
      WithBreaker(dependency, /*create=*/false, [&](Breaker& b) {
        std::optional<Transition> transition;
        FleetWindowEffect e = b.ApplyFleetWindow(window, members, &transition);
        if (transition.has_value()) Notify(*transition);
        return e;
      });
  return effect.ok() ? *effect : FleetWindowEffect{};
}

void Registry::ApplyPolicies(std::shared_ptr<const PolicySet> policies) {
  MutexLock reload(&reload_mu_);
  {
    WriterMutexLock lock(&policies_mu_);
    policies_ = policies;
  }
  for (Shard& shard : shards_) {
    SpinLockHolder lock(&shard.mu);
    for (auto& [name, breaker] : shard.map) {
      if (std::optional<Transition> t =
              breaker->SetPolicy(policies->Match(name))) {
        Notify(*t);
      }
    }
  }
}

size_t Registry::EvictIdle(size_t* ledgers_released) {
  const absl::Duration ttl = policies()->limits.idle_ttl;
  size_t evicted = 0, released = 0;
  MutexLock evict_lock(&evict_mu_);
  for (Shard& shard : shards_) {
    SpinLockHolder lock(&shard.mu);
    for (auto it = shard.map.begin(); it != shard.map.end();) {
      std::optional<Transition> ramp_done;
      if (it->second->ReleaseIdleMemory(&ramp_done)) ++released;
      if (ramp_done.has_value()) Notify(*ramp_done);
      if (it->second->IsIdle(ttl)) {
        // Watch clients forget it (a re-created breaker starts above its
        // generation).
        if (!observers_.empty()) {
          Notify(it->second->Notice(TransitionReason::kEvicted));
        }
        uint64_t floor = generation_floor_.load(std::memory_order_relaxed);
        const uint64_t next = it->second->generation() + 1;
        while (floor < next && !generation_floor_.compare_exchange_weak(
                                   floor, next, std::memory_order_relaxed)) {
        }
        AddCounters(it->second->Snapshot(), &evicted_counters_);
        shard.map.erase(it++);
        ++shard.evictions;
        ++evicted;
      } else {
        ++it;
      }
    }
  }
  count_.fetch_sub(evicted, std::memory_order_relaxed);
  if (ledgers_released != nullptr) *ledgers_released = released;
  return evicted;
}

// --- local decisions ---------------------------------------------------------

namespace {

// Checks one outcome of a batch (`field` names it); its class on success.
absl::StatusOr<OutcomeClass> CheckLocalOutcome(const LocalOutcomeFacts& o,
                                               absl::string_view field) {
  absl::StatusOr<OutcomeClass> c = Classify(o.outcome);
  if (!c.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ".", c.status().message()));
  }
  if (o.latency < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ".latency: must not be negative"));
  }
  if (o.retry_after < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ".retry_after: must not be negative"));
  }
  return c;
}

absl::Status TooMany(absl::string_view field, size_t limit, size_t got) {
  return absl::ResourceExhaustedError(
      absl::StrCat(field, ": at most ", limit, " in one ReportBatch (got ", got,
                   "); split it into several batches"));
}

}  // namespace

absl::Status Registry::CheckBatchOutcomes(size_t outcomes) {
  if (outcomes <= kMaxBatchOutcomes) return absl::OkStatus();
  return TooMany("dependencies[].outcomes", kMaxBatchOutcomes, outcomes);
}

bool Registry::FirstTimeBatch(absl::string_view client_id, uint64_t sequence) {
  const int64_t now = clock_->NowNanos();
  MutexLock lock(&batches_mu_);
  auto it = batches_.find(client_id);
  if (it == batches_.end()) {
    if (batches_.size() >= kMaxBatchClients) {
      // Forget the client heard from least recently.
      auto oldest = batches_.begin();
      for (auto j = batches_.begin(); j != batches_.end(); ++j) {
        if (j->second.last_ns < oldest->second.last_ns) oldest = j;
      }
      batches_.erase(oldest);
    }
    batches_.emplace(std::string(client_id), BatchesSeen{sequence, 1, now});
    return true;
  }
  BatchesSeen& b = it->second;
  b.last_ns = now;
  if (sequence > b.highest) {
    const uint64_t shift = sequence - b.highest;
    b.seen = shift >= kBatchSequenceWindow ? 0 : b.seen << shift;
    b.seen |= 1;
    b.highest = sequence;
    return true;
  }
  const uint64_t back = b.highest - sequence;
  // Older than the window: whether it was applied is not known any more;
  // applying it twice would count its calls twice, so it is not applied.
  if (back >= kBatchSequenceWindow) return false;
  const uint64_t bit = uint64_t{1} << back;
  if ((b.seen & bit) != 0) return false;
  b.seen |= bit;
  return true;
}

absl::StatusOr<BatchResult> Registry::ReportBatch(const BatchFacts& batch) {
  // Everything is checked before anything is applied.
  if (absl::Status s = ValidateDependency(batch.client_id, "client_id");
      !s.ok()) {
    return s;
  }
  if (batch.dependencies.size() > kMaxBatchEntries) {
    return TooMany("dependencies", kMaxBatchEntries, batch.dependencies.size());
  }
  if (batch.chains.size() > kMaxBatchEntries) {
    return TooMany("chains", kMaxBatchEntries, batch.chains.size());
  }
  if (batch.decisions.size() > kMaxBatchEntries) {
    return TooMany("decisions", kMaxBatchEntries, batch.decisions.size());
  }
  size_t total = 0;
  for (const DependencyBatchFacts& d : batch.dependencies) {
    total += d.outcomes.size();
  }
  if (absl::Status s = CheckBatchOutcomes(total); !s.ok()) return s;
  std::vector<std::vector<ReportInput>> inputs(batch.dependencies.size());
  for (size_t i = 0; i < batch.dependencies.size(); ++i) {
    const DependencyBatchFacts& d = batch.dependencies[i];
    const std::string field = absl::StrCat("dependencies[", i, "]");
    if (absl::Status s = ValidateDependency(d.dependency,
                                            absl::StrCat(field, ".dependency"));
        !s.ok()) {
      return s;
    }
    inputs[i].reserve(d.outcomes.size());
    for (size_t j = 0; j < d.outcomes.size(); ++j) {
      const LocalOutcomeFacts& o = d.outcomes[j];
      const std::string at = absl::StrCat(field, ".outcomes[", j, "]");
      absl::StatusOr<OutcomeClass> c = CheckLocalOutcome(o, at);
      if (!c.ok()) return c.status();
      if (absl::Status s =
              ValidateChain(o.chain, o.tier, o.tier, absl::StrCat(at, ".tier"));
          !s.ok()) {
        return s;
      }
      inputs[i].push_back(ReportInput{*c, o.latency, o.retry_after});
    }
  }
  for (size_t i = 0; i < batch.chains.size(); ++i) {
    const ChainDecisionFacts& c = batch.chains[i];
    const std::string field = absl::StrCat("chains[", i, "]");
    if (absl::Status s =
            ValidateDependency(c.chain, absl::StrCat(field, ".chain"));
        !s.ok()) {
      return s;
    }
    if (!c.none && c.tier > kMaxChainTier) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ".tier: a chain's tiers are 0 to ", kMaxChainTier,
                       " (got ", c.tier, ")"));
    }
  }
  for (size_t i = 0; i < batch.decisions.size(); ++i) {
    if (absl::Status s =
            ValidateDependency(batch.decisions[i].dependency,
                               absl::StrCat("decisions[", i, "].dependency"));
        !s.ok()) {
      return s;
    }
  }
  BatchResult out;
  if (!FirstTimeBatch(batch.client_id, batch.sequence)) {
    out.repeated = true;
    return out;
  }

  for (size_t i = 0; i < batch.dependencies.size(); ++i) {
    const DependencyBatchFacts& d = batch.dependencies[i];
    Breaker::LocalCounts counts;
    absl::StatusOr<Breaker::LocalCounts> applied =
        WithBreaker(d.dependency, /*create=*/false, [&](Breaker& b) {
          std::optional<Transition>& transition = TransitionSlot();
          Breaker::LocalCounts c =
              b.ApplyLocal(d.generation, d.grants, inputs[i], &transition);
          NotifyAndClear(&transition);
          return c;
        });
    if (applied.ok()) {
      counts = *applied;
    } else {
      // No breaker (evicted since): the generation decided on is gone.
      counts.late = static_cast<uint32_t>(d.outcomes.size());
    }
    // The outcomes of calls that were made (counted or late) count in their
    // chains; refused ones were never granted.
    const size_t made = counts.counted + counts.late;
    for (size_t j = 0; j < made && j < d.outcomes.size(); ++j) {
      const LocalOutcomeFacts& o = d.outcomes[j];
      if (!o.chain.empty()) {
        chains_.CountOutcome(o.chain, o.tier, inputs[i][j].outcome);
      }
    }
    out.counted += counts.counted;
    out.late += counts.late;
    out.refused += counts.refused;
  }
  for (const ChainDecisionFacts& c : batch.chains) {
    if (c.count == 0) continue;
    chains_.CountDecision(c.chain, c.none ? ChainStats::kNoneTier : c.tier,
                          c.count);
  }
  for (const ClientDecisionFacts& d : batch.decisions) {
    if (d.refused_local == 0 && d.fail_open == 0 && d.fail_closed == 0) {
      continue;
    }
    // Past the breaker cap these are not counted (the cap holds).
    WithBreaker(d.dependency, /*create=*/true, [&](Breaker& b) {
      b.CountClientDecisions(d.refused_local, d.fail_open, d.fail_closed);
      return true;
    }).IgnoreError();
  }
  batch_counted_.fetch_add(out.counted, std::memory_order_relaxed);
  batch_late_.fetch_add(out.late, std::memory_order_relaxed);
  batch_refused_.fetch_add(out.refused, std::memory_order_relaxed);
  return out;
}

}  // namespace breakerd

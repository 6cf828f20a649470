// Fallback chains as the caller names them (DESIGN.md "Fallback chains and
// the seeds' monitoring list"): per chain, how many AcquireFirst decisions
// landed on each tier (the granted candidate's position in the caller's
// full chain, or none: every candidate refused, the ultimate fallback), and
// the reported outcomes of the calls granted through it, by tier and
// outcome class. Exported as breakerd_chain_decisions_total{chain,tier} and
// breakerd_chain_outcomes_total{chain,tier,class}.
//
// At most max_chains distinct names are held (limits.max_chains, read at
// each new name so a reload applies to names seen after it); every later
// name is counted as the chain kOtherChain. Names are never forgotten
// (counters only go up), so memory is bounded by max_chains * the tiers
// used.
//
// Thread-safety: thread-safe. Counting a decision or an outcome of a known
// chain takes a reader lock and one relaxed atomic add; a new name takes
// the writer lock once.
#ifndef BREAKERD_SERVER_ENGINE_CHAIN_STATS_H_
#define BREAKERD_SERVER_ENGINE_CHAIN_STATS_H_

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "server/engine/outcome.h"

namespace breakerd {

// The highest tier a chain position may have (tiers are 0..kMaxChainTier).
inline constexpr uint32_t kMaxChainTier = 63;
// The chain every name past limits.max_chains is counted as.
inline constexpr absl::string_view kOtherChain = "other";

class ChainStats {
 public:
  // Index kNoneTier of the decision counters: every candidate refused.
  static constexpr size_t kNoneTier = kMaxChainTier + 1;

  // `max_chains` gives the cap at the moment a new name arrives.
  explicit ChainStats(std::function<size_t()> max_chains);

  ChainStats(const ChainStats&) = delete;
  ChainStats& operator=(const ChainStats&) = delete;

  // `count` decisions of `chain` (a valid name): granted at `tier`
  // (<= kMaxChainTier), or none granted (`tier` kNoneTier).
  void CountDecision(absl::string_view chain, size_t tier, uint64_t count = 1);
  // One reported outcome of a call granted through `chain` at `tier`.
  void CountOutcome(absl::string_view chain, size_t tier, OutcomeClass c);

  // Every non-zero counter, by chain name (in no particular order):
  // decision(chain, tier, count) with tier kNoneTier for none, and
  // outcome(chain, tier, class, count).
  void ForEachDecision(
      const std::function<void(absl::string_view, size_t, uint64_t)>& fn) const;
  void ForEachOutcome(
      const std::function<void(absl::string_view, size_t, OutcomeClass,
                               uint64_t)>& fn) const;

  // Distinct chains held (kOtherChain included once used).
  size_t size() const;

 private:
  struct Chain {
    std::array<std::atomic<uint64_t>, kNoneTier + 1> decisions{};
    // outcomes[tier][class] (about 5 KiB a chain).
    std::array<std::array<std::atomic<uint64_t>, kOutcomeClassCount>,
               kMaxChainTier + 1>
        outcomes{};
  };
  Chain& Find(absl::string_view chain);

  const std::function<size_t()> max_chains_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::unique_ptr<Chain>> chains_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace breakerd

#endif  // BREAKERD_SERVER_ENGINE_CHAIN_STATS_H_

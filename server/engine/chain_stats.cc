#include "server/engine/chain_stats.h"

#include <utility>

namespace breakerd {

ChainStats::ChainStats(std::function<size_t()> max_chains)
    : max_chains_(std::move(max_chains)) {}

ChainStats::Chain& ChainStats::Find(absl::string_view chain) {
  {
    absl::ReaderMutexLock lock(&mu_);
    if (auto it = chains_.find(chain); it != chains_.end()) return *it->second;
  }
  absl::MutexLock lock(&mu_);
  if (auto it = chains_.find(chain); it != chains_.end()) return *it->second;
  // At most max_chains names of their own; the rest share kOtherChain
  // (itself a name a caller may use, then counted together).
  const size_t named = chains_.size() - (chains_.contains(kOtherChain) ? 1 : 0);
  if (named >= max_chains_()) {
    chain = kOtherChain;
    if (auto it = chains_.find(chain); it != chains_.end()) {
      return *it->second;
    }
  }
  std::unique_ptr<Chain>& slot =
      chains_.try_emplace(std::string(chain)).first->second;
  slot = std::make_unique<Chain>();
  return *slot;
}

void ChainStats::CountDecision(absl::string_view chain, size_t tier,
                               uint64_t count) {
  if (tier > kNoneTier) tier = kNoneTier;
  Find(chain).decisions[tier].fetch_add(count, std::memory_order_relaxed);
}

void ChainStats::CountOutcome(absl::string_view chain, size_t tier,
                              OutcomeClass c) {
  if (tier > kMaxChainTier) return;
  Find(chain).outcomes[tier][static_cast<size_t>(c)].fetch_add(
      1, std::memory_order_relaxed);
}

void ChainStats::ForEachDecision(
    const std::function<void(absl::string_view, size_t, uint64_t)>& fn) const {
  absl::ReaderMutexLock lock(&mu_);
  for (const auto& [name, chain] : chains_) {
    for (size_t t = 0; t < chain->decisions.size(); ++t) {
      const uint64_t n = chain->decisions[t].load(std::memory_order_relaxed);
      if (n != 0) fn(name, t, n);
    }
  }
}

void ChainStats::ForEachOutcome(
    const std::function<void(absl::string_view, size_t, OutcomeClass,
                             uint64_t)>& fn) const {
  absl::ReaderMutexLock lock(&mu_);
  for (const auto& [name, chain] : chains_) {
    for (size_t t = 0; t < chain->outcomes.size(); ++t) {
      for (size_t c = 0; c < chain->outcomes[t].size(); ++c) {
        const uint64_t n =
            chain->outcomes[t][c].load(std::memory_order_relaxed);
        if (n != 0) fn(name, t, static_cast<OutcomeClass>(c), n);
      }
    }
  }
}

size_t ChainStats::size() const {
  absl::ReaderMutexLock lock(&mu_);
  return chains_.size();
}

}  // namespace breakerd

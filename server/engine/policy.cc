#include "server/engine/policy.h"

#include <tuple>

namespace breakerd {

bool Policy::operator==(const Policy& o) const {
  auto tie = [](const Policy& p) {
    return std::tie(p.match, p.mode, p.consecutive_failures,
                    p.failure_rate.threshold, p.failure_rate.min_calls,
                    p.failure_rate.window, p.slow_call_rate.threshold,
                    p.slow_call_rate.min_calls, p.slow_call_rate.duration,
                    p.cooldown.base, p.cooldown.max, p.cooldown.jitter,
                    p.probe.lease, p.probe.required_successes, p.rate_limited,
                    p.retry_budget.ratio, p.retry_budget.min_per_second,
                    p.retry_budget.ttl, p.inflight.hang_after, p.recovery.ramp,
                    p.recovery.start_share, p.fleet.share_window,
                    p.fleet.quorum, p.local_decisions);
  };
  return tie(*this) == tie(o);
}

const std::shared_ptr<const Policy>& PolicySet::Match(
    absl::string_view dependency) const {
  for (const auto& policy : policies) {
    if (GlobMatch(policy->match, dependency)) return policy;
  }
  return defaults;
}

bool GlobMatch(absl::string_view pattern, absl::string_view name) {
  // Iterative matcher with single-star backtracking: linear in practice,
  // O(|pattern| * |name|) worst case, no recursion.
  size_t p = 0, n = 0;
  size_t star = absl::string_view::npos, resume = 0;
  while (n < name.size()) {
    if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      resume = n;
    } else if (p < pattern.size() && pattern[p] == name[n]) {
      ++p;
      ++n;
    } else if (star != absl::string_view::npos) {
      p = star + 1;
      n = ++resume;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

absl::string_view ModeName(Mode mode) {
  return mode == Mode::kShadow ? "shadow" : "enforce";
}

}  // namespace breakerd

// Breaker policies: what trips a breaker, how long it stays open, how it
// probes. A Policy is immutable once built; the config module parses YAML
// into a validated PolicySet, and the engine reads it without re-checking.
//
// Thread-safety: Policy and PolicySet are immutable values, shared between
// threads through std::shared_ptr<const ...>.
#ifndef BREAKERD_SERVER_ENGINE_POLICY_H_
#define BREAKERD_SERVER_ENGINE_POLICY_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace breakerd {

enum class Mode {
  kEnforce,  // rejections are enforced (default)
  kShadow,   // every decision is computed and exported, but Acquire allows
};

// "enforce" or "shadow": the config value, the BreakerStatus and StateChange
// `mode` and the breakerd_state `mode` label.
absl::string_view ModeName(Mode mode);
inline absl::string_view ModeName(bool shadow) {
  return ModeName(shadow ? Mode::kShadow : Mode::kEnforce);
}

enum class RateLimitedHandling {
  kCount,   // a rate-limited outcome counts as a failure (default)
  kIgnore,  // it is neutral
};

struct Policy {
  // The glob this policy was selected by ("*" matches any run of bytes), or
  // "defaults" for the defaults.
  std::string match = "defaults";

  Mode mode = Mode::kEnforce;

  // Watch clients may decide first attempts in process while the breaker
  // is closed (and not ramping, forced or in shadow mode); false: every
  // call goes to the sidecar.
  bool local_decisions = true;

  // Opens after this many counted failures in a row; 0 switches it off.
  uint32_t consecutive_failures = 5;

  struct FailureRate {
    // Opens when failures / counted calls >= threshold; 0 switches it off.
    double threshold = 0.5;
    // ... and at least this many counted calls are in the window.
    uint32_t min_calls = 20;
    // Length of the sliding window (also used by slow_call_rate).
    absl::Duration window = absl::Seconds(30);
  } failure_rate;

  struct SlowCallRate {
    // Opens when slow calls / counted calls >= threshold; 0 switches it off.
    double threshold = 0;
    uint32_t min_calls = 20;
    // A call whose reported latency is at least this is slow.
    absl::Duration duration = absl::Seconds(10);
  } slow_call_rate;

  struct Cooldown {
    // First cooldown; doubled after each failed probe, capped at max.
    absl::Duration base = absl::Seconds(30);
    absl::Duration max = absl::Seconds(300);
    // Each cooldown is scaled by a uniform factor in [1 - jitter, 1 + jitter].
    double jitter = 0.1;
  } cooldown;

  struct Probe {
    // How long a half-open probe may stay out before another caller may
    // claim it.
    absl::Duration lease = absl::Seconds(10);
    // Consecutive probe successes needed to close.
    uint32_t required_successes = 1;
  } probe;

  RateLimitedHandling rate_limited = RateLimitedHandling::kCount;

  struct RetryBudget {
    // Retries granted over the last ttl may not exceed
    // ratio * first attempts granted + min_per_second * ttl.
    double ratio = 0.1;
    double min_per_second = 1;
    absl::Duration ttl = absl::Seconds(10);
  } retry_budget;

  struct Inflight {
    // A permit of the current generation not reported this long after its
    // Acquire counts, from then on, as a slow call and a failure in the
    // failure-rate window (never toward consecutive_failures); zero
    // switches it off (default). At most 5 minutes. When on, it is also the
    // horizon within which a repeated Report is known as a duplicate
    // (kDefaultPermitHorizon otherwise).
    absl::Duration hang_after = absl::ZeroDuration();
  } inflight;

  struct Recovery {
    // After a probe closes the breaker, first attempts are admitted at a
    // share rising linearly from start_share to 1 over this long; the rest,
    // and every retry, are refused (REJECT_REASON_RAMP). Zero switches it
    // off (default).
    absl::Duration ramp = absl::ZeroDuration();
    // The share admitted when the ramp starts, in (0, 1].
    double start_share = 0.1;
  } recovery;

  // Fleet mode (--redis) only; ignored without a fleet.
  struct Fleet {
    // Flush this breaker's window counts to the fleet and evaluate the
    // failure-rate and slow-call-rate rules on the fleet's sums too.
    bool share_window = true;
    // Sidecars that must agree before a local trip is published, and
    // distinct sidecars whose failures the fleet window must hold before
    // its rules count (never more than the live members). 1: every local
    // trip is published at once, and one sidecar's failures may tip the
    // fleet window.
    uint32_t quorum = 2;
  } fleet;

  bool operator==(const Policy& other) const;
};

// The longest inflight.hang_after.
inline constexpr absl::Duration kMaxHangAfter = absl::Minutes(5);
// How long a permit is remembered (duplicate Reports refused, and a breaker
// with it out kept from eviction) when inflight.hang_after is off.
inline constexpr absl::Duration kDefaultPermitHorizon = absl::Seconds(60);
// The permit horizon of a policy: hang_after when on, else the default.
inline absl::Duration PermitHorizon(const Policy& p) {
  return p.inflight.hang_after > absl::ZeroDuration() ? p.inflight.hang_after
                                                      : kDefaultPermitHorizon;
}

struct Limits {
  // Most breakers held at once; Acquire for a new name past it fails with
  // RESOURCE_EXHAUSTED.
  uint32_t max_breakers = 10000;
  // An idle breaker (closed, no history, no recent permit) is evicted after
  // this long without activity.
  absl::Duration idle_ttl = absl::Minutes(10);
  // Most fallback-chain names counted under their own name (ChainStats);
  // later names are counted as chain "other".
  uint32_t max_chains = 100;
};

// The validated, immutable result of one configuration: defaults, the
// ordered policies (first match wins) and the limits.
struct PolicySet {
  std::shared_ptr<const Policy> defaults = std::make_shared<const Policy>();
  std::vector<std::shared_ptr<const Policy>> policies;
  Limits limits;
  // Where it came from ("embedded defaults" or a file path), for logs.
  std::string source = "embedded defaults";

  // The first policy whose match fits `dependency`, else the defaults.
  // Never null.
  const std::shared_ptr<const Policy>& Match(
      absl::string_view dependency) const;
};

// True if `name` matches `pattern`, where '*' matches any run of bytes
// (including none and including '/') and every other byte matches itself.
bool GlobMatch(absl::string_view pattern, absl::string_view name);

}  // namespace breakerd

#endif  // BREAKERD_SERVER_ENGINE_POLICY_H_

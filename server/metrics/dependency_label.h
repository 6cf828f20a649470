// What /metrics puts in the `dependency` label of the per-breaker families
// (--metrics-dependency-label): the dependency name itself, a stable hash of
// it, or nothing at all (series summed over every dependency).
//
// The hash is FNV-1a 64 (offset basis 0xcbf29ce484222325, prime
// 0x100000001b3) over the name's bytes, written as "h" and 16 lowercase hex
// digits: "h" + FNV-1a-64("db/main"). It is the same in every process,
// version and machine, so dashboards and alerts keep working per
// dependency across restarts and pods, and `breakerctl hash-label NAME`
// (or any FNV-1a 64 implementation) maps a name to its label. It hides
// names from a casual reader of /metrics only: whoever can guess a name can
// check the guess, and FNV is not collision resistant (SECURITY.md).
//
// Thread-safety: pure functions.
#ifndef BREAKERD_SERVER_METRICS_DEPENDENCY_LABEL_H_
#define BREAKERD_SERVER_METRICS_DEPENDENCY_LABEL_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"

namespace breakerd {

enum class DependencyLabel {
  // dependency="<name>" (the default).
  kName,
  // dependency="h<16 hex digits>": HashedDependencyLabel(name).
  kHash,
  // No dependency label: counters and histograms summed over every
  // dependency, per-dependency gauges not exported (families.h).
  kOmit,
};

// "name", "hash" or "omit": the flag's spelling of `label`.
absl::string_view DependencyLabelName(DependencyLabel label);

// The DependencyLabel spelled `text` ("name", "hash" or "omit", exactly);
// nullopt for anything else.
std::optional<DependencyLabel> ParseDependencyLabel(absl::string_view text);

// The allowed spellings, for messages: "name|hash|omit".
inline constexpr absl::string_view kDependencyLabelChoices = "name|hash|omit";

// FNV-1a 64 of `bytes`.
uint64_t Fnv1a64(absl::string_view bytes);

// The label value that stands for `dependency` under DependencyLabel::kHash:
// "h" followed by Fnv1a64(dependency) as 16 lowercase hex digits (17 bytes).
std::string HashedDependencyLabel(absl::string_view dependency);

}  // namespace breakerd

#endif  // BREAKERD_SERVER_METRICS_DEPENDENCY_LABEL_H_

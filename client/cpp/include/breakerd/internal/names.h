// Internal to breakerd::client, not part of its API (that is
// breakerd/client.h).
//
// The wire's rule of names (breakerd/v1/breaker.proto: a dependency, a
// chain) and of a chain's tiers, checked before any RPC so that a bad
// chain is the caller's error even while breakerd is away.
//
// Thread-safety: pure functions.
#ifndef BREAKERD_CLIENT_CPP_INCLUDE_BREAKERD_INTERNAL_NAMES_H_
#define BREAKERD_CLIENT_CPP_INCLUDE_BREAKERD_INTERNAL_NAMES_H_

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "breakerd/client.h"

namespace breakerd::client::internal {

// The last tier breakerd counts in a chain (its tier label: "0" to "63",
// or "none").
inline constexpr uint32_t kMaxChainTier = 63;

// OK if `name` is 1-200 bytes of [A-Za-z0-9._:/@-]; else INVALID_ARGUMENT
// naming `field` ("chain: must be 1-200 bytes (got 0)").
absl::Status ValidateName(absl::string_view field, absl::string_view name);

// OK without options.chain; else the name's check, and INVALID_ARGUMENT
// naming `chain` if `count` dependencies from options.first_tier on reach
// past kMaxChainTier.
absl::Status ValidateChain(const FirstOptions& options, size_t count);

}  // namespace breakerd::client::internal

#endif  // BREAKERD_CLIENT_CPP_INCLUDE_BREAKERD_INTERNAL_NAMES_H_

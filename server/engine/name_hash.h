// The hash of dependency names used by the Registry: 8 bytes per multiply,
// so a typical 20-byte name costs a few dozen instructions (Abseil's
// general-purpose string hash costs several times that, and the Registry
// hashes a name on every Acquire and Report). Seeded per process, so a
// local client cannot precompute names that collide.
//
// Thread-safety: pure functions of their arguments and a constant seed.
#ifndef BREAKERD_SERVER_ENGINE_NAME_HASH_H_
#define BREAKERD_SERVER_ENGINE_NAME_HASH_H_

#include <cstdint>
#include <cstring>
#include <string>

#include "absl/strings/string_view.h"

namespace breakerd {

// Differs between processes (address-space layout randomization moves it).
// Set during static initialization; never read before main.
extern const uint64_t kNameHashSeed;

inline uint64_t HashName(absl::string_view name) {
  constexpr uint64_t kMul = 0x9e3779b97f4a7c15ULL;
  const char* p = name.data();
  size_t n = name.size();
  uint64_t h = kNameHashSeed ^ (n * kMul);
  if (n >= 8) {
    // Whole words, then the last 8 bytes (overlapping the previous word):
    // no byte-by-byte tail.
    const char* last = p + n - 8;
    for (; p < last; p += 8) {
      uint64_t w;
      std::memcpy(&w, p, 8);
      h = (h ^ w) * kMul;
      h ^= h >> 29;
    }
    uint64_t w;
    std::memcpy(&w, last, 8);
    h = (h ^ w) * kMul;
  } else {
    uint64_t w = 0;
    for (size_t i = 0; i < n; ++i) w |= uint64_t{uint8_t(p[i])} << (8 * i);
    h = (h ^ w) * kMul;
  }
  // splitmix64 finalizer: every input bit reaches every output bit.
  h ^= h >> 30;
  h *= 0xbf58476d1ce4e5b9ULL;
  h ^= h >> 27;
  h *= 0x94d049bb133111ebULL;
  h ^= h >> 31;
  return h;
}

// Transparent hasher and equality for maps keyed by std::string, looked up
// by absl::string_view.
struct NameHasher {
  using is_transparent = void;
  size_t operator()(absl::string_view name) const { return HashName(name); }
};
struct NameEq {
  using is_transparent = void;
  bool operator()(absl::string_view a, absl::string_view b) const {
    return a == b;
  }
};

}  // namespace breakerd

#endif  // BREAKERD_SERVER_ENGINE_NAME_HASH_H_

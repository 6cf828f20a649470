// The alphabet of dependency names, defined once: the registry checks every
// name against it (ValidateDependency, registry.h), config checks policy
// matches against it (plus '*'), and the fleet checks its Redis key prefix
// against it, so a name is always safe in a Redis key, a metric label and a
// log line.
//
// Thread-safety: constants and a pure function.
#ifndef BREAKERD_SERVER_ENGINE_DEPENDENCY_NAME_H_
#define BREAKERD_SERVER_ENGINE_DEPENDENCY_NAME_H_

#include "absl/strings/string_view.h"

namespace breakerd {

// The rule as written in error messages and docs.
inline constexpr absl::string_view kDependencyNameAlphabet =
    "[A-Za-z0-9._:/@-]";

namespace dependency_name_internal {
struct ByteTable {
  bool ok[256] = {};
  constexpr ByteTable() {
    for (int c = 'a'; c <= 'z'; ++c) ok[c] = true;
    for (int c = 'A'; c <= 'Z'; ++c) ok[c] = true;
    for (int c = '0'; c <= '9'; ++c) ok[c] = true;
    for (char c : {'.', '_', ':', '/', '@', '-'}) {
      ok[static_cast<unsigned char>(c)] = true;
    }
  }
};
inline constexpr ByteTable kByteTable;
}  // namespace dependency_name_internal

// True if `c` may appear in a dependency name (kDependencyNameAlphabet).
constexpr bool IsDependencyNameByte(char c) {
  return dependency_name_internal::kByteTable.ok[static_cast<unsigned char>(c)];
}

}  // namespace breakerd

#endif  // BREAKERD_SERVER_ENGINE_DEPENDENCY_NAME_H_

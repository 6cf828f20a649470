#include "server/engine/name_hash.h"

namespace breakerd {
namespace {
const char kSeedAnchor = 0;
}  // namespace

const uint64_t kNameHashSeed =
    static_cast<uint64_t>(reinterpret_cast<uintptr_t>(&kSeedAnchor)) *
    0xd6e8feb86659fd93ULL;

}  // namespace breakerd

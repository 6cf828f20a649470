#include "server/metrics/dependency_label.h"

namespace breakerd {

absl::string_view DependencyLabelName(DependencyLabel label) {
  switch (label) {
    case DependencyLabel::kName:
      return "name";
    case DependencyLabel::kHash:
      return "hash";
    case DependencyLabel::kOmit:
      return "omit";
  }
  return "name";
}

std::optional<DependencyLabel> ParseDependencyLabel(absl::string_view text) {
  for (DependencyLabel label : {DependencyLabel::kName, DependencyLabel::kHash,
                                DependencyLabel::kOmit}) {
    if (text == DependencyLabelName(label)) return label;
  }
  return std::nullopt;
}

uint64_t Fnv1a64(absl::string_view bytes) {
  uint64_t hash = 0xcbf29ce484222325u;
  for (char c : bytes) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 0x100000001b3u;
  }
  return hash;
}

std::string HashedDependencyLabel(absl::string_view dependency) {
  static constexpr char kHex[] = "0123456789abcdef";
  uint64_t hash = Fnv1a64(dependency);
  std::string label(17, 'h');
  for (int i = 16; i >= 1; --i) {
    label[i] = kHex[hash & 0xf];
    hash >>= 4;
  }
  return label;
}

}  // namespace breakerd

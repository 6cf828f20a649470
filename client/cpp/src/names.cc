#include "breakerd/internal/names.h"

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace breakerd::client::internal {
namespace {

constexpr size_t kMaxNameBytes = 200;

bool NameByte(char c) {
  return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '.' ||
         c == '_' || c == ':' || c == '/' || c == '@' || c == '-';
}

}  // namespace

absl::Status ValidateName(absl::string_view field, absl::string_view name) {
  if (name.empty() || name.size() > kMaxNameBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": must be 1-", kMaxNameBytes, " bytes (got ",
                     name.size(), ")"));
  }
  for (size_t i = 0; i < name.size(); ++i) {
    if (!NameByte(name[i])) {
      return absl::InvalidArgumentError(absl::StrCat(
          field, " \"", absl::CHexEscape(name), "\": byte ", i, " (0x",
          absl::Hex(static_cast<unsigned char>(name[i]), absl::kZeroPad2),
          ") is not in [A-Za-z0-9._:/@-]"));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateChain(const FirstOptions& options, size_t count) {
  if (!options.chain.has_value()) return absl::OkStatus();
  if (absl::Status s = ValidateName("chain", *options.chain); !s.ok()) {
    return s;
  }
  const uint64_t last = uint64_t{options.first_tier} + count - 1;
  if (count > 0 && last > kMaxChainTier) {
    return absl::InvalidArgumentError(absl::StrCat(
        "chain \"", *options.chain, "\": tiers ", options.first_tier, " to ",
        last, ": a chain's tiers are 0 to ", kMaxChainTier, " (at most ",
        kMaxChainTier + 1, " dependencies)"));
  }
  return absl::OkStatus();
}

}  // namespace breakerd::client::internal

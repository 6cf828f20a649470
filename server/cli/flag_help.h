// The --help text of breakerd and breakerctl: a usage text, then each of the
// binary's own flags (dashed name, value placeholder, wrapped help, default).
// Both binaries define Abseil flags and list them through the flag
// reflection API, so the help shows each flag's own help string and default.
#ifndef BREAKERD_SERVER_CLI_FLAG_HELP_H_
#define BREAKERD_SERVER_CLI_FLAG_HELP_H_

#include <cstddef>
#include <ostream>
#include <string>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace breakerd {

// One flag as --help lists it.
struct FlagDoc {
  const char* name;   // as defined (underscores)
  const char* value;  // placeholder after "=", e.g. "PATH"; "" for none
};

// "metrics_listen" -> "metrics-listen".
std::string DashedFlagName(absl::string_view name);

// `text` word-wrapped to 80 columns, every line indented by `indent`,
// ending in a newline.
std::string WrapText(absl::string_view text, size_t indent);

// Each paragraph of `usage` (lines separated by '\n') wrapped to 80
// columns, its lines indented as its first; empty lines kept.
void PrintUsage(std::ostream& out, absl::string_view usage);

// "  --NAME=VALUE", the flag's help wrapped and indented by 6, and
// "      default: D" for each flag of `flags` that is defined, in order.
void PrintFlags(std::ostream& out, absl::Span<const FlagDoc> flags);

// True if `name` (underscores) is one of `flags`.
bool IsDocumentedFlag(absl::Span<const FlagDoc> flags, absl::string_view name);

}  // namespace breakerd

#endif  // BREAKERD_SERVER_CLI_FLAG_HELP_H_

#include "server/cli/flag_help.h"

#include <algorithm>

#include "absl/flags/reflection.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"

namespace breakerd {

std::string DashedFlagName(absl::string_view name) {
  return absl::StrReplaceAll(name, {{"_", "-"}});
}

std::string WrapText(absl::string_view text, size_t indent) {
  constexpr size_t kWidth = 80;
  std::string out;
  size_t column = 0;
  for (absl::string_view word : absl::StrSplit(text, ' ', absl::SkipEmpty())) {
    if (column > indent && column + 1 + word.size() > kWidth) {
      out.push_back('\n');
      column = 0;
    }
    if (column == 0) {
      out.append(indent, ' ');
      column = indent;
    } else {
      out.push_back(' ');
      ++column;
    }
    out.append(word.data(), word.size());
    column += word.size();
  }
  out.push_back('\n');
  return out;
}

void PrintUsage(std::ostream& out, absl::string_view usage) {
  for (absl::string_view paragraph : absl::StrSplit(usage, '\n')) {
    // A paragraph's leading spaces indent each of its lines.
    const size_t indent =
        std::min(paragraph.find_first_not_of(' '), paragraph.size());
    out << (paragraph.empty() ? "\n" : WrapText(paragraph, indent));
  }
}

void PrintFlags(std::ostream& out, absl::Span<const FlagDoc> flags) {
  for (const FlagDoc& doc : flags) {
    const absl::CommandLineFlag* flag = absl::FindCommandLineFlag(doc.name);
    if (flag == nullptr) continue;
    out << "  --" << DashedFlagName(flag->Name())
        << (doc.value[0] != '\0' ? "=" : "") << doc.value << "\n"
        << WrapText(flag->Help(), 6);
    const std::string def = flag->DefaultValue();
    out << "      default: " << (def.empty() ? "(none)" : def) << "\n";
  }
}

bool IsDocumentedFlag(absl::Span<const FlagDoc> flags, absl::string_view name) {
  for (const FlagDoc& doc : flags) {
    if (name == doc.name) return true;
  }
  return false;
}

}  // namespace breakerd

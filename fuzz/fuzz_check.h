// Invariant checks for the fuzz targets: a violated invariant prints what
// was expected and what happened, then aborts, so libFuzzer records the
// input as a crash (like an ASan or UBSan report).
//
// Thread-safety: FuzzFail may be called from any thread; it never returns.
#ifndef BREAKERD_FUZZ_FUZZ_CHECK_H_
#define BREAKERD_FUZZ_FUZZ_CHECK_H_

#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace breakerd {
namespace fuzz {

// Prints "invariant violated at file:line: what" to stderr and aborts.
[[noreturn]] inline void FuzzFail(const char* file, int line,
                                  absl::string_view what) {
  std::fprintf(stderr,
               "\n*** breakerd fuzz: invariant violated at %s:%d\n%.*s\n", file,
               line, static_cast<int>(what.size()), what.data());
  std::fflush(stderr);
  std::abort();
}

// True when BREAKERD_FUZZ_STRICT=1 is set: the known findings that the
// targets otherwise step around (each described where it is guarded, and
// kept under fuzz/crashes/) abort again, so their reproducers crash.
inline bool StrictMode() {
  static const bool strict = [] {
    const char* v = std::getenv("BREAKERD_FUZZ_STRICT");
    return v != nullptr && std::string(v) == "1";
  }();
  return strict;
}

// True when BREAKERD_FUZZ_TRACE=1 is set: the targets then print each
// operation an input decodes to (to read what a reproducer or seed does).
inline bool TraceMode() {
  static const bool trace = [] {
    const char* v = std::getenv("BREAKERD_FUZZ_TRACE");
    return v != nullptr && std::string(v) == "1";
  }();
  return trace;
}

// Prints one trace line. Use FUZZ_TRACE, which builds the line only in
// TraceMode().
inline void Trace(absl::string_view line) {
  std::fprintf(stderr, "trace: %.*s\n", static_cast<int>(line.size()),
               line.data());
}

}  // namespace fuzz
}  // namespace breakerd

// FUZZ_CHECK(cond, parts...): aborts with absl::StrCat(parts...) unless cond.
#define FUZZ_CHECK(cond, ...)                                          \
  do {                                                                 \
    if (!(cond)) {                                                     \
      ::breakerd::fuzz::FuzzFail(                                      \
          __FILE__, __LINE__,                                          \
          ::absl::StrCat("check failed: " #cond "\n", ##__VA_ARGS__)); \
    }                                                                  \
  } while (false)

// FUZZ_TRACE(parts...): prints absl::StrCat(parts...) when
// BREAKERD_FUZZ_TRACE=1; costs one branch otherwise.
#define FUZZ_TRACE(...)                                     \
  do {                                                      \
    if (::breakerd::fuzz::TraceMode()) {                    \
      ::breakerd::fuzz::Trace(::absl::StrCat(__VA_ARGS__)); \
    }                                                       \
  } while (false)

#endif  // BREAKERD_FUZZ_FUZZ_CHECK_H_

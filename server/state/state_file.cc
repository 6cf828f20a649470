#include "server/state/state_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <optional>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace breakerd {
namespace {

constexpr absl::string_view kOpenName = "open";
constexpr absl::string_view kForcedOpenName = "forced_open";
constexpr absl::string_view kForcedClosedName = "forced_closed";

// The file's name for a saved state; empty for one that is never written.
absl::string_view SavedStateName(State s) {
  switch (s) {
    case State::kOpen:
    case State::kHalfOpen:
      return kOpenName;
    case State::kForcedOpen:
      return kForcedOpenName;
    case State::kForcedClosed:
      return kForcedClosedName;
    case State::kClosed:
      break;
  }
  return {};
}

std::optional<State> ParseStateName(absl::string_view name) {
  if (name == kOpenName) return State::kOpen;
  if (name == kForcedOpenName) return State::kForcedOpen;
  if (name == kForcedClosedName) return State::kForcedClosed;
  return std::nullopt;
}

// A field's text for an error message: escaped, and cut short if long.
std::string Quote(absl::string_view field) {
  constexpr size_t kMaxShown = 40;
  std::string shown = absl::CHexEscape(field.substr(0, kMaxShown));
  return absl::StrCat("\"", shown, field.size() > kMaxShown ? "\"..." : "\"");
}

// Digits only (no sign, no spaces), at most `max`.
std::optional<uint64_t> ParseDecimal(absl::string_view s, uint64_t max) {
  if (s.empty() || s.size() > 19) return std::nullopt;
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  if (v > max) return std::nullopt;
  return v;
}

// The wall-clock instant as Unix milliseconds, rounded up (a restored
// cooldown is never shorter than the one saved), within the file's range.
int64_t CeilUnixMillis(absl::Time t) {
  int64_t ms = absl::ToUnixMillis(t);  // rounds towards the infinite past
  if (absl::FromUnixMillis(ms) < t) ++ms;
  return std::clamp<int64_t>(ms, 0, kMaxSavedUnixMillis);
}

// The version of a header line, "breakerd-state <1 to 9 digits>" (this
// breakerd's or another's); nullopt for any other line.
std::optional<absl::string_view> HeaderVersion(absl::string_view line) {
  constexpr absl::string_view kMagic = "breakerd-state ";
  if (!absl::StartsWith(line, kMagic)) return std::nullopt;
  const absl::string_view version = line.substr(kMagic.size());
  if (version.empty() || version.size() > 9 ||
      !std::all_of(version.begin(), version.end(),
                   [](char c) { return c >= '0' && c <= '9'; })) {
    return std::nullopt;
  }
  return version;
}

// True if `text` may be a state file: empty, or a first line that is a
// header of some version. Anything else is some other file named by
// mistake.
bool MayBeStateFile(absl::string_view text) {
  return text.empty() ||
         HeaderVersion(text.substr(0, text.find('\n'))).has_value();
}

absl::Status LineError(size_t line, absl::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat("line ", line, ": ", message));
}

// The size limits shared by the reader and the writer.
absl::Status CheckBounds(size_t bytes, size_t lines) {
  if (bytes > kMaxStateFileBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(bytes, " bytes, over the limit of ", kMaxStateFileBytes));
  }
  if (lines > kMaxStateFileLines) {
    return absl::InvalidArgumentError(
        absl::StrCat(lines, " lines, over the limit of ", kMaxStateFileLines));
  }
  return absl::OkStatus();
}

absl::Status ErrnoError(int error, absl::string_view path,
                        absl::string_view what) {
  return absl::ErrnoToStatus(error,
                             absl::StrCat("state file ", path, ": ", what));
}

// Writes all of `data` to fd, retrying short writes and EINTR. Returns 0 or
// an errno value.
int WriteAll(int fd, absl::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return 0;
}

std::string DirectoryOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

}  // namespace

bool SavedBreaker::operator==(const SavedBreaker& other) const {
  return dependency == other.dependency && state == other.state &&
         open_until_unix_ms == other.open_until_unix_ms &&
         escalation_level == other.escalation_level &&
         decided_unix_ms == other.decided_unix_ms;
}

std::vector<SavedBreaker> CollectState(
    const Registry& registry, absl::Time now_wall,
    const std::function<int64_t(absl::string_view)>& decided_at) {
  std::vector<SavedBreaker> out;
  registry.ForEach([&](const BreakerSnapshot& s) {
    SavedBreaker b;
    switch (s.state) {
      case State::kClosed:
        return;
      case State::kOpen:
      case State::kHalfOpen:  // retry_after is zero: the cooldown ends now
        b.state = State::kOpen;
        b.open_until_unix_ms = CeilUnixMillis(
            now_wall + std::max(s.retry_after, absl::ZeroDuration()));
        break;
      case State::kForcedOpen:
      case State::kForcedClosed:
        b.state = s.state;
        if (decided_at) {
          b.decided_unix_ms = std::clamp<int64_t>(decided_at(s.dependency), 0,
                                                  kMaxSavedUnixMillis);
        }
        break;
    }
    b.dependency = s.dependency;
    b.escalation_level = std::min(s.escalation_level, kMaxSavedEscalation);
    out.push_back(std::move(b));
  });
  std::sort(out.begin(), out.end(),
            [](const SavedBreaker& a, const SavedBreaker& b) {
              return a.dependency < b.dependency;
            });
  return out;
}

std::string FormatState(absl::Span<const SavedBreaker> breakers) {
  std::string out;
  out.reserve(kStateFileHeader.size() + 1 + breakers.size() * 64);
  absl::StrAppend(&out, kStateFileHeader, "\n");
  for (const SavedBreaker& b : breakers) {
    const absl::string_view name = SavedStateName(b.state);
    if (name.empty()) continue;
    const bool open = name == kOpenName;
    absl::StrAppend(&out, b.dependency, " ", name, " ",
                    open ? b.open_until_unix_ms : 0, " ", b.escalation_level,
                    " ", open ? 0 : b.decided_unix_ms, "\n");
  }
  return out;
}

absl::StatusOr<std::vector<SavedBreaker>> ParseState(absl::string_view text) {
  const size_t newlines =
      static_cast<size_t>(std::count(text.begin(), text.end(), '\n'));
  const bool unterminated = !text.empty() && text.back() != '\n';
  if (absl::Status s = CheckBounds(text.size(), newlines + unterminated);
      !s.ok()) {
    return s;
  }
  if (text.empty()) {
    return LineError(1, absl::StrCat("header: missing (empty file); must be \"",
                                     kStateFileHeader, "\""));
  }

  std::vector<SavedBreaker> out;
  out.reserve(newlines > 0 ? newlines - 1 : 0);
  // Dependency -> the line it first appeared on (views into `text`).
  absl::flat_hash_map<absl::string_view, size_t> seen;
  seen.reserve(newlines);
  size_t line_no = 0;
  bool version1 = false;  // four fields, no decision time
  while (!text.empty()) {
    ++line_no;
    const size_t end = text.find('\n');
    if (end == absl::string_view::npos) {
      return LineError(line_no,
                       "missing final newline (the file is truncated?)");
    }
    const absl::string_view line = text.substr(0, end);
    text.remove_prefix(end + 1);

    if (line_no == 1) {
      if (line == kStateFileHeader) continue;
      if (line == kStateFileHeaderV1) {
        version1 = true;
        continue;
      }
      // Only a version made of digits is quoted: a first line that is not
      // a state file's header may be a secret named by mistake (the token
      // file), and an error message goes to the log.
      if (const std::optional<absl::string_view> version = HeaderVersion(line);
          version.has_value()) {
        return LineError(
            1, absl::StrCat("header: unsupported version \"", *version,
                            "\"; this breakerd reads \"", kStateFileHeader,
                            "\" and \"", kStateFileHeaderV1, "\""));
      }
      return LineError(
          1, absl::StrCat("header: must be \"", kStateFileHeader,
                          "\" (got a first line of ", line.size(),
                          " bytes, not shown: is this a state file?)"));
    }

    if (line.empty()) return LineError(line_no, "empty line");
    const std::vector<absl::string_view> fields = absl::StrSplit(line, ' ');
    const size_t want = version1 ? 4 : 5;
    if (fields.size() != want) {
      return LineError(
          line_no,
          absl::StrCat("must have ", want,
                       " fields separated by single spaces (dependency state "
                       "open_until_unix_ms escalation",
                       version1 ? "" : " decided_unix_ms", "), got ",
                       fields.size()));
    }
    SavedBreaker b;
    if (absl::Status s = ValidateDependency(fields[0], "dependency"); !s.ok()) {
      return LineError(line_no, s.message());
    }
    const std::optional<State> state = ParseStateName(fields[1]);
    if (!state.has_value()) {
      return LineError(line_no,
                       absl::StrCat("state: must be one of ", kOpenName, ", ",
                                    kForcedOpenName, ", ", kForcedClosedName,
                                    " (got ", Quote(fields[1]), ")"));
    }
    const std::optional<uint64_t> open_until =
        ParseDecimal(fields[2], kMaxSavedUnixMillis);
    if (!open_until.has_value()) {
      return LineError(
          line_no,
          absl::StrCat("open_until_unix_ms: must be an integer 0..",
                       kMaxSavedUnixMillis, " (got ", Quote(fields[2]), ")"));
    }
    if (*state != State::kOpen && *open_until != 0) {
      return LineError(
          line_no, absl::StrCat("open_until_unix_ms: must be 0 for ", fields[1],
                                " (got ", Quote(fields[2]), ")"));
    }
    const std::optional<uint64_t> escalation =
        ParseDecimal(fields[3], kMaxSavedEscalation);
    if (!escalation.has_value()) {
      return LineError(
          line_no,
          absl::StrCat("escalation: must be an integer 0..",
                       kMaxSavedEscalation, " (got ", Quote(fields[3]), ")"));
    }
    std::optional<uint64_t> decided = 0;
    if (!version1) {
      decided = ParseDecimal(fields[4], kMaxSavedUnixMillis);
      if (!decided.has_value()) {
        return LineError(
            line_no,
            absl::StrCat("decided_unix_ms: must be an integer 0..",
                         kMaxSavedUnixMillis, " (got ", Quote(fields[4]), ")"));
      }
      if (*state == State::kOpen && *decided != 0) {
        return LineError(
            line_no, absl::StrCat("decided_unix_ms: must be 0 for open (got ",
                                  Quote(fields[4]), ")"));
      }
    }
    const auto [it, inserted] = seen.emplace(fields[0], line_no);
    if (!inserted) {
      return LineError(line_no,
                       absl::StrCat("dependency: ", Quote(fields[0]),
                                    " already appeared on line ", it->second));
    }
    b.dependency = std::string(fields[0]);
    b.state = *state;
    b.open_until_unix_ms = static_cast<int64_t>(*open_until);
    b.escalation_level = static_cast<uint32_t>(*escalation);
    b.decided_unix_ms = static_cast<int64_t>(*decided);
    out.push_back(std::move(b));
  }
  return out;
}

absl::Status WriteStateFile(const std::string& path,
                            absl::Span<const SavedBreaker> breakers) {
  const std::string text = FormatState(breakers);
  const size_t lines =
      static_cast<size_t>(std::count(text.begin(), text.end(), '\n'));
  if (absl::Status s = CheckBounds(text.size(), lines); !s.ok()) {
    return absl::ResourceExhaustedError(
        absl::StrCat("state file ", path,
                     ": not written, a reader would refuse it: ", s.message()));
  }
  return WriteFileAtomically(path, text);
}

absl::Status WriteFileAtomically(const std::string& path,
                                 absl::string_view text) {
  const std::string tmp = absl::StrCat(path, ".tmp.", ::getpid());
  const int fd = ::open(
      tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return ErrnoError(errno, path, absl::StrCat("creating ", tmp));

  // Until the rename, a failure leaves `path` alone and removes tmp.
  auto fail = [&](int error, absl::string_view what) {
    ::unlink(tmp.c_str());
    return ErrnoError(error, path, absl::StrCat(what, " ", tmp));
  };
  if (const int error = WriteAll(fd, text); error != 0) {
    ::close(fd);
    return fail(error, "writing");
  }
  if (::fsync(fd) != 0) {
    const int error = errno;
    ::close(fd);
    return fail(error, "syncing");
  }
  if (::close(fd) != 0) return fail(errno, "closing");
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    return fail(errno, "renaming over it");
  }

  // Make the rename itself durable.
  const std::string dir = DirectoryOf(path);
  const int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd < 0) {
    return ErrnoError(errno, path, absl::StrCat("opening directory ", dir));
  }
  // Some file systems cannot sync a directory (EINVAL): nothing to make
  // durable there.
  const int sync_error = ::fsync(dir_fd) != 0 ? errno : 0;
  ::close(dir_fd);
  if (sync_error != 0 && sync_error != EINVAL) {
    return ErrnoError(sync_error, path,
                      absl::StrCat("syncing directory ", dir));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<SavedBreaker>> ReadStateFile(
    const std::string& path) {
  // O_NONBLOCK: a FIFO put there by mistake must not hang the start-up.
  // O_NOFOLLOW: breakerd writes this file itself (never a symlink), so a
  // symlink here is a mistake or a plant, and is not followed.
  const int fd =
      ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW);
  if (fd < 0) return ErrnoError(errno, path, "opening");
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    const int error = errno;
    ::close(fd);
    return ErrnoError(error, path, "stat");
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return absl::FailedPreconditionError(
        absl::StrCat("state file ", path, ": not a regular file"));
  }
  if (static_cast<uint64_t>(st.st_size) > kMaxStateFileBytes) {
    ::close(fd);
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", st.st_size,
                                                   " bytes, over the limit of ",
                                                   kMaxStateFileBytes));
  }

  // Read to the end, but never more than one byte past the limit (the file
  // may have grown since fstat); ParseState then refuses it.
  std::string text;
  text.resize(static_cast<size_t>(st.st_size) + 1);
  size_t got = 0;
  while (true) {
    if (got == text.size()) {
      if (text.size() > kMaxStateFileBytes) break;
      text.resize(std::min(text.size() * 2, kMaxStateFileBytes + 1));
    }
    const ssize_t n = ::read(fd, text.data() + got, text.size() - got);
    if (n < 0) {
      if (errno == EINTR) continue;
      const int error = errno;
      ::close(fd);
      return ErrnoError(error, path, "reading");
    }
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  ::close(fd);
  text.resize(got);

  absl::StatusOr<std::vector<SavedBreaker>> parsed = ParseState(text);
  if (!parsed.ok()) {
    // Some other file (the token file, by a typo): the caller must not
    // write over it.
    const absl::StatusCode code = MayBeStateFile(text)
                                      ? parsed.status().code()
                                      : absl::StatusCode::kFailedPrecondition;
    return absl::Status(code,
                        absl::StrCat(path, ": ", parsed.status().message()));
  }
  return parsed;
}

RestoreStats RestoreState(Registry* registry,
                          absl::Span<const SavedBreaker> breakers,
                          absl::Time now_wall, absl::Duration stale_after) {
  RestoreStats stats;
  for (const SavedBreaker& b : breakers) {
    ExternalState external;
    external.escalation_level = b.escalation_level;
    switch (b.state) {
      case State::kForcedOpen:
      case State::kForcedClosed: {
        external.kind = b.state == State::kForcedOpen
                            ? ExternalState::Kind::kForcedOpen
                            : ExternalState::Kind::kForcedClosed;
        external.decided_unix_ms = b.decided_unix_ms;
        if (!registry
                 ->ApplyExternal(b.dependency, external,
                                 TransitionReason::kRestored)
                 .ok()) {
          ++stats.failed;
          continue;
        }
        if (b.escalation_level > 0) {
          // Escalation only grows while open: keep it beneath the override
          // as an elapsed open period (invisible; only Reset ends the
          // override, and it clears both). The breaker exists by now.
          external.kind = ExternalState::Kind::kOpen;
          external.open_remaining = absl::ZeroDuration();
          registry
              ->ApplyExternal(b.dependency, external,
                              TransitionReason::kRestored)
              .IgnoreError();
        }
        ++stats.restored;
        continue;
      }
      case State::kOpen:
      case State::kHalfOpen: {
        const absl::Time open_until =
            absl::FromUnixMillis(b.open_until_unix_ms);
        if (now_wall - open_until > stale_after) {
          ++stats.skipped_stale;
          continue;
        }
        external.kind = ExternalState::Kind::kOpen;
        external.open_remaining = open_until - now_wall;
        break;
      }
      case State::kClosed:
        ++stats.failed;
        continue;
    }
    if (registry
            ->ApplyExternal(b.dependency, external, TransitionReason::kRestored)
            .ok()) {
      ++stats.restored;
    } else {
      ++stats.failed;
    }
  }
  return stats;
}

}  // namespace breakerd

#include "server/cli/secret_file.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "server/log/json_log.h"

namespace breakerd {
namespace {

// True if this process is in group `gid` (effective or supplementary).
bool InOwnGroups(gid_t gid) {
  if (gid == getegid()) return true;
  const int n = getgroups(0, nullptr);
  if (n <= 0) return false;
  std::vector<gid_t> groups(static_cast<size_t>(n));
  const int got = getgroups(n, groups.data());
  return got > 0 && std::find(groups.begin(), groups.begin() + got, gid) !=
                        groups.begin() + got;
}

// Others than this process may read or write it: any "other" bit, group
// write, or group read by a group this process is not in.
bool IsShared(const struct stat& st) {
  return (st.st_mode & 0027) != 0 ||
         ((st.st_mode & 0040) != 0 && !InOwnGroups(st.st_gid));
}

void LogPermissive(const std::string& path, absl::string_view flag,
                   const struct stat& st) {
  LogEvent(LogLevel::kWarn, "secret_file_permissive",
           {{"flag", flag},
            {"path", path},
            {"mode", absl::StrFormat("%04o", st.st_mode & 07777)},
            {"gid", static_cast<int64_t>(st.st_gid)},
            {"why",
             "other users may read or write it; make it 0400 or 0600, or "
             "0440 with breakerd's own group (Kubernetes: the Secret "
             "volume's defaultMode 0400 and the pod's fsGroup)"}});
}

}  // namespace

absl::StatusOr<std::string> ReadSecretFile(const std::string& path,
                                           absl::string_view flag) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        flag, " ", path, ": cannot open (", ErrnoText(errno), ")"));
  }
  struct FdCloser {
    int fd;
    ~FdCloser() { close(fd); }
  } closer{fd};
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat(flag, " ", path, ": not a regular file"));
  }
  // Read one byte more than a secret may have (plus room for surrounding
  // whitespace): enough to tell "too long" without reading a huge file.
  std::string content;
  char buf[4096];
  while (content.size() <= 4 * kMaxSecretBytes) {
    const ssize_t n = read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          flag, " ", path, ": read error (", ErrnoText(errno), ")"));
    }
    if (n == 0) break;
    content.append(buf, static_cast<size_t>(n));
  }
  const absl::string_view token = absl::StripAsciiWhitespace(content);
  if (token.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        flag, " ", path,
        ": the file is empty; put the secret in it or drop the flag"));
  }
  if (token.size() > kMaxSecretBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        flag, " ", path, ": token longer than ", kMaxSecretBytes, " bytes"));
  }
  for (char c : token) {
    if (c < 0x21 || c > 0x7E) {
      // Never echo the token itself.
      return absl::InvalidArgumentError(absl::StrCat(
          flag, " ", path,
          ": the token must be printable ASCII without spaces (it is sent "
          "as `authorization: Bearer <token>`)"));
    }
  }
  // The example overlays' secretGenerator ships this placeholder in public:
  // a cluster running with it has an Admin token anyone can read.
  if (absl::StartsWith(token, kPlaceholderTokenPrefix)) {
    return absl::InvalidArgumentError(absl::StrCat(
        flag, " ", path, ": holds the example's public placeholder (",
        kPlaceholderTokenPrefix,
        "...); create the Secret with a secret of your own and delete the "
        "example's secretGenerator"));
  }
  return std::string(token);
}

void WarnIfSecretFileIsShared(const std::string& path, absl::string_view flag) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0 || !IsShared(st)) return;
  LogPermissive(path, flag, st);
}

SecretFileModeCheck::SecretFileModeCheck(std::string path, std::string flag)
    : path_(std::move(path)), flag_(std::move(flag)) {}

bool SecretFileModeCheck::Warned::operator==(const Warned& other) const {
  return dev == other.dev && ino == other.ino && mode == other.mode &&
         gid == other.gid;
}

bool SecretFileModeCheck::Check() {
  struct stat st;
  if (stat(path_.c_str(), &st) != 0) return false;
  if (!IsShared(st)) {
    warned_.reset();
    return false;
  }
  const Warned now{st.st_dev, st.st_ino, st.st_mode, st.st_gid};
  if (warned_ == now) return false;
  warned_ = now;
  LogPermissive(path_, flag_, st);
  return true;
}

}  // namespace breakerd

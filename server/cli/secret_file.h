// Secret files: the Admin bearer token and the Redis password that breakerd
// reads (--admin-token-file, --redis-password-file), and the token file
// breakerctl sends (--token-file). One reader, so the two binaries accept
// exactly the same files.
#ifndef BREAKERD_SERVER_CLI_SECRET_FILE_H_
#define BREAKERD_SERVER_CLI_SECRET_FILE_H_

#include <sys/types.h>

#include <cstddef>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace breakerd {

// Longest secret accepted, in bytes (after trimming).
inline constexpr size_t kMaxSecretBytes = 4096;

// A secret starting with this is refused: the example overlays'
// secretGenerator ships "REPLACE-ME-example-placeholder" in public.
inline constexpr absl::string_view kPlaceholderTokenPrefix = "REPLACE-ME";

// The secret in the file at `path`, surrounding whitespace trimmed.
// FAILED_PRECONDITION if the file cannot be opened or read or is not a
// regular file (a directory, a FIFO); INVALID_ARGUMENT
// if it is empty, longer than kMaxSecretBytes, holds a byte that is not
// printable ASCII or a space (it is sent as `authorization: Bearer <token>`),
// or holds the example's placeholder. Every message starts with
// "<flag> <path>: " and never contains the secret.
absl::StatusOr<std::string> ReadSecretFile(const std::string& path,
                                           absl::string_view flag);

// Logs "secret_file_permissive" (warn) if the file at `path` (symlinks
// followed, as a Kubernetes Secret volume is mounted) may be read or written
// by others than this process: any "other" bit, group write, or group read
// by a group this process is not in. Group read by the process's own group
// is how Kubernetes gives a non-root container its Secret (defaultMode 0400
// with the pod's fsGroup makes the file 0440, group fsGroup), so that is
// not warned about.
void WarnIfSecretFileIsShared(const std::string& path, absl::string_view flag);

// WarnIfSecretFileIsShared for a file read again while serving (a rotated
// Secret), checked at every poll: warns once per change, not per check. A
// shared file is warned about when first seen, and again only if it is
// replaced (a rotated Kubernetes Secret is a new file) or its mode or group
// changes; a file that stops being shared and becomes shared again is
// warned about again.
//
// Thread-safety: not thread-safe; the owner serializes calls.
class SecretFileModeCheck {
 public:
  // `path`, `flag`: as for WarnIfSecretFileIsShared.
  SecretFileModeCheck(std::string path, std::string flag);

  // Stats the file (symlinks followed) and logs "secret_file_permissive" if
  // it is shared and differs from the one last warned about. Returns true
  // if it logged. A file that cannot be stat'ed changes nothing.
  bool Check();

 private:
  // What identifies a warning: the file and its permissions.
  struct Warned {
    dev_t dev;
    ino_t ino;
    mode_t mode;
    gid_t gid;
    bool operator==(const Warned& other) const;
  };

  // Constant after construction.
  const std::string path_;
  const std::string flag_;

  std::optional<Warned> warned_;
};

}  // namespace breakerd

#endif  // BREAKERD_SERVER_CLI_SECRET_FILE_H_

// AdminToken: the Admin service's bearer token from --admin-token-file, over
// the process's life. At start the file must hold a valid secret
// (ReadSecretFile) or breakerd does not start; without the flag the Admin
// service refuses every call ("admin_disabled"). While serving, the file is
// re-read at each config poll and on SIGHUP: a changed valid token replaces
// the old one (a rotated Kubernetes Secret, "admin_token_reloaded"); a bad
// file is logged once ("admin_token_rejected") and the token in force stays.
// A file others may read is warned about ("secret_file_permissive") at
// start and at the poll that finds it so (chmod'ed, or a rotation that made
// it so), once per change rather than at every poll (SecretFileModeCheck).
//
// Refused Admin calls are logged as "admin_auth_failed" at most once per
// kAuthFailureLogInterval, with the count since the previous line, so a
// guessing client cannot flood the log.
//
// Thread-safety: every method is thread-safe.
#ifndef BREAKERD_SERVER_ADMIN_TOKEN_H_
#define BREAKERD_SERVER_ADMIN_TOKEN_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "server/cli/secret_file.h"
#include "server/engine/mutex.h"
#include "server/log/log_throttle.h"

namespace breakerd {

class AdminServiceImpl;

// At most one "admin_auth_failed" log line per this interval.
inline constexpr absl::Duration kAuthFailureLogInterval = absl::Seconds(1);

class AdminToken {
 public:
  // `path`: --admin-token-file; empty: Admin disabled.
  explicit AdminToken(std::string path);

  AdminToken(const AdminToken&) = delete;
  AdminToken& operator=(const AdminToken&) = delete;

  // Reads the file (nothing without one) and logs whether Admin is enabled.
  // The error of ReadSecretFile if the file is not a valid secret.
  absl::Status Load() ABSL_LOCKS_EXCLUDED(mu_);

  // The token read by Load(); nullopt without a file.
  const std::optional<std::string>& initial() const { return initial_; }

  // Re-reads the file (nothing without one), gives `admin` a changed valid
  // token, and warns about the file's mode if that changed to a shared one.
  // REQUIRES: Load() succeeded.
  void Reload(AdminServiceImpl* admin) ABSL_LOCKS_EXCLUDED(mu_);

  // A refused Admin call (`total`: refusals since start), logged as above.
  // `now_nanos`: a monotonic clock's reading.
  void OnAuthFailure(absl::string_view reason, uint64_t total,
                     int64_t now_nanos);

 private:
  const std::string path_;
  // Set by Load(), then only read.
  std::optional<std::string> initial_;
  // The file's last content (or read error) seen.
  Mutex mu_;
  std::string seen_ ABSL_GUARDED_BY(mu_);
  SecretFileModeCheck mode_check_ ABSL_GUARDED_BY(mu_);
  // The admin_auth_failed line.
  LogThrottle auth_log_{kAuthFailureLogInterval};
};

}  // namespace breakerd

#endif  // BREAKERD_SERVER_ADMIN_TOKEN_H_

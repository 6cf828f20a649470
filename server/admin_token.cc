#include "server/admin_token.h"

#include <utility>

#include "absl/status/statusor.h"
#include "server/cli/secret_file.h"
#include "server/log/json_log.h"
#include "server/service/admin_service.h"

namespace breakerd {
namespace {

constexpr absl::string_view kFlag = "admin-token-file";

}  // namespace

AdminToken::AdminToken(std::string path)
    : path_(std::move(path)), mode_check_(path_, std::string(kFlag)) {}

absl::Status AdminToken::Load() {
  if (path_.empty()) {
    LogEvent(
        LogLevel::kInfo, "admin_disabled",
        {{"reason", "no --admin-token-file: every Admin call is refused"}});
    return absl::OkStatus();
  }
  absl::StatusOr<std::string> token = ReadSecretFile(path_, kFlag);
  if (!token.ok()) return token.status();
  {
    MutexLock lock(&mu_);
    mode_check_.Check();
    seen_ = *token;
  }
  initial_ = *std::move(token);
  LogEvent(LogLevel::kInfo, "admin_enabled", {{"token_file", path_}});
  return absl::OkStatus();
}

void AdminToken::Reload(AdminServiceImpl* admin) {
  if (path_.empty()) return;
  MutexLock lock(&mu_);
  absl::StatusOr<std::string> token = ReadSecretFile(path_, kFlag);
  // Whether or not the token changed: a chmod changes only the mode.
  mode_check_.Check();
  const std::string seen =
      token.ok() ? *token : std::string(token.status().message());
  if (seen == seen_) return;
  seen_ = seen;
  if (!token.ok()) {
    LogEvent(
        LogLevel::kError, "admin_token_rejected",
        {{"error", token.status().message()}, {"kept", "the token in force"}});
    return;
  }
  admin->SetToken(*token);
  LogEvent(LogLevel::kInfo, "admin_token_reloaded", {{"token_file", path_}});
}

void AdminToken::OnAuthFailure(absl::string_view reason, uint64_t total,
                               int64_t now_nanos) {
  const std::optional<uint64_t> failures = auth_log_.Count(now_nanos);
  if (!failures.has_value()) return;
  LogEvent(LogLevel::kWarn, "admin_auth_failed",
           {{"failures", static_cast<int64_t>(*failures)},
            {"last_reason", reason},
            {"total", static_cast<int64_t>(total)}});
}

}  // namespace breakerd

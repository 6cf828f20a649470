// The policies breakerd starts on, and the last good config kept beside
// --state-file (FILE.last-good-config) for a start on an invalid --config.
//
// Without --config: the embedded defaults. With a valid --config: its
// policies, and a copy of the file is kept as the last good config. With an
// invalid one ("config_rejected" is logged): with --strict-config an error
// (breakerd exits with code 2); otherwise a policy typo must not take the
// pod down, so breakerd serves on the last good config, else the embedded
// defaults ("config_fallback", breakerd_config_valid 0) until the file is
// fixed. "config_loaded" says what was loaded.
#ifndef BREAKERD_SERVER_STARTUP_CONFIG_H_
#define BREAKERD_SERVER_STARTUP_CONFIG_H_

#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "server/config/config.h"

namespace breakerd {

// The last config applied, kept beside --state-file.
inline constexpr absl::string_view kLastGoodConfigSuffix = ".last-good-config";

struct StartupConfig {
  std::shared_ptr<const PolicySet> policies;
  // What --config held, valid or not, or the error reading it (nullopt
  // without --config): the reloader counts it as seen, so an invalid or
  // missing file is reported once and tried again as soon as it changes.
  std::optional<absl::StatusOr<std::string>> content;
  // False when serving on a fallback (breakerd_config_valid).
  bool valid = true;
};

// As above. INVALID_ARGUMENT only for an invalid --config with `strict`.
// `state_file` empty: no last good config is read or kept.
absl::StatusOr<StartupConfig> LoadStartupConfig(const std::string& config_path,
                                                bool strict,
                                                const std::string& state_file);

// Keeps `content` (a config just applied) as the last good config beside
// `state_file` (nothing if it is empty); a failed write is logged.
void SaveLastGoodConfig(const std::string& state_file,
                        absl::string_view content);

// Logs a reload attempt: "config_reloaded" or "config_rejected".
void LogReload(const ReloadEvent& e);

}  // namespace breakerd

#endif  // BREAKERD_SERVER_STARTUP_CONFIG_H_

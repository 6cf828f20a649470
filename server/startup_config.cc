#include "server/startup_config.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "server/log/json_log.h"
#include "server/state/state_file.h"

namespace breakerd {
namespace {

std::string LastGoodConfigPath(const std::string& state_file) {
  return state_file.empty() ? std::string()
                            : absl::StrCat(state_file, kLastGoodConfigSuffix);
}

// An invalid --config at start (not strict): the last good config, else the
// embedded defaults.
std::shared_ptr<const PolicySet> FallbackConfig(const std::string& config_path,
                                                const std::string& state_file) {
  const std::string last_good = LastGoodConfigPath(state_file);
  if (!last_good.empty()) {
    absl::StatusOr<std::shared_ptr<const PolicySet>> saved =
        LoadConfigFile(last_good);
    if (saved.ok()) {
      LogEvent(LogLevel::kError, "config_fallback",
               {{"source", config_path},
                {"using", last_good},
                {"reason",
                 "the config file is invalid; serving on the last "
                 "good config until it is fixed"}});
      return *std::move(saved);
    }
    if (!absl::IsNotFound(saved.status())) {
      LogEvent(LogLevel::kWarn, "last_good_config_skipped",
               {{"path", last_good}, {"error", saved.status().message()}});
    }
  }
  LogEvent(LogLevel::kError, "config_fallback",
           {{"source", config_path},
            {"using", "embedded defaults"},
            {"reason",
             "the config file is invalid and no last good config is "
             "kept; serving on the embedded defaults until it is "
             "fixed"}});
  return EmbeddedDefaults();
}

}  // namespace

absl::StatusOr<StartupConfig> LoadStartupConfig(const std::string& config_path,
                                                bool strict,
                                                const std::string& state_file) {
  StartupConfig config;
  if (config_path.empty()) {
    config.policies = EmbeddedDefaults();
  } else {
    absl::StatusOr<std::string> text = ReadConfigFile(config_path);
    absl::StatusOr<std::shared_ptr<const PolicySet>> parsed =
        text.ok()
            ? ParseConfig(*text, config_path)
            : absl::StatusOr<std::shared_ptr<const PolicySet>>(text.status());
    config.content = text;
    if (parsed.ok()) {
      config.policies = *std::move(parsed);
      SaveLastGoodConfig(state_file, *text);
    } else {
      LogEvent(LogLevel::kError, "config_rejected",
               {{"source", config_path},
                {"trigger", "startup"},
                {"error", parsed.status().message()}});
      if (strict) {
        return absl::InvalidArgumentError(absl::StrCat(
            "config ", config_path,
            " is invalid and --strict-config is set: exiting (without it "
            "breakerd would serve on the last good config or the embedded "
            "defaults)"));
      }
      config.valid = false;
      config.policies = FallbackConfig(config_path, state_file);
    }
  }
  const PolicySet& p = *config.policies;
  LogEvent(LogLevel::kInfo, "config_loaded",
           {{"source", p.source},
            {"valid", config.valid},
            {"policies", p.policies.size()},
            {"max_breakers", p.limits.max_breakers},
            {"idle_ttl_ms", absl::ToInt64Milliseconds(p.limits.idle_ttl)}});
  return config;
}

void SaveLastGoodConfig(const std::string& state_file,
                        absl::string_view content) {
  const std::string path = LastGoodConfigPath(state_file);
  if (path.empty()) return;
  if (absl::Status s = WriteFileAtomically(path, content); !s.ok()) {
    LogEvent(LogLevel::kWarn, "last_good_config_not_saved",
             {{"path", path}, {"error", s.message()}});
  }
}

void LogReload(const ReloadEvent& e) {
  if (e.ok) {
    LogEvent(LogLevel::kInfo, "config_reloaded",
             {{"source", e.source},
              {"trigger", e.trigger},
              {"policies", e.policies}});
  } else {
    LogEvent(LogLevel::kError, "config_rejected",
             {{"source", e.source},
              {"trigger", e.trigger},
              {"error", e.error},
              {"policies_in_force", e.policies}});
  }
}

}  // namespace breakerd

#include "server/server_options.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "server/listeners.h"

namespace breakerd {

int ExitCodeFor(const absl::Status& error) {
  if (error.ok()) return kExitOk;
  return absl::IsUnavailable(error) ? kExitRuntimeError : kExitConfigError;
}

absl::StatusOr<RedisOptions> FleetRedisOptions(const ServerOptions& options) {
  RedisOptions redis;
  if (absl::Status s = ParseRedisAddress(options.redis, &redis); !s.ok()) {
    return s;
  }
  redis.username = options.redis_username;
  redis.db = options.redis_db;
  redis.key_prefix = options.redis_key_prefix;
  redis.timeout = options.redis_timeout;
  if (absl::Status s = ValidateRedisOptions(redis); !s.ok()) return s;
  return redis;
}

absl::Status ValidateServerOptions(const ServerOptions& options) {
  if (options.listen.empty()) {
    return absl::InvalidArgumentError(
        "listen: at least one address is required");
  }
  for (const std::string& address : options.listen) {
    if (absl::StatusOr<Listener> l = ParseListener(address); !l.ok()) {
      return l.status();
    }
  }
  if (absl::StatusOr<HostPort> hp =
          ParseHostPort(options.metrics_listen, "metrics-listen");
      !hp.ok()) {
    return hp.status();
  }
  const std::pair<const char*, int> limits[] = {
      {"max-message-bytes", options.max_message_bytes},
      {"max-watch-streams", options.max_watch_streams},
      {"watch-queue", options.watch_queue},
      {"read-all-breakers-per-second", options.read_all_breakers_per_second},
  };
  for (const auto& [name, value] : limits) {
    if (value < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, ": must be at least 1 (got ", value, ")"));
    }
  }
  const std::pair<const char*, absl::Duration> durations[] = {
      {"config-poll-interval", options.config_poll_interval},
      {"evict-interval", options.evict_interval},
      {"shutdown-grace", options.shutdown_grace},
      {"state-stale-after", options.state_stale_after},
      {"redis-timeout", options.redis_timeout},
      {"fleet-sync-interval", options.fleet_sync_interval},
  };
  for (const auto& [name, value] : durations) {
    if (value < absl::ZeroDuration() || value == absl::InfiniteDuration()) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, ": must be a finite duration >= 0 (got ",
                       absl::FormatDuration(value), ")"));
    }
  }
  if (options.fleet_sync_interval < absl::Milliseconds(10)) {
    return absl::InvalidArgumentError(
        absl::StrCat("fleet-sync-interval: must be at least 10ms (got ",
                     absl::FormatDuration(options.fleet_sync_interval), ")"));
  }
  if (!options.trace_file.empty() && options.trace_max_bytes <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "trace-max-bytes: must be positive with --trace-file (got ",
        options.trace_max_bytes, ")"));
  }
  if (options.unix_socket_mode > 0777) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "unix-socket-mode: want octal permission bits 000..777 (got \"%o\")",
        options.unix_socket_mode));
  }
  if (!options.redis_username.empty() && options.redis_password_file.empty()) {
    return absl::InvalidArgumentError(
        "redis-username: needs --redis-password-file (AUTH takes the user's "
        "password)");
  }
  if (!options.redis.empty()) {
    if (absl::StatusOr<RedisOptions> redis = FleetRedisOptions(options);
        !redis.ok()) {
      return redis.status();
    }
  }
  return absl::OkStatus();
}

}  // namespace breakerd

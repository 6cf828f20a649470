// ServerOptions: everything the breakerd process is told on its command line
// (main.cc turns flags into them), the one place they are checked, and the
// process exit codes.
#ifndef BREAKERD_SERVER_SERVER_OPTIONS_H_
#define BREAKERD_SERVER_SERVER_OPTIONS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/fleet/redis_store.h"
#include "server/metrics/dependency_label.h"

namespace breakerd {

// Process exit codes.
inline constexpr int kExitOk = 0;            // clean shutdown
inline constexpr int kExitRuntimeError = 1;  // cannot bind or start a server
inline constexpr int kExitConfigError = 2;   // bad flags, config or token file

// The exit code for a failed startup step: kExitRuntimeError for
// UNAVAILABLE (cannot bind, listen or start), kExitConfigError for any
// other error (bad options, config, token or password file).
int ExitCodeFor(const absl::Status& error);

struct ServerOptions {
  // YAML policy file. Empty: the embedded defaults apply and SIGHUP has
  // nothing to reload.
  std::string config_path;
  // An invalid config_path at start: false (default) runs on the last good
  // config (kept beside state_file) or the embedded defaults, with
  // breakerd_config_valid 0; true exits with kExitConfigError.
  bool strict_config = false;
  // gRPC listen addresses: "host:port" (IPv6 as "[::1]:port") or
  // "unix:/path/to.sock". Port 0 picks a free port. Must not be empty.
  std::vector<std::string> listen = {"127.0.0.1:50051"};
  // HTTP address for /metrics, /healthz and /readyz ("host:port"; port 0
  // picks a free port).
  std::string metrics_listen = "0.0.0.0:9464";
  // What /metrics puts in the dependency label: the name (default), its
  // hash, or nothing (sums over every dependency); families.h.
  DependencyLabel metrics_dependency_label = DependencyLabel::kName;
  // File holding the Admin bearer token (surrounding whitespace trimmed; an
  // empty token is an error). Empty path: the Admin service refuses every
  // call.
  std::string admin_token_file;
  // How often the config file is checked for changes; zero disables polling
  // (SIGHUP still reloads).
  absl::Duration config_poll_interval = absl::Seconds(2);
  // How often idle breakers are evicted; zero disables eviction.
  absl::Duration evict_interval = absl::Seconds(30);
  // How long in-flight calls may run after SIGTERM before they are cancelled.
  absl::Duration shutdown_grace = absl::Seconds(10);
  // Where accepted Reports are traced (JSON Lines); empty: no trace.
  std::string trace_file;
  // Bound on the trace file's size, in bytes (fits the 16Mi emptyDir of
  // the Kubernetes manifests).
  int64_t trace_max_bytes = int64_t{8} << 20;
  // Reported in the serving line and breakerd_build_info.
  std::string version = "dev";
  // Where breakers that are not plain closed are written on shutdown (and
  // whenever an operator override changes) and read back on start; the last
  // good config is kept beside it (state_file + kLastGoodConfigSuffix).
  // Empty: none.
  std::string state_file;
  // Open entries of the state file whose cooldown ended longer ago than
  // this are skipped.
  absl::Duration state_stale_after = absl::Minutes(10);
  // Largest request message accepted, in bytes (a bigger one is refused
  // with RESOURCE_EXHAUSTED naming the limit). The largest legitimate
  // request (a Watch naming 64 dependencies of 200 bytes) is ~13 KiB.
  int max_message_bytes = 64 << 10;
  // Most concurrent Watch streams, and most transitions queued for one
  // stream before it is ended as too slow (RESOURCE_EXHAUSTED).
  int max_watch_streams = 1024;
  int watch_queue = 1024;
  // Breakers read per second by ListStates and Watch of every dependency
  // (ReadLimiter).
  int read_all_breakers_per_second = 50000;
  // Permission bits given to unix-socket listeners once bound: owner and
  // group may connect (the application's container shares the group).
  uint32_t unix_socket_mode = 0660;
  // Fleet mode: "host:port" of the Redis shared by the fleet; empty: off.
  std::string redis;
  // File holding the Redis password (trimmed); empty: no AUTH.
  std::string redis_password_file;
  // The Redis ACL user to AUTH as (with the password); empty: the default
  // user. REQUIRES a redis_password_file.
  std::string redis_username;
  int redis_db = 0;
  std::string redis_key_prefix = "breakerd:";
  // How often the fleet thread heartbeats (breakerd_fleet_members; a member
  // silent for 4 intervals drops out).
  absl::Duration fleet_sync_interval = absl::Milliseconds(250);
  // Connect and per-command timeout of every Redis call.
  absl::Duration redis_timeout = absl::Milliseconds(50);
};

// OK, or INVALID_ARGUMENT naming the first option (by its flag name) that
// breaks its rule: no listen address; an address that does not parse
// (ParseListener, ParseHostPort); a limit below 1; a duration negative or
// infinite; trace_max_bytes not positive with a trace file; unix_socket_mode
// past 0777; with `redis`, Redis options that ValidateRedisOptions refuses.
// Reads no file.
absl::Status ValidateServerOptions(const ServerOptions& options);

// The Redis options of fleet mode (address, db, key prefix, timeout; the
// password is read from its file at start), checked: INVALID_ARGUMENT as
// ValidateRedisOptions. REQUIRES: !options.redis.empty().
absl::StatusOr<RedisOptions> FleetRedisOptions(const ServerOptions& options);

}  // namespace breakerd

#endif  // BREAKERD_SERVER_SERVER_OPTIONS_H_

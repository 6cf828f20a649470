// breakerd: the circuit-breaker sidecar. Flags -> ServerOptions ->
// ServerRunner.
//
// Flag names are documented with dashes (--metrics-listen); Abseil flags are
// C identifiers, so dashes in a flag name are turned into underscores before
// parsing and both spellings work. `breakerd --help` prints our own flag list
// (Abseil's default --help would list none of them, since they are not
// defined in a file named after the binary); --helpfull prints Abseil's full
// list, with underscores.
#include <sys/prctl.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/reflection.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "server/cli/flag_help.h"
#include "server/config/config.h"
#include "server/log/json_log.h"
#include "server/metrics/dependency_label.h"
#include "server/server_runner.h"

#ifndef BREAKERD_VERSION
#define BREAKERD_VERSION "dev"
#endif

ABSL_FLAG(std::string, config, "",
          "YAML policy file (defaults, policies, limits). Reloaded on SIGHUP "
          "and when its content changes (a bad new file is refused whole and "
          "the old config stays). Without it the embedded defaults apply. An "
          "invalid file at startup is logged and breakerd serves on the last "
          "good config (kept beside --state-file) or the embedded defaults, "
          "with breakerd_config_valid 0, unless --strict-config.");
ABSL_FLAG(bool, strict_config, false,
          "Exit with code 2 when --config is invalid at startup, instead of "
          "serving on the last good config or the embedded defaults.");
ABSL_FLAG(std::string, check_config, "",
          "Validate this config file, print every error (one per line, "
          "FILE:LINE: key: rule) or a summary, and exit: 0 valid, 2 invalid. "
          "Starts nothing; use it in CI before a ConfigMap ships.");
ABSL_FLAG(std::vector<std::string>, listen, {"127.0.0.1:50051"},
          "Comma-separated gRPC listen addresses: host:port ([::1]:port for "
          "IPv6) or unix:/path/to.sock. Port 0 picks a free port; the "
          "`serving` log line reports the ports bound.");
ABSL_FLAG(std::string, metrics_listen, "0.0.0.0:9464",
          "host:port of the HTTP endpoint serving /metrics (Prometheus), "
          "/healthz (liveness) and /readyz (readiness: 503 while starting or "
          "shutting down). Port 0 picks a free port.");
ABSL_FLAG(std::string, metrics_dependency_label, "name",
          "What /metrics puts in the dependency label of the per-breaker "
          "families: name (the dependency name), hash (\"h\" and 16 hex "
          "digits of FNV-1a 64 of the name: the same in every process, so "
          "dashboards and alerts still work per dependency while names stay "
          "private; `breakerctl hash-label NAME` prints it), or omit (no "
          "dependency label: counters and histograms summed over every "
          "dependency, breakerd_state and breakerd_failure_rate not "
          "exported).");
ABSL_FLAG(std::string, admin_token_file, "",
          "File holding the bearer token for the Admin service (ForceOpen, "
          "ForceClose, Reset); surrounding whitespace is trimmed and an empty "
          "file is an error. Re-read at every --config-poll-interval and on "
          "SIGHUP, so a rotated Secret takes effect without a restart (a bad "
          "new file is logged and the token in force stays). Without it the "
          "Admin service refuses every call.");
ABSL_FLAG(absl::Duration, config_poll_interval, absl::Seconds(2),
          "How often --config and --admin-token-file are checked for changed "
          "content (Kubernetes ConfigMap and Secret updates). 0 disables "
          "polling; SIGHUP still re-reads both.");
ABSL_FLAG(absl::Duration, evict_interval, absl::Seconds(30),
          "How often idle breakers (closed, no history, idle for "
          "limits.idle_ttl) are removed. 0 disables eviction.");
ABSL_FLAG(std::string, trace_file, "",
          "Append every accepted Report to this file as JSON Lines, in the "
          "trace format `breakerctl simulate --trace` replays. Off when "
          "empty.");
ABSL_FLAG(int64_t, trace_max_bytes, int64_t{8} << 20,
          "Largest size of --trace-file in bytes; once reached, further "
          "records are dropped.");
ABSL_FLAG(absl::Duration, shutdown_grace, absl::Seconds(10),
          "On SIGTERM/SIGINT: how long in-flight calls may finish before "
          "they are cancelled. Watch streams end at once.");

ABSL_FLAG(int, max_message_bytes, 64 << 10,
          "Largest gRPC request accepted, in bytes; a bigger one is refused "
          "with RESOURCE_EXHAUSTED.");
ABSL_FLAG(int, max_watch_streams, 1024,
          "Most concurrent Watch streams; one more is refused with "
          "RESOURCE_EXHAUSTED.");
ABSL_FLAG(int, watch_queue, 1024,
          "Most transitions queued for one Watch stream whose client reads "
          "too slowly; past it the stream ends with RESOURCE_EXHAUSTED.");
ABSL_FLAG(int, read_all_breakers_per_second, 50000,
          "Breakers read per second, on average, by calls that read every "
          "breaker (ListStates, Watch of every dependency); past it they "
          "get RESOURCE_EXHAUSTED with a time to retry, so that they cannot "
          "take the CPU that other callers' Acquire needs.");
ABSL_FLAG(std::string, unix_socket_mode, "0660",
          "Permission bits (octal) of unix-socket listeners: who may call "
          "breakerd through the socket (owner and group by default).");
ABSL_FLAG(std::string, state_file, "",
          "Write every breaker that is not plain closed (open with its "
          "cooldown end and escalation, forced overrides) to this file, "
          "atomically: on shutdown, before an Admin override answers, and "
          "within a second of any open or close; on start, read it back. A "
          "missing or corrupt file is logged and skipped; a file that is "
          "not a state file (another file named by mistake) is never "
          "written over, and no state is saved. The last good "
          "--config is kept beside it (FILE.last-good-config). Off when "
          "empty.");
ABSL_FLAG(absl::Duration, state_stale_after, absl::Minutes(10),
          "Skip --state-file entries whose cooldown ended longer ago than "
          "this.");
ABSL_FLAG(std::string, redis, "",
          "Fleet mode: host:port of the Redis the fleet shares. Opens "
          "propagate to every sidecar, and the half-open probe is claimed "
          "once for the whole fleet. Off when empty.");
ABSL_FLAG(std::string, redis_password_file, "",
          "File holding the Redis password (AUTH); surrounding whitespace "
          "trimmed.");
ABSL_FLAG(std::string, redis_username, "",
          "The Redis ACL user (Redis 6+) to authenticate as, with the "
          "password of --redis-password-file; give each fleet a user limited "
          "to its key prefix and channel (SECURITY.md). Empty: Redis's "
          "default user.");
ABSL_FLAG(int, redis_db, 0,
          "Redis database number for the fleet's keys; the fleet's pub/sub "
          "channel names it too (channels are server-wide), so fleets in "
          "different databases never hear each other.");
ABSL_FLAG(std::string, redis_key_prefix, "breakerd:",
          "Prefix of the fleet's Redis keys and channel; fleets sharing one "
          "Redis need distinct prefixes.");
ABSL_FLAG(absl::Duration, fleet_sync_interval, absl::Milliseconds(250),
          "Fleet mode: how often each sidecar heartbeats to the shared store "
          "(breakerd_fleet_members counts those heard from within 4 "
          "intervals, by Redis's clock). At least 10ms.");
ABSL_FLAG(absl::Duration, redis_timeout, absl::Milliseconds(50),
          "Connect and per-command timeout of every Redis call (all made off "
          "the request path).");

namespace {

constexpr char kUsage[] =
    "breakerd: a circuit-breaker sidecar. Applications ask it before each "
    "call to an upstream dependency (Acquire) and report how the call went "
    "(Report), over gRPC (breakerd.v1.Breaker).\n"
    "\n"
    "Usage: breakerd [flags]\n"
    "       breakerd --check-config FILE\n"
    "\n"
    "Signals: SIGHUP reloads --config; SIGTERM or SIGINT shuts down "
    "gracefully (exit code 0).\n"
    "Exit codes: 0 clean shutdown, 1 cannot listen or start, 2 bad flags "
    "or token file (or an invalid --config with --strict-config). "
    "--check-config: 0 valid, 2 invalid.\n"
    "Logs: one JSON object per line on stderr.";

// Our flags in the order --help lists them.
constexpr breakerd::FlagDoc kFlagDocs[] = {
    {"config", "PATH"},
    {"strict_config", "BOOL"},
    {"check_config", "FILE"},
    {"listen", "ADDR[,ADDR...]"},
    {"metrics_listen", "HOST:PORT"},
    {"metrics_dependency_label", "name|hash|omit"},
    {"admin_token_file", "PATH"},
    {"config_poll_interval", "DURATION"},
    {"evict_interval", "DURATION"},
    {"shutdown_grace", "DURATION"},
    {"trace_file", "PATH"},
    {"trace_max_bytes", "BYTES"},
    {"max_message_bytes", "BYTES"},
    {"max_watch_streams", "N"},
    {"watch_queue", "N"},
    {"read_all_breakers_per_second", "N"},
    {"unix_socket_mode", "OCTAL"},
    {"state_file", "PATH"},
    {"state_stale_after", "DURATION"},
    {"redis", "HOST:PORT"},
    {"redis_password_file", "PATH"},
    {"redis_username", "USER"},
    {"redis_db", "N"},
    {"redis_key_prefix", "PREFIX"},
    {"redis_timeout", "DURATION"},
    {"fleet_sync_interval", "DURATION"},
};

void PrintHelp(std::ostream& out) {
  breakerd::PrintUsage(out, kUsage);
  out << "\nFlags:\n";
  breakerd::PrintFlags(out, kFlagDocs);
  out << "\nDurations are written like 500ms, 2s, 1m30s. Flag names may use\n"
         "dashes or underscores.\n"
         "  --help       this text\n"
         "  --version    print the version and exit\n"
         "  --helpfull   every flag, including the Abseil library's\n";
}

// "--metrics-listen=x" -> "--metrics_listen=x"; leaves values and
// everything after a bare "--" alone.
std::vector<char*> NormalizeFlagNames(int argc, char** argv,
                                      std::vector<std::string>* storage) {
  storage->reserve(argc);
  std::vector<char*> out;
  bool flags_done = false;
  for (int i = 0; i < argc; ++i) {
    std::string arg = argv[i];
    if (i > 0 && !flags_done && arg == "--") flags_done = true;
    if (i > 0 && !flags_done && arg.size() > 1 && arg[0] == '-') {
      const size_t start = arg[1] == '-' ? 2 : 1;
      const size_t end = std::min(arg.find('='), arg.size());
      for (size_t k = start; k < end; ++k) {
        if (arg[k] == '-') arg[k] = '_';
      }
    }
    storage->push_back(std::move(arg));
  }
  for (std::string& s : *storage) out.push_back(s.data());
  return out;
}

bool WantsHelp(const std::vector<char*>& args) {
  for (size_t i = 1; i < args.size(); ++i) {
    const absl::string_view a = args[i];
    if (a == "--") break;
    if (a == "--help" || a == "-help" || a == "-h" || a == "--h" ||
        a == "--helpshort" || a == "-helpshort") {
      return true;
    }
  }
  return false;
}

bool IsOurFlagFile(absl::string_view filename) {
  return absl::EndsWith(filename, "server/main.cc");
}

int ConfigError(absl::string_view message) {
  breakerd::LogEvent(breakerd::LogLevel::kError, "startup_failed",
                     {{"error", message}});
  return breakerd::kExitConfigError;
}

// Flags of the Abseil library itself that breakerd accepts.
constexpr absl::string_view kLibraryFlags[] = {
    "helpfull",   "version", "flagfile",       "fromenv",
    "tryfromenv", "undefok", "only_check_args"};

// Checks every flag before Abseil parses them: Abseil exits with code 1 on
// an unknown flag or a bad value, and breakerd's contract for bad flags is
// code 2 with a log line naming the flag. Returns the first problem, or an
// empty string.
std::string CheckFlags(const std::vector<char*>& args) {
  for (size_t i = 1; i < args.size(); ++i) {
    absl::string_view arg = args[i];
    if (arg == "--") break;
    if (arg.size() < 2 || arg[0] != '-') continue;  // positional: main says
    arg.remove_prefix(arg[1] == '-' ? 2 : 1);
    const size_t eq = arg.find('=');
    const absl::string_view name = arg.substr(0, eq);
    const bool has_value = eq != absl::string_view::npos;
    if (std::find(std::begin(kLibraryFlags), std::end(kLibraryFlags), name) !=
        std::end(kLibraryFlags)) {
      continue;
    }
    absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
    bool negated = false;
    if ((flag == nullptr || !IsOurFlagFile(flag->Filename())) &&
        absl::StartsWith(name, "no")) {
      flag = absl::FindCommandLineFlag(name.substr(2));
      negated = true;
    }
    if (flag == nullptr || !IsOurFlagFile(flag->Filename())) {
      return absl::StrCat("--", breakerd::DashedFlagName(name),
                          ": unknown flag (see breakerd --help)");
    }
    const bool boolean = flag->IsOfType<bool>();
    if (negated && (!boolean || has_value)) {
      return absl::StrCat("--", breakerd::DashedFlagName(name),
                          ": unknown flag (see breakerd --help)");
    }
    std::string value;
    if (has_value) {
      value = std::string(arg.substr(eq + 1));
    } else if (boolean) {
      continue;
    } else if (i + 1 < args.size()) {
      value = args[++i];
    } else {
      return absl::StrCat("--", breakerd::DashedFlagName(name),
                          ": missing value");
    }
    // Sets the value as Abseil's parser does again next: a bad value is
    // caught here, with our exit code.
    std::string error;
    if (!flag->ParseFrom(value, &error)) {
      return absl::StrCat("--", breakerd::DashedFlagName(name), ": ", error,
                          flag->IsOfType<absl::Duration>()
                              ? " (a duration needs a unit: 500ms, 2s, 1m30s)"
                              : "");
    }
  }
  return std::string();
}

// breakerd --check-config FILE: every error, one per line, on stderr.
int CheckConfig(const std::string& path) {
  absl::StatusOr<std::shared_ptr<const breakerd::PolicySet>> set =
      breakerd::LoadConfigFile(path);
  if (!set.ok()) {
    const std::vector<std::string> errors =
        breakerd::ConfigErrorLines(set.status());
    for (const std::string& line : errors) std::cerr << line << "\n";
    std::cerr << path << ": invalid (" << errors.size()
              << (errors.size() == 1 ? " error" : " errors") << ")\n";
    return breakerd::kExitConfigError;
  }
  std::cout << path << ": valid (" << (*set)->policies.size()
            << ((*set)->policies.size() == 1 ? " policy" : " policies")
            << ", max_breakers " << (*set)->limits.max_breakers << ")\n";
  return breakerd::kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
  // Before anything can start a thread: every thread inherits the mask and
  // only the runner's signal thread takes these signals (sigwait).
  breakerd::BlockShutdownSignals();
  // No core dumps and no ptrace by other processes of the same user: the
  // process holds the admin token and the Redis password.
  prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);

  absl::SetProgramUsageMessage(kUsage);
  absl::FlagsUsageConfig usage_config;
  usage_config.contains_help_flags = &IsOurFlagFile;
  usage_config.contains_helpshort_flags = &IsOurFlagFile;
  usage_config.contains_helppackage_flags = &IsOurFlagFile;
  usage_config.version_string = [] {
    return std::string("breakerd " BREAKERD_VERSION "\n");
  };
  absl::SetFlagsUsageConfig(usage_config);

  std::vector<std::string> storage;
  std::vector<char*> args = NormalizeFlagNames(argc, argv, &storage);
  if (WantsHelp(args)) {
    PrintHelp(std::cout);
    return 0;
  }
  if (std::string problem = CheckFlags(args); !problem.empty()) {
    return ConfigError(problem);
  }
  std::vector<char*> positional =
      absl::ParseCommandLine(static_cast<int>(args.size()), args.data());
  if (const std::string path = absl::GetFlag(FLAGS_check_config);
      !path.empty()) {
    return CheckConfig(path);
  }
  if (positional.size() > 1) {
    std::vector<std::string> extra(positional.begin() + 1, positional.end());
    return ConfigError(
        absl::StrCat("unexpected argument(s): ", absl::StrJoin(extra, " "),
                     " (breakerd takes flags only; see --help)"));
  }

  breakerd::ServerOptions options;
  options.config_path = absl::GetFlag(FLAGS_config);
  options.strict_config = absl::GetFlag(FLAGS_strict_config);
  options.listen.clear();
  for (const std::string& raw : absl::GetFlag(FLAGS_listen)) {
    const absl::string_view address = absl::StripAsciiWhitespace(raw);
    if (!address.empty()) options.listen.emplace_back(address);
  }
  options.metrics_listen = std::string(
      absl::StripAsciiWhitespace(absl::GetFlag(FLAGS_metrics_listen)));
  {
    const std::string label = absl::GetFlag(FLAGS_metrics_dependency_label);
    const std::optional<breakerd::DependencyLabel> parsed =
        breakerd::ParseDependencyLabel(label);
    if (!parsed.has_value()) {
      return ConfigError(absl::StrCat("metrics-dependency-label: want one of ",
                                      breakerd::kDependencyLabelChoices,
                                      " (got \"", label, "\")"));
    }
    options.metrics_dependency_label = *parsed;
  }
  options.admin_token_file = absl::GetFlag(FLAGS_admin_token_file);
  options.config_poll_interval = absl::GetFlag(FLAGS_config_poll_interval);
  options.evict_interval = absl::GetFlag(FLAGS_evict_interval);
  options.shutdown_grace = absl::GetFlag(FLAGS_shutdown_grace);
  options.trace_file = absl::GetFlag(FLAGS_trace_file);
  options.trace_max_bytes = absl::GetFlag(FLAGS_trace_max_bytes);
  options.version = BREAKERD_VERSION;
  options.max_message_bytes = absl::GetFlag(FLAGS_max_message_bytes);
  options.max_watch_streams = absl::GetFlag(FLAGS_max_watch_streams);
  options.watch_queue = absl::GetFlag(FLAGS_watch_queue);
  options.read_all_breakers_per_second =
      absl::GetFlag(FLAGS_read_all_breakers_per_second);
  {
    // Octal digits only; the range is ValidateServerOptions'.
    const std::string mode = absl::GetFlag(FLAGS_unix_socket_mode);
    char* end = nullptr;
    const unsigned long bits = std::strtoul(mode.c_str(), &end, 8);
    if (mode.empty() || end == nullptr || *end != '\0' || bits > 07777) {
      return ConfigError(absl::StrCat(
          "unix-socket-mode: want an octal number (got \"", mode, "\")"));
    }
    options.unix_socket_mode = static_cast<uint32_t>(bits);
  }
  options.state_file = absl::GetFlag(FLAGS_state_file);
  options.state_stale_after = absl::GetFlag(FLAGS_state_stale_after);
  options.redis = absl::GetFlag(FLAGS_redis);
  options.redis_password_file = absl::GetFlag(FLAGS_redis_password_file);
  options.redis_username = absl::GetFlag(FLAGS_redis_username);
  options.redis_db = absl::GetFlag(FLAGS_redis_db);
  options.redis_key_prefix = absl::GetFlag(FLAGS_redis_key_prefix);
  options.redis_timeout = absl::GetFlag(FLAGS_redis_timeout);
  options.fleet_sync_interval = absl::GetFlag(FLAGS_fleet_sync_interval);

  // The runner checks every option (ValidateServerOptions) before it starts
  // anything, and maps a failed start to the exit code.
  breakerd::ServerRunner runner(std::move(options));
  return runner.Run();
}

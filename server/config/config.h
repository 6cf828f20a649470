// The configuration module: one YAML file (DESIGN.md, "Configuration") ->
// one immutable, validated PolicySet; and ConfigReloader, which re-applies a
// changed file to a running Registry.
//
// File format (every key optional; an empty file means the embedded
// defaults):
//
//   defaults:      the policy used when no entry of `policies` matches, and
//                  the base every entry of `policies` inherits from
//   policies:      a list of policies, first match wins; each needs `match`
//                  and inherits every key it leaves out from `defaults`,
//                  leaf by leaf (giving only failure_rate.threshold keeps
//                  the default failure_rate.min_calls and .window)
//   limits:        { max_breakers, idle_ttl, max_chains }
//
// Durations are strings with a unit: "250ms", "30s", "10m", "1h", "1.5s",
// "500us" (units ns, us, ms, s, m, h); bare numbers and negative values are
// refused. A key whose value is empty (`defaults:` with everything below it
// commented out) counts as an empty map or list; a leaf with no value is an
// error. deploy/config/breakerd.yaml lists every key with its default.
//
// Errors: a file with problems in its content is INVALID_ARGUMENT, and
// every problem in it is reported, not only the first: the message holds one
// line per error, in file order (by line, then column), each naming the
// source, the line (when known), the full key path and the rule, e.g.
//   /etc/breakerd/config.yaml:7: policies[0].failure_rate.threshold: must be
//   between 0 and 1 (got 1.5)
//   /etc/breakerd/config.yaml:12: limits.idle_ttl: needs a unit, ...
// Lines are joined by "\n" (a single error is a single line, with no "\n");
// control characters from the file are escaped so that an error never
// spans two lines. ConfigErrorLines splits them again. A problem is reported
// once: a key whose value is refused is not reported again by a rule that
// relates it to another key (cooldown.max >= cooldown.base), nor in the
// policies that inherit it from `defaults`; a map or list of the wrong shape
// is one error, not one per key it should have had. A YAML syntax error, or
// a stream of several documents, stops the parse: it is the only error.
// Nothing here throws.
//
// Thread-safety: the free functions are thread-safe (they share no state).
// ConfigReloader is thread-safe: see the class comment.
#ifndef BREAKERD_SERVER_CONFIG_CONFIG_H_
#define BREAKERD_SERVER_CONFIG_CONFIG_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "server/engine/mutex.h"
#include "server/engine/policy.h"
#include "server/engine/registry.h"

namespace breakerd {

// Config files larger than this are refused (a Kubernetes ConfigMap holds at
// most 1 MiB).
inline constexpr size_t kMaxConfigBytes = 4 << 20;

// Most errors one message lists; past it a last line says how many more.
inline constexpr size_t kMaxConfigErrors = 100;

// Longest `match` pattern accepted, in bytes.
inline constexpr size_t kMaxMatchLength = 200;

// Parses and validates `yaml_text`. `source` (usually the file path) names
// the origin in error messages and becomes PolicySet::source.
// Returns the policy set, or INVALID_ARGUMENT whose message is every error
// of the file, one a line in file order, each naming source, line, key path
// and rule (see "Errors" above). Empty text (or only comments) gives the
// embedded defaults.
absl::StatusOr<std::shared_ptr<const PolicySet>> ParseConfig(
    absl::string_view yaml_text, absl::string_view source);

// The errors in a status returned by ParseConfig, LoadConfigFile or
// ConfigReloader: its message split into lines, one error each, in file
// order. Empty for OK. A read error (ReadConfigFile) is one line.
std::vector<std::string> ConfigErrorLines(const absl::Status& status);

// Reads a config file, following symlinks. Returns its content, or:
// NOT_FOUND (no such file), PERMISSION_DENIED (unreadable), INVALID_ARGUMENT
// (not a regular file, or larger than kMaxConfigBytes), or another code
// derived from errno; every message names `path`.
absl::StatusOr<std::string> ReadConfigFile(const std::string& path);

// ReadConfigFile + ParseConfig: PolicySet::source is `path`. Returns the
// errors of either.
absl::StatusOr<std::shared_ptr<const PolicySet>> LoadConfigFile(
    const std::string& path);

// The built-in defaults of DESIGN.md: no policies, default limits, source
// "embedded defaults". Always the same (shared, immutable) object.
std::shared_ptr<const PolicySet> EmbeddedDefaults();

// What one reload attempt did; handed to ConfigReloader's callback, which
// typically logs it.
struct ReloadEvent {
  // True if the new file was applied.
  bool ok = false;
  // The config file path.
  std::string source;
  // Why the reload was refused (the status message); empty when ok.
  std::string error;
  // On success: the number of policies in the new set. On failure: the
  // number in the set still in force.
  size_t policies = 0;
  // What asked for the reload, as passed by the caller: "signal" (SIGHUP) or
  // "file_change" (ReloadIfChanged).
  std::string trigger;
  // On success: the text applied (kept as the last good config); empty on
  // failure.
  std::string content;
};

// Re-reads the config file and applies it to a Registry (existing breakers
// keep their state, counters, escalation and generation: see
// Registry::ApplyPolicies). A file that cannot be read or does not validate
// is refused whole: the policies in force stay, the callback is told and
// failures() goes up.
//
// Change detection compares the file's whole content, not its mtime or
// inode: a Kubernetes ConfigMap mount swaps a `..data` symlink, so the path
// keeps resolving through symlinks to a new file with a possibly older
// mtime. Content is small (<= kMaxConfigBytes), so it is kept as is rather
// than hashed.
//
// Typical use in main:
//   absl::StatusOr<std::string> text = ReadConfigFile(path);
//   absl::StatusOr<std::shared_ptr<const PolicySet>> set =
//       ParseConfig(*text, path);
//   Registry registry(*set, clock);
//   ConfigReloader reloader(path, &registry, LogReload, *text);
//   // SIGHUP: reloader.Reload("signal");  every few seconds:
//   // reloader.ReloadIfChanged();
//
// Thread-safety: every method is thread-safe. Reloads are serialized: one
// attempt (read, parse, apply, callback) runs at a time, so events reach the
// callback in the order the registry saw the sets.
class ConfigReloader {
 public:
  using Callback = std::function<void(const ReloadEvent&)>;

  // `path`: the config file (symlinks are followed at every read).
  // `registry`: where new sets are applied. REQUIRES: non-null, outlives
  // the reloader.
  // `callback`: told of every reload attempt (success or refusal), called
  // with the reloader's lock held. May be empty. REQUIRES: thread-safe,
  // does not call back into this reloader.
  // `loaded`: what the file held when the policies in force were chosen
  // (its content, or the error reading it: a file missing at start), so
  // that ReloadIfChanged does not try the same content or error again.
  // Pass std::nullopt if unknown: the first ReloadIfChanged then applies
  // whatever the file holds.
  ConfigReloader(std::string path, Registry* registry, Callback callback,
                 std::optional<absl::StatusOr<std::string>> loaded);

  ConfigReloader(const ConfigReloader&) = delete;
  ConfigReloader& operator=(const ConfigReloader&) = delete;

  // Reads and parses the file now, whatever its content, and on success
  // applies it to the registry. `trigger` is copied into the event.
  // Returns OK if applied; otherwise the read or parse error (see
  // ReadConfigFile, ParseConfig), with nothing changed.
  absl::Status Reload(absl::string_view trigger) ABSL_LOCKS_EXCLUDED(mu_);

  // Reads the file and, only if what it reads differs from what the last
  // attempt read (content, or the read error), behaves like
  // Reload("file_change"). So a bad file is refused (and reported) once,
  // not at every poll, and tried again as soon as it changes.
  // Returns OK when nothing changed; otherwise what Reload returns.
  absl::Status ReloadIfChanged() ABSL_LOCKS_EXCLUDED(mu_);

  // Reloads applied / refused since construction.
  uint64_t successes() const {
    return successes_.load(std::memory_order_relaxed);
  }
  uint64_t failures() const {
    return failures_.load(std::memory_order_relaxed);
  }

  const std::string& path() const { return path_; }

 private:
  // Parses `read` (a ReadConfigFile result), applies it on success, records
  // it as the last observation and tells the callback.
  absl::Status Attempt(const absl::StatusOr<std::string>& read,
                       absl::string_view trigger)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Constant after construction.
  const std::string path_;
  Registry* const registry_;
  const Callback callback_;

  Mutex mu_;
  // What the last attempt read: the content, or the read error's message
  // (exactly one is set; neither before the first attempt when the initial
  // content is unknown).
  std::optional<std::string> last_content_ ABSL_GUARDED_BY(mu_);
  std::optional<std::string> last_read_error_ ABSL_GUARDED_BY(mu_);

  std::atomic<uint64_t> successes_{0};
  std::atomic<uint64_t> failures_{0};
};

}  // namespace breakerd

#endif  // BREAKERD_SERVER_CONFIG_CONFIG_H_

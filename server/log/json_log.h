// Structured logging: one JSON object per line on stderr, so a log collector
// (Kubernetes, journald, Loki) can parse every line without a grammar.
//
// Every line starts with the same three keys, then the event's own fields in
// the order given:
//   {"ts":"2024-05-01T12:00:00.123Z","level":"info","event":"serving",...}
// `ts` is wall-clock UTC (RFC 3339, milliseconds); it is for humans and
// collectors only, never for the engine's decisions.
//
// Never pass a secret (admin token, credential) as a field value: the log
// has no redaction.
//
// Thread-safety: every function and class here is thread-safe. Each line is
// formatted first and then written with a single write(2) under a process-wide
// mutex, so lines from concurrent threads never interleave.
#ifndef BREAKERD_SERVER_LOG_JSON_LOG_H_
#define BREAKERD_SERVER_LOG_JSON_LOG_H_

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <string>
#include <type_traits>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "server/engine/registry.h"

namespace breakerd {

enum class LogLevel { kDebug, kInfo, kWarn, kError };

// "debug", "info", "warn", "error".
absl::string_view LogLevelName(LogLevel level);

// One key/value pair of a log line. The value is rendered to JSON text when
// the field is built, so a field can hold a view of a temporary.
class LogField {
 public:
  LogField(absl::string_view key, absl::string_view value);
  LogField(absl::string_view key, const char* value)
      : LogField(key, absl::string_view(value == nullptr ? "" : value)) {}
  LogField(absl::string_view key, const std::string& value)
      : LogField(key, absl::string_view(value)) {}
  LogField(absl::string_view key, bool value);
  LogField(absl::string_view key, double value);  // non-finite -> null
  template <typename Int,
            typename std::enable_if<std::is_integral<Int>::value &&
                                        !std::is_same<Int, bool>::value,
                                    int>::type = 0>
  LogField(absl::string_view key, Int value)
      : key_(key), json_(std::to_string(value)) {}

  absl::string_view key() const { return key_; }
  // The value as JSON text (a quoted string, a number, true/false, null).
  const std::string& json() const { return json_; }

 private:
  absl::string_view key_;
  std::string json_;
};

// Appends `text` to `out` as a JSON string literal, quotes included.
// Escapes '"', '\\' and every control character; invalid UTF-8 bytes become
// U+FFFD, so the line is always valid JSON whatever the input.
void AppendJsonString(absl::string_view text, std::string* out);

// The text of errno value `err` (thread-safe strerror), for the error
// fields of log lines and the messages of errors that are logged.
std::string ErrnoText(int err);

// Formats one line (with the trailing '\n') for wall-clock instant `ts`.
std::string FormatLogLine(absl::Time ts, LogLevel level,
                          absl::string_view event,
                          std::initializer_list<LogField> fields);

// Formats a line stamped now and writes it to the current writer (stderr by
// default).
void LogEvent(LogLevel level, absl::string_view event,
              std::initializer_list<LogField> fields = {});

// Replaces where lines go; an empty function restores stderr. Returns the
// previous writer. Meant for tests; the writer is called under the logging
// mutex, one complete line per call, and must not log.
using LogWriter = std::function<void(absl::string_view line)>;
LogWriter SetLogWriterForTesting(LogWriter writer);

// Logs every breaker transition as event "transition": dependency, from, to,
// reason, generation, retry_after_ms, escalation_level, consecutive_failures,
// window_calls, window_failures, window_slow. Level "warn" when a breaker
// opens (or is forced open), "info" otherwise.
//
// Thread-safety: OnTransition may be called from any thread concurrently.
class TransitionLogger final : public TransitionObserver {
 public:
  void OnTransition(const Transition& t) override;
};

}  // namespace breakerd

#endif  // BREAKERD_SERVER_LOG_JSON_LOG_H_

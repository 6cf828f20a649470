#include "server/log/json_log.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

#include <cmath>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "server/engine/mutex.h"
#include "server/engine/types.h"

namespace breakerd {
namespace {

struct Output {
  // breakerd::Mutex, not absl::Mutex: ThreadSanitizer builds must see this
  // lock (server/engine/mutex.h).
  Mutex mu;
  // Empty: stderr.
  LogWriter writer ABSL_GUARDED_BY(mu);
};

// Never destroyed, so logging from static destructors or exiting threads
// stays safe.
Output& GetOutput() {
  static Output* const output = new Output();
  return *output;
}

void WriteToStderr(absl::string_view line) {
  const char* p = line.data();
  size_t left = line.size();
  while (left > 0) {
    ssize_t n = ::write(STDERR_FILENO, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      return;  // nowhere left to report it
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
}

// Length of the valid UTF-8 sequence starting at s[i], or 0 if invalid
// (overlong forms, surrogates and values past U+10FFFF are invalid).
size_t Utf8SequenceLength(absl::string_view s, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = byte(i);
  size_t len;
  unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (c >= 0xC2 && c <= 0xDF) {
    len = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    len = 3;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    len = 4;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  if (i + len > s.size()) return 0;
  if (byte(i + 1) < lo || byte(i + 1) > hi) return 0;
  for (size_t k = 2; k < len; ++k) {
    if (byte(i + k) < 0x80 || byte(i + k) > 0xBF) return 0;
  }
  return len;
}

}  // namespace

std::string ErrnoText(int err) {
  char buf[256];
  // GNU strerror_r returns the message (possibly not in buf).
  return std::string(strerror_r(err, buf, sizeof(buf)));
}

absl::string_view LogLevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug:
      return "debug";
    case LogLevel::kInfo:
      return "info";
    case LogLevel::kWarn:
      return "warn";
    case LogLevel::kError:
      return "error";
  }
  return "info";
}

void AppendJsonString(absl::string_view text, std::string* out) {
  static constexpr char kHex[] = "0123456789abcdef";
  out->push_back('"');
  size_t i = 0;
  while (i < text.size()) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c >= 0x80) {
      const size_t len = Utf8SequenceLength(text, i);
      if (len == 0) {
        out->append("\\ufffd");
        ++i;
      } else {
        out->append(text.data() + i, len);
        i += len;
      }
      continue;
    }
    switch (c) {
      case '"':
        out->append("\\\"");
        break;
      case '\\':
        out->append("\\\\");
        break;
      case '\n':
        out->append("\\n");
        break;
      case '\r':
        out->append("\\r");
        break;
      case '\t':
        out->append("\\t");
        break;
      case '\b':
        out->append("\\b");
        break;
      case '\f':
        out->append("\\f");
        break;
      default:
        if (c < 0x20 || c == 0x7F) {
          out->append("\\u00");
          out->push_back(kHex[c >> 4]);
          out->push_back(kHex[c & 0xF]);
        } else {
          out->push_back(static_cast<char>(c));
        }
    }
    ++i;
  }
  out->push_back('"');
}

LogField::LogField(absl::string_view key, absl::string_view value) : key_(key) {
  AppendJsonString(value, &json_);
}

LogField::LogField(absl::string_view key, bool value)
    : key_(key), json_(value ? "true" : "false") {}

LogField::LogField(absl::string_view key, double value)
    : key_(key), json_(std::isfinite(value) ? absl::StrCat(value) : "null") {}

std::string FormatLogLine(absl::Time ts, LogLevel level,
                          absl::string_view event,
                          std::initializer_list<LogField> fields) {
  std::string line;
  line.reserve(128);
  line.append("{\"ts\":\"");
  line.append(
      absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", ts, absl::UTCTimeZone()));
  line.append("\",\"level\":\"");
  line.append(LogLevelName(level).data(), LogLevelName(level).size());
  line.append("\",\"event\":");
  AppendJsonString(event, &line);
  for (const LogField& f : fields) {
    line.push_back(',');
    AppendJsonString(f.key(), &line);
    line.push_back(':');
    line.append(f.json());
  }
  line.append("}\n");
  return line;
}

void LogEvent(LogLevel level, absl::string_view event,
              std::initializer_list<LogField> fields) {
  const std::string line = FormatLogLine(absl::Now(), level, event, fields);
  Output& out = GetOutput();
  MutexLock lock(&out.mu);
  if (out.writer) {
    out.writer(line);
  } else {
    WriteToStderr(line);
  }
}

LogWriter SetLogWriterForTesting(LogWriter writer) {
  Output& out = GetOutput();
  MutexLock lock(&out.mu);
  return std::exchange(out.writer, std::move(writer));
}

void TransitionLogger::OnTransition(const Transition& t) {
  if (t.reason == TransitionReason::kReload) {
    LogEvent(LogLevel::kInfo, "mode_changed",
             {{"dependency", t.dependency},
              {"mode", ModeName(t.shadow)},
              {"state", StateName(t.to)},
              {"generation", t.generation}});
    return;
  }
  // Created, evicted, ramp done: for Watch clients, not the log.
  if (!IsStateChange(t.reason)) return;
  const bool opening = t.to == State::kOpen || t.to == State::kForcedOpen;
  LogEvent(opening ? LogLevel::kWarn : LogLevel::kInfo, "transition",
           {
               {"dependency", t.dependency},
               {"from", StateName(t.from)},
               {"to", StateName(t.to)},
               {"reason", TransitionReasonName(t.reason)},
               {"mode", ModeName(t.shadow)},
               {"generation", t.generation},
               {"retry_after_ms", absl::ToInt64Milliseconds(t.retry_after)},
               {"escalation_level", t.escalation_level},
               {"consecutive_failures", t.consecutive_failures},
               {"window_calls", t.window.calls},
               {"window_failures", t.window.failures},
               {"window_slow", t.window.slow},
           });
}

}  // namespace breakerd

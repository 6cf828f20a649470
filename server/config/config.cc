#include "server/config/config.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <exception>
#include <initializer_list>
#include <map>
#include <set>
#include <sstream>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "server/config/yaml_events.h"
#include "server/engine/dependency_name.h"
#include "yaml-cpp/yaml.h"

namespace breakerd {
namespace {

// ---------------------------------------------------------------------------
// Error reporting

// `text` with its control characters written as C escapes, so that an error
// stays on one line whatever a scalar or key in the file holds.
std::string OneLine(absl::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u != 0x7f) {
      out.push_back(c);
    } else if (c == '\n') {
      out.append("\\n");
    } else if (c == '\r') {
      out.append("\\r");
    } else if (c == '\t') {
      out.append("\\t");
    } else {
      out.append(absl::StrCat("\\x", absl::Hex(u, absl::kZeroPad2)));
    }
  }
  return out;
}

// One parse: where the text came from, and every content error found so
// far. Validation records an error and carries on with the next key, so
// that one pass reports everything; status() gives them all at the end.
class Context {
 public:
  explicit Context(absl::string_view source) : source_(source) {}

  const std::string& source() const { return source_; }

  // "source:line", or the source alone when yaml-cpp gave no position.
  std::string Where(const YAML::Mark& mark) const {
    std::string where = source_;
    if (mark.line >= 0) absl::StrAppend(&where, ":", mark.line + 1);
    return where;
  }

  // Records "source:line: path: rule" for the value of the key at `mark`,
  // which is invalid in itself: it is not applied, and IsInvalid(path) is
  // true from now on.
  void Error(const YAML::Mark& mark, absl::string_view path,
             absl::string_view rule) {
    Record(mark, path, rule);
    invalid_.emplace(path);
  }

  // Records an error for a value that is valid in itself but conflicts
  // with another key's (cooldown.max below cooldown.base): the value stays
  // usable for checks against other keys.
  void ConflictError(const YAML::Mark& mark, absl::string_view path,
                     absl::string_view rule) {
    Record(mark, path, rule);
  }

  // True if Error was called for `path` or for a map or list holding it
  // ("defaults.cooldown" holds "defaults.cooldown.base"). Checks that relate
  // two keys use it to stay quiet about a key already reported.
  bool IsInvalid(absl::string_view path) const {
    for (size_t i = 0; i < path.size(); ++i) {
      if ((path[i] == '.' || path[i] == '[') &&
          invalid_.find(path.substr(0, i)) != invalid_.end()) {
        return true;
      }
    }
    return invalid_.find(path) != invalid_.end();
  }

  // OK if nothing was recorded; otherwise INVALID_ARGUMENT whose message is
  // every error, in file order (line, then column; errors without a
  // position last), each once, joined by "\n".
  absl::Status status() const {
    if (errors_.empty()) return absl::OkStatus();
    std::vector<const Recorded*> sorted;
    sorted.reserve(errors_.size());
    for (const Recorded& e : errors_) sorted.push_back(&e);
    std::stable_sort(sorted.begin(), sorted.end(),
                     [](const Recorded* a, const Recorded* b) {
                       return Position(a->mark) < Position(b->mark);
                     });
    std::set<absl::string_view> seen;
    std::vector<absl::string_view> lines;
    for (const Recorded* e : sorted) {
      if (seen.insert(e->message).second) lines.push_back(e->message);
    }
    std::string more;
    if (lines.size() > kMaxConfigErrors) {
      more = absl::StrCat("\n", source_, ": ", lines.size() - kMaxConfigErrors,
                          " more errors not shown (fix the first ",
                          kMaxConfigErrors, ")");
      lines.resize(kMaxConfigErrors);
    }
    return absl::InvalidArgumentError(
        absl::StrCat(absl::StrJoin(lines, "\n"), more));
  }

 private:
  struct Recorded {
    YAML::Mark mark;
    std::string message;
  };

  void Record(const YAML::Mark& mark, absl::string_view path,
              absl::string_view rule) {
    errors_.push_back({mark, absl::StrCat(Where(mark), ": ", OneLine(path),
                                          ": ", OneLine(rule))});
  }

  static std::pair<int64_t, int64_t> Position(const YAML::Mark& mark) {
    if (mark.line < 0) return {INT64_MAX, 0};
    return {mark.line, mark.column};
  }

  const std::string source_;
  std::vector<Recorded> errors_;
  // The paths given to Error.
  std::set<std::string, std::less<>> invalid_;
};

// A YAML syntax error: the text is not YAML at all, and cannot be read past
// the error, so it is the only one reported.
absl::Status YamlError(const Context& ctx, const YAML::Mark& mark,
                       absl::string_view msg) {
  return absl::InvalidArgumentError(
      absl::StrCat(ctx.Where(mark), ": invalid YAML at column ",
                   mark.column + 1, ": ", OneLine(msg)));
}

// True if the last document of `starts` begins where the one before it
// began: yaml-cpp's parser stalled there (see DocumentStarts).
bool Stalled(const std::vector<YAML::Mark>& starts) {
  const size_t n = starts.size();
  return n >= 2 && starts[n - 1].pos <= starts[n - 2].pos;
}

// Where each document of a YAML stream starts, read by yaml-cpp's parser
// without building nodes. YAML::LoadAll is not used: in yaml-cpp 0.7.0
// (Debian 12) it never returns, allocating without bound, for streams such
// as "," (jbeder/yaml-cpp#1040): the parser reports a document at the same
// place again and again without consuming input. This loop stops at the
// first such repeat: the parser stalled iff the last start is not past the
// one before it (Stalled). Throws YAML::Exception on a syntax error.
std::vector<YAML::Mark> DocumentStarts(const std::string& text) {
  class StartsOnly : public IgnoringEventHandler {
   public:
    std::vector<YAML::Mark> starts;
    void OnDocumentStart(const YAML::Mark& mark) override {
      starts.push_back(mark);
    }
  };
  std::istringstream in(text);
  YAML::Parser parser(in);
  StartsOnly handler;
  while (parser.HandleNextDocument(handler) && !Stalled(handler.starts)) {
  }
  return std::move(handler.starts);
}

// A character the parser stopped at: quoted if it is YAML punctuation (the
// reason for the error, not content), else not shown (it may be a byte of
// a secret named by mistake).
std::string ShownIndicator(char c) {
  if (c != '\0' && absl::string_view(",[]{}:#&*!|>'\"%@`?-").find(c) !=
                       absl::string_view::npos) {
    return absl::StrCat("'", absl::string_view(&c, 1), "'");
  }
  return "character (not shown)";
}

// What kind of node it is, without its content: for the top level, where a
// file that is not a config at all (a token file named by mistake) lands.
std::string DescribeShape(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Null:
      return "nothing";
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Map:
      return "a map";
    case YAML::NodeType::Scalar:
      return "a scalar, not shown";
    default:
      return "an undefined node";
  }
}

// How a node looks, for "(got ...)": its shape, and a scalar quoted (only
// for values under a known key: the file is a config, not a secret named by
// mistake).
std::string Describe(const YAML::Node& node) {
  if (node.Type() == YAML::NodeType::Scalar) {
    return absl::StrCat("\"", node.Scalar(), "\"");
  }
  return DescribeShape(node);
}

// A bound, printed the way a user would write it.
std::string FormatNumber(double v) {
  if (v == std::floor(v) && std::fabs(v) < 1e15) {
    return absl::StrCat(static_cast<int64_t>(v));
  }
  return absl::StrCat(v);
}

std::string Join(absl::string_view path, absl::string_view key) {
  return path.empty() ? std::string(key) : absl::StrCat(path, ".", key);
}

// ---------------------------------------------------------------------------
// Maps

// One key of a YAML map: where the key was written and its value.
struct Field {
  YAML::Mark mark;
  YAML::Node value;
};
using Fields = std::map<std::string, Field, std::less<>>;

// Reads the map at `path` (written at `mark`) into *fields. A null node (a
// key with nothing under it) is an empty map. Records an error for a
// non-map (and leaves *fields empty), and for each non-scalar, duplicate
// (the first one is kept) or unknown key (left out of *fields).
// Returns false if the node is not a map at all.
bool ReadMap(Context* ctx, const YAML::Node& node, const YAML::Mark& mark,
             const std::string& path, absl::Span<const absl::string_view> known,
             Fields* fields) {
  fields->clear();
  if (node.IsNull()) return true;
  if (!node.IsMap()) {
    ctx->Error(
        mark, path.empty() ? "(top level)" : path,
        absl::StrCat("must be a map with keys ", absl::StrJoin(known, ", "),
                     " (got ",
                     path.empty() ? DescribeShape(node) : Describe(node), ")"));
    return false;
  }
  for (const auto& kv : node) {
    const YAML::Node& key = kv.first;
    if (!key.IsScalar()) {
      ctx->Error(
          key.Mark(), path.empty() ? "(top level)" : path,
          absl::StrCat("keys must be plain names (got ", Describe(key), ")"));
      continue;
    }
    const std::string& name = key.Scalar();
    const std::string key_path = Join(path, name);
    bool is_known = false;
    for (absl::string_view k : known) is_known = is_known || k == name;
    if (!is_known) {
      ctx->Error(key.Mark(), key_path,
                 absl::StrCat(
                     "unknown key (known: ", absl::StrJoin(known, ", "), ")"));
      continue;
    }
    auto [it, inserted] = fields->emplace(name, Field{key.Mark(), kv.second});
    if (!inserted) {
      ctx->Error(key.Mark(), key_path,
                 absl::StrCat("duplicate key (first given on line ",
                              it->second.mark.line + 1, ")"));
    }
  }
  return true;
}

const Field* Find(const Fields& fields, absl::string_view key) {
  auto it = fields.find(key);
  return it == fields.end() ? nullptr : &it->second;
}

// ---------------------------------------------------------------------------
// Leaves. Each Set* leaves *out untouched when `key` is absent from `fields`
// (the inherited value stays), and otherwise parses, range-checks and
// stores, or records an error and leaves *out untouched.

void SetInt(Context* ctx, const Fields& fields, const std::string& path,
            absl::string_view key, int64_t min, int64_t max, uint32_t* out) {
  const Field* f = Find(fields, key);
  if (f == nullptr) return;
  const std::string key_path = Join(path, key);
  int64_t v = 0;
  if (!f->value.IsScalar() || !absl::SimpleAtoi(f->value.Scalar(), &v)) {
    ctx->Error(
        f->mark, key_path,
        absl::StrCat("must be an integer (got ", Describe(f->value), ")"));
    return;
  }
  if (v < min || v > max) {
    ctx->Error(f->mark, key_path,
               absl::StrCat("must be between ", min, " and ", max, " (got ",
                            f->value.Scalar(), ")"));
    return;
  }
  *out = static_cast<uint32_t>(v);
}

// Which ends of [min, max] SetNumber accepts.
enum class Ends {
  kBoth,    // [min, max]
  kNotMax,  // [min, max)
  kNotMin,  // (min, max]
};

// A number in [min, max], less the end `ends` leaves out.
void SetNumber(Context* ctx, const Fields& fields, const std::string& path,
               absl::string_view key, double min, double max, Ends ends,
               double* out) {
  const Field* f = Find(fields, key);
  if (f == nullptr) return;
  const std::string key_path = Join(path, key);
  double v = 0;
  if (!f->value.IsScalar() || !absl::SimpleAtod(f->value.Scalar(), &v) ||
      !std::isfinite(v)) {
    ctx->Error(f->mark, key_path,
               absl::StrCat("must be a number (got ", Describe(f->value), ")"));
    return;
  }
  if (v < min || v > max || (ends == Ends::kNotMax && v == max) ||
      (ends == Ends::kNotMin && v == min)) {
    const std::string range =
        ends == Ends::kNotMax
            ? absl::StrCat("at least ", FormatNumber(min), " and less than ",
                           FormatNumber(max))
        : ends == Ends::kNotMin
            ? absl::StrCat("greater than ", FormatNumber(min), " and at most ",
                           FormatNumber(max))
            : absl::StrCat("between ", FormatNumber(min), " and ",
                           FormatNumber(max));
    ctx->Error(
        f->mark, key_path,
        absl::StrCat("must be ", range, " (got ", f->value.Scalar(), ")"));
    return;
  }
  *out = v;
}

constexpr absl::string_view kDurationUnits =
    "such as 250ms, 30s or 10m (units: ns, us, ms, s, m, h)";

// Parses a duration written with units; on failure returns why.
std::optional<std::string> ParseDurationText(absl::string_view text,
                                             absl::Duration* d) {
  text = absl::StripAsciiWhitespace(text);
  if (!text.empty() && text[0] == '-')
    return std::string("must not be negative");
  bool bare_number = !text.empty();
  for (char c : text) {
    bare_number = bare_number && (absl::ascii_isdigit(c) || c == '.' ||
                                  c == '+' || c == 'e' || c == 'E');
  }
  if (bare_number) {
    return absl::StrCat("needs a unit, ", kDurationUnits);
  }
  if (!absl::ParseDuration(text, d) || *d == absl::InfiniteDuration()) {
    return absl::StrCat("must be a duration with a unit, ", kDurationUnits);
  }
  return std::nullopt;
}

// The duration written at `f` (the value of the key at `key_path`), at least
// zero; or nullopt, with an error recorded.
std::optional<absl::Duration> ReadDuration(Context* ctx, const Field& f,
                                           const std::string& key_path) {
  if (!f.value.IsScalar()) {
    ctx->Error(f.mark, key_path,
               absl::StrCat("must be a duration with a unit, ", kDurationUnits,
                            " (got ", Describe(f.value), ")"));
    return std::nullopt;
  }
  absl::Duration d;
  if (std::optional<std::string> why =
          ParseDurationText(f.value.Scalar(), &d)) {
    ctx->Error(f.mark, key_path,
               absl::StrCat(*why, " (got ", Describe(f.value), ")"));
    return std::nullopt;
  }
  return d;
}

// A duration in [min, max], or (0, max] if `min` is zero.
void SetDuration(Context* ctx, const Fields& fields, const std::string& path,
                 absl::string_view key, absl::Duration min, absl::Duration max,
                 absl::Duration* out) {
  const Field* f = Find(fields, key);
  if (f == nullptr) return;
  const std::string key_path = Join(path, key);
  const std::optional<absl::Duration> read = ReadDuration(ctx, *f, key_path);
  if (!read.has_value()) return;
  const absl::Duration d = *read;
  const bool too_small = min == absl::ZeroDuration() ? d <= min : d < min;
  if (too_small || d > max) {
    const std::string range =
        min == absl::ZeroDuration()
            ? absl::StrCat("greater than 0 and at most ",
                           absl::FormatDuration(max))
            : absl::StrCat("between ", absl::FormatDuration(min), " and ",
                           absl::FormatDuration(max));
    ctx->Error(
        f->mark, key_path,
        absl::StrCat("must be ", range, " (got ", f->value.Scalar(), ")"));
    return;
  }
  *out = d;
}

// Zero (off), or a duration in [min, max].
void SetDurationOrOff(Context* ctx, const Fields& fields,
                      const std::string& path, absl::string_view key,
                      absl::Duration min, absl::Duration max,
                      absl::Duration* out) {
  const Field* f = Find(fields, key);
  if (f == nullptr) return;
  const std::string key_path = Join(path, key);
  const std::optional<absl::Duration> d = ReadDuration(ctx, *f, key_path);
  if (!d.has_value()) return;
  if (*d > max || (*d > absl::ZeroDuration() && *d < min)) {
    ctx->Error(
        f->mark, key_path,
        absl::StrCat("must be 0s (off) or between ", absl::FormatDuration(min),
                     " and ", absl::FormatDuration(max), " (got ",
                     f->value.Scalar(), ")"));
    return;
  }
  *out = *d;
}

// A YAML 1.2 boolean: true or false (also True, TRUE, False, FALSE). The
// YAML 1.1 spellings (yes, no, on, off) are refused: a policy says what it
// means.
void SetBool(Context* ctx, const Fields& fields, const std::string& path,
             absl::string_view key, bool* out) {
  const Field* f = Find(fields, key);
  if (f == nullptr) return;
  if (f->value.IsScalar()) {
    const std::string& text = f->value.Scalar();
    if (text == "true" || text == "True" || text == "TRUE") {
      *out = true;
      return;
    }
    if (text == "false" || text == "False" || text == "FALSE") {
      *out = false;
      return;
    }
  }
  ctx->Error(
      f->mark, Join(path, key),
      absl::StrCat("must be true or false (got ", Describe(f->value), ")"));
}

// One of the names in `choices`, stored as its value.
template <typename T>
void SetEnum(Context* ctx, const Fields& fields, const std::string& path,
             absl::string_view key,
             std::initializer_list<std::pair<absl::string_view, T>> choices,
             T* out) {
  const Field* f = Find(fields, key);
  if (f == nullptr) return;
  if (f->value.IsScalar()) {
    for (const auto& [name, value] : choices) {
      if (f->value.Scalar() == name) {
        *out = value;
        return;
      }
    }
  }
  std::vector<absl::string_view> names;
  for (const auto& choice : choices) names.push_back(choice.first);
  ctx->Error(f->mark, Join(path, key),
             absl::StrCat("must be one of ", absl::StrJoin(names, ", "),
                          " (got ", Describe(f->value), ")"));
}

// Reads the nested map under `key`, if present, into *sub (empty if absent
// or not a map).
void SubMap(Context* ctx, const Fields& fields, const std::string& path,
            absl::string_view key, absl::Span<const absl::string_view> known,
            Fields* sub) {
  sub->clear();
  const Field* f = Find(fields, key);
  if (f == nullptr) return;
  ReadMap(ctx, f->value, f->mark, Join(path, key), known, sub);
}

// ---------------------------------------------------------------------------
// Policies

constexpr absl::string_view kPolicyKeys[] = {
    "mode",         "consecutive_failures",
    "failure_rate", "slow_call_rate",
    "cooldown",     "probe",
    "rate_limited", "retry_budget",
    "inflight",     "recovery",
    "fleet",        "local_decisions"};
constexpr absl::string_view kPolicyKeysWithMatch[] = {
    "match",          "mode",           "consecutive_failures",
    "failure_rate",   "slow_call_rate", "cooldown",
    "probe",          "rate_limited",   "retry_budget",
    "inflight",       "recovery",       "fleet",
    "local_decisions"};

// The longest recovery.ramp. An hour, like the longest failure_rate.window
// and retry_budget.ttl: a longer ramp is more likely a slip (10h for 10m)
// than a wish, and would keep refusing traffic long after the outage.
constexpr absl::Duration kMaxRecoveryRamp = absl::Hours(1);

// Checks cooldown.max >= cooldown.base after `sub` (the cooldown map at
// `sub_path`) was applied to *p. A pair both inherited was checked where it
// was written, so only a pair with at least one key given in `sub` is
// checked, and only if neither key was reported invalid, here or in the map
// at `inherited_path` (empty for the built-in defaults) where the other was
// inherited from. So a bad base or max is reported once, by its own rule,
// and a bad defaults block does not produce an error in every policy.
void CheckCooldownOrder(Context* ctx, const Fields& sub,
                        const std::string& sub_path,
                        const std::string& inherited_path, const Policy& p) {
  const Field* base = Find(sub, "base");
  const Field* max = Find(sub, "max");
  if (p.cooldown.max >= p.cooldown.base ||
      (base == nullptr && max == nullptr)) {
    return;
  }
  auto valid = [&](absl::string_view key, const Field* given) {
    if (given != nullptr) return !ctx->IsInvalid(Join(sub_path, key));
    return inherited_path.empty() ||
           !ctx->IsInvalid(Join(Join(inherited_path, "cooldown"), key));
  };
  if (!valid("base", base) || !valid("max", max)) return;
  // Name the one written in this map (max if both are).
  if (max != nullptr) {
    ctx->ConflictError(
        max->mark, Join(sub_path, "max"),
        absl::StrCat("must be at least cooldown.base (got ",
                     max->value.Scalar(), ", base ",
                     absl::FormatDuration(p.cooldown.base), ")"));
    return;
  }
  ctx->ConflictError(
      base->mark, Join(sub_path, "base"),
      absl::StrCat("must be at most cooldown.max (got ", base->value.Scalar(),
                   ", max ", absl::FormatDuration(p.cooldown.max), ")"));
}

// Applies the keys present in `fields` (a defaults or policies[i] map at
// `path`) on top of *p, which holds the values inherited from the map at
// `inherited_path` (empty for the built-in defaults). Records an error for
// each bad key and applies the others.
void ApplyPolicyFields(Context* ctx, const Fields& fields,
                       const std::string& path,
                       const std::string& inherited_path, Policy* p) {
  SetEnum<Mode>(ctx, fields, path, "mode",
                {{"enforce", Mode::kEnforce}, {"shadow", Mode::kShadow}},
                &p->mode);
  SetBool(ctx, fields, path, "local_decisions", &p->local_decisions);
  SetInt(ctx, fields, path, "consecutive_failures", 0, 1000000,
         &p->consecutive_failures);

  Fields sub;
  std::string sub_path = Join(path, "failure_rate");
  SubMap(ctx, fields, path, "failure_rate",
         {"threshold", "min_calls", "window"}, &sub);
  SetNumber(ctx, sub, sub_path, "threshold", 0, 1, Ends::kBoth,
            &p->failure_rate.threshold);
  SetInt(ctx, sub, sub_path, "min_calls", 1, 1000000,
         &p->failure_rate.min_calls);
  SetDuration(ctx, sub, sub_path, "window", absl::Seconds(1), absl::Hours(1),
              &p->failure_rate.window);

  sub_path = Join(path, "slow_call_rate");
  SubMap(ctx, fields, path, "slow_call_rate",
         {"threshold", "min_calls", "duration"}, &sub);
  SetNumber(ctx, sub, sub_path, "threshold", 0, 1, Ends::kBoth,
            &p->slow_call_rate.threshold);
  SetInt(ctx, sub, sub_path, "min_calls", 1, 1000000,
         &p->slow_call_rate.min_calls);
  SetDuration(ctx, sub, sub_path, "duration", absl::ZeroDuration(),
              absl::Hours(1), &p->slow_call_rate.duration);

  sub_path = Join(path, "cooldown");
  SubMap(ctx, fields, path, "cooldown", {"base", "max", "jitter"}, &sub);
  SetDuration(ctx, sub, sub_path, "base", absl::Milliseconds(1),
              absl::Hours(24), &p->cooldown.base);
  SetDuration(ctx, sub, sub_path, "max", absl::Milliseconds(1), absl::Hours(24),
              &p->cooldown.max);
  CheckCooldownOrder(ctx, sub, sub_path, inherited_path, *p);
  SetNumber(ctx, sub, sub_path, "jitter", 0, 1, Ends::kNotMax,
            &p->cooldown.jitter);

  sub_path = Join(path, "probe");
  SubMap(ctx, fields, path, "probe", {"lease", "required_successes"}, &sub);
  SetDuration(ctx, sub, sub_path, "lease", absl::Milliseconds(1),
              absl::Hours(1), &p->probe.lease);
  SetInt(ctx, sub, sub_path, "required_successes", 1, 1000,
         &p->probe.required_successes);

  SetEnum<RateLimitedHandling>(ctx, fields, path, "rate_limited",
                               {{"count", RateLimitedHandling::kCount},
                                {"ignore", RateLimitedHandling::kIgnore}},
                               &p->rate_limited);

  sub_path = Join(path, "retry_budget");
  SubMap(ctx, fields, path, "retry_budget", {"ratio", "min_per_second", "ttl"},
         &sub);
  SetNumber(ctx, sub, sub_path, "ratio", 0, 1000, Ends::kBoth,
            &p->retry_budget.ratio);
  SetNumber(ctx, sub, sub_path, "min_per_second", 0, 1000000, Ends::kBoth,
            &p->retry_budget.min_per_second);
  SetDuration(ctx, sub, sub_path, "ttl", absl::Seconds(1), absl::Hours(1),
              &p->retry_budget.ttl);

  sub_path = Join(path, "inflight");
  SubMap(ctx, fields, path, "inflight", {"hang_after"}, &sub);
  // At least a millisecond: the engine keeps it in whole nanoseconds, and a
  // shorter "hang" would count nearly every call.
  SetDurationOrOff(ctx, sub, sub_path, "hang_after", absl::Milliseconds(1),
                   kMaxHangAfter, &p->inflight.hang_after);

  sub_path = Join(path, "recovery");
  SubMap(ctx, fields, path, "recovery", {"ramp", "start_share"}, &sub);
  SetDurationOrOff(ctx, sub, sub_path, "ramp", absl::Milliseconds(1),
                   kMaxRecoveryRamp, &p->recovery.ramp);
  SetNumber(ctx, sub, sub_path, "start_share", 0, 1, Ends::kNotMin,
            &p->recovery.start_share);

  sub_path = Join(path, "fleet");
  SubMap(ctx, fields, path, "fleet", {"share_window", "quorum"}, &sub);
  SetBool(ctx, sub, sub_path, "share_window", &p->fleet.share_window);
  SetInt(ctx, sub, sub_path, "quorum", 1, 100, &p->fleet.quorum);
}

bool IsMatchByte(char c) { return IsDependencyNameByte(c) || c == '*'; }

// Stores the policy's `match` in *out. Returns false (recording an error)
// if it is missing or not a valid pattern.
bool SetMatch(Context* ctx, const Fields& fields, const std::string& path,
              const YAML::Mark& policy_mark, std::string* out) {
  const Field* f = Find(fields, "match");
  const std::string key_path = Join(path, "match");
  if (f == nullptr) {
    ctx->Error(policy_mark, key_path,
               "required (the dependency name or glob this policy applies "
               "to)");
    return false;
  }
  bool ok = f->value.IsScalar() && !f->value.Scalar().empty() &&
            f->value.Scalar().size() <= kMaxMatchLength;
  if (ok) {
    for (char c : f->value.Scalar()) ok = ok && IsMatchByte(c);
  }
  if (!ok) {
    ctx->Error(f->mark, key_path,
               absl::StrCat("must be 1-", kMaxMatchLength, " bytes of ",
                            kDependencyNameAlphabet, " and '*' (got ",
                            Describe(f->value), ")"));
    return false;
  }
  *out = f->value.Scalar();
  return true;
}

void ParsePolicies(Context* ctx, const Field& field, const Policy& defaults,
                   std::vector<std::shared_ptr<const Policy>>* out) {
  const YAML::Node& node = field.value;
  if (node.IsNull()) return;
  if (!node.IsSequence()) {
    ctx->Error(field.mark, "policies",
               absl::StrCat("must be a list of policies, each with a match "
                            "(got ",
                            Describe(node), ")"));
    return;
  }
  // match -> index of the policy that first used it.
  std::map<std::string, size_t, std::less<>> seen;
  for (size_t i = 0; i < node.size(); ++i) {
    const YAML::Node item = node[i];
    const std::string path = absl::StrCat("policies[", i, "]");
    Fields fields;
    // Not a map: nothing in it can be read, so nothing more to report.
    if (!ReadMap(ctx, item, item.Mark(), path, kPolicyKeysWithMatch, &fields)) {
      continue;
    }
    auto policy = std::make_shared<Policy>(defaults);
    if (SetMatch(ctx, fields, path, item.Mark(), &policy->match)) {
      auto [it, inserted] = seen.emplace(policy->match, i);
      if (!inserted) {
        ctx->Error(
            Find(fields, "match")->mark, Join(path, "match"),
            absl::StrCat("duplicate of policies[", it->second, "].match (\"",
                         policy->match, "\"); each pattern may appear once"));
      }
    }
    ApplyPolicyFields(ctx, fields, path, "defaults", policy.get());
    out->push_back(std::move(policy));
  }
}

// Parses the document into *set, recording every error in *ctx. *set is
// meaningful only if none was recorded.
void ParseRoot(Context* ctx, const YAML::Node& root, PolicySet* set) {
  Fields top;
  if (!ReadMap(ctx, root, root.Mark(), "", {"defaults", "policies", "limits"},
               &top)) {
    return;
  }

  auto defaults = std::make_shared<Policy>();
  Fields fields;
  SubMap(ctx, top, "", "defaults", kPolicyKeys, &fields);
  ApplyPolicyFields(ctx, fields, "defaults", "", defaults.get());
  set->defaults = defaults;

  if (const Field* policies = Find(top, "policies")) {
    ParsePolicies(ctx, *policies, *defaults, &set->policies);
  }

  SubMap(ctx, top, "", "limits", {"max_breakers", "idle_ttl", "max_chains"},
         &fields);
  SetInt(ctx, fields, "limits", "max_breakers", 1, 10000000,
         &set->limits.max_breakers);
  SetDuration(ctx, fields, "limits", "idle_ttl", absl::Seconds(1),
              absl::Hours(24 * 30), &set->limits.idle_ttl);
  SetInt(ctx, fields, "limits", "max_chains", 1, 1000, &set->limits.max_chains);
}

}  // namespace

absl::StatusOr<std::shared_ptr<const PolicySet>> ParseConfig(
    absl::string_view yaml_text, absl::string_view source) {
  Context ctx(source);
  auto set = std::make_shared<PolicySet>();
  set->source = std::string(source);
  try {
    const std::string text(yaml_text);
    std::vector<YAML::Mark> starts;
    try {
      starts = DocumentStarts(text);
    } catch (const YAML::Exception& e) {
      return YamlError(ctx, e.mark, e.msg);
    }
    // A document that starts where the one before it started: yaml-cpp's
    // parser is stuck on a character it can neither parse nor reject.
    if (Stalled(starts)) {
      const YAML::Mark& stuck = starts.back();
      const size_t pos = static_cast<size_t>(stuck.pos);
      return YamlError(
          ctx, stuck,
          pos < text.size()
              ? absl::StrCat("unexpected ", ShownIndicator(text[pos]),
                             " where a document starts")
              : std::string("unexpected end of input"));
    }
    if (starts.size() > 1) {
      ctx.Error(starts[1], "(top level)",
                absl::StrCat("must be a single YAML document (found ",
                             starts.size(), ")"));
      return ctx.status();
    }
    YAML::Node doc;
    try {
      doc = YAML::Load(text);
    } catch (const YAML::Exception& e) {
      return YamlError(ctx, e.mark, e.msg);
    }
    // No document, or an empty one: the embedded defaults.
    if (!starts.empty()) ParseRoot(&ctx, doc, set.get());
  } catch (const YAML::Exception& e) {
    // Not expected (the parser only reads nodes it has checked), but
    // yaml-cpp reports misuse by throwing, and nothing may escape. Reported
    // with whatever was found before it.
    ctx.Error(e.mark, "(config)", absl::StrCat("yaml-cpp: ", e.msg));
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(
        ctx.source(), ": cannot parse config: ", OneLine(e.what())));
  }
  absl::Status status = ctx.status();
  if (!status.ok()) return status;
  return std::shared_ptr<const PolicySet>(std::move(set));
}

std::vector<std::string> ConfigErrorLines(const absl::Status& status) {
  return absl::StrSplit(status.message(), '\n', absl::SkipEmpty());
}

absl::StatusOr<std::string> ReadConfigFile(const std::string& path) {
  auto errno_status = [&path](int err, absl::string_view what) {
    const absl::StatusCode code =
        err == ENOENT || err == ENOTDIR ? absl::StatusCode::kNotFound
        : err == EACCES || err == EPERM ? absl::StatusCode::kPermissionDenied
                                        : absl::ErrnoToStatusCode(err);
    return absl::Status(code, absl::StrCat(path, ": cannot ", what,
                                           " config file: ", strerror(err)));
  };
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno_status(errno, "open");
  struct FdCloser {
    int fd;
    ~FdCloser() { close(fd); }
  } closer{fd};

  struct stat st;
  if (fstat(fd, &st) != 0) return errno_status(errno, "stat");
  if (!S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": config file is not a regular file"));
  }
  std::string content;
  char buf[64 * 1024];
  for (;;) {
    const ssize_t n = read(fd, buf, sizeof(buf));
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno_status(errno, "read");
    }
    if (n == 0) break;
    if (content.size() + static_cast<size_t>(n) > kMaxConfigBytes) {
      return absl::InvalidArgumentError(absl::StrCat(
          path, ": config file is larger than ", kMaxConfigBytes, " bytes"));
    }
    content.append(buf, static_cast<size_t>(n));
  }
  return content;
}

absl::StatusOr<std::shared_ptr<const PolicySet>> LoadConfigFile(
    const std::string& path) {
  absl::StatusOr<std::string> content = ReadConfigFile(path);
  if (!content.ok()) return content.status();
  return ParseConfig(*content, path);
}

std::shared_ptr<const PolicySet> EmbeddedDefaults() {
  static const auto* const kDefaults =
      new std::shared_ptr<const PolicySet>(std::make_shared<const PolicySet>());
  return *kDefaults;
}

// ---------------------------------------------------------------------------
// ConfigReloader

ConfigReloader::ConfigReloader(
    std::string path, Registry* registry, Callback callback,
    std::optional<absl::StatusOr<std::string>> loaded)
    : path_(std::move(path)),
      registry_(registry),
      callback_(std::move(callback)) {
  if (!loaded.has_value()) return;
  if (loaded->ok()) {
    last_content_ = **std::move(loaded);
  } else {
    last_read_error_ = loaded->status().ToString();
  }
}

absl::Status ConfigReloader::Reload(absl::string_view trigger) {
  MutexLock lock(&mu_);
  return Attempt(ReadConfigFile(path_), trigger);
}

absl::Status ConfigReloader::ReloadIfChanged() {
  MutexLock lock(&mu_);
  absl::StatusOr<std::string> read = ReadConfigFile(path_);
  const bool unchanged =
      read.ok() ? last_content_.has_value() && *last_content_ == *read
                : last_read_error_.has_value() &&
                      *last_read_error_ == read.status().ToString();
  if (unchanged) return absl::OkStatus();
  return Attempt(read, "file_change");
}

absl::Status ConfigReloader::Attempt(const absl::StatusOr<std::string>& read,
                                     absl::string_view trigger) {
  ReloadEvent event;
  event.source = path_;
  event.trigger = std::string(trigger);

  absl::Status status;
  if (!read.ok()) {
    last_content_.reset();
    last_read_error_ = read.status().ToString();
    status = read.status();
  } else {
    last_read_error_.reset();
    last_content_ = *read;
    absl::StatusOr<std::shared_ptr<const PolicySet>> set =
        ParseConfig(*read, path_);
    if (set.ok() && absl::StripAsciiWhitespace(*read).empty()) {
      // At start an empty file means "the defaults"; while running it is
      // far more likely a file caught mid-write (`> file`, O_TRUNC) than a
      // wish to drop every policy.
      set = absl::InvalidArgumentError(absl::StrCat(
          path_,
          ": the file is empty (truncated while being written?); keeping "
          "the configuration in force. To go back to the defaults, write "
          "`defaults: {}`."));
    }
    if (set.ok()) {
      event.policies = (*set)->policies.size();
      event.content = *read;
      registry_->ApplyPolicies(*std::move(set));
    } else {
      status = set.status();
    }
  }

  event.ok = status.ok();
  if (status.ok()) {
    successes_.fetch_add(1, std::memory_order_relaxed);
  } else {
    failures_.fetch_add(1, std::memory_order_relaxed);
    event.error = std::string(status.message());
    event.policies = registry_->policies()->policies.size();
  }
  if (callback_) callback_(event);
  return status;
}

}  // namespace breakerd

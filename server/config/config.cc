#include "server/config/config.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <exception>
#include <initializer_list>
#include <map>
#include <sstream>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "server/config/yaml_events.h"
#include "yaml-cpp/yaml.h"

namespace breakerd {
namespace {

// ---------------------------------------------------------------------------
// Error reporting

// Where the text came from, for every message.
struct Context {
  std::string source;
};

// "source:line", or the source alone when yaml-cpp gave no position.
std::string Where(const Context& ctx, const YAML::Mark& mark) {
  std::string where = ctx.source;
  if (mark.line >= 0) absl::StrAppend(&where, ":", mark.line + 1);
  return where;
}

absl::Status Error(const Context& ctx, const YAML::Mark& mark,
                   absl::string_view path, absl::string_view rule) {
  return absl::InvalidArgumentError(
      absl::StrCat(Where(ctx, mark), ": ", path, ": ", rule));
}

// A YAML syntax error: the text is not YAML at all.
absl::Status YamlError(const Context& ctx, const YAML::Mark& mark,
                       absl::string_view msg) {
  return absl::InvalidArgumentError(absl::StrCat(Where(ctx, mark),
                                                 ": invalid YAML at column ",
                                                 mark.column + 1, ": ", msg));
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

// How a node looks, for "(got ...)".
std::string Describe(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Null:
      return "nothing";
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Map:
      return "a map";
    case YAML::NodeType::Scalar:
      return absl::StrCat("\"", node.Scalar(), "\"");
    default:
      return "an undefined node";
  }
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

// Reads the map at `path` (written at `mark`). A null node (a key with
// nothing under it) is an empty map. Refuses non-maps, non-scalar keys,
// duplicate keys and keys outside `known`.
absl::Status ReadMap(const Context& ctx, const YAML::Node& node,
                     const YAML::Mark& mark, const std::string& path,
                     absl::Span<const absl::string_view> known,
                     Fields* fields) {
  fields->clear();
  if (node.IsNull()) return absl::OkStatus();
  if (!node.IsMap()) {
    return Error(
        ctx, mark, path.empty() ? "(top level)" : path,
        absl::StrCat("must be a map with keys ", absl::StrJoin(known, ", "),
                     " (got ", Describe(node), ")"));
  }
  for (const auto& kv : node) {
    const YAML::Node& key = kv.first;
    if (!key.IsScalar()) {
      return Error(
          ctx, key.Mark(), path.empty() ? "(top level)" : path,
          absl::StrCat("keys must be plain names (got ", Describe(key), ")"));
    }
    const std::string& name = key.Scalar();
    const std::string key_path = Join(path, name);
    bool is_known = false;
    for (absl::string_view k : known) is_known = is_known || k == name;
    if (!is_known) {
      return Error(ctx, key.Mark(), key_path,
                   absl::StrCat("unknown key (known: ",
                                absl::StrJoin(known, ", "), ")"));
    }
    auto [it, inserted] = fields->emplace(name, Field{key.Mark(), kv.second});
    if (!inserted) {
      return Error(ctx, key.Mark(), key_path,
                   absl::StrCat("duplicate key (first given on line ",
                                it->second.mark.line + 1, ")"));
    }
  }
  return absl::OkStatus();
}

const Field* Find(const Fields& fields, absl::string_view key) {
  auto it = fields.find(key);
  return it == fields.end() ? nullptr : &it->second;
}

// ---------------------------------------------------------------------------
// Leaves. Each Set* leaves *out untouched when `key` is absent from `fields`
// (the inherited value stays), and otherwise parses, range-checks and stores.

absl::Status SetInt(const Context& ctx, const Fields& fields,
                    const std::string& path, absl::string_view key, int64_t min,
                    int64_t max, uint32_t* out) {
  const Field* f = Find(fields, key);
  if (f == nullptr) return absl::OkStatus();
  const std::string key_path = Join(path, key);
  int64_t v = 0;
  if (!f->value.IsScalar() || !absl::SimpleAtoi(f->value.Scalar(), &v)) {
    return Error(
        ctx, f->mark, key_path,
        absl::StrCat("must be an integer (got ", Describe(f->value), ")"));
  }
  if (v < min || v > max) {
    return Error(ctx, f->mark, key_path,
                 absl::StrCat("must be between ", min, " and ", max, " (got ",
                              f->value.Scalar(), ")"));
  }
  *out = static_cast<uint32_t>(v);
  return absl::OkStatus();
}

// A number in [min, max], or [min, max) if `max_exclusive`.
absl::Status SetNumber(const Context& ctx, const Fields& fields,
                       const std::string& path, absl::string_view key,
                       double min, double max, bool max_exclusive,
                       double* out) {
  const Field* f = Find(fields, key);
  if (f == nullptr) return absl::OkStatus();
  const std::string key_path = Join(path, key);
  double v = 0;
  if (!f->value.IsScalar() || !absl::SimpleAtod(f->value.Scalar(), &v) ||
      !std::isfinite(v)) {
    return Error(
        ctx, f->mark, key_path,
        absl::StrCat("must be a number (got ", Describe(f->value), ")"));
  }
  if (v < min || v > max || (max_exclusive && v == max)) {
    const std::string range =
        max_exclusive ? absl::StrCat("at least ", FormatNumber(min),
                                     " and less than ", FormatNumber(max))
                      : absl::StrCat("between ", FormatNumber(min), " and ",
                                     FormatNumber(max));
    return Error(
        ctx, f->mark, key_path,
        absl::StrCat("must be ", range, " (got ", f->value.Scalar(), ")"));
  }
  *out = v;
  return absl::OkStatus();
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

// A duration in [min, max], or (0, max] if `min` is zero.
absl::Status SetDuration(const Context& ctx, const Fields& fields,
                         const std::string& path, absl::string_view key,
                         absl::Duration min, absl::Duration max,
                         absl::Duration* out) {
  const Field* f = Find(fields, key);
  if (f == nullptr) return absl::OkStatus();
  const std::string key_path = Join(path, key);
  if (!f->value.IsScalar()) {
    return Error(
        ctx, f->mark, key_path,
        absl::StrCat("must be a duration with a unit, ", kDurationUnits,
                     " (got ", Describe(f->value), ")"));
  }
  absl::Duration d;
  if (std::optional<std::string> why =
          ParseDurationText(f->value.Scalar(), &d)) {
    return Error(ctx, f->mark, key_path,
                 absl::StrCat(*why, " (got ", Describe(f->value), ")"));
  }
  const bool too_small = min == absl::ZeroDuration() ? d <= min : d < min;
  if (too_small || d > max) {
    const std::string range =
        min == absl::ZeroDuration()
            ? absl::StrCat("greater than 0 and at most ",
                           absl::FormatDuration(max))
            : absl::StrCat("between ", absl::FormatDuration(min), " and ",
                           absl::FormatDuration(max));
    return Error(
        ctx, f->mark, key_path,
        absl::StrCat("must be ", range, " (got ", f->value.Scalar(), ")"));
  }
  *out = d;
  return absl::OkStatus();
}

// One of the names in `choices`, stored as its value.
template <typename T>
absl::Status SetEnum(
    const Context& ctx, const Fields& fields, const std::string& path,
    absl::string_view key,
    std::initializer_list<std::pair<absl::string_view, T>> choices, T* out) {
  const Field* f = Find(fields, key);
  if (f == nullptr) return absl::OkStatus();
  if (f->value.IsScalar()) {
    for (const auto& [name, value] : choices) {
      if (f->value.Scalar() == name) {
        *out = value;
        return absl::OkStatus();
      }
    }
  }
  std::vector<absl::string_view> names;
  for (const auto& choice : choices) names.push_back(choice.first);
  return Error(ctx, f->mark, Join(path, key),
               absl::StrCat("must be one of ", absl::StrJoin(names, ", "),
                            " (got ", Describe(f->value), ")"));
}

// Reads the nested map under `key`, if present, into *sub (empty if absent).
absl::Status SubMap(const Context& ctx, const Fields& fields,
                    const std::string& path, absl::string_view key,
                    absl::Span<const absl::string_view> known, Fields* sub) {
  sub->clear();
  const Field* f = Find(fields, key);
  if (f == nullptr) return absl::OkStatus();
  return ReadMap(ctx, f->value, f->mark, Join(path, key), known, sub);
}

// ---------------------------------------------------------------------------
// Policies

#define BREAKERD_RETURN_IF_ERROR(expr)                 \
  do {                                                 \
    absl::Status breakerd_status = (expr);             \
    if (!breakerd_status.ok()) return breakerd_status; \
  } while (false)

constexpr absl::string_view kPolicyKeys[] = {
    "mode",         "consecutive_failures",
    "failure_rate", "slow_call_rate",
    "cooldown",     "probe",
    "rate_limited", "retry_budget"};
constexpr absl::string_view kPolicyKeysWithMatch[] = {
    "match",        "mode",           "consecutive_failures",
    "failure_rate", "slow_call_rate", "cooldown",
    "probe",        "rate_limited",   "retry_budget"};

// Applies the keys present in `fields` (a defaults or policies[i] map at
// `path`) on top of *p, which holds the inherited values.
absl::Status ApplyPolicyFields(const Context& ctx, const Fields& fields,
                               const std::string& path, Policy* p) {
  BREAKERD_RETURN_IF_ERROR(SetEnum<Mode>(
      ctx, fields, path, "mode",
      {{"enforce", Mode::kEnforce}, {"shadow", Mode::kShadow}}, &p->mode));
  BREAKERD_RETURN_IF_ERROR(SetInt(ctx, fields, path, "consecutive_failures", 0,
                                  1000000, &p->consecutive_failures));

  Fields sub;
  std::string sub_path = Join(path, "failure_rate");
  BREAKERD_RETURN_IF_ERROR(SubMap(ctx, fields, path, "failure_rate",
                                  {"threshold", "min_calls", "window"}, &sub));
  BREAKERD_RETURN_IF_ERROR(SetNumber(ctx, sub, sub_path, "threshold", 0, 1,
                                     false, &p->failure_rate.threshold));
  BREAKERD_RETURN_IF_ERROR(SetInt(ctx, sub, sub_path, "min_calls", 1, 1000000,
                                  &p->failure_rate.min_calls));
  BREAKERD_RETURN_IF_ERROR(SetDuration(ctx, sub, sub_path, "window",
                                       absl::Seconds(1), absl::Hours(1),
                                       &p->failure_rate.window));

  sub_path = Join(path, "slow_call_rate");
  BREAKERD_RETURN_IF_ERROR(SubMap(ctx, fields, path, "slow_call_rate",
                                  {"threshold", "min_calls", "duration"},
                                  &sub));
  BREAKERD_RETURN_IF_ERROR(SetNumber(ctx, sub, sub_path, "threshold", 0, 1,
                                     false, &p->slow_call_rate.threshold));
  BREAKERD_RETURN_IF_ERROR(SetInt(ctx, sub, sub_path, "min_calls", 1, 1000000,
                                  &p->slow_call_rate.min_calls));
  BREAKERD_RETURN_IF_ERROR(SetDuration(ctx, sub, sub_path, "duration",
                                       absl::ZeroDuration(), absl::Hours(1),
                                       &p->slow_call_rate.duration));

  sub_path = Join(path, "cooldown");
  BREAKERD_RETURN_IF_ERROR(
      SubMap(ctx, fields, path, "cooldown", {"base", "max", "jitter"}, &sub));
  BREAKERD_RETURN_IF_ERROR(SetDuration(ctx, sub, sub_path, "base",
                                       absl::Milliseconds(1), absl::Hours(24),
                                       &p->cooldown.base));
  BREAKERD_RETURN_IF_ERROR(SetDuration(ctx, sub, sub_path, "max",
                                       absl::Milliseconds(1), absl::Hours(24),
                                       &p->cooldown.max));
  if (p->cooldown.max < p->cooldown.base) {
    // One of the two was given here (the inherited pair was consistent);
    // name the one written in this map.
    if (const Field* max = Find(sub, "max")) {
      return Error(ctx, max->mark, Join(sub_path, "max"),
                   absl::StrCat("must be at least cooldown.base (got ",
                                max->value.Scalar(), ", base ",
                                absl::FormatDuration(p->cooldown.base), ")"));
    }
    const Field* base = Find(sub, "base");
    return Error(
        ctx, base->mark, Join(sub_path, "base"),
        absl::StrCat("must be at most cooldown.max (got ", base->value.Scalar(),
                     ", max ", absl::FormatDuration(p->cooldown.max), ")"));
  }
  BREAKERD_RETURN_IF_ERROR(
      SetNumber(ctx, sub, sub_path, "jitter", 0, 1, true, &p->cooldown.jitter));

  sub_path = Join(path, "probe");
  BREAKERD_RETURN_IF_ERROR(SubMap(ctx, fields, path, "probe",
                                  {"lease", "required_successes"}, &sub));
  BREAKERD_RETURN_IF_ERROR(SetDuration(ctx, sub, sub_path, "lease",
                                       absl::Milliseconds(1), absl::Hours(1),
                                       &p->probe.lease));
  BREAKERD_RETURN_IF_ERROR(SetInt(ctx, sub, sub_path, "required_successes", 1,
                                  1000, &p->probe.required_successes));

  BREAKERD_RETURN_IF_ERROR(
      SetEnum<RateLimitedHandling>(ctx, fields, path, "rate_limited",
                                   {{"count", RateLimitedHandling::kCount},
                                    {"ignore", RateLimitedHandling::kIgnore}},
                                   &p->rate_limited));

  sub_path = Join(path, "retry_budget");
  BREAKERD_RETURN_IF_ERROR(SubMap(ctx, fields, path, "retry_budget",
                                  {"ratio", "min_per_second", "ttl"}, &sub));
  BREAKERD_RETURN_IF_ERROR(SetNumber(ctx, sub, sub_path, "ratio", 0, 1000,
                                     false, &p->retry_budget.ratio));
  BREAKERD_RETURN_IF_ERROR(SetNumber(ctx, sub, sub_path, "min_per_second", 0,
                                     1000000, false,
                                     &p->retry_budget.min_per_second));
  BREAKERD_RETURN_IF_ERROR(SetDuration(ctx, sub, sub_path, "ttl",
                                       absl::Seconds(1), absl::Hours(1),
                                       &p->retry_budget.ttl));
  return absl::OkStatus();
}

bool IsMatchByte(char c) {
  return absl::ascii_isalnum(c) || c == '.' || c == '_' || c == ':' ||
         c == '/' || c == '@' || c == '-' || c == '*';
}

absl::Status SetMatch(const Context& ctx, const Fields& fields,
                      const std::string& path, const YAML::Mark& policy_mark,
                      std::string* out) {
  const Field* f = Find(fields, "match");
  const std::string key_path = Join(path, "match");
  if (f == nullptr) {
    return Error(ctx, policy_mark, key_path,
                 "required (the dependency name or glob this policy applies "
                 "to)");
  }
  bool ok = f->value.IsScalar() && !f->value.Scalar().empty() &&
            f->value.Scalar().size() <= kMaxMatchLength;
  if (ok) {
    for (char c : f->value.Scalar()) ok = ok && IsMatchByte(c);
  }
  if (!ok) {
    return Error(ctx, f->mark, key_path,
                 absl::StrCat("must be 1-", kMaxMatchLength,
                              " bytes of [A-Za-z0-9._:/@-] and '*' (got ",
                              Describe(f->value), ")"));
  }
  *out = f->value.Scalar();
  return absl::OkStatus();
}

absl::Status ParsePolicies(const Context& ctx, const Field& field,
                           const Policy& defaults,
                           std::vector<std::shared_ptr<const Policy>>* out) {
  const YAML::Node& node = field.value;
  if (node.IsNull()) return absl::OkStatus();
  if (!node.IsSequence()) {
    return Error(ctx, field.mark, "policies",
                 absl::StrCat("must be a list of policies, each with a match "
                              "(got ",
                              Describe(node), ")"));
  }
  // match -> index of the policy that first used it.
  std::map<std::string, size_t, std::less<>> seen;
  for (size_t i = 0; i < node.size(); ++i) {
    const YAML::Node item = node[i];
    const std::string path = absl::StrCat("policies[", i, "]");
    Fields fields;
    BREAKERD_RETURN_IF_ERROR(
        ReadMap(ctx, item, item.Mark(), path, kPolicyKeysWithMatch, &fields));
    auto policy = std::make_shared<Policy>(defaults);
    BREAKERD_RETURN_IF_ERROR(
        SetMatch(ctx, fields, path, item.Mark(), &policy->match));
    auto [it, inserted] = seen.emplace(policy->match, i);
    if (!inserted) {
      return Error(
          ctx, Find(fields, "match")->mark, Join(path, "match"),
          absl::StrCat("duplicate of policies[", it->second, "].match (\"",
                       policy->match, "\"); each pattern may appear once"));
    }
    BREAKERD_RETURN_IF_ERROR(
        ApplyPolicyFields(ctx, fields, path, policy.get()));
    out->push_back(std::move(policy));
  }
  return absl::OkStatus();
}

absl::Status ParseRoot(const Context& ctx, const YAML::Node& root,
                       PolicySet* set) {
  Fields top;
  BREAKERD_RETURN_IF_ERROR(ReadMap(ctx, root, root.Mark(), "",
                                   {"defaults", "policies", "limits"}, &top));

  auto defaults = std::make_shared<Policy>();
  Fields fields;
  BREAKERD_RETURN_IF_ERROR(
      SubMap(ctx, top, "", "defaults", kPolicyKeys, &fields));
  BREAKERD_RETURN_IF_ERROR(
      ApplyPolicyFields(ctx, fields, "defaults", defaults.get()));
  set->defaults = defaults;

  if (const Field* policies = Find(top, "policies")) {
    BREAKERD_RETURN_IF_ERROR(
        ParsePolicies(ctx, *policies, *defaults, &set->policies));
  }

  BREAKERD_RETURN_IF_ERROR(
      SubMap(ctx, top, "", "limits", {"max_breakers", "idle_ttl"}, &fields));
  BREAKERD_RETURN_IF_ERROR(SetInt(ctx, fields, "limits", "max_breakers", 1,
                                  10000000, &set->limits.max_breakers));
  BREAKERD_RETURN_IF_ERROR(SetDuration(ctx, fields, "limits", "idle_ttl",
                                       absl::Seconds(1), absl::Hours(24 * 30),
                                       &set->limits.idle_ttl));
  return absl::OkStatus();
}

#undef BREAKERD_RETURN_IF_ERROR

}  // namespace

absl::StatusOr<std::shared_ptr<const PolicySet>> ParseConfig(
    absl::string_view yaml_text, absl::string_view source) {
  const Context ctx{std::string(source)};
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
      return YamlError(ctx, stuck,
                       pos < text.size()
                           ? absl::StrCat("unexpected '",
                                          absl::CHexEscape(text.substr(pos, 1)),
                                          "' where a document starts")
                           : std::string("unexpected end of input"));
    }
    if (starts.size() > 1) {
      return Error(ctx, starts[1], "(top level)",
                   absl::StrCat("must be a single YAML document (found ",
                                starts.size(), ")"));
    }
    YAML::Node doc;
    try {
      doc = YAML::Load(text);
    } catch (const YAML::Exception& e) {
      return YamlError(ctx, e.mark, e.msg);
    }
    // No document, or an empty one: the embedded defaults.
    if (!starts.empty()) {
      absl::Status status = ParseRoot(ctx, doc, set.get());
      if (!status.ok()) return status;
    }
  } catch (const YAML::Exception& e) {
    // Not expected (the parser only reads nodes it has checked), but
    // yaml-cpp reports misuse by throwing, and nothing may escape.
    return Error(ctx, e.mark, "(config)", absl::StrCat("yaml-cpp: ", e.msg));
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(ctx.source, ": cannot parse config: ", e.what()));
  }
  return std::shared_ptr<const PolicySet>(std::move(set));
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

ConfigReloader::ConfigReloader(std::string path, Registry* registry,
                               Callback callback,
                               std::optional<std::string> loaded_content)
    : path_(std::move(path)),
      registry_(registry),
      callback_(std::move(callback)),
      last_content_(std::move(loaded_content)) {}

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

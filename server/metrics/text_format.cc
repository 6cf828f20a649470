#include "server/metrics/text_format.h"

#include <algorithm>
#include <array>
#include <cassert>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <optional>
#include <system_error>
#include <vector>

#include "absl/strings/str_cat.h"

namespace breakerd {
namespace {

// The letter after the backslash that escapes `c` in a label value, or 0 if
// `c` stands for itself.
constexpr char LabelEscape(char c) {
  return c == '\\' ? '\\' : c == '"' ? '"' : c == '\n' ? 'n' : 0;
}
// The same for HELP text, where a double quote stands for itself.
constexpr char HelpEscape(char c) { return c == '"' ? 0 : LabelEscape(c); }

template <char (*Escape)(char)>
constexpr std::array<char, 256> EscapeTable() {
  std::array<char, 256> table{};
  for (int c = 0; c < 256; ++c) table[c] = Escape(static_cast<char>(c));
  return table;
}
constexpr std::array<char, 256> kLabelEscapes = EscapeTable<LabelEscape>();
constexpr std::array<char, 256> kHelpEscapes = EscapeTable<HelpEscape>();

// Writes `text` at `p` with every byte that `escapes` maps to a letter
// replaced by a backslash and that letter; returns the end. REQUIRES: room
// for 2 * text.size() bytes at `p`.
char* WriteEscaped(absl::string_view text, const std::array<char, 256>& escapes,
                   char* p) {
  for (char c : text) {
    const char letter = escapes[static_cast<unsigned char>(c)];
    if (letter == 0) {
      *p++ = c;
    } else {
      *p++ = '\\';
      *p++ = letter;
    }
  }
  return p;
}

void AppendEscaped(absl::string_view text, const std::array<char, 256>& escapes,
                   std::string* out) {
  const size_t size = out->size();
  out->resize(size + 2 * text.size());
  out->resize(WriteEscaped(text, escapes, out->data() + size) - out->data());
}

// Room for what FormatValue and FormatCount write (at most 24 characters:
// "-2.2250738585072014e-308").
constexpr size_t kMaxNumber = 32;

char* FormatCount(uint64_t value, char* p) {
  return std::to_chars(p, p + kMaxNumber, value).ptr;
}

char* FormatValue(double value, char* p) {
  if (std::isnan(value)) {
    memcpy(p, "NaN", 3);
    return p + 3;
  }
  if (std::isinf(value)) {
    memcpy(p, value > 0 ? "+Inf" : "-Inf", 4);
    return p + 4;
  }
  // Small whole numbers (states, counts kept as doubles) are common, and the
  // integer path is several times cheaper than the shortest-double search.
  if (value >= 0 && value < 1e15 && value == std::floor(value)) {
    return FormatCount(static_cast<uint64_t>(value), p);
  }
  return std::to_chars(p, p + kMaxNumber, value).ptr;
}

// A histogram bound as the "le" label value. Spelled as prometheus-cpp
// spells it (%.16g: "0.005", "120", "1000000"), so the series are the same
// whichever path rendered them.
std::string BoundLabel(double bound) {
  if (std::isinf(bound)) return bound > 0 ? "+Inf" : "-Inf";
  char buf[kMaxNumber];
  const std::to_chars_result r = std::to_chars(buf, buf + sizeof(buf), bound,
                                               std::chars_format::general, 16);
  return std::string(buf, r.ptr - buf);
}

// A family's fixed pieces of text, built once per scrape.
struct FamilyText {
  // `labels`: the label names as exported (DependencyLabeler::Names).
  FamilyText(const FamilyDef& def, absl::Span<const absl::string_view> labels)
      : def(def) {
    for (size_t i = 0; i < labels.size(); ++i) {
      label_openers.push_back(
          absl::StrCat(i == 0 ? "{" : "\",", labels[i], "=\""));
    }
    bucket = absl::StrCat(def.name, "_bucket");
    sum = absl::StrCat(def.name, "_sum");
    count = absl::StrCat(def.name, "_count");
    for (double bound : def.bucket_bounds) {
      bucket_tails.push_back(absl::StrCat(BoundLabel(bound), "\"} "));
    }
    bucket_tails.push_back("+Inf\"} ");
  }

  const FamilyDef& def;
  // For label i: what precedes its value (`{name="` or `",name="`).
  std::vector<std::string> label_openers;
  // Histograms: the series names and, per bucket (+Inf last), what follows
  // `le="` up to the count.
  std::string bucket, sum, count;
  std::vector<std::string> bucket_tails;
};

// Text written through a cursor into a std::string sized ahead, so that a
// line costs one capacity check instead of one per piece.
class Writer {
 public:
  // Writes after the current end of `out`; `expected` bytes is the first
  // guess of the room needed.
  Writer(std::string* out, size_t expected) : out_(out), end_(out->size()) {
    out_->resize(end_ + expected);
  }
  // Cuts `out` to what was written.
  ~Writer() { out_->resize(end_); }

  Writer(const Writer&) = delete;
  Writer& operator=(const Writer&) = delete;

  // Room for `n` more bytes: write them at the returned cursor, then Commit
  // the new end.
  char* Reserve(size_t n) {
    if (out_->size() - end_ < n) out_->resize(2 * out_->size() + n);
    return out_->data() + end_;
  }
  void Commit(const char* end) { end_ = end - out_->data(); }

  // The bytes written so far, from `from` (stable only until the next
  // Reserve).
  const char* at(size_t from) const { return out_->data() + from; }
  size_t size() const { return end_; }
  // What was written from `from` on (valid until the next write).
  absl::string_view Written(size_t from) const {
    return absl::string_view(out_->data() + from, end_ - from);
  }
  // Forgets what was written from `to` on: the next write goes there.
  void Rewind(size_t to) { end_ = to; }

  void Append(absl::string_view text) {
    char* p = Reserve(text.size());
    memcpy(p, text.data(), text.size());
    Commit(p + text.size());
  }

 private:
  std::string* const out_;
  size_t end_;  // what is written: out_[0, end_); the rest is room
};

char* Copy(absl::string_view text, char* p) {
  memcpy(p, text.data(), text.size());
  return p + text.size();
}

// Writes samples as text lines through a Writer. The caller feeds it one
// family at a time, so lines of a family stay together.
class TextSink final : public SampleSink {
 public:
  TextSink(Writer* out, DependencyLabel label) : out_(out), labeler_(label) {
    for (int i = 0; i < kFamilyCount; ++i) {
      const FamilyId id = static_cast<FamilyId>(i);
      families_.emplace_back(Family(id), labeler_.Names(id));
    }
  }

  void AddSample(FamilyId family, LabelValues values, double value) override {
    const FamilyText& f = families_[static_cast<int>(family)];
    WriteLine(f.def.name, f, Exported(family, values),
              [value](char* p) { return FormatValue(value, p); });
  }

  void AddCount(FamilyId family, LabelValues values, uint64_t value) override {
    const FamilyText& f = families_[static_cast<int>(family)];
    WriteLine(f.def.name, f, Exported(family, values),
              [value](char* p) { return FormatCount(value, p); });
  }

  void AddHistogram(FamilyId family, LabelValues values,
                    const HistogramSample& h) override {
    const FamilyText& f = families_[static_cast<int>(family)];
    const absl::Span<const absl::string_view> labels = Exported(family, values);
    // Every bucket line starts with the same `name_bucket{labels,le="`:
    // written once, then copied.
    const size_t head_start = out_->size();
    out_->Commit(WriteSeries(f.bucket, f, labels, kLeLabelFollows, 0));
    const size_t head_size = out_->size() - head_start;
    for (size_t b = 0; b < f.bucket_tails.size(); ++b) {
      const std::string& tail = f.bucket_tails[b];
      char* p = out_->Reserve(head_size + tail.size() + kMaxNumber + 1);
      if (b > 0) {
        memcpy(p, out_->at(head_start), head_size);
        p += head_size;
      }
      p = Copy(tail, p);
      p = FormatCount(
          b < h.cumulative_counts.size() ? h.cumulative_counts[b] : h.count, p);
      *p++ = '\n';
      out_->Commit(p);
    }
    WriteLine(f.sum, f, labels,
              [&h](char* p) { return FormatValue(h.sum, p); });
    WriteLine(f.count, f, labels,
              [&h](char* p) { return FormatCount(h.count, p); });
  }

 private:
  // What WriteSeries ends with.
  enum Close {
    kValueFollows,    // `} ` (or ` ` without labels)
    kLeLabelFollows,  // `,le="` (or `{le="` without labels)
  };

  // The label values as exported (valid until the next call).
  absl::Span<const absl::string_view> Exported(FamilyId family,
                                               LabelValues values) {
    return labeler_.Values(family, values, &values_);
  }

  // Writes `series{l0="v0",l1="v1"` and `close`, leaving room for `extra`
  // more bytes; returns the cursor, uncommitted.
  char* WriteSeries(absl::string_view series, const FamilyText& f,
                    absl::Span<const absl::string_view> values, Close close,
                    size_t extra) {
    assert(values.size() == f.label_openers.size());
    size_t room = series.size() + 8 + extra;
    const std::string* opener = f.label_openers.data();
    for (absl::string_view value : values) {
      room += opener++->size() + 2 * value.size();
    }
    char* p = Copy(series, out_->Reserve(room));
    if (values.size() == 0) {
      return Copy(close == kValueFollows ? " " : "{le=\"", p);
    }
    opener = f.label_openers.data();
    for (absl::string_view value : values) {
      p = Copy(*opener++, p);
      p = WriteEscaped(value, kLabelEscapes, p);
    }
    return Copy(close == kValueFollows ? "\"} " : "\",le=\"", p);
  }

  // One sample line: the series, the value `format` writes, a newline.
  template <typename Format>
  void WriteLine(absl::string_view series, const FamilyText& f,
                 absl::Span<const absl::string_view> values, Format format) {
    char* p = WriteSeries(series, f, values, kValueFollows, kMaxNumber + 1);
    p = format(p);
    *p++ = '\n';
    out_->Commit(p);
  }

  Writer* const out_;
  DependencyLabeler labeler_;
  std::array<absl::string_view, kMaxLabels> values_;  // Exported's result
  std::vector<FamilyText> families_;                  // indexed by FamilyId
};

// Bytes a typical breaker adds to `def`'s samples: a guess for reserve().
size_t BytesPerBreaker(const FamilyDef& def) {
  // The name, a short value per label, a number.
  size_t line = def.name.size() + 32 + 24 * def.labels.size();
  if (def.kind == MetricKind::kHistogram) {
    line = (line + 16) * (def.bucket_bounds.size() + 3);
  }
  return line * def.samples_per_breaker;
}

// `# HELP name help` and `# TYPE name type` lines.
std::string FamilyHeader(const FamilyDef& def) {
  std::string header = absl::StrCat("# HELP ", def.name, " ");
  AppendEscapedHelp(def.help, &header);
  absl::StrAppend(&header, "\n# TYPE ", def.name, " ", MetricKindName(def.kind),
                  "\n");
  return header;
}

// Writes one scrape into `writer`, calling `after_block` after each block
// of lines (a family's header, one shard's lines of a family, the
// process-level lines of a family): false from it stops the rendering and
// is returned.
bool RenderExposition(const Registry& registry, const ProcessStats& stats,
                      DependencyLabel label, Writer* writer,
                      absl::FunctionRef<bool()> after_block) {
  TextSink sink(writer, label);
  // kOmit: every per-breaker family comes from the sums, read at once.
  BreakerSnapshot total;
  std::optional<size_t> breakers;
  if (label == DependencyLabel::kOmit) breakers = registry.SumCounters(&total);
  for (int i = 0; i < kFamilyCount; ++i) {
    const FamilyId id = static_cast<FamilyId>(i);
    if (!FamilyExported(id, stats, label)) continue;
    writer->Append(FamilyHeader(Family(id)));
    const FamilySet only = OnlyFamily(id);
    if (!PerBreakerFamily(id)) {
      EmitProcessSamples(registry, stats, breakers.value_or(0), only, &sink);
    } else if (label == DependencyLabel::kOmit) {
      EmitBreakerSamples(total, only, &sink);
    } else {
      // One family at a time keeps its lines together, as the format
      // requires, with one shard's lines in memory at a time; the shard's
      // lock is held while they are written (no I/O).
      size_t seen = 0;
      const std::function<void(const BreakerSnapshot&)> emit =
          [&](const BreakerSnapshot& s) {
            ++seen;
            EmitBreakerSamples(s, only, &sink);
          };
      for (size_t shard = 0; shard < Registry::kShardCount; ++shard) {
        registry.ForEachInShard(shard, emit);
        if (!after_block()) return false;
      }
      // breakerd_breakers: as many as breakerd_state has samples.
      if (!breakers.has_value()) breakers = seen;
    }
    if (!after_block()) return false;
  }
  return true;
}

}  // namespace

void AppendEscapedLabelValue(absl::string_view value, std::string* out) {
  AppendEscaped(value, kLabelEscapes, out);
}

void AppendEscapedHelp(absl::string_view help, std::string* out) {
  AppendEscaped(help, kHelpEscapes, out);
}

void AppendSampleValue(double value, std::string* out) {
  char buf[kMaxNumber];
  out->append(buf, FormatValue(value, buf) - buf);
}

bool WriteTextExposition(const Registry& registry, const ProcessStats& stats,
                         DependencyLabel label, size_t chunk_bytes,
                         std::string* buffer,
                         absl::FunctionRef<bool(absl::string_view)> write) {
  buffer->clear();
  Writer writer(buffer, chunk_bytes + chunk_bytes / 4);
  // Hands what is written to `write` once there is a piece's worth, or
  // whatever there is at the end.
  auto flush = [&](bool last) {
    if (writer.size() == 0 || (!last && writer.size() < chunk_bytes)) {
      return true;
    }
    const bool written = write(writer.Written(0));
    writer.Rewind(0);
    return written;
  };
  return RenderExposition(registry, stats, label, &writer,
                          [&] { return flush(/*last=*/false); }) &&
         flush(/*last=*/true);
}

void AppendTextExposition(const Registry& registry, const ProcessStats& stats,
                          std::string* out, DependencyLabel label) {
  size_t expected = 4096;
  for (int i = 0; i < kFamilyCount; ++i) {
    expected +=
        registry.size() * BytesPerBreaker(Family(static_cast<FamilyId>(i)));
  }
  Writer writer(out, expected);
  RenderExposition(registry, stats, label, &writer, [] { return true; });
}

}  // namespace breakerd

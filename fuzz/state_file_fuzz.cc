// state_file_fuzz: arbitrary bytes as a --state-file -> ParseState
// (server/state/state_file.h), then RestoreState into a Registry on a
// FakeClock and CollectState back out.
//
// Invariants, each an abort when broken:
//  - ParseState returns OK or INVALID_ARGUMENT; an error's message starts
//    with "line <n>: " where n is a line of the text (or names the size
//    limit, for text over kMaxStateFileBytes / kMaxStateFileLines).
//  - An OK result holds one entry per line after the header, each inside
//    the format's rules (valid name, state open / forced_open /
//    forced_closed, open_until 0 for the forced states and at most
//    kMaxSavedUnixMillis, escalation 0..64), no name twice.
//  - Round trip: FormatState(parsed) parses to the same entries, formats
//    to the same text again, and equals the input once leading zeros of
//    the two numbers are dropped (the only freedom the format leaves).
//  - RestoreState applies every entry except open ones whose cooldown
//    ended more than stale_after ago (none fails); CollectState at the same
//    instant gives back exactly the applied entries: forced ones as they
//    were, open ones with the same escalation and open_until = saved,
//    raised to now (a cooldown already over reads as half-open now) and
//    capped at now + 1 year (the engine's bound on an open period taken
//    from elsewhere).
//  - The restore is checked twice: under the default policy, and under
//    one with hung calls (inflight.hang_after) and gentle recovery
//    (recovery.ramp) on. Either way a restored breaker has no permit out,
//    no hung call and no ramp (admit_share 1: a restored open period is
//    not a probe's close), and none is evicted as idle, even past
//    limits.idle_ttl.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "fuzz/fuzz_check.h"
#include "server/engine/clock.h"
#include "server/engine/policy.h"
#include "server/engine/registry.h"
#include "server/state/state_file.h"

namespace breakerd {
namespace {

// The wall-clock "now" of the restore (2023-11-14T22:13:20Z) and the
// default --state-stale-after.
constexpr int64_t kNowUnixMs = 1700000000000;
constexpr absl::Duration kStaleAfter = absl::Minutes(10);

// Breaker::ApplyExternal bounds an open period taken from elsewhere to a
// year (server/engine/breaker.cc, kMaxExternalOpen), since commit 1130c5c:
// before it, an entry ending more than ~292 years after now overflowed the
// clock's int64 nanoseconds (fuzz/crashes/state_file_fuzz/, found here).
constexpr absl::Duration kMaxExternalOpen = absl::Hours(24 * 365);

std::string EntryText(const SavedBreaker& b) {
  return absl::StrCat(b.dependency, " ", StateName(b.state), " ",
                      b.open_until_unix_ms, " ", b.escalation_level, " ",
                      b.decided_unix_ms);
}

// What FormatState writes for the same entries: the input in version 2,
// with leading zeros dropped from the numbers of each entry line (a
// version 1 input gains the header of version 2 and a decision time of 0
// on each line).
std::string Canonical(absl::string_view text) {
  std::vector<std::string> lines = absl::StrSplit(text, '\n');
  const bool version1 = !lines.empty() && lines[0] == kStateFileHeaderV1;
  if (version1) lines[0] = std::string(kStateFileHeader);
  for (size_t i = 1; i < lines.size(); ++i) {
    std::vector<std::string> fields = absl::StrSplit(lines[i], ' ');
    if (fields.size() != (version1 ? 4u : 5u)) continue;
    if (version1) fields.push_back("0");
    for (size_t f = 2; f < 5; ++f) {
      const size_t nz = fields[f].find_first_not_of('0');
      fields[f] = nz == std::string::npos ? "0" : fields[f].substr(nz);
    }
    lines[i] = absl::StrJoin(fields, " ");
  }
  return absl::StrJoin(lines, "\n");
}

void CheckEntries(const std::vector<SavedBreaker>& entries, size_t lines) {
  FUZZ_CHECK(entries.size() + 1 == lines, entries.size(), " entries, ", lines,
             " lines");
  std::map<std::string, int> seen;
  for (const SavedBreaker& b : entries) {
    const std::string what = EntryText(b);
    FUZZ_CHECK(ValidateDependency(b.dependency).ok(), what);
    FUZZ_CHECK(++seen[b.dependency] == 1, what, " twice");
    FUZZ_CHECK(b.state == State::kOpen || b.state == State::kForcedOpen ||
                   b.state == State::kForcedClosed,
               what);
    FUZZ_CHECK(b.open_until_unix_ms >= 0 &&
                   b.open_until_unix_ms <= kMaxSavedUnixMillis,
               what);
    FUZZ_CHECK(b.state == State::kOpen || b.open_until_unix_ms == 0, what);
    FUZZ_CHECK(b.decided_unix_ms >= 0 &&
                   b.decided_unix_ms <= kMaxSavedUnixMillis &&
                   (b.state != State::kOpen || b.decided_unix_ms == 0),
               what);
    FUZZ_CHECK(b.escalation_level <= kMaxSavedEscalation, what);
  }
}

// The policies a restore is checked under: the defaults, and the defaults
// with hung calls and gentle recovery on.
std::shared_ptr<const PolicySet> PolicySetFor(bool hang_and_ramp) {
  auto set = std::make_shared<PolicySet>();
  if (hang_and_ramp) {
    Policy p;
    p.inflight.hang_after = absl::Seconds(30);
    p.recovery.ramp = absl::Minutes(1);
    p.recovery.start_share = 0.1;
    set->defaults = std::make_shared<const Policy>(p);
  }
  return set;
}

void CheckRestore(const std::vector<SavedBreaker>& entries,
                  bool hang_and_ramp) {
  const absl::Time now_wall = absl::FromUnixMillis(kNowUnixMs);
  int stale = 0;
  for (const SavedBreaker& b : entries) {
    if (b.state == State::kOpen &&
        now_wall - absl::FromUnixMillis(b.open_until_unix_ms) > kStaleAfter) {
      ++stale;
    }
  }

  FakeClock clock;
  const std::shared_ptr<const PolicySet> set = PolicySetFor(hang_and_ramp);
  Registry registry(set, &clock, /*permit_secret=*/1);
  const RestoreStats stats =
      RestoreState(&registry, entries, now_wall, kStaleAfter);
  FUZZ_CHECK(stats.failed == 0, stats.failed, " failed");
  FUZZ_CHECK(stats.skipped_stale == stale, stats.skipped_stale, " stale, want ",
             stale);
  FUZZ_CHECK(
      stats.restored + stats.skipped_stale == static_cast<int>(entries.size()),
      stats.restored, " restored of ", entries.size());

  std::vector<SavedBreaker> want;
  for (const SavedBreaker& b : entries) {
    if (b.state != State::kOpen) {
      // The decision time is the fleet's to keep (FleetSync::DecidedAt):
      // without a fleet none is written back.
      SavedBreaker w = b;
      w.decided_unix_ms = 0;
      want.push_back(w);
    } else if (now_wall - absl::FromUnixMillis(b.open_until_unix_ms) <=
               kStaleAfter) {
      SavedBreaker w = b;
      w.open_until_unix_ms =
          std::clamp(b.open_until_unix_ms, kNowUnixMs,
                     kNowUnixMs + absl::ToInt64Milliseconds(kMaxExternalOpen));
      want.push_back(w);
    }
  }
  std::sort(want.begin(), want.end(),
            [](const SavedBreaker& a, const SavedBreaker& b) {
              return a.dependency < b.dependency;
            });
  const std::vector<SavedBreaker> got = CollectState(registry, now_wall);
  FUZZ_CHECK(got.size() == want.size(), got.size(), " collected, want ",
             want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    FUZZ_CHECK(got[i] == want[i], "collected ", EntryText(got[i]), ", want ",
               EntryText(want[i]));
  }

  // Nothing of the permits or of a ramp comes with a restore.
  registry.ForEach([&](const BreakerSnapshot& s) {
    FUZZ_CHECK(s.inflight == 0 && s.hung_calls == 0 && s.admit_share == 1,
               s.dependency, " restored with inflight ", s.inflight,
               ", hung calls ", s.hung_calls, ", admit_share ", s.admit_share,
               hang_and_ramp ? " (hang_after and ramp on)" : "");
  });
  // A restored breaker is open or forced: never idle.
  clock.Advance(set->limits.idle_ttl + absl::Hours(1));
  const size_t restored = registry.size();
  FUZZ_CHECK(registry.EvictIdle() == 0 && registry.size() == restored,
             registry.size(), " of ", restored,
             " restored breakers left after EvictIdle");
}

}  // namespace
}  // namespace breakerd

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace breakerd;  // NOLINT
  const absl::string_view text(reinterpret_cast<const char*>(data), size);
  const size_t newlines =
      static_cast<size_t>(std::count(text.begin(), text.end(), '\n'));
  const size_t lines = newlines + (!text.empty() && text.back() != '\n');

  const absl::StatusOr<std::vector<SavedBreaker>> parsed = ParseState(text);
  if (!parsed.ok()) {
    const absl::Status& s = parsed.status();
    FUZZ_CHECK(absl::IsInvalidArgument(s), s.ToString());
    if (text.size() > kMaxStateFileBytes || lines > kMaxStateFileLines) {
      FUZZ_CHECK(absl::StrContains(s.message(), "over the limit"),
                 s.ToString());
      return 0;
    }
    FUZZ_CHECK(absl::StartsWith(s.message(), "line "), s.ToString());
    absl::string_view rest = s.message().substr(5);
    const size_t colon = rest.find(": ");
    FUZZ_CHECK(colon != absl::string_view::npos && colon + 2 < rest.size(),
               s.ToString());
    size_t n = 0;
    FUZZ_CHECK(absl::SimpleAtoi(rest.substr(0, colon), &n), s.ToString());
    FUZZ_CHECK(n >= 1 && n <= std::max<size_t>(lines, 1), s.ToString(), " (",
               lines, " lines)");
    return 0;
  }

  CheckEntries(*parsed, lines);

  const std::string formatted = FormatState(*parsed);
  const absl::StatusOr<std::vector<SavedBreaker>> again = ParseState(formatted);
  FUZZ_CHECK(again.ok(), again.status().ToString(), "\n--- formatted:\n",
             formatted);
  FUZZ_CHECK(*again == *parsed, "entries differ after a round trip");
  FUZZ_CHECK(FormatState(*again) == formatted, "formatting is not stable");
  FUZZ_CHECK(formatted == Canonical(text), "--- formatted:\n", formatted,
             "--- input (canonical):\n", Canonical(text));

  CheckRestore(*parsed, /*hang_and_ramp=*/false);
  CheckRestore(*parsed, /*hang_and_ramp=*/true);
  return 0;
}

#include "server/state/state_file.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/engine/clock.h"
#include "server/engine/registry.h"
#include "server/log/json_log.h"
#include "server/state/state_keeper.h"
#include "server/state/state_saver.h"

namespace breakerd {
namespace {

using absl::Seconds;
using ::testing::HasSubstr;
using ::testing::Not;

// The state changes only (not created, evicted, ramp done, reload).
class RecordingObserver : public TransitionObserver {
 public:
  void OnTransition(const Transition& t) override {
    if (IsStateChange(t.reason)) seen.push_back(t);
  }
  std::vector<Transition> seen;
};

// Two failures trip; cooldown 10 s doubling to 80 s, no jitter.
std::shared_ptr<const PolicySet> Policies(uint32_t max_breakers = 10000) {
  auto set = std::make_shared<PolicySet>();
  auto defaults = std::make_shared<Policy>();
  defaults->consecutive_failures = 2;
  defaults->failure_rate.threshold = 0;
  defaults->cooldown.base = Seconds(10);
  defaults->cooldown.max = Seconds(80);
  defaults->cooldown.jitter = 0;
  set->defaults = defaults;
  set->limits.max_breakers = max_breakers;
  return set;
}

// A wall-clock instant for the test: only differences matter.
const absl::Time kWall = absl::FromUnixSeconds(1700000000);

SavedBreaker Saved(std::string dependency, State state, int64_t open_until,
                   uint32_t escalation) {
  SavedBreaker b;
  b.dependency = std::move(dependency);
  b.state = state;
  b.open_until_unix_ms = open_until;
  b.escalation_level = escalation;
  return b;
}

class StateFileTest : public ::testing::Test {
 protected:
  StateFileTest() : registry_(Policies(), &clock_, 42) {}

  static void Report(Registry& registry, absl::string_view dep, uint64_t permit,
                     OutcomeClass c) {
    ReportRequestFacts f;
    f.outcome.explicit_class = static_cast<int>(c);
    auto r = registry.Report(dep, permit, f);
    ASSERT_TRUE(r.ok()) << r.status();
  }
  static void Fail(Registry& registry, absl::string_view dep, int n) {
    for (int i = 0; i < n; ++i) {
      auto a = registry.Acquire(dep, 0);
      ASSERT_TRUE(a.ok()) << a.status();
      ASSERT_TRUE(a->allowed);
      Report(registry, dep, a->permit, OutcomeClass::kTimeout);
    }
  }
  // Sends the probe of a half-open breaker and fails it.
  static void FailProbe(Registry& registry, absl::string_view dep) {
    auto a = registry.Acquire(dep, 0);
    ASSERT_TRUE(a.ok()) << a.status();
    ASSERT_TRUE(a->probe);
    Report(registry, dep, a->permit, OutcomeClass::kServerError);
  }
  // Trips `dep` and fails one probe: open for 20 s at escalation 1.
  void TripAndEscalate(absl::string_view dep) {
    Fail(registry_, dep, 2);
    clock_.Advance(Seconds(10));
    FailProbe(registry_, dep);
    BreakerSnapshot s = *registry_.Get(dep);
    ASSERT_EQ(s.state, State::kOpen);
    ASSERT_EQ(s.escalation_level, 1u);
    ASSERT_EQ(s.retry_after, Seconds(20));
  }

  // Collect -> Format -> Parse, as a shutdown and a start would.
  std::vector<SavedBreaker> SaveAndLoad(absl::Time now_wall) {
    std::string text = FormatState(CollectState(registry_, now_wall));
    absl::StatusOr<std::vector<SavedBreaker>> parsed = ParseState(text);
    EXPECT_TRUE(parsed.ok()) << parsed.status() << "\n" << text;
    return parsed.ok() ? *parsed : std::vector<SavedBreaker>{};
  }

  FakeClock clock_;
  Registry registry_;
  // The restarted process.
  FakeClock restarted_clock_;
  Registry restarted_{Policies(), &restarted_clock_, 43};
};

TEST_F(StateFileTest, RoundTripKeepsStatesEscalationAndCooldownLeft) {
  TripAndEscalate("dep/open");
  clock_.Advance(Seconds(5));  // 15 s of cooldown left
  ASSERT_TRUE(registry_.ForceOpen("dep/forced-open").ok());
  ASSERT_TRUE(registry_.ForceClose("dep/forced-closed").ok());
  Fail(registry_, "dep/closed", 1);  // a failure streak, but plain closed

  std::vector<SavedBreaker> saved = CollectState(registry_, kWall);
  const int64_t wall_ms = absl::ToUnixMillis(kWall);
  EXPECT_THAT(saved, ::testing::ElementsAre(
                         Saved("dep/forced-closed", State::kForcedClosed, 0, 0),
                         Saved("dep/forced-open", State::kForcedOpen, 0, 0),
                         Saved("dep/open", State::kOpen, wall_ms + 15000, 1)));
  EXPECT_EQ(FormatState(saved),
            absl::StrCat("breakerd-state 2\n"
                         "dep/forced-closed forced_closed 0 0 0\n"
                         "dep/forced-open forced_open 0 0 0\n"
                         "dep/open open ",
                         wall_ms + 15000, " 1 0\n"));

  std::vector<SavedBreaker> loaded = SaveAndLoad(kWall);
  EXPECT_EQ(loaded, saved);

  // The new process starts 2 s later (wall clock).
  RecordingObserver observer;
  restarted_.AddObserver(&observer);
  RestoreStats stats =
      RestoreState(&restarted_, loaded, kWall + Seconds(2), absl::Minutes(10));
  EXPECT_EQ(stats.restored, 3);
  EXPECT_EQ(stats.skipped_stale, 0);
  EXPECT_EQ(stats.failed, 0);

  EXPECT_EQ(restarted_.size(), 3u);
  BreakerSnapshot open = *restarted_.Get("dep/open");
  EXPECT_EQ(open.state, State::kOpen);
  EXPECT_EQ(open.escalation_level, 1u);
  EXPECT_EQ(open.retry_after, Seconds(13));
  EXPECT_EQ(restarted_.Get("dep/forced-open")->state, State::kForcedOpen);
  EXPECT_EQ(restarted_.Get("dep/forced-closed")->state, State::kForcedClosed);
  EXPECT_FALSE(restarted_.Get("dep/closed").ok());

  ASSERT_EQ(observer.seen.size(), 3u);
  for (const Transition& t : observer.seen) {
    EXPECT_TRUE(t.external) << t.dependency;
    if (t.dependency == "dep/open") {
      EXPECT_EQ(t.reason, TransitionReason::kRestored);
    }
  }

  // The restored cooldown runs out on the new clock as it would have.
  restarted_clock_.Advance(Seconds(13));
  EXPECT_EQ(restarted_.Get("dep/open")->state, State::kHalfOpen);
}

TEST_F(StateFileTest, HalfOpenIsRestoredHalfOpenAndEscalatesFromTheSavedLevel) {
  TripAndEscalate("dep/a");
  clock_.Advance(Seconds(25));
  ASSERT_EQ(registry_.Get("dep/a")->state, State::kHalfOpen);

  std::vector<SavedBreaker> loaded = SaveAndLoad(kWall);
  ASSERT_EQ(loaded.size(), 1u);
  EXPECT_EQ(loaded[0], Saved("dep/a", State::kOpen, absl::ToUnixMillis(kWall),
                             /*escalation=*/1));

  RestoreStats stats =
      RestoreState(&restarted_, loaded, kWall + Seconds(3), absl::Minutes(10));
  EXPECT_EQ(stats.restored, 1);
  BreakerSnapshot s = *restarted_.Get("dep/a");
  EXPECT_EQ(s.state, State::kHalfOpen);
  EXPECT_EQ(s.escalation_level, 1u);

  // A failed probe escalates from level 1: 10 s * 2^2.
  FailProbe(restarted_, "dep/a");
  s = *restarted_.Get("dep/a");
  EXPECT_EQ(s.state, State::kOpen);
  EXPECT_EQ(s.escalation_level, 2u);
  EXPECT_EQ(s.retry_after, Seconds(40));
}

TEST_F(StateFileTest, ForcedStateKeepsTheEscalationBeneathIt) {
  TripAndEscalate("dep/a");
  ASSERT_TRUE(registry_.ForceOpen("dep/a").ok());

  std::vector<SavedBreaker> loaded = SaveAndLoad(kWall);
  ASSERT_EQ(loaded.size(), 1u);
  EXPECT_EQ(loaded[0], Saved("dep/a", State::kForcedOpen, 0, 1));

  EXPECT_EQ(
      RestoreState(&restarted_, loaded, kWall, absl::Minutes(10)).restored, 1);
  BreakerSnapshot s = *restarted_.Get("dep/a");
  EXPECT_EQ(s.state, State::kForcedOpen);
  EXPECT_EQ(s.escalation_level, 1u);
  // Reset clears both, as it would have before the restart.
  s = *restarted_.Reset("dep/a");
  EXPECT_EQ(s.state, State::kClosed);
  EXPECT_EQ(s.escalation_level, 0u);
}

TEST_F(StateFileTest, CooldownEndIsRoundedUpToTheMillisecond) {
  ASSERT_TRUE(registry_
                  .ApplyExternal("dep/a",
                                 {ExternalState::Kind::kOpen,
                                  Seconds(7) + absl::Microseconds(300), 0},
                                 TransitionReason::kFleet)
                  .ok());
  std::vector<SavedBreaker> saved = CollectState(registry_, kWall);
  ASSERT_EQ(saved.size(), 1u);
  EXPECT_EQ(saved[0].open_until_unix_ms, absl::ToUnixMillis(kWall) + 7001);
}

TEST_F(StateFileTest, StaleOpenEntriesAreSkippedForcedOnesNever) {
  const int64_t wall_ms = absl::ToUnixMillis(kWall);
  const int64_t minute = 60 * 1000;
  std::vector<SavedBreaker> saved = {
      // The cooldown ended 11 min ago: the outage is long forgiven.
      Saved("dep/stale", State::kOpen, wall_ms - 11 * minute, 3),
      // Ended exactly stale_after ago: still restored (half-open).
      Saved("dep/edge", State::kOpen, wall_ms - 10 * minute, 2),
      Saved("dep/forced", State::kForcedOpen, 0, 0),
  };
  RestoreStats stats =
      RestoreState(&restarted_, saved, kWall, absl::Minutes(10));
  EXPECT_EQ(stats.restored, 2);
  EXPECT_EQ(stats.skipped_stale, 1);
  EXPECT_EQ(stats.failed, 0);
  EXPECT_FALSE(restarted_.Get("dep/stale").ok());
  EXPECT_EQ(restarted_.Get("dep/edge")->state, State::kHalfOpen);
  EXPECT_EQ(restarted_.Get("dep/edge")->escalation_level, 2u);
  EXPECT_EQ(restarted_.Get("dep/forced")->state, State::kForcedOpen);
}

TEST_F(StateFileTest, RefusedEntriesCountAsFailedAndTheRestStillApply) {
  FakeClock clock;
  Registry small(Policies(/*max_breakers=*/1), &clock);
  std::vector<SavedBreaker> saved = {
      Saved("dep/a", State::kForcedOpen, 0, 0),
      Saved("dep/b", State::kForcedClosed, 0, 0),  // past the cap
      Saved("bad name", State::kOpen, absl::ToUnixMillis(kWall), 0),
      Saved("dep/c", State::kClosed, 0, 0),  // never saved
  };
  RestoreStats stats = RestoreState(&small, saved, kWall, absl::Minutes(10));
  EXPECT_EQ(stats.restored, 1);
  EXPECT_EQ(stats.failed, 3);
  EXPECT_EQ(small.Get("dep/a")->state, State::kForcedOpen);
}

TEST_F(StateFileTest, EscalationIsClampedToWhatTheFileHolds) {
  ASSERT_TRUE(registry_
                  .ApplyExternal("dep/a",
                                 {ExternalState::Kind::kOpen, Seconds(80), 100},
                                 TransitionReason::kFleet)
                  .ok());
  std::vector<SavedBreaker> loaded = SaveAndLoad(kWall);
  ASSERT_EQ(loaded.size(), 1u);
  EXPECT_EQ(loaded[0].escalation_level, kMaxSavedEscalation);
}

TEST(ParseStateTest, AcceptsAHeaderAlone) {
  absl::StatusOr<std::vector<SavedBreaker>> parsed =
      ParseState("breakerd-state 1\n");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_TRUE(parsed->empty());
  EXPECT_EQ(FormatState({}), "breakerd-state 2\n");
}

// Version 2 keeps when an operator decided a forced state (fleet mode), so
// the newest decision still wins after a restart; version 1 files, without
// it, are still read.
TEST(ParseStateTest, ADecisionTimeRoundTripsAndVersionOneStillReads) {
  SavedBreaker forced = Saved("dep/f", State::kForcedOpen, 0, 2);
  forced.decided_unix_ms = 1800000000123;
  const std::vector<SavedBreaker> saved = {
      forced, Saved("dep/o", State::kOpen, 1800000009000, 1)};
  const std::string text = FormatState(saved);
  EXPECT_EQ(text,
            "breakerd-state 2\n"
            "dep/f forced_open 0 2 1800000000123\n"
            "dep/o open 1800000009000 1 0\n");
  absl::StatusOr<std::vector<SavedBreaker>> parsed = ParseState(text);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(*parsed, saved);

  parsed = ParseState("breakerd-state 1\ndep/f forced_closed 0 0\n");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  ASSERT_EQ(parsed->size(), 1u);
  EXPECT_EQ((*parsed)[0].state, State::kForcedClosed);
  EXPECT_EQ((*parsed)[0].decided_unix_ms, 0);

  for (const auto& [bad, error] :
       std::vector<std::pair<std::string, std::string>>{
           {"breakerd-state 2\ndep/f forced_open 0 0\n",
            "line 2: must have 5 fields"},
           {"breakerd-state 2\ndep/o open 1 0 5\n",
            "line 2: decided_unix_ms: must be 0 for open"},
           {"breakerd-state 2\ndep/f forced_open 0 0 -1\n",
            "line 2: decided_unix_ms: must be an integer"},
           {"breakerd-state 1\ndep/f forced_open 0 0 5\n",
            "line 2: must have 4 fields"}}) {
    EXPECT_THAT(ParseState(bad).status().message(), HasSubstr(error)) << bad;
  }
}

TEST_F(StateFileTest, ForcedStatesAreSavedWithTheirDecisionTime) {
  ASSERT_TRUE(registry_.ForceOpen("dep/forced-open").ok());
  ASSERT_TRUE(registry_.ForceClose("dep/forced-closed").ok());
  std::vector<SavedBreaker> saved =
      CollectState(registry_, kWall, [](absl::string_view dep) -> int64_t {
        return dep == "dep/forced-open" ? 1800000000500 : 0;
      });
  ASSERT_EQ(saved.size(), 2u);
  EXPECT_EQ(saved[0].decided_unix_ms, 0);  // dep/forced-closed: unknown
  EXPECT_EQ(saved[1].decided_unix_ms, 1800000000500);
}

struct Corrupt {
  const char* name;
  std::string text;
  std::string message;  // a substring of the error
};

void PrintTo(const Corrupt& c, std::ostream* os) { *os << c.name; }

class ParseStateCorruptTest : public ::testing::TestWithParam<Corrupt> {};

TEST_P(ParseStateCorruptTest, IsRejectedNamingTheLineAndField) {
  absl::StatusOr<std::vector<SavedBreaker>> parsed =
      ParseState(GetParam().text);
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(parsed.status().message()),
              HasSubstr(GetParam().message));
}

const char kOk[] = "breakerd-state 1\ndep/a open 1700000000000 1\n";

INSTANTIATE_TEST_SUITE_P(
    Inputs, ParseStateCorruptTest,
    ::testing::Values(
        Corrupt{"Empty", "", "line 1: header: missing"},
        Corrupt{"NoHeader", "dep/a open 1 1\n", "line 1: header: must be"},
        Corrupt{"OtherVersion", "breakerd-state 3\n",
                "line 1: header: unsupported version \"3\""},
        Corrupt{"BadStateName",
                absl::StrCat(kOk, "dep/b half_open 1700000000000 0\n"),
                "line 3: state: must be one of open, forced_open, "
                "forced_closed (got \"half_open\")"},
        Corrupt{"BadNumber", absl::StrCat(kOk, "dep/b open 17e11 0\n"),
                "line 3: open_until_unix_ms: must be an integer"},
        Corrupt{"NegativeNumber", absl::StrCat(kOk, "dep/b open -5 0\n"),
                "line 3: open_until_unix_ms: must be an integer"},
        Corrupt{"OpenUntilOnForced",
                absl::StrCat(kOk, "dep/b forced_open 5 0\n"),
                "line 3: open_until_unix_ms: must be 0 for forced_open"},
        Corrupt{"EscalationTooHigh", absl::StrCat(kOk, "dep/b open 1 65\n"),
                "line 3: escalation: must be an integer 0..64"},
        Corrupt{"EscalationSigned", absl::StrCat(kOk, "dep/b open 1 +1\n"),
                "line 3: escalation: must be an integer 0..64"},
        Corrupt{"TooManyFields", absl::StrCat(kOk, "dep/b open 1 1 extra\n"),
                "line 3: must have 4 fields"},
        Corrupt{"TooFewFields", absl::StrCat(kOk, "dep/b open 1\n"),
                "line 3: must have 4 fields"},
        Corrupt{"DoubleSpace", absl::StrCat(kOk, "dep/b  open 1 1\n"),
                "line 3: must have 4 fields"},
        Corrupt{"InvalidDependency", absl::StrCat(kOk, "dep/b! open 1 1\n"),
                "line 3: dependency: byte 5"},
        Corrupt{"LongDependency",
                absl::StrCat(kOk, std::string(201, 'x'), " open 1 1\n"),
                "line 3: dependency: must be at most 200 bytes"},
        Corrupt{"Duplicate", absl::StrCat(kOk, "dep/a forced_open 0 0\n"),
                "line 3: dependency: \"dep/a\" already appeared on line 2"},
        Corrupt{"EmptyLine", absl::StrCat(kOk, "\n"), "line 3: empty line"},
        Corrupt{"CarriageReturn", "breakerd-state 1\ndep/a open 1 1\r\n",
                "line 2: escalation: must be an integer"},
        Corrupt{"Truncated", "breakerd-state 1\ndep/a open 17000",
                "line 2: missing final newline"}),
    [](const ::testing::TestParamInfo<Corrupt>& info) {
      return std::string(info.param.name);
    });

TEST(ParseStateTest, RefusesMoreLinesThanTheLimitUnread) {
  absl::StatusOr<std::vector<SavedBreaker>> parsed = ParseState(absl::StrCat(
      "breakerd-state 1\n", std::string(kMaxStateFileLines, '\n')));
  EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(parsed.status().message()),
              HasSubstr("1000001 lines, over the limit of 1000000"));
}

TEST(ParseStateTest, RefusesMoreBytesThanTheLimitUnread) {
  absl::StatusOr<std::vector<SavedBreaker>> parsed =
      ParseState(std::string(kMaxStateFileBytes + 1, 'x'));
  EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(parsed.status().message()),
              HasSubstr("67108865 bytes, over the limit of 67108864"));
}

// A fresh directory under the test's temporary directory.
std::string MakeTempDir() {
  std::string pattern =
      absl::StrCat(::testing::TempDir(), "/bd-state-test-XXXXXX");
  const char* dir = ::mkdtemp(pattern.data());
  EXPECT_NE(dir, nullptr);
  return pattern;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<std::string> ListDir(const std::string& dir) {
  std::vector<std::string> names;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return names;
  while (dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name != "." && name != "..") names.push_back(name);
  }
  ::closedir(d);
  return names;
}

class StateFileIoTest : public ::testing::Test {
 protected:
  void TearDown() override {
    for (const std::string& name : ListDir(dir_)) {
      const std::string p = absl::StrCat(dir_, "/", name);
      if (::unlink(p.c_str()) != 0) ::rmdir(p.c_str());
    }
    ::rmdir(dir_.c_str());
  }

  const std::string dir_ = MakeTempDir();
  const std::string path_ = absl::StrCat(dir_, "/breakerd.state");
};

TEST_F(StateFileIoTest, WritesAtomicallyAndOverwrites) {
  const std::vector<SavedBreaker> first = {
      Saved("dep/a", State::kOpen, 1700000000123, 2)};
  ASSERT_TRUE(WriteStateFile(path_, first).ok());
  EXPECT_EQ(ReadAll(path_), FormatState(first));
  EXPECT_THAT(ListDir(dir_), ::testing::ElementsAre("breakerd.state"));

  const std::vector<SavedBreaker> second = {
      Saved("dep/b", State::kForcedClosed, 0, 0),
      Saved("dep/c", State::kForcedOpen, 0, 1)};
  ASSERT_TRUE(WriteStateFile(path_, second).ok());
  EXPECT_EQ(ReadAll(path_), FormatState(second));
  EXPECT_THAT(ListDir(dir_), ::testing::ElementsAre("breakerd.state"));

  absl::StatusOr<std::vector<SavedBreaker>> read = ReadStateFile(path_);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(*read, second);
}

TEST_F(StateFileIoTest, AFailedWriteLeavesTheOldFileAndNoTemporary) {
  const std::vector<SavedBreaker> old = {
      Saved("dep/a", State::kForcedOpen, 0, 0)};
  ASSERT_TRUE(WriteStateFile(path_, old).ok());
  // The temporary name is taken by a directory: the write cannot start.
  const std::string tmp = absl::StrCat(path_, ".tmp.", ::getpid());
  ASSERT_EQ(::mkdir(tmp.c_str(), 0755), 0);

  absl::Status s =
      WriteStateFile(path_, {Saved("dep/b", State::kForcedOpen, 0, 0)});
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.message()), HasSubstr(path_));
  EXPECT_EQ(ReadAll(path_), FormatState(old));
  ASSERT_EQ(::rmdir(tmp.c_str()), 0);
  EXPECT_THAT(ListDir(dir_), ::testing::ElementsAre("breakerd.state"));
}

TEST_F(StateFileIoTest, AFailedRenameRemovesTheTemporary) {
  // The target is a non-empty directory: the rename over it fails.
  ASSERT_EQ(::mkdir(path_.c_str(), 0755), 0);
  const std::string inside = absl::StrCat(path_, "/x");
  std::ofstream(inside) << "x";

  absl::Status s =
      WriteStateFile(path_, {Saved("dep/a", State::kForcedOpen, 0, 0)});
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.message()), HasSubstr(path_));
  EXPECT_THAT(ListDir(dir_), ::testing::ElementsAre("breakerd.state"));
  ::unlink(inside.c_str());
}

TEST_F(StateFileIoTest, UnwritableDirectoryIsAnErrorNamingThePath) {
  const std::string path = absl::StrCat(dir_, "/missing/breakerd.state");
  absl::Status s = WriteStateFile(path, {});
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(s.message()), HasSubstr(path));
  EXPECT_THAT(std::string(s.message()), HasSubstr("No such file or directory"));

  if (::geteuid() != 0) {  // root writes anywhere
    ASSERT_EQ(::chmod(dir_.c_str(), 0555), 0);
    s = WriteStateFile(path_, {});
    ::chmod(dir_.c_str(), 0755);
    EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied);
    EXPECT_THAT(std::string(s.message()), HasSubstr(path_));
  }
}

TEST_F(StateFileIoTest, MissingFileIsNotFound) {
  absl::StatusOr<std::vector<SavedBreaker>> read = ReadStateFile(path_);
  EXPECT_EQ(read.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(read.status().message()), HasSubstr(path_));
}

TEST_F(StateFileIoTest, CorruptFileErrorsArePrefixedWithThePath) {
  std::ofstream(path_) << "breakerd-state 1\ndep/a open x 0\n";
  absl::StatusOr<std::vector<SavedBreaker>> read = ReadStateFile(path_);
  EXPECT_EQ(read.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(read.status().message()),
              HasSubstr(absl::StrCat(path_, ": line 2: open_until_unix_ms:")));
}

TEST_F(StateFileIoTest, ADirectoryIsNotAStateFile) {
  ASSERT_EQ(::mkdir(path_.c_str(), 0755), 0);
  absl::StatusOr<std::vector<SavedBreaker>> read = ReadStateFile(path_);
  EXPECT_EQ(read.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(read.status().message()), HasSubstr(path_));
}

// Whoever shares the directory (or a permissive umask) cannot read which
// dependencies were forced: the file is the owner's alone.
TEST_F(StateFileIoTest, WrittenFileIsOwnerOnlyWhateverTheUmask) {
  const mode_t old_umask = ::umask(0);
  absl::Status written =
      WriteStateFile(path_, {Saved("dep/a", State::kForcedOpen, 0, 0)});
  ::umask(old_umask);
  ASSERT_TRUE(written.ok()) << written;
  struct stat st;
  ASSERT_EQ(::stat(path_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u) << std::oct << (st.st_mode & 07777);
}

// breakerd writes the state file itself, never as a symlink: one found
// there (a mistake, or planted) is not followed, so its target is neither
// parsed nor quoted.
TEST_F(StateFileIoTest, ASymlinkIsNotFollowed) {
  const std::string target = absl::StrCat(dir_, "/target");
  std::ofstream(target) << "breakerd-state 1\ndep/a forced_open 0 0\n";
  ASSERT_EQ(::symlink(target.c_str(), path_.c_str()), 0);
  absl::StatusOr<std::vector<SavedBreaker>> read = ReadStateFile(path_);
  EXPECT_FALSE(read.ok());
  EXPECT_THAT(std::string(read.status().message()), HasSubstr(path_));
}

// --state-file naming the token file by mistake: the error says the first
// line is not a header, without quoting any of it, and its code
// (FAILED_PRECONDITION) tells the caller not to write over the file.
TEST_F(StateFileIoTest, AFirstLineThatIsNotAHeaderIsNotQuoted) {
  constexpr char kSecret[] = "s3cret-T0KEN-never-quoted";
  std::ofstream(path_) << kSecret << "\n";
  absl::StatusOr<std::vector<SavedBreaker>> read = ReadStateFile(path_);
  EXPECT_EQ(read.status().code(), absl::StatusCode::kFailedPrecondition);
  const std::string message(read.status().message());
  EXPECT_THAT(message, HasSubstr(absl::StrCat(path_, ": line 1: header:")));
  EXPECT_THAT(message, Not(HasSubstr("s3cret"))) << message;
  EXPECT_THAT(message, Not(HasSubstr("T0KEN"))) << message;
  // Nor when it starts like a header.
  std::ofstream(path_) << "breakerd-state " << kSecret << "\n";
  read = ReadStateFile(path_);
  EXPECT_EQ(read.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(read.status().message()), Not(HasSubstr("s3cret")));
  // Nor without a newline (a token file often has none).
  std::ofstream(path_) << kSecret;
  read = ReadStateFile(path_);
  EXPECT_EQ(read.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(read.status().message()), Not(HasSubstr("s3cret")));
}

// A state file of another version, an empty file or a state file that does
// not parse is breakerd's own: an error of the content (INVALID_ARGUMENT),
// and the file may be written over.
TEST_F(StateFileIoTest, AStateFileOfAnyVersionIsOursEvenIfItDoesNotParse) {
  for (const char* text :
       {"", "breakerd-state 3\n", "breakerd-state 1\ndep/a opne 0 0\n",
        "breakerd-state 1"}) {
    std::ofstream(path_) << text;
    absl::StatusOr<std::vector<SavedBreaker>> read = ReadStateFile(path_);
    EXPECT_EQ(read.status().code(), absl::StatusCode::kInvalidArgument) << text;
  }
}

// StateSaver: overrides reach the file when they change, not only at
// shutdown, so a crash after `reset` cannot bring the override back.
class StateSaverTest : public StateFileIoTest {
 protected:
  StateSaverTest() { registry_.AddObserver(&saver_); }

  std::vector<SavedBreaker> OnDisk() {
    absl::StatusOr<std::vector<SavedBreaker>> saved = ReadStateFile(path_);
    EXPECT_TRUE(saved.ok()) << saved.status();
    return saved.ok() ? *saved : std::vector<SavedBreaker>{};
  }

  FakeClock clock_;
  Registry registry_{Policies(), &clock_, 42};
  absl::Time wall_ = absl::FromUnixSeconds(1'800'000'000);
  StateSaver saver_{&registry_, path_, [this] { return wall_; }};
};

TEST_F(StateSaverTest, OverridesAreWrittenWhenTheyChangeAndResetRemovesThem) {
  // Nothing changed yet: nothing written.
  EXPECT_EQ(*saver_.SaveIfStale(), 0u);
  EXPECT_TRUE(absl::IsNotFound(ReadStateFile(path_).status()));

  ASSERT_TRUE(registry_.ForceOpen("search/api").ok());
  ASSERT_TRUE(saver_.SaveIfStale().ok());
  std::vector<SavedBreaker> saved = OnDisk();
  ASSERT_EQ(saved.size(), 1u);
  EXPECT_EQ(saved[0].dependency, "search/api");
  EXPECT_EQ(saved[0].state, State::kForcedOpen);

  ASSERT_TRUE(registry_.Reset("search/api").ok());
  ASSERT_TRUE(saver_.SaveIfStale().ok());
  EXPECT_TRUE(OnDisk().empty());
  // Written once per change.
  EXPECT_EQ(*saver_.SaveIfStale(), 0u);
}

TEST_F(StateSaverTest, OverridesAppliedFromElsewhereAreWrittenToo) {
  ExternalState forced;
  forced.kind = ExternalState::Kind::kForcedClosed;
  ASSERT_TRUE(
      registry_.ApplyExternal("pay/api", forced, TransitionReason::kFleet)
          .ok());
  ASSERT_TRUE(saver_.SaveIfStale().ok());
  std::vector<SavedBreaker> saved = OnDisk();
  ASSERT_EQ(saved.size(), 1u);
  EXPECT_EQ(saved[0].state, State::kForcedClosed);
}

TEST_F(StateSaverTest, OpensAndHealsAreWrittenCooldownElapsingIsNot) {
  auto call = [&](OutcomeClass c) {
    auto a = registry_.Acquire("llm/a", 0);
    ASSERT_TRUE(a.ok());
    ASSERT_TRUE(a->allowed);
    ReportRequestFacts f;
    f.outcome.explicit_class = static_cast<int>(c);
    ASSERT_TRUE(registry_.Report("llm/a", a->permit, f).ok());
  };
  call(OutcomeClass::kTimeout);
  EXPECT_EQ(*saver_.SaveIfStale(), 0u);  // one failure: nothing to save
  call(OutcomeClass::kTimeout);          // trips
  ASSERT_EQ(*saver_.SaveIfStale(), 1u);
  std::vector<SavedBreaker> saved = OnDisk();
  ASSERT_EQ(saved.size(), 1u);
  EXPECT_EQ(saved[0].state, State::kOpen);
  EXPECT_EQ(saved[0].open_until_unix_ms, absl::ToUnixMillis(wall_) + 10000);

  // Half-open follows from the saved cooldown end: no rewrite.
  clock_.Advance(Seconds(10));
  wall_ += Seconds(10);
  call(OutcomeClass::kSuccess);  // the probe: acquired at half-open, heals
  // The heal is written: a crash now must not bring the outage back.
  ASSERT_EQ(*saver_.SaveIfStale(), 0u);
  EXPECT_TRUE(OnDisk().empty());
}

TEST_F(StateSaverTest, HalfOpenAloneDoesNotRewriteTheFile) {
  for (int i = 0; i < 2; ++i) {
    auto a = registry_.Acquire("llm/a", 0);
    ReportRequestFacts f;
    f.outcome.explicit_class = static_cast<int>(OutcomeClass::kTimeout);
    ASSERT_TRUE(registry_.Report("llm/a", a->permit, f).ok());
  }
  ASSERT_TRUE(saver_.SaveIfStale().ok());
  clock_.Advance(Seconds(10));
  ASSERT_TRUE(registry_.Acquire("llm/a", 0)->probe);  // open -> half-open
  EXPECT_EQ(*saver_.SaveIfStale(), 0u);
  EXPECT_EQ(*saver_.Save(), 1u);  // shutdown writes whatever is there
}

TEST_F(StateSaverTest, AFailedWriteIsTriedAgain) {
  StateSaver saver(&registry_, dir_ + "/missing/dir/state");
  registry_.AddObserver(&saver);
  ASSERT_TRUE(registry_.ForceOpen("search/api").ok());
  EXPECT_FALSE(saver.SaveIfStale().ok());
  // Still stale: the next attempt writes again (and fails again here).
  EXPECT_FALSE(saver.SaveIfStale().ok());
}

// StateKeeper: a directory that cannot be written is reported at start,
// then at most once a minute; the shutdown's failed write is logged anyway,
// with the failures not logged since the previous line.
TEST_F(StateFileIoTest, TheShutdownsFailedWriteIsLoggedWhateverTheRateLimit) {
  std::vector<std::string> failed;
  LogWriter previous = SetLogWriterForTesting([&](absl::string_view line) {
    if (absl::StrContains(line, "\"state_save_failed\"")) {
      failed.emplace_back(line);
    }
  });
  FakeClock clock;
  Registry registry(Policies(), &clock, 42);
  const std::string missing = absl::StrCat(dir_, "/not-there/breakerd.state");
  StateKeeper keeper(&registry, missing, absl::Minutes(10));
  ASSERT_EQ(failed.size(), 1u);  // at start
  ASSERT_TRUE(registry.ForceOpen("search/api").ok());
  keeper.Persist();  // within the minute: counted, not logged
  EXPECT_EQ(failed.size(), 1u);
  keeper.SaveFinal();
  SetLogWriterForTesting(std::move(previous));
  ASSERT_EQ(failed.size(), 2u);
  EXPECT_THAT(failed[1], HasSubstr("\"failures\":2"));
  EXPECT_THAT(failed[1], HasSubstr("at shutdown"));
  EXPECT_EQ(keeper.save_failures(), 3u);
}

// The log lines written while the object lives.
class CapturedLog {
 public:
  CapturedLog() {
    previous_ = SetLogWriterForTesting(
        [this](absl::string_view line) { lines_.emplace_back(line); });
  }
  ~CapturedLog() { SetLogWriterForTesting(std::move(previous_)); }

  // The lines holding `text`.
  std::vector<std::string> With(absl::string_view text) const {
    std::vector<std::string> out;
    for (const std::string& line : lines_) {
      if (absl::StrContains(line, text)) out.push_back(line);
    }
    return out;
  }

 private:
  std::vector<std::string> lines_;
  LogWriter previous_;
};

// --state-file naming the token file by a typo: the file is never written
// over (not at start, not after an override, not at shutdown); the error
// names the path and says no state is saved there, without quoting it.
TEST_F(StateFileIoTest, AFileThatIsNotAStateFileIsNeverWrittenOver) {
  constexpr char kToken[] = "Tk9-typo-token-never-overwritten-2f7e\n";
  std::ofstream(path_) << kToken;
  std::vector<std::string> skipped;
  std::vector<std::string> saved;  // state_saved, state_save_failed
  FakeClock clock;
  Registry registry(Policies(), &clock, 42);
  {
    CapturedLog log;
    StateKeeper keeper(&registry, path_, absl::Minutes(10));
    ASSERT_TRUE(registry.ForceOpen("search/api").ok());
    keeper.Persist();
    keeper.SaveFinal();
    EXPECT_FALSE(keeper.saving());
    EXPECT_EQ(keeper.save_failures(), 0u);
    skipped = log.With("\"state_file_skipped\"");
    saved = log.With("\"state_save");
  }

  EXPECT_EQ(ReadAll(path_), kToken);
  EXPECT_THAT(ListDir(dir_), ::testing::ElementsAre("breakerd.state"));
  ASSERT_EQ(skipped.size(), 1u);
  const std::string& line = skipped[0];
  EXPECT_THAT(line, HasSubstr("\"level\":\"error\""));
  EXPECT_THAT(line, HasSubstr(path_));
  EXPECT_THAT(line, HasSubstr("will not save state there"));
  EXPECT_THAT(line, Not(HasSubstr("Tk9"))) << line;
  EXPECT_THAT(line, Not(HasSubstr("never-overwritten"))) << line;
  EXPECT_THAT(saved, ::testing::IsEmpty());
}

// An empty file, and a state file that does not parse, are taken over:
// skipped at start, then written.
TEST_F(StateFileIoTest, AnEmptyOrCorruptStateFileIsTakenOver) {
  for (const char* text : {"", "breakerd-state 1\ndep/a opne 0 0\n"}) {
    std::ofstream(path_) << text;
    FakeClock clock;
    Registry registry(Policies(), &clock, 42);
    StateKeeper keeper(&registry, path_, absl::Minutes(10));
    EXPECT_TRUE(keeper.saving()) << text;
    ASSERT_TRUE(registry.ForceOpen("search/api").ok());
    keeper.SaveFinal();
    EXPECT_EQ(ReadAll(path_),
              FormatState({Saved("search/api", State::kForcedOpen, 0, 0)}))
        << text;
  }
}

}  // namespace
}  // namespace breakerd

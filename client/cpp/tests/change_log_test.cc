// The rate-limited availability log (ChangeLog), alone and as the away /
// back log of SidecarPresence, on a clock and a timer moved by hand: no
// sleeps.
#include "breakerd/internal/change_log.h"

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "breakerd/client.h"
#include "breakerd/internal/clock.h"
#include "breakerd/internal/sidecar_presence.h"
#include "client_fixture.h"
#include "gmock/gmock.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"

namespace breakerd::client::internal {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::SizeIs;

// A clock and a timer that move only when the test says so. Used from the
// test's thread only.
class FakeTime final : public Clock, public Timer {
 public:
  absl::Duration Now() override { return now_; }

  void Schedule(std::function<void()> task, absl::Duration delay) override {
    tasks_.emplace(now_ + std::max(delay, absl::ZeroDuration()),
                   std::move(task));
  }

  // Moves the clock to `to`, running each task due on the way at its time.
  void AdvanceTo(absl::Duration to) {
    while (!tasks_.empty() && tasks_.begin()->first <= to) {
      now_ = std::max(now_, tasks_.begin()->first);
      std::function<void()> task = std::move(tasks_.begin()->second);
      tasks_.erase(tasks_.begin());
      task();
    }
    now_ = std::max(now_, to);
  }

  size_t pending() const { return tasks_.size(); }

 private:
  absl::Duration now_ = absl::Hours(1);
  std::multimap<absl::Duration, std::function<void()>> tasks_;
};

class ChangeLogTest : public ::testing::Test {
 protected:
  absl::Duration At(absl::Duration since_start) { return start_ + since_start; }

  FakeTime time_;
  const absl::Duration start_ = time_.Now();
  std::vector<std::string> lines_;
  ChangeLog log_{
      [this](absl::string_view line) { lines_.push_back(std::string(line)); },
      &time_, &time_};
};

TEST_F(ChangeLogTest, LogsBothLinesOfOneOutageAtOnce) {
  EXPECT_TRUE(log_.Wrong("unreachable"));
  time_.AdvanceTo(At(absl::Milliseconds(50)));
  EXPECT_TRUE(log_.Right("back"));
  EXPECT_THAT(lines_, ElementsAre("unreachable", "back"));
  EXPECT_EQ(time_.pending(), 0u) << "nothing held back";

  // A second outage past the interval logs its lines at once too.
  time_.AdvanceTo(At(ChangeLog::kInterval + absl::Milliseconds(100)));
  log_.Wrong("unreachable 2");
  log_.Right("back 2");
  EXPECT_THAT(lines_,
              ElementsAre("unreachable", "back", "unreachable 2", "back 2"));
}

TEST_F(ChangeLogTest, IgnoresACallThatChangesNothing) {
  EXPECT_FALSE(log_.Right("back")) << "starts right";
  EXPECT_TRUE(log_.Wrong("unreachable"));
  EXPECT_FALSE(log_.Wrong("unreachable again"));
  EXPECT_TRUE(log_.wrong());
  EXPECT_THAT(lines_, ElementsAre("unreachable"));
}

TEST_F(ChangeLogTest, LogsTheStateHeldBackWhenTheIntervalIsUpNotSooner) {
  log_.Wrong("unreachable #1");  // logged
  time_.AdvanceTo(At(absl::Milliseconds(10)));
  log_.Right("back #1");  // logged: the first line of its kind
  time_.AdvanceTo(At(absl::Milliseconds(20)));
  log_.Wrong("unreachable #2");  // held back: "unreachable" 20 ms ago
  EXPECT_THAT(lines_, SizeIs(2));

  time_.AdvanceTo(At(ChangeLog::kInterval - absl::Milliseconds(1)));
  EXPECT_THAT(lines_, SizeIs(2)) << "not before the interval is up";
  time_.AdvanceTo(At(ChangeLog::kInterval));
  ASSERT_THAT(lines_, SizeIs(3));
  EXPECT_EQ(lines_[2],
            "unreachable #2 (1 change not logged since the previous line)");

  // The last "back" line was 10 s ago: the next one is logged at once.
  time_.AdvanceTo(At(ChangeLog::kInterval + absl::Milliseconds(20)));
  log_.Right("back #2");
  ASSERT_THAT(lines_, SizeIs(4));
  EXPECT_EQ(lines_[3], "back #2");
  EXPECT_EQ(time_.pending(), 0u);
}

TEST_F(ChangeLogTest, ALineLoggedWithTheCountCancelsTheHeldBackOne) {
  log_.Wrong("unreachable #1");
  log_.Right("back #1");
  time_.AdvanceTo(At(absl::Seconds(1)));
  log_.Wrong("unreachable #2");  // held back, flush due at 10 s
  time_.AdvanceTo(At(absl::Seconds(2)));
  log_.Right("back #2");  // held back too
  time_.AdvanceTo(At(absl::Seconds(3)));
  log_.Wrong("unreachable #3");
  // At 10 s the "unreachable" interval is up: the state it ended in, once.
  time_.AdvanceTo(At(absl::Seconds(30)));
  EXPECT_THAT(lines_, ElementsAre("unreachable #1", "back #1",
                                  "unreachable #3 (3 changes not logged "
                                  "since the previous line)"));
  EXPECT_EQ(time_.pending(), 0u);
}

// conformance: log-flap
// The client's away / back log (SidecarPresence's) while the sidecar flips
// away and back 100 times within 1 s: the first change is logged at once
// (and the first "back", the first line of its kind), the other flips in
// the 10 s that follow are counted, and when the 10 s are up one line gives
// the state they ended in and the number of flips.
TEST_F(ChangeLogTest, SidecarFlappingAHundredTimesInASecond) {
  SidecarPresence::Options options;
  // Nothing listens there: the probe, woken by each MarkAway, fails.
  const std::string target = absl::StrCat("127.0.0.1:", UnusedPort());
  options.channel =
      grpc::CreateChannel(target, grpc::InsecureChannelCredentials());
  options.target = target;
  options.while_away = "failing open";
  options.log = &log_;
  SidecarPresence presence(options);

  const grpc::Status refused(grpc::StatusCode::UNAVAILABLE,
                             "connection refused");
  constexpr int kFlaps = 100;
  for (int i = 0; i < kFlaps; ++i) {
    time_.AdvanceTo(At(absl::Milliseconds(10 * i)));
    presence.MarkAway(refused);
    ASSERT_TRUE(presence.away());
    time_.AdvanceTo(At(absl::Milliseconds(10 * i + 5)));
    presence.MarkPresent("Watch stream");
    ASSERT_FALSE(presence.away());
  }
  // 995 ms: two lines, the first of each kind.
  ASSERT_THAT(lines_, SizeIs(2));
  EXPECT_THAT(lines_[0], HasSubstr("unreachable (UNAVAILABLE"));
  EXPECT_THAT(lines_[1], HasSubstr("back (Watch stream)"));

  // The held-back line is due 10 s after the first "back" line (at 5 ms).
  time_.AdvanceTo(At(ChangeLog::kInterval + absl::Milliseconds(4)));
  EXPECT_THAT(lines_, SizeIs(2)) << "no line before the 10 s are up";
  time_.AdvanceTo(At(ChangeLog::kInterval + absl::Milliseconds(5)));
  ASSERT_THAT(lines_, SizeIs(3));
  EXPECT_EQ(lines_[2], absl::StrCat("breakerd at ", target,
                                    " back (Watch stream) (", 2 * kFlaps - 2,
                                    " changes not logged since the previous "
                                    "line)"));
  time_.AdvanceTo(At(absl::Minutes(1)));
  EXPECT_THAT(lines_, SizeIs(3));
  EXPECT_EQ(time_.pending(), 0u);
}

// The real timer: a task runs once after its delay, an earlier one first;
// Stop drops what is left.
TEST(ThreadTimerTest, RunsTasksInTheirOrderAndStopDropsTheRest) {
  ThreadTimer timer;
  absl::Mutex mu;
  std::vector<int> ran;
  auto record = [&](int n) {
    return [&, n] {
      absl::MutexLock lock(&mu);
      ran.push_back(n);
    };
  };
  timer.Schedule(record(2), absl::Milliseconds(40));
  timer.Schedule(record(1), absl::Milliseconds(10));
  timer.Schedule(record(3), absl::Hours(1));
  ASSERT_TRUE(WaitUntil([&] {
    absl::MutexLock lock(&mu);
    return ran.size() == 2;
  }));
  timer.Stop();
  timer.Schedule(record(4), absl::ZeroDuration());
  absl::MutexLock lock(&mu);
  EXPECT_THAT(ran, ElementsAre(1, 2));
}

}  // namespace
}  // namespace breakerd::client::internal

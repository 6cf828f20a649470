// The send window alone: a bound on RPCs in flight, reports first, and the
// queue answered at once when breakerd is marked away or the client closes
// (but a late permit going back).
// Callers that wait are threads; the test waits for them to queue (no fixed
// sleeps).
#include "breakerd/internal/send_window.h"

#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/e2e/breakerd_process.h"

namespace breakerd::client::internal {
namespace {

using ::testing::ElementsAre;
using Entry = SendWindow::Entry;
using Lane = SendWindow::Lane;

// Callers on their own threads, noting in order what each Enter returned.
class Callers {
 public:
  explicit Callers(SendWindow* window) : window_(window) {}
  ~Callers() {
    for (std::thread& t : threads_) t.join();
  }

  // Starts a caller named `name` and waits until it is queued.
  void StartQueued(const std::string& name, Lane lane) {
    const int queued = window_->queued();
    threads_.emplace_back([this, name, lane] {
      const Entry entry = window_->Enter(lane);
      absl::MutexLock lock(&mu_);
      answers_.push_back(name + (entry == Entry::kEntered   ? ":entered"
                                 : entry == Entry::kFlushed ? ":flushed"
                                                            : ":closed"));
    });
    ASSERT_TRUE(WaitUntil([&] { return window_->queued() == queued + 1; }));
  }

  bool WaitForAnswers(size_t n) {
    return WaitUntil([&] {
      absl::MutexLock lock(&mu_);
      return answers_.size() == n;
    });
  }

  std::vector<std::string> answers() {
    absl::MutexLock lock(&mu_);
    return answers_;
  }

 private:
  SendWindow* const window_;
  absl::Mutex mu_;
  std::vector<std::string> answers_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> threads_;
};

TEST(SendWindowTest, DefaultLimitIsThirtyTwoAsNodes) {
  SendWindow window;
  for (int i = 0; i < 32; ++i) {
    ASSERT_EQ(window.Enter(Lane::kDecision), Entry::kEntered);
  }
  EXPECT_EQ(window.active(), 32);
  Callers callers(&window);
  callers.StartQueued("33rd", Lane::kDecision);
  EXPECT_EQ(window.active(), 32);
  window.Leave();
  ASSERT_TRUE(callers.WaitForAnswers(1));
  EXPECT_THAT(callers.answers(), ElementsAre("33rd:entered"));
  EXPECT_EQ(window.active(), 32);
}

TEST(SendWindowTest, ReportsGoBeforeDecisionsEachLaneInOrder) {
  SendWindow window(1);
  ASSERT_EQ(window.Enter(Lane::kDecision), Entry::kEntered);
  Callers callers(&window);
  callers.StartQueued("decision-1", Lane::kDecision);
  callers.StartQueued("decision-2", Lane::kDecision);
  callers.StartQueued("report-1", Lane::kReport);
  callers.StartQueued("report-2", Lane::kReport);
  for (size_t answered = 1; answered <= 4; ++answered) {
    window.Leave();
    ASSERT_TRUE(callers.WaitForAnswers(answered));
  }
  EXPECT_THAT(callers.answers(),
              ElementsAre("report-1:entered", "report-2:entered",
                          "decision-1:entered", "decision-2:entered"));
  EXPECT_EQ(window.queued(), 0);
}

TEST(SendWindowTest, FlushAnswersTheQueueAtOnceAndKeepsTheWindowOpen) {
  SendWindow window(1);
  ASSERT_EQ(window.Enter(Lane::kDecision), Entry::kEntered);
  Callers callers(&window);
  callers.StartQueued("decision", Lane::kDecision);
  callers.StartQueued("report", Lane::kReport);
  window.Flush();
  ASSERT_TRUE(callers.WaitForAnswers(2));
  EXPECT_THAT(callers.answers(), ::testing::UnorderedElementsAre(
                                     "decision:flushed", "report:flushed"));
  // The place held is still held; once given back, the next caller enters.
  EXPECT_EQ(window.active(), 1);
  window.Leave();
  EXPECT_EQ(window.Enter(Lane::kDecision), Entry::kEntered);
}

TEST(SendWindowTest, CloseAnswersTheQueueAndEveryLaterCaller) {
  SendWindow window(1);
  ASSERT_EQ(window.Enter(Lane::kReport), Entry::kEntered);
  Callers callers(&window);
  callers.StartQueued("decision", Lane::kDecision);
  window.Close();
  ASSERT_TRUE(callers.WaitForAnswers(1));
  EXPECT_THAT(callers.answers(), ElementsAre("decision:closed"));
  window.Leave();
  EXPECT_EQ(window.Enter(Lane::kDecision), Entry::kClosed);
  EXPECT_EQ(window.Enter(Lane::kReport), Entry::kClosed);
}

TEST(SendWindowTest, ALatePermitIsNeitherFlushedNorRefusedOnClose) {
  SendWindow window(1);
  ASSERT_EQ(window.Enter(Lane::kDecision), Entry::kEntered);
  Callers callers(&window);
  callers.StartQueued("late-permit", Lane::kLatePermit);
  callers.StartQueued("report", Lane::kReport);
  window.Flush();
  ASSERT_TRUE(callers.WaitForAnswers(1));
  EXPECT_THAT(callers.answers(), ElementsAre("report:flushed"));
  window.Close();
  EXPECT_EQ(window.queued(), 1) << "the late permit still waits for a place";
  window.Leave();
  ASSERT_TRUE(callers.WaitForAnswers(2));
  EXPECT_THAT(callers.answers(),
              ElementsAre("report:flushed", "late-permit:entered"));
  window.Leave();
  // Once closed, a late permit still enters; nothing else does.
  EXPECT_EQ(window.Enter(Lane::kLatePermit), Entry::kEntered);
  EXPECT_EQ(window.Enter(Lane::kReport), Entry::kClosed);
}

}  // namespace
}  // namespace breakerd::client::internal

// The batch of local decisions (LocalBatch) and its flusher (BatchFlusher)
// alone: what goes into each ReportBatch request, the bound on outcomes
// held, a failed request sent again unchanged, the decisions kept while
// breakerd is away; the flusher's timing on a clock and timer moved by
// hand. No breakerd, no sleep.
#include "breakerd/internal/local_batch.h"

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "breakerd/client.h"
#include "breakerd/internal/clock.h"
#include "breakerd/v1/breaker.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace breakerd::client::internal {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

// A clock and a timer that move only when the test says so. Used from the
// test's thread only.
class FakeTime final : public Clock, public Timer {
 public:
  absl::Duration Now() override { return now_; }

  void Schedule(std::function<void()> task, absl::Duration delay) override {
    tasks_.emplace(now_ + std::max(delay, absl::ZeroDuration()),
                   std::move(task));
  }

  // Moves the clock by `by`, running each task due on the way at its time.
  void Advance(absl::Duration by) {
    const absl::Duration to = now_ + by;
    while (!tasks_.empty() && tasks_.begin()->first <= to) {
      now_ = std::max(now_, tasks_.begin()->first);
      std::function<void()> task = std::move(tasks_.begin()->second);
      tasks_.erase(tasks_.begin());
      task();
    }
    now_ = to;
  }

 private:
  absl::Duration now_ = absl::Hours(1);
  std::multimap<absl::Duration, std::function<void()>> tasks_;
};

LocalCall Call(const std::shared_ptr<LocalSlot>& slot,
               OutcomeKind kind = OutcomeKind::kSuccess) {
  LocalCall call;
  call.slot = slot;
  call.outcome = Outcome::Of(kind);
  call.latency = absl::Milliseconds(3);
  return call;
}

class LocalBatchTest : public ::testing::Test {
 protected:
  // Grants `n` calls from `slot` and adds their outcomes.
  void Calls(const std::shared_ptr<LocalSlot>& slot, int n) {
    for (int i = 0; i < n; ++i) {
      batch_.Grant(slot);
      ASSERT_TRUE(batch_.Add(Call(slot)));
    }
  }

  static int Outcomes(const v1::ReportBatchRequest& request) {
    int n = 0;
    for (const v1::DependencyBatch& d : request.dependencies()) {
      n += d.outcomes_size();
    }
    return n;
  }

  std::vector<bool> wakes_;
  LocalBatch batch_{"cpp-1-0000abcd",
                    [this](bool urgent) { wakes_.push_back(urgent); }};
  const std::shared_ptr<LocalSlot> slot_ =
      std::make_shared<LocalSlot>("local/dep", 7);
};

TEST_F(LocalBatchTest, ARequestCarriesTheGrantsWithTheOutcomesTheyCover) {
  batch_.Grant(slot_);
  batch_.Grant(slot_);
  LocalCall failed = Call(slot_, OutcomeKind::kServerError);
  failed.chain = "llm";
  failed.tier = 2;
  failed.outcome.retry_after = absl::Seconds(4);
  ASSERT_TRUE(batch_.Add(std::move(failed)));
  // A call still running: its grant goes now, its outcome later.
  EXPECT_EQ(batch_.unacked(), 1u);

  const v1::ReportBatchRequest* request = batch_.Next();
  ASSERT_NE(request, nullptr);
  EXPECT_EQ(request->client_id(), "cpp-1-0000abcd");
  EXPECT_EQ(request->sequence(), 1u);
  ASSERT_EQ(request->dependencies_size(), 1);
  const v1::DependencyBatch& d = request->dependencies(0);
  EXPECT_EQ(d.dependency(), "local/dep");
  EXPECT_EQ(d.generation(), 7u);
  EXPECT_EQ(d.grants(), 2u);
  ASSERT_EQ(d.outcomes_size(), 1);
  EXPECT_EQ(d.outcomes(0).outcome(), v1::OUTCOME_SERVER_ERROR);
  EXPECT_EQ(d.outcomes(0).latency().nanos(), 3000000);
  EXPECT_EQ(d.outcomes(0).retry_after().seconds(), 4);
  EXPECT_EQ(d.outcomes(0).chain(), "llm");
  EXPECT_EQ(d.outcomes(0).tier(), 2u);
  EXPECT_FALSE(batch_.Sent(absl::OkStatus()));
  EXPECT_EQ(batch_.unacked(), 0u);
  EXPECT_FALSE(batch_.pending());

  // The running call ends: its outcome alone, the next sequence.
  ASSERT_TRUE(batch_.Add(Call(slot_)));
  request = batch_.Next();
  ASSERT_NE(request, nullptr);
  EXPECT_EQ(request->sequence(), 2u);
  EXPECT_EQ(request->dependencies(0).grants(), 0u);
  EXPECT_EQ(Outcomes(*request), 1);
}

TEST_F(LocalBatchTest, TheCallersWakeTheFlusherOncePerBatchNotPerCall) {
  Calls(slot_, 50);
  EXPECT_THAT(wakes_, ElementsAre(false, false))
      << "woken by the first grant and the first outcome, not urgently";
  ASSERT_NE(batch_.Next(), nullptr);
  batch_.Sent(absl::OkStatus());
  wakes_.clear();
  Calls(slot_, 1);
  EXPECT_THAT(wakes_, ElementsAre(false, false))
      << "empty again: the grant and the outcome each find it so";
}

TEST_F(LocalBatchTest, AThousandOutcomesWaitingWakeTheFlusherAtOnce) {
  Calls(slot_, LocalBatch::kFlushAt - 1);
  EXPECT_FALSE(batch_.full());
  EXPECT_THAT(wakes_, ElementsAre(false, false));
  Calls(slot_, 1);
  EXPECT_TRUE(batch_.full());
  EXPECT_THAT(wakes_, ElementsAre(false, false, true));
  Calls(slot_, 10);
  EXPECT_THAT(wakes_, ElementsAre(false, false, true)) << "told once";
}

TEST_F(LocalBatchTest, AFailedRequestIsSentAgainUnchangedThenDropped) {
  Calls(slot_, 3);
  const v1::ReportBatchRequest* first = batch_.Next();
  ASSERT_NE(first, nullptr);
  const std::string sent = first->SerializeAsString();
  EXPECT_FALSE(batch_.Sent(absl::UnavailableError("down")));
  // More calls meanwhile: they wait for a request of their own.
  Calls(slot_, 2);
  for (int send = 2; send <= LocalBatch::kMaxSends; ++send) {
    const v1::ReportBatchRequest* again = batch_.Next();
    ASSERT_NE(again, nullptr);
    EXPECT_EQ(again->SerializeAsString(), sent) << "send " << send;
    EXPECT_EQ(batch_.Sent(absl::DeadlineExceededError("slow")),
              send == LocalBatch::kMaxSends);
  }
  EXPECT_EQ(batch_.dropped(), 3u) << "the dropped request's outcomes";
  EXPECT_EQ(batch_.unacked(), 2u);
  const v1::ReportBatchRequest* next = batch_.Next();
  ASSERT_NE(next, nullptr);
  EXPECT_EQ(next->sequence(), 2u);
  EXPECT_EQ(Outcomes(*next), 2);
  EXPECT_EQ(next->dependencies(0).grants(), 2u);
}

TEST_F(LocalBatchTest, ARequestBreakerdRefusesIsNotSentAgain) {
  Calls(slot_, 1);
  ASSERT_NE(batch_.Next(), nullptr);
  EXPECT_TRUE(batch_.Sent(absl::InvalidArgumentError("bad")));
  EXPECT_EQ(batch_.dropped(), 1u);
  EXPECT_EQ(batch_.Next(), nullptr);
}

TEST_F(LocalBatchTest, PastTenThousandOutcomesHeldTheNextIsDroppedAndCounted) {
  for (uint64_t i = 0; i < LocalBatch::kMaxUnacked; ++i) {
    ASSERT_TRUE(batch_.Add(Call(slot_))) << i;
  }
  EXPECT_FALSE(batch_.Add(Call(slot_)));
  EXPECT_EQ(batch_.dropped(), 1u);
  EXPECT_EQ(batch_.unacked(), LocalBatch::kMaxUnacked);
  // One request acknowledged makes room.
  const v1::ReportBatchRequest* request = batch_.Next();
  ASSERT_NE(request, nullptr);
  EXPECT_EQ(Outcomes(*request), 1000);
  batch_.Sent(absl::OkStatus());
  EXPECT_TRUE(batch_.Add(Call(slot_)));
  EXPECT_EQ(batch_.dropped(), 1u);
}

TEST_F(LocalBatchTest, RequestsKeepToBreakerdsLimits) {
  Calls(slot_, 2500);
  std::vector<int> outcomes;
  while (const v1::ReportBatchRequest* request = batch_.Next()) {
    outcomes.push_back(Outcomes(*request));
    batch_.Sent(absl::OkStatus());
  }
  EXPECT_THAT(outcomes, ElementsAre(1000, 1000, 500));
  // 1,200 dependencies: at most 1,000 entries in one request, and an
  // outcome never goes before the grants of its slot.
  std::vector<std::shared_ptr<LocalSlot>> slots;
  for (int i = 0; i < 1200; ++i) {
    slots.push_back(
        std::make_shared<LocalSlot>("local/dep-" + std::to_string(i), 1));
    Calls(slots.back(), 1);
  }
  std::map<std::string, uint32_t> granted;
  int requests = 0;
  while (const v1::ReportBatchRequest* request = batch_.Next()) {
    ++requests;
    EXPECT_LE(request->dependencies_size(), 1000);
    for (const v1::DependencyBatch& d : request->dependencies()) {
      granted[d.dependency()] += d.grants();
      EXPECT_LE(static_cast<uint32_t>(d.outcomes_size()),
                granted[d.dependency()])
          << d.dependency();
    }
    batch_.Sent(absl::OkStatus());
  }
  EXPECT_EQ(requests, 2);
  EXPECT_EQ(granted.size(), 1200u);
  EXPECT_EQ(batch_.unacked(), 0u);
}

TEST_F(LocalBatchTest, DecisionsAndChainGrantsAreCountedPerName) {
  batch_.CountDecision("local/a", ClientDecisionKind::kRefusedLocal);
  batch_.CountDecision("local/a", ClientDecisionKind::kRefusedLocal);
  batch_.CountDecision("local/a", ClientDecisionKind::kFailOpen);
  batch_.CountDecision("local/b", ClientDecisionKind::kFailClosed);
  batch_.CountChainGrant("llm", 0);
  batch_.CountChainGrant("llm", 0);
  EXPECT_THAT(wakes_, ElementsAre(false)) << "the first decision only";
  const v1::ReportBatchRequest* request = batch_.Next();
  ASSERT_NE(request, nullptr);
  EXPECT_THAT(request->dependencies(), IsEmpty());
  std::map<std::string, std::vector<uint32_t>> decisions;
  for (const v1::ClientDecisions& d : request->decisions()) {
    decisions[d.dependency()] = {d.refused_local(), d.fail_open(),
                                 d.fail_closed()};
  }
  EXPECT_EQ(decisions["local/a"], (std::vector<uint32_t>{2, 1, 0}));
  EXPECT_EQ(decisions["local/b"], (std::vector<uint32_t>{0, 0, 1}));
  ASSERT_EQ(request->chains_size(), 1);
  EXPECT_EQ(request->chains(0).chain(), "llm");
  EXPECT_EQ(request->chains(0).tier(), 0u);
  EXPECT_EQ(request->chains(0).count(), 2u);
  EXPECT_FALSE(request->chains(0).none());
}

TEST_F(LocalBatchTest, DropAllCountsEveryOutcomeNotAcknowledged) {
  Calls(slot_, 4);
  ASSERT_NE(batch_.Next(), nullptr);
  batch_.Sent(absl::UnavailableError("down"));
  Calls(slot_, 3);
  batch_.DropAll();
  EXPECT_EQ(batch_.dropped(), 7u);
  EXPECT_EQ(batch_.unacked(), 0u);
  EXPECT_FALSE(batch_.pending());
}

TEST(CheckLocalOutcomeTest, RefusesWhatBreakerdWouldRefuse) {
  EXPECT_TRUE(CheckLocalOutcome(Outcome::Success()).ok());
  EXPECT_TRUE(CheckLocalOutcome(Outcome::FromHttpStatus(503)).ok());
  EXPECT_TRUE(
      CheckLocalOutcome(Outcome::FromGrpcCode(grpc::StatusCode::OK)).ok());
  EXPECT_EQ(CheckLocalOutcome(Outcome()).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CheckLocalOutcome(Outcome::FromHttpStatus(99)).code(),
            absl::StatusCode::kInvalidArgument);
  Outcome code;
  code.grpc_code = 17;
  EXPECT_EQ(CheckLocalOutcome(code).code(), absl::StatusCode::kInvalidArgument);
}

// --- BatchFlusher
// -------------------------------------------------------------

class BatchFlusherTest : public ::testing::Test {
 protected:
  BatchFlusherTest() {
    BatchFlusher::Options o;
    o.batch = &batch_;
    o.clock = &time_;
    o.timer = &time_;
    o.interval = kInterval;
    o.send_timeout = absl::Milliseconds(200);
    o.send = [this](const v1::ReportBatchRequest& request, absl::Duration) {
      sent_.push_back(request);
      if (answers_.empty()) return absl::OkStatus();
      absl::Status s = answers_.front();
      answers_.erase(answers_.begin());
      return s;
    };
    o.away = [this] { return away_; };
    flusher_ = std::make_unique<BatchFlusher>(std::move(o));
  }

  void Calls(int n) {
    for (int i = 0; i < n; ++i) {
      batch_.Grant(slot_);
      ASSERT_TRUE(batch_.Add(Call(slot_)));
    }
  }

  static constexpr absl::Duration kInterval = absl::Milliseconds(5);
  FakeTime time_;
  bool away_ = false;
  std::vector<v1::ReportBatchRequest> sent_;
  // The answers to the next sends (then OK).
  std::vector<absl::Status> answers_;
  std::unique_ptr<BatchFlusher> flusher_;
  LocalBatch batch_{"cpp-1-0000abcd",
                    [this](bool urgent) { flusher_->Wake(urgent); }};
  const std::shared_ptr<LocalSlot> slot_ =
      std::make_shared<LocalSlot>("local/dep", 1);
};

TEST_F(BatchFlusherTest, FlushesAnIntervalAfterTheFirstCallThenIdles) {
  time_.Advance(absl::Seconds(1));
  EXPECT_THAT(sent_, IsEmpty()) << "nothing runs while the batch is empty";
  Calls(3);
  time_.Advance(kInterval - absl::Nanoseconds(1));
  EXPECT_THAT(sent_, IsEmpty());
  Calls(2);
  time_.Advance(absl::Nanoseconds(1));
  ASSERT_EQ(sent_.size(), 1u) << "one request for the five calls";
  EXPECT_EQ(sent_[0].dependencies(0).grants(), 5u);
  EXPECT_EQ(sent_[0].dependencies(0).outcomes_size(), 5);
  time_.Advance(absl::Seconds(1));
  EXPECT_EQ(sent_.size(), 1u) << "nothing more to send";
}

TEST_F(BatchFlusherTest, AThousandOutcomesGoAtOnce) {
  Calls(LocalBatch::kFlushAt + 500);
  time_.Advance(absl::ZeroDuration());
  ASSERT_EQ(sent_.size(), 1u);
  EXPECT_EQ(sent_[0].dependencies(0).outcomes_size(), 1000);
  // The other 500 wait an interval.
  time_.Advance(kInterval);
  ASSERT_EQ(sent_.size(), 2u);
  EXPECT_EQ(sent_[1].dependencies(0).outcomes_size(), 500);
}

TEST_F(BatchFlusherTest, AFailedRequestIsResentAtTheNextFlushWithItsSequence) {
  answers_ = {absl::UnavailableError("down")};
  Calls(1);
  time_.Advance(kInterval);
  ASSERT_EQ(sent_.size(), 1u);
  time_.Advance(kInterval);
  ASSERT_EQ(sent_.size(), 2u);
  EXPECT_EQ(sent_[1].SerializeAsString(), sent_[0].SerializeAsString());
  EXPECT_EQ(batch_.unacked(), 0u);
}

TEST_F(BatchFlusherTest, DecisionsWaitWhileAwayAndGoWhenBreakerdIsBack) {
  away_ = true;
  batch_.CountDecision("local/dep", ClientDecisionKind::kFailOpen);
  time_.Advance(kInterval);
  batch_.CountDecision("local/dep", ClientDecisionKind::kFailOpen);
  batch_.CountDecision("local/dep", ClientDecisionKind::kRefusedLocal);
  time_.Advance(absl::Seconds(10));
  EXPECT_THAT(sent_, IsEmpty()) << "nothing is sent while away";
  away_ = false;
  flusher_->Back();
  time_.Advance(absl::ZeroDuration());
  ASSERT_EQ(sent_.size(), 1u) << "at once when back";
  ASSERT_EQ(sent_[0].decisions_size(), 1);
  EXPECT_EQ(sent_[0].decisions(0).fail_open(), 2u);
  EXPECT_EQ(sent_[0].decisions(0).refused_local(), 1u);
}

TEST_F(BatchFlusherTest, TheFinalFlushSendsWhatWaitsWithinItsBudget) {
  Calls(2500);
  flusher_->StopScheduling();
  flusher_->FinalFlush(absl::Seconds(1));
  ASSERT_EQ(sent_.size(), 3u);
  EXPECT_EQ(batch_.dropped(), 0u);
  EXPECT_FALSE(batch_.pending());
  // Away at Close: nothing is sent, what waits is dropped and counted.
  Calls(4);
  away_ = true;
  flusher_->FinalFlush(absl::Seconds(1));
  EXPECT_EQ(sent_.size(), 3u);
  EXPECT_EQ(batch_.dropped(), 4u);
}

}  // namespace
}  // namespace breakerd::client::internal

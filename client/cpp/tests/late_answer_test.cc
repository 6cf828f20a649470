// A late answer is not a hung sidecar: an Acquire that times out while
// breakerd answers this client's other RPCs (a burst on a loaded machine)
// fails open alone and does not mark breakerd away; one that times out with
// nothing answered since it was sent does. And it is not a lost permit: a
// permit granted after the caller stopped waiting is reported
// OUTCOME_CANCELLED. breakerd cannot be made slow for one call, so a
// stand-in Breaker service over a real loopback socket holds the Acquires
// (and AcquireFirsts) of "slow/*" until the test lets them go, and notes
// every permit it grants and every report it gets.
#include <atomic>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "breakerd/client.h"
#include "breakerd/v1/breaker.grpc.pb.h"
#include "gmock/gmock.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "gtest/gtest.h"
#include "tests/e2e/breakerd_process.h"

namespace breakerd::client {
namespace {

// Grants every Acquire and AcquireFirst (the first dependency named);
// holds those of "slow/*" until Release(). Has no Watch: the client's
// stream ends UNIMPLEMENTED and retries with its backoff, as against a
// breakerd without one.
class StandInBreaker final : public v1::Breaker::Service {
 public:
  grpc::Status Acquire(grpc::ServerContext*, const v1::AcquireRequest* request,
                       v1::AcquireResponse* response) override {
    const uint64_t permit = Grant(request->dependency());
    response->set_allowed(true);
    response->set_permit(permit);
    response->set_state(v1::STATE_CLOSED);
    return grpc::Status::OK;
  }

  grpc::Status AcquireFirst(grpc::ServerContext*,
                            const v1::AcquireFirstRequest* request,
                            v1::AcquireFirstResponse* response) override {
    const std::string& dependency = request->dependencies(0);
    const uint64_t permit = Grant(dependency);
    response->set_dependency(dependency);
    response->set_allowed(true);
    response->set_permit(permit);
    response->set_state(v1::STATE_CLOSED);
    return grpc::Status::OK;
  }

  grpc::Status Report(grpc::ServerContext*, const v1::ReportRequest* request,
                      v1::ReportResponse*) override {
    absl::MutexLock lock(&mu_);
    reports_[request->permit()].push_back(absl::StrCat(
        request->dependency(), " ", v1::Outcome_Name(request->outcome())));
    return grpc::Status::OK;
  }

  // Acquires of "slow/*" received so far.
  int held() const { return held_.load(); }

  void Release() {
    absl::MutexLock lock(&mu_);
    released_ = true;
  }

  // The permits granted (the RPC's answer written, whether the client
  // still waited for it or not), in order.
  std::vector<uint64_t> granted() {
    absl::MutexLock lock(&mu_);
    return granted_;
  }

  // The reports received for `permit`: "<dependency> <outcome>" each.
  std::vector<std::string> ReportsOf(uint64_t permit) {
    absl::MutexLock lock(&mu_);
    auto it = reports_.find(permit);
    return it == reports_.end() ? std::vector<std::string>() : it->second;
  }

  // Whether every permit granted has been reported, and nothing else.
  bool EveryPermitReported() {
    absl::MutexLock lock(&mu_);
    if (reports_.size() != granted_.size()) return false;
    for (uint64_t permit : granted_) {
      if (reports_.count(permit) == 0) return false;
    }
    return true;
  }

 private:
  // Holds a "slow/*" dependency until released; then a new permit.
  uint64_t Grant(const std::string& dependency) {
    absl::MutexLock lock(&mu_);
    if (absl::StartsWith(dependency, "slow/")) {
      held_.fetch_add(1);
      mu_.Await(absl::Condition(&released_));
    }
    granted_.push_back(next_permit_++);
    return granted_.back();
  }

  std::atomic<int> held_{0};
  absl::Mutex mu_;
  bool released_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t next_permit_ ABSL_GUARDED_BY(mu_) = 1;
  std::vector<uint64_t> granted_ ABSL_GUARDED_BY(mu_);
  std::map<uint64_t, std::vector<std::string>> reports_ ABSL_GUARDED_BY(mu_);
};

using ::testing::ElementsAre;

constexpr absl::Duration kDecisionTimeout = absl::Milliseconds(300);

class LateAnswerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    int port = 0;
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                             &port);
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    // The client's defaults but decision_timeout: the tests must see a held
    // Acquire arrive and have another answered within it, which a loaded
    // machine does not promise in the default 20 ms.
    ClientOptions options;
    options.target = absl::StrCat("127.0.0.1:", port);
    options.decision_timeout = kDecisionTimeout;
    options.log = [](absl::string_view) {};
    auto client = Client::Create(options);
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = std::move(*client);
    ASSERT_TRUE(client_->WaitForConnected(absl::Seconds(5)));
  }

  void TearDown() override {
    service_.Release();
    client_.reset();
    if (server_ != nullptr) server_->Shutdown();
  }

  // Acquire(dependency) on its own thread.
  std::thread AcquireInTheBackground(const std::string& dependency,
                                     std::optional<Decision>* out) {
    return std::thread([this, dependency, out] {
      absl::StatusOr<Permit> p = client_->Acquire(dependency);
      if (p.ok()) *out = p->decision();
    });
  }

  // AcquireFirst({dependency}) on its own thread.
  std::thread AcquireFirstInTheBackground(const std::string& dependency,
                                          std::optional<Decision>* out) {
    return std::thread([this, dependency, out] {
      absl::StatusOr<Permit> p = client_->AcquireFirst({dependency});
      if (p.ok()) *out = p->decision();
    });
  }

  StandInBreaker service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<Client> client_;
};

// conformance: late-not-away
// The stand-in holds back the answer to "slow/dep" past decision_timeout
// and answers "fast/dep" at once: the slow decision alone fails open, and
// an Acquire sent after its timeout is decided by the sidecar, since the
// stand-in answered the fast one after the slow one was written. (Nothing
// answered after it: ATimeoutWithNothingAnsweredSinceMarksAway below, and
// the hung-sidecar scenario in conformance_test.cc.)
TEST_F(LateAnswerTest, ATimeoutWhileOtherCallsAreAnsweredIsNotAway) {
  std::optional<Decision> slow;
  std::thread t = AcquireInTheBackground("slow/dep", &slow);
  // Written: the stand-in holds it.
  ASSERT_TRUE(WaitUntil([&] { return service_.held() == 1; }));
  // Answered while the slow one waits.
  absl::StatusOr<Permit> fast = client_->Acquire("fast/dep");
  ASSERT_TRUE(fast.ok());
  EXPECT_EQ(fast->decision().source, DecisionSource::kSidecar);
  t.join();
  ASSERT_TRUE(slow.has_value());
  EXPECT_EQ(slow->source, DecisionSource::kFailOpen);

  // Sent after the slow one's timeout: not away, so it asks the sidecar.
  absl::StatusOr<Permit> next = client_->Acquire("fast/dep");
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(next->decision().source, DecisionSource::kSidecar);
  const ClientStats stats = client_->stats();
  EXPECT_EQ(stats.fail_open, 1u);
  EXPECT_EQ(stats.away_decisions, 0u);
}

TEST_F(LateAnswerTest, ATimeoutWithNothingAnsweredSinceMarksAway) {
  std::optional<Decision> slow;
  std::thread t = AcquireInTheBackground("slow/dep", &slow);
  t.join();
  ASSERT_TRUE(slow.has_value());
  EXPECT_EQ(slow->source, DecisionSource::kFailOpen);

  absl::StatusOr<Permit> next = client_->Acquire("fast/dep");
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(next->decision().source, DecisionSource::kFailOpen);
  EXPECT_EQ(client_->stats().away_decisions, 1u);
}

TEST_F(LateAnswerTest, CallersQueuedForTheWindowDecideAtOnceWhenAway) {
  // 32 Acquires on the wire (the window's limit), all held...
  constexpr int kWindow = 32;
  std::vector<std::optional<Decision>> held(kWindow);
  std::vector<std::thread> threads;
  for (int i = 0; i < kWindow; ++i) {
    threads.push_back(AcquireInTheBackground("slow/dep", &held[i]));
  }
  ASSERT_TRUE(WaitUntil([&] { return service_.held() == kWindow; }));
  // ...so the next one waits for a place, until their timeouts mark
  // breakerd away: then it decides with no RPC of its own.
  const absl::Time start = absl::Now();
  absl::StatusOr<Permit> queued = client_->Acquire("slow/dep");
  const absl::Duration took = absl::Now() - start;
  for (std::thread& t : threads) t.join();
  ASSERT_TRUE(queued.ok());
  EXPECT_EQ(queued->decision().source, DecisionSource::kFailOpen);
  EXPECT_EQ(service_.held(), kWindow) << "the queued caller sent its RPC";
  EXPECT_EQ(client_->stats().away_decisions, 1u);
  EXPECT_EQ(client_->stats().fail_open, kWindow + 1u);
  // It waited for the others' deadline, not for one of its own after it.
  EXPECT_LT(took, absl::Milliseconds(300 + 250));
}

// A permit breakerd grants after the caller stopped waiting (its Acquire
// timed out and failed open) is reported OUTCOME_CANCELLED, once, even
// though the timeout marked breakerd away: its RPC stays open 1 s more.
// Without that, a lost probe permit refuses the dependency PROBE_IN_FLIGHT
// for its whole lease.
TEST_F(LateAnswerTest, APermitGrantedAfterTheTimeoutIsReportedCancelled) {
  std::optional<Decision> by_acquire;
  std::optional<Decision> by_acquire_first;
  std::thread a = AcquireInTheBackground("slow/one", &by_acquire);
  std::thread b = AcquireFirstInTheBackground("slow/first", &by_acquire_first);
  ASSERT_TRUE(WaitUntil([&] { return service_.held() == 2; }));
  a.join();
  b.join();
  ASSERT_TRUE(by_acquire.has_value());
  ASSERT_TRUE(by_acquire_first.has_value());
  EXPECT_EQ(by_acquire->source, DecisionSource::kFailOpen);
  EXPECT_EQ(by_acquire_first->source, DecisionSource::kFailOpen);
  EXPECT_EQ(by_acquire->permit, 0u);
  EXPECT_EQ(client_->stats().fail_open, 2u);
  EXPECT_TRUE(service_.granted().empty());

  // Within the second the RPCs stay open, the stand-in grants both.
  service_.Release();
  ASSERT_TRUE(WaitUntil([&] { return service_.granted().size() == 2; }));
  ASSERT_TRUE(WaitUntil([&] { return service_.EveryPermitReported(); },
                        absl::Seconds(3)));
  std::vector<std::string> reports;
  for (uint64_t permit : service_.granted()) {
    for (std::string& r : service_.ReportsOf(permit)) reports.push_back(r);
  }
  EXPECT_THAT(reports,
              ::testing::UnorderedElementsAre("slow/one OUTCOME_CANCELLED",
                                              "slow/first OUTCOME_CANCELLED"));
  EXPECT_EQ(client_->stats().report_errors, 0u);
}

// Close waits for a decision RPC still open, and reports the permit it
// brings before the client goes: nothing is leaked by closing.
TEST_F(LateAnswerTest, CloseReportsAPermitThatArrivesWhileItWaits) {
  std::optional<Decision> slow;
  std::thread t = AcquireInTheBackground("slow/dep", &slow);
  ASSERT_TRUE(WaitUntil([&] { return service_.held() == 1; }));
  t.join();
  ASSERT_TRUE(slow.has_value());
  EXPECT_EQ(slow->source, DecisionSource::kFailOpen);
  // Granted while Close waits (if this thread is slow to start, before
  // Close: then Close still reports it, and proves less).
  std::thread release([this] {
    absl::SleepFor(absl::Milliseconds(100));
    service_.Release();
  });
  client_->Close();
  release.join();
  ASSERT_EQ(service_.granted().size(), 1u);
  EXPECT_THAT(service_.ReportsOf(service_.granted()[0]),
              ElementsAre("slow/dep OUTCOME_CANCELLED"));
  // Callers after Close still fail at once.
  absl::StatusOr<Permit> after = client_->Acquire("fast/dep");
  EXPECT_EQ(after.status().code(), absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace breakerd::client

// Local decisions against the real binary, over raw gRPC (DESIGN.md "Local
// decisions"): the Watch stream carries what a client decides on (created,
// local_decisions, the trip that turns it off), and ReportBatch counts
// grants, refuses outcomes beyond them changing nothing, applies a batch
// sent twice once, and enforces its limit.
#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "breakerd/v1/breaker.grpc.pb.h"
#include "gtest/gtest.h"
#include "tests/e2e/breakerd_process.h"

namespace breakerd {
namespace {

namespace v1 = ::breakerd::v1;

constexpr char kConfig[] = R"(
defaults:
  consecutive_failures: 3
  failure_rate: { threshold: 0 }
  cooldown: { base: 30s, max: 60s, jitter: 0 }
policies:
  - match: "remote/*"
    local_decisions: false
)";

class LocalDecisionsE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string config = proc_.WriteFile("config.yaml", kConfig);
    ASSERT_TRUE(proc_.Start({"--config=" + config}));
    stub_ = proc_.BreakerStub();
  }

  v1::AcquireResponse Acquire(const std::string& dep) {
    grpc::ClientContext ctx;
    v1::AcquireRequest req;
    req.set_dependency(dep);
    v1::AcquireResponse resp;
    EXPECT_TRUE(stub_->Acquire(&ctx, req, &resp).ok());
    return resp;
  }

  grpc::Status Batch(const v1::ReportBatchRequest& req,
                     v1::ReportBatchResponse* resp) {
    grpc::ClientContext ctx;
    return stub_->ReportBatch(&ctx, req, resp);
  }

  // A batch of `grants` and `outcomes` outcomes of class `outcome`.
  static v1::ReportBatchRequest MakeBatch(uint64_t sequence,
                                          const std::string& dep,
                                          uint64_t generation, uint32_t grants,
                                          int outcomes, v1::Outcome outcome) {
    v1::ReportBatchRequest req;
    req.set_client_id("e2e-client");
    req.set_sequence(sequence);
    v1::DependencyBatch* d = req.add_dependencies();
    d->set_dependency(dep);
    d->set_generation(generation);
    d->set_grants(grants);
    for (int i = 0; i < outcomes; ++i) d->add_outcomes()->set_outcome(outcome);
    return req;
  }

  BreakerdProcess proc_;
  std::unique_ptr<v1::Breaker::Stub> stub_;
};

TEST_F(LocalDecisionsE2eTest, TheWatchStreamTellsWhenAClientMayDecide) {
  grpc::ClientContext ctx;
  v1::WatchRequest req;
  req.add_dependencies("db/orders");
  req.add_dependencies("remote/api");
  std::unique_ptr<grpc::ClientReader<v1::StateChange>> reader =
      stub_->Watch(&ctx, req);
  v1::StateChange change;
  // The initial states: no breaker yet, so nothing to decide on.
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(reader->Read(&change));
    EXPECT_EQ(change.reason(), "initial");
    EXPECT_FALSE(change.local_decisions());
  }
  Acquire("db/orders");
  ASSERT_TRUE(reader->Read(&change));
  EXPECT_EQ(change.dependency(), "db/orders");
  EXPECT_EQ(change.reason(), "created");
  EXPECT_EQ(change.state(), v1::STATE_CLOSED);
  EXPECT_TRUE(change.local_decisions());
  const uint64_t generation = change.generation();
  Acquire("remote/api");
  ASSERT_TRUE(reader->Read(&change));
  EXPECT_EQ(change.reason(), "created");
  EXPECT_FALSE(change.local_decisions());  // the policy says no

  // Three failures decided and reported by a client trip the breaker: the
  // stream turns local decisions off.
  v1::ReportBatchResponse resp;
  ASSERT_TRUE(
      Batch(MakeBatch(1, "db/orders", generation, 3, 3, v1::OUTCOME_TIMEOUT),
            &resp)
          .ok());
  EXPECT_EQ(resp.counted(), 3u);
  ASSERT_TRUE(reader->Read(&change));
  EXPECT_EQ(change.reason(), "consecutive_failures");
  EXPECT_EQ(change.state(), v1::STATE_OPEN);
  EXPECT_FALSE(change.local_decisions());
  EXPECT_GT(change.generation(), generation);
  ctx.TryCancel();
}

TEST_F(LocalDecisionsE2eTest, ABatchCannotInventCallsAndIsAppliedOnce) {
  Acquire("db/orders");  // created at generation 0
  // Two grants, five outcomes: three refused, the breaker unchanged (five
  // failures would have opened it).
  const v1::ReportBatchRequest batch =
      MakeBatch(1, "db/orders", 0, 2, 5, v1::OUTCOME_SERVER_ERROR);
  v1::ReportBatchResponse resp;
  ASSERT_TRUE(Batch(batch, &resp).ok());
  EXPECT_EQ(resp.counted(), 2u);
  EXPECT_EQ(resp.refused(), 3u);
  EXPECT_FALSE(resp.repeated_batch());
  // Sent again (a timeout on the client's side): applied once.
  ASSERT_TRUE(Batch(batch, &resp).ok());
  EXPECT_TRUE(resp.repeated_batch());
  EXPECT_EQ(resp.counted() + resp.refused() + resp.late(), 0u);

  grpc::ClientContext ctx;
  v1::GetStateRequest get;
  get.set_dependency("db/orders");
  v1::BreakerStatus status;
  ASSERT_TRUE(stub_->GetState(&ctx, get, &status).ok());
  EXPECT_EQ(status.state(), v1::STATE_CLOSED);
  EXPECT_EQ(status.consecutive_failures(), 2u);

  const std::string metrics = proc_.Metrics();
  EXPECT_TRUE(absl::StrContains(
      metrics,
      "breakerd_acquire_total{dependency=\"db/orders\",decision=\"allowed_"
      "local\"} 2\n"))
      << metrics;
  EXPECT_TRUE(absl::StrContains(
      metrics, "breakerd_batch_outcomes_total{result=\"counted\"} 2\n"));
  EXPECT_TRUE(absl::StrContains(
      metrics, "breakerd_batch_outcomes_total{result=\"refused\"} 3\n"));
  EXPECT_TRUE(absl::StrContains(
      metrics,
      "breakerd_grpc_server_handled_total{method=\"ReportBatch\",code=\"OK\"} "
      "2\n"));
}

TEST_F(LocalDecisionsE2eTest, LimitsAndBadFieldsAreRefusedNamingThem) {
  Acquire("db/orders");
  v1::ReportBatchResponse resp;
  grpc::Status s = Batch(
      MakeBatch(1, "db/orders", 0, 1001, 1001, v1::OUTCOME_SUCCESS), &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(s.error_message(),
            "dependencies[].outcomes: at most 1000 in one ReportBatch (got "
            "1001); split it into several batches");
  v1::ReportBatchRequest bad =
      MakeBatch(2, "db/orders", 0, 1, 1, v1::OUTCOME_SUCCESS);
  bad.mutable_dependencies(0)
      ->mutable_outcomes(0)
      ->mutable_latency()
      ->set_seconds(-1);
  s = Batch(bad, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_TRUE(absl::StartsWith(s.error_message(),
                               "dependencies[0].outcomes[0].latency"))
      << s.error_message();
  // Client decisions made without the sidecar are counted.
  v1::ReportBatchRequest decisions;
  decisions.set_client_id("e2e-client");
  decisions.set_sequence(3);
  v1::ClientDecisions* d = decisions.add_decisions();
  d->set_dependency("db/orders");
  d->set_refused_local(4);
  d->set_fail_open(2);
  ASSERT_TRUE(Batch(decisions, &resp).ok());
  const std::string metrics = proc_.Metrics();
  EXPECT_TRUE(absl::StrContains(
      metrics,
      "breakerd_client_decisions_total{dependency=\"db/orders\",decision="
      "\"refused_local\"} 4\n"))
      << metrics;
  EXPECT_TRUE(absl::StrContains(
      metrics,
      "breakerd_client_decisions_total{dependency=\"db/orders\",decision="
      "\"fail_open\"} 2\n"));
}

}  // namespace
}  // namespace breakerd

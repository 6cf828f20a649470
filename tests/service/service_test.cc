// Tests of the gRPC service layer through an in-process channel: no socket,
// no sleeping. Time is a FakeClock; Watch tests synchronise on the messages
// the stream delivers.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "breakerd/v1/breaker.grpc.pb.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "server/engine/clock.h"
#include "server/engine/policy.h"
#include "server/engine/registry.h"
#include "server/metrics/collector.h"
#include "server/service/admin_service.h"
#include "server/service/breaker_service.h"
#include "server/service/call_tracker.h"
#include "server/service/convert.h"
#include "server/service/read_limiter.h"
#include "server/service/rpc_stats.h"
#include "server/service/trace_writer.h"
#include "server/service/watch_hub.h"
#include "tests/e2e/watch_notices.h"

namespace breakerd {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::UnorderedElementsAre;

constexpr char kToken[] = "s3cret-admin-token";

// No jitter: a uniform draw of 0.5 scales the cooldown by exactly 1.
double HalfUniform() { return 0.5; }

// A safety net so that a broken stream fails the test instead of hanging
// it; no test waits on it.
std::chrono::system_clock::time_point SafetyDeadline() {
  return std::chrono::system_clock::now() + std::chrono::seconds(30);
}

absl::Duration FromProto(const google::protobuf::Duration& d) {
  return absl::Seconds(d.seconds()) + absl::Nanoseconds(d.nanos());
}

class ServiceTest : public ::testing::Test {
 protected:
  struct Options {
    size_t max_streams = 1024;
    size_t max_queue = 1024;
    size_t max_queued_total = WatchHub::kDefaultMaxQueuedTotal;
    // Breakers read per second by full reads; 0: no ReadLimiter.
    int64_t read_all_per_second = 0;
    std::optional<std::string> token = kToken;
    // Records accepted Reports; may be null. Must outlive the server.
    TraceWriter* trace = nullptr;
  };

  void SetUp() override { Start(Options()); }

  void TearDown() override { Stop(); }

  // (Re)starts the server with `options` and a fresh registry.
  void Start(const Options& options) {
    Stop();
    registry_ =
        std::make_unique<Registry>(std::make_shared<const PolicySet>(), &clock_,
                                   /*permit_secret=*/42, &HalfUniform);
    read_limiter_.reset();
    if (options.read_all_per_second > 0) {
      read_limiter_ =
          std::make_unique<ReadLimiter>(&clock_, options.read_all_per_second);
    }
    hub_ = std::make_unique<WatchHub>(registry_.get(), options.max_streams,
                                      options.max_queue, read_limiter_.get(),
                                      options.max_queued_total);
    registry_->AddObserver(hub_.get());
    breaker_service_ = std::make_unique<BreakerServiceImpl>(
        registry_.get(), hub_.get(), /*tracker=*/nullptr, &rpc_stats_,
        options.trace, read_limiter_.get());
    admin_service_ = std::make_unique<AdminServiceImpl>(
        registry_.get(), options.token, &rpc_stats_);
    grpc::ServerBuilder builder;
    builder.RegisterService(breaker_service_.get());
    builder.RegisterService(admin_service_.get());
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    channel_ = server_->InProcessChannel(grpc::ChannelArguments());
    stub_ = v1::Breaker::NewStub(channel_);
    admin_ = v1::Admin::NewStub(channel_);
  }

  void Stop() {
    if (server_ == nullptr) return;
    hub_->Shutdown();
    server_->Shutdown(SafetyDeadline());
    server_->Wait();
    stub_.reset();
    admin_.reset();
    channel_.reset();
    server_.reset();
    admin_service_.reset();
    breaker_service_.reset();
    hub_.reset();
    registry_.reset();
  }

  grpc::Status Acquire(const std::string& dependency, v1::AcquireResponse* out,
                       uint32_t attempt = 0) {
    grpc::ClientContext ctx;
    v1::AcquireRequest req;
    req.set_dependency(dependency);
    req.set_attempt(attempt);
    return stub_->Acquire(&ctx, req, out);
  }

  grpc::Status Report(const v1::ReportRequest& req, v1::ReportResponse* out) {
    grpc::ClientContext ctx;
    return stub_->Report(&ctx, req, out);
  }

  grpc::Status GetState(const std::string& dependency, v1::BreakerStatus* out) {
    grpc::ClientContext ctx;
    v1::GetStateRequest req;
    req.set_dependency(dependency);
    return stub_->GetState(&ctx, req, out);
  }

  // Acquires and reports `outcome` once; expects both to succeed.
  void AcquireAndReport(const std::string& dependency, v1::Outcome outcome) {
    v1::AcquireResponse acquired;
    ASSERT_TRUE(Acquire(dependency, &acquired).ok());
    ASSERT_TRUE(acquired.allowed()) << dependency;
    v1::ReportRequest req;
    req.set_dependency(dependency);
    req.set_permit(acquired.permit());
    req.set_outcome(outcome);
    v1::ReportResponse reported;
    ASSERT_TRUE(Report(req, &reported).ok());
  }

  // Opens `dependency` with the default policy's 5 consecutive failures.
  void OpenByTimeouts(const std::string& dependency) {
    for (int i = 0; i < 5; ++i) {
      AcquireAndReport(dependency, v1::OUTCOME_TIMEOUT);
    }
  }

  struct WatchCall {
    grpc::ClientContext ctx;
    std::unique_ptr<grpc::ClientReader<v1::StateChange>> reader;
  };

  std::unique_ptr<WatchCall> Watch(const std::vector<std::string>& names) {
    auto call = std::make_unique<WatchCall>();
    call->ctx.set_deadline(SafetyDeadline());
    v1::WatchRequest req;
    for (const std::string& n : names) req.add_dependencies(n);
    call->reader = stub_->Watch(&call->ctx, req);
    return call;
  }

  // Reads until the stream ends; returns its status.
  static grpc::Status Drain(WatchCall& call,
                            std::vector<v1::StateChange>* seen = nullptr) {
    v1::StateChange change;
    while (ReadChange(*call.reader, &change)) {
      if (seen != nullptr) seen->push_back(change);
    }
    return call.reader->Finish();
  }

  template <typename Request>
  grpc::Status CallAdmin(grpc::Status (v1::Admin::Stub::*method)(
                             grpc::ClientContext*, const Request&,
                             v1::AdminResponse*),
                         const std::string& dependency,
                         std::optional<std::string> authorization,
                         v1::AdminResponse* out) {
    grpc::ClientContext ctx;
    if (authorization.has_value()) {
      ctx.AddMetadata("authorization", *authorization);
    }
    Request req;
    req.set_dependency(dependency);
    return (admin_.get()->*method)(&ctx, req, out);
  }

  FakeClock clock_;
  RpcStats rpc_stats_;
  std::unique_ptr<ReadLimiter> read_limiter_;
  std::unique_ptr<Registry> registry_;
  std::unique_ptr<WatchHub> hub_;
  std::unique_ptr<BreakerServiceImpl> breaker_service_;
  std::unique_ptr<AdminServiceImpl> admin_service_;
  std::unique_ptr<grpc::Server> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Breaker::Stub> stub_;
  std::unique_ptr<v1::Admin::Stub> admin_;
};

const std::string kBearer = absl::StrCat("Bearer ", kToken);

// --- RPC handling metrics ----------------------------------------------------

TEST_F(ServiceTest, RpcStatsCountHandledCallsByMethodAndCode) {
  v1::AcquireResponse acquired;
  ASSERT_TRUE(Acquire("db", &acquired).ok());
  ASSERT_TRUE(Acquire("db", &acquired).ok());
  EXPECT_EQ(Acquire("", &acquired).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  v1::BreakerStatus status;
  EXPECT_EQ(GetState("nobody", &status).error_code(),
            grpc::StatusCode::NOT_FOUND);

  EXPECT_EQ(rpc_stats_.handled(RpcMethod::kAcquire, grpc::StatusCode::OK), 2u);
  EXPECT_EQ(rpc_stats_.handled(RpcMethod::kAcquire,
                               grpc::StatusCode::INVALID_ARGUMENT),
            1u);
  EXPECT_EQ(rpc_stats_.latency_count(RpcMethod::kAcquire), 3u);
  EXPECT_EQ(
      rpc_stats_.handled(RpcMethod::kGetState, grpc::StatusCode::NOT_FOUND),
      1u);
  EXPECT_EQ(rpc_stats_.handled(RpcMethod::kReport, grpc::StatusCode::OK), 0u);

  // Exported through the family table.
  ProcessStats stats;
  stats.rpc_methods = [this] { return rpc_stats_.Snapshot(); };
  const RegistryCollector collector(registry_.get(), stats);
  std::string text;
  collector.AppendText(&text);
  EXPECT_THAT(text, HasSubstr("# TYPE breakerd_grpc_server_handled_total "
                              "counter\n"));
  EXPECT_THAT(text, HasSubstr("breakerd_grpc_server_handled_total{method="
                              "\"Acquire\",code=\"OK\"} 2\n"));
  EXPECT_THAT(text, HasSubstr("breakerd_grpc_server_handled_total{method="
                              "\"Acquire\",code=\"INVALID_ARGUMENT\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("breakerd_grpc_server_handled_total{method="
                              "\"GetState\",code=\"NOT_FOUND\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("breakerd_grpc_server_handled_total{method="
                              "\"Report\",code=\"OK\"} 0\n"));
  EXPECT_THAT(text, Not(HasSubstr("method=\"Report\",code=\"NOT_FOUND\"")));
  EXPECT_THAT(text, HasSubstr("# TYPE breakerd_grpc_server_handling_seconds "
                              "histogram\n"));
  EXPECT_THAT(text, HasSubstr("breakerd_grpc_server_handling_seconds_count{"
                              "method=\"Acquire\"} 3\n"));
  EXPECT_THAT(text, HasSubstr("breakerd_grpc_server_handling_seconds_bucket{"
                              "method=\"Acquire\",le=\"+Inf\"} 3\n"));
  EXPECT_THAT(text, HasSubstr("breakerd_grpc_server_handling_seconds_bucket{"
                              "method=\"Acquire\",le=\"1e-05\"} "));
}

TEST_F(ServiceTest, RpcStatsCountAdminCallsAndWatchStarts) {
  grpc::ClientContext ctx;  // no authorization metadata
  v1::ForceOpenRequest req;
  req.set_dependency("db");
  v1::AdminResponse resp;
  EXPECT_EQ(admin_->ForceOpen(&ctx, req, &resp).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(rpc_stats_.handled(RpcMethod::kForceOpen,
                               grpc::StatusCode::UNAUTHENTICATED),
            1u);

  auto call = Watch({"db"});
  v1::StateChange change;
  ASSERT_TRUE(ReadChange(*call->reader, &change));  // the initial state
  // Counted when StartStream returns, which may be after the first message
  // is out: wait for it (bounded).
  const auto deadline = SafetyDeadline();
  while (rpc_stats_.latency_count(RpcMethod::kWatch) == 0 &&
         std::chrono::system_clock::now() < deadline) {
    std::this_thread::yield();
  }
  EXPECT_EQ(rpc_stats_.handled(RpcMethod::kWatch, grpc::StatusCode::OK), 1u);
  EXPECT_EQ(rpc_stats_.latency_count(RpcMethod::kWatch), 1u);
  call->ctx.TryCancel();
  Drain(*call);
}

TEST(RpcStatsTest, LatencyFallsInTheRightBucket) {
  RpcStats stats;
  stats.Record(RpcMethod::kReset, 0, std::chrono::microseconds(7));
  stats.Record(RpcMethod::kReset, 0, std::chrono::microseconds(30));
  stats.Record(RpcMethod::kReset, 99, std::chrono::seconds(1));
  const std::vector<RpcMethodStats> s = stats.Snapshot();
  const RpcMethodStats& reset = s[static_cast<int>(RpcMethod::kReset)];
  EXPECT_EQ(reset.method, "Reset");
  EXPECT_EQ(reset.handled[0], 2u);
  EXPECT_EQ(reset.handled[grpc::StatusCode::UNKNOWN], 1u);   // code 99
  EXPECT_EQ(reset.latency_buckets[0], 1u);                   // <= 10us
  EXPECT_EQ(reset.latency_buckets[2], 1u);                   // <= 50us
  EXPECT_EQ(reset.latency_buckets[kRpcLatencyBuckets], 1u);  // > 10ms
  EXPECT_NEAR(reset.latency_sum_seconds, 1.000037, 1e-9);
}

// --- Acquire / Report / GetState / ListStates -------------------------------

TEST_F(ServiceTest, AcquireAndReportRoundTrip) {
  v1::AcquireResponse acquired;
  ASSERT_TRUE(Acquire("openai/key-1", &acquired).ok());
  EXPECT_TRUE(acquired.allowed());
  EXPECT_NE(acquired.permit(), 0u);
  EXPECT_FALSE(acquired.probe());
  EXPECT_EQ(acquired.state(), v1::STATE_CLOSED);
  EXPECT_EQ(acquired.reason(), v1::REJECT_REASON_UNSPECIFIED);
  EXPECT_EQ(FromProto(acquired.retry_after()), absl::ZeroDuration());

  v1::ReportRequest req;
  req.set_dependency("openai/key-1");
  req.set_permit(acquired.permit());
  req.set_http_status(200);
  req.mutable_latency()->set_nanos(250000000);
  v1::ReportResponse reported;
  ASSERT_TRUE(Report(req, &reported).ok());
  EXPECT_EQ(reported.state(), v1::STATE_CLOSED);
  EXPECT_EQ(reported.effect(), v1::EFFECT_COUNTED_SUCCESS);

  v1::BreakerStatus status;
  ASSERT_TRUE(GetState("openai/key-1", &status).ok());
  EXPECT_EQ(status.dependency(), "openai/key-1");
  EXPECT_EQ(status.state(), v1::STATE_CLOSED);
  EXPECT_EQ(status.generation(), 0u);
  EXPECT_EQ(status.window_calls(), 1u);
  EXPECT_EQ(status.window_failures(), 0u);
  EXPECT_EQ(status.policy(), "defaults");
  EXPECT_EQ(status.mode(), "enforce");
  EXPECT_FALSE(status.probe_in_flight());
}

TEST_F(ServiceTest, ReportClassifiesGrpcCode) {
  v1::AcquireResponse acquired;
  ASSERT_TRUE(Acquire("svc/grpc", &acquired).ok());
  v1::ReportRequest req;
  req.set_dependency("svc/grpc");
  req.set_permit(acquired.permit());
  req.set_grpc_code(4);  // DEADLINE_EXCEEDED
  v1::ReportResponse reported;
  ASSERT_TRUE(Report(req, &reported).ok());
  EXPECT_EQ(reported.effect(), v1::EFFECT_COUNTED_FAILURE);

  v1::BreakerStatus status;
  ASSERT_TRUE(GetState("svc/grpc", &status).ok());
  EXPECT_EQ(status.window_failures(), 1u);
  EXPECT_EQ(status.consecutive_failures(), 1u);
  EXPECT_DOUBLE_EQ(status.failure_rate(), 1.0);
}

TEST_F(ServiceTest, BadNamesAreInvalidArgumentAndCreateNothing) {
  v1::AcquireResponse acquired;
  grpc::Status s = Acquire("", &acquired);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("dependency"));

  s = Acquire("has space", &acquired);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("dependency"));

  s = Acquire(std::string(201, 'a'), &acquired);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("dependency"));

  {
    grpc::ClientContext ctx;
    v1::AcquireFirstRequest req;
    req.add_dependencies("good/one");
    req.add_dependencies("bad\nname");
    v1::AcquireFirstResponse resp;
    s = stub_->AcquireFirst(&ctx, req, &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_THAT(s.error_message(), HasSubstr("dependencies[1]"));
  }
  v1::BreakerStatus status;
  s = GetState("bad name", &status);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);

  v1::AdminResponse admin;
  s = CallAdmin(&v1::Admin::Stub::ForceOpen, "bad name", kBearer, &admin);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("dependency"));

  EXPECT_EQ(registry_->size(), 0u);
}

TEST_F(ServiceTest, UnknownPermitIsInvalidArgument) {
  v1::AcquireResponse acquired;
  ASSERT_TRUE(Acquire("svc/a", &acquired).ok());

  v1::ReportRequest req;
  req.set_dependency("svc/a");
  req.set_permit(acquired.permit() ^ 0x5a5a5a5a5a5a5a5aULL);
  req.set_outcome(v1::OUTCOME_TIMEOUT);
  v1::ReportResponse reported;
  grpc::Status s = Report(req, &reported);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("permit"));

  req.set_permit(0);
  s = Report(req, &reported);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("permit"));

  // A permit for a dependency that has no breaker (e.g. from before a
  // restart) is refused too, and creates nothing.
  req.set_dependency("svc/never-acquired");
  req.set_permit(acquired.permit());
  s = Report(req, &reported);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("permit"));

  v1::BreakerStatus status;
  ASSERT_TRUE(GetState("svc/a", &status).ok());
  EXPECT_EQ(status.window_calls(), 0u);
  EXPECT_EQ(registry_->size(), 1u);
}

TEST_F(ServiceTest, BadDurationsAreInvalidArgumentNamingTheField) {
  v1::AcquireResponse acquired;
  ASSERT_TRUE(Acquire("svc/a", &acquired).ok());
  v1::ReportRequest base;
  base.set_dependency("svc/a");
  base.set_permit(acquired.permit());
  base.set_outcome(v1::OUTCOME_TIMEOUT);
  v1::ReportResponse reported;

  v1::ReportRequest req = base;
  req.mutable_latency()->set_seconds(-1);
  grpc::Status s = Report(req, &reported);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message(), "latency: must not be negative");

  req = base;
  req.mutable_latency()->set_nanos(-5);
  s = Report(req, &reported);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message(), "latency: must not be negative");

  req = base;
  req.mutable_latency()->set_nanos(1000000000);
  s = Report(req, &reported);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("latency: nanos"));

  req = base;
  req.mutable_latency()->set_seconds(int64_t{1} << 62);
  s = Report(req, &reported);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("latency: must be at most"));

  req = base;
  req.mutable_retry_after()->set_seconds(25 * 3600);
  s = Report(req, &reported);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("retry_after: must be at most"));

  // Nothing was recorded; the permit still works.
  v1::BreakerStatus status;
  ASSERT_TRUE(GetState("svc/a", &status).ok());
  EXPECT_EQ(status.window_calls(), 0u);
  ASSERT_TRUE(Report(base, &reported).ok());
  EXPECT_EQ(reported.effect(), v1::EFFECT_COUNTED_FAILURE);
}

TEST_F(ServiceTest, ReportWithoutAnyOutcomeIsInvalidArgument) {
  v1::AcquireResponse acquired;
  ASSERT_TRUE(Acquire("svc/a", &acquired).ok());
  v1::ReportRequest req;
  req.set_dependency("svc/a");
  req.set_permit(acquired.permit());
  v1::ReportResponse reported;
  grpc::Status s = Report(req, &reported);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("outcome"));

  req.set_outcome(static_cast<v1::Outcome>(42));  // unknown enum value
  s = Report(req, &reported);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("outcome"));

  req.set_outcome(v1::OUTCOME_UNSPECIFIED);
  req.set_grpc_code(17);
  s = Report(req, &reported);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("grpc_code"));
}

TEST_F(ServiceTest, OpenBreakerRejectsWithTimeLeft) {
  OpenByTimeouts("svc/down");
  clock_.Advance(absl::Seconds(10));
  v1::AcquireResponse acquired;
  ASSERT_TRUE(Acquire("svc/down", &acquired).ok());
  EXPECT_FALSE(acquired.allowed());
  EXPECT_EQ(acquired.permit(), 0u);
  EXPECT_EQ(acquired.state(), v1::STATE_OPEN);
  EXPECT_EQ(acquired.reason(), v1::REJECT_REASON_OPEN);
  EXPECT_EQ(FromProto(acquired.retry_after()), absl::Seconds(20));

  v1::BreakerStatus status;
  ASSERT_TRUE(GetState("svc/down", &status).ok());
  EXPECT_EQ(status.state(), v1::STATE_OPEN);
  EXPECT_EQ(status.generation(), 1u);
  EXPECT_EQ(FromProto(status.retry_after()), absl::Seconds(20));
  EXPECT_EQ(status.consecutive_failures(), 5u);
}

TEST_F(ServiceTest, SecondReportOfAPermitIsDuplicateAndChangesNothing) {
  v1::AcquireResponse acquired;
  ASSERT_TRUE(Acquire("svc/once", &acquired).ok());
  v1::ReportRequest req;
  req.set_dependency("svc/once");
  req.set_permit(acquired.permit());
  req.set_outcome(v1::OUTCOME_SUCCESS);
  v1::ReportResponse reported;
  ASSERT_TRUE(Report(req, &reported).ok());
  EXPECT_EQ(reported.effect(), v1::EFFECT_COUNTED_SUCCESS);

  req.set_outcome(v1::OUTCOME_TIMEOUT);
  ASSERT_TRUE(Report(req, &reported).ok());
  EXPECT_EQ(reported.effect(), v1::EFFECT_DUPLICATE);
  EXPECT_EQ(reported.state(), v1::STATE_CLOSED);

  v1::BreakerStatus status;
  ASSERT_TRUE(GetState("svc/once", &status).ok());
  EXPECT_EQ(status.window_calls(), 1u);
  EXPECT_EQ(status.window_failures(), 0u);
  EXPECT_EQ(status.consecutive_failures(), 0u);
}

// The trace holds one line per call made: a repeated Report is not another
// call, so `breakerctl simulate` replays the call once.
TEST_F(ServiceTest, RepeatedReportIsNotTracedAgain) {
  const std::string path = ::testing::TempDir() + "/duplicate_trace.jsonl";
  std::remove(path.c_str());
  absl::StatusOr<std::unique_ptr<TraceWriter>> trace =
      TraceWriter::Open(path, 1 << 20);
  ASSERT_TRUE(trace.ok()) << trace.status();
  Options options;
  options.trace = trace->get();
  Start(options);

  v1::AcquireResponse acquired;
  ASSERT_TRUE(Acquire("svc/traced", &acquired).ok());
  v1::ReportRequest req;
  req.set_dependency("svc/traced");
  req.set_permit(acquired.permit());
  req.set_outcome(v1::OUTCOME_SUCCESS);
  v1::ReportResponse reported;
  ASSERT_TRUE(Report(req, &reported).ok());
  ASSERT_TRUE(Report(req, &reported).ok());
  ASSERT_EQ(reported.effect(), v1::EFFECT_DUPLICATE);
  Stop();  // the writer is flushed by then
  trace->reset();

  std::ifstream in(path);
  const std::string text((std::istreambuf_iterator<char>(in)),
                         std::istreambuf_iterator<char>());
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 1) << text;
}

TEST_F(ServiceTest, StatusCountsPermitsInFlightUntilReported) {
  v1::AcquireResponse first, second;
  ASSERT_TRUE(Acquire("svc/busy", &first).ok());
  ASSERT_TRUE(Acquire("svc/busy", &second).ok());
  v1::BreakerStatus status;
  ASSERT_TRUE(GetState("svc/busy", &status).ok());
  EXPECT_EQ(status.inflight(), 2u);
  EXPECT_EQ(status.admit_share(), 1);

  v1::ReportRequest req;
  req.set_dependency("svc/busy");
  req.set_permit(first.permit());
  req.set_outcome(v1::OUTCOME_SUCCESS);
  v1::ReportResponse reported;
  ASSERT_TRUE(Report(req, &reported).ok());
  ASSERT_TRUE(GetState("svc/busy", &status).ok());
  EXPECT_EQ(status.inflight(), 1u);

  grpc::ClientContext ctx;
  v1::ListStatesResponse list;
  ASSERT_TRUE(stub_->ListStates(&ctx, v1::ListStatesRequest(), &list).ok());
  ASSERT_EQ(list.breakers_size(), 1);
  EXPECT_EQ(list.breakers(0).inflight(), 1u);
  EXPECT_EQ(list.breakers(0).admit_share(), 1);
}

// Gentle recovery: after the probe closes the breaker, the status shows the
// share admitted, and a retry is refused with REJECT_REASON_RAMP while the
// state stays CLOSED.
TEST_F(ServiceTest, RampingBreakerShowsItsShareAndRefusesRetriesWithRamp) {
  auto policy = std::make_shared<Policy>();
  policy->cooldown.jitter = 0;
  policy->recovery.ramp = absl::Seconds(100);
  policy->recovery.start_share = 0.1;
  auto policies = std::make_shared<PolicySet>();
  policies->defaults = policy;
  registry_->ApplyPolicies(policies);

  OpenByTimeouts("svc/ramp");
  clock_.Advance(absl::Seconds(30));
  AcquireAndReport("svc/ramp", v1::OUTCOME_SUCCESS);  // the probe
  v1::BreakerStatus status;
  ASSERT_TRUE(GetState("svc/ramp", &status).ok());
  ASSERT_EQ(status.state(), v1::STATE_CLOSED);
  EXPECT_DOUBLE_EQ(status.admit_share(), 0.1);

  v1::AcquireResponse retry;
  ASSERT_TRUE(Acquire("svc/ramp", &retry, /*attempt=*/1).ok());
  EXPECT_FALSE(retry.allowed());
  EXPECT_EQ(retry.permit(), 0u);
  EXPECT_EQ(retry.state(), v1::STATE_CLOSED);
  EXPECT_EQ(retry.reason(), v1::REJECT_REASON_RAMP);

  clock_.Advance(absl::Seconds(50));
  ASSERT_TRUE(GetState("svc/ramp", &status).ok());
  EXPECT_DOUBLE_EQ(status.admit_share(), 0.55);
  clock_.Advance(absl::Seconds(50));
  ASSERT_TRUE(GetState("svc/ramp", &status).ok());
  EXPECT_EQ(status.admit_share(), 1);
}

TEST_F(ServiceTest, AcquireFirstSkipsAnOpenDependency) {
  OpenByTimeouts("llm/primary");
  grpc::ClientContext ctx;
  v1::AcquireFirstRequest req;
  req.add_dependencies("llm/primary");
  req.add_dependencies("llm/secondary");
  v1::AcquireFirstResponse resp;
  ASSERT_TRUE(stub_->AcquireFirst(&ctx, req, &resp).ok());
  EXPECT_EQ(resp.dependency(), "llm/secondary");
  EXPECT_TRUE(resp.allowed());
  EXPECT_NE(resp.permit(), 0u);
  EXPECT_EQ(resp.state(), v1::STATE_CLOSED);
}

TEST_F(ServiceTest, AcquireFirstWithEveryCandidateOpenGrantsNone) {
  OpenByTimeouts("llm/primary");
  clock_.Advance(absl::Seconds(5));
  OpenByTimeouts("llm/secondary");
  grpc::ClientContext ctx;
  v1::AcquireFirstRequest req;
  req.add_dependencies("llm/primary");
  req.add_dependencies("llm/secondary");
  v1::AcquireFirstResponse resp;
  ASSERT_TRUE(stub_->AcquireFirst(&ctx, req, &resp).ok());
  EXPECT_EQ(resp.dependency(), "");
  EXPECT_FALSE(resp.allowed());
  EXPECT_EQ(resp.reason(), v1::REJECT_REASON_OPEN);
  // The shortest wait: primary's cooldown has 25 s left.
  EXPECT_EQ(FromProto(resp.retry_after()), absl::Seconds(25));
}

TEST_F(ServiceTest, AcquireFirstWithNoNamesIsInvalidArgument) {
  grpc::ClientContext ctx;
  v1::AcquireFirstRequest req;
  v1::AcquireFirstResponse resp;
  grpc::Status s = stub_->AcquireFirst(&ctx, req, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("dependencies"));
}

TEST_F(ServiceTest, GetStateOfUnknownDependencyIsNotFound) {
  v1::BreakerStatus status;
  grpc::Status s = GetState("svc/unknown", &status);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(s.error_message(), HasSubstr("svc/unknown"));
  EXPECT_EQ(registry_->size(), 0u);
}

TEST_F(ServiceTest, ListStatesReturnsEveryBreaker) {
  v1::AcquireResponse acquired;
  ASSERT_TRUE(Acquire("a/1", &acquired).ok());
  ASSERT_TRUE(Acquire("b/2", &acquired).ok());
  grpc::ClientContext ctx;
  v1::ListStatesResponse resp;
  ASSERT_TRUE(stub_->ListStates(&ctx, v1::ListStatesRequest(), &resp).ok());
  std::vector<std::string> names;
  for (const v1::BreakerStatus& b : resp.breakers()) {
    names.push_back(b.dependency());
  }
  EXPECT_THAT(names, UnorderedElementsAre("a/1", "b/2"));
}

// --- Watch
// --------------------------------------------------------------------

TEST_F(ServiceTest, WatchSendsInitialStateThenOpenTransition) {
  auto call = Watch({"svc/watched"});
  v1::StateChange change;
  ASSERT_TRUE(ReadChange(*call->reader, &change));
  EXPECT_EQ(change.dependency(), "svc/watched");
  EXPECT_EQ(change.state(), v1::STATE_CLOSED);
  EXPECT_EQ(change.previous(), v1::STATE_UNSPECIFIED);
  EXPECT_EQ(change.reason(), "initial");
  EXPECT_EQ(change.generation(), 0u);

  OpenByTimeouts("svc/other");  // not watched
  OpenByTimeouts("svc/watched");
  ASSERT_TRUE(ReadChange(*call->reader, &change));
  EXPECT_EQ(change.dependency(), "svc/watched");
  EXPECT_EQ(change.state(), v1::STATE_OPEN);
  EXPECT_EQ(change.previous(), v1::STATE_CLOSED);
  EXPECT_EQ(change.reason(), "consecutive_failures");
  EXPECT_EQ(change.generation(), 1u);
  EXPECT_GT(FromProto(change.retry_after()), absl::ZeroDuration());
  EXPECT_EQ(FromProto(change.retry_after()), absl::Seconds(30));

  call->ctx.TryCancel();
  EXPECT_EQ(Drain(*call).error_code(), grpc::StatusCode::CANCELLED);
}

TEST_F(ServiceTest, WatchInitialStateOfOpenBreakerCarriesTimeLeft) {
  OpenByTimeouts("svc/down");
  clock_.Advance(absl::Seconds(12));
  auto call = Watch({"svc/down"});
  v1::StateChange change;
  ASSERT_TRUE(ReadChange(*call->reader, &change));
  EXPECT_EQ(change.state(), v1::STATE_OPEN);
  EXPECT_EQ(change.reason(), "initial");
  EXPECT_EQ(change.generation(), 1u);
  EXPECT_EQ(FromProto(change.retry_after()), absl::Seconds(18));

  // The cooldown ends; the next Acquire takes the probe and the stream sees
  // open -> half-open, then the probe's success closes it.
  clock_.Advance(absl::Seconds(18));
  AcquireAndReport("svc/down", v1::OUTCOME_SUCCESS);
  ASSERT_TRUE(ReadChange(*call->reader, &change));
  EXPECT_EQ(change.state(), v1::STATE_HALF_OPEN);
  EXPECT_EQ(change.previous(), v1::STATE_OPEN);
  EXPECT_EQ(change.reason(), "cooldown_elapsed");
  EXPECT_EQ(FromProto(change.retry_after()), absl::ZeroDuration());
  ASSERT_TRUE(ReadChange(*call->reader, &change));
  EXPECT_EQ(change.state(), v1::STATE_CLOSED);
  EXPECT_EQ(change.previous(), v1::STATE_HALF_OPEN);
  EXPECT_EQ(change.reason(), "probe_succeeded");
  EXPECT_EQ(change.generation(), 3u);
  call->ctx.TryCancel();
  Drain(*call);
}

TEST_F(ServiceTest, WatchWithNoNamesFollowsEveryBreaker) {
  v1::AcquireResponse acquired;
  ASSERT_TRUE(Acquire("a/1", &acquired).ok());
  ASSERT_TRUE(Acquire("b/2", &acquired).ok());
  auto call = Watch({});
  std::vector<std::string> initial;
  v1::StateChange change;
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(ReadChange(*call->reader, &change));
    EXPECT_EQ(change.reason(), "initial");
    initial.push_back(change.dependency());
  }
  EXPECT_THAT(initial, UnorderedElementsAre("a/1", "b/2"));

  // A breaker that did not exist when the stream started. The stream reads
  // the registry shard by shard as the client reads: if c/3's shard is not
  // read yet, c/3 comes as an initial state (already forced open), else as
  // the transition.
  ASSERT_TRUE(registry_->ForceOpen("c/3").ok());
  ASSERT_TRUE(ReadChange(*call->reader, &change));
  EXPECT_EQ(change.dependency(), "c/3");
  EXPECT_EQ(change.state(), v1::STATE_FORCED_OPEN);
  EXPECT_THAT(change.reason(), ::testing::AnyOf("forced_open", "initial"));
  call->ctx.TryCancel();
  Drain(*call);
}

// Issue 13: 200 unread Watch(all) streams over 10,000 breakers held every
// breaker's state each (481 MB). Now a stream reads the registry one shard
// (about 1/256 of it) at a time, the next once the previous is written.
TEST_F(ServiceTest, WatchOfEveryDependencyHoldsOneShardAtATimeAndSendsAll) {
  constexpr int kBreakers = 2560;
  for (int i = 0; i < kBreakers; ++i) {
    ASSERT_TRUE(registry_->Acquire(absl::StrCat("dep/", i), 0).ok());
  }
  auto unread = Watch({});
  auto reader = Watch({});
  v1::StateChange change;
  // Started; then never read.
  ASSERT_TRUE(ReadChange(*unread->reader, &change));
  std::set<std::string> seen;
  ASSERT_TRUE(ReadChange(*reader->reader, &change));
  seen.insert(change.dependency());
  // The in-process transport completes a write only when the client reads:
  // the unread stream holds what it has queued. 10 breakers per shard on
  // average; a shard holds far fewer than 64 of them.
  EXPECT_LT(hub_->queued_messages(), 2 * 64u);
  while (seen.size() < static_cast<size_t>(kBreakers)) {
    ASSERT_TRUE(ReadChange(*reader->reader, &change));
    EXPECT_EQ(change.reason(), "initial");
    EXPECT_TRUE(seen.insert(change.dependency()).second)
        << change.dependency() << " sent twice";
    EXPECT_LT(hub_->queued_messages(), 2 * 64u);
  }
  // Every breaker once; then live transitions follow.
  ASSERT_TRUE(registry_->ForceOpen("dep/7").ok());
  ASSERT_TRUE(ReadChange(*reader->reader, &change));
  EXPECT_EQ(change.dependency(), "dep/7");
  EXPECT_EQ(change.state(), v1::STATE_FORCED_OPEN);
  unread->ctx.TryCancel();
  reader->ctx.TryCancel();
  Drain(*unread);
  Drain(*reader);
  // A stream leaves the hub (on the server's side of the cancellation) only
  // after its queue is dropped.
  while (hub_->active_streams() > 0) std::this_thread::yield();
  EXPECT_EQ(hub_->queued_messages(), 0u);
}

// Transitions while a Watch of every dependency is still reading shards:
// each dependency's generations never go back, and every breaker's last
// message is its current state.
TEST_F(ServiceTest, WatchOfEveryDependencyKeepsOrderWhileShardsAreRead) {
  constexpr int kBreakers = 1024;
  for (int i = 0; i < kBreakers; ++i) {
    ASSERT_TRUE(registry_->Acquire(absl::StrCat("dep/", i), 0).ok());
  }
  auto call = Watch({});
  v1::StateChange change;
  ASSERT_TRUE(ReadChange(*call->reader, &change));
  absl::flat_hash_map<std::string, v1::StateChange> last;
  last[change.dependency()] = change;
  // Every 8th breaker is forced open, then closed, while shards are read.
  for (int i = 0; i < kBreakers; i += 8) {
    ASSERT_TRUE(registry_->ForceOpen(absl::StrCat("dep/", i)).ok());
    ASSERT_TRUE(registry_->ForceClose(absl::StrCat("dep/", i)).ok());
  }
  // Read until every breaker's current generation has been seen.
  absl::flat_hash_map<std::string, uint64_t> current;
  registry_->ForEach(
      [&](const BreakerSnapshot& s) { current[s.dependency] = s.generation; });
  auto done = [&] {
    for (const auto& [name, generation] : current) {
      auto it = last.find(name);
      if (it == last.end() || it->second.generation() < generation) {
        return false;
      }
    }
    return true;
  };
  while (!done()) {
    ASSERT_TRUE(ReadChange(*call->reader, &change));
    auto it = last.find(change.dependency());
    if (it != last.end()) {
      EXPECT_GE(change.generation(), it->second.generation())
          << change.dependency() << " went back";
    }
    last[change.dependency()] = change;
  }
  for (int i = 0; i < kBreakers; i += 8) {
    EXPECT_EQ(last[absl::StrCat("dep/", i)].state(), v1::STATE_FORCED_CLOSED);
  }
  call->ctx.TryCancel();
  Drain(*call);
}

// The hub's total: past max_queued_total, a stream holding at least its
// fair share is ended when handed one more message; one that holds little
// is not.
TEST_F(ServiceTest, StreamsHoldingTheirShareOfAFullHubAreEnded) {
  Options options;
  options.max_queued_total = 40;
  Start(options);
  std::vector<std::unique_ptr<WatchCall>> flappy;
  v1::StateChange change;
  for (int i = 0; i < 3; ++i) {
    flappy.push_back(Watch({"svc/flappy"}));
    ASSERT_TRUE(ReadChange(*flappy.back()->reader, &change));  // subscribed
  }
  auto quiet = Watch({"svc/quiet"});
  ASSERT_TRUE(ReadChange(*quiet->reader, &change));
  ASSERT_EQ(hub_->active_streams(), 4u);
  for (int i = 0; i < 40; ++i) {
    ASSERT_TRUE(registry_->ForceOpen("svc/flappy").ok());
    ASSERT_TRUE(registry_->ForceClose("svc/flappy").ok());
    // Never more than the limit plus the one message that crossed it.
    EXPECT_LE(hub_->queued_messages(), options.max_queued_total + 1);
  }
  for (auto& call : flappy) {
    grpc::Status s = Drain(*call);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
    EXPECT_THAT(s.error_message(),
                HasSubstr("messages queued for all Watch streams, limit 40"));
  }
  // The quiet stream was not blamed, and still works.
  EXPECT_EQ(hub_->active_streams(), 1u);
  ASSERT_TRUE(registry_->ForceOpen("svc/quiet").ok());
  ASSERT_TRUE(ReadChange(*quiet->reader, &change));
  EXPECT_EQ(change.state(), v1::STATE_FORCED_OPEN);
  quiet->ctx.TryCancel();
  Drain(*quiet);
}

// Issue 13: two callers looping Watch(all) or ListStates at 10,000
// breakers starved everyone's Acquire. Reads of the whole registry are
// admitted by the ReadLimiter.
TEST_F(ServiceTest, FullRegistryReadsAreRateLimited) {
  Options options;
  options.read_all_per_second = 100;
  Start(options);
  for (int i = 0; i < 150; ++i) {
    ASSERT_TRUE(registry_->Acquire(absl::StrCat("dep/", i), 0).ok());
  }
  v1::ListStatesResponse listed;
  {
    grpc::ClientContext ctx;
    ASSERT_TRUE(stub_->ListStates(&ctx, {}, &listed).ok());  // 100 -> -50
    EXPECT_EQ(listed.breakers_size(), 150);
  }
  {
    grpc::ClientContext ctx;
    grpc::Status s = stub_->ListStates(&ctx, {}, &listed);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
    EXPECT_THAT(s.error_message(),
                HasSubstr("list_states: reads of every breaker are limited to "
                          "100 breakers per second "
                          "(--read-all-breakers-per-second); retry in 501 ms"));
  }
  auto all = Watch({});
  grpc::Status s = Drain(*all);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(s.error_message(), HasSubstr("watch: reads of every breaker"));
  // Named Watch streams and Acquire are not limited.
  auto named = Watch({"dep/1"});
  v1::StateChange change;
  ASSERT_TRUE(ReadChange(*named->reader, &change));
  v1::AcquireResponse acquired;
  ASSERT_TRUE(Acquire("dep/1", &acquired).ok());
  // Paid back after half a second (plus the refill to a positive balance).
  clock_.Advance(absl::Milliseconds(501));
  {
    grpc::ClientContext ctx;
    EXPECT_TRUE(stub_->ListStates(&ctx, {}, &listed).ok());
  }
  named->ctx.TryCancel();
  Drain(*named);
}

TEST(ReadLimiterTest, AdmitsWhileNotInDebtAndRefillsAtItsRate) {
  FakeClock clock;
  ReadLimiter limiter(&clock, 1000);
  EXPECT_TRUE(limiter.Admit(600, "x").ok());  // 1000 -> 400
  EXPECT_TRUE(limiter.Admit(600, "x").ok());  // 400 -> -200: debt allowed
  absl::Status s = limiter.Admit(1, "x");
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(s.message(), HasSubstr("retry in 201 ms"));
  clock.Advance(absl::Milliseconds(200));  // -200 -> 0: still not positive
  EXPECT_FALSE(limiter.Admit(1, "x").ok());
  clock.Advance(absl::Milliseconds(1));        // 1
  EXPECT_TRUE(limiter.Admit(5000, "x").ok());  // bigger than the bucket
  // The bucket holds one second of reads, however long it stays idle.
  clock.Advance(absl::Hours(1));
  EXPECT_TRUE(limiter.Admit(1000, "x").ok());  // debt paid, then full: 0
  EXPECT_FALSE(limiter.Admit(1, "x").ok());
}

TEST_F(ServiceTest, WatchRejectsBadNamesAndTooManyNames) {
  auto bad = Watch({"ok/name", "not ok"});
  grpc::Status s = Drain(*bad);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("dependencies[1]"));

  std::vector<std::string> names;
  for (size_t i = 0; i <= WatchHub::kMaxWatchDependencies; ++i) {
    names.push_back(absl::StrCat("svc/", i));
  }
  auto many = Watch(names);
  s = Drain(*many);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("at most 64"));
  EXPECT_EQ(registry_->size(), 0u);
  EXPECT_EQ(hub_->active_streams(), 0u);
}

TEST_F(ServiceTest, WatchStreamLimitIsResourceExhausted) {
  Options options;
  options.max_streams = 2;
  Start(options);
  auto first = Watch({"svc/a"});
  auto second = Watch({"svc/a"});
  v1::StateChange change;
  // Each stream has subscribed once its initial state arrives.
  ASSERT_TRUE(ReadChange(*first->reader, &change));
  ASSERT_TRUE(ReadChange(*second->reader, &change));
  EXPECT_EQ(hub_->active_streams(), 2u);

  auto third = Watch({"svc/a"});
  grpc::Status s = Drain(*third);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(s.error_message(), HasSubstr("at most 2"));

  // The admitted streams still work.
  ASSERT_TRUE(registry_->ForceOpen("svc/a").ok());
  ASSERT_TRUE(ReadChange(*first->reader, &change));
  EXPECT_EQ(change.state(), v1::STATE_FORCED_OPEN);
  ASSERT_TRUE(ReadChange(*second->reader, &change));
  EXPECT_EQ(change.state(), v1::STATE_FORCED_OPEN);
  first->ctx.TryCancel();
  second->ctx.TryCancel();
  Drain(*first);
  Drain(*second);
}

TEST_F(ServiceTest, SlowConsumerIsEndedWithResourceExhausted) {
  Options options;
  options.max_queue = 1;
  Start(options);
  auto call = Watch({"svc/flappy"});
  v1::StateChange change;
  ASSERT_TRUE(ReadChange(*call->reader, &change));  // initial; subscribed
  ASSERT_EQ(hub_->active_streams(), 1u);

  // The client stops reading. The in-process transport completes a write
  // only when the client reads, so one message is in flight, one is queued
  // and the third passes the limit.
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(registry_->ForceOpen("svc/flappy").ok());
    ASSERT_TRUE(registry_->ForceClose("svc/flappy").ok());
  }
  // The stream was dropped synchronously by the transition that overflowed.
  EXPECT_EQ(hub_->active_streams(), 0u);

  std::vector<v1::StateChange> seen;
  grpc::Status s = Drain(*call, &seen);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(s.error_message(),
            "watch: client reads too slowly (queue limit 1)");
  EXPECT_LE(seen.size(), 2u);
}

// Notices (created, evicted, ramp_done, reload) are not transitions: a
// burst of them, one per breaker, from an eviction pass or new names, must
// not end a Watch of all dependencies, or every client would resync.
TEST_F(ServiceTest, ABurstOfNoticesDoesNotEndASlowStream) {
  Options options;
  options.max_queue = 1;
  Start(options);
  auto call = Watch({});
  ASSERT_TRUE(registry_->ForceOpen("svc/subscribed").ok());
  v1::StateChange change;
  ASSERT_TRUE(call->reader->Read(&change));  // subscribed
  ASSERT_EQ(change.dependency(), "svc/subscribed");

  // The client reads nothing while 20 breakers are created.
  v1::AcquireResponse acquired;
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(Acquire(absl::StrCat("burst/", i), &acquired).ok());
  }
  EXPECT_EQ(hub_->active_streams(), 1u);
  std::vector<std::string> created;
  while (created.size() < 20 && call->reader->Read(&change)) {
    if (change.reason() == "created") created.push_back(change.dependency());
  }
  EXPECT_EQ(created.size(), 20u);

  // Transitions still count against the limit.
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(registry_->ForceOpen("svc/flappy").ok());
    ASSERT_TRUE(registry_->ForceClose("svc/flappy").ok());
  }
  EXPECT_EQ(hub_->active_streams(), 0u);
  EXPECT_EQ(Drain(*call).error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
}

TEST_F(ServiceTest, HubShutdownEndsStreamsWithUnavailable) {
  auto named = Watch({"svc/a"});
  auto all = Watch({});
  v1::StateChange change;
  ASSERT_TRUE(ReadChange(*named->reader, &change));
  ASSERT_TRUE(registry_->ForceOpen("svc/b").ok());
  ASSERT_TRUE(ReadChange(*all->reader, &change));  // proves `all` subscribed
  EXPECT_EQ(hub_->active_streams(), 2u);

  hub_->Shutdown();
  EXPECT_EQ(hub_->active_streams(), 0u);
  for (WatchCall* call : {named.get(), all.get()}) {
    grpc::Status s = Drain(*call);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE);
    EXPECT_EQ(s.error_message(), "breakerd is shutting down");
  }
  // New streams are refused.
  auto late = Watch({"svc/a"});
  EXPECT_EQ(Drain(*late).error_code(), grpc::StatusCode::UNAVAILABLE);
  // Transitions after shutdown go nowhere and harm nothing.
  ASSERT_TRUE(registry_->ForceClose("svc/b").ok());
}

TEST_F(ServiceTest, ManyWatchersAndTransitionsFromSeveralThreads) {
  constexpr int kStreams = 8;
  constexpr int kFlips = 50;
  std::vector<std::unique_ptr<WatchCall>> calls;
  for (int i = 0; i < kStreams; ++i) {
    calls.push_back(Watch({"svc/x", "svc/y"}));
  }
  v1::StateChange change;
  for (auto& call : calls) {
    ASSERT_TRUE(ReadChange(*call->reader, &change));
    ASSERT_TRUE(ReadChange(*call->reader, &change));
  }
  std::vector<std::thread> threads;
  for (const char* name : {"svc/x", "svc/y"}) {
    threads.emplace_back([this, name] {
      for (int i = 0; i < kFlips; ++i) {
        EXPECT_TRUE(registry_->ForceOpen(name).ok());
        EXPECT_TRUE(registry_->ForceClose(name).ok());
      }
    });
  }
  // Every stream sees every transition of both names, in generation order
  // per name.
  std::vector<int> received(kStreams, 0);
  for (int s = 0; s < kStreams; ++s) {
    uint64_t last_x = 0, last_y = 0;
    while (received[s] < 2 * 2 * kFlips &&
           ReadChange(*calls[s]->reader, &change)) {
      uint64_t& last = change.dependency() == "svc/x" ? last_x : last_y;
      EXPECT_GT(change.generation(), last);
      last = change.generation();
      ++received[s];
    }
  }
  for (std::thread& t : threads) t.join();
  for (int s = 0; s < kStreams; ++s) {
    EXPECT_EQ(received[s], 2 * 2 * kFlips) << "stream " << s;
    calls[s]->ctx.TryCancel();
    Drain(*calls[s]);
  }
}

// --- Admin
// --------------------------------------------------------------------

TEST_F(ServiceTest, AdminWithoutMetadataIsUnauthenticated) {
  v1::AdminResponse resp;
  grpc::Status s =
      CallAdmin(&v1::Admin::Stub::ForceOpen, "svc/a", std::nullopt, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_THAT(s.error_message(), HasSubstr("authorization"));
  EXPECT_EQ(registry_->size(), 0u);
}

TEST_F(ServiceTest, AdminWithWrongTokenIsUnauthenticated) {
  v1::AdminResponse resp;
  for (const std::string& auth :
       {std::string("Bearer wrong-token"), std::string(kToken),
        absl::StrCat("Bearer ", kToken, "x"), absl::StrCat("bearer ", kToken),
        std::string("Bearer ")}) {
    grpc::Status s =
        CallAdmin(&v1::Admin::Stub::ForceOpen, "svc/a", auth, &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << auth;
    EXPECT_THAT(s.error_message(), Not(HasSubstr(kToken)));
    EXPECT_THAT(s.error_message(), Not(HasSubstr("wrong-token")));
  }
  grpc::Status s =
      CallAdmin(&v1::Admin::Stub::Reset, "svc/a", "Bearer nope", &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(registry_->size(), 0u);
}

// Every refusal is counted (breakerd_admin_auth_failures_total) and handed
// to the hook (the runner's rate-limited log line) with a reason, never
// with what was sent; an authorized call is neither.
TEST_F(ServiceTest, AdminRefusalsAreCountedAndReportedWithAReasonOnly) {
  std::vector<std::string> reasons;
  admin_service_->SetOnAuthFailure(
      [&](absl::string_view reason) { reasons.emplace_back(reason); });
  v1::AdminResponse resp;
  CallAdmin(&v1::Admin::Stub::ForceOpen, "svc/a", std::nullopt, &resp);
  CallAdmin(&v1::Admin::Stub::ForceOpen, "svc/a", "Bearer guess-1", &resp);
  CallAdmin(&v1::Admin::Stub::Reset, "svc/a", "Bearer guess-2", &resp);
  EXPECT_TRUE(
      CallAdmin(&v1::Admin::Stub::ForceOpen, "svc/a", kBearer, &resp).ok());
  EXPECT_EQ(admin_service_->auth_failures(), 3u);
  EXPECT_THAT(reasons, ElementsAre("missing", "invalid", "invalid"));
}

TEST_F(ServiceTest, AdminDisabledIsUnauthenticated) {
  Options options;
  options.token = std::nullopt;
  Start(options);
  v1::AdminResponse resp;
  grpc::Status s =
      CallAdmin(&v1::Admin::Stub::ForceClose, "svc/a", kBearer, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(s.error_message(),
            "admin: disabled; start breakerd with --admin-token-file");

  options.token = "";  // an empty token disables too
  Start(options);
  s = CallAdmin(&v1::Admin::Stub::ForceClose, "svc/a", "Bearer ", &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(registry_->size(), 0u);
}

TEST_F(ServiceTest, AdminForceOpenMakesAcquireReject) {
  v1::AdminResponse resp;
  ASSERT_TRUE(
      CallAdmin(&v1::Admin::Stub::ForceOpen, "svc/a", kBearer, &resp).ok());
  EXPECT_EQ(resp.status().dependency(), "svc/a");
  EXPECT_EQ(resp.status().state(), v1::STATE_FORCED_OPEN);

  v1::AcquireResponse acquired;
  ASSERT_TRUE(Acquire("svc/a", &acquired).ok());
  EXPECT_FALSE(acquired.allowed());
  EXPECT_EQ(acquired.state(), v1::STATE_FORCED_OPEN);
  EXPECT_EQ(acquired.reason(), v1::REJECT_REASON_FORCED_OPEN);

  ASSERT_TRUE(
      CallAdmin(&v1::Admin::Stub::ForceClose, "svc/a", kBearer, &resp).ok());
  EXPECT_EQ(resp.status().state(), v1::STATE_FORCED_CLOSED);
  ASSERT_TRUE(Acquire("svc/a", &acquired).ok());
  EXPECT_TRUE(acquired.allowed());

  ASSERT_TRUE(CallAdmin(&v1::Admin::Stub::Reset, "svc/a", kBearer, &resp).ok());
  EXPECT_EQ(resp.status().state(), v1::STATE_CLOSED);
  EXPECT_EQ(resp.status().generation(), 3u);
}

TEST_F(ServiceTest, AdminResetOfUnknownDependencyIsNotFound) {
  v1::AdminResponse resp;
  grpc::Status s =
      CallAdmin(&v1::Admin::Stub::Reset, "svc/none", kBearer, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
}

// --- convert
// ------------------------------------------------------------------

TEST(ConvertTest, EnumsMatchTheWire) {
  EXPECT_EQ(ToProto(State::kClosed), v1::STATE_CLOSED);
  EXPECT_EQ(ToProto(State::kOpen), v1::STATE_OPEN);
  EXPECT_EQ(ToProto(State::kHalfOpen), v1::STATE_HALF_OPEN);
  EXPECT_EQ(ToProto(State::kForcedOpen), v1::STATE_FORCED_OPEN);
  EXPECT_EQ(ToProto(State::kForcedClosed), v1::STATE_FORCED_CLOSED);
  EXPECT_EQ(ToProto(RejectReason::kNone), v1::REJECT_REASON_UNSPECIFIED);
  EXPECT_EQ(ToProto(RejectReason::kOpen), v1::REJECT_REASON_OPEN);
  EXPECT_EQ(ToProto(RejectReason::kProbeInFlight),
            v1::REJECT_REASON_PROBE_IN_FLIGHT);
  EXPECT_EQ(ToProto(RejectReason::kRetryBudget),
            v1::REJECT_REASON_RETRY_BUDGET);
  EXPECT_EQ(ToProto(RejectReason::kForcedOpen), v1::REJECT_REASON_FORCED_OPEN);
  EXPECT_EQ(ToProto(RejectReason::kRamp), v1::REJECT_REASON_RAMP);
  EXPECT_EQ(ToProto(Effect::kCountedSuccess), v1::EFFECT_COUNTED_SUCCESS);
  EXPECT_EQ(ToProto(Effect::kCountedFailure), v1::EFFECT_COUNTED_FAILURE);
  EXPECT_EQ(ToProto(Effect::kNeutral), v1::EFFECT_NEUTRAL);
  EXPECT_EQ(ToProto(Effect::kLate), v1::EFFECT_LATE);
  EXPECT_EQ(ToProto(Effect::kDuplicate), v1::EFFECT_DUPLICATE);
  EXPECT_EQ(static_cast<int>(OutcomeClass::kSoftFailure),
            static_cast<int>(v1::OUTCOME_SOFT_FAILURE));
  EXPECT_EQ(static_cast<int>(OutcomeClass::kTimeout),
            static_cast<int>(v1::OUTCOME_TIMEOUT));
}

// A ramp refusal is a refusal like any other; its wait may be unknown
// (zero), which leaves retry_after unset on the wire.
TEST(ConvertTest, RampRefusalCrossesTheWire) {
  AcquireResult result;
  result.allowed = false;
  result.state = State::kClosed;
  result.reason = RejectReason::kRamp;
  v1::AcquireResponse out;
  FillAcquireResponse(result, &out);
  EXPECT_FALSE(out.allowed());
  EXPECT_EQ(out.permit(), 0u);
  EXPECT_EQ(out.state(), v1::STATE_CLOSED);
  EXPECT_EQ(out.reason(), v1::REJECT_REASON_RAMP);
  EXPECT_FALSE(out.has_retry_after());

  const std::string names[] = {"svc/a"};
  AcquireFirstResult first;
  first.granted = -1;
  first.result = result;
  v1::AcquireFirstResponse first_out;
  FillAcquireFirstResponse(first, names, &first_out);
  EXPECT_EQ(first_out.dependency(), "");
  EXPECT_EQ(first_out.reason(), v1::REJECT_REASON_RAMP);
}

TEST(ConvertTest, BreakerStatusCarriesAdmitShareAndInflight) {
  BreakerSnapshot snapshot;
  snapshot.dependency = "llm/key";
  snapshot.admit_share = 0.325;
  snapshot.inflight = 17;
  snapshot.hung_calls = 4;  // a metric only
  v1::BreakerStatus out;
  FillBreakerStatus(snapshot, &out);
  EXPECT_EQ(out.admit_share(), 0.325);
  EXPECT_EQ(out.inflight(), 17u);

  FillBreakerStatus(BreakerSnapshot(), &out);
  EXPECT_EQ(out.admit_share(), 1) << "not ramping";
  EXPECT_EQ(out.inflight(), 0u);
}

TEST(ConvertTest, StatusKeepsCodeAndMessage) {
  grpc::Status s = ToGrpcStatus(absl::NotFoundError("dependency: nope"));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(s.error_message(), "dependency: nope");
  EXPECT_TRUE(ToGrpcStatus(absl::OkStatus()).ok());
  EXPECT_EQ(ToGrpcStatus(absl::UnauthenticatedError("x")).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
}

TEST(ConvertTest, DurationsRoundTripAndClamp) {
  google::protobuf::Duration d;
  ToProtoDuration(absl::Milliseconds(1500), &d);
  EXPECT_EQ(d.seconds(), 1);
  EXPECT_EQ(d.nanos(), 500000000);
  ToProtoDuration(absl::Seconds(-3), &d);
  EXPECT_EQ(d.seconds(), 0);
  EXPECT_EQ(d.nanos(), 0);
  ToProtoDuration(absl::InfiniteDuration(), &d);
  EXPECT_EQ(d.seconds(), int64_t{315576000000});

  d.set_seconds(2);
  d.set_nanos(250);
  absl::StatusOr<absl::Duration> back =
      FromProtoDuration(d, "latency", absl::Hours(24));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, absl::Seconds(2) + absl::Nanoseconds(250));

  d.set_seconds(24 * 3600);
  d.set_nanos(0);
  EXPECT_TRUE(FromProtoDuration(d, "latency", absl::Hours(24)).ok());
  d.set_nanos(1);
  EXPECT_FALSE(FromProtoDuration(d, "latency", absl::Hours(24)).ok());

  d.set_seconds(1);
  d.set_nanos(-1);
  absl::Status s =
      FromProtoDuration(d, "retry_after", absl::Hours(24)).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("retry_after"));
}

// Admin calls go through the same per-call scope as the Breaker service's
// (UnaryCall), so graceful shutdown, which waits for CallTracker::active()
// to reach zero, drains them too.
TEST(AdminCallTrackerTest, AnOverrideIsCountedInFlightUntilItIsAnswered) {
  FakeClock clock;
  Registry registry(std::make_shared<const PolicySet>(), &clock,
                    /*permit_secret=*/42, &HalfUniform);
  CallTracker tracker;
  AdminServiceImpl admin(&registry, std::string(kToken),
                         /*rpc_stats=*/nullptr, &tracker);
  int64_t active_during_override = -1;
  admin.SetAfterOverride([&] { active_during_override = tracker.active(); });
  grpc::ServerBuilder builder;
  builder.RegisterService(&admin);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_NE(server, nullptr);
  std::unique_ptr<v1::Admin::Stub> stub =
      v1::Admin::NewStub(server->InProcessChannel(grpc::ChannelArguments()));

  grpc::ClientContext ctx;
  ctx.AddMetadata("authorization", kBearer);
  v1::ForceOpenRequest req;
  req.set_dependency("svc/a");
  v1::AdminResponse resp;
  ASSERT_TRUE(stub->ForceOpen(&ctx, req, &resp).ok());
  EXPECT_EQ(active_during_override, 1);

  server->Shutdown(SafetyDeadline());
  server->Wait();
  EXPECT_EQ(tracker.active(), 0);
}

}  // namespace
}  // namespace breakerd

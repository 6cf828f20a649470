// Tests of breakerd's grpc.health.v1.Health service through an in-process
// channel: no socket, no sleeping. Watch tests synchronise on the messages
// the stream delivers; the in-process transport completes a write only when
// the client reads it, so a client that stops reading holds one write in
// flight.
#include "server/service/health_service.h"

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"

namespace breakerd {
namespace {

using ::grpc::health::v1::Health;
using ::grpc::health::v1::HealthCheckRequest;
using ::grpc::health::v1::HealthCheckResponse;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr auto kServing = HealthCheckResponse::SERVING;
constexpr auto kNotServing = HealthCheckResponse::NOT_SERVING;
constexpr auto kServiceUnknown = HealthCheckResponse::SERVICE_UNKNOWN;

// A safety net so that a broken stream fails the test instead of hanging
// it; no test waits on it.
std::chrono::system_clock::time_point SafetyDeadline() {
  return std::chrono::system_clock::now() + std::chrono::seconds(30);
}

// Spins (yielding) until `done` or the safety net; returns `done()`. For a
// server-side effect of a client action that has no message to wait on.
bool SpinUntil(const std::function<bool()>& done) {
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::yield();
  }
  return true;
}

class HealthServiceTest : public ::testing::Test {
 protected:
  void SetUp() override { Start(kMaxHealthWatchStreams); }
  void TearDown() override { Stop(); }

  // (Re)starts the server with a fresh service.
  void Start(size_t max_watch_streams) {
    Stop();
    health_ = std::make_unique<HealthService>(max_watch_streams);
    grpc::EnableDefaultHealthCheckService(false);
    grpc::ServerBuilder builder;
    builder.RegisterService(health_.get());
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    channel_ = server_->InProcessChannel(grpc::ChannelArguments());
    stub_ = Health::NewStub(channel_);
  }

  void Stop() {
    if (server_ == nullptr) return;
    health_->Shutdown();
    server_->Shutdown(SafetyDeadline());
    server_->Wait();
    stub_.reset();
    channel_.reset();
    server_.reset();
    health_.reset();
  }

  grpc::Status Check(const std::string& service, HealthCheckResponse* out) {
    grpc::ClientContext ctx;
    ctx.set_deadline(SafetyDeadline());
    HealthCheckRequest req;
    req.set_service(service);
    return stub_->Check(&ctx, req, out);
  }

  // The status Check answers for `service`; UNKNOWN (and a test failure) if
  // the call fails.
  HealthCheckResponse::ServingStatus StatusOf(const std::string& service) {
    HealthCheckResponse response;
    grpc::Status s = Check(service, &response);
    EXPECT_TRUE(s.ok()) << service << ": " << s.error_message();
    return s.ok() ? response.status() : HealthCheckResponse::UNKNOWN;
  }

  struct WatchCall {
    grpc::ClientContext ctx;
    std::unique_ptr<grpc::ClientReader<HealthCheckResponse>> reader;

    // The next status; UNKNOWN if the stream ended.
    HealthCheckResponse::ServingStatus Next() {
      HealthCheckResponse response;
      return reader->Read(&response) ? response.status()
                                     : HealthCheckResponse::UNKNOWN;
    }
  };

  std::unique_ptr<WatchCall> Watch(const std::string& service) {
    auto call = std::make_unique<WatchCall>();
    call->ctx.set_deadline(SafetyDeadline());
    HealthCheckRequest req;
    req.set_service(service);
    call->reader = stub_->Watch(&call->ctx, req);
    return call;
  }

  // Reads until the stream ends; returns its status.
  static grpc::Status Drain(
      WatchCall& call,
      std::vector<HealthCheckResponse::ServingStatus>* seen = nullptr) {
    HealthCheckResponse response;
    while (call.reader->Read(&response)) {
      if (seen != nullptr) seen->push_back(response.status());
    }
    return call.reader->Finish();
  }

  static void Cancel(WatchCall& call) {
    call.ctx.TryCancel();
    Drain(call);
  }

  std::unique_ptr<HealthService> health_;
  std::unique_ptr<grpc::Server> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<Health::Stub> stub_;
};

// --- Check
// ---------------------------------------------------------------------

TEST_F(HealthServiceTest, CheckAnswersEachServiceStatusAndTheWholeServer) {
  EXPECT_EQ(StatusOf(""), kServing);  // as gRPC's default service starts

  health_->SetServingStatus("breakerd.v1.Breaker", true);
  health_->SetServingStatus("breakerd.v1.Admin", false);
  EXPECT_EQ(StatusOf("breakerd.v1.Breaker"), kServing);
  EXPECT_EQ(StatusOf("breakerd.v1.Admin"), kNotServing);

  // The draining path sets every service at once.
  health_->SetServingStatus(false);
  EXPECT_EQ(StatusOf(""), kNotServing);
  EXPECT_EQ(StatusOf("breakerd.v1.Breaker"), kNotServing);
  EXPECT_EQ(StatusOf("breakerd.v1.Admin"), kNotServing);
  health_->SetServingStatus(true);
  EXPECT_EQ(StatusOf(""), kServing);
  EXPECT_EQ(StatusOf("breakerd.v1.Admin"), kServing);
}

TEST_F(HealthServiceTest, CheckOfAnUnknownServiceIsNotFound) {
  HealthCheckResponse response;
  grpc::Status s = Check("no.such.Service", &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND) << s.error_message();

  // A name becomes known when its status is set.
  health_->SetServingStatus("no.such.Service", true);
  EXPECT_EQ(StatusOf("no.such.Service"), kServing);
}

TEST_F(HealthServiceTest, ServiceNamesLongerThanTheLimitAreInvalidArgument) {
  const std::string longest(kMaxHealthServiceNameBytes, 's');
  const std::string too_long(kMaxHealthServiceNameBytes + 1, 's');
  health_->SetServingStatus(longest, true);
  EXPECT_EQ(StatusOf(longest), kServing);

  HealthCheckResponse response;
  grpc::Status s = Check(too_long, &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("at most 200 bytes"));

  auto watch = Watch(too_long);
  s = Drain(*watch);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("at most 200 bytes"));
  EXPECT_EQ(health_->active_watches(), 0u);
}

// --- Watch
// ---------------------------------------------------------------------

TEST_F(HealthServiceTest, WatchSendsTheCurrentStatusThenOnlyChanges) {
  health_->SetServingStatus("svc", true);
  auto watch = Watch("svc");
  ASSERT_EQ(watch->Next(), kServing);

  // No change for "svc": nothing is sent.
  health_->SetServingStatus("svc", true);
  health_->SetServingStatus("svc", true);
  health_->SetServingStatus("other", false);
  health_->SetServingStatus(true);
  // A change is.
  health_->SetServingStatus("svc", false);
  EXPECT_EQ(watch->Next(), kNotServing);
  health_->SetServingStatus(true);
  EXPECT_EQ(watch->Next(), kServing);
  Cancel(*watch);
}

TEST_F(HealthServiceTest, WatchOfTheWholeServerFollowsTheDrainingPath) {
  auto watch = Watch("");
  ASSERT_EQ(watch->Next(), kServing);
  health_->SetServingStatus(false);
  EXPECT_EQ(watch->Next(), kNotServing);
  Cancel(*watch);
}

TEST_F(HealthServiceTest, WatchOfAnUnknownServiceSaysSoAndStaysOpen) {
  auto watch = Watch("later.Service");
  ASSERT_EQ(watch->Next(), kServiceUnknown);
  EXPECT_EQ(health_->active_watches(), 1u);
  // Check does not make it known.
  HealthCheckResponse response;
  EXPECT_EQ(Check("later.Service", &response).error_code(),
            grpc::StatusCode::NOT_FOUND);

  health_->SetServingStatus("later.Service", true);
  EXPECT_EQ(watch->Next(), kServing);
  Cancel(*watch);
}

// A client that stops reading holds one write in flight; the changes that
// come meanwhile collapse into the latest one. A queue would hold 98 and
// deliver them once the client reads again.
TEST_F(HealthServiceTest, ChangesWhileAWriteIsInFlightCollapseIntoTheLatest) {
  health_->SetServingStatus("svc", true);
  auto watch = Watch("svc");
  ASSERT_EQ(watch->Next(), kServing);

  // The client does not read meanwhile: the first change is the write in
  // flight, the last one (NOT_SERVING again) is the latest.
  for (int i = 0; i < 99; ++i) {
    health_->SetServingStatus("svc", i % 2 != 0);
  }
  ASSERT_EQ(StatusOf("svc"), kNotServing);
  EXPECT_LE(health_->waiting_statuses(), 1u);
  EXPECT_EQ(watch->Next(), kNotServing);

  // Nothing else is left to send: the end (whose NOT_SERVING is no change)
  // comes next.
  health_->Shutdown();
  std::vector<HealthCheckResponse::ServingStatus> seen;
  grpc::Status s = Drain(*watch, &seen);
  EXPECT_TRUE(seen.empty())
      << seen.size() << " more messages: changes were queued";
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE);
}

TEST_F(HealthServiceTest, WatchStreamLimitIsResourceExhaustedUntilOneEnds) {
  Start(/*max_watch_streams=*/2);
  auto first = Watch("");
  auto second = Watch("unknown.Service");
  ASSERT_EQ(first->Next(), kServing);
  ASSERT_EQ(second->Next(), kServiceUnknown);
  EXPECT_EQ(health_->active_watches(), 2u);

  auto third = Watch("");
  grpc::Status s = Drain(*third);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(s.error_message(), HasSubstr("at most 2 concurrent"));
  EXPECT_THAT(s.error_message(), HasSubstr("Health/Watch"));
  // Check does not count against the limit.
  EXPECT_EQ(StatusOf(""), kServing);

  // A stream that ends frees its slot.
  Cancel(*first);
  ASSERT_TRUE(SpinUntil([&] { return health_->active_watches() == 1; }));
  auto fourth = Watch("");
  EXPECT_EQ(fourth->Next(), kServing);
  EXPECT_EQ(health_->active_watches(), 2u);
  // The admitted streams still follow changes.
  health_->SetServingStatus(false);
  EXPECT_EQ(fourth->Next(), kNotServing);
  Cancel(*second);
  Cancel(*fourth);
}

TEST_F(HealthServiceTest, ShutdownEndsWatchStreamsAfterNotServing) {
  health_->SetServingStatus("svc", true);
  auto whole = Watch("");
  auto named = Watch("svc");
  auto unknown = Watch("unknown.Service");
  ASSERT_EQ(whole->Next(), kServing);
  ASSERT_EQ(named->Next(), kServing);
  ASSERT_EQ(unknown->Next(), kServiceUnknown);
  EXPECT_EQ(health_->active_watches(), 3u);

  health_->Shutdown();
  EXPECT_EQ(health_->active_watches(), 0u);
  for (WatchCall* call : {whole.get(), named.get()}) {
    std::vector<HealthCheckResponse::ServingStatus> seen;
    grpc::Status s = Drain(*call, &seen);
    EXPECT_THAT(seen, ElementsAre(kNotServing));
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE);
    EXPECT_EQ(s.error_message(), "breakerd is shutting down");
  }
  std::vector<HealthCheckResponse::ServingStatus> seen;
  EXPECT_EQ(Drain(*unknown, &seen).error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_TRUE(seen.empty());

  // New streams are refused; Check still answers, NOT_SERVING for good.
  auto late = Watch("");
  EXPECT_EQ(Drain(*late).error_code(), grpc::StatusCode::UNAVAILABLE);
  health_->SetServingStatus(true);
  health_->SetServingStatus("svc", true);
  health_->SetServingStatus("added.late", true);
  EXPECT_EQ(StatusOf(""), kNotServing);
  EXPECT_EQ(StatusOf("svc"), kNotServing);
  EXPECT_EQ(StatusOf("added.late"), kNotServing);
  health_->Shutdown();  // idempotent
}

TEST_F(HealthServiceTest, ConcurrentChangesNeverRepeatAStatusOnAStream) {
  constexpr int kStreams = 4;
  constexpr int kFlips = 200;
  health_->SetServingStatus("svc", true);
  std::vector<std::unique_ptr<WatchCall>> calls;
  for (int i = 0; i < kStreams; ++i) {
    calls.push_back(Watch("svc"));
    ASSERT_EQ(calls.back()->Next(), kServing);
  }
  std::vector<std::vector<HealthCheckResponse::ServingStatus>> seen(kStreams);
  std::vector<grpc::Status> ends(kStreams);
  std::vector<std::thread> readers;
  for (int i = 0; i < kStreams; ++i) {
    readers.emplace_back([&, i] { ends[i] = Drain(*calls[i], &seen[i]); });
  }
  std::vector<std::thread> writers;
  for (int t = 0; t < 2; ++t) {
    writers.emplace_back([&] {
      for (int i = 0; i < kFlips; ++i) {
        health_->SetServingStatus("svc", i % 2 != 0);
        HealthCheckResponse response;
        EXPECT_TRUE(Check("svc", &response).ok());
      }
    });
  }
  for (std::thread& t : writers) t.join();
  health_->Shutdown();
  for (std::thread& t : readers) t.join();
  for (int i = 0; i < kStreams; ++i) {
    EXPECT_EQ(ends[i].error_code(), grpc::StatusCode::UNAVAILABLE)
        << "stream " << i;
    ASSERT_FALSE(seen[i].empty()) << "stream " << i;
    EXPECT_EQ(seen[i].back(), kNotServing) << "stream " << i;
    HealthCheckResponse::ServingStatus previous = kServing;
    for (HealthCheckResponse::ServingStatus status : seen[i]) {
      EXPECT_NE(status, previous) << "stream " << i;
      previous = status;
    }
  }
}

}  // namespace
}  // namespace breakerd

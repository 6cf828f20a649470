// grpc.health.v1.Health and the per-connection stream limit against the
// real breakerd binary (issue 13): Health/Watch streams are bounded
// (kMaxHealthWatchStreams, 64; gRPC's default service bounded nothing) while
// Check and the Breaker service keep answering; SIGTERM turns the health
// status to NOT_SERVING before the Watch streams end; and a call beyond one
// connection's stream limit (kMaxConcurrentStreamsPerConnection, 256) waits
// for a free stream instead of failing.
//
// Every wait is bounded.
#include <signal.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "breakerd/v1/breaker.grpc.pb.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "tests/e2e/breakerd_process.h"
#include "tests/fault/fault_util.h"

namespace breakerd {
namespace fault {
namespace {

using ::grpc::health::v1::Health;
using ::grpc::health::v1::HealthCheckRequest;
using ::grpc::health::v1::HealthCheckResponse;

// kMaxHealthWatchStreams and kMaxConcurrentStreamsPerConnection.
constexpr int kHealthWatchLimit = 64;
constexpr int kStreamsPerConnection = 256;

using HealthE2eTest = FaultE2eTest;

// One Health/Watch stream. The deadline is a safety net only.
struct HealthWatch {
  grpc::ClientContext ctx;
  std::unique_ptr<grpc::ClientReader<HealthCheckResponse>> reader;
  std::unique_ptr<Health::Stub> stub;

  // The next status; nullopt if the stream ended.
  std::optional<HealthCheckResponse::ServingStatus> Next() {
    HealthCheckResponse response;
    if (!reader->Read(&response)) return std::nullopt;
    return response.status();
  }

  // Reads until the end; returns its status and the messages read.
  grpc::Status Drain(int* messages = nullptr) {
    HealthCheckResponse response;
    int read = 0;
    while (reader->Read(&response)) ++read;
    if (messages != nullptr) *messages = read;
    return reader->Finish();
  }

  void Cancel() {
    ctx.TryCancel();
    Drain();
  }
};

std::unique_ptr<HealthWatch> StartHealthWatch(
    const std::shared_ptr<grpc::Channel>& channel, const std::string& service,
    absl::Duration deadline = absl::Seconds(30)) {
  auto call = std::make_unique<HealthWatch>();
  call->ctx.set_deadline(absl::ToChronoTime(absl::Now() + deadline));
  call->stub = Health::NewStub(channel);
  HealthCheckRequest request;
  request.set_service(service);
  call->reader = call->stub->Watch(&call->ctx, request);
  return call;
}

Result<HealthCheckResponse> Check(const std::shared_ptr<grpc::Channel>& channel,
                                  const std::string& service) {
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + kRpcTimeout));
  HealthCheckRequest request;
  request.set_service(service);
  Result<HealthCheckResponse> result;
  result.status =
      Health::NewStub(channel)->Check(&ctx, request, &result.response);
  return result;
}

// 64 Health/Watch streams over four connections: the 65th is refused with a
// message naming the limit, the others keep their streams, Check and
// Acquire answer, and a stream that ends frees its slot. With gRPC's default
// service every stream was admitted (20,000 held 346 MB).
TEST_F(HealthE2eTest,
       HealthWatchStreamsStopAtTheLimitWhileCheckAndAcquireWork) {
  ASSERT_TRUE(proc_.Start());
  std::vector<std::shared_ptr<grpc::Channel>> channels;
  for (int i = 0; i < 4; ++i) channels.push_back(proc_.Channel(i));

  std::vector<std::unique_ptr<HealthWatch>> watches;
  for (int i = 0; i < kHealthWatchLimit; ++i) {
    watches.push_back(
        StartHealthWatch(channels[i % channels.size()],
                         i % 2 == 0 ? "" : "breakerd.v1.Breaker"));
    std::optional<HealthCheckResponse::ServingStatus> first =
        watches.back()->Next();
    ASSERT_TRUE(first.has_value())
        << "Health/Watch " << i
        << " ended: " << Describe(watches.back()->reader->Finish());
    EXPECT_EQ(*first, HealthCheckResponse::SERVING) << "stream " << i;
  }

  std::unique_ptr<HealthWatch> extra =
      StartHealthWatch(channels[0], "", /*deadline=*/kRpcTimeout);
  int messages = -1;
  grpc::Status refused = extra->Drain(&messages);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
      << Describe(refused);
  EXPECT_TRUE(absl::StrContains(refused.error_message(), "at most 64"))
      << refused.error_message();
  EXPECT_EQ(messages, 0);

  // Check answers on a connection carrying streams and on a fresh one.
  for (const std::shared_ptr<grpc::Channel>& channel :
       {channels[0], proc_.Channel(99)}) {
    for (const char* service :
         {"", "breakerd.v1.Breaker", "breakerd.v1.Admin"}) {
      Result<HealthCheckResponse> check = Check(channel, service);
      ASSERT_TRUE(check.status.ok())
          << "Check(\"" << service << "\"): " << Describe(check.status);
      EXPECT_EQ(check.response.status(), HealthCheckResponse::SERVING)
          << service;
    }
  }
  Result<HealthCheckResponse> unknown = Check(channels[0], "no.such.Service");
  EXPECT_EQ(unknown.status.error_code(), grpc::StatusCode::NOT_FOUND)
      << Describe(unknown.status);
  auto stub = v1::Breaker::NewStub(channels[1]);
  Result<v1::AcquireResponse> acquired = Acquire(stub.get(), "svc/health");
  ASSERT_TRUE(acquired.status.ok()) << Describe(acquired.status);
  EXPECT_TRUE(acquired.response.allowed());

  // A stream that ends frees its slot.
  watches.front()->Cancel();
  watches.erase(watches.begin());
  std::unique_ptr<HealthWatch> replacement;
  EXPECT_TRUE(WaitUntil([&] {
    replacement = StartHealthWatch(channels[0], "");
    if (replacement->Next().has_value()) return true;
    replacement->Drain();  // refused while the slot is not free yet
    return false;
  })) << "no Health/Watch admitted after one of "
      << kHealthWatchLimit << " ended";

  if (replacement != nullptr) replacement->Cancel();
  for (const auto& watch : watches) watch->Cancel();
}

// SIGTERM: every Health/Watch stream receives NOT_SERVING, then ends with
// UNAVAILABLE; Check never says SERVING again; and the streams do not hold
// the shutdown back (the grace is 20 s, the exit comes at once).
TEST_F(HealthE2eTest, SigtermSendsNotServingThenEndsHealthWatchStreams) {
  constexpr absl::Duration kPrompt = absl::Seconds(2);
  ASSERT_TRUE(proc_.Start({"--shutdown-grace=20s"}));
  std::shared_ptr<grpc::Channel> channel = proc_.Channel();
  std::unique_ptr<HealthWatch> whole = StartHealthWatch(channel, "");
  std::unique_ptr<HealthWatch> breaker =
      StartHealthWatch(channel, "breakerd.v1.Breaker");
  for (HealthWatch* watch : {whole.get(), breaker.get()}) {
    ASSERT_EQ(watch->Next(), HealthCheckResponse::SERVING);
  }
  Result<HealthCheckResponse> before = Check(channel, "");
  ASSERT_TRUE(before.status.ok()) << Describe(before.status);
  ASSERT_EQ(before.response.status(), HealthCheckResponse::SERVING);

  expect_exit_ = true;
  const absl::Time signalled = absl::Now();
  ASSERT_TRUE(proc_.Signal(SIGTERM));
  for (HealthWatch* watch : {whole.get(), breaker.get()}) {
    EXPECT_EQ(watch->Next(), HealthCheckResponse::NOT_SERVING)
        << "the status did not turn NOT_SERVING before the stream ended";
    int more = -1;
    grpc::Status end = watch->Drain(&more);
    EXPECT_EQ(more, 0);
    EXPECT_EQ(end.error_code(), grpc::StatusCode::UNAVAILABLE) << Describe(end);
  }
  // Still answering (NOT_SERVING) or already gone: never SERVING.
  Result<HealthCheckResponse> after = Check(proc_.Channel(1), "");
  if (after.status.ok()) {
    EXPECT_EQ(after.response.status(), HealthCheckResponse::NOT_SERVING);
  }

  std::optional<int> code = proc_.WaitExit(signalled + kPrompt - absl::Now());
  EXPECT_TRUE(code.has_value())
      << "still running " << absl::Now() - signalled << " after SIGTERM";
  if (!code.has_value()) code = proc_.WaitExit(absl::Seconds(30));
  ASSERT_TRUE(code.has_value()) << "did not exit at all";
  EXPECT_EQ(*code, 0);
}

// One connection carries at most 256 calls at once: with 256 Watch streams
// open on it, a further Acquire on that connection waits (it is not refused)
// and completes as soon as one stream ends; another connection is served
// meanwhile.
TEST_F(HealthE2eTest, CallBeyondAConnectionsStreamLimitWaitsForAFreeStream) {
  // Long enough that an Acquire let through would have answered (it takes
  // about a millisecond), short enough for a quick test.
  constexpr absl::Duration kHeldBack = absl::Milliseconds(300);
  ASSERT_TRUE(proc_.Start());
  std::shared_ptr<grpc::Channel> channel = proc_.Channel(7);
  auto stub = v1::Breaker::NewStub(channel);
  // The connection is up and has the server's SETTINGS (the limit).
  Result<v1::AcquireResponse> warm = Acquire(stub.get(), "svc/streams");
  ASSERT_TRUE(warm.status.ok()) << Describe(warm.status);

  std::vector<std::unique_ptr<WatchCall>> watches;
  for (int i = 0; i < kStreamsPerConnection; ++i) {
    watches.push_back(StartWatch(stub.get(), {"svc/streams"}));
    v1::StateChange initial;
    ASSERT_TRUE(watches.back()->reader->Read(&initial))
        << "Watch " << i << ": " << Describe(watches.back()->reader->Finish());
  }

  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
  v1::AcquireRequest request;
  request.set_dependency("svc/queued");
  v1::AcquireResponse response;
  grpc::Status status;
  absl::Notification done;
  stub->async()->Acquire(&ctx, &request, &response, [&](grpc::Status s) {
    status = std::move(s);
    done.Notify();
  });
  EXPECT_FALSE(done.WaitForNotificationWithTimeout(kHeldBack))
      << "call " << kStreamsPerConnection + 1
      << " on one connection was not held back: " << Describe(status);

  // Another connection is served meanwhile.
  auto other = v1::Breaker::NewStub(proc_.Channel(8));
  Result<v1::AcquireResponse> elsewhere = Acquire(other.get(), "svc/other");
  EXPECT_TRUE(elsewhere.status.ok()) << Describe(elsewhere.status);

  // One stream ends: the waiting call goes through.
  watches.front()->ctx.TryCancel();
  DrainWatch(*watches.front());
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(kRpcTimeout))
      << "the waiting call did not go through once a stream ended";
  EXPECT_TRUE(status.ok()) << Describe(status);
  EXPECT_TRUE(response.allowed());

  for (size_t i = 1; i < watches.size(); ++i) {
    watches[i]->ctx.TryCancel();
    DrainWatch(*watches[i]);
  }
}

}  // namespace
}  // namespace fault
}  // namespace breakerd

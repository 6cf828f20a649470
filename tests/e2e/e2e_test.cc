// End-to-end tests: each test starts the real breakerd binary on free ports
// (see BreakerdProcess) and drives it over gRPC, HTTP and signals, the way a
// sidecar's application and operator would.
//
// Time-based rules use short configured cooldowns with jitter 0, and the
// tests poll (bounded) until the state changes; nothing sleeps and assumes.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/blocking_counter.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "breakerd/v1/breaker.grpc.pb.h"
#include "grpcpp/client_context.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/status.h"
#include "gtest/gtest.h"
#include "tests/e2e/breakerd_process.h"

namespace breakerd {
namespace {

using ::breakerd::v1::AcquireRequest;
using ::breakerd::v1::AcquireResponse;
using ::breakerd::v1::AdminResponse;
using ::breakerd::v1::BreakerStatus;
using ::breakerd::v1::ForceCloseRequest;
using ::breakerd::v1::ForceOpenRequest;
using ::breakerd::v1::GetStateRequest;
using ::breakerd::v1::ListStatesRequest;
using ::breakerd::v1::ListStatesResponse;
using ::breakerd::v1::ReportRequest;
using ::breakerd::v1::ReportResponse;

namespace v1 = ::breakerd::v1;

constexpr auto kRpcTimeout = std::chrono::seconds(5);
constexpr absl::Duration kStateChangeTimeout = absl::Seconds(5);
constexpr absl::Duration kLogTimeout = absl::Seconds(5);
constexpr char kAdminToken[] = "e2e-admin-token-7f3a";

void SetDeadline(grpc::ClientContext* ctx) {
  ctx->set_deadline(std::chrono::system_clock::now() + kRpcTimeout);
}

template <typename Response>
struct Result {
  grpc::Status status;
  Response response;
};

Result<AcquireResponse> Acquire(v1::Breaker::Stub* stub,
                                const std::string& dependency,
                                uint32_t attempt = 0) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  AcquireRequest request;
  request.set_dependency(dependency);
  request.set_attempt(attempt);
  Result<AcquireResponse> r;
  r.status = stub->Acquire(&ctx, request, &r.response);
  return r;
}

Result<ReportResponse> Report(v1::Breaker::Stub* stub,
                              const ReportRequest& request) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  Result<ReportResponse> r;
  r.status = stub->Report(&ctx, request, &r.response);
  return r;
}

Result<ReportResponse> ReportOutcome(v1::Breaker::Stub* stub,
                                     const std::string& dependency,
                                     uint64_t permit, v1::Outcome outcome) {
  ReportRequest request;
  request.set_dependency(dependency);
  request.set_permit(permit);
  request.set_outcome(outcome);
  return Report(stub, request);
}

Result<ReportResponse> ReportHttp(v1::Breaker::Stub* stub,
                                  const std::string& dependency,
                                  uint64_t permit, uint32_t http_status) {
  ReportRequest request;
  request.set_dependency(dependency);
  request.set_permit(permit);
  request.set_http_status(http_status);
  return Report(stub, request);
}

Result<BreakerStatus> GetState(v1::Breaker::Stub* stub,
                               const std::string& dependency) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  GetStateRequest request;
  request.set_dependency(dependency);
  Result<BreakerStatus> r;
  r.status = stub->GetState(&ctx, request, &r.response);
  return r;
}

Result<ListStatesResponse> ListStates(v1::Breaker::Stub* stub) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  Result<ListStatesResponse> r;
  r.status = stub->ListStates(&ctx, ListStatesRequest(), &r.response);
  return r;
}

// An Admin call on `dependency`. `authorization`: the metadata value to
// send, or nullopt to send none.
template <typename Request>
Result<AdminResponse> AdminCall(
    v1::Admin::Stub* stub,
    grpc::Status (v1::Admin::Stub::*method)(grpc::ClientContext*,
                                            const Request&, AdminResponse*),
    const std::string& dependency, std::optional<std::string> authorization) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  if (authorization.has_value()) {
    ctx.AddMetadata("authorization", *authorization);
  }
  Request request;
  request.set_dependency(dependency);
  Result<AdminResponse> r;
  r.status = (stub->*method)(&ctx, request, &r.response);
  return r;
}

Result<AdminResponse> ForceOpen(v1::Admin::Stub* stub,
                                const std::string& dependency,
                                std::optional<std::string> authorization) {
  return AdminCall(stub, &v1::Admin::Stub::ForceOpen, dependency,
                   std::move(authorization));
}

Result<AdminResponse> ForceClose(v1::Admin::Stub* stub,
                                 const std::string& dependency,
                                 std::optional<std::string> authorization) {
  return AdminCall(stub, &v1::Admin::Stub::ForceClose, dependency,
                   std::move(authorization));
}

std::string Describe(const grpc::Status& status) {
  return absl::StrCat("code ", status.error_code(), ": ",
                      status.error_message());
}

// Acquires and reports `outcome` `n` times; every Acquire must be allowed.
// Returns the last Report's response.
ReportResponse AcquireAndReport(v1::Breaker::Stub* stub,
                                const std::string& dependency, int n,
                                v1::Outcome outcome) {
  ReportResponse last;
  for (int i = 0; i < n; ++i) {
    Result<AcquireResponse> a = Acquire(stub, dependency);
    EXPECT_TRUE(a.status.ok()) << Describe(a.status);
    EXPECT_TRUE(a.response.allowed())
        << dependency << " call " << i << ": " << a.response.DebugString();
    Result<ReportResponse> r =
        ReportOutcome(stub, dependency, a.response.permit(), outcome);
    EXPECT_TRUE(r.status.ok()) << Describe(r.status);
    last = r.response;
  }
  return last;
}

// Polls GetState until `dependency` is in `want`; returns the last status.
BreakerStatus WaitForState(v1::Breaker::Stub* stub,
                           const std::string& dependency, v1::State want) {
  const absl::Time deadline = absl::Now() + kStateChangeTimeout;
  BreakerStatus last;
  while (absl::Now() < deadline) {
    Result<BreakerStatus> r = GetState(stub, dependency);
    EXPECT_TRUE(r.status.ok()) << Describe(r.status);
    last = r.response;
    if (last.state() == want) return last;
    absl::SleepFor(absl::Milliseconds(10));
  }
  ADD_FAILURE() << dependency << " did not reach " << v1::State_Name(want)
                << " within " << kStateChangeTimeout
                << "; last: " << last.DebugString();
  return last;
}

// grpc.health.v1.Health/Check through a generic stub (no generated health
// code needed). Returns the call status; *serving_status gets the
// HealthCheckResponse.status value (1 = SERVING).
grpc::Status HealthCheck(const std::shared_ptr<grpc::Channel>& channel,
                         int* serving_status) {
  grpc::GenericStub stub(channel);
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  // An empty HealthCheckRequest (service "") encodes as zero bytes.
  grpc::Slice empty;
  grpc::ByteBuffer request(&empty, 1);
  grpc::ByteBuffer response;
  absl::Notification done;
  grpc::Status status;
  stub.UnaryCall(&ctx, "/grpc.health.v1.Health/Check", grpc::StubOptions(),
                 &request, &response, [&](grpc::Status s) {
                   status = std::move(s);
                   done.Notify();
                 });
  done.WaitForNotification();
  if (!status.ok()) return status;
  std::vector<grpc::Slice> slices;
  if (!response.Dump(&slices).ok()) {
    return grpc::Status(grpc::StatusCode::INTERNAL, "cannot read response");
  }
  std::string bytes;
  for (const grpc::Slice& s : slices) {
    bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  }
  // HealthCheckResponse { ServingStatus status = 1; }: tag 0x08, one-byte
  // varint; absent means UNKNOWN (0).
  *serving_status = 0;
  if (bytes.size() == 2 && bytes[0] == 0x08) {
    *serving_status = static_cast<unsigned char>(bytes[1]);
  } else if (!bytes.empty()) {
    return grpc::Status(grpc::StatusCode::INTERNAL,
                        "unexpected HealthCheckResponse encoding");
  }
  return status;
}

// breakerd_state's encoding of each wire state.
int MetricValueOf(v1::State state) {
  switch (state) {
    case v1::STATE_CLOSED:
      return 0;
    case v1::STATE_HALF_OPEN:
      return 1;
    case v1::STATE_OPEN:
      return 2;
    case v1::STATE_FORCED_OPEN:
      return 3;
    case v1::STATE_FORCED_CLOSED:
      return 4;
    default:
      return -1;
  }
}

// The value of `label` in `sample`, empty if it has none.
std::string LabelOf(const PromSample& sample, const std::string& label) {
  auto it = sample.labels.find(label);
  return it == sample.labels.end() ? "" : it->second;
}

std::string StateSelector(const std::string& dependency) {
  return absl::StrCat("breakerd_state{dependency=\"", dependency,
                      "\",mode=\"enforce\"}");
}

class BreakerdE2eTest : public ::testing::Test {
 protected:
  // Writes `config_yaml` (if not empty) to config.yaml and starts breakerd
  // with --config pointing at it, plus `extra_flags`.
  ::testing::AssertionResult StartWith(
      const std::string& config_yaml, std::vector<std::string> extra_flags = {},
      bool with_unix_socket = false) {
    if (!config_yaml.empty()) {
      config_path_ = proc_.WriteFile("config.yaml", config_yaml);
      extra_flags.push_back("--config=" + config_path_);
    }
    ::testing::AssertionResult started =
        proc_.Start(extra_flags, with_unix_socket);
    if (started) stub_ = proc_.BreakerStub();
    return started;
  }

  // Every test but the SIGTERM one expects breakerd to outlive it: a crash
  // (say, on bad input) shows up here even if the test's own checks missed
  // it.
  void TearDown() override {
    if (stub_ != nullptr && !expect_exit_) {
      EXPECT_FALSE(proc_.Exited())
          << "breakerd died during the test (see its log below)";
    }
  }

  std::string WriteAdminToken() {
    // With a trailing newline, as `echo token > file` or an editor leaves it.
    return proc_.WriteFile("admin-token", absl::StrCat(kAdminToken, "\n"));
  }

  BreakerdProcess proc_;
  std::string config_path_;
  std::unique_ptr<v1::Breaker::Stub> stub_;
  bool expect_exit_ = false;
};

// a. Client errors (4xx) are the caller's fault, not the upstream's.
TEST_F(BreakerdE2eTest, BadRequestsNeverOpenTheBreaker) {
  ASSERT_TRUE(StartWith(R"(
defaults:
  consecutive_failures: 5
  failure_rate: { threshold: 0.5, min_calls: 5, window: 30s }
)"));
  const std::string dep = "api/bad-requests";
  for (int i = 0; i < 50; ++i) {
    Result<AcquireResponse> a = Acquire(stub_.get(), dep);
    ASSERT_TRUE(a.status.ok()) << Describe(a.status);
    ASSERT_TRUE(a.response.allowed())
        << "call " << i << ": " << a.response.DebugString();
    EXPECT_NE(a.response.permit(), 0u);
    Result<ReportResponse> r =
        ReportHttp(stub_.get(), dep, a.response.permit(), 400);
    ASSERT_TRUE(r.status.ok()) << Describe(r.status);
    EXPECT_EQ(r.response.effect(), v1::EFFECT_NEUTRAL) << "call " << i;
    EXPECT_EQ(r.response.state(), v1::STATE_CLOSED) << "call " << i;
  }
  Result<BreakerStatus> s = GetState(stub_.get(), dep);
  ASSERT_TRUE(s.status.ok()) << Describe(s.status);
  EXPECT_EQ(s.response.state(), v1::STATE_CLOSED);
  EXPECT_EQ(s.response.consecutive_failures(), 0u);
  EXPECT_EQ(s.response.window_failures(), 0u);
  EXPECT_EQ(s.response.generation(), 0u) << "no transition happened";

  const std::string metrics = proc_.Metrics();
  EXPECT_EQ(Sample(metrics, StateSelector(dep)), 0);
  EXPECT_EQ(Sample(metrics, absl::StrCat("breakerd_acquire_total{dependency=\"",
                                         dep, "\",decision=\"allowed\"}")),
            50);
  EXPECT_EQ(
      Sample(metrics, absl::StrCat("breakerd_reports_total{dependency=\"", dep,
                                   "\",class=\"bad_request\",effect="
                                   "\"neutral\"}")),
      50)
      << metrics;
}

// b. The consecutive-failures rule opens, and an open breaker refuses at once
// with the time left.
TEST_F(BreakerdE2eTest, FiveTimeoutsOpenAndTheNextAcquireIsRefused) {
  ASSERT_TRUE(StartWith(R"(
defaults:
  consecutive_failures: 5
  cooldown: { base: 20s, jitter: 0 }
)"));
  const std::string dep = "llm/timeouts";
  for (int i = 0; i < 5; ++i) {
    Result<AcquireResponse> a = Acquire(stub_.get(), dep);
    ASSERT_TRUE(a.status.ok()) << Describe(a.status);
    ASSERT_TRUE(a.response.allowed()) << "call " << i;
    Result<ReportResponse> r = ReportOutcome(
        stub_.get(), dep, a.response.permit(), v1::OUTCOME_TIMEOUT);
    ASSERT_TRUE(r.status.ok()) << Describe(r.status);
    EXPECT_EQ(r.response.effect(), v1::EFFECT_COUNTED_FAILURE) << "call " << i;
    EXPECT_EQ(r.response.state(), i < 4 ? v1::STATE_CLOSED : v1::STATE_OPEN)
        << "after timeout " << i + 1;
  }
  Result<AcquireResponse> a = Acquire(stub_.get(), dep);
  ASSERT_TRUE(a.status.ok()) << Describe(a.status);
  EXPECT_FALSE(a.response.allowed());
  EXPECT_EQ(a.response.permit(), 0u);
  EXPECT_EQ(a.response.reason(), v1::REJECT_REASON_OPEN);
  EXPECT_EQ(a.response.state(), v1::STATE_OPEN);
  const absl::Duration retry_after =
      absl::Seconds(a.response.retry_after().seconds()) +
      absl::Nanoseconds(a.response.retry_after().nanos());
  EXPECT_GT(retry_after, absl::ZeroDuration());
  EXPECT_LE(retry_after, absl::Seconds(20));

  Result<BreakerStatus> s = GetState(stub_.get(), dep);
  ASSERT_TRUE(s.status.ok()) << Describe(s.status);
  EXPECT_EQ(s.response.state(), v1::STATE_OPEN);
  EXPECT_TRUE(proc_.WaitForLog("\"event\":\"transition\"", kLogTimeout))
      << "the transition to open is not logged";
}

// c. After the cooldown exactly one caller gets the probe, however many ask
// at the same instant. Every caller has its own channel (a distinct channel
// argument, hence its own connection), connected before the start signal, so
// the 50 Acquires really race on the server.
TEST_F(BreakerdE2eTest, AfterCooldownExactlyOneConcurrentCallerProbes) {
  ASSERT_TRUE(StartWith(R"(
defaults:
  consecutive_failures: 5
  failure_rate: { threshold: 0 }
  cooldown: { base: 500ms, jitter: 0 }
  probe: { lease: 10s, required_successes: 1 }
)"));
  const std::string dep = "pay/probe";
  ReportResponse last =
      AcquireAndReport(stub_.get(), dep, 5, v1::OUTCOME_TIMEOUT);
  ASSERT_EQ(last.state(), v1::STATE_OPEN);

  constexpr int kCallers = 50;
  std::vector<std::unique_ptr<v1::Breaker::Stub>> stubs;
  for (int i = 0; i < kCallers; ++i) {
    std::shared_ptr<grpc::Channel> channel = proc_.Channel(i);
    ASSERT_TRUE(channel->WaitForConnected(std::chrono::system_clock::now() +
                                          kRpcTimeout))
        << "channel " << i;
    stubs.push_back(v1::Breaker::NewStub(channel));
  }

  WaitForState(stub_.get(), dep, v1::STATE_HALF_OPEN);
  ASSERT_FALSE(HasFailure());

  std::vector<Result<AcquireResponse>> results(kCallers);
  absl::BlockingCounter ready(kCallers);
  absl::Notification go;
  std::vector<std::thread> threads;
  for (int i = 0; i < kCallers; ++i) {
    threads.emplace_back([&, i] {
      ready.DecrementCount();
      go.WaitForNotification();
      results[i] = Acquire(stubs[i].get(), dep);
    });
  }
  ready.Wait();
  go.Notify();
  for (std::thread& t : threads) t.join();

  int probes = 0;
  int in_flight = 0;
  uint64_t probe_permit = 0;
  for (int i = 0; i < kCallers; ++i) {
    const Result<AcquireResponse>& r = results[i];
    ASSERT_TRUE(r.status.ok()) << "caller " << i << ": " << Describe(r.status);
    if (r.response.allowed()) {
      EXPECT_TRUE(r.response.probe()) << r.response.DebugString();
      ++probes;
      probe_permit = r.response.permit();
    } else {
      EXPECT_EQ(r.response.reason(), v1::REJECT_REASON_PROBE_IN_FLIGHT)
          << "caller " << i << ": " << r.response.DebugString();
      if (r.response.reason() == v1::REJECT_REASON_PROBE_IN_FLIGHT) {
        ++in_flight;
      }
    }
  }
  EXPECT_EQ(probes, 1);
  EXPECT_EQ(in_flight, kCallers - 1);
  ASSERT_NE(probe_permit, 0u);

  Result<ReportResponse> r =
      ReportOutcome(stub_.get(), dep, probe_permit, v1::OUTCOME_SUCCESS);
  ASSERT_TRUE(r.status.ok()) << Describe(r.status);
  EXPECT_EQ(r.response.state(), v1::STATE_CLOSED);
  Result<BreakerStatus> s = GetState(stub_.get(), dep);
  ASSERT_TRUE(s.status.ok()) << Describe(s.status);
  EXPECT_EQ(s.response.state(), v1::STATE_CLOSED);
  EXPECT_EQ(s.response.consecutive_failures(), 0u);
  EXPECT_FALSE(s.response.probe_in_flight());

  Result<AcquireResponse> after = Acquire(stub_.get(), dep);
  ASSERT_TRUE(after.status.ok()) << Describe(after.status);
  EXPECT_TRUE(after.response.allowed());
  EXPECT_FALSE(after.response.probe());
}

// d. /metrics and ListStates read the same registry: with no traffic between
// the two reads they agree for every dependency, in every state.
TEST_F(BreakerdE2eTest, MetricsAgreeWithListStatesInEveryState) {
  const std::string token_file = WriteAdminToken();
  ASSERT_TRUE(StartWith(R"(
defaults:
  consecutive_failures: 3
  failure_rate: { threshold: 0 }
  cooldown: { base: 60s, jitter: 0 }
policies:
  - match: "fast/*"
    cooldown: { base: 300ms, jitter: 0 }
)",
                        {"--admin-token-file=" + token_file}));
  auto admin = proc_.AdminStub();
  const std::string auth = BearerToken(kAdminToken);

  AcquireAndReport(stub_.get(), "svc/closed", 2, v1::OUTCOME_SUCCESS);
  AcquireAndReport(stub_.get(), "svc/open", 3, v1::OUTCOME_SERVER_ERROR);
  Result<AdminResponse> fo = ForceOpen(admin.get(), "svc/forced-open", auth);
  ASSERT_TRUE(fo.status.ok()) << Describe(fo.status);
  Result<AdminResponse> fc = ForceClose(admin.get(), "svc/forced-closed", auth);
  ASSERT_TRUE(fc.status.ok()) << Describe(fc.status);
  AcquireAndReport(stub_.get(), "fast/half-open", 3, v1::OUTCOME_TIMEOUT);
  WaitForState(stub_.get(), "fast/half-open", v1::STATE_HALF_OPEN);
  ASSERT_FALSE(HasFailure());

  // The two reads, with nothing in between.
  Result<ListStatesResponse> list = ListStates(stub_.get());
  const std::string metrics = proc_.Metrics();
  ASSERT_TRUE(list.status.ok()) << Describe(list.status);

  std::map<std::string, v1::State> states;
  for (const BreakerStatus& b : list.response.breakers()) {
    states[b.dependency()] = b.state();
  }
  const std::map<std::string, v1::State> expected = {
      {"svc/closed", v1::STATE_CLOSED},
      {"svc/open", v1::STATE_OPEN},
      {"svc/forced-open", v1::STATE_FORCED_OPEN},
      {"svc/forced-closed", v1::STATE_FORCED_CLOSED},
      {"fast/half-open", v1::STATE_HALF_OPEN},
  };
  EXPECT_EQ(states, expected) << list.response.DebugString();

  for (const auto& [dependency, state] : states) {
    EXPECT_EQ(Sample(metrics, StateSelector(dependency)), MetricValueOf(state))
        << dependency << " is " << v1::State_Name(state) << " in ListStates";
  }
  int state_series = 0;
  for (const PromSample& s : ParsePrometheus(metrics)) {
    if (s.name != "breakerd_state") continue;
    ++state_series;
    EXPECT_EQ(states.count(LabelOf(s, "dependency")), 1u)
        << "breakerd_state for an unknown dependency: "
        << LabelOf(s, "dependency");
  }
  EXPECT_EQ(state_series, static_cast<int>(states.size())) << metrics;
}

// e. A reload re-applies policies in place: an open breaker stays open with
// its generation; new breakers get the new threshold; a bad file is refused
// whole.
TEST_F(BreakerdE2eTest, SighupReloadKeepsOpenBreakerAndRefusesBadFile) {
  ASSERT_TRUE(StartWith(R"(
defaults:
  consecutive_failures: 3
  failure_rate: { threshold: 0 }
  cooldown: { base: 60s, jitter: 0 }
)",
                        {"--config-poll-interval=0"}));
  ReportResponse last =
      AcquireAndReport(stub_.get(), "svc/a", 3, v1::OUTCOME_TIMEOUT);
  ASSERT_EQ(last.state(), v1::STATE_OPEN);
  Result<BreakerStatus> before = GetState(stub_.get(), "svc/a");
  ASSERT_TRUE(before.status.ok()) << Describe(before.status);
  ASSERT_EQ(before.response.state(), v1::STATE_OPEN);

  const int reloaded = proc_.CountInLog("\"event\":\"config_reloaded\"");
  proc_.WriteFile("config.yaml", R"(
defaults:
  consecutive_failures: 10
  failure_rate: { threshold: 0 }
  cooldown: { base: 60s, jitter: 0 }
)");
  ASSERT_TRUE(proc_.Signal(SIGHUP));
  ASSERT_TRUE(proc_.WaitForLog("\"event\":\"config_reloaded\"", kLogTimeout,
                               reloaded + 1));
  EXPECT_EQ(Sample(proc_.Metrics(),
                   "breakerd_config_reloads_total{result=\"success\"}"),
            1);

  Result<BreakerStatus> after = GetState(stub_.get(), "svc/a");
  ASSERT_TRUE(after.status.ok()) << Describe(after.status);
  EXPECT_EQ(after.response.state(), v1::STATE_OPEN);
  EXPECT_EQ(after.response.generation(), before.response.generation());

  last = AcquireAndReport(stub_.get(), "svc/b", 9, v1::OUTCOME_TIMEOUT);
  EXPECT_EQ(last.state(), v1::STATE_CLOSED) << "9 of 10 must not open";
  last = AcquireAndReport(stub_.get(), "svc/b", 1, v1::OUTCOME_TIMEOUT);
  EXPECT_EQ(last.state(), v1::STATE_OPEN) << "the 10th opens";

  // A bad file (unknown key) with a different threshold: refused whole.
  const int rejected = proc_.CountInLog("\"event\":\"config_rejected\"");
  proc_.WriteFile("config.yaml", R"(
defaults:
  consecutive_failures: 2
  no_such_key: 1
)");
  ASSERT_TRUE(proc_.Signal(SIGHUP));
  ASSERT_TRUE(proc_.WaitForLog("\"event\":\"config_rejected\"", kLogTimeout,
                               rejected + 1));
  for (absl::string_view line : absl::StrSplit(proc_.Log(), '\n')) {
    if (absl::StrContains(line, "\"event\":\"config_rejected\"")) {
      EXPECT_TRUE(absl::StrContains(line, "no_such_key"))
          << "the refusal should name the bad key: " << line;
    }
  }
  const std::string metrics = proc_.Metrics();
  EXPECT_EQ(
      Sample(metrics, "breakerd_config_reloads_total{result=\"success\"}"), 1);
  double refused = 0;
  for (const PromSample& s : ParsePrometheus(metrics)) {
    if (s.name == "breakerd_config_reloads_total" &&
        LabelOf(s, "result") != "success") {
      refused += s.value;
    }
  }
  EXPECT_EQ(refused, 1) << metrics;

  last = AcquireAndReport(stub_.get(), "svc/c", 9, v1::OUTCOME_TIMEOUT);
  EXPECT_EQ(last.state(), v1::STATE_CLOSED) << "threshold 10 still in force";
  last = AcquireAndReport(stub_.get(), "svc/c", 1, v1::OUTCOME_TIMEOUT);
  EXPECT_EQ(last.state(), v1::STATE_OPEN);
  after = GetState(stub_.get(), "svc/a");
  ASSERT_TRUE(after.status.ok()) << Describe(after.status);
  EXPECT_EQ(after.response.state(), v1::STATE_OPEN);
  EXPECT_EQ(after.response.generation(), before.response.generation());
}

// f. Bad input: INVALID_ARGUMENT naming the field, and nothing changes.
TEST_F(BreakerdE2eTest, BadInputIsInvalidArgumentAndChangesNothing) {
  ASSERT_TRUE(StartWith(""));  // embedded defaults
  const std::string dep = "svc/existing";
  AcquireAndReport(stub_.get(), dep, 2, v1::OUTCOME_TIMEOUT);
  // A permit that is valid, kept unreported for later.
  Result<AcquireResponse> held = Acquire(stub_.get(), dep);
  ASSERT_TRUE(held.status.ok()) << Describe(held.status);
  ASSERT_TRUE(held.response.allowed());

  Result<BreakerStatus> before = GetState(stub_.get(), dep);
  ASSERT_TRUE(before.status.ok()) << Describe(before.status);
  ASSERT_EQ(before.response.consecutive_failures(), 2u);
  Result<ListStatesResponse> list_before = ListStates(stub_.get());
  ASSERT_TRUE(list_before.status.ok());
  ASSERT_EQ(list_before.response.breakers_size(), 1);

  auto expect_invalid = [](const grpc::Status& status, absl::string_view field,
                           absl::string_view what) {
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
        << what << ": " << status.error_message();
    EXPECT_TRUE(absl::StrContains(status.error_message(), field))
        << what << ": the message should name `" << field
        << "`: " << status.error_message();
  };

  const std::vector<std::string> bad_names = {"", "a b", "x\n",
                                              std::string(201, 'a')};
  for (const std::string& name : bad_names) {
    const std::string what = absl::StrCat("name of ", name.size(), " bytes");
    expect_invalid(Acquire(stub_.get(), name).status, "dependency",
                   "Acquire " + what);
    expect_invalid(ReportOutcome(stub_.get(), name, held.response.permit(),
                                 v1::OUTCOME_TIMEOUT)
                       .status,
                   "dependency", "Report " + what);
    expect_invalid(GetState(stub_.get(), name).status, "dependency",
                   "GetState " + what);
  }
  expect_invalid(
      ReportOutcome(stub_.get(), dep, 12345, v1::OUTCOME_TIMEOUT).status,
      "permit", "unknown permit 12345");
  expect_invalid(ReportOutcome(stub_.get(), dep, 0, v1::OUTCOME_TIMEOUT).status,
                 "permit", "permit 0");
  expect_invalid(ReportOutcome(stub_.get(), "svc/never-acquired",
                               held.response.permit(), v1::OUTCOME_TIMEOUT)
                     .status,
                 "permit", "permit for a dependency never acquired");
  expect_invalid(
      ReportHttp(stub_.get(), dep, held.response.permit(), 600).status,
      "http_status", "http_status 600");
  ReportRequest no_outcome;
  no_outcome.set_dependency(dep);
  no_outcome.set_permit(held.response.permit());
  expect_invalid(Report(stub_.get(), no_outcome).status, "outcome",
                 "no outcome at all");

  Result<BreakerStatus> missing = GetState(stub_.get(), "svc/never-acquired");
  EXPECT_EQ(missing.status.error_code(), grpc::StatusCode::NOT_FOUND)
      << missing.status.error_message();

  Result<ListStatesResponse> list_after = ListStates(stub_.get());
  ASSERT_TRUE(list_after.status.ok());
  EXPECT_EQ(list_after.response.breakers_size(), 1)
      << list_after.response.DebugString();
  Result<BreakerStatus> after = GetState(stub_.get(), dep);
  ASSERT_TRUE(after.status.ok()) << Describe(after.status);
  EXPECT_EQ(after.response.state(), before.response.state());
  EXPECT_EQ(after.response.generation(), before.response.generation());
  EXPECT_EQ(after.response.window_calls(), before.response.window_calls());
  EXPECT_EQ(after.response.window_failures(),
            before.response.window_failures());
  EXPECT_EQ(after.response.consecutive_failures(),
            before.response.consecutive_failures());

  // The held permit still works after all that, and 200 bytes is a legal
  // name.
  Result<ReportResponse> ok = ReportOutcome(
      stub_.get(), dep, held.response.permit(), v1::OUTCOME_SUCCESS);
  ASSERT_TRUE(ok.status.ok()) << Describe(ok.status);
  EXPECT_EQ(ok.response.effect(), v1::EFFECT_COUNTED_SUCCESS);
  Result<AcquireResponse> longest = Acquire(stub_.get(), std::string(200, 'a'));
  EXPECT_TRUE(longest.status.ok()) << Describe(longest.status);
}

// g. Admin needs the configured bearer token; without a token file it is off.
TEST_F(BreakerdE2eTest, AdminRequiresTheConfiguredToken) {
  const std::string token_file = WriteAdminToken();
  ASSERT_TRUE(StartWith("", {"--admin-token-file=" + token_file}));
  auto admin = proc_.AdminStub();
  const std::string dep = "svc/admin";

  const std::vector<std::optional<std::string>> refused = {
      std::nullopt,
      BearerToken("wrong-token"),
      std::string(kAdminToken),  // no "Bearer " scheme
      BearerToken(""),
  };
  for (const std::optional<std::string>& auth : refused) {
    Result<AdminResponse> r = ForceOpen(admin.get(), dep, auth);
    EXPECT_EQ(r.status.error_code(), grpc::StatusCode::UNAUTHENTICATED)
        << "authorization " << auth.value_or("<none>") << ": "
        << Describe(r.status);
  }
  Result<BreakerStatus> untouched = GetState(stub_.get(), dep);
  EXPECT_EQ(untouched.status.error_code(), grpc::StatusCode::NOT_FOUND)
      << "a refused ForceOpen must not create the breaker";

  Result<AdminResponse> ok =
      ForceOpen(admin.get(), dep, BearerToken(kAdminToken));
  ASSERT_TRUE(ok.status.ok()) << Describe(ok.status);
  EXPECT_EQ(ok.response.status().state(), v1::STATE_FORCED_OPEN);
  Result<AcquireResponse> a = Acquire(stub_.get(), dep);
  ASSERT_TRUE(a.status.ok()) << Describe(a.status);
  EXPECT_FALSE(a.response.allowed());
  EXPECT_EQ(a.response.reason(), v1::REJECT_REASON_FORCED_OPEN);
  EXPECT_EQ(a.response.state(), v1::STATE_FORCED_OPEN);

  // A second sidecar without --admin-token-file: Admin is off.
  BreakerdProcess no_admin;
  ASSERT_TRUE(no_admin.Start());
  auto admin2 = no_admin.AdminStub();
  for (const std::optional<std::string>& auth :
       {std::optional<std::string>(),
        std::optional<std::string>(BearerToken(kAdminToken))}) {
    Result<AdminResponse> r = ForceOpen(admin2.get(), dep, auth);
    EXPECT_EQ(r.status.error_code(), grpc::StatusCode::UNAUTHENTICATED)
        << "admin disabled, authorization " << auth.value_or("<none>") << ": "
        << Describe(r.status);
  }
}

// h. The same API over a unix socket, and the standard health service on
// both listeners.
TEST_F(BreakerdE2eTest, UnixSocketServesTheSameRegistryAndHealth) {
  ASSERT_TRUE(StartWith("", {}, /*with_unix_socket=*/true));
  EXPECT_EQ(proc_.unix_address(), "unix:" + proc_.unix_socket_path());
  auto unix_stub = v1::Breaker::NewStub(proc_.ChannelTo(proc_.unix_address()));
  const std::string dep = "svc/over-unix";

  Result<AcquireResponse> a = Acquire(unix_stub.get(), dep);
  ASSERT_TRUE(a.status.ok()) << Describe(a.status);
  EXPECT_TRUE(a.response.allowed());
  Result<ReportResponse> r = ReportOutcome(
      unix_stub.get(), dep, a.response.permit(), v1::OUTCOME_SUCCESS);
  ASSERT_TRUE(r.status.ok()) << Describe(r.status);
  EXPECT_EQ(r.response.effect(), v1::EFFECT_COUNTED_SUCCESS);

  // The TCP listener sees the same breaker.
  Result<BreakerStatus> s = GetState(stub_.get(), dep);
  ASSERT_TRUE(s.status.ok()) << Describe(s.status);
  EXPECT_EQ(s.response.state(), v1::STATE_CLOSED);
  EXPECT_EQ(s.response.window_calls(), 1u);

  for (const std::string& address :
       {proc_.unix_address(), proc_.tcp_address()}) {
    int serving = -1;
    grpc::Status hs = HealthCheck(proc_.ChannelTo(address), &serving);
    ASSERT_TRUE(hs.ok()) << address << ": " << Describe(hs);
    EXPECT_EQ(serving, 1) << address << ": expected SERVING";
  }
}

// i. SIGTERM: ready while serving, not ready once stopping, and a clean exit
// within the grace period. The test's channel stays connected (idle) as an
// application's would.
TEST_F(BreakerdE2eTest, SigtermExitsZeroWithinGrace) {
  // A long grace: with nothing in flight breakerd must not wait it out, even
  // though this test's client stays connected (idle) throughout.
  constexpr absl::Duration kGrace = absl::Seconds(20);
  constexpr absl::Duration kPrompt = absl::Seconds(2);
  ASSERT_TRUE(StartWith("", {"--shutdown-grace=20s"}));
  HttpResponse ready = proc_.Get("/readyz");
  EXPECT_EQ(ready.status, 200) << ready.body;
  Result<AcquireResponse> a = Acquire(stub_.get(), "svc/term");
  ASSERT_TRUE(a.status.ok()) << Describe(a.status);

  expect_exit_ = true;
  const absl::Time signalled = absl::Now();
  ASSERT_TRUE(proc_.Signal(SIGTERM));
  // Readiness drops at once (503, or the endpoint is already gone).
  int readyz = 200;
  while (readyz == 200 && absl::Now() < signalled + kGrace) {
    readyz = proc_.Get("/readyz").status;
    if (readyz == 200) absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_NE(readyz, 200) << "/readyz still 200 " << absl::Now() - signalled
                         << " after SIGTERM";
  std::optional<int> code = proc_.WaitExit(signalled + kPrompt - absl::Now());
  const absl::Duration took = absl::Now() - signalled;
  EXPECT_TRUE(code.has_value())
      << "still running " << took << " after SIGTERM with nothing in flight";
  if (!code.has_value()) code = proc_.WaitExit(absl::Seconds(10));
  ASSERT_TRUE(code.has_value()) << "did not exit at all";
  EXPECT_EQ(*code, 0);
}

// j. Liveness for Kubernetes probes.
TEST_F(BreakerdE2eTest, HealthzIsOk) {
  ASSERT_TRUE(StartWith(""));
  HttpResponse health = proc_.Get("/healthz");
  EXPECT_EQ(health.status, 200) << health.body;
}

// k. The real /metrics passes `promtool check metrics` (names, units, HELP,
// histogram shape) after calls of every kind, and carries breakerd's own
// gRPC handling families.
TEST_F(BreakerdE2eTest, MetricsPassPromtoolCheck) {
  constexpr char kPromtool[] = "/usr/bin/promtool";
  if (access(kPromtool, X_OK) != 0) {
    GTEST_SKIP() << kPromtool << " not installed (Debian: prometheus)";
  }
  const std::string token_file = WriteAdminToken();
  ASSERT_TRUE(StartWith(R"(
defaults:
  consecutive_failures: 2
policies:
  - match: "quick/*"
    cooldown: { base: 50ms, max: 1s, jitter: 0 }
)",
                        {"--admin-token-file=" + token_file}));
  auto admin = proc_.AdminStub();
  const std::string dep = "svc/promtool";

  // The seeds' monitoring families with samples: a named chain's decision
  // and outcome, an open episode whose first probe succeeded (its duration
  // observed), and a batch's outcomes and client decisions.
  {
    grpc::ClientContext ctx;
    v1::AcquireFirstRequest req;
    req.add_dependencies("quick/a");
    req.set_chain("promtool-chain");
    v1::AcquireFirstResponse resp;
    ASSERT_TRUE(stub_->AcquireFirst(&ctx, req, &resp).ok());
    ASSERT_TRUE(resp.allowed());
    ReportRequest report;
    report.set_dependency("quick/a");
    report.set_permit(resp.permit());
    report.set_outcome(v1::OUTCOME_TIMEOUT);
    report.set_chain("promtool-chain");
    ASSERT_TRUE(Report(stub_.get(), report).status.ok());
    Result<AcquireResponse> a = Acquire(stub_.get(), "quick/a");
    report.set_permit(a.response.permit());
    report.clear_chain();
    ASSERT_TRUE(Report(stub_.get(), report).status.ok());  // opens: 50 ms
    Result<AcquireResponse> probe;
    ASSERT_TRUE(WaitUntil(
        [&] {
          probe = Acquire(stub_.get(), "quick/a");
          return probe.response.probe();
        },
        absl::Seconds(5)));
    report.set_permit(probe.response.permit());
    report.set_outcome(v1::OUTCOME_SUCCESS);
    ASSERT_TRUE(Report(stub_.get(), report).status.ok());  // closes
    grpc::ClientContext batch_ctx;
    v1::ReportBatchRequest batch;
    batch.set_client_id("promtool");
    batch.set_sequence(1);
    v1::DependencyBatch* d = batch.add_dependencies();
    d->set_dependency("quick/a");
    d->set_generation(GetState(stub_.get(), "quick/a").response.generation());
    d->set_grants(1);
    d->add_outcomes()->set_outcome(v1::OUTCOME_SUCCESS);
    batch.add_decisions()->set_dependency("quick/a");
    batch.mutable_decisions(0)->set_refused_local(1);
    v1::ReportBatchResponse batch_resp;
    ASSERT_TRUE(stub_->ReportBatch(&batch_ctx, batch, &batch_resp).ok());
    EXPECT_EQ(batch_resp.counted(), 1u);
  }

  for (int i = 0; i < 3; ++i) {
    Result<AcquireResponse> a = Acquire(stub_.get(), dep);
    ASSERT_TRUE(a.status.ok()) << Describe(a.status);
    if (!a.response.allowed()) continue;
    ReportRequest report;
    report.set_dependency(dep);
    report.set_permit(a.response.permit());
    report.set_outcome(v1::OUTCOME_TIMEOUT);
    report.mutable_latency()->set_nanos(30'000'000);
    Result<ReportResponse> r = Report(stub_.get(), report);
    ASSERT_TRUE(r.status.ok()) << Describe(r.status);
  }
  EXPECT_EQ(Acquire(stub_.get(), "").status.error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_TRUE(GetState(stub_.get(), dep).status.ok());
  EXPECT_EQ(GetState(stub_.get(), "svc/none").status.error_code(),
            grpc::StatusCode::NOT_FOUND);
  EXPECT_TRUE(ListStates(stub_.get()).status.ok());
  EXPECT_TRUE(ForceOpen(admin.get(), "svc/forced", BearerToken(kAdminToken))
                  .status.ok());
  EXPECT_EQ(
      ForceClose(admin.get(), "svc/forced", std::nullopt).status.error_code(),
      grpc::StatusCode::UNAUTHENTICATED);

  const std::string metrics = proc_.Metrics();
  ASSERT_FALSE(metrics.empty());
  EXPECT_EQ(Sample(metrics,
                   "breakerd_grpc_server_handled_total{method=\"Acquire\","
                   "code=\"INVALID_ARGUMENT\"}"),
            1)
      << metrics;
  EXPECT_GE(Sample(metrics,
                   "breakerd_grpc_server_handled_total{method=\"Acquire\","
                   "code=\"OK\"}")
                .value_or(0),
            3);
  EXPECT_EQ(Sample(metrics,
                   "breakerd_grpc_server_handled_total{method=\"GetState\","
                   "code=\"NOT_FOUND\"}"),
            1);
  EXPECT_EQ(Sample(metrics,
                   "breakerd_grpc_server_handled_total{method=\"ForceClose\","
                   "code=\"UNAUTHENTICATED\"}"),
            1);
  EXPECT_EQ(Sample(metrics,
                   "breakerd_grpc_server_handled_total{method=\"ForceOpen\","
                   "code=\"OK\"}"),
            1);
  EXPECT_GE(Sample(metrics,
                   "breakerd_grpc_server_handling_seconds_count{method="
                   "\"Acquire\"}")
                .value_or(0),
            4);
  EXPECT_TRUE(absl::StrContains(
      metrics, "# TYPE breakerd_grpc_server_handling_seconds histogram\n"));
  EXPECT_EQ(Sample(metrics,
                   "breakerd_chain_decisions_total{chain=\"promtool-chain\","
                   "tier=\"0\"}"),
            1);
  EXPECT_EQ(Sample(metrics,
                   "breakerd_open_episodes_total{dependency=\"quick/a\","
                   "first_probe=\"succeeded\"}"),
            1);
  EXPECT_EQ(Sample(metrics,
                   "breakerd_open_duration_seconds_count{dependency=\"quick/"
                   "a\"}"),
            1);
  EXPECT_EQ(
      Sample(metrics, "breakerd_batch_outcomes_total{result=\"counted\"}"), 1);

  const std::string path = proc_.WriteFile("metrics.txt", metrics);
  const std::string command =
      absl::StrCat(kPromtool, " check metrics < '", path, "' 2>&1");
  FILE* pipe = popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr) << command;
  std::string output;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), pipe)) > 0) output.append(buf, n);
  const int status = pclose(pipe);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << "promtool exit status " << status << ":\n"
      << output;
  EXPECT_EQ(output, "") << "promtool complained about /metrics";
}

}  // namespace
}  // namespace breakerd

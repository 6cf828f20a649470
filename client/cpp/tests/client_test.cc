// The C++ client against the real breakerd binary over real sockets.
#include "breakerd/client.h"

#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <functional>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "breakerd/internal/watch_cache.h"
#include "gmock/gmock.h"
#include "grpcpp/client_context.h"
#include "gtest/gtest.h"
#include "tests/e2e/breakerd_process.h"

namespace breakerd::client {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr char kToken[] = "client-test-token";
constexpr absl::Duration kWait = absl::Seconds(5);

// Three failures in a row open a breaker for 30 s (long enough that no test
// sees the cooldown end); "short/*" cools down in 1 s; "payments/*" opens
// the same way but in shadow mode (breakerd allows every call).
constexpr char kConfig[] = R"(
defaults:
  consecutive_failures: 3
  failure_rate: { threshold: 0 }
  cooldown: { base: 30s, max: 60s, jitter: 0 }
policies:
  - match: "short/*"
    cooldown: { base: 1s, max: 2s, jitter: 0 }
  - match: "payments/*"
    mode: shadow
    consecutive_failures: 3
)";

// True once `pid` is stopped (SIGSTOP delivered: state T in /proc).
bool IsStopped(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/stat"));
  std::string stat((std::istreambuf_iterator<char>(in)),
                   std::istreambuf_iterator<char>());
  // "pid (comm) S ...": the state follows the last ')'.
  const size_t paren = stat.rfind(')');
  return paren != std::string::npos && paren + 2 < stat.size() &&
         stat[paren + 2] == 'T';
}

// Holds a crashed breakerd's port until destroyed, so nothing else takes it
// before the restart, and stands in for the dead sidecar: accepts each
// connection and closes it at once (to a gRPC client, a failed connection
// attempt), noting when, so a test can restart breakerd right after one of
// the client's attempts.
class PortHolder {
 public:
  // Listens on 127.0.0.1:`port`; listening() says whether it could.
  explicit PortHolder(int port)
      : fd_(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)),
        listening_(Listen(fd_, port)) {
    if (listening_) accept_thread_ = std::thread([this] { AcceptLoop(); });
  }
  ~PortHolder() {
    stopping_.store(true);
    if (accept_thread_.joinable()) accept_thread_.join();
    if (fd_ >= 0) close(fd_);
  }

  PortHolder(const PortHolder&) = delete;
  PortHolder& operator=(const PortHolder&) = delete;

  bool listening() const { return listening_; }

  // When the latest connection came (InfinitePast: none yet).
  absl::Time last_attempt() const {
    absl::MutexLock lock(&mu_);
    return last_attempt_;
  }

 private:
  static bool Listen(int fd, int port) {
    const int one = 1;
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<uint16_t>(port));
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return fd >= 0 &&
           setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) == 0 &&
           bind(fd, reinterpret_cast<const sockaddr*>(&address),
                sizeof(address)) == 0 &&
           listen(fd, 64) == 0;
  }

  void AcceptLoop() {
    pollfd ready{fd_, POLLIN, 0};
    while (!stopping_.load()) {
      if (poll(&ready, 1, /*timeout_ms=*/5) <= 0) continue;
      const int connection = accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (connection < 0) continue;
      close(connection);
      absl::MutexLock lock(&mu_);
      last_attempt_ = absl::Now();
    }
  }

  // Constant after construction.
  const int fd_;
  const bool listening_;

  std::atomic<bool> stopping_{false};
  mutable absl::Mutex mu_;
  absl::Time last_attempt_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  std::thread accept_thread_;
};

class ClientTest : public ::testing::Test {
 protected:
  void SetUp() override { StartBreakerd(&proc_); }
  // A test that stopped breakerd may have failed before continuing it.
  void TearDown() override {
    if (proc_.running()) proc_.Signal(SIGCONT);
  }

  void StartBreakerd(BreakerdProcess* proc,
                     std::vector<std::string> extra = {}) {
    extra.push_back("--config=" + proc->WriteFile("config.yaml", kConfig));
    extra.push_back("--admin-token-file=" + proc->WriteFile("token", kToken));
    ASSERT_TRUE(proc->Start(extra));
  }

  // A client of proc_ with its own channel (distinct_id) and quiet logs
  // (kept in log_lines_; see LogLines).
  std::unique_ptr<Client> NewClient(ClientOptions options = {},
                                    int distinct_id = 0) {
    options.channel = proc_.Channel(distinct_id);
    return NewConnectedClient(std::move(options));
  }

  // A client of proc_ that makes its channel itself (with the client's
  // channel arguments), quiet as NewClient's.
  std::unique_ptr<Client> NewClientOwningItsChannel(ClientOptions options) {
    options.channel = nullptr;
    return NewConnectedClient(std::move(options));
  }

  // Client::Create for proc_'s address, logging into log_lines_, and a wait
  // for the channel to connect.
  std::unique_ptr<Client> NewConnectedClient(ClientOptions options) {
    options.target = proc_.tcp_address();
    options.log = [this](absl::string_view line) {
      absl::MutexLock lock(&log_mu_);
      log_lines_.push_back(std::string(line));
    };
    // Generous enough for a loaded CI machine; the fail-open test sets its
    // own.
    if (options.decision_timeout == absl::Milliseconds(20)) {
      options.decision_timeout = absl::Seconds(2);
    }
    auto client = Client::Create(std::move(options));
    EXPECT_TRUE(client.ok()) << client.status();
    EXPECT_TRUE((*client)->WaitForConnected(kWait));
    return std::move(*client);
  }

  // How many lines the clients have logged that contain `substring` (the
  // client logs from its own threads too).
  int LogLines(absl::string_view substring) {
    absl::MutexLock lock(&log_mu_);
    int n = 0;
    for (const std::string& line : log_lines_) {
      if (absl::StrContains(line, substring)) ++n;
    }
    return n;
  }

  // The value of a /metrics sample, 0 if absent.
  double Metric(const std::string& selector) {
    return Sample(proc_.Metrics(), selector).value_or(0);
  }
  double Reports(const std::string& dep, const std::string& cls,
                 const std::string& effect) {
    return Metric(absl::StrCat("breakerd_reports_total{dependency=\"", dep,
                               "\",class=\"", cls, "\",effect=\"", effect,
                               "\"}"));
  }
  double Acquires(const std::string& dep, const std::string& decision) {
    return Metric(absl::StrCat("breakerd_acquire_total{dependency=\"", dep,
                               "\",decision=\"", decision, "\"}"));
  }

  // Forces `dep` open on `proc` (default: proc_), waiting for the
  // connection (a just restarted breakerd).
  void ForceOpen(const std::string& dep,
                 const BreakerdProcess* proc = nullptr) {
    auto admin = (proc != nullptr ? proc : &proc_)->AdminStub();
    grpc::ClientContext ctx;
    ctx.set_wait_for_ready(true);
    ctx.set_deadline(std::chrono::system_clock::now() +
                     absl::ToChronoNanoseconds(kWait));
    ctx.AddMetadata("authorization", BearerToken(kToken));
    v1::ForceOpenRequest request;
    request.set_dependency(dep);
    v1::AdminResponse response;
    ASSERT_TRUE(admin->ForceOpen(&ctx, request, &response).ok());
  }

  // Opens `dep` with three counted failures through `client`.
  void Trip(Client* client, const std::string& dep) {
    for (int i = 0; i < 3; ++i) {
      absl::Status s = client->Do(
          dep, [] { return absl::UnavailableError("upstream down"); });
      ASSERT_EQ(s.code(), absl::StatusCode::kUnavailable);
      ASSERT_FALSE(IsBreakerOpen(s)) << s;
    }
  }

  BreakerdProcess proc_;
  absl::Mutex log_mu_;
  std::vector<std::string> log_lines_ ABSL_GUARDED_BY(log_mu_);
};

TEST_F(ClientTest, GuardReportsEachOutcomeClass) {
  auto client = NewClient();
  const auto ok = [] { return absl::OkStatus(); };
  EXPECT_TRUE(client->Do("guard/ok", ok).ok());
  EXPECT_EQ(Reports("guard/ok", "success", "counted_success"), 1);

  EXPECT_EQ(client
                ->Do("guard/unavailable",
                     [] { return absl::UnavailableError("refused"); })
                .code(),
            absl::StatusCode::kUnavailable);
  EXPECT_EQ(Reports("guard/unavailable", "connection_error", "counted_failure"),
            1);

  EXPECT_EQ(client
                ->Do("guard/deadline",
                     [] { return absl::DeadlineExceededError("slow"); })
                .code(),
            absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(Reports("guard/deadline", "timeout", "counted_failure"), 1);

  EXPECT_EQ(
      client->Do("guard/bad", [] { return absl::InvalidArgumentError("x"); })
          .code(),
      absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Reports("guard/bad", "bad_request", "neutral"), 1);

  // HTTP statuses through the two-step permit.
  for (auto [status, cls, effect] :
       std::vector<std::tuple<int, std::string, std::string>>{
           {200, "success", "counted_success"},
           {503, "server_error", "counted_failure"},
           {404, "bad_request", "neutral"},
           {429, "rate_limited", "counted_failure"},
           {401, "auth_error", "neutral"}}) {
    const std::string dep = absl::StrCat("guard/http-", status);
    absl::StatusOr<Permit> permit = client->Acquire(dep);
    ASSERT_TRUE(permit.ok());
    ASSERT_TRUE(permit->allowed());
    EXPECT_EQ(permit->decision().source, DecisionSource::kSidecar);
    absl::StatusOr<v1::ReportResponse> r =
        permit->Report(Outcome::FromHttpStatus(status, "7"));
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(Reports(dep, cls, effect), 1) << status;
  }

  // A permit dropped unreported reports CANCELLED (neutral).
  {
    absl::StatusOr<Permit> permit = client->Acquire("guard/dropped");
    ASSERT_TRUE(permit.ok() && permit->allowed());
  }
  EXPECT_EQ(Reports("guard/dropped", "cancelled", "neutral"), 1);

  // A refused guard does not make the call.
  ForceOpen("guard/forced");
  int calls = 0;
  absl::Status refused = client->Do("guard/forced", [&] {
    ++calls;
    return absl::OkStatus();
  });
  EXPECT_EQ(calls, 0);
  ASSERT_TRUE(IsBreakerOpen(refused)) << refused;
  std::optional<Decision> refusal = RefusalOf(refused);
  ASSERT_TRUE(refusal.has_value());
  EXPECT_EQ(refusal->reason, v1::REJECT_REASON_FORCED_OPEN);
  EXPECT_EQ(refusal->dependency, "guard/forced");
  EXPECT_THAT(refused.message(), HasSubstr("guard/forced"));
}

TEST_F(ClientTest, InvalidNameIsAnErrorNotFailOpen) {
  auto client = NewClient();
  absl::StatusOr<Permit> permit = client->Acquire("bad name with spaces");
  EXPECT_EQ(permit.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(permit.status().message(), HasSubstr("dependency"));
  EXPECT_EQ(client->stats().fail_open, 0u);
}

TEST_F(ClientTest, OpenedByOneClientIsRefusedLocallyByAnother) {
  auto tripper = NewClient({}, 1);
  auto watcher = NewClient({}, 2);
  ASSERT_TRUE(WaitUntil([&] { return watcher->WatchConnected(); }));
  Trip(tripper.get(), "shared/dep");
  ASSERT_TRUE(WaitUntil(
      [&] { return watcher->CachedState("shared/dep") == v1::STATE_OPEN; }));

  const double allowed = Acquires("shared/dep", "allowed");
  const double rejected = Acquires("shared/dep", "rejected_open");
  absl::StatusOr<Permit> permit = watcher->Acquire("shared/dep");
  ASSERT_TRUE(permit.ok());
  EXPECT_FALSE(permit->allowed());
  EXPECT_EQ(permit->decision().source, DecisionSource::kLocal);
  EXPECT_EQ(permit->decision().reason, v1::REJECT_REASON_OPEN);
  EXPECT_GT(permit->decision().retry_after, absl::Seconds(20));
  // Retries are refused locally too.
  absl::StatusOr<Permit> retry = watcher->Acquire("shared/dep", 1);
  ASSERT_TRUE(retry.ok());
  EXPECT_EQ(retry->decision().source, DecisionSource::kLocal);
  EXPECT_EQ(watcher->stats().local_rejections, 2u);
  // breakerd saw neither.
  EXPECT_EQ(Acquires("shared/dep", "allowed"), allowed);
  EXPECT_EQ(Acquires("shared/dep", "rejected_open"), rejected);

  // A forced-open breaker is refused locally as well.
  ForceOpen("shared/forced");
  ASSERT_TRUE(WaitUntil([&] {
    return watcher->CachedState("shared/forced") == v1::STATE_FORCED_OPEN;
  }));
  absl::StatusOr<Permit> forced = watcher->Acquire("shared/forced");
  ASSERT_TRUE(forced.ok());
  EXPECT_EQ(forced->decision().source, DecisionSource::kLocal);
  EXPECT_EQ(forced->decision().reason, v1::REJECT_REASON_FORCED_OPEN);
}

TEST_F(ClientTest, OpenPastItsCooldownGoesToTheSidecar) {
  auto client = NewClient();
  ASSERT_TRUE(WaitUntil([&] { return client->WatchConnected(); }));
  Trip(client.get(), "short/dep");
  ASSERT_TRUE(WaitUntil(
      [&] { return client->CachedState("short/dep") == v1::STATE_OPEN; }));
  // The 1 s cooldown ends; the next Acquire goes to breakerd, which grants
  // the probe.
  ASSERT_TRUE(WaitUntil(
      [&] {
        absl::StatusOr<Permit> p = client->Acquire("short/dep");
        if (!p.ok() || p->decision().source != DecisionSource::kSidecar) {
          return false;
        }
        EXPECT_TRUE(p->allowed());
        EXPECT_TRUE(p->decision().probe);
        p->Report(Outcome::Success()).IgnoreError();
        return true;
      },
      absl::Seconds(10)));
  EXPECT_TRUE(WaitUntil(
      [&] { return client->CachedState("short/dep") == v1::STATE_CLOSED; }));
}

TEST_F(ClientTest, ShadowBreakerIsNeverRefusedLocally) {
  auto client = NewClient();
  ASSERT_TRUE(WaitUntil([&] { return client->WatchConnected(); }));
  // Shadow: breakerd opens the breaker and says so on the Watch stream...
  Trip(client.get(), "payments/psp");
  ASSERT_TRUE(WaitUntil(
      [&] { return client->CachedState("payments/psp") == v1::STATE_OPEN; }));
  const uint64_t local = client->stats().local_rejections;
  // ...but allows every call, so the client asks it instead of refusing.
  absl::StatusOr<Permit> permit = client->Acquire("payments/psp");
  ASSERT_TRUE(permit.ok());
  EXPECT_TRUE(permit->allowed());
  EXPECT_EQ(permit->decision().source, DecisionSource::kSidecar);
  absl::StatusOr<Permit> first = client->AcquireFirst({"payments/psp"});
  ASSERT_TRUE(first.ok());
  EXPECT_TRUE(first->allowed());
  EXPECT_EQ(first->decision().source, DecisionSource::kSidecar);
  EXPECT_EQ(client->stats().local_rejections, local);

  // Control: an enforced breaker tripped the same way is refused locally.
  Trip(client.get(), "enforced/psp");
  ASSERT_TRUE(WaitUntil(
      [&] { return client->CachedState("enforced/psp") == v1::STATE_OPEN; }));
  absl::StatusOr<Permit> refused = client->Acquire("enforced/psp");
  ASSERT_TRUE(refused.ok());
  EXPECT_FALSE(refused->allowed());
  EXPECT_EQ(refused->decision().source, DecisionSource::kLocal);
  EXPECT_EQ(client->stats().local_rejections, local + 1);
}

TEST_F(ClientTest, FailsOpenPromptlyWhenBreakerdIsStopped) {
  ClientOptions options;
  options.decision_timeout = absl::Milliseconds(200);
  auto client = NewClient(options, 1);
  ClientOptions closed_options;
  closed_options.decision_timeout = absl::Milliseconds(200);
  closed_options.fail_mode = FailMode::kClosed;
  auto closed = NewClient(closed_options, 2);
  ASSERT_TRUE(WaitUntil([&] { return client->WatchConnected(); }));
  Trip(client.get(), "stop/dep");
  ASSERT_TRUE(WaitUntil(
      [&] { return client->CachedState("stop/dep") == v1::STATE_OPEN; }));

  ASSERT_TRUE(proc_.Signal(SIGKILL));
  ASSERT_TRUE(proc_.WaitExit(kWait).has_value());
  // The stream's end clears the cache: decisions go to the (absent)
  // sidecar, not to a stale local answer.
  ASSERT_TRUE(WaitUntil([&] { return !client->WatchConnected(); }));
  EXPECT_EQ(client->CachedState("stop/dep"), std::nullopt);

  const absl::Time start = absl::Now();
  absl::StatusOr<Permit> permit = client->Acquire("stop/dep");
  const absl::Duration took = absl::Now() - start;
  ASSERT_TRUE(permit.ok());
  EXPECT_TRUE(permit->allowed());
  EXPECT_EQ(permit->decision().source, DecisionSource::kFailOpen);
  EXPECT_EQ(permit->decision().permit, 0u);
  EXPECT_LT(took, absl::Seconds(1));
  // Nothing is sent for a fail-open permit.
  EXPECT_TRUE(permit->Report(Outcome::Success()).ok());
  EXPECT_EQ(client->stats().report_errors, 0u);

  int calls = 0;
  EXPECT_TRUE(client
                  ->Do("stop/other",
                       [&] {
                         ++calls;
                         return absl::OkStatus();
                       })
                  .ok());
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(client->stats().fail_open, 2u);
  // Logged once, not once per call.
  EXPECT_EQ(LogLines("unreachable"), 1);

  absl::Status refused = closed->Do("stop/other", [&] {
    ++calls;
    return absl::OkStatus();
  });
  EXPECT_EQ(calls, 1);
  ASSERT_TRUE(IsBreakerOpen(refused)) << refused;
  EXPECT_EQ(RefusalOf(refused)->source, DecisionSource::kFailClosed);
  EXPECT_EQ(closed->stats().fail_closed, 1u);
  // The stream keeps trying to come back.
  EXPECT_TRUE(WaitUntil([&] { return client->stats().watch_reconnects >= 2; }));
}

TEST_F(ClientTest, HungSidecarIsNotAskedUntilItIsBack) {
  ClientOptions options;
  options.decision_timeout = absl::Milliseconds(200);
  auto client = NewClient(options);
  absl::StatusOr<Permit> held = client->Acquire("away/dep");
  ASSERT_TRUE(held.ok());
  ASSERT_TRUE(held->allowed());
  ASSERT_EQ(held->decision().source, DecisionSource::kSidecar);

  // Hung, not gone: the connection stays up, nothing answers.
  ASSERT_TRUE(proc_.Signal(SIGSTOP));
  ASSERT_TRUE(WaitUntil([&] { return IsStopped(proc_.pid()); }));

  // The first Acquire waits out its deadline and marks breakerd away...
  absl::StatusOr<Permit> first = client->Acquire("away/dep");
  ASSERT_TRUE(first.ok());
  EXPECT_TRUE(first->allowed());
  EXPECT_EQ(first->decision().source, DecisionSource::kFailOpen);
  EXPECT_EQ(client->stats().fail_open, 1u);
  EXPECT_EQ(client->stats().away_decisions, 0u);

  // ...the ones after it decide with no RPC.
  constexpr int kMore = 5;
  for (int i = 0; i < kMore; ++i) {
    absl::StatusOr<Permit> p = client->Acquire("away/dep", i % 2);
    ASSERT_TRUE(p.ok());
    EXPECT_TRUE(p->allowed());
    EXPECT_EQ(p->decision().source, DecisionSource::kFailOpen);
    EXPECT_EQ(p->decision().permit, 0u);
  }
  absl::StatusOr<Permit> chain = client->AcquireFirst({"away/a", "away/b"});
  ASSERT_TRUE(chain.ok());
  EXPECT_EQ(chain->decision().source, DecisionSource::kFailOpen);
  EXPECT_EQ(chain->decision().dependency, "away/a");
  EXPECT_EQ(client->stats().away_decisions, kMore + 1u);
  EXPECT_EQ(client->stats().fail_open, kMore + 2u);

  // A Report is not sent while away: counted, not waited for.
  absl::StatusOr<v1::ReportResponse> report = held->Report(Outcome::Success());
  EXPECT_EQ(report.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(client->stats().report_errors, 1u);
  EXPECT_EQ(LogLines("unreachable"), 1);

  // The health check notices it is back; then Acquire asks it again.
  ASSERT_TRUE(proc_.Signal(SIGCONT));
  EXPECT_TRUE(WaitUntil(
      [&] {
        absl::StatusOr<Permit> p = client->Acquire("away/dep");
        return p.ok() && p->decision().source == DecisionSource::kSidecar;
      },
      absl::Seconds(3)));
  EXPECT_TRUE(WaitUntil([&] { return LogLines(" back (") == 1; }));
  EXPECT_EQ(LogLines("unreachable"), 1);
}

TEST_F(ClientTest, RetryNeverRetriesWhileOpen) {
  auto client = NewClient();
  RetryOptions options;
  options.max_attempts = 5;
  options.base = absl::Milliseconds(1);
  options.max_backoff = absl::Milliseconds(5);

  int calls = 0;
  absl::Status s = client->Retry(
      "retry/down",
      [&] {
        ++calls;
        return absl::InternalError("upstream 500");
      },
      options);
  // Three failures open the breaker; the fourth Acquire is refused and the
  // helper stops there.
  EXPECT_EQ(calls, 3);
  ASSERT_TRUE(IsBreakerOpen(s)) << s;
  EXPECT_THAT(s.message(), HasSubstr("upstream 500"));
  EXPECT_EQ(RefusalOf(s)->reason, v1::REJECT_REASON_OPEN);
  EXPECT_EQ(Acquires("retry/down", "allowed"), 3);

  calls = 0;
  s = client->Retry(
      "retry/bad",
      [&] {
        ++calls;
        return absl::InvalidArgumentError("bad request");
      },
      options);
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);

  calls = 0;
  s = client->Retry(
      "retry/flaky",
      [&] {
        return ++calls == 1 ? absl::UnavailableError("once") : absl::OkStatus();
      },
      options);
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(Reports("retry/flaky", "success", "counted_success"), 1);
}

TEST_F(ClientTest, FallbackChainSkipsAnOpenDependency) {
  auto client = NewClient();
  ForceOpen("chain/a");
  std::vector<std::string> called;
  auto record = [&](absl::string_view dep) {
    called.push_back(std::string(dep));
    return absl::OkStatus();
  };
  EXPECT_TRUE(client->First({"chain/a", "chain/b"}, record).ok());
  EXPECT_THAT(called, ElementsAre("chain/b"));

  // A failed call moves the chain on to the next dependency.
  called.clear();
  absl::Status s =
      client->First({"chain/b", "chain/c"}, [&](absl::string_view dep) {
        called.push_back(std::string(dep));
        return dep == "chain/b" ? absl::UnavailableError("b down")
                                : absl::OkStatus();
      });
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_THAT(called, ElementsAre("chain/b", "chain/c"));
  EXPECT_EQ(Reports("chain/b", "connection_error", "counted_failure"), 1);

  // All open: the breaker-open status, no call.
  ForceOpen("chain/d");
  called.clear();
  s = client->First({"chain/a", "chain/d"}, record);
  EXPECT_TRUE(IsBreakerOpen(s)) << s;
  EXPECT_TRUE(called.empty());
}

TEST_F(ClientTest, WatchReconnectsAfterBreakerdRestarts) {
  ClientOptions options;
  options.watch_backoff_max = absl::Milliseconds(200);
  auto client = NewClient(options);
  ASSERT_TRUE(WaitUntil([&] { return client->WatchConnected(); }));
  const std::string address = proc_.tcp_address();
  ASSERT_TRUE(proc_.Signal(SIGTERM));
  ASSERT_TRUE(proc_.WaitExit(kWait).has_value());
  ASSERT_TRUE(WaitUntil([&] { return !client->WatchConnected(); }));

  // The same address again (the client's channel points there).
  BreakerdProcess again;
  StartBreakerd(&again, {"--listen=" + address});
  ASSERT_TRUE(
      WaitUntil([&] { return client->WatchConnected(); }, absl::Seconds(15)));
  // A breaker opened by someone else is learnt from the new stream.
  ClientOptions other_options;
  other_options.target = address;
  other_options.watch = false;
  auto other = Client::Create(other_options);
  ASSERT_TRUE(other.ok());
  Trip(other->get(), "restart/dep");
  EXPECT_TRUE(WaitUntil(
      [&] { return client->CachedState("restart/dep") == v1::STATE_OPEN; }));
  EXPECT_GE(client->stats().watch_reconnects, 1u);
}

// Issue 14: after an outage long enough for gRPC's default reconnect
// backoff (1 s, x1.6 per attempt, up to 120 s) to grow past 2 s, the client
// decides with breakerd again within about a second of its restart, and a
// force-open made at the restart is honoured. The stand-in holding the
// port sees each connection attempt, and breakerd restarts just after the
// first one past kMinOutage, so the test measures the client's whole wait
// for its next attempt.
TEST_F(ClientTest, BackWithinASecondOfARestartAfterAnOutage) {
  auto client = NewClientOwningItsChannel({});
  const std::string dep = "restart/dep";
  ASSERT_TRUE(WaitUntil([&] {
    absl::StatusOr<Permit> p = client->Acquire(dep);
    return p.ok() && p->decision().source == DecisionSource::kSidecar;
  }));

  const std::string address = proc_.tcp_address();
  int port = 0;
  ASSERT_TRUE(absl::SimpleAtoi(address.substr(address.rfind(':') + 1), &port));
  ASSERT_TRUE(proc_.Signal(SIGKILL));
  ASSERT_TRUE(proc_.WaitExit(kWait).has_value());
  std::unique_ptr<PortHolder> holder;
  ASSERT_TRUE(WaitUntil([&] {
    holder = std::make_unique<PortHolder>(port);
    return holder->listening();
  }));
  const absl::Time crashed = absl::Now();
  // With gRPC's default backoff the attempts come about 0, 1 and 2.6 s into
  // the outage (each wait +-20%) and the next one 2.56 s (+-20%) after that:
  // past 2 s of outage, an uncapped client is at least 2 s away from its
  // next attempt.
  constexpr absl::Duration kMinOutage = absl::Seconds(2);
  bool all_fail_open = true;
  ASSERT_TRUE(WaitUntil(
      [&] {
        absl::StatusOr<Permit> p = client->Acquire(dep);
        all_fail_open &=
            p.ok() && p->decision().source == DecisionSource::kFailOpen;
        return holder->last_attempt() >= crashed + kMinOutage;
      },
      absl::Seconds(15)))
      << "no connection attempt from the client after " << kMinOutage
      << " of outage";
  EXPECT_TRUE(all_fail_open);
  holder.reset();
  BreakerdProcess again;
  ASSERT_NO_FATAL_FAILURE(StartBreakerd(&again, {"--listen=" + address}));
  const absl::Time restarted = absl::Now();
  ForceOpen(dep, &again);

  // Measured past the limit too, so a failure says how long it took.
  std::optional<Decision> back;
  WaitUntil(
      [&] {
        absl::StatusOr<Permit> p = client->Acquire(dep);
        if (p.ok() && p->decision().source != DecisionSource::kFailOpen) {
          back = p->decision();
        }
        return back.has_value();
      },
      absl::Seconds(20));
  const absl::Duration took = absl::Now() - restarted;
  ASSERT_TRUE(back.has_value())
      << "still failing open " << took << " after the restart";
  // From breakerd, or local once the Watch stream has learnt it too.
  EXPECT_FALSE(back->allowed);
  EXPECT_EQ(back->reason, v1::REJECT_REASON_FORCED_OPEN);
  EXPECT_LT(took, absl::Milliseconds(1500))
      << "decisions came from breakerd again " << took
      << " after its restart (outage " << restarted - crashed << ")";
  std::cout << "back " << took << " after the restart, outage "
            << restarted - crashed << std::endl;
}

TEST_F(ClientTest, ExampleRunsAgainstTheSidecar) {
  const std::string log = proc_.dir() + "/example.log";
  // Counts below assume breakerd answers every decision: on a loaded
  // machine 20 ms can pass, and a fail-open call would not be counted.
  setenv("BREAKERD_DECISION_TIMEOUT_MS", "2000", 1);
  pid_t pid;
  ASSERT_EQ(SpawnLogged({BREAKERD_CLIENT_EXAMPLE, proc_.tcp_address(), "fail"},
                        log, &pid),
            0);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  std::ifstream in(log);
  std::stringstream out;
  out << in.rdbuf();
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << out.str();
  // Default policy here: 3 failures open; the rest are refused without
  // calling the upstream; the chain falls back to example/backup.
  EXPECT_THAT(out.str(), HasSubstr("summary: ok=0 failed=3 refused=5 "
                                   "upstream_calls=3"));
  EXPECT_THAT(out.str(), HasSubstr("fallback chain: ok via example/backup"));
}

// The Watch cache alone: generations, modes and cooldowns, time passed in.
class WatchCacheTest : public ::testing::Test {
 protected:
  static v1::StateChange Change(v1::State state, uint64_t generation,
                                absl::string_view mode = "enforce",
                                absl::string_view reason = "") {
    v1::StateChange c;
    c.set_dependency(std::string(kDep));
    c.set_state(state);
    c.set_generation(generation);
    c.set_mode(std::string(mode));
    c.set_reason(std::string(reason));
    if (state == v1::STATE_OPEN) c.mutable_retry_after()->set_seconds(30);
    return c;
  }

  bool Refused() { return cache_.Refusal(kDep, now_).has_value(); }

  static constexpr absl::string_view kDep = "cache/dep";
  const absl::Duration now_ = absl::Hours(1);
  internal::WatchCache cache_;
};

TEST_F(WatchCacheTest, OpenWithALowerGenerationThanCloseIsIgnored) {
  EXPECT_TRUE(cache_.Apply(Change(v1::STATE_CLOSED, 6), now_));
  EXPECT_FALSE(cache_.Apply(Change(v1::STATE_OPEN, 5), now_));
  EXPECT_FALSE(Refused());
  EXPECT_EQ(cache_.State(kDep), v1::STATE_CLOSED);
}

TEST_F(WatchCacheTest, CloseWithAHigherGenerationThanOpenIsApplied) {
  EXPECT_TRUE(cache_.Apply(Change(v1::STATE_OPEN, 5), now_));
  EXPECT_TRUE(Refused());
  EXPECT_TRUE(cache_.Apply(Change(v1::STATE_CLOSED, 6), now_));
  EXPECT_FALSE(Refused());
  EXPECT_EQ(cache_.State(kDep), v1::STATE_CLOSED);
}

TEST_F(WatchCacheTest, ReloadWithTheSameGenerationSwitchesToShadow) {
  ASSERT_TRUE(cache_.Apply(Change(v1::STATE_OPEN, 6), now_));
  ASSERT_TRUE(Refused());
  EXPECT_TRUE(
      cache_.Apply(Change(v1::STATE_OPEN, 6, "shadow", "reload"), now_));
  EXPECT_FALSE(Refused());
  EXPECT_EQ(cache_.State(kDep), v1::STATE_OPEN);
}

TEST_F(WatchCacheTest, EmptyModeFromAnOlderSidecarIsEnforced) {
  ASSERT_TRUE(cache_.Apply(Change(v1::STATE_OPEN, 1, ""), now_));
  std::optional<Decision> refusal = cache_.Refusal(kDep, now_);
  ASSERT_TRUE(refusal.has_value());
  EXPECT_EQ(refusal->source, DecisionSource::kLocal);
  EXPECT_EQ(refusal->reason, v1::REJECT_REASON_OPEN);
  EXPECT_EQ(refusal->retry_after, absl::Seconds(30));
  // Past the cooldown's end the sidecar decides (it grants the probe).
  EXPECT_FALSE(cache_.Refusal(kDep, now_ + absl::Seconds(30)).has_value());
}

TEST_F(WatchCacheTest, ForcedOpenShadowBreakerIsNotRefused) {
  ASSERT_TRUE(cache_.Apply(Change(v1::STATE_FORCED_OPEN, 2), now_));
  EXPECT_EQ(cache_.Refusal(kDep, now_)->reason, v1::REJECT_REASON_FORCED_OPEN);
  ASSERT_TRUE(cache_.Apply(Change(v1::STATE_FORCED_OPEN, 2, "shadow"), now_));
  EXPECT_FALSE(Refused());
}

}  // namespace
}  // namespace breakerd::client

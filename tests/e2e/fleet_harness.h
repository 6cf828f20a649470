// What the fleet end-to-end tests share: a real redis-server child on a
// free loopback port, the RPC helpers, and the FleetTest fixture that starts
// real breakerd sidecars on it.
#ifndef BREAKERD_TESTS_E2E_FLEET_HARNESS_H_
#define BREAKERD_TESTS_E2E_FLEET_HARNESS_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "breakerd/v1/breaker.grpc.pb.h"
#include "grpcpp/client_context.h"
#include "gtest/gtest.h"
#include "tests/e2e/breakerd_process.h"

namespace breakerd {

inline constexpr absl::Duration kWait = absl::Seconds(10);

struct Acquired {
  grpc::Status status;
  v1::AcquireResponse response;
};

// A free loopback port (`port` 0: any; else that one if free), -1 if none.
int FreePort(int port = 0);

Acquired Acquire(v1::Breaker::Stub* stub, const std::string& dep,
                 absl::Duration deadline = absl::Seconds(5));

grpc::Status Report(v1::Breaker::Stub* stub, const std::string& dep,
                    uint64_t permit, v1::Outcome outcome);

std::optional<v1::BreakerStatus> GetState(v1::Breaker::Stub* stub,
                                          const std::string& dep);

v1::State StateOf(v1::Breaker::Stub* stub, const std::string& dep);
inline constexpr char kFleetAdminToken[] = "fleet-admin-token-61e0";

// A context for an Admin call with the fleet's token, 5 s deadline.
void AdminContext(grpc::ClientContext* ctx);

grpc::Status ForceOpen(BreakerdProcess* p, const std::string& dep,
                       v1::AdminResponse* response);

grpc::Status ResetBreaker(BreakerdProcess* p, const std::string& dep);
// A port for a Redis Cluster node: its bus port (port + 10000) must be a
// valid free port too.
int ClusterPort();
// Runs `args` to completion; true if it exited 0.
bool RunTool(const std::vector<std::string>& args, const std::string& log);
// redis-cli (Debian's redis-tools, beside redis-server) with `args`: its
// output and error text.
std::string RedisCli(int port, const std::string& args);

// A redis-server child on 127.0.0.1:port, without persistence.
class RedisServer {
 public:
  explicit RedisServer(std::string dir) : dir_(std::move(dir)) {}
  ~RedisServer() { Kill(); }

  ::testing::AssertionResult Start(int port = 0,
                                   std::vector<std::string> extra = {}) {
    if (port == 0) port = FreePort();
    port_ = port;
    std::vector<std::string> args = {"/usr/bin/redis-server",
                                     "--port",
                                     std::to_string(port_),
                                     "--bind",
                                     "127.0.0.1",
                                     "--save",
                                     "",
                                     "--appendonly",
                                     "no",
                                     "--dir",
                                     dir_};
    args.insert(args.end(), extra.begin(), extra.end());
    const int rc =
        SpawnLogged(args, absl::StrCat(dir_, "/redis-", port_, ".log"), &pid_);
    if (rc != 0) return ::testing::AssertionFailure() << "spawn redis-server";
    if (!WaitUntil([&] { return Ping(); })) {
      return ::testing::AssertionFailure() << "redis-server did not answer";
    }
    return ::testing::AssertionSuccess();
  }

  void Kill() {
    if (pid_ <= 0) return;
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

  // PING over a raw socket: true on +PONG.
  bool Ping() const {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port_));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bool ok = false;
    if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
        write(fd, "PING\r\n", 6) == 6) {
      char buf[16] = {};
      // With the default user off, an answer asking for AUTH is alive too.
      ok =
          read(fd, buf, sizeof(buf) - 1) > 0 &&
          (std::string(buf) == "+PONG\r\n" || absl::StartsWith(buf, "-NOAUTH"));
    }
    close(fd);
    return ok;
  }

  // One command over a raw socket (any argument size, unlike redis-cli's
  // argv); returns the reply's first line ("" on error), e.g. ":1".
  std::string Command(const std::vector<std::string>& argv) const {
    std::string out = absl::StrCat("*", argv.size(), "\r\n");
    for (const std::string& a : argv) {
      absl::StrAppend(&out, "$", a.size(), "\r\n", a, "\r\n");
    }
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port_));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    std::string reply;
    if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
      size_t sent = 0;
      while (sent < out.size()) {
        const ssize_t n = write(fd, out.data() + sent, out.size() - sent);
        if (n <= 0) break;
        sent += static_cast<size_t>(n);
      }
      char buf[256];
      while (!absl::StrContains(reply, "\r\n")) {
        const ssize_t n = read(fd, buf, sizeof(buf));
        if (n <= 0) break;
        reply.append(buf, static_cast<size_t>(n));
      }
    }
    close(fd);
    return reply.substr(0, reply.find("\r\n"));
  }

  std::string address() const { return absl::StrCat("127.0.0.1:", port_); }
  int port() const { return port_; }

 private:
  std::string dir_;
  int port_ = 0;
  pid_t pid_ = -1;
};

// Five failures open a breaker for 1 s, published at once (quorum 1: these
// tests are about how states travel); the probe's lease is 1 s ("lease/*":
// 10 s, longer than any caller loop here; "long/*": 30 s cooldowns;
// "spread/*": only the failure-rate rule, on at least 12 calls).
inline constexpr char kConfig[] = R"(
defaults:
  consecutive_failures: 5
  failure_rate: { threshold: 0 }
  cooldown: { base: 1s, max: 4s, jitter: 0 }
  probe: { lease: 1s }
  fleet: { quorum: 1 }
policies:
  - match: "long/*"
    cooldown: { base: 30s, max: 60s, jitter: 0 }
  - match: "lease/*"
    probe: { lease: 10s }
  - match: "spread/*"
    consecutive_failures: 0
    failure_rate: { threshold: 0.5, min_calls: 12, window: 10s }
)";

class FleetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    redis_ = std::make_unique<RedisServer>(scratch_.dir());
    ASSERT_TRUE(redis_->Start());
  }

  // Starts sidecar i (0-based) on the fleet's Redis with `config` (and
  // `env` added to its environment) and waits until it has joined
  // (breakerd_fleet_connected 1).
  void StartSidecar(std::vector<std::string> extra = {},
                    absl::string_view config = kConfig,
                    std::vector<std::string> env = {}) {
    auto proc = std::make_unique<BreakerdProcess>();
    extra.push_back("--config=" + proc->WriteFile("config.yaml", config));
    extra.push_back("--redis=" + redis_->address());
    proc->set_extra_environment(std::move(env));
    ASSERT_TRUE(proc->Start(extra));
    BreakerdProcess* p = proc.get();
    ASSERT_TRUE(WaitUntil([p] { return FleetConnected(p) == 1; })) << p->Log();
    stubs_.push_back(p->BreakerStub());
    sidecars_.push_back(std::move(proc));
  }

  static double FleetConnected(BreakerdProcess* p) {
    return Sample(p->Metrics(), "breakerd_fleet_connected").value_or(-1);
  }

  // One successful call to `dep` through sidecar i.
  void Succeed(int i, const std::string& dep) {
    Acquired a = Acquire(stubs_[i].get(), dep);
    ASSERT_TRUE(a.status.ok() && a.response.allowed());
    ASSERT_TRUE(
        Report(stubs_[i].get(), dep, a.response.permit(), v1::OUTCOME_SUCCESS)
            .ok());
  }

  // Opens `dep` on sidecar i with five timeouts.
  void Trip(int i, const std::string& dep) {
    for (int n = 0; n < 5; ++n) {
      Acquired a = Acquire(stubs_[i].get(), dep);
      ASSERT_TRUE(a.status.ok() && a.response.allowed());
      ASSERT_TRUE(
          Report(stubs_[i].get(), dep, a.response.permit(), v1::OUTCOME_TIMEOUT)
              .ok());
    }
    ASSERT_EQ(StateOf(stubs_[i].get(), dep), v1::STATE_OPEN);
  }

  BreakerdProcess scratch_;  // only for its temporary directory
  std::unique_ptr<RedisServer> redis_;
  std::vector<std::unique_ptr<BreakerdProcess>> sidecars_;
  std::vector<std::unique_ptr<v1::Breaker::Stub>> stubs_;
};

}  // namespace breakerd

#endif  // BREAKERD_TESTS_E2E_FLEET_HARNESS_H_

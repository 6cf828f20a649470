#include "tests/e2e/fleet_harness.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>

namespace breakerd {

// A free loopback port (`port` 0: any; else that one if free), -1 if none.
int FreePort(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    close(fd);
    return -1;
  }
  close(fd);
  return ntohs(addr.sin_port);
}

Acquired Acquire(v1::Breaker::Stub* stub, const std::string& dep,
                 absl::Duration deadline) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() +
                   absl::ToChronoNanoseconds(deadline));
  v1::AcquireRequest req;
  req.set_dependency(dep);
  Acquired a;
  a.status = stub->Acquire(&ctx, req, &a.response);
  return a;
}

grpc::Status Report(v1::Breaker::Stub* stub, const std::string& dep,
                    uint64_t permit, v1::Outcome outcome) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  v1::ReportRequest req;
  req.set_dependency(dep);
  req.set_permit(permit);
  req.set_outcome(outcome);
  v1::ReportResponse resp;
  return stub->Report(&ctx, req, &resp);
}

std::optional<v1::BreakerStatus> GetState(v1::Breaker::Stub* stub,
                                          const std::string& dep) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  v1::GetStateRequest req;
  req.set_dependency(dep);
  v1::BreakerStatus status;
  if (!stub->GetState(&ctx, req, &status).ok()) return std::nullopt;
  return status;
}

v1::State StateOf(v1::Breaker::Stub* stub, const std::string& dep) {
  std::optional<v1::BreakerStatus> s = GetState(stub, dep);
  return s.has_value() ? s->state() : v1::STATE_UNSPECIFIED;
}

// A context for an Admin call with the fleet's token, 5 s deadline.
void AdminContext(grpc::ClientContext* ctx) {
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  ctx->AddMetadata("authorization", BearerToken(kFleetAdminToken));
}

grpc::Status ForceOpen(BreakerdProcess* p, const std::string& dep,
                       v1::AdminResponse* response) {
  grpc::ClientContext ctx;
  AdminContext(&ctx);
  v1::ForceOpenRequest req;
  req.set_dependency(dep);
  return p->AdminStub()->ForceOpen(&ctx, req, response);
}

grpc::Status ResetBreaker(BreakerdProcess* p, const std::string& dep) {
  grpc::ClientContext ctx;
  AdminContext(&ctx);
  v1::ResetRequest req;
  req.set_dependency(dep);
  v1::AdminResponse response;
  return p->AdminStub()->Reset(&ctx, req, &response);
}

// A port for a Redis Cluster node: its bus port (port + 10000) must be a
// valid free port too.
int ClusterPort() {
  for (int tries = 0; tries < 100; ++tries) {
    const int port = FreePort();
    if (port > 0 && port + 10000 <= 65535 && FreePort(port + 10000) > 0) {
      return port;
    }
  }
  return -1;
}

// Runs `args` to completion; true if it exited 0.
bool RunTool(const std::vector<std::string>& args, const std::string& log) {
  pid_t pid;
  if (SpawnLogged(args, log, &pid) != 0) return false;
  int status = 0;
  return waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
         WEXITSTATUS(status) == 0;
}

// redis-cli (Debian's redis-tools, beside redis-server) with `args`: its
// output and error text.
std::string RedisCli(int port, const std::string& args) {
  const std::string command = absl::StrCat(
      "/usr/bin/redis-cli -h 127.0.0.1 -p ", port, " ", args, " 2>&1");
  std::string out;
  if (FILE* f = popen(command.c_str(), "r"); f != nullptr) {
    char buf[512];
    for (size_t n; (n = fread(buf, 1, sizeof(buf), f)) > 0;) out.append(buf, n);
    pclose(f);
  }
  return out;
}

}  // namespace breakerd

// echo_server: the gRPC floor for bench/load/breakerd_load.cc. It serves
// breakerd.bench.Echo/Empty (an empty unary RPC that finishes inline) with
// the ServerBuilder settings breakerd uses (server/server_runner.cc,
// ServerRunner::StartGrpc): the same options, the same default health
// service and reflection plugin, callback services, so gRPC runs the same
// threads and completion queues in both processes. The one thing left out on
// purpose is breakerd's call-tracking interceptor: the floor is bare gRPC.
// Keep StartGrpc and BuildServer below in step.
//
// One process-wide setting matters as much as the builder's: breakerd
// switches off absl::Mutex deadlock detection (Registry's constructor,
// server/engine/mutex.cc), which Debian's Abseil build leaves on, and gRPC
// 1.51 locks absl::Mutex internally on every call. With detection on, this
// floor spent about 4 % of its CPU in absl's graphcycles code and was slower
// than breakerd's own gRPC; so it is switched off here too.
//
// Usage: echo_server --listen=127.0.0.1:0,unix:/tmp/x/echo.sock
// Once every listener is up it logs one JSON line, as breakerd does:
//   {"ts":...,"level":"info","event":"serving","grpc":"127.0.0.1:41234,unix:/tmp/x/echo.sock"}
// SIGTERM or SIGINT stops it (exit code 0).
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "bench/load/echo.grpc.pb.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/health_check_service_interface.h"
#include "server/log/json_log.h"

ABSL_FLAG(std::vector<std::string>, listen, {"127.0.0.1:0"},
          "Comma-separated listen addresses: host:port (port 0 picks a free "
          "port) or unix:/path/to.sock (a stale socket there is removed).");

namespace breakerd {
namespace bench {
namespace {

class EchoServiceImpl final : public Echo::CallbackService {
 public:
  grpc::ServerUnaryReactor* Empty(grpc::CallbackServerContext* context,
                                  const google::protobuf::Empty* request,
                                  google::protobuf::Empty* response) override {
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }
};

struct Listener {
  std::string address;
  int selected_port = 0;
};

// As ServerRunner::StartGrpc, minus the Breaker/Admin services.
std::unique_ptr<grpc::Server> BuildServer(EchoServiceImpl* service,
                                          std::vector<Listener>* listeners) {
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  for (Listener& l : *listeners) {
    builder.AddListeningPort(l.address, grpc::InsecureServerCredentials(),
                             &l.selected_port);
  }
  builder.RegisterService(service);
  return builder.BuildAndStart();
}

int Main(const std::vector<std::string>& addresses) {
  std::vector<Listener> listeners;
  for (const std::string& address : addresses) {
    struct stat st;
    if (absl::StartsWith(address, "unix:") &&
        lstat(address.substr(5).c_str(), &st) == 0 && S_ISSOCK(st.st_mode)) {
      unlink(address.substr(5).c_str());  // a stale socket from a crash
    }
    listeners.push_back(Listener{address});
  }
  EchoServiceImpl service;
  std::unique_ptr<grpc::Server> server = BuildServer(&service, &listeners);
  std::vector<std::string> bound;
  for (const Listener& l : listeners) {
    if (server == nullptr || l.selected_port == 0) {
      LogEvent(LogLevel::kError, "startup_failed",
               {{"error", absl::StrCat("listen ", l.address)}});
      return 1;
    }
    if (absl::StartsWith(l.address, "unix:")) {
      bound.push_back(l.address);
    } else {
      const size_t colon = l.address.rfind(':');
      bound.push_back(
          absl::StrCat(l.address.substr(0, colon), ":", l.selected_port));
    }
  }
  server->GetHealthCheckService()->SetServingStatus(true);
  LogEvent(LogLevel::kInfo, "serving", {{"grpc", absl::StrJoin(bound, ",")}});

  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  int sig = 0;
  while (sigwait(&set, &sig) != 0) {
  }
  LogEvent(LogLevel::kInfo, "shutting_down",
           {{"signal", sig == SIGTERM ? "SIGTERM" : "SIGINT"}});
  // Unary calls take microseconds; a short deadline only cuts idle
  // connections that the client has not closed yet.
  server->Shutdown(std::chrono::system_clock::now() +
                   std::chrono::milliseconds(200));
  server->Wait();
  LogEvent(LogLevel::kInfo, "stopped");
  return 0;
}

}  // namespace
}  // namespace bench
}  // namespace breakerd

int main(int argc, char** argv) {
  // Before any thread starts, so every thread inherits the mask and only
  // sigwait sees the signals.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  absl::SetProgramUsageMessage(
      "echo_server --listen=ADDR[,ADDR...]: the empty-RPC gRPC floor for "
      "breakerd_load");
  absl::ParseCommandLine(argc, argv);
  // As breakerd does (see the top of this file).
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  return breakerd::bench::Main(absl::GetFlag(FLAGS_listen));
}

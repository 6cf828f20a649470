// A stand-in application process for the fault tests: calls
// Acquire(<dependency>) once on <target>, prints one line
//   allowed=<0|1> probe=<0|1> permit=<n>
// on stdout, and then waits with its connection open, never reporting,
// until it is killed. The tests SIGKILL it to play "a client that died
// holding the probe".
//
// Usage: fault_probe_client <target> <dependency>
// Exit codes: 1 the Acquire failed (the status is printed), 2 usage.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <memory>

#include "breakerd/v1/breaker.grpc.pb.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s <target> <dependency>\n", argv[0]);
    return 2;
  }
  std::shared_ptr<grpc::Channel> channel =
      grpc::CreateChannel(argv[1], grpc::InsecureChannelCredentials());
  std::unique_ptr<breakerd::v1::Breaker::Stub> stub =
      breakerd::v1::Breaker::NewStub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  breakerd::v1::AcquireRequest request;
  request.set_dependency(argv[2]);
  breakerd::v1::AcquireResponse response;
  const grpc::Status status = stub->Acquire(&ctx, request, &response);
  if (!status.ok()) {
    std::printf("error code=%d message=%s\n",
                static_cast<int>(status.error_code()),
                status.error_message().c_str());
    return 1;
  }
  std::printf("allowed=%d probe=%d permit=%llu\n", response.allowed() ? 1 : 0,
              response.probe() ? 1 : 0,
              static_cast<unsigned long long>(response.permit()));
  std::fflush(stdout);
  for (;;) pause();
}

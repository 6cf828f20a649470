// What every abuse_bench client (setup, victim, abusers) does alike: its
// own connection, a generous deadline, the way a failed call is described.
//
// Thread-safety: free functions without shared state.
#ifndef BREAKERD_BENCH_ABUSE_CLIENT_H_
#define BREAKERD_BENCH_ABUSE_CLIENT_H_

#include <chrono>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "grpcpp/grpcpp.h"

namespace breakerd {
namespace bench {

// Long enough that a starved call is measured, not cut short.
constexpr auto kCallDeadline = std::chrono::seconds(10);

// A channel of its own to `address`: channels with identical arguments
// would share one subchannel, hence one connection, so `role` (distinct per
// client) is set as an argument. No client-side limit on received messages:
// ListStates of every breaker is large.
inline std::shared_ptr<grpc::Channel> MakeChannel(const std::string& address,
                                                  const std::string& role) {
  grpc::ChannelArguments args;
  args.SetString("breakerd.bench.channel", role);
  args.SetMaxReceiveMessageSize(-1);
  return grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(),
                                   args);
}

// Waits (at most 10 s) for `channel` to connect; false if it did not.
inline bool Connect(const std::shared_ptr<grpc::Channel>& channel) {
  return channel->WaitForConnected(std::chrono::system_clock::now() +
                                   std::chrono::seconds(10));
}

inline void SetDeadline(grpc::ClientContext* ctx) {
  ctx->set_deadline(std::chrono::system_clock::now() + kCallDeadline);
}

inline std::string StatusText(const grpc::Status& s) {
  return absl::StrCat("code ", s.error_code(), " ", s.error_message());
}

}  // namespace bench
}  // namespace breakerd

#endif  // BREAKERD_BENCH_ABUSE_CLIENT_H_

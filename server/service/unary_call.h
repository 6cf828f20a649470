// The per-call scope every unary handler of breakerd's own services opens
// first: it counts the call in flight (CallTracker, so graceful shutdown
// waits for it), times and counts it (RpcStats::Call), and holds the call's
// default reactor. The handler ends with `return call.Finish(status);`.
//
//   grpc::ServerUnaryReactor* FooServiceImpl::Bar(
//       grpc::CallbackServerContext* context, const BarRequest* request,
//       BarResponse* response) {
//     UnaryCall call(context, tracker_, rpc_stats_, RpcMethod::kBar);
//     ...
//     return call.Finish(ToGrpcStatus(status));
//   }
//
// The call stays counted in flight until the scope ends, just after Finish.
//
// Thread-safety: one UnaryCall per call, used by the handler's thread only.
#ifndef BREAKERD_SERVER_SERVICE_UNARY_CALL_H_
#define BREAKERD_SERVER_SERVICE_UNARY_CALL_H_

#include "grpcpp/server_context.h"
#include "grpcpp/support/server_callback.h"
#include "grpcpp/support/status.h"
#include "server/service/call_tracker.h"
#include "server/service/rpc_stats.h"

namespace breakerd {

class UnaryCall {
 public:
  // REQUIRES: `context` is the handler's. `tracker` and `stats` may be null
  // (not counted in flight / not counted in RpcStats).
  UnaryCall(grpc::CallbackServerContext* context, CallTracker* tracker,
            RpcStats* stats, RpcMethod method)
      : in_flight_(tracker),
        call_(stats, method),
        reactor_(context->DefaultReactor()) {}
  UnaryCall(const UnaryCall&) = delete;
  UnaryCall& operator=(const UnaryCall&) = delete;

  // Counts the call, finishes it with `status` and returns the reactor for
  // the handler to return. REQUIRES: called once.
  grpc::ServerUnaryReactor* Finish(const grpc::Status& status) {
    call_.Finish(reactor_, status);
    return reactor_;
  }

 private:
  // Declared first: counted in flight before anything else, and until
  // after Finish.
  const CallTracker::Scope in_flight_;
  RpcStats::Call call_;
  grpc::ServerUnaryReactor* const reactor_;
};

}  // namespace breakerd

#endif  // BREAKERD_SERVER_SERVICE_UNARY_CALL_H_

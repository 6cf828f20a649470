// The breakerd.v1.Breaker service: the per-call API. Each handler validates
// the request, calls the Registry, fills the response and finishes inline;
// rules and status messages come from the engine (see convert.h for the
// translation). Watch streams are run by the WatchHub.
//
// Thread-safety: thread-safe; gRPC calls the handlers concurrently.
#ifndef BREAKERD_SERVER_SERVICE_BREAKER_SERVICE_H_
#define BREAKERD_SERVER_SERVICE_BREAKER_SERVICE_H_

#include "breakerd/v1/breaker.grpc.pb.h"
#include "grpcpp/server_context.h"
#include "grpcpp/support/server_callback.h"
#include "server/engine/registry.h"
#include "server/service/call_tracker.h"
#include "server/service/read_limiter.h"
#include "server/service/rpc_stats.h"
#include "server/service/trace_writer.h"
#include "server/service/unary_call.h"
#include "server/service/watch_hub.h"

namespace breakerd {

class BreakerServiceImpl final : public v1::Breaker::CallbackService {
 public:
  // REQUIRES: `registry` and `hub` are non-null and outlive the service.
  // `tracker` (may be null) counts the unary calls in flight; `rpc_stats`
  // (may be null; must outlive the service) counts handled calls and their
  // handling time; `trace` (may be null; must outlive the service) records
  // every accepted Report but a repeated one (EFFECT_DUPLICATE);
  // `read_limiter` (may be null: no limit; must outlive the service) admits
  // ListStates.
  BreakerServiceImpl(Registry* registry, WatchHub* hub,
                     CallTracker* tracker = nullptr,
                     RpcStats* rpc_stats = nullptr,
                     TraceWriter* trace = nullptr,
                     ReadLimiter* read_limiter = nullptr);

  BreakerServiceImpl(const BreakerServiceImpl&) = delete;
  BreakerServiceImpl& operator=(const BreakerServiceImpl&) = delete;

  // OK with the decision (a rejection is OK with allowed = false);
  // INVALID_ARGUMENT for a bad name; RESOURCE_EXHAUSTED at max_breakers.
  grpc::ServerUnaryReactor* Acquire(grpc::CallbackServerContext* context,
                                    const v1::AcquireRequest* request,
                                    v1::AcquireResponse* response) override;

  // OK with the effect; INVALID_ARGUMENT naming the field for a bad name,
  // permit, outcome, or a latency / retry_after that is malformed, negative
  // or longer than 24h. Nothing changes on error.
  grpc::ServerUnaryReactor* Report(grpc::CallbackServerContext* context,
                                   const v1::ReportRequest* request,
                                   v1::ReportResponse* response) override;

  // As Acquire over a list; `dependency` is the name granted, empty if none.
  grpc::ServerUnaryReactor* AcquireFirst(
      grpc::CallbackServerContext* context,
      const v1::AcquireFirstRequest* request,
      v1::AcquireFirstResponse* response) override;

  // OK with the counts (Registry::ReportBatch); INVALID_ARGUMENT naming the
  // field, or RESOURCE_EXHAUSTED past the batch limits: nothing applied.
  grpc::ServerUnaryReactor* ReportBatch(
      grpc::CallbackServerContext* context,
      const v1::ReportBatchRequest* request,
      v1::ReportBatchResponse* response) override;

  // NOT_FOUND when no breaker exists for the name; INVALID_ARGUMENT for a
  // bad name.
  grpc::ServerUnaryReactor* GetState(grpc::CallbackServerContext* context,
                                     const v1::GetStateRequest* request,
                                     v1::BreakerStatus* response) override;

  // OK with every breaker, or RESOURCE_EXHAUSTED (retry later) when the
  // ReadLimiter does not admit a read of the whole registry now.
  grpc::ServerUnaryReactor* ListStates(
      grpc::CallbackServerContext* context,
      const v1::ListStatesRequest* request,
      v1::ListStatesResponse* response) override;

  // See WatchHub::StartStream.
  grpc::ServerWriteReactor<v1::StateChange>* Watch(
      grpc::CallbackServerContext* context,
      const v1::WatchRequest* request) override;

 private:
  Registry* const registry_;
  WatchHub* const hub_;
  CallTracker* const tracker_;
  RpcStats* const rpc_stats_;
  TraceWriter* const trace_;
  ReadLimiter* const read_limiter_;
};

}  // namespace breakerd

#endif  // BREAKERD_SERVER_SERVICE_BREAKER_SERVICE_H_

#include "server/service/breaker_service.h"

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "server/service/convert.h"

namespace breakerd {
namespace {

// Reads a Report's facts from the wire; INVALID_ARGUMENT naming the field
// for a bad duration. The outcome fields are checked by the engine.
absl::StatusOr<ReportRequestFacts> ReportFacts(
    const v1::ReportRequest& request) {
  ReportRequestFacts facts;
  // v1::Outcome numbers are OutcomeClass numbers (static_assert in
  // convert.cc).
  facts.outcome.explicit_class = static_cast<int>(request.outcome());
  facts.outcome.http_status = request.http_status();
  if (request.has_grpc_code()) facts.outcome.grpc_code = request.grpc_code();
  if (request.has_latency()) {
    absl::StatusOr<absl::Duration> latency =
        FromProtoDuration(request.latency(), "latency", kMaxReportDuration);
    if (!latency.ok()) return latency.status();
    facts.latency = *latency;
  }
  if (request.has_retry_after()) {
    absl::StatusOr<absl::Duration> retry_after = FromProtoDuration(
        request.retry_after(), "retry_after", kMaxReportDuration);
    if (!retry_after.ok()) return retry_after.status();
    facts.retry_after = *retry_after;
  }
  // Views into `request`, which outlives the Report it feeds.
  facts.chain = request.chain();
  facts.tier = request.tier();
  return facts;
}

// Reads a ReportBatch from the wire (views into `request`);
// INVALID_ARGUMENT naming the field for a bad duration.
absl::StatusOr<BatchFacts> BatchFactsOf(const v1::ReportBatchRequest& request) {
  BatchFacts batch;
  batch.client_id = request.client_id();
  batch.sequence = request.sequence();
  batch.dependencies.reserve(request.dependencies_size());
  for (int i = 0; i < request.dependencies_size(); ++i) {
    const v1::DependencyBatch& d = request.dependencies(i);
    DependencyBatchFacts facts;
    facts.dependency = d.dependency();
    facts.generation = d.generation();
    facts.grants = d.grants();
    facts.outcomes.reserve(d.outcomes_size());
    for (int j = 0; j < d.outcomes_size(); ++j) {
      const v1::LocalOutcome& o = d.outcomes(j);
      const std::string field =
          absl::StrCat("dependencies[", i, "].outcomes[", j, "].");
      LocalOutcomeFacts f;
      f.outcome.explicit_class = static_cast<int>(o.outcome());
      f.outcome.http_status = o.http_status();
      if (o.has_grpc_code()) f.outcome.grpc_code = o.grpc_code();
      if (o.has_latency()) {
        absl::StatusOr<absl::Duration> latency = FromProtoDuration(
            o.latency(), absl::StrCat(field, "latency"), kMaxReportDuration);
        if (!latency.ok()) return latency.status();
        f.latency = *latency;
      }
      if (o.has_retry_after()) {
        absl::StatusOr<absl::Duration> retry_after = FromProtoDuration(
            o.retry_after(), absl::StrCat(field, "retry_after"),
            kMaxReportDuration);
        if (!retry_after.ok()) return retry_after.status();
        f.retry_after = *retry_after;
      }
      f.chain = o.chain();
      f.tier = o.tier();
      facts.outcomes.push_back(f);
    }
    batch.dependencies.push_back(std::move(facts));
  }
  for (const v1::ChainDecision& c : request.chains()) {
    batch.chains.push_back(
        ChainDecisionFacts{c.chain(), c.none(), c.tier(), c.count()});
  }
  for (const v1::ClientDecisions& d : request.decisions()) {
    batch.decisions.push_back(ClientDecisionFacts{
        d.dependency(), d.refused_local(), d.fail_open(), d.fail_closed()});
  }
  return batch;
}

}  // namespace

BreakerServiceImpl::BreakerServiceImpl(Registry* registry, WatchHub* hub,
                                       CallTracker* tracker,
                                       RpcStats* rpc_stats, TraceWriter* trace,
                                       ReadLimiter* read_limiter)
    : registry_(registry),
      hub_(hub),
      tracker_(tracker),
      rpc_stats_(rpc_stats),
      trace_(trace),
      read_limiter_(read_limiter) {}

grpc::ServerUnaryReactor* BreakerServiceImpl::Acquire(
    grpc::CallbackServerContext* context, const v1::AcquireRequest* request,
    v1::AcquireResponse* response) {
  UnaryCall call(context, tracker_, rpc_stats_, RpcMethod::kAcquire);
  absl::StatusOr<AcquireResult> result =
      registry_->Acquire(request->dependency(), request->attempt());
  if (result.ok()) FillAcquireResponse(*result, response);
  return call.Finish(ToGrpcStatus(result.status()));
}

grpc::ServerUnaryReactor* BreakerServiceImpl::Report(
    grpc::CallbackServerContext* context, const v1::ReportRequest* request,
    v1::ReportResponse* response) {
  UnaryCall call(context, tracker_, rpc_stats_, RpcMethod::kReport);
  absl::StatusOr<ReportRequestFacts> facts = ReportFacts(*request);
  if (!facts.ok()) {
    return call.Finish(ToGrpcStatus(facts.status()));
  }
  absl::StatusOr<ReportResult> result =
      registry_->Report(request->dependency(), request->permit(), *facts);
  if (result.ok()) {
    response->set_state(ToProto(result->state));
    response->set_effect(ToProto(result->effect));
    // A repeated Report is not another call: the trace, which simulate
    // replays call by call, has the first one only.
    if (trace_ != nullptr && result->effect != Effect::kDuplicate) {
      trace_->Record(*request);
    }
  }
  return call.Finish(ToGrpcStatus(result.status()));
}

grpc::ServerUnaryReactor* BreakerServiceImpl::AcquireFirst(
    grpc::CallbackServerContext* context,
    const v1::AcquireFirstRequest* request,
    v1::AcquireFirstResponse* response) {
  UnaryCall call(context, tracker_, rpc_stats_, RpcMethod::kAcquireFirst);
  const std::vector<std::string> names(request->dependencies().begin(),
                                       request->dependencies().end());
  absl::StatusOr<AcquireFirstResult> result = registry_->AcquireFirst(
      names, request->attempt(),
      ChainPosition{request->chain(), request->first_tier()});
  if (result.ok()) FillAcquireFirstResponse(*result, names, response);
  return call.Finish(ToGrpcStatus(result.status()));
}

grpc::ServerUnaryReactor* BreakerServiceImpl::ReportBatch(
    grpc::CallbackServerContext* context, const v1::ReportBatchRequest* request,
    v1::ReportBatchResponse* response) {
  UnaryCall call(context, tracker_, rpc_stats_, RpcMethod::kReportBatch);
  // The limits first: a batch too large is not read any further.
  size_t outcomes = 0;
  for (const v1::DependencyBatch& d : request->dependencies()) {
    outcomes += static_cast<size_t>(d.outcomes_size());
  }
  absl::StatusOr<BatchResult> result;
  if (absl::Status s = Registry::CheckBatchOutcomes(outcomes); !s.ok()) {
    result = s;
  } else if (absl::StatusOr<BatchFacts> batch = BatchFactsOf(*request);
             !batch.ok()) {
    result = batch.status();
  } else {
    result = registry_->ReportBatch(*batch);
  }
  if (result.ok()) {
    response->set_counted(result->counted);
    response->set_late(result->late);
    response->set_refused(result->refused);
    response->set_repeated_batch(result->repeated);
  }
  return call.Finish(ToGrpcStatus(result.status()));
}

grpc::ServerUnaryReactor* BreakerServiceImpl::GetState(
    grpc::CallbackServerContext* context, const v1::GetStateRequest* request,
    v1::BreakerStatus* response) {
  UnaryCall call(context, tracker_, rpc_stats_, RpcMethod::kGetState);
  absl::StatusOr<BreakerSnapshot> snapshot =
      registry_->Get(request->dependency());
  if (snapshot.ok()) FillBreakerStatus(*snapshot, response);
  return call.Finish(ToGrpcStatus(snapshot.status()));
}

grpc::ServerUnaryReactor* BreakerServiceImpl::ListStates(
    grpc::CallbackServerContext* context, const v1::ListStatesRequest* request,
    v1::ListStatesResponse* response) {
  UnaryCall call(context, tracker_, rpc_stats_, RpcMethod::kListStates);
  const size_t size = registry_->size();
  if (read_limiter_ != nullptr) {
    if (absl::Status admitted = read_limiter_->Admit(size, "list_states");
        !admitted.ok()) {
      return call.Finish(ToGrpcStatus(admitted));
    }
  }
  response->mutable_breakers()->Reserve(static_cast<int>(size));
  registry_->ForEach([response](const BreakerSnapshot& snapshot) {
    FillBreakerStatus(snapshot, response->add_breakers());
  });
  return call.Finish(grpc::Status::OK);
}

grpc::ServerWriteReactor<v1::StateChange>* BreakerServiceImpl::Watch(
    grpc::CallbackServerContext* context, const v1::WatchRequest* request) {
  RpcStats::Call call(rpc_stats_, RpcMethod::kWatch);
  grpc::ServerWriteReactor<v1::StateChange>* stream =
      hub_->StartStream(*request, context);
  call.Done(grpc::StatusCode::OK);
  return stream;
}

}  // namespace breakerd

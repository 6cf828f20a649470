#include "breakerd/internal/convert.h"

#include <algorithm>
#include <utility>

#include "breakerd/internal/proto_duration.h"

namespace breakerd::client::internal {
namespace {

// The fields AcquireResponse and AcquireFirstResponse share.
template <typename Response>
Decision DecisionFromFields(const Response& r, std::string dependency) {
  Decision d;
  d.allowed = r.allowed();
  d.permit = r.permit();
  d.probe = r.probe();
  d.state = FromProto(r.state());
  d.reason = FromProto(r.reason());
  d.retry_after = FromProto(r.retry_after());
  d.dependency = std::move(dependency);
  d.source = DecisionSource::kSidecar;
  return d;
}

}  // namespace

Decision DecisionFrom(const v1::AcquireResponse& response,
                      std::string dependency) {
  return DecisionFromFields(response, std::move(dependency));
}

Decision DecisionFrom(const v1::AcquireFirstResponse& response) {
  return DecisionFromFields(response, response.dependency());
}

void SetChain(const v1::AcquireFirstRequest& request, Decision* d) {
  if (request.chain().empty() || !d->allowed) return;
  const auto& sent = request.dependencies();
  const auto it = std::find(sent.begin(), sent.end(), d->dependency);
  d->chain = request.chain();
  d->tier = request.first_tier() +
            static_cast<uint32_t>(it == sent.end() ? 0 : it - sent.begin());
}

void SetOutcome(const Outcome& outcome, v1::ReportRequest* request) {
  request->set_outcome(ToProto(outcome.kind));
  request->set_http_status(outcome.http_status);
  if (outcome.grpc_code.has_value()) request->set_grpc_code(*outcome.grpc_code);
  if (outcome.retry_after > absl::ZeroDuration()) {
    ToProto(outcome.retry_after, request->mutable_retry_after());
  }
}

Outcome OutcomeFrom(const v1::ReportRequest& request) {
  Outcome o;
  o.kind = FromProto(request.outcome());
  o.http_status = request.http_status();
  if (request.has_grpc_code()) o.grpc_code = request.grpc_code();
  o.retry_after = FromProto(request.retry_after());
  return o;
}

ReportResult ResultFrom(const v1::ReportResponse& response) {
  ReportResult r;
  r.state = FromProto(response.state());
  r.effect = FromProto(response.effect());
  return r;
}

}  // namespace breakerd::client::internal

namespace breakerd::client {

absl::string_view StateName(State state) {
  return v1::State_Name(internal::ToProto(state));
}

absl::string_view RejectReasonName(RejectReason reason) {
  return v1::RejectReason_Name(internal::ToProto(reason));
}

}  // namespace breakerd::client

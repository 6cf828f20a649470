// Outcome's helpers and Classified: what a guarded call's status, HTTP
// status or gRPC code is reported as, and whether it is worth retrying.
#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "absl/strings/strip.h"
#include "breakerd/client.h"
#include "breakerd/internal/convert.h"
#include "breakerd/v1/breaker.pb.h"

namespace breakerd::client {
namespace {

// Status payload carrying the outcome to report (see Classified): a
// ReportRequest with only its outcome fields set.
constexpr char kOutcomePayload[] = "type.breakerd.io/breakerd.client.Outcome";

}  // namespace

Outcome Outcome::Of(OutcomeKind kind) {
  Outcome o;
  o.kind = kind;
  return o;
}

Outcome Outcome::FromHttpStatus(int status,
                                absl::string_view retry_after_header) {
  Outcome o;
  o.http_status = status > 0 ? static_cast<uint32_t>(status) : 0;
  int64_t seconds = 0;
  if (absl::SimpleAtoi(absl::StripAsciiWhitespace(retry_after_header),
                       &seconds) &&
      seconds > 0) {
    o.retry_after = absl::Seconds(seconds);
  }
  return o;
}

Outcome Outcome::FromGrpcCode(grpc::StatusCode code) {
  Outcome o;
  o.grpc_code = static_cast<int32_t>(code);
  return o;
}

Outcome Outcome::FromStatus(const absl::Status& status) {
  // The common case, on every guarded call: OK carries no payload.
  if (status.ok()) return FromGrpcCode(grpc::StatusCode::OK);
  if (auto payload = status.GetPayload(kOutcomePayload); payload.has_value()) {
    v1::ReportRequest attached;
    if (attached.ParseFromString(std::string(*payload))) {
      return internal::OutcomeFrom(attached);
    }
  }
  return FromGrpcCode(static_cast<grpc::StatusCode>(status.code()));
}

absl::Status Classified(absl::Status status, const Outcome& outcome) {
  if (status.ok()) return status;
  v1::ReportRequest attached;
  internal::SetOutcome(outcome, &attached);
  status.SetPayload(kOutcomePayload, absl::Cord(attached.SerializeAsString()));
  return status;
}

bool Outcome::Retryable() const {
  switch (kind) {
    case OutcomeKind::kSuccess:
    case OutcomeKind::kBadRequest:
    case OutcomeKind::kAuthError:
    case OutcomeKind::kCancelled:
    case OutcomeKind::kSoftFailure:
      return false;
    case OutcomeKind::kTimeout:
    case OutcomeKind::kConnectionError:
    case OutcomeKind::kServerError:
    case OutcomeKind::kRateLimited:
      return true;
    case OutcomeKind::kUnspecified:
      break;
  }
  if (http_status != 0) {
    // 408 and 429 are worth another try; other 4xx and success are not.
    if (http_status == 408 || http_status == 429) return true;
    return http_status >= 500;
  }
  if (grpc_code.has_value()) {
    switch (static_cast<grpc::StatusCode>(*grpc_code)) {
      case grpc::StatusCode::DEADLINE_EXCEEDED:
      case grpc::StatusCode::UNAVAILABLE:
      case grpc::StatusCode::INTERNAL:
      case grpc::StatusCode::UNKNOWN:
      case grpc::StatusCode::DATA_LOSS:
      case grpc::StatusCode::RESOURCE_EXHAUSTED:
        return true;
      default:
        return false;
    }
  }
  return false;
}

}  // namespace breakerd::client

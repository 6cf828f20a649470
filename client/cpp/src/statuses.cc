#include "breakerd/internal/statuses.h"

#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "breakerd/internal/convert.h"
#include "breakerd/internal/proto_duration.h"
#include "breakerd/v1/breaker.pb.h"

namespace breakerd::client {
namespace {

// Status payloads carrying a refusal (see IsBreakerOpen): an
// AcquireFirstResponse with its dependency, state, reason and retry_after,
// and the source's number.
constexpr char kRefusalPayload[] = "type.breakerd.io/breakerd.client.Refusal";
constexpr char kSourcePayload[] = "type.breakerd.io/breakerd.client.Source";
// The message of the error every call returns once the client is closed.
constexpr char kClosedMessage[] = "breakerd client is closed";

}  // namespace

namespace internal {

absl::Status ClosedError() {
  return absl::FailedPreconditionError(kClosedMessage);
}

absl::Status RefusedStatus(const Decision& d, absl::string_view context) {
  std::string message = absl::StrCat(
      "breaker open: ", d.dependency.empty() ? "(none granted)" : d.dependency,
      " (", RejectReasonName(d.reason), ", retry after ",
      absl::FormatDuration(d.retry_after), ", ", DecisionSourceName(d.source),
      ")");
  if (!context.empty()) absl::StrAppend(&message, "; ", context);
  absl::Status status = absl::UnavailableError(message);
  v1::AcquireFirstResponse refusal;
  refusal.set_dependency(d.dependency);
  refusal.set_state(ToProto(d.state));
  refusal.set_reason(ToProto(d.reason));
  ToProto(d.retry_after, refusal.mutable_retry_after());
  status.SetPayload(kRefusalPayload, absl::Cord(refusal.SerializeAsString()));
  status.SetPayload(kSourcePayload,
                    absl::Cord(absl::StrCat(static_cast<int>(d.source))));
  return status;
}

absl::Status FromGrpc(const grpc::Status& s) {
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()),
                      s.error_message());
}

std::string Describe(const absl::Status& s) {
  return absl::StrCat(absl::StatusCodeToString(s.code()), ": ", s.message());
}

std::string Describe(const grpc::Status& s) { return Describe(FromGrpc(s)); }

}  // namespace internal

absl::string_view DecisionSourceName(DecisionSource source) {
  switch (source) {
    case DecisionSource::kSidecar:
      return "sidecar";
    case DecisionSource::kLocal:
      return "local";
    case DecisionSource::kFailOpen:
      return "fail_open";
    case DecisionSource::kFailClosed:
      return "fail_closed";
  }
  return "unknown";
}

bool IsBreakerOpen(const absl::Status& status) {
  return status.GetPayload(kRefusalPayload).has_value();
}

std::optional<Decision> RefusalOf(const absl::Status& status) {
  auto payload = status.GetPayload(kRefusalPayload);
  if (!payload.has_value()) return std::nullopt;
  v1::AcquireFirstResponse refusal;
  if (!refusal.ParseFromString(std::string(*payload))) return std::nullopt;
  Decision d = internal::DecisionFrom(refusal);
  int source = 0;
  if (auto s = status.GetPayload(kSourcePayload);
      s.has_value() && absl::SimpleAtoi(std::string(*s), &source)) {
    d.source = static_cast<DecisionSource>(source);
  }
  return d;
}

}  // namespace breakerd::client

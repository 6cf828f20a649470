#include "server/service/convert.h"

#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "server/engine/outcome.h"

namespace breakerd {
namespace {

// The range of google.protobuf.Duration (about 10000 years).
constexpr int64_t kMaxProtoSeconds = int64_t{315576000000};
constexpr int32_t kMaxNanos = 999999999;

constexpr absl::string_view kInitialReason = "initial";

// BreakerStatus.mode and StateChange.mode.
template <typename Message>
void SetMode(bool shadow, Message* out) {
  const absl::string_view mode = ModeName(shadow);
  out->set_mode(mode.data(), mode.size());
}

// Sets msg's retry_after only when positive: an unset Duration reads as zero
// on the wire, and leaving it unset spares an allocation on the Acquire path.
template <typename Message>
void SetRetryAfter(absl::Duration d, Message* msg) {
  if (d > absl::ZeroDuration()) ToProtoDuration(d, msg->mutable_retry_after());
}

// The engine's wire enums carry the proto's numbers, so the service casts
// between them: here (ToProto), in breaker_service.cc (Outcome into
// RawOutcome::explicit_class) and in trace_writer.cc (Outcome to its name).
// These fail the build when the two drift apart.
template <typename A, typename B>
constexpr bool SameNumber(A a, B b) {
  return static_cast<int>(a) == static_cast<int>(b);
}
static_assert(SameNumber(State::kClosed, v1::STATE_CLOSED) &&
              SameNumber(State::kOpen, v1::STATE_OPEN) &&
              SameNumber(State::kHalfOpen, v1::STATE_HALF_OPEN) &&
              SameNumber(State::kForcedOpen, v1::STATE_FORCED_OPEN) &&
              SameNumber(State::kForcedClosed, v1::STATE_FORCED_CLOSED) &&
              v1::State_MAX == kStateCount - 1);
static_assert(SameNumber(RejectReason::kNone, v1::REJECT_REASON_UNSPECIFIED) &&
              SameNumber(RejectReason::kOpen, v1::REJECT_REASON_OPEN) &&
              SameNumber(RejectReason::kProbeInFlight,
                         v1::REJECT_REASON_PROBE_IN_FLIGHT) &&
              SameNumber(RejectReason::kRetryBudget,
                         v1::REJECT_REASON_RETRY_BUDGET) &&
              SameNumber(RejectReason::kForcedOpen,
                         v1::REJECT_REASON_FORCED_OPEN) &&
              SameNumber(RejectReason::kRamp, v1::REJECT_REASON_RAMP) &&
              v1::RejectReason_MAX == v1::REJECT_REASON_RAMP);
static_assert(SameNumber(Effect::kCountedSuccess, v1::EFFECT_COUNTED_SUCCESS) &&
              SameNumber(Effect::kCountedFailure, v1::EFFECT_COUNTED_FAILURE) &&
              SameNumber(Effect::kNeutral, v1::EFFECT_NEUTRAL) &&
              SameNumber(Effect::kLate, v1::EFFECT_LATE) &&
              SameNumber(Effect::kDuplicate, v1::EFFECT_DUPLICATE) &&
              v1::Effect_MAX == kEffectCount - 1);
static_assert(
    SameNumber(OutcomeClass::kSuccess, v1::OUTCOME_SUCCESS) &&
    SameNumber(OutcomeClass::kTimeout, v1::OUTCOME_TIMEOUT) &&
    SameNumber(OutcomeClass::kConnectionError, v1::OUTCOME_CONNECTION_ERROR) &&
    SameNumber(OutcomeClass::kServerError, v1::OUTCOME_SERVER_ERROR) &&
    SameNumber(OutcomeClass::kRateLimited, v1::OUTCOME_RATE_LIMITED) &&
    SameNumber(OutcomeClass::kBadRequest, v1::OUTCOME_BAD_REQUEST) &&
    SameNumber(OutcomeClass::kAuthError, v1::OUTCOME_AUTH_ERROR) &&
    SameNumber(OutcomeClass::kCancelled, v1::OUTCOME_CANCELLED) &&
    SameNumber(OutcomeClass::kSoftFailure, v1::OUTCOME_SOFT_FAILURE) &&
    v1::Outcome_MAX == kOutcomeClassCount - 1);
// ToGrpcStatus casts absl's canonical codes to gRPC's, and GrpcCodeName
// (server/engine/outcome.h) names gRPC codes 0 .. kGrpcCodeCount - 1.
static_assert(
    SameNumber(absl::StatusCode::kOk, grpc::StatusCode::OK) &&
    SameNumber(absl::StatusCode::kCancelled, grpc::StatusCode::CANCELLED) &&
    SameNumber(absl::StatusCode::kUnknown, grpc::StatusCode::UNKNOWN) &&
    SameNumber(absl::StatusCode::kInvalidArgument,
               grpc::StatusCode::INVALID_ARGUMENT) &&
    SameNumber(absl::StatusCode::kDeadlineExceeded,
               grpc::StatusCode::DEADLINE_EXCEEDED) &&
    SameNumber(absl::StatusCode::kNotFound, grpc::StatusCode::NOT_FOUND) &&
    SameNumber(absl::StatusCode::kAlreadyExists,
               grpc::StatusCode::ALREADY_EXISTS) &&
    SameNumber(absl::StatusCode::kPermissionDenied,
               grpc::StatusCode::PERMISSION_DENIED) &&
    SameNumber(absl::StatusCode::kResourceExhausted,
               grpc::StatusCode::RESOURCE_EXHAUSTED) &&
    SameNumber(absl::StatusCode::kFailedPrecondition,
               grpc::StatusCode::FAILED_PRECONDITION) &&
    SameNumber(absl::StatusCode::kAborted, grpc::StatusCode::ABORTED) &&
    SameNumber(absl::StatusCode::kOutOfRange, grpc::StatusCode::OUT_OF_RANGE) &&
    SameNumber(absl::StatusCode::kUnimplemented,
               grpc::StatusCode::UNIMPLEMENTED) &&
    SameNumber(absl::StatusCode::kInternal, grpc::StatusCode::INTERNAL) &&
    SameNumber(absl::StatusCode::kUnavailable, grpc::StatusCode::UNAVAILABLE) &&
    SameNumber(absl::StatusCode::kDataLoss, grpc::StatusCode::DATA_LOSS) &&
    SameNumber(absl::StatusCode::kUnauthenticated,
               grpc::StatusCode::UNAUTHENTICATED) &&
    kGrpcCodeCount == grpc::StatusCode::UNAUTHENTICATED + 1);

}  // namespace

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  const int code = static_cast<int>(status.code());
  const grpc::StatusCode grpc_code =
      code >= 0 && code <= static_cast<int>(grpc::StatusCode::UNAUTHENTICATED)
          ? static_cast<grpc::StatusCode>(code)
          : grpc::StatusCode::UNKNOWN;
  return grpc::Status(grpc_code, std::string(status.message()));
}

v1::State ToProto(State state) { return static_cast<v1::State>(state); }

v1::RejectReason ToProto(RejectReason reason) {
  return static_cast<v1::RejectReason>(reason);
}

v1::Effect ToProto(Effect effect) { return static_cast<v1::Effect>(effect); }

void ToProtoDuration(absl::Duration d, google::protobuf::Duration* out) {
  if (d <= absl::ZeroDuration()) {
    out->set_seconds(0);
    out->set_nanos(0);
    return;
  }
  if (d >= absl::Seconds(kMaxProtoSeconds)) {
    out->set_seconds(kMaxProtoSeconds);
    out->set_nanos(kMaxNanos);
    return;
  }
  const int64_t seconds = absl::IDivDuration(d, absl::Seconds(1), &d);
  out->set_seconds(seconds);
  out->set_nanos(static_cast<int32_t>(absl::ToInt64Nanoseconds(d)));
}

absl::StatusOr<absl::Duration> FromProtoDuration(
    const google::protobuf::Duration& d, absl::string_view field,
    absl::Duration max) {
  const int64_t seconds = d.seconds();
  const int32_t nanos = d.nanos();
  if (nanos < -kMaxNanos || nanos > kMaxNanos) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, ": nanos must be in 0..999999999 (got ", nanos, ")"));
  }
  if ((seconds > 0 && nanos < 0) || (seconds < 0 && nanos > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": seconds and nanos must have the same sign (got ",
                     seconds, "s and ", nanos, "ns)"));
  }
  if (seconds < 0 || nanos < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": must not be negative"));
  }
  // Compare in seconds first so that huge values cannot overflow.
  const absl::Duration value =
      seconds > absl::ToInt64Seconds(max)
          ? absl::InfiniteDuration()
          : absl::Seconds(seconds) + absl::Nanoseconds(nanos);
  if (value > max) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": must be at most ",
                                                   absl::FormatDuration(max),
                                                   " (got ", seconds, "s)"));
  }
  return value;
}

namespace {

// AcquireResponse and AcquireFirstResponse carry the same decision fields.
template <typename Response>
void FillDecision(const AcquireResult& result, Response* out) {
  out->set_allowed(result.allowed);
  out->set_permit(result.permit);
  out->set_probe(result.probe);
  out->set_state(ToProto(result.state));
  out->set_reason(ToProto(result.reason));
  SetRetryAfter(result.retry_after, out);
}

}  // namespace

void FillAcquireResponse(const AcquireResult& result,
                         v1::AcquireResponse* out) {
  FillDecision(result, out);
}

void FillAcquireFirstResponse(const AcquireFirstResult& result,
                              absl::Span<const std::string> dependencies,
                              v1::AcquireFirstResponse* out) {
  if (result.granted >= 0) out->set_dependency(dependencies[result.granted]);
  FillDecision(result.result, out);
}

void FillBreakerStatus(const BreakerSnapshot& snapshot,
                       v1::BreakerStatus* out) {
  out->set_dependency(snapshot.dependency);
  out->set_state(ToProto(snapshot.state));
  out->set_generation(snapshot.generation);
  SetRetryAfter(snapshot.retry_after, out);
  out->set_window_calls(snapshot.window.calls);
  out->set_window_failures(snapshot.window.failures);
  out->set_window_slow_calls(snapshot.window.slow);
  out->set_failure_rate(snapshot.failure_rate);
  out->set_consecutive_failures(snapshot.consecutive_failures);
  out->set_escalation_level(snapshot.escalation_level);
  out->set_policy(snapshot.policy);
  out->set_fleet_window_calls(snapshot.fleet_window_calls);
  out->set_fleet_window_failures(snapshot.fleet_window_failures);
  SetMode(snapshot.shadow, out);
  out->set_probe_in_flight(snapshot.probe_in_flight);
  out->set_admit_share(snapshot.admit_share);
  out->set_inflight(snapshot.inflight);
}

void FillStateChange(const Transition& t, v1::StateChange* out) {
  out->set_dependency(t.dependency);
  out->set_state(ToProto(t.to));
  out->set_previous(ToProto(t.from));
  const absl::string_view reason = TransitionReasonName(t.reason);
  out->set_reason(reason.data(), reason.size());
  out->set_generation(t.generation);
  if (t.to == State::kOpen) SetRetryAfter(t.retry_after, out);
  SetMode(t.shadow, out);
  out->set_local_decisions(t.local_decisions);
}

void FillInitialStateChange(const BreakerSnapshot& snapshot,
                            v1::StateChange* out) {
  out->set_dependency(snapshot.dependency);
  out->set_state(ToProto(snapshot.state));
  out->set_previous(v1::STATE_UNSPECIFIED);
  out->set_reason(kInitialReason.data(), kInitialReason.size());
  out->set_generation(snapshot.generation);
  if (snapshot.state == State::kOpen) SetRetryAfter(snapshot.retry_after, out);
  SetMode(snapshot.shadow, out);
  out->set_local_decisions(snapshot.local_decisions);
}

void FillInitialStateChangeForAbsent(absl::string_view dependency, bool shadow,
                                     uint64_t generation,
                                     v1::StateChange* out) {
  out->set_dependency(dependency.data(), dependency.size());
  out->set_state(v1::STATE_CLOSED);
  out->set_previous(v1::STATE_UNSPECIFIED);
  out->set_reason(kInitialReason.data(), kInitialReason.size());
  out->set_generation(generation);
  SetMode(shadow, out);
}

}  // namespace breakerd

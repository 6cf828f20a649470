// Internal to breakerd::client, not part of its API (that is
// breakerd/client.h).
//
// The one place the client's own types (breakerd/client.h) meet the
// generated breakerd.v1 ones. Each enum of the API is paired, value for
// value, with its proto enum in a table below, and the build fails
// (static_assert) when a proto enum gains, loses or renumbers a value its
// table does not pair: breaker.proto and the client's enums cannot drift
// apart. A value breakerd sends that the table does not pair (from a newer
// breakerd) becomes the first pair's, the zero value (kUnspecified, kNone).
//
// Thread-safety: pure functions and constants.
#ifndef BREAKERD_CLIENT_CPP_INCLUDE_BREAKERD_INTERNAL_CONVERT_H_
#define BREAKERD_CLIENT_CPP_INCLUDE_BREAKERD_INTERNAL_CONVERT_H_

#include <cstddef>
#include <string>

#include "breakerd/client.h"
#include "breakerd/v1/breaker.pb.h"

namespace breakerd::client::internal {

// One value of an API enum and its breakerd.v1 counterpart.
template <typename Client, typename Proto>
struct EnumPair {
  Client client;
  Proto proto;
};

inline constexpr EnumPair<State, v1::State> kStatePairs[] = {
    {State::kUnspecified, v1::STATE_UNSPECIFIED},
    {State::kClosed, v1::STATE_CLOSED},
    {State::kOpen, v1::STATE_OPEN},
    {State::kHalfOpen, v1::STATE_HALF_OPEN},
    {State::kForcedOpen, v1::STATE_FORCED_OPEN},
    {State::kForcedClosed, v1::STATE_FORCED_CLOSED},
};

inline constexpr EnumPair<RejectReason, v1::RejectReason> kRejectReasonPairs[] =
    {
        {RejectReason::kNone, v1::REJECT_REASON_UNSPECIFIED},
        {RejectReason::kOpen, v1::REJECT_REASON_OPEN},
        {RejectReason::kProbeInFlight, v1::REJECT_REASON_PROBE_IN_FLIGHT},
        {RejectReason::kRetryBudget, v1::REJECT_REASON_RETRY_BUDGET},
        {RejectReason::kForcedOpen, v1::REJECT_REASON_FORCED_OPEN},
        {RejectReason::kRamp, v1::REJECT_REASON_RAMP},
};

inline constexpr EnumPair<OutcomeKind, v1::Outcome> kOutcomeKindPairs[] = {
    {OutcomeKind::kUnspecified, v1::OUTCOME_UNSPECIFIED},
    {OutcomeKind::kSuccess, v1::OUTCOME_SUCCESS},
    {OutcomeKind::kTimeout, v1::OUTCOME_TIMEOUT},
    {OutcomeKind::kConnectionError, v1::OUTCOME_CONNECTION_ERROR},
    {OutcomeKind::kServerError, v1::OUTCOME_SERVER_ERROR},
    {OutcomeKind::kRateLimited, v1::OUTCOME_RATE_LIMITED},
    {OutcomeKind::kBadRequest, v1::OUTCOME_BAD_REQUEST},
    {OutcomeKind::kAuthError, v1::OUTCOME_AUTH_ERROR},
    {OutcomeKind::kCancelled, v1::OUTCOME_CANCELLED},
    {OutcomeKind::kSoftFailure, v1::OUTCOME_SOFT_FAILURE},
};

inline constexpr EnumPair<ReportEffect, v1::Effect> kReportEffectPairs[] = {
    {ReportEffect::kUnspecified, v1::EFFECT_UNSPECIFIED},
    {ReportEffect::kCountedSuccess, v1::EFFECT_COUNTED_SUCCESS},
    {ReportEffect::kCountedFailure, v1::EFFECT_COUNTED_FAILURE},
    {ReportEffect::kNeutral, v1::EFFECT_NEUTRAL},
    {ReportEffect::kLate, v1::EFFECT_LATE},
    {ReportEffect::kDuplicate, v1::EFFECT_DUPLICATE},
};

// Whether `pairs` starts with the proto's zero value (the fallback) and
// pairs each of its `proto_count` values (0 .. proto_count - 1: the proto
// enum's *_ARRAYSIZE) exactly once, each with a different client value.
template <typename Client, typename Proto, size_t N>
constexpr bool PairsEveryValueOnce(const EnumPair<Client, Proto> (&pairs)[N],
                                   int proto_count) {
  if (static_cast<int>(N) != proto_count || pairs[0].proto != 0) return false;
  for (size_t i = 0; i < N; ++i) {
    if (pairs[i].proto < 0 || pairs[i].proto >= proto_count) return false;
    for (size_t j = i + 1; j < N; ++j) {
      if (pairs[i].proto == pairs[j].proto ||
          pairs[i].client == pairs[j].client) {
        return false;
      }
    }
  }
  return true;
}

static_assert(PairsEveryValueOnce(kStatePairs, v1::State_ARRAYSIZE),
              "breakerd.v1.State changed: pair each of its values with one "
              "of breakerd::client::State's");
static_assert(PairsEveryValueOnce(kRejectReasonPairs,
                                  v1::RejectReason_ARRAYSIZE),
              "breakerd.v1.RejectReason changed: pair each of its values "
              "with one of breakerd::client::RejectReason's");
static_assert(PairsEveryValueOnce(kOutcomeKindPairs, v1::Outcome_ARRAYSIZE),
              "breakerd.v1.Outcome changed: pair each of its values with one "
              "of breakerd::client::OutcomeKind's");
static_assert(PairsEveryValueOnce(kReportEffectPairs, v1::Effect_ARRAYSIZE),
              "breakerd.v1.Effect changed: pair each of its values with one "
              "of breakerd::client::ReportEffect's");

// The client value paired with `proto`; the zero value if none is.
template <typename Client, typename Proto, size_t N>
constexpr Client ClientValue(const EnumPair<Client, Proto> (&pairs)[N],
                             Proto proto) {
  for (const EnumPair<Client, Proto>& pair : pairs) {
    if (pair.proto == proto) return pair.client;
  }
  return pairs[0].client;
}

// The proto value paired with `client`.
template <typename Client, typename Proto, size_t N>
constexpr Proto ProtoValue(const EnumPair<Client, Proto> (&pairs)[N],
                           Client client) {
  for (const EnumPair<Client, Proto>& pair : pairs) {
    if (pair.client == client) return pair.proto;
  }
  return pairs[0].proto;
}

constexpr State FromProto(v1::State state) {
  return ClientValue(kStatePairs, state);
}
constexpr v1::State ToProto(State state) {
  return ProtoValue(kStatePairs, state);
}
constexpr RejectReason FromProto(v1::RejectReason reason) {
  return ClientValue(kRejectReasonPairs, reason);
}
constexpr v1::RejectReason ToProto(RejectReason reason) {
  return ProtoValue(kRejectReasonPairs, reason);
}
constexpr OutcomeKind FromProto(v1::Outcome kind) {
  return ClientValue(kOutcomeKindPairs, kind);
}
constexpr v1::Outcome ToProto(OutcomeKind kind) {
  return ProtoValue(kOutcomeKindPairs, kind);
}
constexpr ReportEffect FromProto(v1::Effect effect) {
  return ClientValue(kReportEffectPairs, effect);
}
constexpr v1::Effect ToProto(ReportEffect effect) {
  return ProtoValue(kReportEffectPairs, effect);
}

// breakerd's answer to an Acquire for `dependency` (source kSidecar).
Decision DecisionFrom(const v1::AcquireResponse& response,
                      std::string dependency);
// breakerd's answer to an AcquireFirst (source kSidecar; the dependency
// granted, empty if none was).
Decision DecisionFrom(const v1::AcquireFirstResponse& response);
// For `d`, a grant of the AcquireFirst `request` of a named chain (from
// breakerd, or fail-open): sets its chain and tier (request.first_tier()
// plus d->dependency's index in request.dependencies()). Else nothing.
void SetChain(const v1::AcquireFirstRequest& request, Decision* d);

// Sets the outcome fields of a Report (outcome, http_status, grpc_code, and
// retry_after if positive); the others are left as they are.
void SetOutcome(const Outcome& outcome, v1::ReportRequest* request);
// The outcome fields of `request`.
Outcome OutcomeFrom(const v1::ReportRequest& request);

ReportResult ResultFrom(const v1::ReportResponse& response);

}  // namespace breakerd::client::internal

#endif  // BREAKERD_CLIENT_CPP_INCLUDE_BREAKERD_INTERNAL_CONVERT_H_

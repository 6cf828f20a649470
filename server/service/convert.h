// Conversions between the engine's value types and the breakerd.v1 wire
// types, and the one mapping from absl::Status to grpc::Status. Handlers call
// these and nothing else to translate, so the wire meaning of every engine
// value is decided here.
//
// Thread-safety: pure functions on values.
#ifndef BREAKERD_SERVER_SERVICE_CONVERT_H_
#define BREAKERD_SERVER_SERVICE_CONVERT_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "breakerd/v1/breaker.grpc.pb.h"
#include "google/protobuf/duration.pb.h"
#include "grpcpp/support/status.h"
#include "server/engine/registry.h"
#include "server/engine/types.h"

namespace breakerd {

// The largest latency or retry_after a Report may carry.
inline constexpr absl::Duration kMaxReportDuration = absl::Hours(24);

// Maps an engine status to the wire: same code, message unchanged. Codes
// outside gRPC's 0..16 become UNKNOWN.
grpc::Status ToGrpcStatus(const absl::Status& status);

// Enum casts; the engine's values are defined to match the proto's.
// RejectReason::kNone maps to REJECT_REASON_UNSPECIFIED.
v1::State ToProto(State state);
v1::RejectReason ToProto(RejectReason reason);
v1::Effect ToProto(Effect effect);

// Writes `d` to `out`, clamped to [0, the largest proto Duration]: every
// duration the server sends is a wait or a length of time, never negative.
void ToProtoDuration(absl::Duration d, google::protobuf::Duration* out);

// Reads a client-supplied duration. Returns INVALID_ARGUMENT naming `field`
// when nanos is outside -999999999..999999999 or its sign differs from
// seconds' (malformed), when the value is negative, or when it exceeds
// `max`.
absl::StatusOr<absl::Duration> FromProtoDuration(
    const google::protobuf::Duration& d, absl::string_view field,
    absl::Duration max);

// In the Fill* functions below, a zero retry_after is left unset (it reads
// as zero on the wire).

// Fills every field of `out` from `result`.
void FillAcquireResponse(const AcquireResult& result, v1::AcquireResponse* out);

// Fills every field of `out` from `result`; `dependencies` is the request's
// list (out->dependency = the name granted, empty if none).
// REQUIRES: result.granted < dependencies.size().
void FillAcquireFirstResponse(const AcquireFirstResult& result,
                              absl::Span<const std::string> dependencies,
                              v1::AcquireFirstResponse* out);

// Fills every field of `out` from `snapshot`; mode is "enforce" or "shadow".
void FillBreakerStatus(const BreakerSnapshot& snapshot, v1::BreakerStatus* out);

// A live transition: previous = t.from, reason = its stable name,
// retry_after = the cooldown that starts now when t.to is OPEN (else zero),
// mode "enforce" or "shadow".
void FillStateChange(const Transition& t, v1::StateChange* out);

// The first message of a Watch for one breaker: reason "initial", previous
// STATE_UNSPECIFIED, retry_after = time left in the cooldown when open.
void FillInitialStateChange(const BreakerSnapshot& snapshot,
                            v1::StateChange* out);

// The first message of a Watch for a name with no breaker yet: closed, reason
// "initial", the mode of the policy it would get and `generation`, the one
// its breaker would start at (Registry::generation_floor()).
void FillInitialStateChangeForAbsent(absl::string_view dependency, bool shadow,
                                     uint64_t generation, v1::StateChange* out);

// True for a Watch message that is a notice, not a transition (created,
// evicted, ramp_done, reload): its state is its previous state.
inline bool IsWatchNotice(const v1::StateChange& change) {
  return change.previous() == change.state();
}

}  // namespace breakerd

#endif  // BREAKERD_SERVER_SERVICE_CONVERT_H_

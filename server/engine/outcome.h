// Outcome classification: one table, so every client language gets the same
// rules. The application reports an explicit class, or the raw HTTP status or
// gRPC code of the guarded call, and breakerd decides what it means for the
// breaker.
//
// Thread-safety: pure functions.
#ifndef BREAKERD_SERVER_ENGINE_OUTCOME_H_
#define BREAKERD_SERVER_ENGINE_OUTCOME_H_

#include <cstdint>
#include <optional>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "server/engine/policy.h"

namespace breakerd {

// Values match breakerd.v1.Outcome (1..9) so the service can cast.
enum class OutcomeClass : uint8_t {
  kSuccess = 1,
  kTimeout = 2,
  kConnectionError = 3,
  kServerError = 4,
  kRateLimited = 5,
  kBadRequest = 6,
  kAuthError = 7,
  kCancelled = 8,
  kSoftFailure = 9,
};
inline constexpr int kOutcomeClassCount = 10;  // index 0 unused

// What an outcome does to a breaker.
enum class Verdict : uint8_t { kSuccess, kFailure, kNeutral };

// The raw facts of a report, before classification.
struct RawOutcome {
  // 0 = unspecified; otherwise an OutcomeClass value.
  int explicit_class = 0;
  // 0 = none; otherwise must be 100..599.
  uint32_t http_status = 0;
  // gRPC status code 0..16, if the guarded call was a gRPC call.
  std::optional<int32_t> grpc_code;
};

// REQUIRES: nothing. Returns the class, or INVALID_ARGUMENT naming the field
// and the rule (out-of-range value, or no field set at all). An explicit
// class wins over http_status, which wins over grpc_code.
absl::StatusOr<OutcomeClass> Classify(const RawOutcome& raw);

OutcomeClass ClassifyHttpStatus(uint32_t status);  // REQUIRES: 100..599
OutcomeClass ClassifyGrpcCode(int32_t code);       // REQUIRES: 0..16

// What the class does to the breaker under `rate_limited` handling.
Verdict VerdictFor(OutcomeClass c, RateLimitedHandling rate_limited);

// Stable lower_snake_case name, used as a metric label.
absl::string_view OutcomeClassName(OutcomeClass c);

// The class whose OutcomeClassName is `name`, or nullopt.
std::optional<OutcomeClass> OutcomeClassFromName(absl::string_view name);

// gRPC status codes 0 (OK) .. 16 (UNAUTHENTICATED).
inline constexpr int kGrpcCodeCount = 17;

// The name of gRPC status code `code` as in the gRPC spec ("OK",
// "INVALID_ARGUMENT", ...); "UNKNOWN" outside 0 .. kGrpcCodeCount - 1.
absl::string_view GrpcCodeName(int code);

}  // namespace breakerd

#endif  // BREAKERD_SERVER_ENGINE_OUTCOME_H_

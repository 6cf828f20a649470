// breakerctl's output: breakerd.v1 messages as human-readable text (a table,
// key: value lines, one line per transition) or as JSON with the proto field
// names. Pure functions of their arguments; thread-safe.
#ifndef BREAKERD_TOOLS_BREAKERCTL_FORMAT_H_
#define BREAKERD_TOOLS_BREAKERCTL_FORMAT_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "breakerd/v1/breaker.pb.h"
#include "google/protobuf/duration.pb.h"
#include "google/protobuf/message.h"
#include "grpcpp/support/status.h"

namespace breakerd::ctl {

// "closed", "open", "half_open", "forced_open", "forced_closed";
// "unspecified" for the zero value and unknown numbers.
std::string StateName(breakerd::v1::State state);

// A proto Duration as absl prints it ("19.5s", "0"), rounded to milliseconds.
std::string FormatProtoDuration(const google::protobuf::Duration& duration);

// The ListStates answer as an aligned table with a header row, sorted by
// dependency name. Columns: DEPENDENCY STATE GEN RETRY_AFTER CALLS FAILURES
// RATE CONSEC ESCALATION POLICY MODE. Ends with a newline.
std::string FormatTable(const breakerd::v1::ListStatesResponse& response);

// One breaker as "key: value" lines, one per field, in proto field order.
std::string FormatStatus(const breakerd::v1::BreakerStatus& status);

// One transition as one line (no newline):
//   <received_at RFC 3339 UTC> <dependency> <previous> -> <state>
//   reason=<reason> gen=<generation> retry_after=<duration> mode=<mode>
std::string FormatChange(const breakerd::v1::StateChange& change,
                         absl::Time received_at);

// `message` as one line of JSON with the proto field names (snake_case),
// every field printed (an unset message field such as retry_after as its
// zero value, "0s"), enums by name. Returns INTERNAL if protobuf refuses.
absl::StatusOr<std::string> ToJson(const google::protobuf::Message& message);

// One Watch event as one line of JSON: "received_at" (RFC 3339 UTC, as in
// FormatChange) first, then the fields of ToJson.
absl::StatusOr<std::string> ChangeToJson(
    const breakerd::v1::StateChange& change, absl::Time received_at);

// The name of a gRPC status code, e.g. "UNAUTHENTICATED"; "CODE_<n>" for a
// number gRPC does not define.
std::string StatusCodeName(grpc::StatusCode code);

}  // namespace breakerd::ctl

#endif  // BREAKERD_TOOLS_BREAKERCTL_FORMAT_H_

// Internal to breakerd::client, not part of its API (that is
// breakerd/client.h).
//
// The statuses the client makes: the error once it is closed, the
// breaker-open status of a refused guard (read back by IsBreakerOpen and
// RefusalOf), and gRPC's statuses as absl's (the two share their codes).
//
// Thread-safety: pure functions.
#ifndef BREAKERD_CLIENT_CPP_INCLUDE_BREAKERD_INTERNAL_STATUSES_H_
#define BREAKERD_CLIENT_CPP_INCLUDE_BREAKERD_INTERNAL_STATUSES_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "breakerd/client.h"
#include "grpcpp/support/status.h"

namespace breakerd::client::internal {

// FAILED_PRECONDITION "breakerd client is closed": every call after Close.
absl::Status ClosedError();

// The status Do, Retry and First return for the refusal `d`: UNAVAILABLE,
// "breaker open: <dependency> (<reason>, retry after <d>, <source>)", then
// "; <context>" if given, with `d` attached for RefusalOf.
absl::Status RefusedStatus(const Decision& d, absl::string_view context = "");

absl::Status FromGrpc(const grpc::Status& s);

// "DEADLINE_EXCEEDED: too slow", for log lines.
std::string Describe(const absl::Status& s);
std::string Describe(const grpc::Status& s);

}  // namespace breakerd::client::internal

#endif  // BREAKERD_CLIENT_CPP_INCLUDE_BREAKERD_INTERNAL_STATUSES_H_

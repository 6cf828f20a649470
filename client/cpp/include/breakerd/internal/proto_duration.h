// Internal to breakerd::client, not part of its API (that is
// breakerd/client.h).
//
// google.protobuf.Duration <-> absl::Duration, written once for the client.
//
// Thread-safety: pure functions.
#ifndef BREAKERD_CLIENT_CPP_INCLUDE_BREAKERD_INTERNAL_PROTO_DURATION_H_
#define BREAKERD_CLIENT_CPP_INCLUDE_BREAKERD_INTERNAL_PROTO_DURATION_H_

#include <cstdint>

#include "absl/time/time.h"
#include "google/protobuf/duration.pb.h"

namespace breakerd::client::internal {

inline absl::Duration FromProto(const google::protobuf::Duration& d) {
  return absl::Seconds(d.seconds()) + absl::Nanoseconds(d.nanos());
}

// REQUIRES: d >= 0 (latencies and cooldowns).
inline void ToProto(absl::Duration d, google::protobuf::Duration* out) {
  const int64_t ns = absl::ToInt64Nanoseconds(d);
  out->set_seconds(ns / 1000000000);
  out->set_nanos(static_cast<int32_t>(ns % 1000000000));
}

}  // namespace breakerd::client::internal

#endif  // BREAKERD_CLIENT_CPP_INCLUDE_BREAKERD_INTERNAL_PROTO_DURATION_H_

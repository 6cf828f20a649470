// Watch events that are not state changes (DESIGN.md "Local decisions"):
// "created", "evicted" and "ramp_done" tell a client what it decides on.
// Tests that follow state changes read past them.
#ifndef BREAKERD_TESTS_E2E_WATCH_NOTICES_H_
#define BREAKERD_TESTS_E2E_WATCH_NOTICES_H_

#include <string>

#include "breakerd/v1/breaker.pb.h"

namespace breakerd {

inline bool IsNotice(const v1::StateChange& change) {
  const std::string& r = change.reason();
  return r == "created" || r == "evicted" || r == "ramp_done";
}

// The next event on `reader` that is not a notice (a state change, a
// reload, or an initial state); false when the stream ends.
template <typename Reader>
bool ReadChange(Reader& reader, v1::StateChange* change) {
  while (reader.Read(change)) {
    if (!IsNotice(*change)) return true;
  }
  return false;
}

}  // namespace breakerd

#endif  // BREAKERD_TESTS_E2E_WATCH_NOTICES_H_

// `breakerctl simulate`: replays a recorded trace of calls through the real
// engine (breakerd::Registry on a FakeClock) under a policy file and
// reports, per dependency, when its breaker would have opened, probed and
// closed, how many calls it would have refused, and how its recovery ramps
// went. The trace format is in tools/breakerctl/README.md.
//
// Each record is one call: an Acquire at its start (`t` - `latency_ms`) and
// a Report at its end (`t`, when breakerd's --trace-file wrote it). A record
// with no outcome never reports: its permit stays out, so the policy's
// inflight.hang_after counts it as hung as breakerd would.
//
// Thread-safety: RunSimulate is self-contained; calls may run concurrently.
#ifndef BREAKERD_TOOLS_BREAKERCTL_SIMULATE_H_
#define BREAKERD_TOOLS_BREAKERCTL_SIMULATE_H_

#include <ostream>
#include <string>

namespace breakerd::ctl {

// Runs the simulation; the report goes to `out` (text, or JSON when `json`),
// problems with the files (and notes about the trace) to `err`. Returns the
// process exit code: 0, or 2 when the config or the trace cannot be read or
// parsed.
int RunSimulate(const std::string& config_path, const std::string& trace_path,
                bool json, std::ostream& out, std::ostream& err);

}  // namespace breakerd::ctl

#endif  // BREAKERD_TOOLS_BREAKERCTL_SIMULATE_H_

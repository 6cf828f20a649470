// breakerd_load: a closed-loop load generator that measures breakerd's RPCs
// against the gRPC floor, as ratios, in one run (DESIGN.md, "Performance
// targets"). See bench/load/README.md for how to read the numbers.
//
// This file reads the flags and wires the parts: load_driver.h keeps the
// calls in flight and times them, load_report.h writes the table and the
// JSON.
//
// Measured, each for --warmup + --duration seconds, --rounds times, in the
// --calls order (default below), reversed in every other round (ABBA), so
// that drift on a noisy machine lands on every call alike:
//   echo     breakerd.bench.Echo/Empty on --floor        (the primary floor)
//   acquire  Breaker/Acquire, attempt 0, closed breaker  on --target
//   report   Breaker/Report, OUTCOME_SUCCESS, timed alone: its permit comes
//            from an untimed Acquire just before (permits are single-use;
//            its QPS ratio counts both RPCs)
//   pair     Acquire, then Report with its permit, timed as one unit
//   health   grpc.health.v1.Health/Check, a generic call with an empty
//            request, on --target (the secondary floor: breakerd's own
//            server and interceptor, no breakerd handler)
// --inflight call slots each keep one call in flight, spread over
// --channels channels per server. Any failed call makes the exit code 1.
//
// With --target_pid / --floor_pid (servers on this machine) it also reports
// each server's CPU time per call, from /proc: less sensitive to other load
// on the machine than latency is.
//
// Usage:
//   breakerd_load --target=127.0.0.1:50051 --floor=127.0.0.1:50052
//       --inflight=64 --channels=4 --duration=3 --warmup=0.5 --rounds=3
//       --json=out.json
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "absl/algorithm/container.h"
#include "absl/flags/flag.h"
#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "bench/common/init.h"
#include "bench/load/load_driver.h"
#include "bench/load/load_report.h"
#include "bench/load/load_results.h"
#include "tests/soak/proc_stats.h"

ABSL_FLAG(std::string, target, "",
          "breakerd's gRPC address (host:port or "
          "unix:/path). Required.");
ABSL_FLAG(std::string, floor, "",
          "The echo server's address (bench/load/echo_server), on the same "
          "transport as --target. Required.");
ABSL_FLAG(int, inflight, 1, "Calls in flight, in total (closed loop).");
ABSL_FLAG(int, channels, 1,
          "Channels (separate connections) per server; slots are spread "
          "over them round-robin.");
ABSL_FLAG(double, duration, 3.0, "Seconds timed per measurement.");
ABSL_FLAG(double, warmup, 0.5,
          "Seconds of untimed load before each measurement.");
ABSL_FLAG(int, rounds, 3,
          "Times every call is measured; the order reverses each round.");
ABSL_FLAG(int, dependencies, 1,
          "Dependency names the calls are spread over "
          "(bench-provider/credential-<i>).");
ABSL_FLAG(std::vector<std::string>, calls,
          std::vector<std::string>({"echo", "acquire", "report", "pair",
                                    "health"}),
          "The calls to measure (default all), in this order, reversed every "
          "other round. A subset is for investigations: the ratios need echo "
          "and health.");
ABSL_FLAG(int, target_pid, 0,
          "breakerd's process id, if on this machine: reports its CPU time "
          "per call (from /proc).");
ABSL_FLAG(int, floor_pid, 0,
          "The echo server's process id, if on this machine: reports its CPU "
          "time per call.");
ABSL_FLAG(std::string, json, "", "Write the results as JSON to this file.");

namespace breakerd {
namespace bench {
namespace {

int Run() {
  const std::string target = absl::GetFlag(FLAGS_target);
  const std::string floor_address = absl::GetFlag(FLAGS_floor);
  const int inflight = absl::GetFlag(FLAGS_inflight);
  const int channels = absl::GetFlag(FLAGS_channels);
  const double duration = absl::GetFlag(FLAGS_duration);
  const double warmup = absl::GetFlag(FLAGS_warmup);
  const int rounds = absl::GetFlag(FLAGS_rounds);
  const int dependencies = absl::GetFlag(FLAGS_dependencies);
  if (target.empty() || floor_address.empty() || inflight < 1 || channels < 1 ||
      channels > inflight || duration <= 0 || warmup < 0 || rounds < 1 ||
      dependencies < 1) {
    std::fprintf(stderr,
                 "breakerd_load: need --target and --floor, inflight >= 1, "
                 "1 <= channels <= inflight, duration > 0, warmup >= 0, "
                 "rounds >= 1, dependencies >= 1\n");
    return 2;
  }
  std::vector<CallKind> order;
  for (const std::string& name : absl::GetFlag(FLAGS_calls)) {
    const CallKind* kind = absl::c_find_if(
        kAllKinds, [&name](CallKind k) { return name == KindName(k); });
    if (kind == std::end(kAllKinds)) {
      std::fprintf(stderr, "breakerd_load: --calls: unknown call %s\n",
                   name.c_str());
      return 2;
    }
    order.push_back(*kind);
  }
  const bool target_unix = absl::StartsWith(target, "unix:");
  if (target_unix != absl::StartsWith(floor_address, "unix:")) {
    std::fprintf(stderr,
                 "breakerd_load: --target and --floor must use the same "
                 "transport\n");
    return 2;
  }

  std::vector<ChannelStubs> stubs =
      ConnectChannels(target, floor_address, channels);
  if (stubs.empty()) {
    std::fprintf(stderr, "breakerd_load: cannot connect to %s or %s\n",
                 target.c_str(), floor_address.c_str());
    return 2;
  }

  RunInfo run;
  run.transport = target_unix ? "unix" : "tcp";
  run.target = target;
  run.floor = floor_address;
  run.inflight = inflight;
  run.channels = channels;
  run.dependencies = dependencies;
  run.rounds = rounds;
  run.warmup = warmup;
  run.duration = duration;
  run.date = absl::Now();
  run.load_before = ReadLoadAverage();

  LoadRunner runner(&stubs, inflight, dependencies, warmup, duration,
                    absl::GetFlag(FLAGS_target_pid),
                    absl::GetFlag(FLAGS_floor_pid));
  std::vector<Row> rows;
  const bool completed = runner.MeasureRounds(order, rounds, &rows);
  run.wall_seconds = absl::ToDoubleSeconds(absl::Now() - run.date);
  run.load_after = ReadLoadAverage();
  for (const Row& r : rows) run.failures += r.failures;
  run.first_error = runner.FirstError();
  if (!completed && run.failures == 0) run.failures = 1;

  std::fputs(FormatTable(run, rows).c_str(), stdout);
  const std::string json_path = absl::GetFlag(FLAGS_json);
  if (!json_path.empty()) {
    std::ofstream out(json_path, std::ios::trunc);
    out << FormatJson(run, rows);
    if (!out.flush()) {
      std::fprintf(stderr, "breakerd_load: cannot write %s\n",
                   json_path.c_str());
      return 2;
    }
  }
  return run.failures > 0 ? 1 : 0;
}

}  // namespace
}  // namespace bench
}  // namespace breakerd

int main(int argc, char** argv) {
  breakerd::bench::InitBenchmark(
      argc, argv,
      "breakerd_load --target=ADDR --floor=ADDR [--inflight=N --channels=M "
      "--duration=S --warmup=S --rounds=R --dependencies=K --json=PATH]: "
      "breakerd's RPCs against the gRPC floor, as ratios");
  return breakerd::bench::Run();
}

// The load driver of breakerd_load: closed-loop call slots against breakerd
// and the echo floor, timed into Rows (load_results.h).
//
// Each of --inflight call slots keeps exactly one call in flight: when a
// call completes, its callback records the latency and starts the next one
// (C++ callback API, stub->async()). Slots are spread round-robin over the
// channels, each opened with a distinct channel argument so each is its own
// HTTP/2 connection.
//
// A call counts if it started and finished inside the timed window; its
// latency goes into the slot's preallocated histogram (no allocation on the
// hot path beyond what gRPC does). Every response is checked: a non-OK
// status, an Acquire not allowed or a Report not counted as a success is a
// failed call.
//
// Thread-safety: a LoadRunner is used from one thread; its slots' callbacks
// run on gRPC's threads only while a measurement runs.
#ifndef BREAKERD_BENCH_LOAD_LOAD_DRIVER_H_
#define BREAKERD_BENCH_LOAD_LOAD_DRIVER_H_

#include <memory>
#include <string>
#include <vector>

#include "bench/load/echo.grpc.pb.h"
#include "bench/load/load_results.h"
#include "breakerd/v1/breaker.grpc.pb.h"
#include "grpcpp/generic/generic_stub.h"

namespace breakerd {
namespace bench {

// The stubs of one channel to each server.
struct ChannelStubs {
  std::unique_ptr<v1::Breaker::Stub> breaker;
  std::unique_ptr<grpc::GenericStub> health;  // on the breakerd channel
  std::unique_ptr<Echo::Stub> echo;
};

// Opens `channels` channels to `target` (breakerd) and to `floor` (the echo
// server) and waits up to 10 s for each to connect. Returns the stubs, one
// ChannelStubs per channel pair, or an empty vector if a channel did not
// connect.
std::vector<ChannelStubs> ConnectChannels(const std::string& target,
                                          const std::string& floor,
                                          int channels);

class LoadRunner {
 public:
  // `inflight` slots over `stubs` (not owned; must outlive the runner), each
  // spreading its calls over `dependencies` dependency names
  // (bench-provider/credential-<i>). A measurement is `warmup` seconds of
  // untimed load, then `duration` seconds timed. target_pid, floor_pid: the
  // servers' process ids, to measure their CPU time per call; 0 if unknown.
  LoadRunner(std::vector<ChannelStubs>* stubs, int inflight, int dependencies,
             double warmup, double duration, int target_pid, int floor_pid);
  ~LoadRunner();

  // Measures every kind of `order`, `rounds` times, the order reversed every
  // other round (ABBA) so that drift on a noisy machine lands on every call
  // alike. `*rows` becomes one Row per kAllKinds, in that order. Returns
  // false if a measurement failed (see Measure); the rest are not run.
  bool MeasureRounds(const std::vector<CallKind>& order, int rounds,
                     std::vector<Row>* rows);

  // Runs one timed measurement of `kind` and adds it to `row`. Returns
  // false if the permit pool failed (for kReport). Exits the process if the
  // slots do not stop in time.
  bool Measure(CallKind kind, Row* row);

  // The first failed call's description since construction, or "".
  std::string FirstError() const;

 private:
  struct Measurement;
  class Slot;

  const double warmup_;
  const double duration_;
  const int target_pid_;
  const int floor_pid_;
  std::vector<std::unique_ptr<Slot>> slots_;
};

}  // namespace bench
}  // namespace breakerd

#endif  // BREAKERD_BENCH_LOAD_LOAD_DRIVER_H_

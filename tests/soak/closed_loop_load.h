// A closed-loop load generator for soak tests: `inflight` slots, spread
// round-robin over the given channels, each keep exactly one call in flight
// (gRPC's callback API: a call's completion starts the slot's next call), so
// the load is whatever breakerd and this machine can carry: its capacity.
//
// One call is an Acquire on a dependency picked uniformly at random and, if
// it was allowed and `report` is set, a Report with its permit and an
// outcome drawn from that dependency's OutcomeMix, encoded at random as an
// explicit `outcome`, an `http_status` or a `grpc_code` (all three must be
// classified alike). A share of the calls that failed is retried once
// (Acquire with attempt = 1, then Report if the retry budget allows), as a
// client would. Rejected Acquires are not reported, as a real client would
// not call the upstream. Every answer is checked: a non-OK status, or an
// allowed Acquire without a permit, is an error.
//
// Thread-safety: Start, completed, Stop and WaitDone may be called from any
// thread; Counts and kept_permits only after Stop or
// WaitDone has returned true. Each slot's counters are touched only by its
// own chain of callbacks (one call at a time) and merged under mu_ when the
// slot ends.
#ifndef BREAKERD_TESTS_SOAK_CLOSED_LOOP_LOAD_H_
#define BREAKERD_TESTS_SOAK_CLOSED_LOOP_LOAD_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "breakerd/v1/breaker.grpc.pb.h"
#include "grpcpp/channel.h"

namespace breakerd {

// The outcome classes the load reports, named as breakerd's
// breakerd_reports_total{class} label names them.
enum class SentClass {
  kSuccess = 0,
  kServerError,
  kTimeout,
  kBadRequest,   // 404 / NOT_FOUND: neutral
  kRateLimited,  // 429 / RESOURCE_EXHAUSTED: a failure (rate_limited: count)
};
inline constexpr int kSentClassCount = 5;
absl::string_view SentClassLabel(SentClass c);

// Relative weights of how one dependency's calls end (need not sum to 1;
// their sum must be positive).
struct OutcomeMix {
  double success = 1;
  double server_error = 0;
  double timeout = 0;
  double bad_request = 0;
  double rate_limited = 0;
};

struct LoadTarget {
  std::string dependency;
  OutcomeMix mix;
};

struct LoadOptions {
  // Picked uniformly at random for each call. REQUIRES: not empty.
  std::vector<LoadTarget> targets;
  // REQUIRES: not empty. Slot i uses channels[i % size].
  std::vector<std::shared_ptr<grpc::Channel>> channels;
  // Calls kept in flight. REQUIRES: >= 1.
  int inflight = 32;
  // false: Acquire only; permits are never reported.
  bool report = true;
  // Share (0..1) of the reported failures (server error, timeout, rate
  // limited) followed by one retry: an Acquire with attempt = 1 on the same
  // dependency, reported like any call if allowed.
  double retry_share = 0;
  // Stop issuing after this many Acquires in total; < 0: until Stop().
  int64_t max_acquires = -1;
  // Each slot keeps the permits of its first `keep_permits_per_slot`
  // allowed Acquires (see kept_permits()).
  int keep_permits_per_slot = 0;
  // Deadline of every RPC.
  absl::Duration rpc_deadline = absl::Seconds(10);
  // Seeds the slots' generators (slot i: seed + i).
  uint64_t seed = 1;
};

// What the slots saw, summed.
struct LoadCounts {
  uint64_t acquires = 0;         // Acquire answers with status OK
  uint64_t allowed = 0;          // of which allowed (probes included)
  uint64_t probes = 0;           // of which allowed as the half-open probe
  uint64_t rejected = 0;         // of which not allowed
  uint64_t retries = 0;          // of which with attempt = 1
  uint64_t retries_allowed = 0;  // of which allowed
  uint64_t reports = 0;          // Report answers with status OK
  // Reports answered OK, by the class sent.
  std::array<uint64_t, kSentClassCount> reports_by_class{};
  // Reports answered OK, by the Effect breakerd answered (index: enum value).
  std::array<uint64_t, 5> reports_by_effect{};
  uint64_t acquire_errors = 0;  // non-OK Acquire, or allowed with permit 0
  uint64_t report_errors = 0;   // non-OK Report
  std::string first_error;      // empty if none

  void Add(const LoadCounts& other);
};

class ClosedLoopLoad {
 public:
  explicit ClosedLoopLoad(LoadOptions options);
  // Stops the slots and waits for their calls to end (bounded by the RPC
  // deadline: every call ends by then).
  ~ClosedLoopLoad();

  ClosedLoopLoad(const ClosedLoopLoad&) = delete;
  ClosedLoopLoad& operator=(const ClosedLoopLoad&) = delete;

  // Starts every slot. REQUIRES: called once.
  void Start();

  // Calls completed so far: pairs (or lone Acquires when rejected or when
  // !report), errors included.
  uint64_t completed() const {
    return completed_.load(std::memory_order_relaxed);
  }

  // Asks every slot to stop after its current call, then waits at most
  // `timeout` for all to end. True if all have ended.
  bool Stop(absl::Duration timeout);
  // Waits at most `timeout` for every slot to end by itself (max_acquires).
  bool WaitDone(absl::Duration timeout);

  // REQUIRES: Stop or WaitDone returned true.
  LoadCounts Counts() const;
  // (dependency, permit) pairs kept (LoadOptions::keep_permits_per_slot).
  // REQUIRES: Stop or WaitDone returned true.
  std::vector<std::pair<std::string, uint64_t>> kept_permits() const;

 private:
  class Slot;
  friend class Slot;

  // Claims the right to issue one more Acquire; false when the slot should
  // end (stop requested or max_acquires reached).
  bool ClaimAcquire();
  // Called by a slot once, when it ends: merges its results.
  void SlotEnded(const Slot& slot);

  const LoadOptions options_;
  std::vector<std::unique_ptr<Slot>> slots_;  // fixed at construction
  std::atomic<bool> stop_{false};
  std::atomic<int64_t> acquires_issued_{0};
  std::atomic<uint64_t> completed_{0};

  mutable absl::Mutex mu_;
  int running_ ABSL_GUARDED_BY(mu_) = 0;
  LoadCounts counts_ ABSL_GUARDED_BY(mu_);
  std::vector<std::pair<std::string, uint64_t>> kept_ ABSL_GUARDED_BY(mu_);
};

}  // namespace breakerd

#endif  // BREAKERD_TESTS_SOAK_CLOSED_LOOP_LOAD_H_

// Internal to breakerd::client, not part of its API (that is
// breakerd/client.h); the client's tests include it.
//
// Local decisions (client/README.md, "Local decisions"): what the client
// decided without breakerd, on its way to breakerd's ReportBatch.
//
// LocalSlot is one Watch event that lets the client grant first attempts
// itself: the dependency and the generation decided on, and the grants made
// from it since the batch last took them. The Watch cache holds the slot of
// each dependency it may grant; every grant and every outcome keeps a
// reference to its slot, so an outcome is batched with the generation its
// call was granted on, however the cache has moved on since.
//
// LocalBatch holds what is to be sent: grants (counted on their slot),
// outcomes of locally granted calls (appended to one of a few shards, chosen
// per thread, so that callers on different threads rarely meet on a lock),
// decisions made without breakerd (local refusals, fail-open, fail-closed:
// per dependency) and a named chain's local grants (per chain and tier). A
// flusher takes it apart into ReportBatch requests with Next() and says how
// each send went with Sent(): one request at a time, at most 1,000
// outcomes and 1,000 entries of each list (breakerd's limits), grants
// before the outcomes they cover; a request that fails is sent again
// unchanged (same sequence: breakerd applies it once), at most kMaxSends
// times, then dropped. At most kMaxUnacked outcomes are held not yet
// acknowledged; past that an outcome is dropped. Dropped outcomes are
// counted (dropped()). No method of the callers' side waits for I/O.
//
// BatchFlusher decides when: a flush flush_interval after the batch stops
// being empty (nothing runs while it is), at once when kFlushAt outcomes
// wait, none while breakerd is away (the decisions wait as counters and go
// in the first request after it is back), and a last one at Close, within
// a budget. Its time comes from an injected Clock and Timer (tests move them
// by hand).
//
// Thread-safety: LocalSlot's counter is atomic. LocalBatch is thread-safe;
// its flusher side (Next, Sent, DropAll) is meant for one thread at a time
// and serialized by its own lock. BatchFlusher is thread-safe. Their locks
// are fast_mutex.h's (seen by ThreadSanitizer; spin locks where callers
// pass).
#ifndef BREAKERD_CLIENT_CPP_INCLUDE_BREAKERD_INTERNAL_LOCAL_BATCH_H_
#define BREAKERD_CLIENT_CPP_INCLUDE_BREAKERD_INTERNAL_LOCAL_BATCH_H_

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "breakerd/client.h"
#include "breakerd/internal/clock.h"
#include "breakerd/internal/fast_mutex.h"
#include "breakerd/v1/breaker.pb.h"
#include "google/protobuf/arena.h"

namespace breakerd::client::internal {

struct LocalSlot {
  LocalSlot(std::string dependency_in, uint64_t generation_in)
      : dependency(std::move(dependency_in)), generation(generation_in) {}

  LocalSlot(const LocalSlot&) = delete;
  LocalSlot& operator=(const LocalSlot&) = delete;

  const std::string dependency;
  // The generation of the Watch event that allowed the grants.
  const uint64_t generation;
  // Grants since LocalBatch last took them (LocalBatch::Grant).
  std::atomic<uint32_t> grants{0};
};

// The outcome of a call granted from `slot`, as a Report would carry it.
struct LocalCall {
  std::shared_ptr<LocalSlot> slot;
  // REQUIRES: valid (CheckLocalOutcome).
  Outcome outcome;
  // 0 to 24 h (breakerd's bound; the client clamps).
  absl::Duration latency;
  // A named chain's grant: the chain and the candidate's tier; else empty.
  std::string chain;
  uint32_t tier = 0;
};

// OK if breakerd accepts `outcome` (an explicit outcome, an HTTP status of
// 100-599 or a gRPC code of 0-16); else INVALID_ARGUMENT naming the field,
// as breakerd's Report would answer. A batch with one bad outcome would be
// refused whole, so none is queued.
absl::Status CheckLocalOutcome(const Outcome& outcome);

// breakerd's bound on a Report's durations (latency, retry_after): longer
// ones are refused, so the client sends at most this.
inline constexpr absl::Duration kMaxLocalDuration = absl::Hours(24);

// The decisions a client makes without breakerd (ClientDecisions).
enum class ClientDecisionKind {
  kRefusedLocal,
  kFailOpen,
  kFailClosed,
};

class LocalBatch {
 public:
  // Outcomes held not yet acknowledged by breakerd, at most.
  static constexpr uint64_t kMaxUnacked = 10000;
  // Outcomes waiting that call for a flush at once.
  static constexpr uint64_t kFlushAt = 1000;
  // breakerd's limits on one ReportBatch: outcomes, and entries of each
  // list (dependencies, chains, decisions).
  static constexpr size_t kMaxRequestOutcomes = 1000;
  static constexpr size_t kMaxRequestEntries = 1000;
  // Sends of one request before it is dropped.
  static constexpr int kMaxSends = 3;

  // `client_id` names the client in each request (named like a
  // dependency). `wake(urgent)` is called when the batch stops being empty
  // (urgent false) and when kFlushAt outcomes wait (true): from a caller's
  // thread, with no lock of the batch held, rarely (not once per call); it
  // must not block or call the batch's callers' side.
  LocalBatch(std::string client_id, std::function<void(bool urgent)> wake);

  LocalBatch(const LocalBatch&) = delete;
  LocalBatch& operator=(const LocalBatch&) = delete;

  const std::string& client_id() const { return client_id_; }

  // --- The callers' side --------------------------------------------------

  // Counts a first attempt granted from `slot`.
  void Grant(const std::shared_ptr<LocalSlot>& slot)
      ABSL_LOCKS_EXCLUDED(dirty_mu_);

  // Queues the outcome of a call granted from `slot` (LocalCall's fields),
  // made in place in the thread's shard. False if it was dropped
  // (kMaxUnacked held already), counted in dropped().
  bool Add(std::shared_ptr<LocalSlot> slot, const Outcome& outcome,
           absl::Duration latency, absl::string_view chain = {},
           uint32_t tier = 0);
  bool Add(LocalCall call) {
    return Add(std::move(call.slot), call.outcome, call.latency, call.chain,
               call.tier);
  }

  // Counts `n` outcomes dropped before reaching the batch (breakerd away,
  // the client closed).
  void CountDropped(uint64_t n) {
    dropped_.fetch_add(n, std::memory_order_relaxed);
  }

  // Counts a decision made without breakerd for `dependency`.
  void CountDecision(absl::string_view dependency, ClientDecisionKind kind)
      ABSL_LOCKS_EXCLUDED(decisions_mu_);

  // Counts a named chain's candidate at `tier` granted locally.
  void CountChainGrant(absl::string_view chain, uint32_t tier)
      ABSL_LOCKS_EXCLUDED(decisions_mu_);

  // --- The flusher's side -------------------------------------------------

  // The request to send now: the one whose last send failed (unchanged),
  // else a new one (the next sequence number) of what waits; nullptr when
  // nothing does. Valid until the next Sent or DropAll.
  const v1::ReportBatchRequest* Next() ABSL_LOCKS_EXCLUDED(flush_mu_);

  // How the send of Next()'s request went: OK acknowledges it; an error
  // keeps it for the next Next(), up to kMaxSends sends (INVALID_ARGUMENT
  // or RESOURCE_EXHAUSTED, which no resend can fix: at once), then drops
  // it, its outcomes counted in dropped(). Returns whether it was dropped.
  bool Sent(const absl::Status& status) ABSL_LOCKS_EXCLUDED(flush_mu_);

  // Whether anything waits to be sent (or sent again).
  bool pending() const ABSL_LOCKS_EXCLUDED(flush_mu_, dirty_mu_, decisions_mu_);

  // Whether kFlushAt outcomes or more wait, besides a request to resend.
  bool full() const ABSL_LOCKS_EXCLUDED(flush_mu_);

  // Drops everything not acknowledged (at Close), outcomes counted.
  void DropAll() ABSL_LOCKS_EXCLUDED(flush_mu_, dirty_mu_, decisions_mu_);

  // Outcomes dropped since construction.
  uint64_t dropped() const { return dropped_.load(std::memory_order_relaxed); }
  // Outcomes held, not yet acknowledged.
  uint64_t unacked() const { return unacked_.load(std::memory_order_acquire); }

 private:
  // One shard of the outcomes appended by callers; a thread uses one
  // (ThreadShard).
  struct alignas(64) Shard {
    FastMutex mu;
    std::vector<LocalCall> calls ABSL_GUARDED_BY(mu);
  };

  struct DecisionCounts {
    uint32_t refused_local = 0;
    uint32_t fail_open = 0;
    uint32_t fail_closed = 0;
  };

  // The request taken by Next() and not yet acknowledged or dropped.
  struct Current {
    // On arena_.
    v1::ReportBatchRequest* request = nullptr;
    uint64_t outcomes = 0;
    int sends = 0;
  };

  // Moves what the callers added into the staging area: the outcomes
  // first, then the grants (an outcome's grant was counted before the
  // outcome was added, so it is taken with it or before), then the
  // decisions.
  void Stage() ABSL_EXCLUSIVE_LOCKS_REQUIRED(flush_mu_)
      ABSL_LOCKS_EXCLUDED(dirty_mu_, decisions_mu_);
  // Moves the staged grants of `slot` into `entry`: every outcome sent is
  // covered by grants sent with it or before it.
  void MoveGrants(const LocalSlot& slot, v1::DependencyBatch* entry)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(flush_mu_);
  // A request of what is staged, within breakerd's limits; nullopt if
  // nothing is.
  std::optional<Current> Build() ABSL_EXCLUSIVE_LOCKS_REQUIRED(flush_mu_);
  // Forgets the current request, acknowledged (`dropped` false) or not.
  void Finish(bool dropped) ABSL_EXCLUSIVE_LOCKS_REQUIRED(flush_mu_);

  // Constant after construction.
  const std::string client_id_;
  const std::function<void(bool)> wake_;

  // Outcomes added and not yet acknowledged or dropped: in the shards, in
  // staging, in the current request. Its increments and decrements say
  // when the batch stops being empty.
  std::atomic<uint64_t> unacked_{0};
  std::atomic<uint64_t> dropped_{0};
  // unacked_ at which kFlushAt outcomes wait besides the current request,
  // and whether the flusher was told so since it last took the batch.
  std::atomic<uint64_t> urgent_at_{kFlushAt};
  std::atomic<bool> urgent_{false};

  std::array<Shard, kThreadShards> shards_;

  // Slots whose grant counter went up from 0 since the flusher last took
  // them.
  mutable FastMutex dirty_mu_;
  std::vector<std::shared_ptr<LocalSlot>> dirty_ ABSL_GUARDED_BY(dirty_mu_);

  mutable FastMutex decisions_mu_;
  absl::flat_hash_map<std::string, DecisionCounts> decisions_
      ABSL_GUARDED_BY(decisions_mu_);
  absl::flat_hash_map<std::pair<std::string, uint32_t>, uint32_t> chains_
      ABSL_GUARDED_BY(decisions_mu_);

  mutable StdMutex flush_mu_;
  uint64_t sequence_ ABSL_GUARDED_BY(flush_mu_) = 0;
  std::optional<Current> current_ ABSL_GUARDED_BY(flush_mu_);
  // The current request and its messages (one allocation per block, not
  // per outcome); reset when it is acknowledged or dropped.
  google::protobuf::Arena arena_ ABSL_GUARDED_BY(flush_mu_);
  // Outcomes taken from the callers, not yet in a request: the shards'
  // buffers as they were swapped out, oldest first; the first one from
  // staged_head_ on.
  std::deque<std::vector<LocalCall>> staged_calls_ ABSL_GUARDED_BY(flush_mu_);
  size_t staged_head_ ABSL_GUARDED_BY(flush_mu_) = 0;
  absl::flat_hash_map<LocalSlot*,
                      std::pair<std::shared_ptr<LocalSlot>, uint64_t>>
      staged_grants_ ABSL_GUARDED_BY(flush_mu_);
  absl::flat_hash_map<std::string, DecisionCounts> staged_decisions_
      ABSL_GUARDED_BY(flush_mu_);
  absl::flat_hash_map<std::pair<std::string, uint32_t>, uint64_t> staged_chains_
      ABSL_GUARDED_BY(flush_mu_);
  // Emptied buffers, kept for their capacity: Stage swaps one into each
  // shard it takes from (no allocation on the callers' side).
  std::vector<std::vector<LocalCall>> spare_ ABSL_GUARDED_BY(flush_mu_);
};

class BatchFlusher {
 public:
  struct Options {
    // Outlive the flusher.
    LocalBatch* batch = nullptr;
    Clock* clock = nullptr;
    // Runs the flushes, one at a time, never on a caller's thread (the
    // client's: a ThreadTimer of its own, as a flush waits for its RPC).
    Timer* timer = nullptr;
    // How long outcomes wait for company before a flush (the client's
    // flush_interval).
    absl::Duration interval = absl::Milliseconds(5);
    // The deadline of each send (10 x decision_timeout).
    absl::Duration send_timeout = absl::Milliseconds(200);
    // Sends one request and waits for its answer, at most `timeout`.
    std::function<absl::Status(const v1::ReportBatchRequest&,
                               absl::Duration timeout)>
        send;
    // Whether breakerd is marked away: nothing is sent then.
    std::function<bool()> away;
  };

  // REQUIRES: every field set.
  explicit BatchFlusher(Options options);

  BatchFlusher(const BatchFlusher&) = delete;
  BatchFlusher& operator=(const BatchFlusher&) = delete;

  // LocalBatch's wake: a flush in `interval` (urgent: at once) unless one
  // is due sooner, or breakerd is away.
  void Wake(bool urgent) ABSL_LOCKS_EXCLUDED(mu_);

  // breakerd is back: a flush at once if anything waits.
  void Back() ABSL_LOCKS_EXCLUDED(mu_);

  // Close, on the caller's thread: no flush is scheduled any more (the
  // caller then stops the timer); then FinalFlush.
  void StopScheduling() ABSL_LOCKS_EXCLUDED(mu_);

  // Sends what waits, one request after another, until nothing does,
  // breakerd is away, or `budget` has passed (each send's deadline within
  // it); drops (and counts) what is left.
  // REQUIRES: StopScheduling, and no flush running (the timer stopped).
  void FinalFlush(absl::Duration budget) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // Schedules a flush `delay` from now.
  void ScheduleLocked(absl::Duration delay) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The timer's task: sends while the batch holds kFlushAt outcomes, else
  // one request; then schedules the next flush if anything waits.
  void Flush() ABSL_LOCKS_EXCLUDED(mu_);

  // Constant after construction.
  const Options options_;

  StdMutex mu_;
  // When the flush scheduled is due (clock time), if one is.
  std::optional<absl::Duration> due_ ABSL_GUARDED_BY(mu_);
  // breakerd was away at the last flush: none until Back().
  bool parked_ ABSL_GUARDED_BY(mu_) = false;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace breakerd::client::internal

#endif  // BREAKERD_CLIENT_CPP_INCLUDE_BREAKERD_INTERNAL_LOCAL_BATCH_H_

// Private to the library's sources (not installed, not for tests): the
// implementation of Client. Its methods are defined where their concern
// is: client.cc (construction, Close, decisions and the RPCs behind them),
// reports.cc (Reports sent, held while breakerd is away, and late permits
// returned), local.cc (local decisions: grants and refusals from the Watch
// cache, their outcomes and the decisions made without breakerd batched
// for ReportBatch); guards.cc (Do, Retry, First) uses Classify and Jitter.
//
// Thread-safety: thread-safe, as Client.
#ifndef BREAKERD_CLIENT_CPP_SRC_CLIENT_IMPL_H_
#define BREAKERD_CLIENT_CPP_SRC_CLIENT_IMPL_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/random/random.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "breakerd/client.h"
#include "breakerd/internal/change_log.h"
#include "breakerd/internal/clock.h"
#include "breakerd/internal/local_batch.h"
#include "breakerd/internal/send_window.h"
#include "breakerd/internal/sidecar_presence.h"
#include "breakerd/internal/watch_cache.h"
#include "breakerd/internal/watch_stream.h"
#include "breakerd/v1/breaker.grpc.pb.h"
#include "grpcpp/channel.h"
#include "grpcpp/client_context.h"
#include "grpcpp/support/status.h"

namespace breakerd::client {

namespace internal {

// How long an Acquire or AcquireFirst RPC stays open after its caller
// stopped waiting for it (decision_timeout), so that a permit breakerd
// grants meanwhile is reported OUTCOME_CANCELLED instead of leaked (a lost
// probe permit would refuse the dependency PROBE_IN_FLIGHT for its whole
// lease). The Node client's LATE_ANSWER_MS.
inline constexpr absl::Duration kLateAnswer = absl::Seconds(1);

// One Acquire or AcquireFirst RPC, shared by its caller, who waits for the
// answer at most decision_timeout, and its callback, which handles an
// answer that comes later (Client::Impl::Decide).
template <typename Request, typename Response>
struct DecisionCall {
  grpc::ClientContext ctx;
  Request request;
  // Written by gRPC before the callback; read by the caller once `done`,
  // or by the callback once `abandoned`.
  Response response;

  absl::Mutex mu;
  bool done ABSL_GUARDED_BY(mu) = false;
  // The caller stopped waiting: the answer is the callback's to handle.
  bool abandoned ABSL_GUARDED_BY(mu) = false;
  grpc::Status status ABSL_GUARDED_BY(mu);
};
using AcquireCall = DecisionCall<v1::AcquireRequest, v1::AcquireResponse>;
using AcquireFirstCall =
    DecisionCall<v1::AcquireFirstRequest, v1::AcquireFirstResponse>;

}  // namespace internal

class Client::Impl {
 public:
  // REQUIRES: options validated by Client::Create.
  explicit Impl(ClientOptions options);
  ~Impl() { Close(); }

  // See Client::Close.
  void Close();

  bool closed() const { return closed_.load(std::memory_order_acquire); }

  // --- Local decisions (local.cc) -----------------------------------------

  // What the Watch cache decided for one call: a grant (its slot), a
  // refusal, or neither (ask breakerd).
  struct CacheDecision {
    std::shared_ptr<internal::LocalSlot> grant;
    std::optional<Decision> refusal;
  };

  // The Watch cache's decision for `dependency`, counted: a local refusal
  // while it knows the breaker open (and enforced); with local_decisions, a
  // first attempt granted while it allows it and breakerd is not away.
  CacheDecision DecideInCache(absl::string_view dependency, uint32_t attempt);

  // The cache's verdict, not counted (AcquireFirst counts what it uses; a
  // named chain asks breakerd all the same, and counts the refusals only
  // if it decides locally). `may_grant`: MayGrant(attempt).
  internal::CacheVerdict PeekCache(absl::string_view dependency,
                                   bool may_grant) const;

  // Whether a call of `attempt` may be granted locally now.
  bool MayGrant(uint32_t attempt) const {
    return local_decisions_ && attempt == 0 && !presence_.away();
  }

  // Counts a grant from `slot` (in the next batch).
  void CountGrant(const std::shared_ptr<internal::LocalSlot>& slot) {
    batch_.Grant(slot);
  }
  // Counts a named chain's local grant of the candidate at `tier`.
  void CountChainGrant(absl::string_view chain, uint32_t tier) {
    batch_.CountChainGrant(chain, tier);
  }
  // Counts a local refusal of `dependency` (local_rejections, and the
  // batch's decisions).
  void CountLocalRefusal(absl::string_view dependency);

  // A refusal from the cache's verdict.
  static Decision LocalRefusalOf(absl::string_view dependency,
                                 const internal::CacheVerdict& v);
  // The Decision of a first attempt granted locally from `slot`.
  static Decision LocalGrantOf(absl::string_view dependency,
                               const internal::LocalSlot& slot);

  // Queues the outcome of a call granted locally from `slot` for the next
  // batch (see Permit::Report): OK with an empty result, or dropped
  // (counted) while breakerd is away or the batch is full; FAILED_PRECONDITION
  // once closed (dropped, counted); INVALID_ARGUMENT (report_errors) for an
  // outcome breakerd would refuse.
  absl::StatusOr<ReportResult> ReportLocal(
      std::shared_ptr<internal::LocalSlot> slot, const Outcome& outcome,
      absl::Duration latency, absl::string_view chain, uint32_t tier);

  // --- Decisions (client.cc) ----------------------------------------------

  // Whether breakerd is marked away (decisions are made with no RPC).
  bool away() const { return presence_.away(); }

  // The decision made at once, with no RPC, while breakerd is away;
  // nullopt while it is present.
  std::optional<Decision> AwayDecision(absl::string_view dependency);

  // The decision for a caller that did not send its RPC because breakerd is
  // away (also: marked away while the caller waited for the window),
  // counted in away_decisions.
  Decision NoRpcDecision(absl::string_view dependency);

  // The decision for an RPC sent at `sent_at` (clock_.Now()) that failed with
  // `status` (not INVALID_ARGUMENT): fail open or closed, counted. Breakerd
  // is away if the status says so (and the callers waiting for the window
  // decide at once), unless it was only late: a DEADLINE_EXCEEDED while
  // breakerd answered another RPC sent by this client (a burst on a loaded
  // machine, not a hung sidecar). Other errors, and lateness, are logged on
  // change.
  Decision TroubleDecision(std::string dependency, const grpc::Status& status,
                           absl::Duration sent_at);
  // TroubleDecision's effects but the decision (for a caller that decides
  // locally instead).
  void NoteTrouble(const grpc::Status& status, absl::Duration sent_at);

  // Fail open or closed, counted.
  Decision FailDecision(std::string dependency);

  // Acquire or AcquireFirst answered in time (a decision or
  // INVALID_ARGUMENT; the answer is noted by Decide's callback).
  void SidecarAnswered();

  // Sends `call->request` and waits for the answer at most
  // decision_timeout: returns the RPC's status (the answer in
  // call->response), or DEADLINE_EXCEEDED once the caller stops waiting.
  // *sent_at: when it was sent (clock_.Now()). The RPC stays open kLateAnswer
  // longer: an answer then is noted (AnsweredSince), and a permit in it is
  // reported OUTCOME_CANCELLED (ReturnLatePermit).
  // REQUIRES: the caller holds a place in the window.
  grpc::Status Decide(const std::shared_ptr<internal::AcquireCall>& call,
                      absl::Duration* sent_at);
  grpc::Status Decide(const std::shared_ptr<internal::AcquireFirstCall>& call,
                      absl::Duration* sent_at);

  // --- Reports (reports.cc) -----------------------------------------------

  // Sends a Report (see Client::Report) of `granted`'s permit, for its
  // dependency, with its chain and tier if it has a chain. A `late` one
  // returns a permit that came after its caller stopped waiting: it is sent
  // even while breakerd is away or the client closing (lane kLatePermit),
  // with a deadline kLateAnswer longer than decision_timeout (no caller
  // waits for it). Another, made while breakerd is away, is held (Hold) and
  // sent once it is back.
  absl::StatusOr<ReportResult> SendReport(const Decision& granted,
                                          const Outcome& outcome,
                                          absl::Duration latency, bool late);

  // --- For the guards (guards.cc) -----------------------------------------

  // The outcome to report for a guarded call's status.
  // REQUIRES: the caller handles an exception from the classifier.
  Outcome Classify(const absl::Status& status) const {
    return options_.classifier ? options_.classifier(status)
                               : Outcome::FromStatus(status);
  }

  // A wait drawn uniformly from [0, upper] (full jitter).
  absl::Duration Jitter(absl::Duration upper);

  // --- Reading ------------------------------------------------------------

  std::shared_ptr<grpc::Channel> channel() { return channel_; }
  internal::SendWindow* window() { return &window_; }
  std::optional<State> CachedState(absl::string_view dependency) const;
  bool WatchConnected() const;
  ClientStats stats() const;

 private:
  // The RPCs started by Decide whose callback has not returned. Shared with
  // the callbacks, so that its mutex outlives the Impl (Close waits for
  // none).
  struct CallsInFlight {
    static bool None(CallsInFlight* calls)
        ABSL_EXCLUSIVE_LOCKS_REQUIRED(calls->mu) {
      return calls->count == 0;
    }
    absl::Mutex mu;
    int count ABSL_GUARDED_BY(mu) = 0;
  };

  // Who sends a Report.
  enum class ReportKind {
    // Its caller (Client::Report): held while breakerd is away.
    kCaller,
    // The report thread, a Report held while away: held again if breakerd
    // is away again; no caller waits for it.
    kHeld,
    // The report thread, a late permit: sent even while away or closing.
    kLatePermit,
  };

  static ClientOptions WithDefaults(ClientOptions options);
  static internal::SidecarPresence::Options PresenceOptions(
      const ClientOptions& options, std::shared_ptr<grpc::Channel> channel,
      internal::ChangeLog* log, std::function<void()> on_back);

  // --- Decisions (client.cc) ----------------------------------------------

  // See the public Decide; `start` starts the RPC with the stub's callback
  // API.
  template <typename Call, typename Start>
  grpc::Status Decide(const std::shared_ptr<Call>& call,
                      absl::Duration* sent_at, Start start);

  // A decision RPC ended with `status`: the answer is noted, and handed to
  // the caller waiting; if the caller no longer waits, a permit in it goes
  // back to breakerd. In time, nothing of the Impl is used once the caller
  // is released.
  template <typename Call>
  void OnDecisionAnswer(Call& call, grpc::Status status);

  // An Acquire, AcquireFirst or Report RPC was answered.
  void NoteAnswer();
  // Whether an RPC was answered after `sent_at` (a clock_.Now()).
  bool AnsweredSince(absl::Duration sent_at) const;

  // --- Reports (reports.cc) -----------------------------------------------

  // Counts a Report that was not sent because the client is closed.
  void CountClosedReport();
  // Counts a Report's result, and logs on change.
  void CountReport(const absl::Status& status);

  // Sends `request` through the window (see SendReport), or holds it.
  absl::StatusOr<ReportResult> Send(v1::ReportRequest request, ReportKind kind);

  // Holds a Report made while breakerd is away, for the report thread to
  // send once it is back (OnSidecarBack): OK with an empty result, not an
  // error. Past kMaxHeldReports the oldest held is dropped, counted. Once
  // Close has stopped the report thread, dropped and counted
  // (FAILED_PRECONDITION).
  absl::StatusOr<ReportResult> Hold(v1::ReportRequest request);

  // breakerd is back (SidecarPresence's on_back): the report thread sends
  // the Reports held, and the batch goes.
  void OnSidecarBack();

  // --- Local decisions (local.cc) -----------------------------------------

  // "cpp-<pid>-<8 random hex digits>": the batches' client_id.
  static std::string NewClientId();
  // The flusher's options (send through stub_).
  internal::BatchFlusher::Options FlusherOptions();
  // Sends one ReportBatch, waiting at most `timeout`; logs on change.
  absl::Status SendBatch(const v1::ReportBatchRequest& request,
                         absl::Duration timeout);
  // Close: the last batch (within 10 x decision_timeout), what is left
  // dropped and counted.
  void StopBatches();

  // Starts the report thread, once.
  void StartReportThread() ABSL_EXCLUSIVE_LOCKS_REQUIRED(late_mu_);

  // Queues the permit of a grant that came after its caller stopped
  // waiting for the report thread (started with the first), which reports
  // it OUTCOME_CANCELLED.
  void ReturnLatePermit(Decision granted);

  // The report thread: reports the late permits, one at a time, and the
  // Reports held while away once breakerd is back (through the window's
  // report lane), until stopped with no late permit left.
  void ReportLoop();

  // Reports the late permits queued, joins the report thread, and drops
  // the Reports still held (counted).
  void StopLatePermits();

  // Constant after construction.
  const ClientOptions options_;
  const std::shared_ptr<grpc::Channel> channel_;
  const std::unique_ptr<v1::Breaker::Stub> stub_;

  internal::SteadyClock clock_;
  // Writes the lines the logs hold back; stopped by Close, before the logs
  // go.
  internal::ThreadTimer timer_;
  // The three kinds of line, each rate limited on its own: breakerd away /
  // back, Acquire answered with another error / again, Reports failing /
  // again.
  internal::ChangeLog presence_log_;
  internal::ChangeLog acquire_log_;
  internal::ChangeLog report_log_;
  // ReportBatch failing / reaching breakerd again.
  internal::ChangeLog batch_log_;
  internal::SendWindow window_;
  internal::SidecarPresence presence_;

  std::atomic<bool> closed_{false};
  const std::shared_ptr<CallsInFlight> calls_ =
      std::make_shared<CallsInFlight>();

  absl::Mutex late_mu_;
  absl::CondVar late_cv_;
  // Late grants, to be reported OUTCOME_CANCELLED.
  std::deque<Decision> late_permits_ ABSL_GUARDED_BY(late_mu_);
  // Reports made while breakerd was away, oldest first; due: breakerd is
  // back since (the report thread sends them).
  std::deque<v1::ReportRequest> held_ ABSL_GUARDED_BY(late_mu_);
  bool held_due_ ABSL_GUARDED_BY(late_mu_) = false;
  bool late_stopping_ ABSL_GUARDED_BY(late_mu_) = false;
  std::thread late_thread_ ABSL_GUARDED_BY(late_mu_);
  // When the latest Acquire, AcquireFirst or Report was answered, in
  // nanoseconds of clock_ (0: none yet).
  std::atomic<int64_t> last_answer_ns_{0};
  std::atomic<uint64_t> fail_open_{0};
  std::atomic<uint64_t> fail_closed_{0};
  std::atomic<uint64_t> local_rejections_{0};
  std::atomic<uint64_t> report_errors_{0};
  std::atomic<uint64_t> away_decisions_{0};

  absl::Mutex rng_mu_;
  absl::BitGen rng_ ABSL_GUARDED_BY(rng_mu_);

  // Local decisions: options.watch && options.local_decisions. Constant
  // after construction.
  const bool local_decisions_;
  // What was decided locally, for ReportBatch.
  internal::LocalBatch batch_;
  // Runs the flusher's flushes (each waits for its RPC): stopped by Close.
  internal::ThreadTimer flush_timer_;
  // With local_decisions; else null. Set by the constructor only.
  std::unique_ptr<internal::BatchFlusher> flusher_;

  // With `watch`: the Watch stream and its cache (started last, as it uses
  // presence_ and Jitter); else null. Set by the constructor only.
  std::unique_ptr<internal::WatchStream> watch_;
};

}  // namespace breakerd::client

#endif  // BREAKERD_CLIENT_CPP_SRC_CLIENT_IMPL_H_

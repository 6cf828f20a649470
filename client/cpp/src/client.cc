#include "breakerd/client.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <deque>
#include <functional>
#include <iostream>
#include <optional>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/random/random.h"
#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "breakerd/internal/change_log.h"
#include "breakerd/internal/clock.h"
#include "breakerd/internal/proto_duration.h"
#include "breakerd/internal/send_window.h"
#include "breakerd/internal/sidecar_presence.h"
#include "breakerd/internal/watch_cache.h"
#include "breakerd/v1/breaker.grpc.pb.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"

namespace breakerd::client {
namespace {

using internal::FromProto;
using internal::ToProto;

constexpr char kDefaultTarget[] = "127.0.0.1:50051";
// Status payloads carrying a refusal (see IsBreakerOpen).
constexpr char kRefusalPayload[] = "type.breakerd.io/breakerd.client.Refusal";
constexpr char kSourcePayload[] = "type.breakerd.io/breakerd.client.Source";
// Status payload carrying the outcome to report (see Classified): a
// ReportRequest with only its outcome fields set.
constexpr char kOutcomePayload[] = "type.breakerd.io/breakerd.client.Outcome";
// The message of the error every call returns once the client is closed.
constexpr char kClosedMessage[] = "breakerd client is closed";
// breakerd's Watch marks the headers of a subscribed stream with this.
constexpr char kWatchSubscribedHeader[] = "breakerd-watch-subscribed";
// How long an Acquire or AcquireFirst RPC stays open after its caller
// stopped waiting for it (decision_timeout), so that a permit breakerd
// grants meanwhile is reported OUTCOME_CANCELLED instead of leaked (a lost
// probe permit would refuse the dependency PROBE_IN_FLIGHT for its whole
// lease). The Node client's LATE_ANSWER_MS.
constexpr absl::Duration kLateAnswer = absl::Seconds(1);
// How many Reports the client holds while breakerd is away (past that the
// oldest is dropped, counted in report_errors).
constexpr size_t kMaxHeldReports = 1024;

// Monotonic time, for cooldown ends and latencies.
absl::Duration MonoNow() {
  return absl::FromChrono(std::chrono::steady_clock::now().time_since_epoch());
}

// The fields AcquireResponse and AcquireFirstResponse share.
template <typename Response>
Decision DecisionFrom(const Response& r, std::string dependency) {
  Decision d;
  d.allowed = r.allowed();
  d.permit = r.permit();
  d.probe = r.probe();
  d.state = r.state();
  d.reason = r.reason();
  d.retry_after = FromProto(r.retry_after());
  d.dependency = std::move(dependency);
  d.source = DecisionSource::kSidecar;
  return d;
}

absl::Status FromGrpc(const grpc::Status& s) {
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()),
                      s.error_message());
}

absl::Status ClosedError() {
  return absl::FailedPreconditionError(kClosedMessage);
}

// "DEADLINE_EXCEEDED: too slow".
std::string Describe(const absl::Status& s) {
  return absl::StrCat(absl::StatusCodeToString(s.code()), ": ", s.message());
}
std::string Describe(const grpc::Status& s) { return Describe(FromGrpc(s)); }

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

// The dependency a permit is for.
std::string GrantedDependency(const v1::AcquireRequest& request,
                              const v1::AcquireResponse&) {
  return request.dependency();
}
std::string GrantedDependency(const v1::AcquireFirstRequest&,
                              const v1::AcquireFirstResponse& response) {
  return response.dependency();
}

// Gives back a place in the send window when the RPC is done.
class WindowPlace {
 public:
  explicit WindowPlace(internal::SendWindow* window) : window_(window) {}
  ~WindowPlace() { window_->Leave(); }

  WindowPlace(const WindowPlace&) = delete;
  WindowPlace& operator=(const WindowPlace&) = delete;

 private:
  internal::SendWindow* const window_;
};

// The Acquire errors that say breakerd is hung, throttled or gone (rather
// than answering with an error): the sidecar is away.
bool MeansAway(const grpc::Status& s) {
  return s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED ||
         s.error_code() == grpc::StatusCode::UNAVAILABLE;
}

absl::string_view FailModeName(FailMode mode) {
  return mode == FailMode::kOpen ? "failing open" : "failing closed";
}

absl::Status RefusedStatus(const Decision& d, absl::string_view context = "") {
  std::string message = absl::StrCat(
      "breaker open: ", d.dependency.empty() ? "(none granted)" : d.dependency,
      " (", v1::RejectReason_Name(d.reason), ", retry after ",
      absl::FormatDuration(d.retry_after), ", ", DecisionSourceName(d.source),
      ")");
  if (!context.empty()) absl::StrAppend(&message, "; ", context);
  absl::Status status = absl::UnavailableError(message);
  v1::AcquireFirstResponse refusal;
  refusal.set_dependency(d.dependency);
  refusal.set_state(d.state);
  refusal.set_reason(d.reason);
  ToProto(d.retry_after, refusal.mutable_retry_after());
  status.SetPayload(kRefusalPayload, absl::Cord(refusal.SerializeAsString()));
  status.SetPayload(kSourcePayload,
                    absl::Cord(absl::StrCat(static_cast<int>(d.source))));
  return status;
}

}  // namespace

grpc::ChannelArguments ClientChannelArguments() {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  // GRPC_ARG_MIN_RECONNECT_BACKOFF_MS is, despite its name, the shortest
  // time gRPC gives one connection attempt (default 20 s): left alone, so
  // an attempt to a CPU-throttled sidecar is not cut short.
  return args;
}

absl::string_view DecisionSourceName(DecisionSource source) {
  switch (source) {
    case DecisionSource::kSidecar:
      return "sidecar";
    case DecisionSource::kLocal:
      return "local";
    case DecisionSource::kFailOpen:
      return "fail_open";
    case DecisionSource::kFailClosed:
      return "fail_closed";
  }
  return "unknown";
}

bool IsBreakerOpen(const absl::Status& status) {
  return status.GetPayload(kRefusalPayload).has_value();
}

std::optional<Decision> RefusalOf(const absl::Status& status) {
  auto payload = status.GetPayload(kRefusalPayload);
  if (!payload.has_value()) return std::nullopt;
  v1::AcquireFirstResponse refusal;
  if (!refusal.ParseFromString(std::string(*payload))) return std::nullopt;
  Decision d = DecisionFrom(refusal, refusal.dependency());
  int source = 0;
  if (auto s = status.GetPayload(kSourcePayload);
      s.has_value() && absl::SimpleAtoi(std::string(*s), &source)) {
    d.source = static_cast<DecisionSource>(source);
  }
  return d;
}

// --- Outcome --------------------------------------------------------------

Outcome Outcome::Of(v1::Outcome outcome) {
  Outcome o;
  o.outcome = outcome;
  return o;
}

Outcome Outcome::FromHttpStatus(int status,
                                absl::string_view retry_after_header) {
  Outcome o;
  o.http_status = status > 0 ? static_cast<uint32_t>(status) : 0;
  int64_t seconds = 0;
  if (absl::SimpleAtoi(absl::StripAsciiWhitespace(retry_after_header),
                       &seconds) &&
      seconds > 0) {
    o.retry_after = absl::Seconds(seconds);
  }
  return o;
}

Outcome Outcome::FromGrpcCode(grpc::StatusCode code) {
  Outcome o;
  o.grpc_code = static_cast<int32_t>(code);
  return o;
}

Outcome Outcome::FromStatus(const absl::Status& status) {
  if (auto payload = status.GetPayload(kOutcomePayload); payload.has_value()) {
    v1::ReportRequest attached;
    if (attached.ParseFromString(std::string(*payload))) {
      Outcome o;
      o.outcome = attached.outcome();
      o.http_status = attached.http_status();
      if (attached.has_grpc_code()) o.grpc_code = attached.grpc_code();
      o.retry_after = FromProto(attached.retry_after());
      return o;
    }
  }
  return FromGrpcCode(static_cast<grpc::StatusCode>(status.code()));
}

absl::Status Classified(absl::Status status, const Outcome& outcome) {
  if (status.ok()) return status;
  v1::ReportRequest attached;
  attached.set_outcome(outcome.outcome);
  attached.set_http_status(outcome.http_status);
  if (outcome.grpc_code.has_value()) attached.set_grpc_code(*outcome.grpc_code);
  if (outcome.retry_after > absl::ZeroDuration()) {
    ToProto(outcome.retry_after, attached.mutable_retry_after());
  }
  status.SetPayload(kOutcomePayload, absl::Cord(attached.SerializeAsString()));
  return status;
}

bool Outcome::Retryable() const {
  switch (outcome) {
    case v1::OUTCOME_SUCCESS:
    case v1::OUTCOME_BAD_REQUEST:
    case v1::OUTCOME_AUTH_ERROR:
    case v1::OUTCOME_CANCELLED:
    case v1::OUTCOME_SOFT_FAILURE:
      return false;
    case v1::OUTCOME_UNSPECIFIED:
      break;
    default:
      return true;
  }
  if (http_status != 0) {
    // 408 and 429 are worth another try; other 4xx and success are not.
    if (http_status == 408 || http_status == 429) return true;
    return http_status >= 500;
  }
  if (grpc_code.has_value()) {
    switch (static_cast<grpc::StatusCode>(*grpc_code)) {
      case grpc::StatusCode::DEADLINE_EXCEEDED:
      case grpc::StatusCode::UNAVAILABLE:
      case grpc::StatusCode::INTERNAL:
      case grpc::StatusCode::UNKNOWN:
      case grpc::StatusCode::DATA_LOSS:
      case grpc::StatusCode::RESOURCE_EXHAUSTED:
      case grpc::StatusCode::ABORTED:
        return true;
      default:
        return false;
    }
  }
  return false;
}

// --- Client::Impl ---------------------------------------------------------

class Client::Impl {
 public:
  // REQUIRES: options validated by Client::Create.
  explicit Impl(ClientOptions options)
      : options_(WithDefaults(std::move(options))),
        channel_(options_.channel != nullptr
                     ? options_.channel
                     : grpc::CreateCustomChannel(
                           options_.target, grpc::InsecureChannelCredentials(),
                           ClientChannelArguments())),
        stub_(v1::Breaker::NewStub(channel_)),
        presence_log_(options_.log, &clock_, &timer_),
        acquire_log_(options_.log, &clock_, &timer_),
        report_log_(options_.log, &clock_, &timer_),
        presence_(PresenceOptions(options_, channel_, &presence_log_,
                                  [this] { OnSidecarBack(); })) {
    channel_->GetState(/*try_to_connect=*/true);
    if (options_.watch) watch_thread_ = std::thread([this] { WatchLoop(); });
  }

  ~Impl() { Close(); }

  // See Client::Close.
  void Close() {
    if (closed_.exchange(true)) return;
    // Refuses the callers waiting for a place (but late permits going back).
    window_.Close();
    // The decision RPCs still open end (at most decision_timeout +
    // kLateAnswer after they were sent), and the late permits they brought
    // are reported, before anything they use goes.
    {
      absl::MutexLock lock(&calls_->mu);
      calls_->mu.Await(absl::Condition(&CallsInFlight::None, calls_.get()));
    }
    StopLatePermits();
    {
      absl::MutexLock lock(&mu_);
      stopping_ = true;
      if (watch_context_ != nullptr) watch_context_->TryCancel();
    }
    if (watch_thread_.joinable()) watch_thread_.join();
    presence_.Stop();
    // Drops a held-back log line; the logs are destroyed after this.
    timer_.Stop();
  }

  bool closed() const { return closed_.load(std::memory_order_acquire); }

  // A local refusal for `dependency` if the Watch cache knows it is open
  // (and enforced), counted.
  std::optional<Decision> LocalRefusal(absl::string_view dependency) {
    if (!options_.watch) return std::nullopt;
    std::optional<Decision> d;
    {
      // Shared: every decision reads the cache.
      absl::ReaderMutexLock lock(&mu_);
      d = cache_.Refusal(dependency, clock_.Now());
    }
    if (d.has_value()) {
      local_rejections_.fetch_add(1, std::memory_order_relaxed);
    }
    return d;
  }

  // The decision made at once, with no RPC, while breakerd is away;
  // nullopt while it is present.
  std::optional<Decision> AwayDecision(absl::string_view dependency) {
    if (!presence_.away()) return std::nullopt;
    return NoRpcDecision(dependency);
  }

  // The decision for a caller that did not send its RPC because breakerd is
  // away (also: marked away while the caller waited for the window),
  // counted in away_decisions.
  Decision NoRpcDecision(absl::string_view dependency) {
    away_decisions_.fetch_add(1, std::memory_order_relaxed);
    return FailDecision(std::string(dependency));
  }

  // The decision for an RPC sent at `sent_at` (clock_.Now()) that failed with
  // `status` (not INVALID_ARGUMENT): fail open or closed, counted. Breakerd
  // is away if the status says so (and the callers waiting for the window
  // decide at once), unless it was only late: a DEADLINE_EXCEEDED while
  // breakerd answered another RPC sent by this client (a burst on a loaded
  // machine, not a hung sidecar). Other errors, and lateness, are logged on
  // change.
  Decision TroubleDecision(std::string dependency, const grpc::Status& status,
                           absl::Duration sent_at) {
    const bool late =
        status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED &&
        AnsweredSince(sent_at);
    if (MeansAway(status) && !late) {
      presence_.MarkAway(status);
      window_.Flush();
    } else if (!acquire_log_.wrong()) {
      acquire_log_.Wrong(absl::StrCat(
          "breakerd at ", options_.target, " answered Acquire with ",
          Describe(status),
          late ? " (late: it answered other calls meanwhile, so it is not "
                 "marked away)"
               : "",
          "; ", FailModeName(options_.fail_mode)));
    }
    return FailDecision(std::move(dependency));
  }

  // Acquire or AcquireFirst answered in time (a decision or
  // INVALID_ARGUMENT; the answer is noted by Decide's callback).
  void SidecarAnswered() {
    if (acquire_log_.wrong()) {
      acquire_log_.Right(absl::StrCat("breakerd at ", options_.target,
                                      " answers Acquire again"));
    }
  }

  bool SidecarAway() const { return presence_.away(); }

  // Sends `call->request` and waits for the answer at most
  // decision_timeout: returns the RPC's status (the answer in
  // call->response), or DEADLINE_EXCEEDED once the caller stops waiting.
  // *sent_at: when it was sent (clock_.Now()). The RPC stays open kLateAnswer
  // longer: an answer then is noted (AnsweredSince), and a permit in it is
  // reported OUTCOME_CANCELLED (ReturnLatePermit).
  // REQUIRES: the caller holds a place in the window.
  grpc::Status Decide(const std::shared_ptr<AcquireCall>& call,
                      absl::Duration* sent_at) {
    return Decide(call, sent_at, [this](auto&&... args) {
      stub_->async()->Acquire(std::forward<decltype(args)>(args)...);
    });
  }
  grpc::Status Decide(const std::shared_ptr<AcquireFirstCall>& call,
                      absl::Duration* sent_at) {
    return Decide(call, sent_at, [this](auto&&... args) {
      stub_->async()->AcquireFirst(std::forward<decltype(args)>(args)...);
    });
  }

  // Sends a Report (see Client::Report). A `late` one returns a permit that
  // came after its caller stopped waiting: it is sent even while breakerd
  // is away or the client closing (lane kLatePermit), with a deadline
  // kLateAnswer longer than decision_timeout (no caller waits for it).
  // Another, made while breakerd is away, is held (Hold) and sent once it
  // is back.
  absl::StatusOr<v1::ReportResponse> SendReport(absl::string_view dependency,
                                                uint64_t permit,
                                                const Outcome& outcome,
                                                absl::Duration latency,
                                                bool late) {
    if (!late && closed()) {
      CountClosedReport();
      return ClosedError();
    }
    v1::ReportRequest request;
    request.set_dependency(std::string(dependency));
    request.set_permit(permit);
    request.set_outcome(outcome.outcome);
    request.set_http_status(outcome.http_status);
    if (outcome.grpc_code.has_value()) {
      request.set_grpc_code(*outcome.grpc_code);
    }
    ToProto(std::max(latency, absl::ZeroDuration()), request.mutable_latency());
    if (outcome.retry_after > absl::ZeroDuration()) {
      ToProto(outcome.retry_after, request.mutable_retry_after());
    }
    return Send(std::move(request),
                late ? ReportKind::kLatePermit : ReportKind::kCaller);
  }

  std::shared_ptr<grpc::Channel> channel() { return channel_; }
  internal::SendWindow* window() { return &window_; }

  // The outcome to report for a guarded call's status.
  // REQUIRES: the caller handles an exception from the classifier.
  Outcome Classify(const absl::Status& status) const {
    return options_.classifier ? options_.classifier(status)
                               : Outcome::FromStatus(status);
  }

  // Counts a Report that was not sent because the client is closed.
  void CountClosedReport() {
    report_errors_.fetch_add(1, std::memory_order_relaxed);
  }

  void CountReport(const absl::Status& status) {
    if (status.ok()) {
      NoteAnswer();
      if (report_log_.wrong()) {
        report_log_.Right("Reports reach breakerd again");
      }
      return;
    }
    report_errors_.fetch_add(1, std::memory_order_relaxed);
    if (!report_log_.wrong()) {
      report_log_.Wrong(absl::StrCat("Report failed (", Describe(status),
                                     "); counted in report_errors"));
    }
  }

  std::optional<v1::State> CachedState(absl::string_view dependency) const {
    absl::ReaderMutexLock lock(&mu_);
    return cache_.State(dependency);
  }

  bool WatchConnected() const {
    absl::MutexLock lock(&mu_);
    return watch_connected_;
  }

  ClientStats stats() const {
    ClientStats s;
    s.fail_open = fail_open_.load(std::memory_order_relaxed);
    s.fail_closed = fail_closed_.load(std::memory_order_relaxed);
    s.local_rejections = local_rejections_.load(std::memory_order_relaxed);
    s.report_errors = report_errors_.load(std::memory_order_relaxed);
    s.watch_reconnects = watch_reconnects_.load(std::memory_order_relaxed);
    s.away_decisions = away_decisions_.load(std::memory_order_relaxed);
    return s;
  }

  absl::Duration Jitter(absl::Duration upper) {
    absl::MutexLock lock(&rng_mu_);
    return absl::Nanoseconds(
        absl::Uniform<int64_t>(rng_, 0, absl::ToInt64Nanoseconds(upper) + 1));
  }

 private:
  static ClientOptions WithDefaults(ClientOptions options) {
    if (!options.log) {
      options.log = [](absl::string_view line) {
        std::cerr << "breakerd client: " << line << std::endl;
      };
    }
    return options;
  }

  static internal::SidecarPresence::Options PresenceOptions(
      const ClientOptions& options, std::shared_ptr<grpc::Channel> channel,
      internal::ChangeLog* log, std::function<void()> on_back) {
    internal::SidecarPresence::Options p;
    p.channel = std::move(channel);
    p.probe_timeout = options.decision_timeout;
    p.probe_interval = options.away_probe_interval;
    p.target = options.target;
    p.while_away = std::string(FailModeName(options.fail_mode));
    p.log = log;
    p.on_back = std::move(on_back);
    return p;
  }

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

  // A permit that came after its caller stopped waiting: to be reported
  // OUTCOME_CANCELLED.
  struct LatePermit {
    std::string dependency;
    uint64_t permit = 0;
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

  // Sends `request` through the window (see SendReport), or holds it.
  absl::StatusOr<v1::ReportResponse> Send(v1::ReportRequest request,
                                          ReportKind kind) {
    const bool late = kind == ReportKind::kLatePermit;
    if (!late && SidecarAway()) return Hold(std::move(request));
    switch (window_.Enter(late ? internal::SendWindow::Lane::kLatePermit
                               : internal::SendWindow::Lane::kReport)) {
      case internal::SendWindow::Entry::kClosed:
        CountClosedReport();
        return ClosedError();
      case internal::SendWindow::Entry::kFlushed:
        return Hold(std::move(request));
      case internal::SendWindow::Entry::kEntered:
        break;
    }
    v1::ReportResponse response;
    absl::Status status;
    {
      WindowPlace place(&window_);
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() +
                       absl::ToChronoNanoseconds(options_.decision_timeout +
                                                 (kind == ReportKind::kCaller
                                                      ? absl::ZeroDuration()
                                                      : kLateAnswer)));
      status = FromGrpc(stub_->Report(&ctx, request, &response));
    }
    CountReport(status);
    if (!status.ok()) return status;
    return response;
  }

  // Holds a Report made while breakerd is away, for the report thread to
  // send once it is back (OnSidecarBack): OK with an empty response, not an
  // error. Past kMaxHeldReports the oldest held is dropped, counted. Once
  // Close has stopped the report thread, dropped and counted
  // (FAILED_PRECONDITION).
  absl::StatusOr<v1::ReportResponse> Hold(v1::ReportRequest request) {
    bool closing = false;
    bool dropped_oldest = false;
    {
      absl::MutexLock lock(&late_mu_);
      closing = late_stopping_;
      if (!closing) {
        if (held_.size() >= kMaxHeldReports) {
          held_.pop_front();
          dropped_oldest = true;
        }
        held_.push_back(std::move(request));
        // Back since the caller found it away (its OnSidecarBack may have
        // run before this report was held): sent now.
        if (!presence_.away()) held_due_ = true;
        late_cv_.Signal();
        StartReportThread();
      }
    }
    if (closing) {
      CountClosedReport();
      return ClosedError();
    }
    if (dropped_oldest) {
      CountReport(absl::ResourceExhaustedError(
          absl::StrCat("breakerd away: more than ", kMaxHeldReports,
                       " Reports held, the oldest dropped")));
    }
    return v1::ReportResponse();
  }

  // breakerd is back (SidecarPresence's on_back): the report thread sends
  // the Reports held.
  void OnSidecarBack() {
    absl::MutexLock lock(&late_mu_);
    if (held_.empty()) return;
    held_due_ = true;
    late_cv_.Signal();
  }

  // Starts the report thread, once.
  void StartReportThread() ABSL_EXCLUSIVE_LOCKS_REQUIRED(late_mu_) {
    if (!late_thread_.joinable()) {
      late_thread_ = std::thread([this] { ReportLoop(); });
    }
  }

  // See the public Decide; `start` starts the RPC with the stub's callback
  // API.
  template <typename Call, typename Start>
  grpc::Status Decide(const std::shared_ptr<Call>& call,
                      absl::Duration* sent_at, Start start) {
    {
      absl::MutexLock lock(&calls_->mu);
      ++calls_->count;
    }
    call->ctx.set_deadline(
        std::chrono::system_clock::now() +
        absl::ToChronoNanoseconds(options_.decision_timeout + kLateAnswer));
    *sent_at = clock_.Now();
    start(&call->ctx, &call->request, &call->response,
          [this, call, calls = calls_](grpc::Status status) {
            OnDecisionAnswer(*call, std::move(status));
            // The last use of the Impl, which Close waits for.
            absl::MutexLock lock(&calls->mu);
            --calls->count;
          });
    absl::MutexLock lock(&call->mu);
    if (!call->mu.AwaitWithTimeout(absl::Condition(&call->done),
                                   options_.decision_timeout)) {
      call->abandoned = true;
      return grpc::Status(
          grpc::StatusCode::DEADLINE_EXCEEDED,
          absl::StrCat("no answer within ",
                       absl::FormatDuration(options_.decision_timeout),
                       " of sending"));
    }
    return call->status;
  }

  // A decision RPC ended with `status`: the answer is noted, and handed to
  // the caller waiting; if the caller no longer waits, a permit in it goes
  // back to breakerd. In time, nothing of the Impl is used once the caller
  // is released.
  template <typename Call>
  void OnDecisionAnswer(Call& call, grpc::Status status) {
    if (status.ok() ||
        status.error_code() == grpc::StatusCode::INVALID_ARGUMENT) {
      NoteAnswer();
    }
    bool late = false;
    {
      absl::MutexLock lock(&call.mu);
      late = call.abandoned;
      call.status = status;
      call.done = true;
    }
    if (late && status.ok() && call.response.allowed() &&
        call.response.permit() != 0) {
      ReturnLatePermit(GrantedDependency(call.request, call.response),
                       call.response.permit());
    }
  }

  // Queues a late permit for the late-permit thread (started with the
  // first), which reports it OUTCOME_CANCELLED.
  void ReturnLatePermit(std::string dependency, uint64_t permit) {
    absl::MutexLock lock(&late_mu_);
    if (late_stopping_) {
      // Close is past waiting for the RPCs (an Acquire started after it):
      // too late to report.
      report_errors_.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    late_permits_.push_back({std::move(dependency), permit});
    late_cv_.Signal();
    StartReportThread();
  }

  // The report thread: reports the late permits, one at a time, and the
  // Reports held while away once breakerd is back (through the window's
  // report lane), until stopped with no late permit left.
  void ReportLoop() {
    while (true) {
      std::optional<LatePermit> late;
      std::deque<v1::ReportRequest> held;
      {
        absl::MutexLock lock(&late_mu_);
        while (late_permits_.empty() && !late_stopping_ &&
               !(held_due_ && !held_.empty())) {
          late_cv_.Wait(&late_mu_);
        }
        if (!late_permits_.empty()) {
          late = std::move(late_permits_.front());
          late_permits_.pop_front();
        } else if (late_stopping_) {
          // The held ones are StopLatePermits' to count.
          return;
        } else {
          held.swap(held_);
          held_due_ = false;
        }
      }
      if (late.has_value()) {
        // The call was never made: no latency.
        SendReport(late->dependency, late->permit,
                   Outcome::Of(v1::OUTCOME_CANCELLED), absl::ZeroDuration(),
                   /*late=*/true)
            .IgnoreError();
      }
      for (v1::ReportRequest& request : held) {
        Send(std::move(request), ReportKind::kHeld).IgnoreError();
      }
    }
  }

  // Reports the late permits queued, joins the report thread, and drops
  // the Reports still held (counted).
  void StopLatePermits() {
    std::thread thread;
    {
      absl::MutexLock lock(&late_mu_);
      late_stopping_ = true;
      late_cv_.SignalAll();
      thread = std::move(late_thread_);
    }
    if (thread.joinable()) thread.join();
    absl::MutexLock lock(&late_mu_);
    report_errors_.fetch_add(held_.size(), std::memory_order_relaxed);
    held_.clear();
  }

  // An Acquire, AcquireFirst or Report RPC was answered.
  void NoteAnswer() {
    last_answer_ns_.store(absl::ToInt64Nanoseconds(clock_.Now()),
                          std::memory_order_relaxed);
  }

  // Whether an RPC was answered after `sent_at` (a clock_.Now()).
  bool AnsweredSince(absl::Duration sent_at) const {
    return last_answer_ns_.load(std::memory_order_relaxed) >
           absl::ToInt64Nanoseconds(sent_at);
  }

  // Fail open or closed, counted.
  Decision FailDecision(std::string dependency) {
    Decision d;
    d.dependency = std::move(dependency);
    if (options_.fail_mode == FailMode::kOpen) {
      fail_open_.fetch_add(1, std::memory_order_relaxed);
      d.allowed = true;
      d.source = DecisionSource::kFailOpen;
    } else {
      fail_closed_.fetch_add(1, std::memory_order_relaxed);
      d.source = DecisionSource::kFailClosed;
    }
    return d;
  }

  // One Watch stream at a time: read into the cache until it ends, clear
  // the cache, wait a jittered backoff, reconnect; until the client stops.
  void WatchLoop() {
    absl::Duration backoff = options_.watch_backoff_initial;
    while (true) {
      grpc::ClientContext ctx;
      {
        absl::MutexLock lock(&mu_);
        if (stopping_) return;
        watch_context_ = &ctx;
      }
      std::unique_ptr<grpc::ClientReader<v1::StateChange>> reader =
          stub_->Watch(&ctx, v1::WatchRequest());
      // breakerd sends its headers, marked, once the stream is subscribed.
      reader->WaitForInitialMetadata();
      bool live = false;
      {
        absl::MutexLock lock(&mu_);
        watch_connected_ = live =
            !stopping_ &&
            ctx.GetServerInitialMetadata().count(kWatchSubscribedHeader) > 0;
      }
      v1::StateChange change;
      while (reader->Read(&change)) {
        {
          absl::MutexLock lock(&mu_);
          watch_connected_ = live = true;
          cache_.Apply(change, clock_.Now());
        }
        presence_.MarkPresent("Watch stream");
      }
      (void)reader->Finish();
      {
        absl::MutexLock lock(&mu_);
        watch_context_ = nullptr;
        cache_.Clear();
        watch_connected_ = false;
        if (stopping_) return;
      }
      if (live) backoff = options_.watch_backoff_initial;
      watch_reconnects_.fetch_add(1, std::memory_order_relaxed);
      const absl::Duration wait = Jitter(backoff);
      backoff = std::min(backoff * 2, options_.watch_backoff_max);
      absl::MutexLock lock(&mu_);
      mu_.AwaitWithTimeout(absl::Condition(&stopping_), wait);
      if (stopping_) return;
    }
  }

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
  internal::SendWindow window_;
  internal::SidecarPresence presence_;

  std::atomic<bool> closed_{false};
  const std::shared_ptr<CallsInFlight> calls_ =
      std::make_shared<CallsInFlight>();

  absl::Mutex late_mu_;
  absl::CondVar late_cv_;
  std::deque<LatePermit> late_permits_ ABSL_GUARDED_BY(late_mu_);
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
  std::atomic<uint64_t> watch_reconnects_{0};
  std::atomic<uint64_t> away_decisions_{0};

  absl::Mutex rng_mu_;
  absl::BitGen rng_ ABSL_GUARDED_BY(rng_mu_);

  mutable absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool watch_connected_ ABSL_GUARDED_BY(mu_) = false;
  grpc::ClientContext* watch_context_ ABSL_GUARDED_BY(mu_) = nullptr;
  internal::WatchCache cache_ ABSL_GUARDED_BY(mu_);
  std::thread watch_thread_;
};

// --- Permit ---------------------------------------------------------------

Permit::Permit(Client* client, Decision decision)
    : client_(client),
      decision_(std::move(decision)),
      acquired_at_(MonoNow()) {}

Permit::Permit(Permit&& other) noexcept
    : client_(other.client_),
      decision_(std::move(other.decision_)),
      acquired_at_(other.acquired_at_),
      reported_(other.reported_) {
  other.reported_ = true;
}

Permit& Permit::operator=(Permit&& other) noexcept {
  if (this != &other) {
    if (!reported_) Report(Outcome::Of(v1::OUTCOME_CANCELLED)).IgnoreError();
    client_ = other.client_;
    decision_ = std::move(other.decision_);
    acquired_at_ = other.acquired_at_;
    reported_ = other.reported_;
    other.reported_ = true;
  }
  return *this;
}

Permit::~Permit() {
  if (!reported_) Report(Outcome::Of(v1::OUTCOME_CANCELLED)).IgnoreError();
}

absl::StatusOr<v1::ReportResponse> Permit::Report(
    const Outcome& outcome, std::optional<absl::Duration> latency) {
  if (reported_ || !decision_.allowed || decision_.permit == 0) {
    reported_ = true;
    return v1::ReportResponse();
  }
  reported_ = true;
  return client_->Report(decision_.dependency, decision_.permit, outcome,
                         latency.value_or(MonoNow() - acquired_at_));
}

// --- Client ---------------------------------------------------------------

absl::StatusOr<std::unique_ptr<Client>> Client::Create(ClientOptions options) {
  if (options.channel == nullptr && options.target.empty()) {
    const char* env = std::getenv("BREAKERD_ADDR");
    options.target = env != nullptr && *env != '\0' ? env : kDefaultTarget;
  }
  if (options.decision_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        "decision_timeout: must be positive (default 20ms)");
  }
  if (options.watch_backoff_initial <= absl::ZeroDuration() ||
      options.watch_backoff_max < options.watch_backoff_initial) {
    return absl::InvalidArgumentError(
        "watch_backoff_initial: must be positive and at most "
        "watch_backoff_max");
  }
  if (options.away_probe_interval <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        "away_probe_interval: must be positive (default 100ms)");
  }
  return std::unique_ptr<Client>(
      new Client(std::make_unique<Impl>(std::move(options))));
}

Client::Client(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Client::~Client() = default;

void Client::Close() { impl_->Close(); }

absl::StatusOr<Permit> Client::Acquire(absl::string_view dependency,
                                       uint32_t attempt) {
  if (impl_->closed()) return ClosedError();
  if (std::optional<Decision> d = impl_->LocalRefusal(dependency)) {
    return Permit(this, std::move(*d));
  }
  if (std::optional<Decision> d = impl_->AwayDecision(dependency)) {
    return Permit(this, std::move(*d));
  }
  switch (impl_->window()->Enter(internal::SendWindow::Lane::kDecision)) {
    case internal::SendWindow::Entry::kClosed:
      return ClosedError();
    case internal::SendWindow::Entry::kFlushed:
      return Permit(this, impl_->NoRpcDecision(dependency));
    case internal::SendWindow::Entry::kEntered:
      break;
  }
  auto call = std::make_shared<AcquireCall>();
  call->request.set_dependency(std::string(dependency));
  call->request.set_attempt(attempt);
  // The place is given back on return: after a timeout has marked breakerd
  // away, so that no caller waiting for it sends an RPC meanwhile.
  WindowPlace place(impl_->window());
  absl::Duration sent_at;
  const grpc::Status status = impl_->Decide(call, &sent_at);
  if (status.ok()) {
    impl_->SidecarAnswered();
    return Permit(this, DecisionFrom(call->response, std::string(dependency)));
  }
  if (status.error_code() == grpc::StatusCode::INVALID_ARGUMENT) {
    impl_->SidecarAnswered();
    return FromGrpc(status);
  }
  return Permit(
      this, impl_->TroubleDecision(std::string(dependency), status, sent_at));
}

absl::StatusOr<Permit> Client::AcquireFirst(
    const std::vector<std::string>& dependencies, uint32_t attempt) {
  if (impl_->closed()) return ClosedError();
  if (dependencies.empty()) {
    return absl::InvalidArgumentError(
        "dependencies: name at least one dependency");
  }
  auto call = std::make_shared<AcquireFirstCall>();
  v1::AcquireFirstRequest& request = call->request;
  request.set_attempt(attempt);
  std::optional<Decision> first_refusal;
  for (const std::string& dependency : dependencies) {
    std::optional<Decision> local = impl_->LocalRefusal(dependency);
    if (local.has_value()) {
      if (!first_refusal.has_value()) first_refusal = std::move(local);
    } else {
      request.add_dependencies(dependency);
    }
  }
  if (request.dependencies().empty() && first_refusal.has_value()) {
    first_refusal->dependency.clear();
    return Permit(this, std::move(*first_refusal));
  }
  if (std::optional<Decision> d =
          impl_->AwayDecision(request.dependencies(0))) {
    return Permit(this, std::move(*d));
  }
  switch (impl_->window()->Enter(internal::SendWindow::Lane::kDecision)) {
    case internal::SendWindow::Entry::kClosed:
      return ClosedError();
    case internal::SendWindow::Entry::kFlushed:
      return Permit(this, impl_->NoRpcDecision(request.dependencies(0)));
    case internal::SendWindow::Entry::kEntered:
      break;
  }
  // The place is given back on return: after a timeout has marked breakerd
  // away, so that no caller waiting for it sends an RPC meanwhile.
  WindowPlace place(impl_->window());
  absl::Duration sent_at;
  const grpc::Status status = impl_->Decide(call, &sent_at);
  if (status.ok()) {
    const v1::AcquireFirstResponse& response = call->response;
    impl_->SidecarAnswered();
    return Permit(this, DecisionFrom(response, response.dependency()));
  }
  if (status.error_code() == grpc::StatusCode::INVALID_ARGUMENT) {
    impl_->SidecarAnswered();
    return FromGrpc(status);
  }
  return Permit(
      this, impl_->TroubleDecision(request.dependencies(0), status, sent_at));
}

absl::StatusOr<v1::ReportResponse> Client::Report(absl::string_view dependency,
                                                  uint64_t permit,
                                                  const Outcome& outcome,
                                                  absl::Duration latency) {
  return impl_->SendReport(dependency, permit, outcome, latency,
                           /*late=*/false);
}

absl::Status Client::RunGranted(Permit& permit,
                                absl::FunctionRef<absl::Status()> fn,
                                Outcome* outcome) {
  absl::Status result;
  try {
    result = fn();
  } catch (...) {
    // Anything raised by the call is a server error (client/README.md,
    // "Outcome helpers").
    permit.Report(Outcome::Of(v1::OUTCOME_SERVER_ERROR)).IgnoreError();
    throw;
  }
  try {
    *outcome = impl_->Classify(result);
  } catch (...) {
    permit.Report(Outcome::FromStatus(result)).IgnoreError();
    throw;
  }
  permit.Report(*outcome).IgnoreError();
  return result;
}

absl::Status Client::Do(absl::string_view dependency,
                        absl::FunctionRef<absl::Status()> fn,
                        uint32_t attempt) {
  absl::StatusOr<Permit> permit = Acquire(dependency, attempt);
  if (!permit.ok()) return permit.status();
  if (!permit->allowed()) return RefusedStatus(permit->decision());
  Outcome outcome;
  return RunGranted(*permit, fn, &outcome);
}

absl::Status Client::Retry(absl::string_view dependency,
                           absl::FunctionRef<absl::Status()> fn,
                           const RetryOptions& options) {
  absl::Status last = absl::InvalidArgumentError(
      "max_attempts: must be at least 1 (default 3)");
  absl::Duration ceiling = options.base;
  for (int attempt = 0; attempt < options.max_attempts; ++attempt) {
    if (attempt > 0) {
      absl::SleepFor(impl_->Jitter(std::min(ceiling, options.max_backoff)));
      ceiling *= 2;
    }
    absl::StatusOr<Permit> permit =
        Acquire(dependency, static_cast<uint32_t>(attempt));
    if (!permit.ok()) return permit.status();
    if (!permit->allowed()) {
      return RefusedStatus(
          permit->decision(),
          attempt > 0 ? absl::StrCat("attempt ", attempt + 1,
                                     " not made; last error: ", last.ToString())
                      : "");
    }
    Outcome outcome;
    last = RunGranted(*permit, fn, &outcome);
    if (last.ok() || !outcome.Retryable()) return last;
  }
  return last;
}

absl::Status Client::First(
    const std::vector<std::string>& dependencies,
    absl::FunctionRef<absl::Status(absl::string_view)> fn) {
  std::vector<std::string> remaining = dependencies;
  absl::Status last_failure;
  while (!remaining.empty()) {
    absl::StatusOr<Permit> permit = AcquireFirst(remaining);
    if (!permit.ok()) return permit.status();
    if (!permit->allowed()) {
      return RefusedStatus(
          permit->decision(),
          last_failure.ok()
              ? ""
              : absl::StrCat("last error: ", last_failure.ToString()));
    }
    const std::string granted = permit->decision().dependency;
    Outcome outcome;
    absl::Status result = RunGranted(
        *permit, [&] { return fn(granted); }, &outcome);
    // Only an outcome worth retrying is worth trying elsewhere: a bad
    // request would be as bad for the next dependency.
    if (result.ok() || !outcome.Retryable()) return result;
    last_failure = std::move(result);
    auto it = std::find(remaining.begin(), remaining.end(), granted);
    remaining.erase(remaining.begin(),
                    it == remaining.end() ? remaining.end() : it + 1);
  }
  return last_failure;
}

std::optional<v1::State> Client::CachedState(
    absl::string_view dependency) const {
  return impl_->CachedState(dependency);
}

bool Client::WatchConnected() const { return impl_->WatchConnected(); }

ClientStats Client::stats() const { return impl_->stats(); }

bool Client::WaitForConnected(absl::Duration timeout) {
  if (impl_->closed()) return false;
  return impl_->channel()->WaitForConnected(std::chrono::system_clock::now() +
                                            absl::ToChronoNanoseconds(timeout));
}

}  // namespace breakerd::client

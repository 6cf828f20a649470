#include "breakerd/client.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/random/random.h"
#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "breakerd/internal/proto_duration.h"
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
// breakerd's Watch marks the headers of a subscribed stream with this.
constexpr char kWatchSubscribedHeader[] = "breakerd-watch-subscribed";

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

// "DEADLINE_EXCEEDED: too slow".
std::string Describe(const grpc::Status& s) {
  return absl::StrCat(
      absl::StatusCodeToString(static_cast<absl::StatusCode>(s.error_code())),
      ": ", s.error_message());
}

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
  return FromGrpcCode(static_cast<grpc::StatusCode>(status.code()));
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
      : options_(WithDefaultLog(std::move(options))),
        channel_(options_.channel != nullptr
                     ? options_.channel
                     : grpc::CreateCustomChannel(
                           options_.target, grpc::InsecureChannelCredentials(),
                           ClientChannelArguments())),
        stub_(v1::Breaker::NewStub(channel_)),
        presence_(PresenceOptions(options_, channel_)) {
    channel_->GetState(/*try_to_connect=*/true);
    if (options_.watch) watch_thread_ = std::thread([this] { WatchLoop(); });
  }

  ~Impl() {
    {
      absl::MutexLock lock(&mu_);
      stopping_ = true;
      if (watch_context_ != nullptr) watch_context_->TryCancel();
    }
    if (watch_thread_.joinable()) watch_thread_.join();
  }

  // A local refusal for `dependency` if the Watch cache knows it is open
  // (and enforced), counted.
  std::optional<Decision> LocalRefusal(absl::string_view dependency) {
    if (!options_.watch) return std::nullopt;
    std::optional<Decision> d;
    {
      absl::MutexLock lock(&mu_);
      d = cache_.Refusal(dependency, MonoNow());
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
    away_decisions_.fetch_add(1, std::memory_order_relaxed);
    return FailDecision(std::string(dependency));
  }

  // The decision for an RPC that failed with `status` (not
  // INVALID_ARGUMENT): fail open or closed, counted; breakerd is away if the
  // status says so, else the error is logged on change.
  Decision TroubleDecision(std::string dependency, const grpc::Status& status) {
    if (MeansAway(status)) {
      presence_.MarkAway(status);
    } else if (!sidecar_erroring_.exchange(true)) {
      options_.log(absl::StrCat("breakerd at ", options_.target,
                                " answered Acquire with ", Describe(status),
                                "; ", FailModeName(options_.fail_mode)));
    }
    return FailDecision(std::move(dependency));
  }

  void SidecarAnswered() {
    if (sidecar_erroring_.exchange(false)) {
      options_.log(absl::StrCat("breakerd at ", options_.target,
                                " answers Acquire again"));
    }
  }

  bool SidecarAway() const { return presence_.away(); }

  void SetDeadline(grpc::ClientContext* ctx) const {
    ctx->set_deadline(std::chrono::system_clock::now() +
                      absl::ToChronoNanoseconds(options_.decision_timeout));
  }

  v1::Breaker::Stub* stub() { return stub_.get(); }
  std::shared_ptr<grpc::Channel> channel() { return channel_; }

  void CountReport(const grpc::Status& status) {
    if (status.ok()) {
      if (report_failing_.exchange(false)) {
        options_.log("Reports reach breakerd again");
      }
      return;
    }
    report_errors_.fetch_add(1, std::memory_order_relaxed);
    if (!report_failing_.exchange(true)) {
      options_.log(absl::StrCat("Report failed (", Describe(status),
                                "); counted in report_errors"));
    }
  }

  std::optional<v1::State> CachedState(absl::string_view dependency) const {
    absl::MutexLock lock(&mu_);
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
  static ClientOptions WithDefaultLog(ClientOptions options) {
    if (!options.log) {
      options.log = [](absl::string_view line) {
        std::cerr << "breakerd client: " << line << std::endl;
      };
    }
    return options;
  }

  static internal::SidecarPresence::Options PresenceOptions(
      const ClientOptions& options, std::shared_ptr<grpc::Channel> channel) {
    internal::SidecarPresence::Options p;
    p.channel = std::move(channel);
    p.probe_timeout = options.decision_timeout;
    p.probe_interval = options.away_probe_interval;
    p.target = options.target;
    p.while_away = std::string(FailModeName(options.fail_mode));
    p.log = options.log;
    return p;
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
          cache_.Apply(change, MonoNow());
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

  internal::SidecarPresence presence_;

  // Acquire answered with an error that does not mean away (logged once).
  std::atomic<bool> sidecar_erroring_{false};
  std::atomic<bool> report_failing_{false};
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

absl::StatusOr<Permit> Client::Acquire(absl::string_view dependency,
                                       uint32_t attempt) {
  if (std::optional<Decision> d = impl_->LocalRefusal(dependency)) {
    return Permit(this, std::move(*d));
  }
  if (std::optional<Decision> d = impl_->AwayDecision(dependency)) {
    return Permit(this, std::move(*d));
  }
  v1::AcquireRequest request;
  request.set_dependency(std::string(dependency));
  request.set_attempt(attempt);
  v1::AcquireResponse response;
  grpc::ClientContext ctx;
  impl_->SetDeadline(&ctx);
  const grpc::Status status = impl_->stub()->Acquire(&ctx, request, &response);
  if (status.ok()) {
    impl_->SidecarAnswered();
    return Permit(this, DecisionFrom(response, std::string(dependency)));
  }
  if (status.error_code() == grpc::StatusCode::INVALID_ARGUMENT) {
    impl_->SidecarAnswered();
    return FromGrpc(status);
  }
  return Permit(this, impl_->TroubleDecision(std::string(dependency), status));
}

absl::StatusOr<Permit> Client::AcquireFirst(
    const std::vector<std::string>& dependencies, uint32_t attempt) {
  if (dependencies.empty()) {
    return absl::InvalidArgumentError(
        "dependencies: name at least one dependency");
  }
  v1::AcquireFirstRequest request;
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
  v1::AcquireFirstResponse response;
  grpc::ClientContext ctx;
  impl_->SetDeadline(&ctx);
  const grpc::Status status =
      impl_->stub()->AcquireFirst(&ctx, request, &response);
  if (status.ok()) {
    impl_->SidecarAnswered();
    return Permit(this, DecisionFrom(response, response.dependency()));
  }
  if (status.error_code() == grpc::StatusCode::INVALID_ARGUMENT) {
    impl_->SidecarAnswered();
    return FromGrpc(status);
  }
  return Permit(this, impl_->TroubleDecision(request.dependencies(0), status));
}

absl::StatusOr<v1::ReportResponse> Client::Report(absl::string_view dependency,
                                                  uint64_t permit,
                                                  const Outcome& outcome,
                                                  absl::Duration latency) {
  if (impl_->SidecarAway()) {
    const grpc::Status not_sent(grpc::StatusCode::UNAVAILABLE,
                                "breakerd away: Report not sent");
    impl_->CountReport(not_sent);
    return FromGrpc(not_sent);
  }
  v1::ReportRequest request;
  request.set_dependency(std::string(dependency));
  request.set_permit(permit);
  request.set_outcome(outcome.outcome);
  request.set_http_status(outcome.http_status);
  if (outcome.grpc_code.has_value()) request.set_grpc_code(*outcome.grpc_code);
  ToProto(std::max(latency, absl::ZeroDuration()), request.mutable_latency());
  if (outcome.retry_after > absl::ZeroDuration()) {
    ToProto(outcome.retry_after, request.mutable_retry_after());
  }
  v1::ReportResponse response;
  grpc::ClientContext ctx;
  impl_->SetDeadline(&ctx);
  const grpc::Status status = impl_->stub()->Report(&ctx, request, &response);
  impl_->CountReport(status);
  if (!status.ok()) return FromGrpc(status);
  return response;
}

absl::Status Client::Do(absl::string_view dependency,
                        absl::FunctionRef<absl::Status()> fn,
                        uint32_t attempt) {
  absl::StatusOr<Permit> permit = Acquire(dependency, attempt);
  if (!permit.ok()) return permit.status();
  if (!permit->allowed()) return RefusedStatus(permit->decision());
  absl::Status result = fn();
  permit->Report(Outcome::FromStatus(result)).IgnoreError();
  return result;
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
    last = fn();
    const Outcome outcome = Outcome::FromStatus(last);
    permit->Report(outcome).IgnoreError();
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
    absl::Status result = fn(granted);
    permit->Report(Outcome::FromStatus(result)).IgnoreError();
    if (result.ok()) return result;
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
  return impl_->channel()->WaitForConnected(std::chrono::system_clock::now() +
                                            absl::ToChronoNanoseconds(timeout));
}

}  // namespace breakerd::client

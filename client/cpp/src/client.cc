// Client: construction and Close, and the decisions (Acquire, AcquireFirst)
// with the RPCs behind them; Permit. The Reports are in reports.cc, the
// guards in guards.cc.
#include "breakerd/client.h"

#include <chrono>
#include <cstdlib>
#include <iostream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "breakerd/internal/convert.h"
#include "breakerd/internal/names.h"
#include "breakerd/internal/statuses.h"
#include "client_impl.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"

namespace breakerd::client {
namespace {

using internal::AcquireCall;
using internal::AcquireFirstCall;
using internal::ClosedError;
using internal::DecisionFrom;
using internal::Describe;
using internal::FromGrpc;
using internal::kLateAnswer;
using internal::SendWindow;
using internal::SetChain;
using internal::WindowPlace;

constexpr char kDefaultTarget[] = "127.0.0.1:50051";

// Monotonic time, for cooldown ends and latencies.
absl::Duration MonoNow() {
  return absl::FromChrono(std::chrono::steady_clock::now().time_since_epoch());
}

// The decision breakerd's answer to `request` is (for a late permit).
Decision Granted(const v1::AcquireRequest& request,
                 const v1::AcquireResponse& response) {
  return DecisionFrom(response, request.dependency());
}
Decision Granted(const v1::AcquireFirstRequest& request,
                 const v1::AcquireFirstResponse& response) {
  Decision d = DecisionFrom(response);
  SetChain(request, &d);
  return d;
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

// --- Client::Impl ---------------------------------------------------------

Client::Impl::Impl(ClientOptions options)
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
      batch_log_(options_.log, &clock_, &timer_),
      presence_(PresenceOptions(options_, channel_, &presence_log_,
                                [this] { OnSidecarBack(); })),
      local_decisions_(options_.watch && options_.local_decisions),
      batch_(NewClientId(), [this](bool urgent) {
        if (flusher_ != nullptr) flusher_->Wake(urgent);
      }) {
  channel_->GetState(/*try_to_connect=*/true);
  if (local_decisions_) {
    flusher_ = std::make_unique<internal::BatchFlusher>(FlusherOptions());
  }
  if (options_.watch) {
    internal::WatchStream::Options watch;
    watch.stub = stub_.get();
    watch.clock = &clock_;
    watch.backoff_initial = options_.watch_backoff_initial;
    watch.backoff_max = options_.watch_backoff_max;
    watch.jitter = [this](absl::Duration upper) { return Jitter(upper); };
    watch.on_message = [this] { presence_.MarkPresent("Watch stream"); };
    watch_ = std::make_unique<internal::WatchStream>(std::move(watch));
  }
}

void Client::Impl::Close() {
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
  StopBatches();
  if (watch_ != nullptr) watch_->Stop();
  presence_.Stop();
  // Drops a held-back log line; the logs are destroyed after this.
  timer_.Stop();
}

std::optional<Decision> Client::Impl::AwayDecision(
    absl::string_view dependency) {
  if (!presence_.away()) return std::nullopt;
  return NoRpcDecision(dependency);
}

Decision Client::Impl::NoRpcDecision(absl::string_view dependency) {
  away_decisions_.fetch_add(1, std::memory_order_relaxed);
  return FailDecision(std::string(dependency));
}

Decision Client::Impl::TroubleDecision(std::string dependency,
                                       const grpc::Status& status,
                                       absl::Duration sent_at) {
  NoteTrouble(status, sent_at);
  return FailDecision(std::move(dependency));
}

void Client::Impl::NoteTrouble(const grpc::Status& status,
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
}

void Client::Impl::SidecarAnswered() {
  if (acquire_log_.wrong()) {
    acquire_log_.Right(absl::StrCat("breakerd at ", options_.target,
                                    " answers Acquire again"));
  }
}

grpc::Status Client::Impl::Decide(const std::shared_ptr<AcquireCall>& call,
                                  absl::Duration* sent_at) {
  return Decide(call, sent_at, [this](auto&&... args) {
    stub_->async()->Acquire(std::forward<decltype(args)>(args)...);
  });
}

grpc::Status Client::Impl::Decide(const std::shared_ptr<AcquireFirstCall>& call,
                                  absl::Duration* sent_at) {
  return Decide(call, sent_at, [this](auto&&... args) {
    stub_->async()->AcquireFirst(std::forward<decltype(args)>(args)...);
  });
}

absl::Duration Client::Impl::Jitter(absl::Duration upper) {
  absl::MutexLock lock(&rng_mu_);
  return absl::Nanoseconds(
      absl::Uniform<int64_t>(rng_, 0, absl::ToInt64Nanoseconds(upper) + 1));
}

std::optional<State> Client::Impl::CachedState(
    absl::string_view dependency) const {
  if (watch_ == nullptr) return std::nullopt;
  return watch_->CachedState(dependency);
}

bool Client::Impl::WatchConnected() const {
  return watch_ != nullptr && watch_->connected();
}

ClientStats Client::Impl::stats() const {
  ClientStats s;
  s.fail_open = fail_open_.load(std::memory_order_relaxed);
  s.fail_closed = fail_closed_.load(std::memory_order_relaxed);
  s.local_rejections = local_rejections_.load(std::memory_order_relaxed);
  s.report_errors = report_errors_.load(std::memory_order_relaxed);
  s.watch_reconnects = watch_ != nullptr ? watch_->reconnects() : 0;
  s.away_decisions = away_decisions_.load(std::memory_order_relaxed);
  s.dropped_outcomes = batch_.dropped();
  return s;
}

ClientOptions Client::Impl::WithDefaults(ClientOptions options) {
  if (!options.log) {
    options.log = [](absl::string_view line) {
      std::cerr << "breakerd client: " << line << std::endl;
    };
  }
  return options;
}

internal::SidecarPresence::Options Client::Impl::PresenceOptions(
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

template <typename Call, typename Start>
grpc::Status Client::Impl::Decide(const std::shared_ptr<Call>& call,
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

template <typename Call>
void Client::Impl::OnDecisionAnswer(Call& call, grpc::Status status) {
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
    ReturnLatePermit(Granted(call.request, call.response));
  }
}

void Client::Impl::NoteAnswer() {
  last_answer_ns_.store(absl::ToInt64Nanoseconds(clock_.Now()),
                        std::memory_order_relaxed);
}

bool Client::Impl::AnsweredSince(absl::Duration sent_at) const {
  return last_answer_ns_.load(std::memory_order_relaxed) >
         absl::ToInt64Nanoseconds(sent_at);
}

Decision Client::Impl::FailDecision(std::string dependency) {
  Decision d;
  d.dependency = std::move(dependency);
  const bool open = options_.fail_mode == FailMode::kOpen;
  if (open) {
    fail_open_.fetch_add(1, std::memory_order_relaxed);
    d.allowed = true;
    d.source = DecisionSource::kFailOpen;
  } else {
    fail_closed_.fetch_add(1, std::memory_order_relaxed);
    d.source = DecisionSource::kFailClosed;
  }
  // breakerd counts them when it answers again.
  if (local_decisions_) {
    batch_.CountDecision(d.dependency,
                         open ? internal::ClientDecisionKind::kFailOpen
                              : internal::ClientDecisionKind::kFailClosed);
  }
  return d;
}

// --- Permit ---------------------------------------------------------------

Permit::Permit(Client* client, Decision decision,
               std::shared_ptr<internal::LocalSlot> local)
    : client_(client),
      decision_(std::move(decision)),
      local_(std::move(local)),
      acquired_at_(MonoNow()) {}

Permit::Permit(Permit&& other) noexcept
    : client_(other.client_),
      decision_(std::move(other.decision_)),
      local_(std::move(other.local_)),
      acquired_at_(other.acquired_at_),
      reported_(other.reported_) {
  other.reported_ = true;
}

Permit& Permit::operator=(Permit&& other) noexcept {
  if (this != &other) {
    if (!reported_) {
      Report(Outcome::Of(OutcomeKind::kCancelled)).IgnoreError();
    }
    client_ = other.client_;
    decision_ = std::move(other.decision_);
    local_ = std::move(other.local_);
    acquired_at_ = other.acquired_at_;
    reported_ = other.reported_;
    other.reported_ = true;
  }
  return *this;
}

Permit::~Permit() {
  if (!reported_) Report(Outcome::Of(OutcomeKind::kCancelled)).IgnoreError();
}

absl::StatusOr<ReportResult> Permit::Report(
    const Outcome& outcome, std::optional<absl::Duration> latency) {
  if (reported_ || !decision_.allowed) {
    reported_ = true;
    return ReportResult();
  }
  reported_ = true;
  if (local_ != nullptr) {
    return client_->impl_->ReportLocal(
        std::move(local_), outcome, latency.value_or(MonoNow() - acquired_at_),
        decision_.chain, decision_.tier);
  }
  if (decision_.permit == 0) return ReportResult();
  return client_->impl_->SendReport(decision_, outcome,
                                    latency.value_or(MonoNow() - acquired_at_),
                                    /*late=*/false);
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
  if (options.flush_interval <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        "flush_interval: must be positive (default 5ms)");
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
  Impl::CacheDecision local = impl_->DecideInCache(dependency, attempt);
  if (local.grant != nullptr) {
    Decision d = Impl::LocalGrantOf(dependency, *local.grant);
    return Permit(this, std::move(d), std::move(local.grant));
  }
  if (local.refusal.has_value()) return Permit(this, std::move(*local.refusal));
  return AcquireFromSidecar(dependency, attempt);
}

absl::StatusOr<Permit> Client::AcquireFromSidecar(absl::string_view dependency,
                                                  uint32_t attempt) {
  if (std::optional<Decision> d = impl_->AwayDecision(dependency)) {
    return Permit(this, std::move(*d));
  }
  switch (impl_->window()->Enter(SendWindow::Lane::kDecision)) {
    case SendWindow::Entry::kClosed:
      return ClosedError();
    case SendWindow::Entry::kFlushed:
      return Permit(this, impl_->NoRpcDecision(dependency));
    case SendWindow::Entry::kEntered:
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
    const std::vector<std::string>& dependencies, uint32_t attempt,
    const FirstOptions& options) {
  if (impl_->closed()) return ClosedError();
  if (dependencies.empty()) {
    return absl::InvalidArgumentError(
        "dependencies: name at least one dependency");
  }
  if (absl::Status s = internal::ValidateChain(options, dependencies.size());
      !s.ok()) {
    return s;
  }
  const bool named = options.chain.has_value();
  auto call = std::make_shared<AcquireFirstCall>();
  v1::AcquireFirstRequest& request = call->request;
  request.set_attempt(attempt);
  // The dependencies the Watch cache does not hold open, and its first
  // refusal. Without a name only those are sent; a named chain sends every
  // one, so that breakerd counts each decision, the ultimate fallback too.
  // A first attempt may be granted locally: the first dependency left
  // (with a name: the first one passed, at its tier).
  const bool may_grant = impl_->MayGrant(attempt);
  std::vector<std::string> usable;
  std::optional<Decision> first_refusal;
  std::vector<absl::string_view> known_open;
  std::shared_ptr<internal::LocalSlot> grant;
  for (size_t i = 0; i < dependencies.size(); ++i) {
    const std::string& dependency = dependencies[i];
    internal::CacheVerdict v = impl_->PeekCache(
        dependency, may_grant && (named ? i == 0 : usable.empty()));
    const bool refused = v.kind == internal::CacheVerdict::Kind::kRefuse;
    if (refused) {
      known_open.push_back(dependency);
      if (!first_refusal.has_value()) {
        first_refusal = Impl::LocalRefusalOf(dependency, v);
      }
    } else {
      if (v.kind == internal::CacheVerdict::Kind::kGrant && usable.empty()) {
        grant = std::move(v.slot);
      }
      usable.push_back(dependency);
    }
    if (named || !refused) request.add_dependencies(dependency);
  }
  if (grant != nullptr) {
    impl_->CountGrant(grant);
    Decision d = Impl::LocalGrantOf(usable[0], *grant);
    if (named) {
      d.chain = *options.chain;
      d.tier = options.first_tier;
      impl_->CountChainGrant(d.chain, d.tier);
    } else {
      for (absl::string_view dependency : known_open) {
        impl_->CountLocalRefusal(dependency);
      }
    }
    return Permit(this, std::move(d), std::move(grant));
  }
  if (named) {
    request.set_chain(*options.chain);
    request.set_first_tier(options.first_tier);
  }
  // The decision the client makes itself (without a name, or while
  // breakerd is away or does not answer): the dependencies the cache holds
  // open are refused locally (counted once), and with none left that is
  // the decision; else nullopt, and the first one left is the fail-open
  // one.
  bool counted = false;
  const auto local_refusal = [&]() -> std::optional<Decision> {
    if (!counted) {
      for (absl::string_view dependency : known_open) {
        impl_->CountLocalRefusal(dependency);
      }
    }
    counted = true;
    if (!usable.empty()) return std::nullopt;
    first_refusal->dependency.clear();
    return std::move(*first_refusal);
  };
  const auto permit = [&](Decision d) {
    SetChain(request, &d);
    return Permit(this, std::move(d));
  };
  if (!named || impl_->away()) {
    if (std::optional<Decision> d = local_refusal()) {
      return Permit(this, std::move(*d));
    }
    if (std::optional<Decision> d = impl_->AwayDecision(usable[0])) {
      return permit(std::move(*d));
    }
  }
  switch (impl_->window()->Enter(SendWindow::Lane::kDecision)) {
    case SendWindow::Entry::kClosed:
      return ClosedError();
    case SendWindow::Entry::kFlushed:
      if (std::optional<Decision> d = local_refusal()) {
        return Permit(this, std::move(*d));
      }
      return permit(impl_->NoRpcDecision(usable[0]));
    case SendWindow::Entry::kEntered:
      break;
  }
  // The place is given back on return: after a timeout has marked breakerd
  // away, so that no caller waiting for it sends an RPC meanwhile.
  WindowPlace place(impl_->window());
  absl::Duration sent_at;
  const grpc::Status status = impl_->Decide(call, &sent_at);
  if (status.ok()) {
    impl_->SidecarAnswered();
    return permit(DecisionFrom(call->response));
  }
  if (status.error_code() == grpc::StatusCode::INVALID_ARGUMENT) {
    impl_->SidecarAnswered();
    return FromGrpc(status);
  }
  impl_->NoteTrouble(status, sent_at);
  if (std::optional<Decision> d = local_refusal()) {
    return Permit(this, std::move(*d));
  }
  return permit(impl_->FailDecision(usable[0]));
}

absl::StatusOr<ReportResult> Client::Report(absl::string_view dependency,
                                            uint64_t permit,
                                            const Outcome& outcome,
                                            absl::Duration latency) {
  // Fail-open, or a local grant (its outcome goes through its Permit).
  if (permit == 0) return ReportResult();
  Decision granted;
  granted.allowed = true;
  granted.permit = permit;
  granted.dependency = std::string(dependency);
  return impl_->SendReport(granted, outcome, latency, /*late=*/false);
}

std::optional<State> Client::CachedState(absl::string_view dependency) const {
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

#include "server/service/health_service.h"

#include <atomic>
#include <cassert>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/service/convert.h"

namespace breakerd {

using grpc::health::v1::HealthCheckRequest;
using grpc::health::v1::HealthCheckResponse;

namespace {

constexpr HealthCheckResponse::ServingStatus kServing =
    HealthCheckResponse::SERVING;
constexpr HealthCheckResponse::ServingStatus kNotServing =
    HealthCheckResponse::NOT_SERVING;

absl::Status ValidateServiceName(const std::string& service) {
  if (service.size() > kMaxHealthServiceNameBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("service: at most ", kMaxHealthServiceNameBytes,
                     " bytes (got ", service.size(), ")"));
  }
  return absl::OkStatus();
}

}  // namespace

// One Health/Watch stream: the gRPC reactor plus the one status it has yet
// to send.
//
// Lifetime (as WatchHub's streams). Reference counted: gRPC holds one
// reference from construction until OnDone, and the service takes one
// (under its mutex, only while the stream is subscribed) for each call it
// makes into the stream outside that mutex. OnDone unsubscribes first, so
// no new reference can appear, then drops gRPC's; whoever drops the last
// reference deletes.
//
// Operations. gRPC allows one write in flight, and nothing after Finish.
// Every StartWrite, StartWriteAndFinish and the one Finish are issued by a
// thread holding the `issuing_` token (taken under mu_, released after the
// call returns), so they never overlap, and no lock is held while calling
// into gRPC (a reaction may run inline). A thread that finds the token
// taken leaves its work in next_ (or finish_status_) and the holder picks
// it up before letting go.
//
// Memory is constant: next_ is overwritten by each change, so however many
// changes come while a write is in flight (a client that does not read),
// one status waits.
//
// Lock order: HealthService::mu_ before Stream::mu_ (Offer is called under
// the service's mutex); never the reverse.
class HealthService::Stream final
    : public grpc::ServerWriteReactor<HealthCheckResponse> {
 public:
  explicit Stream(HealthService* owner) : owner_(owner) {}

  // Validates the request, subscribes (which offers the current status) and
  // starts writing, or ends the stream. REQUIRES: called once, from the
  // Watch handler that created the stream.
  void Start(const HealthCheckRequest& request) ABSL_LOCKS_EXCLUDED(mu_);

  // The service name watched. Constant once Start subscribed.
  const std::string& service() const { return service_; }

  // Makes `status` the next one to send, replacing any not yet handed to
  // gRPC; issues nothing (Flush does). REQUIRES: the caller holds a
  // reference, or the service's mutex while the stream is subscribed.
  void Offer(ServingStatus status) ABSL_LOCKS_EXCLUDED(mu_);

  // True if a status offered waits to be handed to gRPC.
  bool has_waiting_status() ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(&mu_);
    return next_.has_value();
  }

  // Issues what is due. REQUIRES: the caller holds a reference.
  void Flush() ABSL_LOCKS_EXCLUDED(mu_);

  // Ends the stream with `status` (the first status asked for wins). A
  // status offered and not yet sent goes out first, with the end, after the
  // write in flight (if any) is done. REQUIRES: the caller holds a
  // reference or runs inside a reaction of this stream.
  void End(grpc::Status status) ABSL_LOCKS_EXCLUDED(mu_);

  void Ref() { refs_.fetch_add(1, std::memory_order_relaxed); }
  void Unref() {
    if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
  }

  // Reactions.
  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

 private:
  // The next gRPC operation to issue, decided under mu_, issued without it.
  struct Op {
    enum class Kind { kNone, kWrite, kWriteAndFinish, kFinish };
    Kind kind = Kind::kNone;
    grpc::Status status;  // kWriteAndFinish, kFinish
  };

  ~Stream() override = default;

  // Takes the issuing token and returns the operation it is for, or kNone
  // (token not taken) if there is nothing to do or someone else holds it.
  Op NextOpLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Issues `op` and every operation that became due meanwhile, then lets
  // the token go.
  void Pump(Op op) ABSL_LOCKS_EXCLUDED(mu_);
  // Records the status to finish with; false if one was recorded already.
  // The caller then unsubscribes (outside mu_), so the stream stops counting
  // against the limit as soon as it is ending.
  bool RequestFinishLocked(grpc::Status status)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Constant after construction (service_: once Start subscribed).
  HealthService* const owner_;
  std::string service_;

  std::atomic<int> refs_{1};  // gRPC's, dropped in OnDone

  Mutex mu_;
  // False until Start has run: nothing is issued before.
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  // The latest status offered and not yet handed to gRPC.
  std::optional<ServingStatus> next_ ABSL_GUARDED_BY(mu_);
  // The status last handed to gRPC; none before the first write. A status
  // equal to it is not sent again.
  std::optional<ServingStatus> last_sent_ ABSL_GUARDED_BY(mu_);
  bool write_in_flight_ ABSL_GUARDED_BY(mu_) = false;
  bool issuing_ ABSL_GUARDED_BY(mu_) = false;
  std::optional<grpc::Status> finish_status_ ABSL_GUARDED_BY(mu_);
  bool finish_issued_ ABSL_GUARDED_BY(mu_) = false;
  // The message being written. Not guarded: written only by the token
  // holder while no write is in flight, then read by gRPC until OnWriteDone
  // (until OnDone after StartWriteAndFinish).
  HealthCheckResponse writing_;
};

void HealthService::Stream::Start(const HealthCheckRequest& request) {
  absl::Status status = ValidateServiceName(request.service());
  if (status.ok()) {
    service_ = request.service();
    status = owner_->Subscribe(this);
  }
  Op op;
  {
    MutexLock lock(&mu_);
    // Not subscribed on error: nothing to undo.
    if (!status.ok()) RequestFinishLocked(ToGrpcStatus(status));
    started_ = true;
    op = NextOpLocked();
  }
  Pump(std::move(op));
}

void HealthService::Stream::Offer(ServingStatus status) {
  MutexLock lock(&mu_);
  if (finish_issued_) return;
  next_ = status;
}

void HealthService::Stream::Flush() {
  Op op;
  {
    MutexLock lock(&mu_);
    op = NextOpLocked();
  }
  Pump(std::move(op));
}

void HealthService::Stream::End(grpc::Status status) {
  Op op;
  bool ended;
  {
    MutexLock lock(&mu_);
    ended = RequestFinishLocked(std::move(status));
    op = NextOpLocked();
  }
  if (ended) owner_->Unsubscribe(this);
  Pump(std::move(op));
}

bool HealthService::Stream::RequestFinishLocked(grpc::Status status) {
  if (finish_status_.has_value()) return false;
  finish_status_ = std::move(status);
  return true;
}

HealthService::Stream::Op HealthService::Stream::NextOpLocked() {
  Op op;
  if (!started_ || issuing_ || finish_issued_) return op;
  if (finish_status_.has_value()) {
    const bool last_status_due = next_.has_value() && next_ != last_sent_;
    // The last status goes out with the end of the stream, once the write
    // in flight is done (OnWriteDone comes when the client reads, or with
    // ok = false when the call is cancelled).
    if (last_status_due && write_in_flight_) return op;
    finish_issued_ = true;
    issuing_ = true;
    op.status = *finish_status_;
    if (last_status_due) {
      writing_.set_status(*next_);
      last_sent_ = next_;
      op.kind = Op::Kind::kWriteAndFinish;
    } else {
      // Finish may go while a write is in flight: gRPC sends the status
      // after that message.
      op.kind = Op::Kind::kFinish;
    }
    next_.reset();
    return op;
  }
  if (write_in_flight_ || !next_.has_value()) return op;
  const ServingStatus status = *next_;
  next_.reset();
  // Changed and changed back while a write was in flight: nothing new.
  if (last_sent_ == status) return op;
  writing_.set_status(status);
  last_sent_ = status;
  write_in_flight_ = true;
  issuing_ = true;
  op.kind = Op::Kind::kWrite;
  return op;
}

void HealthService::Stream::Pump(Op op) {
  while (op.kind != Op::Kind::kNone) {
    switch (op.kind) {
      case Op::Kind::kWrite:
        StartWrite(&writing_);
        break;
      case Op::Kind::kWriteAndFinish:
        StartWriteAndFinish(&writing_, grpc::WriteOptions(),
                            std::move(op.status));
        break;
      case Op::Kind::kFinish:
        Finish(std::move(op.status));
        break;
      case Op::Kind::kNone:
        break;
    }
    MutexLock lock(&mu_);
    issuing_ = false;
    op = NextOpLocked();
  }
}

void HealthService::Stream::OnWriteDone(bool ok) {
  Op op;
  bool ended = false;
  {
    MutexLock lock(&mu_);
    write_in_flight_ = false;
    // A failed write means the call is gone (cancelled or broken); every
    // RPC must still be finished.
    if (!ok) ended = RequestFinishLocked(grpc::Status::CANCELLED);
    op = NextOpLocked();
  }
  if (ended) owner_->Unsubscribe(this);
  Pump(std::move(op));
}

void HealthService::Stream::OnCancel() { End(grpc::Status::CANCELLED); }

void HealthService::Stream::OnDone() {
  // Normally done already when the end was asked for; this covers every
  // path. After it the service takes no new reference.
  owner_->Unsubscribe(this);
  Unref();
}

// --- HealthService -----------------------------------------------------------

HealthService::HealthService(size_t max_watch_streams)
    : max_watch_streams_(max_watch_streams) {
  MutexLock lock(&mu_);
  statuses_.emplace("", kServing);
}

HealthService::~HealthService() {
  MutexLock lock(&mu_);
  assert(streams_.empty() && "HealthService destroyed with Watch streams open");
}

void HealthService::SetServingStatus(absl::string_view service, bool serving) {
  std::vector<Stream*> notified;
  {
    MutexLock lock(&mu_);
    const ServingStatus status =
        serving && !shut_down_ ? kServing : kNotServing;
    auto [it, inserted] = statuses_.try_emplace(service, status);
    if (!inserted) {
      if (it->second == status) return;
      it->second = status;
    }
    NotifyLocked(it->first, status, &notified);
  }
  FlushAndUnref(notified);
}

void HealthService::SetServingStatus(bool serving) {
  const ServingStatus status = serving ? kServing : kNotServing;
  std::vector<Stream*> notified;
  {
    MutexLock lock(&mu_);
    if (shut_down_) return;
    for (auto& [service, current] : statuses_) {
      if (current == status) continue;
      current = status;
      NotifyLocked(service, status, &notified);
    }
  }
  FlushAndUnref(notified);
}

void HealthService::Shutdown() {
  std::vector<Stream*> open;
  {
    MutexLock lock(&mu_);
    if (shut_down_) return;
    shut_down_ = true;
    for (auto& [service, current] : statuses_) current = kNotServing;
    // Every stream ends below, with its service's last status when that
    // changed and the client can take it now.
    open.assign(streams_.begin(), streams_.end());
    for (Stream* s : open) {
      if (statuses_.contains(s->service())) s->Offer(kNotServing);
      s->Ref();
    }
  }
  for (Stream* s : open) {
    s->End(grpc::Status(grpc::StatusCode::UNAVAILABLE,
                        "breakerd is shutting down"));
    s->Unref();
  }
}

size_t HealthService::active_watches() const {
  MutexLock lock(&mu_);
  return streams_.size();
}

size_t HealthService::waiting_statuses() const {
  MutexLock lock(&mu_);
  size_t waiting = 0;
  for (Stream* s : streams_) {
    if (s->has_waiting_status()) ++waiting;
  }
  return waiting;
}

void HealthService::NotifyLocked(const std::string& service,
                                 ServingStatus status,
                                 std::vector<Stream*>* notified) {
  for (Stream* s : streams_) {
    if (s->service() != service) continue;
    s->Offer(status);
    s->Ref();
    notified->push_back(s);
  }
}

void HealthService::FlushAndUnref(const std::vector<Stream*>& notified) {
  for (Stream* s : notified) {
    s->Flush();
    s->Unref();
  }
}

absl::Status HealthService::Subscribe(Stream* stream) {
  MutexLock lock(&mu_);
  if (shut_down_) {
    return absl::UnavailableError("breakerd is shutting down");
  }
  if (streams_.size() >= max_watch_streams_) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "health: at most ", max_watch_streams_,
        " concurrent Health/Watch streams (limit reached); retry later"));
  }
  streams_.insert(stream);
  auto it = statuses_.find(stream->service());
  stream->Offer(it == statuses_.end() ? HealthCheckResponse::SERVICE_UNKNOWN
                                      : it->second);
  return absl::OkStatus();
}

void HealthService::Unsubscribe(Stream* stream) {
  MutexLock lock(&mu_);
  streams_.erase(stream);
}

grpc::ServerUnaryReactor* HealthService::Check(
    grpc::CallbackServerContext* context, const HealthCheckRequest* request,
    HealthCheckResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  absl::Status status = ValidateServiceName(request->service());
  if (status.ok()) {
    MutexLock lock(&mu_);
    auto it = statuses_.find(request->service());
    if (it == statuses_.end()) {
      status = absl::NotFoundError("health: no status for this service name");
    } else {
      response->set_status(it->second);
    }
  }
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

grpc::ServerWriteReactor<HealthCheckResponse>* HealthService::Watch(
    grpc::CallbackServerContext* context, const HealthCheckRequest* request) {
  auto* stream = new Stream(this);
  stream->Start(*request);
  return stream;
}

}  // namespace breakerd

#include "server/service/watch_hub.h"

#include <algorithm>
#include <atomic>
#include <cassert>
#include <cstddef>
#include <deque>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/service/convert.h"

namespace breakerd {

// One Watch stream: the gRPC reactor plus its outgoing queue.
//
// Lifetime. The object is reference counted: gRPC holds one reference from
// construction until OnDone, and the hub takes one (under its own mutex,
// only while the stream is subscribed) for each call it makes into the
// stream outside that mutex. OnDone unsubscribes first, so no new reference
// can appear, then drops gRPC's; whoever drops the last reference deletes.
//
// Operations. gRPC allows one write in flight, and no StartWrite after
// Finish. Every StartWrite and the one Finish are issued by a thread that
// holds the `issuing_` token (taken under mu_, released after the call
// returns), so they never overlap; no lock is held while calling into gRPC.
// A thread that finds the token taken leaves its work in the queue (or in
// finish_status_) and the token holder picks it up before letting go. The
// token holder also reads the next Registry shard of a Watch of every
// dependency (a "refill"), outside mu_: the Registry calls observers with a
// shard locked, so a shard is never locked under mu_.
//
// Initial states of a Watch of every dependency. The stream subscribes
// first, then reads shard after shard, each once the previous shard's
// states are written. A transition queued meanwhile for a dependency of a
// shard not read yet may go out before that shard's initial state; the
// initial state read later is at least as new (the Registry changes a
// breaker before telling observers, under the same shard lock), so the
// stream's generations still never go back. In practice every initial state
// goes out first: a refill is due as soon as the previous shard's states
// are all taken, ahead of any queued transition, and the transitions
// queued meanwhile that are not newer than a shard's initial states are
// dropped when it is read.
//
// Lock order: Stream::mu_ is never held while taking WatchHub::mu_ or the
// reverse, nor while a Registry shard is locked.
class WatchHub::Stream final
    : public grpc::ServerWriteReactor<v1::StateChange> {
 public:
  Stream(WatchHub* hub, size_t max_queue) : hub_(hub), max_queue_(max_queue) {}

  // Initial states of every dependency still to read, from this shard on.
  static constexpr size_t kNoShard = Registry::kShardCount;

  // Validates the request, subscribes, sends the response headers, queues the
  // initial states and starts writing. REQUIRES: called once, from the Watch
  // handler that created the stream.
  void Start(const v1::WatchRequest& request,
             grpc::CallbackServerContext* context) ABSL_LOCKS_EXCLUDED(mu_);

  // The names watched; empty means all. Constant once Start subscribed.
  const std::vector<std::string>& names() const { return names_; }

  // Queues one transition, or ends the stream if the client is too far
  // behind. REQUIRES: the caller holds a reference.
  void Push(const v1::StateChange& change) ABSL_LOCKS_EXCLUDED(mu_);

  // Ends the stream with `status` (the first status asked for wins); queued
  // messages are dropped, a write in flight completes first. REQUIRES: the
  // caller holds a reference or runs inside a reaction of this stream.
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
    enum class Kind { kNone, kWrite, kFinish, kRefill };
    Kind kind = Kind::kNone;
    grpc::Status status;  // for kFinish
    size_t shard = 0;     // for kRefill: the first shard to read
  };

  ~Stream() override = default;

  absl::Status ParseNames(const v1::WatchRequest& request);
  // The initial states of the names watched (not for a Watch of all).
  std::vector<v1::StateChange> InitialStates() const;
  // The initial states of the first non-empty shard from `*shard` on;
  // advances `*shard` past it (to kNoShard when none is left).
  std::vector<v1::StateChange> ReadShards(size_t* shard) const;
  // Queues `initial` ahead of the transitions queued (dropping those older
  // than it). REQUIRES: the stream is not ending.
  void QueueInitialLocked(std::vector<v1::StateChange> initial)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Counts `delta` messages into or out of the hub's total.
  void CountQueued(ptrdiff_t delta) {
    hub_->queued_total_.fetch_add(static_cast<size_t>(delta),
                                  std::memory_order_relaxed);
  }
  // Ends the stream if it is too far behind: its own queue past max_queue,
  // or the hub's total past max_queued_total with at least a fair share of
  // it here. Returns true if it ended the stream (the caller unsubscribes).
  bool EndIfTooFarBehindLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Drops the transitions queued between subscribing and reading `initial`
  // that are not newer than the initial state of their dependency (which
  // already says where they led), so the stream's generations never go back
  // nor repeat.
  void DropOlderThanLocked(const std::vector<v1::StateChange>& initial)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Takes the issuing token and returns the operation it is for, or kNone
  // (token not taken) if there is nothing to do or someone else holds it.
  Op NextOpLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Issues `op` and every operation that became due meanwhile, then lets
  // the token go.
  void Pump(Op op) ABSL_LOCKS_EXCLUDED(mu_);
  // Records the status to finish with; false if one was recorded already.
  // The caller then unsubscribes (outside mu_), so the stream stops counting
  // against max_streams as soon as it is ending.
  bool RequestFinishLocked(grpc::Status status)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Constant after construction (names_: after Start subscribes).
  WatchHub* const hub_;
  const size_t max_queue_;
  std::vector<std::string> names_;

  std::atomic<int> refs_{1};  // gRPC's, dropped in OnDone

  Mutex mu_;
  // False until Start has queued the initial states: nothing is issued
  // before, so that they go out ahead of any transition.
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  std::deque<v1::StateChange> queue_ ABSL_GUARDED_BY(mu_);
  // How many of the messages at the front of queue_ are initial states
  // (exempt from max_queue).
  size_t initial_pending_ ABSL_GUARDED_BY(mu_) = 0;
  // How many queued messages behind them are notices (created, evicted,
  // ramp_done, reload: not transitions). They are exempt from max_queue,
  // which counts transitions: an eviction pass or a burst of new names
  // queues one per breaker at once on every Watch of all dependencies, and
  // ending those streams for it would only make every client resync. The
  // hub's total (max_queued_total) still bounds them.
  size_t notices_pending_ ABSL_GUARDED_BY(mu_) = 0;
  // Watch of every dependency: the next shard whose initial states are to
  // be read (kNoShard: none left, or the stream names dependencies).
  size_t next_shard_ ABSL_GUARDED_BY(mu_) = kNoShard;
  bool write_in_flight_ ABSL_GUARDED_BY(mu_) = false;
  bool issuing_ ABSL_GUARDED_BY(mu_) = false;
  std::optional<grpc::Status> finish_status_ ABSL_GUARDED_BY(mu_);
  bool finish_issued_ ABSL_GUARDED_BY(mu_) = false;
  // The message of the write in flight. Not guarded: written only by the
  // token holder while no write is in flight, then read by gRPC until
  // OnWriteDone.
  v1::StateChange writing_;
};

absl::Status WatchHub::Stream::ParseNames(const v1::WatchRequest& request) {
  const int count = request.dependencies_size();
  if (static_cast<size_t>(count) > kMaxWatchDependencies) {
    return absl::InvalidArgumentError(
        absl::StrCat("dependencies: at most ", kMaxWatchDependencies,
                     " names in one Watch (got ", count,
                     "); name none to watch every dependency"));
  }
  absl::flat_hash_set<absl::string_view> seen;
  for (int i = 0; i < count; ++i) {
    const std::string& name = request.dependencies(i);
    if (absl::Status s =
            ValidateDependency(name, absl::StrCat("dependencies[", i, "]"));
        !s.ok()) {
      return s;
    }
    if (seen.insert(name).second) names_.push_back(name);
  }
  return absl::OkStatus();
}

std::vector<v1::StateChange> WatchHub::Stream::InitialStates() const {
  std::vector<v1::StateChange> out;
  Registry* registry = hub_->registry_;
  out.reserve(names_.size());
  const std::shared_ptr<const PolicySet> policies = registry->policies();
  for (const std::string& name : names_) {
    absl::StatusOr<BreakerSnapshot> snapshot = registry->Get(name);
    if (snapshot.ok()) {
      FillInitialStateChange(*snapshot, &out.emplace_back());
    } else {
      // NOT_FOUND (names are valid): the breaker is created on first use,
      // closed.
      FillInitialStateChangeForAbsent(
          name, policies->Match(name)->mode == Mode::kShadow,
          registry->generation_floor(), &out.emplace_back());
    }
  }
  return out;
}

std::vector<v1::StateChange> WatchHub::Stream::ReadShards(size_t* shard) const {
  std::vector<v1::StateChange> out;
  for (; *shard < kNoShard && out.empty(); ++*shard) {
    hub_->registry_->ForEachInShard(
        *shard, [&out](const BreakerSnapshot& snapshot) {
          FillInitialStateChange(snapshot, &out.emplace_back());
        });
  }
  return out;
}

void WatchHub::Stream::QueueInitialLocked(
    std::vector<v1::StateChange> initial) {
  DropOlderThanLocked(initial);
  CountQueued(static_cast<ptrdiff_t>(initial.size()));
  initial_pending_ = initial.size();
  queue_.insert(queue_.begin(), std::make_move_iterator(initial.begin()),
                std::make_move_iterator(initial.end()));
}

bool WatchHub::Stream::EndIfTooFarBehindLocked() {
  if (queue_.size() - initial_pending_ - notices_pending_ > max_queue_) {
    return RequestFinishLocked(grpc::Status(
        grpc::StatusCode::RESOURCE_EXHAUSTED,
        absl::StrCat("watch: client reads too slowly (queue limit ", max_queue_,
                     ")")));
  }
  const size_t total = hub_->queued_total_.load(std::memory_order_relaxed);
  if (total <= hub_->max_queued_total_) return false;
  const size_t streams =
      std::max<size_t>(1, hub_->subscribed_.load(std::memory_order_relaxed));
  if (queue_.size() < hub_->max_queued_total_ / streams) return false;
  return RequestFinishLocked(grpc::Status(
      grpc::StatusCode::RESOURCE_EXHAUSTED,
      absl::StrCat("watch: client reads too slowly (", total,
                   " messages queued for all Watch streams, limit ",
                   hub_->max_queued_total_, "; this stream holds ",
                   queue_.size(), ")")));
}

void WatchHub::Stream::DropOlderThanLocked(
    const std::vector<v1::StateChange>& initial) {
  if (queue_.empty()) return;
  absl::flat_hash_map<absl::string_view, uint64_t> initial_generation;
  for (const v1::StateChange& c : initial) {
    initial_generation[c.dependency()] = c.generation();
  }
  std::deque<v1::StateChange> kept;
  for (v1::StateChange& c : queue_) {
    auto it = initial_generation.find(c.dependency());
    if (it == initial_generation.end() || c.generation() > it->second) {
      kept.push_back(std::move(c));
    } else if (IsWatchNotice(c)) {
      --notices_pending_;
    }
  }
  CountQueued(-static_cast<ptrdiff_t>(queue_.size() - kept.size()));
  queue_.swap(kept);
}

void WatchHub::Stream::Start(const v1::WatchRequest& request,
                             grpc::CallbackServerContext* context) {
  absl::Status status = ParseNames(request);
  if (status.ok() && names_.empty() && hub_->read_limiter_ != nullptr) {
    status = hub_->read_limiter_->Admit(hub_->registry_->size(), "watch");
  }
  if (status.ok()) status = hub_->Subscribe(this);
  // Read the states only after subscribing: a transition from now on is
  // queued (behind the initial states), one before is in the snapshot. A
  // Watch of every dependency reads them later, shard by shard.
  std::vector<v1::StateChange> initial;
  if (status.ok()) {
    if (!names_.empty()) initial = InitialStates();
    // Headers go out now, even when there is no state to send yet, so a
    // client knows its stream is live. Nothing else is issued before
    // started_ is set below, so this does not overlap another operation.
    if (context != nullptr) {
      context->AddInitialMetadata(std::string(kSubscribedHeader), "1");
    }
    StartSendInitialMetadata();
  }
  Op op;
  {
    MutexLock lock(&mu_);
    if (!status.ok()) {
      // Not subscribed: nothing to undo.
      RequestFinishLocked(ToGrpcStatus(status));
    } else if (!finish_status_.has_value()) {
      if (names_.empty()) {
        next_shard_ = 0;
      } else {
        QueueInitialLocked(std::move(initial));
      }
    }
    started_ = true;
    op = NextOpLocked();
  }
  Pump(std::move(op));
}

void WatchHub::Stream::Push(const v1::StateChange& change) {
  Op op;
  bool ended = false;
  {
    MutexLock lock(&mu_);
    if (finish_status_.has_value()) return;
    queue_.push_back(change);
    CountQueued(1);
    if (IsWatchNotice(change)) ++notices_pending_;
    ended = EndIfTooFarBehindLocked();
    op = NextOpLocked();
  }
  if (ended) hub_->Unsubscribe(this);
  Pump(std::move(op));
}

void WatchHub::Stream::End(grpc::Status status) {
  Op op;
  bool ended;
  {
    MutexLock lock(&mu_);
    ended = RequestFinishLocked(std::move(status));
    op = NextOpLocked();
  }
  if (ended) hub_->Unsubscribe(this);
  Pump(std::move(op));
}

bool WatchHub::Stream::RequestFinishLocked(grpc::Status status) {
  if (finish_status_.has_value()) return false;
  finish_status_ = std::move(status);
  CountQueued(-static_cast<ptrdiff_t>(queue_.size()));
  queue_.clear();
  initial_pending_ = 0;
  notices_pending_ = 0;
  next_shard_ = kNoShard;
  return true;
}

WatchHub::Stream::Op WatchHub::Stream::NextOpLocked() {
  Op op;
  if (!started_ || issuing_ || finish_issued_) return op;
  if (finish_status_.has_value()) {
    // Finish may go while a write is in flight: gRPC sends the status after
    // that message.
    finish_issued_ = true;
    issuing_ = true;
    op.kind = Op::Kind::kFinish;
    op.status = *finish_status_;
    return op;
  }
  if (initial_pending_ == 0 && next_shard_ < kNoShard) {
    // The previous shard's states are all written (or in flight): read the
    // next one before sending more.
    issuing_ = true;
    op.kind = Op::Kind::kRefill;
    op.shard = next_shard_;
    return op;
  }
  if (!write_in_flight_ && !queue_.empty()) {
    writing_ = std::move(queue_.front());
    queue_.pop_front();
    CountQueued(-1);
    if (initial_pending_ > 0) {
      --initial_pending_;
    } else if (IsWatchNotice(writing_)) {
      --notices_pending_;
    }
    write_in_flight_ = true;
    issuing_ = true;
    op.kind = Op::Kind::kWrite;
  }
  return op;
}

void WatchHub::Stream::Pump(Op op) {
  while (op.kind != Op::Kind::kNone) {
    std::vector<v1::StateChange> initial;
    size_t shard = op.shard;
    switch (op.kind) {
      case Op::Kind::kWrite:
        StartWrite(&writing_);
        break;
      case Op::Kind::kFinish:
        Finish(std::move(op.status));
        break;
      case Op::Kind::kRefill:
        initial = ReadShards(&shard);
        break;
      case Op::Kind::kNone:
        break;
    }
    bool ended = false;
    {
      MutexLock lock(&mu_);
      issuing_ = false;
      if (op.kind == Op::Kind::kRefill && !finish_status_.has_value()) {
        next_shard_ = shard;
        QueueInitialLocked(std::move(initial));
        ended = EndIfTooFarBehindLocked();
      }
      op = NextOpLocked();
    }
    if (ended) hub_->Unsubscribe(this);
  }
}

void WatchHub::Stream::OnWriteDone(bool ok) {
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
  if (ended) hub_->Unsubscribe(this);
  Pump(std::move(op));
}

void WatchHub::Stream::OnCancel() { End(grpc::Status::CANCELLED); }

void WatchHub::Stream::OnDone() {
  // Normally done already when the end was asked for; this covers every
  // path. After it the hub takes no new reference.
  hub_->Unsubscribe(this);
  Unref();
}

// --- WatchHub ----------------------------------------------------------------

WatchHub::WatchHub(Registry* registry, size_t max_streams, size_t max_queue,
                   ReadLimiter* read_limiter, size_t max_queued_total)
    : registry_(registry),
      max_streams_(max_streams),
      max_queue_(max_queue),
      read_limiter_(read_limiter),
      max_queued_total_(max_queued_total) {}

WatchHub::~WatchHub() {
  WriterMutexLock lock(&mu_);
  assert(streams_.empty() && "WatchHub destroyed with Watch streams open");
}

grpc::ServerWriteReactor<v1::StateChange>* WatchHub::StartStream(
    const v1::WatchRequest& request, grpc::CallbackServerContext* context) {
  auto* stream = new Stream(this, max_queue_);
  stream->Start(request, context);
  return stream;
}

absl::Status WatchHub::Subscribe(Stream* stream) {
  WriterMutexLock lock(&mu_);
  if (shut_down_) {
    return absl::UnavailableError("breakerd is shutting down");
  }
  if (streams_.size() >= max_streams_) {
    return absl::ResourceExhaustedError(
        absl::StrCat("watch: at most ", max_streams_,
                     " concurrent Watch streams (limit reached); retry later"));
  }
  streams_.insert(stream);
  subscribed_.store(streams_.size(), std::memory_order_relaxed);
  if (stream->names().empty()) {
    watch_all_.insert(stream);
  } else {
    for (const std::string& name : stream->names()) {
      by_name_[name].insert(stream);
    }
  }
  return absl::OkStatus();
}

void WatchHub::Unsubscribe(Stream* stream) {
  WriterMutexLock lock(&mu_);
  if (streams_.erase(stream) == 0) return;
  subscribed_.store(streams_.size(), std::memory_order_relaxed);
  if (stream->names().empty()) {
    watch_all_.erase(stream);
    return;
  }
  for (const std::string& name : stream->names()) {
    auto it = by_name_.find(name);
    if (it == by_name_.end()) continue;
    it->second.erase(stream);
    if (it->second.empty()) by_name_.erase(it);
  }
}

void WatchHub::OnTransition(const Transition& t) {
  std::vector<Stream*> targets;
  {
    ReaderMutexLock lock(&mu_);
    if (streams_.empty()) return;
    auto it = by_name_.find(t.dependency);
    targets.reserve(watch_all_.size() +
                    (it == by_name_.end() ? 0 : it->second.size()));
    for (Stream* s : watch_all_) targets.push_back(s);
    if (it != by_name_.end()) {
      for (Stream* s : it->second) targets.push_back(s);
    }
    for (Stream* s : targets) s->Ref();
  }
  if (targets.empty()) return;
  v1::StateChange change;
  FillStateChange(t, &change);
  for (Stream* s : targets) {
    s->Push(change);
    s->Unref();
  }
}

void WatchHub::Shutdown() {
  std::vector<Stream*> targets;
  {
    WriterMutexLock lock(&mu_);
    shut_down_ = true;
    targets.assign(streams_.begin(), streams_.end());
    for (Stream* s : targets) s->Ref();
  }
  for (Stream* s : targets) {
    s->End(grpc::Status(grpc::StatusCode::UNAVAILABLE,
                        "breakerd is shutting down"));
    s->Unref();
  }
}

size_t WatchHub::active_streams() const {
  ReaderMutexLock lock(&mu_);
  return streams_.size();
}

}  // namespace breakerd

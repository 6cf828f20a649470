// Client's local decisions (client/README.md, "Local decisions"): grants
// and refusals from the Watch cache, the outcomes of locally granted calls
// and the decisions made without breakerd, batched for ReportBatch.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <utility>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "breakerd/internal/statuses.h"
#include "client_impl.h"

namespace breakerd::client {
namespace {

using internal::CacheVerdict;
using internal::ClientDecisionKind;
using internal::LocalSlot;

// A batch's deadline, and Close's budget for the last one: ten Acquires'
// worth (a batch carries up to 1,000 outcomes).
constexpr int kBatchTimeoutFactor = 10;

}  // namespace

Client::Impl::CacheDecision Client::Impl::DecideInCache(
    absl::string_view dependency, uint32_t attempt) {
  CacheDecision d;
  if (watch_ == nullptr) return d;
  CacheVerdict v = watch_->Decide(dependency, MayGrant(attempt));
  switch (v.kind) {
    case CacheVerdict::Kind::kGrant:
      CountGrant(v.slot);
      d.grant = std::move(v.slot);
      break;
    case CacheVerdict::Kind::kRefuse:
      CountLocalRefusal(dependency);
      d.refusal = LocalRefusalOf(dependency, v);
      break;
    case CacheVerdict::Kind::kAsk:
      break;
  }
  return d;
}

internal::CacheVerdict Client::Impl::PeekCache(absl::string_view dependency,
                                               bool may_grant) const {
  if (watch_ == nullptr) return CacheVerdict();
  return watch_->Decide(dependency, may_grant);
}

void Client::Impl::CountLocalRefusal(absl::string_view dependency) {
  local_rejections_.fetch_add(1, std::memory_order_relaxed);
  if (local_decisions_) {
    batch_.CountDecision(dependency, ClientDecisionKind::kRefusedLocal);
  }
}

Decision Client::Impl::LocalRefusalOf(absl::string_view dependency,
                                      const CacheVerdict& v) {
  Decision d;
  d.dependency = std::string(dependency);
  d.source = DecisionSource::kLocal;
  d.state = v.state;
  d.reason = v.reason;
  d.retry_after = v.retry_after;
  return d;
}

Decision Client::Impl::LocalGrantOf(absl::string_view dependency,
                                    const LocalSlot& slot) {
  Decision d;
  d.allowed = true;
  d.state = State::kClosed;
  d.dependency = std::string(dependency);
  d.source = DecisionSource::kLocal;
  d.generation = slot.generation;
  return d;
}

absl::StatusOr<ReportResult> Client::Impl::ReportLocal(
    std::shared_ptr<LocalSlot> slot, const Outcome& outcome,
    absl::Duration latency, absl::string_view chain, uint32_t tier) {
  if (closed()) {
    batch_.CountDropped(1);
    return internal::ClosedError();
  }
  if (absl::Status s = internal::CheckLocalOutcome(outcome); !s.ok()) {
    report_errors_.fetch_add(1, std::memory_order_relaxed);
    return s;
  }
  // Nothing is sent while away: no outcome piles up meanwhile.
  if (presence_.away()) {
    batch_.CountDropped(1);
    return ReportResult();
  }
  batch_.Add(std::move(slot), outcome, latency, chain, tier);
  return ReportResult();
}

std::string Client::Impl::NewClientId() {
  absl::BitGen rng;
  return absl::StrFormat("cpp-%d-%08x", static_cast<int>(getpid()),
                         absl::Uniform<uint32_t>(rng));
}

internal::BatchFlusher::Options Client::Impl::FlusherOptions() {
  internal::BatchFlusher::Options o;
  o.batch = &batch_;
  o.clock = &clock_;
  o.timer = &flush_timer_;
  o.interval = options_.flush_interval;
  o.send_timeout = options_.decision_timeout * kBatchTimeoutFactor;
  o.send = [this](const v1::ReportBatchRequest& request,
                  absl::Duration timeout) {
    return SendBatch(request, timeout);
  };
  o.away = [this] { return presence_.away(); };
  return o;
}

absl::Status Client::Impl::SendBatch(const v1::ReportBatchRequest& request,
                                     absl::Duration timeout) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() +
                   absl::ToChronoNanoseconds(timeout));
  v1::ReportBatchResponse response;
  const absl::Status status =
      internal::FromGrpc(stub_->ReportBatch(&ctx, request, &response));
  if (status.ok()) {
    NoteAnswer();
    if (batch_log_.wrong()) {
      batch_log_.Right("ReportBatch reaches breakerd again");
    }
  } else if (!batch_log_.wrong()) {
    batch_log_.Wrong(absl::StrCat(
        "ReportBatch failed (", internal::Describe(status),
        "); a batch is sent again at the next flush, at most ",
        internal::LocalBatch::kMaxSends,
        " times, then its outcomes are dropped (dropped_outcomes)"));
  }
  return status;
}

void Client::Impl::StopBatches() {
  if (flusher_ == nullptr) return;
  flusher_->StopScheduling();
  // Waits for a flush under way.
  flush_timer_.Stop();
  flusher_->FinalFlush(options_.decision_timeout * kBatchTimeoutFactor);
}

}  // namespace breakerd::client

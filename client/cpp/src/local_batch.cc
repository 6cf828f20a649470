#include "breakerd/internal/local_batch.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "breakerd/internal/convert.h"
#include "breakerd/internal/proto_duration.h"

namespace breakerd::client::internal {
namespace {

// A uint32 field's worth of a count (the wire's counters are uint32).
uint32_t Clamp32(uint64_t n) {
  return static_cast<uint32_t>(
      std::min<uint64_t>(n, std::numeric_limits<uint32_t>::max()));
}

void Fill(const LocalCall& call, v1::LocalOutcome* out) {
  out->set_outcome(ToProto(call.outcome.kind));
  out->set_http_status(call.outcome.http_status);
  if (call.outcome.grpc_code.has_value()) {
    out->set_grpc_code(*call.outcome.grpc_code);
  }
  ToProto(std::clamp(call.latency, absl::ZeroDuration(), kMaxLocalDuration),
          out->mutable_latency());
  if (call.outcome.retry_after > absl::ZeroDuration()) {
    ToProto(std::min(call.outcome.retry_after, kMaxLocalDuration),
            out->mutable_retry_after());
  }
  if (!call.chain.empty()) {
    out->set_chain(call.chain);
    out->set_tier(call.tier);
  }
}

}  // namespace

absl::Status CheckLocalOutcome(const Outcome& outcome) {
  if (outcome.kind != OutcomeKind::kUnspecified) return absl::OkStatus();
  if (outcome.http_status != 0) {
    if (outcome.http_status < 100 || outcome.http_status > 599) {
      return absl::InvalidArgumentError(
          absl::StrCat("http_status: must be between 100 and 599 (got ",
                       outcome.http_status, ")"));
    }
    return absl::OkStatus();
  }
  if (outcome.grpc_code.has_value()) {
    if (*outcome.grpc_code < 0 || *outcome.grpc_code > 16) {
      return absl::InvalidArgumentError(
          absl::StrCat("grpc_code: must be between 0 and 16 (got ",
                       *outcome.grpc_code, ")"));
    }
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      "outcome: one of outcome, http_status or grpc_code must be set");
}

// --- LocalBatch -------------------------------------------------------------

LocalBatch::LocalBatch(std::string client_id,
                       std::function<void(bool urgent)> wake)
    : client_id_(std::move(client_id)), wake_(std::move(wake)) {}

void LocalBatch::Grant(const std::shared_ptr<LocalSlot>& slot) {
  // Once per slot and flush: the flusher finds the slot in dirty_.
  if (slot->grants.fetch_add(1, std::memory_order_acq_rel) != 0) return;
  bool was_empty = false;
  {
    FastLock lock(&dirty_mu_);
    was_empty = dirty_.empty();
    dirty_.push_back(slot);
  }
  if (was_empty) wake_(false);
}

bool LocalBatch::Add(std::shared_ptr<LocalSlot> slot, const Outcome& outcome,
                     absl::Duration latency, absl::string_view chain,
                     uint32_t tier) {
  const uint64_t before = unacked_.fetch_add(1, std::memory_order_acq_rel);
  if (before >= kMaxUnacked) {
    unacked_.fetch_sub(1, std::memory_order_acq_rel);
    dropped_.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  Shard& shard = shards_[ThreadShard()];
  {
    FastLock lock(&shard.mu);
    LocalCall& call = shard.calls.emplace_back();
    call.slot = std::move(slot);
    call.outcome = outcome;
    call.latency = latency;
    if (!chain.empty()) {
      call.chain = std::string(chain);
      call.tier = tier;
    }
  }
  // Every change of unacked_ is a read-modify-write: either this add came
  // after the flusher found the batch empty (before == 0: wake it), or the
  // flusher's decrement finds it (and keeps flushing).
  if (before == 0) {
    wake_(false);
  } else if (before + 1 >= urgent_at_.load(std::memory_order_relaxed) &&
             !urgent_.load(std::memory_order_relaxed) &&
             !urgent_.exchange(true, std::memory_order_acq_rel)) {
    wake_(true);
  }
  return true;
}

void LocalBatch::CountDecision(absl::string_view dependency,
                               ClientDecisionKind kind) {
  bool was_empty = false;
  {
    FastLock lock(&decisions_mu_);
    was_empty = decisions_.empty() && chains_.empty();
    DecisionCounts& counts = decisions_[dependency];
    switch (kind) {
      case ClientDecisionKind::kRefusedLocal:
        ++counts.refused_local;
        break;
      case ClientDecisionKind::kFailOpen:
        ++counts.fail_open;
        break;
      case ClientDecisionKind::kFailClosed:
        ++counts.fail_closed;
        break;
    }
  }
  if (was_empty) wake_(false);
}

void LocalBatch::CountChainGrant(absl::string_view chain, uint32_t tier) {
  bool was_empty = false;
  {
    FastLock lock(&decisions_mu_);
    was_empty = decisions_.empty() && chains_.empty();
    ++chains_[std::make_pair(std::string(chain), tier)];
  }
  if (was_empty) wake_(false);
}

void LocalBatch::Stage() {
  for (Shard& shard : shards_) {
    std::vector<LocalCall> calls;
    if (!spare_.empty()) {
      calls.swap(spare_.back());
      spare_.pop_back();
    }
    {
      FastLock lock(&shard.mu);
      // The shard gets an empty buffer with capacity (no allocation for
      // callers), the staging area what it held.
      if (!shard.calls.empty()) shard.calls.swap(calls);
    }
    if (calls.empty()) {
      spare_.push_back(std::move(calls));
    } else {
      staged_calls_.push_back(std::move(calls));
    }
  }
  std::vector<std::shared_ptr<LocalSlot>> dirty;
  {
    FastLock lock(&dirty_mu_);
    dirty.swap(dirty_);
  }
  for (std::shared_ptr<LocalSlot>& slot : dirty) {
    const uint32_t n = slot->grants.exchange(0, std::memory_order_acq_rel);
    if (n == 0) continue;
    auto& staged = staged_grants_[slot.get()];
    staged.second += n;
    if (staged.first == nullptr) staged.first = std::move(slot);
  }
  absl::flat_hash_map<std::string, DecisionCounts> decisions;
  absl::flat_hash_map<std::pair<std::string, uint32_t>, uint32_t> chains;
  {
    FastLock lock(&decisions_mu_);
    decisions.swap(decisions_);
    chains.swap(chains_);
  }
  for (auto& [dependency, counts] : decisions) {
    DecisionCounts& staged = staged_decisions_[dependency];
    staged.refused_local += counts.refused_local;
    staged.fail_open += counts.fail_open;
    staged.fail_closed += counts.fail_closed;
  }
  for (auto& [key, count] : chains) staged_chains_[key] += count;
}

void LocalBatch::MoveGrants(const LocalSlot& slot, v1::DependencyBatch* entry) {
  auto it = staged_grants_.find(&slot);
  if (it == staged_grants_.end()) return;
  entry->set_grants(Clamp32(entry->grants() + it->second.second));
  staged_grants_.erase(it);
}

std::optional<LocalBatch::Current> LocalBatch::Build() {
  Current current;
  current.request =
      google::protobuf::Arena::CreateMessage<v1::ReportBatchRequest>(&arena_);
  v1::ReportBatchRequest& request = *current.request;
  // One entry per slot; nullptr once the list is full.
  absl::flat_hash_map<const LocalSlot*, v1::DependencyBatch*> entries;
  const auto entry_for = [&](const LocalSlot& slot) -> v1::DependencyBatch* {
    auto it = entries.find(&slot);
    if (it != entries.end()) return it->second;
    if (entries.size() >= kMaxRequestEntries) return nullptr;
    v1::DependencyBatch* entry = request.add_dependencies();
    entry->set_dependency(slot.dependency);
    entry->set_generation(slot.generation);
    entries.emplace(&slot, entry);
    return entry;
  };
  // The outcomes, in the order they came, as far as the limits allow. The
  // buffers used up keep their slots alive until the request is built
  // (`entries` is keyed by their address).
  std::vector<std::vector<LocalCall>> used;
  std::vector<LocalCall> left;
  while (!staged_calls_.empty() && current.outcomes < kMaxRequestOutcomes) {
    std::vector<LocalCall>& calls = staged_calls_.front();
    for (;
         staged_head_ < calls.size() && current.outcomes < kMaxRequestOutcomes;
         ++staged_head_) {
      LocalCall& call = calls[staged_head_];
      v1::DependencyBatch* entry = entry_for(*call.slot);
      if (entry == nullptr) {
        left.push_back(std::move(call));
        continue;
      }
      // Its slot's staged grants go with it.
      MoveGrants(*call.slot, entry);
      Fill(call, entry->add_outcomes());
      ++current.outcomes;
    }
    if (staged_head_ < calls.size()) break;
    used.push_back(std::move(calls));
    staged_calls_.pop_front();
    staged_head_ = 0;
  }
  if (!left.empty()) {
    // Kept for a later request, before the rest.
    if (!staged_calls_.empty()) {
      std::vector<LocalCall>& front = staged_calls_.front();
      for (size_t i = staged_head_; i < front.size(); ++i) {
        left.push_back(std::move(front[i]));
      }
      used.push_back(std::move(front));
      staged_calls_.pop_front();
    }
    staged_calls_.push_front(std::move(left));
    staged_head_ = 0;
  }
  // Then the grants of calls still running.
  for (auto it = staged_grants_.begin(); it != staged_grants_.end();) {
    v1::DependencyBatch* entry = entry_for(*it->second.first);
    if (entry == nullptr) break;
    entry->set_grants(Clamp32(entry->grants() + it->second.second));
    staged_grants_.erase(it++);
  }
  for (auto it = staged_decisions_.begin();
       it != staged_decisions_.end() &&
       static_cast<size_t>(request.decisions_size()) < kMaxRequestEntries;) {
    v1::ClientDecisions* d = request.add_decisions();
    d->set_dependency(it->first);
    d->set_refused_local(it->second.refused_local);
    d->set_fail_open(it->second.fail_open);
    d->set_fail_closed(it->second.fail_closed);
    staged_decisions_.erase(it++);
  }
  for (auto it = staged_chains_.begin();
       it != staged_chains_.end() &&
       static_cast<size_t>(request.chains_size()) < kMaxRequestEntries;) {
    v1::ChainDecision* c = request.add_chains();
    c->set_chain(it->first.first);
    c->set_tier(it->first.second);
    c->set_count(Clamp32(it->second));
    staged_chains_.erase(it++);
  }
  for (std::vector<LocalCall>& calls : used) {
    calls.clear();
    if (spare_.size() < 2 * kThreadShards) spare_.push_back(std::move(calls));
  }
  if (request.dependencies_size() == 0 && request.decisions_size() == 0 &&
      request.chains_size() == 0) {
    arena_.Reset();
    return std::nullopt;
  }
  request.set_client_id(client_id_);
  request.set_sequence(++sequence_);
  return current;
}

const v1::ReportBatchRequest* LocalBatch::Next() {
  StdLock lock(&flush_mu_);
  if (!current_.has_value()) {
    Stage();
    current_ = Build();
    if (!current_.has_value()) return nullptr;
    urgent_at_.store(current_->outcomes + kFlushAt, std::memory_order_relaxed);
    urgent_.store(false, std::memory_order_release);
  }
  return current_->request;
}

bool LocalBatch::Sent(const absl::Status& status) {
  StdLock lock(&flush_mu_);
  if (!current_.has_value()) return false;
  ++current_->sends;
  if (status.ok()) {
    Finish(/*dropped=*/false);
    return false;
  }
  const bool hopeless = status.code() == absl::StatusCode::kInvalidArgument ||
                        status.code() == absl::StatusCode::kResourceExhausted;
  if (!hopeless && current_->sends < kMaxSends) return false;
  Finish(/*dropped=*/true);
  return true;
}

void LocalBatch::Finish(bool dropped) {
  const uint64_t outcomes = current_->outcomes;
  current_.reset();
  arena_.Reset();
  if (dropped) dropped_.fetch_add(outcomes, std::memory_order_relaxed);
  urgent_at_.store(kFlushAt, std::memory_order_relaxed);
  unacked_.fetch_sub(outcomes, std::memory_order_acq_rel);
}

bool LocalBatch::pending() const {
  if (unacked_.load(std::memory_order_acquire) > 0) return true;
  {
    StdLock lock(&flush_mu_);
    if (current_.has_value() || !staged_grants_.empty() ||
        !staged_decisions_.empty() || !staged_chains_.empty()) {
      return true;
    }
  }
  {
    FastLock lock(&dirty_mu_);
    if (!dirty_.empty()) return true;
  }
  FastLock lock(&decisions_mu_);
  return !decisions_.empty() || !chains_.empty();
}

bool LocalBatch::full() const {
  StdLock lock(&flush_mu_);
  const uint64_t resent = current_.has_value() ? current_->outcomes : 0;
  return unacked_.load(std::memory_order_acquire) >= resent + kFlushAt;
}

void LocalBatch::DropAll() {
  StdLock lock(&flush_mu_);
  Stage();
  uint64_t outcomes = 0;
  for (const std::vector<LocalCall>& calls : staged_calls_) {
    outcomes += calls.size();
  }
  outcomes -= staged_head_;
  staged_calls_.clear();
  staged_head_ = 0;
  staged_grants_.clear();
  staged_decisions_.clear();
  staged_chains_.clear();
  if (current_.has_value()) {
    outcomes += current_->outcomes;
    current_.reset();
    arena_.Reset();
  }
  dropped_.fetch_add(outcomes, std::memory_order_relaxed);
  unacked_.fetch_sub(outcomes, std::memory_order_acq_rel);
}

// --- BatchFlusher -----------------------------------------------------------

BatchFlusher::BatchFlusher(Options options) : options_(std::move(options)) {}

void BatchFlusher::ScheduleLocked(absl::Duration delay) {
  due_ = options_.clock->Now() + delay;
  options_.timer->Schedule([this] { Flush(); }, delay);
}

void BatchFlusher::Wake(bool urgent) {
  StdLock lock(&mu_);
  if (stopped_ || parked_) return;
  const absl::Duration delay =
      urgent ? absl::ZeroDuration() : options_.interval;
  if (due_.has_value() && *due_ <= options_.clock->Now() + delay) return;
  ScheduleLocked(delay);
}

void BatchFlusher::Back() {
  StdLock lock(&mu_);
  if (stopped_) return;
  parked_ = false;
  if (options_.batch->pending()) ScheduleLocked(absl::ZeroDuration());
}

void BatchFlusher::StopScheduling() {
  StdLock lock(&mu_);
  stopped_ = true;
}

void BatchFlusher::Flush() {
  {
    StdLock lock(&mu_);
    due_.reset();
    if (stopped_) return;
    if (options_.away()) {
      // Back() schedules the next flush.
      parked_ = true;
      return;
    }
  }
  while (const v1::ReportBatchRequest* request = options_.batch->Next()) {
    const absl::Status status = options_.send(*request, options_.send_timeout);
    options_.batch->Sent(status);
    // A failed request is sent again at the next flush; past kFlushAt
    // outcomes waiting, the next request goes at once.
    if (!status.ok() || !options_.batch->full()) break;
    StdLock lock(&mu_);
    if (stopped_) return;
  }
  StdLock lock(&mu_);
  if (stopped_ || due_.has_value() || !options_.batch->pending()) return;
  ScheduleLocked(options_.interval);
}

void BatchFlusher::FinalFlush(absl::Duration budget) {
  const absl::Duration end = options_.clock->Now() + budget;
  while (!options_.away()) {
    const absl::Duration left = end - options_.clock->Now();
    if (left <= absl::ZeroDuration()) break;
    const v1::ReportBatchRequest* request = options_.batch->Next();
    if (request == nullptr) break;
    options_.batch->Sent(
        options_.send(*request, std::min(left, options_.send_timeout)));
  }
  options_.batch->DropAll();
}

}  // namespace breakerd::client::internal

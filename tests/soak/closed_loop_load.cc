#include "tests/soak/closed_loop_load.h"

#include <chrono>
#include <optional>
#include <random>

#include "absl/strings/str_cat.h"
#include "grpcpp/client_context.h"
#include "grpcpp/support/status.h"

namespace breakerd {

absl::string_view SentClassLabel(SentClass c) {
  switch (c) {
    case SentClass::kSuccess:
      return "success";
    case SentClass::kServerError:
      return "server_error";
    case SentClass::kTimeout:
      return "timeout";
    case SentClass::kBadRequest:
      return "bad_request";
    case SentClass::kRateLimited:
      return "rate_limited";
  }
  return "unknown";
}

void LoadCounts::Add(const LoadCounts& other) {
  acquires += other.acquires;
  allowed += other.allowed;
  probes += other.probes;
  rejected += other.rejected;
  retries += other.retries;
  retries_allowed += other.retries_allowed;
  reports += other.reports;
  for (int i = 0; i < kSentClassCount; ++i) {
    reports_by_class[i] += other.reports_by_class[i];
  }
  for (size_t i = 0; i < reports_by_effect.size(); ++i) {
    reports_by_effect[i] += other.reports_by_effect[i];
  }
  acquire_errors += other.acquire_errors;
  report_errors += other.report_errors;
  if (first_error.empty()) first_error = other.first_error;
}

// One call in flight at a time: Issue -> OnAcquire [-> OnReport] -> Issue.
// Its fields are touched by one callback at a time (each call starts from
// the previous one's callback), so they need no lock.
class ClosedLoopLoad::Slot {
 public:
  Slot(ClosedLoopLoad* load, std::shared_ptr<grpc::Channel> channel,
       uint64_t seed)
      : load_(load), stub_(v1::Breaker::NewStub(channel)), rng_(seed) {}

  // Starts the slot's next call: a first attempt on a random dependency.
  void Issue() {
    const std::vector<LoadTarget>& targets = load_->options_.targets;
    IssueAcquire(
        std::uniform_int_distribution<size_t>(0, targets.size() - 1)(rng_), 0);
  }

  const LoadCounts& counts() const { return counts_; }
  const std::vector<std::pair<std::string, uint64_t>>& kept() const {
    return kept_;
  }

 private:
  void IssueAcquire(size_t target, uint32_t attempt) {
    if (!load_->ClaimAcquire()) {
      load_->SlotEnded(*this);  // `this` is not touched after this line
      return;
    }
    target_ = target;
    acquire_request_.set_dependency(load_->options_.targets[target].dependency);
    acquire_request_.set_attempt(attempt);
    acquire_response_.Clear();
    NewContext();
    stub_->async()->Acquire(&*context_, &acquire_request_, &acquire_response_,
                            [this](grpc::Status s) { OnAcquire(s); });
  }

  void NewContext() {
    context_.reset();
    context_.emplace();
    context_->set_deadline(
        std::chrono::system_clock::now() +
        absl::ToChronoMilliseconds(load_->options_.rpc_deadline));
  }

  void OnAcquire(const grpc::Status& s) {
    const std::string& dependency = acquire_request_.dependency();
    if (!s.ok()) {
      ++counts_.acquire_errors;
      Note(absl::StrCat("Acquire ", dependency, ": code ", s.error_code(), " ",
                        s.error_message()));
      return Next();
    }
    ++counts_.acquires;
    const bool retry = acquire_request_.attempt() > 0;
    if (retry) ++counts_.retries;
    if (!acquire_response_.allowed()) {
      ++counts_.rejected;
      return Next();
    }
    ++counts_.allowed;
    if (retry) ++counts_.retries_allowed;
    if (acquire_response_.probe()) ++counts_.probes;
    if (acquire_response_.permit() == 0) {
      ++counts_.acquire_errors;
      Note(absl::StrCat("Acquire ", dependency, ": allowed with permit 0"));
      return Next();
    }
    if (static_cast<int>(kept_.size()) <
        load_->options_.keep_permits_per_slot) {
      kept_.emplace_back(dependency, acquire_response_.permit());
    }
    if (!load_->options_.report) return Next();

    report_request_.Clear();
    report_request_.set_dependency(dependency);
    report_request_.set_permit(acquire_response_.permit());
    sent_ = DrawClass(load_->options_.targets[target_].mix);
    Encode(sent_);
    report_request_.mutable_latency()->set_nanos(
        std::uniform_int_distribution<int32_t>(1'000'000, 400'000'000)(rng_));
    report_response_.Clear();
    NewContext();
    stub_->async()->Report(&*context_, &report_request_, &report_response_,
                           [this](grpc::Status s) { OnReport(s); });
  }

  void OnReport(const grpc::Status& s) {
    if (!s.ok()) {
      ++counts_.report_errors;
      Note(absl::StrCat("Report ", report_request_.dependency(), " (",
                        report_request_.ShortDebugString(), "): code ",
                        s.error_code(), " ", s.error_message()));
      return Next();
    }
    ++counts_.reports;
    ++counts_.reports_by_class[static_cast<int>(sent_)];
    const int effect = report_response_.effect();
    if (effect >= 0 &&
        effect < static_cast<int>(counts_.reports_by_effect.size())) {
      ++counts_.reports_by_effect[effect];
    }
    // The call failed: retry it once, now, with the breaker's consent.
    const bool failed = sent_ == SentClass::kServerError ||
                        sent_ == SentClass::kTimeout ||
                        sent_ == SentClass::kRateLimited;
    if (failed && acquire_request_.attempt() == 0 &&
        std::uniform_real_distribution<double>(0, 1)(rng_) <
            load_->options_.retry_share) {
      load_->completed_.fetch_add(1, std::memory_order_relaxed);
      return IssueAcquire(target_, 1);
    }
    Next();
  }

  void Next() {
    load_->completed_.fetch_add(1, std::memory_order_relaxed);
    Issue();
  }

  void Note(std::string what) {
    if (counts_.first_error.empty()) counts_.first_error = std::move(what);
  }

  SentClass DrawClass(const OutcomeMix& mix) {
    const double weights[kSentClassCount] = {mix.success, mix.server_error,
                                             mix.timeout, mix.bad_request,
                                             mix.rate_limited};
    double total = 0;
    for (double w : weights) total += w;
    double x = std::uniform_real_distribution<double>(0, total)(rng_);
    for (int c = 0; c < kSentClassCount; ++c) {
      if (x < weights[c]) return static_cast<SentClass>(c);
      x -= weights[c];
    }
    return SentClass::kSuccess;  // rounding at the top end
  }

  // Writes `c` into report_request_ as an explicit outcome, an HTTP status
  // or a gRPC code, one of the three at random.
  void Encode(SentClass c) {
    struct Encoding {
      v1::Outcome outcome;
      uint32_t http_status;
      int32_t grpc_code;
    };
    // gRPC codes: OK 0, DEADLINE_EXCEEDED 4, NOT_FOUND 5,
    // RESOURCE_EXHAUSTED 8, INTERNAL 13.
    static constexpr Encoding kEncodings[kSentClassCount] = {
        {v1::OUTCOME_SUCCESS, 200, 0},      {v1::OUTCOME_SERVER_ERROR, 503, 13},
        {v1::OUTCOME_TIMEOUT, 504, 4},      {v1::OUTCOME_BAD_REQUEST, 404, 5},
        {v1::OUTCOME_RATE_LIMITED, 429, 8},
    };
    const Encoding& e = kEncodings[static_cast<int>(c)];
    switch (std::uniform_int_distribution<int>(0, 2)(rng_)) {
      case 0:
        report_request_.set_outcome(e.outcome);
        break;
      case 1:
        report_request_.set_http_status(e.http_status);
        break;
      default:
        report_request_.set_grpc_code(e.grpc_code);
        break;
    }
    // Half the rate-limited answers carry a Retry-After, as real 429s do.
    if (c == SentClass::kRateLimited &&
        std::uniform_int_distribution<int>(0, 1)(rng_) == 0) {
      report_request_.mutable_retry_after()->set_nanos(200'000'000);
    }
  }

  ClosedLoopLoad* const load_;
  const std::unique_ptr<v1::Breaker::Stub> stub_;
  std::mt19937_64 rng_;

  // The call in flight.
  std::optional<grpc::ClientContext> context_;
  size_t target_ = 0;
  SentClass sent_ = SentClass::kSuccess;
  v1::AcquireRequest acquire_request_;
  v1::AcquireResponse acquire_response_;
  v1::ReportRequest report_request_;
  v1::ReportResponse report_response_;

  LoadCounts counts_;
  std::vector<std::pair<std::string, uint64_t>> kept_;
};

ClosedLoopLoad::ClosedLoopLoad(LoadOptions options)
    : options_(std::move(options)) {
  for (int i = 0; i < options_.inflight; ++i) {
    slots_.push_back(std::make_unique<Slot>(
        this, options_.channels[i % options_.channels.size()],
        options_.seed + static_cast<uint64_t>(i)));
  }
}

ClosedLoopLoad::~ClosedLoopLoad() {
  stop_.store(true, std::memory_order_relaxed);
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(
      +[](int* running) { return *running == 0; }, &running_));
}

void ClosedLoopLoad::Start() {
  {
    absl::MutexLock lock(&mu_);
    running_ = static_cast<int>(slots_.size());
  }
  for (auto& slot : slots_) slot->Issue();
}

bool ClosedLoopLoad::ClaimAcquire() {
  if (stop_.load(std::memory_order_relaxed)) return false;
  if (options_.max_acquires < 0) return true;
  return acquires_issued_.fetch_add(1, std::memory_order_relaxed) <
         options_.max_acquires;
}

void ClosedLoopLoad::SlotEnded(const Slot& slot) {
  absl::MutexLock lock(&mu_);
  counts_.Add(slot.counts());
  kept_.insert(kept_.end(), slot.kept().begin(), slot.kept().end());
  --running_;
}

bool ClosedLoopLoad::Stop(absl::Duration timeout) {
  stop_.store(true, std::memory_order_relaxed);
  return WaitDone(timeout);
}

bool ClosedLoopLoad::WaitDone(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  return mu_.AwaitWithTimeout(
      absl::Condition(
          +[](int* running) { return *running == 0; }, &running_),
      timeout);
}

LoadCounts ClosedLoopLoad::Counts() const {
  absl::MutexLock lock(&mu_);
  return counts_;
}

std::vector<std::pair<std::string, uint64_t>> ClosedLoopLoad::kept_permits()
    const {
  absl::MutexLock lock(&mu_);
  return kept_;
}

}  // namespace breakerd

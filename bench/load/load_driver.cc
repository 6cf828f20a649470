#include "bench/load/load_driver.h"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "tests/soak/proc_stats.h"

namespace breakerd {
namespace bench {
namespace {

using SteadyClock = std::chrono::steady_clock;

constexpr auto kCallDeadline = std::chrono::seconds(10);
constexpr char kHealthCheckMethod[] = "/grpc.health.v1.Health/Check";

std::shared_ptr<grpc::Channel> MakeChannel(const std::string& address, int id) {
  grpc::ChannelArguments args;
  // A distinct argument per channel: channels with identical arguments
  // would share one subchannel, hence one connection.
  args.SetInt("breakerd.bench.channel_id", id);
  return grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(),
                                   args);
}

}  // namespace

std::vector<ChannelStubs> ConnectChannels(const std::string& target,
                                          const std::string& floor,
                                          int channels) {
  std::vector<ChannelStubs> stubs(channels);
  std::vector<std::shared_ptr<grpc::Channel>> all_channels;
  for (int i = 0; i < channels; ++i) {
    auto to_target = MakeChannel(target, i);
    auto to_floor = MakeChannel(floor, i);
    stubs[i].breaker = v1::Breaker::NewStub(to_target);
    stubs[i].health = std::make_unique<grpc::GenericStub>(to_target);
    stubs[i].echo = Echo::NewStub(to_floor);
    all_channels.push_back(to_target);
    all_channels.push_back(to_floor);
  }
  for (const auto& channel : all_channels) {
    if (!channel->WaitForConnected(std::chrono::system_clock::now() +
                                   std::chrono::seconds(10))) {
      return {};
    }
  }
  return stubs;
}

// What every slot of one measurement shares. Constant while slots run,
// except `running`.
struct LoadRunner::Measurement {
  CallKind kind = CallKind::kEcho;
  SteadyClock::time_point timed_from;
  SteadyClock::time_point timed_until;
  std::atomic<int> running{0};
  absl::Mutex mu;
  absl::CondVar all_stopped;
};

// One closed loop: a call in flight at a time. Its callbacks run on gRPC's
// threads, one after another (the next call starts only from the previous
// call's callback), so its fields need no lock; the main thread reads them
// only after the slot has stopped (Measurement::running, acq_rel).
class LoadRunner::Slot {
 public:
  Slot(ChannelStubs* stubs, int dependencies) : s_(stubs) {
    for (int d = 0; d < dependencies; ++d) {
      // Realistic length (DESIGN.md: provider/credential-id): longer than
      // std::string's inline buffer, as most real names are.
      const std::string name = absl::StrCat("bench-provider/credential-", d);
      v1::AcquireRequest acquire;
      acquire.set_dependency(name);
      acquire.set_attempt(0);
      acquire_requests_.push_back(std::move(acquire));
      v1::ReportRequest report;
      report.set_dependency(name);
      report.set_outcome(v1::OUTCOME_SUCCESS);
      report.mutable_latency()->set_nanos(250000);  // a plausible 250 µs
      report_requests_.push_back(std::move(report));
    }
    // HealthCheckRequest{service: ""} encodes to zero bytes; a valid (not
    // null) empty buffer so that a message is actually sent.
    grpc::Slice empty;
    health_request_ = grpc::ByteBuffer(&empty, 1);
  }

  // Starts the loop; it stops itself at m->timed_until.
  void Start(Measurement* m) {
    m_ = m;
    histogram_.Clear();
    failures_ = 0;
    completed_ = 0;
    Issue();
  }

  const LatencyHistogram& histogram() const { return histogram_; }
  // Of the last measurement: failed calls, and calls (pairs) completed,
  // warmup and tail included.
  uint64_t failures() const { return failures_; }
  uint64_t completed() const { return completed_; }
  const std::string& first_error() const { return first_error_; }

 private:
  void NewContext() {
    context_.reset();
    context_.emplace();
    context_->set_deadline(std::chrono::system_clock::now() + kCallDeadline);
  }

  size_t NextDependency() {
    const size_t d = next_dependency_;
    if (++next_dependency_ == acquire_requests_.size()) next_dependency_ = 0;
    return d;
  }

  void Issue() {
    start_ = SteadyClock::now();
    NewContext();
    switch (m_->kind) {
      case CallKind::kEcho:
        s_->echo->async()->Empty(&*context_, &empty_, &empty_response_,
                                 [this](grpc::Status s) { OnEcho(s); });
        break;
      case CallKind::kHealth:
        health_response_.Clear();
        s_->health->UnaryCall(&*context_, health_method_, grpc::StubOptions(),
                              &health_request_, &health_response_,
                              [this](grpc::Status s) { OnHealth(s); });
        break;
      case CallKind::kAcquire:
      case CallKind::kPair:
      case CallKind::kReport:
        // kReport: permits are single-use (a repeated Report is a
        // DUPLICATE, which does less work), so each timed Report gets a
        // fresh permit from an Acquire outside its timed region.
        dependency_ = NextDependency();
        s_->breaker->async()->Acquire(
            &*context_, &acquire_requests_[dependency_], &acquire_response_,
            [this](grpc::Status s) { OnAcquire(s); });
        break;
    }
  }

  void StartReport() {
    s_->breaker->async()->Report(&*context_, &report_requests_[dependency_],
                                 &report_response_,
                                 [this](grpc::Status s) { OnReport(s); });
  }

  void OnEcho(const grpc::Status& s) { Done(s.ok() || Fail("Echo", s)); }

  void OnHealth(const grpc::Status& s) {
    // HealthCheckResponse{status: SERVING} is two bytes on the wire.
    Done(s.ok() ? (health_response_.Length() == 2 ||
                   Fail("Health/Check: response is not SERVING"))
                : Fail("Health/Check", s));
  }

  void OnAcquire(const grpc::Status& s) {
    if (!s.ok()) return Done(Fail("Acquire", s));
    if (!acquire_response_.allowed()) {
      return Done(Fail(absl::StrCat(
          "Acquire ", acquire_requests_[dependency_].dependency(),
          ": not allowed, state ", v1::State_Name(acquire_response_.state()),
          ", reason ", v1::RejectReason_Name(acquire_response_.reason()))));
    }
    if (m_->kind == CallKind::kAcquire) return Done(true);
    // The pair's second half; start_ stays at the Acquire's start. A
    // Report timed alone starts its clock now.
    if (m_->kind == CallKind::kReport) start_ = SteadyClock::now();
    report_requests_[dependency_].set_permit(acquire_response_.permit());
    NewContext();
    StartReport();
  }

  void OnReport(const grpc::Status& s) {
    if (!s.ok()) return Done(Fail("Report", s));
    if (report_response_.effect() != v1::EFFECT_COUNTED_SUCCESS) {
      return Done(Fail(absl::StrCat(
          "Report ", report_requests_[dependency_].dependency(), ": effect ",
          v1::Effect_Name(report_response_.effect()))));
    }
    Done(true);
  }

  // Always false, for `ok || Fail(...)`.
  bool Fail(const std::string& what, const grpc::Status& s) {
    return Fail(
        absl::StrCat(what, ": code ", s.error_code(), " ", s.error_message()));
  }
  bool Fail(const std::string& what) {
    ++failures_;
    if (first_error_.empty()) first_error_ = what;
    return false;
  }

  void Done(bool ok) {
    const SteadyClock::time_point end = SteadyClock::now();
    ++completed_;
    if (ok && start_ >= m_->timed_from && end <= m_->timed_until) {
      histogram_.Record(static_cast<uint64_t>(
          std::chrono::duration_cast<std::chrono::nanoseconds>(end - start_)
              .count()));
    }
    if (end < m_->timed_until) return Issue();
    Measurement* m = m_;
    if (m->running.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      absl::MutexLock lock(&m->mu);
      m->all_stopped.SignalAll();
    }
  }

  ChannelStubs* const s_;
  Measurement* m_ = nullptr;

  std::vector<v1::AcquireRequest> acquire_requests_;  // one per dependency
  std::vector<v1::ReportRequest> report_requests_;    // one per dependency
  google::protobuf::Empty empty_;
  grpc::ByteBuffer health_request_;
  // A std::string, built once: GenericStub takes the method by reference.
  const std::string health_method_ = kHealthCheckMethod;

  // The call in flight.
  std::optional<grpc::ClientContext> context_;
  SteadyClock::time_point start_;
  size_t next_dependency_ = 0;
  size_t dependency_ = 0;
  google::protobuf::Empty empty_response_;
  grpc::ByteBuffer health_response_;
  v1::AcquireResponse acquire_response_;
  v1::ReportResponse report_response_;

  LatencyHistogram histogram_;
  uint64_t failures_ = 0;
  uint64_t completed_ = 0;
  std::string first_error_;  // the first since construction
};

LoadRunner::LoadRunner(std::vector<ChannelStubs>* stubs, int inflight,
                       int dependencies, double warmup, double duration,
                       int target_pid, int floor_pid)
    : warmup_(warmup),
      duration_(duration),
      target_pid_(target_pid),
      floor_pid_(floor_pid) {
  for (int i = 0; i < inflight; ++i) {
    slots_.push_back(
        std::make_unique<Slot>(&(*stubs)[i % stubs->size()], dependencies));
  }
}

LoadRunner::~LoadRunner() = default;

bool LoadRunner::MeasureRounds(const std::vector<CallKind>& order, int rounds,
                               std::vector<Row>* rows) {
  rows->clear();
  for (CallKind kind : kAllKinds) rows->emplace_back(kind);
  auto row_of = [rows](CallKind kind) -> Row* {
    for (Row& r : *rows) {
      if (r.kind == kind) return &r;
    }
    return &rows->front();
  };
  bool completed = true;
  for (int round = 0; round < rounds && completed; ++round) {
    // ABBA: the order reverses every other round.
    for (size_t i = 0; i < order.size() && completed; ++i) {
      const CallKind kind = order[round % 2 == 0 ? i : order.size() - 1 - i];
      completed = Measure(kind, row_of(kind));
    }
  }
  return completed;
}

bool LoadRunner::Measure(CallKind kind, Row* row) {
  Measurement m;
  m.kind = kind;
  const auto now = SteadyClock::now();
  m.timed_from = now + std::chrono::duration_cast<SteadyClock::duration>(
                           std::chrono::duration<double>(warmup_));
  m.timed_until =
      m.timed_from + std::chrono::duration_cast<SteadyClock::duration>(
                         std::chrono::duration<double>(duration_));
  const int pid = kind == CallKind::kEcho ? floor_pid_ : target_pid_;
  const uint64_t cpu_before = ProcessCpuNanos(pid);
  m.running.store(static_cast<int>(slots_.size()));
  for (auto& slot : slots_) slot->Start(&m);
  {
    absl::MutexLock lock(&m.mu);
    const absl::Time give_up =
        absl::Now() + absl::Seconds(warmup_ + duration_) +
        absl::FromChrono(kCallDeadline) + absl::Seconds(5);
    while (m.running.load(std::memory_order_acquire) > 0) {
      if (m.all_stopped.WaitWithDeadline(&m.mu, give_up)) break;
    }
  }
  if (m.running.load(std::memory_order_acquire) > 0) {
    // The slots still point at `m`: nothing safe to do but leave.
    std::fprintf(stderr, "breakerd_load: %s: calls did not finish\n",
                 KindName(kind));
    std::_Exit(1);
  }
  const uint64_t cpu_after = ProcessCpuNanos(pid);
  if (cpu_after > cpu_before) row->server_cpu_ns += cpu_after - cpu_before;
  LatencyHistogram merged;
  uint64_t failures = 0;
  for (auto& slot : slots_) {
    merged.Merge(slot->histogram());
    failures += slot->failures();
    row->completed += slot->completed();
  }
  row->merged.Merge(merged);
  row->seconds += duration_;
  row->rounds.push_back(StatsOf(merged, duration_));
  row->failures += failures;
  return true;
}

std::string LoadRunner::FirstError() const {
  for (const auto& slot : slots_) {
    if (!slot->first_error().empty()) return slot->first_error();
  }
  return "";
}

}  // namespace bench
}  // namespace breakerd

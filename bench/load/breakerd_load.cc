// breakerd_load: a closed-loop load generator that measures breakerd's RPCs
// against the gRPC floor, as ratios, in one run (DESIGN.md, "Performance
// targets"). See bench/load/README.md for how to read the numbers.
//
// --inflight call slots each keep exactly one call in flight: when a call
// completes, its callback records the latency and starts the next one (C++
// callback API, stub->async()). Slots are spread round-robin over
// --channels channels per server, each with a distinct channel argument so
// each is its own HTTP/2 connection.
//
// Measured, each for --warmup + --duration seconds, --rounds times, in the
// --calls order (default below), reversed in every other round (ABBA), so
// that drift on a noisy machine lands on every call alike:
//   echo     breakerd.bench.Echo/Empty on --floor        (the primary floor)
//   acquire  Breaker/Acquire, attempt 0, closed breaker  on --target
//   report   Breaker/Report, OUTCOME_SUCCESS, with a permit from a pool
//            acquired before the timed region (Slot::PreparePermits)
//   pair     Acquire, then Report with its permit, timed as one unit
//   health   grpc.health.v1.Health/Check, a generic call with an empty
//            request, on --target (the secondary floor: breakerd's own
//            server and interceptor, no breakerd handler)
// A call counts if it started and finished inside the timed window; its
// latency goes into the slot's preallocated histogram (no allocation on the
// hot path beyond what gRPC does). Every response is checked: a non-OK
// status, an Acquire not allowed or a Report not counted as a success is a
// failed call, and any failed call makes the exit code 1.
//
// With --target_pid / --floor_pid (servers on this machine) it also reports
// each server's CPU time per call, from /proc: less sensitive to other load
// on the machine than latency is.
//
// Usage:
//   breakerd_load --target=127.0.0.1:50051 --floor=127.0.0.1:50052
//       --inflight=64 --channels=4 --duration=3 --warmup=0.5 --rounds=3
//       --json=out.json
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/algorithm/container.h"
#include "absl/flags/flag.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "bench/common/init.h"
#include "bench/common/json.h"
#include "bench/load/echo.grpc.pb.h"
#include "bench/load/latency_histogram.h"
#include "breakerd/v1/breaker.grpc.pb.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "tests/soak/proc_stats.h"

ABSL_FLAG(std::string, target, "",
          "breakerd's gRPC address (host:port or "
          "unix:/path). Required.");
ABSL_FLAG(std::string, floor, "",
          "The echo server's address (bench/load/echo_server), on the same "
          "transport as --target. Required.");
ABSL_FLAG(int, inflight, 1, "Calls in flight, in total (closed loop).");
ABSL_FLAG(int, channels, 1,
          "Channels (separate connections) per server; slots are spread "
          "over them round-robin.");
ABSL_FLAG(double, duration, 3.0, "Seconds timed per measurement.");
ABSL_FLAG(double, warmup, 0.5,
          "Seconds of untimed load before each measurement.");
ABSL_FLAG(int, rounds, 3,
          "Times every call is measured; the order reverses each round.");
ABSL_FLAG(int, dependencies, 1,
          "Dependency names the calls are spread over "
          "(bench-provider/credential-<i>).");
ABSL_FLAG(std::vector<std::string>, calls,
          std::vector<std::string>({"echo", "acquire", "report", "pair",
                                    "health"}),
          "The calls to measure (default all), in this order, reversed every "
          "other round. A subset is for investigations: the ratios need echo "
          "and health.");
ABSL_FLAG(int, target_pid, 0,
          "breakerd's process id, if on this machine: reports its CPU time "
          "per call (from /proc).");
ABSL_FLAG(int, floor_pid, 0,
          "The echo server's process id, if on this machine: reports its CPU "
          "time per call.");
ABSL_FLAG(std::string, json, "", "Write the results as JSON to this file.");

namespace breakerd {
namespace bench {
namespace {

using SteadyClock = std::chrono::steady_clock;

constexpr auto kCallDeadline = std::chrono::seconds(10);
constexpr char kHealthCheckMethod[] = "/grpc.health.v1.Health/Check";

enum class CallKind { kEcho, kHealth, kAcquire, kReport, kPair };
constexpr CallKind kAllKinds[] = {CallKind::kEcho, CallKind::kHealth,
                                  CallKind::kAcquire, CallKind::kReport,
                                  CallKind::kPair};

const char* KindName(CallKind kind) {
  switch (kind) {
    case CallKind::kEcho:
      return "echo";
    case CallKind::kHealth:
      return "health";
    case CallKind::kAcquire:
      return "acquire";
    case CallKind::kReport:
      return "report";
    case CallKind::kPair:
      return "pair";
  }
  return "?";
}

// The stubs of one channel to each server.
struct ChannelStubs {
  std::unique_ptr<v1::Breaker::Stub> breaker;
  std::unique_ptr<grpc::GenericStub> health;  // on the breakerd channel
  std::unique_ptr<Echo::Stub> echo;
};

// What every slot of one measurement shares. Constant while slots run,
// except `running`.
struct Measurement {
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
class Slot {
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

  // Takes one permit per dependency, synchronously, outside any timed
  // region, for the report-alone measurement. Returns false (with
  // first_error()) if breakerd does not allow the call.
  bool PreparePermits() {
    for (size_t d = 0; d < acquire_requests_.size(); ++d) {
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + kCallDeadline);
      v1::AcquireResponse response;
      const grpc::Status status =
          s_->breaker->Acquire(&ctx, acquire_requests_[d], &response);
      if (!status.ok() || !response.allowed()) {
        const std::string what = absl::StrCat(
            "permit pool: Acquire ", acquire_requests_[d].dependency(), ": ",
            status.ok() ? "not allowed"
                        : absl::StrCat("code ", status.error_code(), " ",
                                       status.error_message()));
        if (first_error_.empty()) first_error_ = what;
        return false;
      }
      report_requests_[d].set_permit(response.permit());
    }
    return true;
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
        dependency_ = NextDependency();
        s_->breaker->async()->Acquire(
            &*context_, &acquire_requests_[dependency_], &acquire_response_,
            [this](grpc::Status s) { OnAcquire(s); });
        break;
      case CallKind::kReport:
        dependency_ = NextDependency();
        StartReport();
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
    // The pair's second half; start_ stays at the Acquire's start.
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

struct Stats {
  uint64_t calls = 0;
  double seconds = 0;
  double p50_us = 0, p90_us = 0, p99_us = 0;
  double qps() const { return seconds > 0 ? calls / seconds : 0; }
};

Stats StatsOf(const LatencyHistogram& h, double seconds) {
  Stats s;
  s.calls = h.count();
  s.seconds = seconds;
  s.p50_us = h.Quantile(0.50) / 1000.0;
  s.p90_us = h.Quantile(0.90) / 1000.0;
  s.p99_us = h.Quantile(0.99) / 1000.0;
  return s;
}

// Every measurement of one call kind, merged over the rounds.
struct Row {
  explicit Row(CallKind k) : kind(k) {}
  CallKind kind;
  LatencyHistogram merged;
  double seconds = 0;
  std::vector<Stats> rounds;
  uint64_t failures = 0;
  // The serving process's CPU time over the measurements (warmup and tail
  // included) and the calls (pairs) completed in that time; 0 without a pid.
  uint64_t server_cpu_ns = 0;
  uint64_t completed = 0;
  Stats total() const { return StatsOf(merged, seconds); }
  double server_cpu_us_per_call() const {
    return completed > 0 ? server_cpu_ns / 1000.0 / completed : 0;
  }
};

class LoadRunner {
 public:
  // target_pid, floor_pid: the servers' process ids, to measure their CPU
  // time per call; 0 if unknown.
  LoadRunner(std::vector<ChannelStubs>* stubs, int inflight, int dependencies,
             double warmup, double duration, int target_pid, int floor_pid)
      : warmup_(warmup),
        duration_(duration),
        target_pid_(target_pid),
        floor_pid_(floor_pid) {
    for (int i = 0; i < inflight; ++i) {
      slots_.push_back(
          std::make_unique<Slot>(&(*stubs)[i % stubs->size()], dependencies));
    }
  }

  // Runs one timed measurement of `kind` and adds it to `row`. Returns
  // false if the slots did not stop in time or the permit pool failed.
  bool Measure(CallKind kind, Row* row) {
    if (kind == CallKind::kReport) {
      for (auto& slot : slots_) {
        if (!slot->PreparePermits()) {
          ++row->failures;
          return false;
        }
      }
    }
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

  std::string FirstError() const {
    for (const auto& slot : slots_) {
      if (!slot->first_error().empty()) return slot->first_error();
    }
    return "";
  }

 private:
  const double warmup_;
  const double duration_;
  const int target_pid_;
  const int floor_pid_;
  std::vector<std::unique_ptr<Slot>> slots_;
};

std::shared_ptr<grpc::Channel> MakeChannel(const std::string& address, int id) {
  grpc::ChannelArguments args;
  // A distinct argument per channel: channels with identical arguments
  // would share one subchannel, hence one connection.
  args.SetInt("breakerd.bench.channel_id", id);
  return grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(),
                                   args);
}

std::string ReadCpuModel() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (absl::StartsWith(line, "model name")) {
      const size_t colon = line.find(':');
      if (colon != std::string::npos) {
        return std::string(absl::StripAsciiWhitespace(line.substr(colon + 1)));
      }
    }
  }
  return "unknown";
}

std::string Num(double v) { return absl::StrFormat("%.2f", v); }

// Ratios of a breakerd call to a floor. Latency: call / (units x floor);
// QPS: call x units / floor, where units is the RPCs in one call (2 for the
// pair). So 1.0 is "as fast as the floor" both ways; above 1.0 is worse for
// latency, below 1.0 is worse for QPS.
struct Ratio {
  double p50 = 0, p99 = 0, qps = 0;
};

Ratio RatioOf(const Stats& call, const Stats& floor, double units) {
  Ratio r;
  if (floor.p50_us > 0) r.p50 = call.p50_us / (units * floor.p50_us);
  if (floor.p99_us > 0) r.p99 = call.p99_us / (units * floor.p99_us);
  if (floor.qps() > 0) r.qps = call.qps() * units / floor.qps();
  return r;
}

// DESIGN.md: within 1.1x of the floor (median latency and throughput), p99
// within 1.5x. Informational only.
bool WithinTarget(const Ratio& r) {
  return r.p50 <= 1.1 && r.qps >= 1 / 1.1 && r.p99 <= 1.5;
}

// min, median, max of `v` (sorted in place); zeros when empty.
std::array<double, 3> Spread(std::vector<double> v) {
  if (v.empty()) return {0, 0, 0};
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  const double median = n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2.0;
  return {v.front(), median, v.back()};
}

// A breakerd call compared with the floors.
struct Compared {
  const char* name;
  CallKind kind;
  double units;  // RPCs per call
};
constexpr Compared kCompared[] = {{"acquire", CallKind::kAcquire, 1},
                                  {"report", CallKind::kReport, 1},
                                  {"pair", CallKind::kPair, 2}};
constexpr CallKind kFloors[] = {CallKind::kEcho, CallKind::kHealth};

struct Report {
  std::string transport, target, floor;
  int inflight = 0, channels = 0, dependencies = 0, rounds = 0;
  double warmup = 0, duration = 0, wall_seconds = 0;
  absl::Time date;
  std::string load_before, load_after;  // /proc/loadavg
  uint64_t failures = 0;
  std::string first_error;
};

const Row& RowOf(const std::vector<Row>& rows, CallKind kind) {
  for (const Row& r : rows) {
    if (r.kind == kind) return r;
  }
  return rows.front();
}

// Per-round ratios of `c` to `floor`, round k against round k (the floor
// and the call ran next to each other in time).
std::vector<Ratio> RoundRatios(const std::vector<Row>& rows, const Compared& c,
                               CallKind floor) {
  const Row& call = RowOf(rows, c.kind);
  const Row& base = RowOf(rows, floor);
  std::vector<Ratio> out;
  for (size_t k = 0; k < call.rounds.size() && k < base.rounds.size(); ++k) {
    out.push_back(RatioOf(call.rounds[k], base.rounds[k], c.units));
  }
  return out;
}

void PrintTable(const Report& rep, const std::vector<Row>& rows) {
  std::printf(
      "breakerd_load: transport %s, inflight %d, channels %d, dependencies "
      "%d, %d x (%.2fs warmup + %.2fs) per call, %.1fs, load average %s -> "
      "%s\n",
      rep.transport.c_str(), rep.inflight, rep.channels, rep.dependencies,
      rep.rounds, rep.warmup, rep.duration, rep.wall_seconds,
      rep.load_before.c_str(), rep.load_after.c_str());
  std::printf("%-8s %9s %9s %9s %9s %9s %7s %14s\n", "call", "qps", "p50_us",
              "p90_us", "p99_us", "calls", "failed", "srv_cpu_us/call");
  for (const Row& r : rows) {
    if (r.rounds.empty()) continue;
    const Stats s = r.total();
    std::printf("%-8s %9.0f %9.1f %9.1f %9.1f %9llu %7llu %14.1f\n",
                KindName(r.kind), s.qps(), s.p50_us, s.p90_us, s.p99_us,
                static_cast<unsigned long long>(s.calls),
                static_cast<unsigned long long>(r.failures),
                r.server_cpu_us_per_call());
  }
  std::printf("%-18s %6s %6s %6s  %-20s  %s\n", "ratio (1 = floor)", "p50",
              "p99", "qps", "p50 per round",
              "target: p50<=1.1 p99<=1.5 qps>=0.91");
  for (CallKind floor : kFloors) {
    const Stats base = RowOf(rows, floor).total();
    for (const Compared& c : kCompared) {
      if (RowOf(rows, c.kind).rounds.empty() || base.calls == 0) continue;
      const Ratio r = RatioOf(RowOf(rows, c.kind).total(), base, c.units);
      std::vector<double> p50s;
      for (const Ratio& k : RoundRatios(rows, c, floor)) p50s.push_back(k.p50);
      const std::array<double, 3> spread = Spread(p50s);
      std::printf(
          "%-18s %6.3f %6.3f %6.3f  %-20s  %s\n",
          absl::StrCat(c.name, c.units > 1 ? "/2x" : "/", KindName(floor))
              .c_str(),
          r.p50, r.p99, r.qps,
          absl::StrFormat("%.2f..%.2f..%.2f", spread[0], spread[1], spread[2])
              .c_str(),
          WithinTarget(r) ? "within" : "OUTSIDE");
    }
  }
  if (rep.failures > 0) {
    std::printf("FAILED calls: %llu; first error: %s\n",
                static_cast<unsigned long long>(rep.failures),
                rep.first_error.c_str());
  }
}

std::string Json(const Report& rep, const std::vector<Row>& rows) {
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  std::string j = "{\n";
  absl::StrAppend(&j, "  \"machine\": ",
                  JsonMachine({{"host", JsonString(host)},
                               {"cpu", JsonString(ReadCpuModel())}},
                              rep.load_before, rep.load_after),
                  ",\n");
  absl::StrAppend(&j, "  \"date\": ", JsonDate(rep.date), ",\n");
  absl::StrAppend(&j, "  \"transport\": ", JsonString(rep.transport), ",\n");
  absl::StrAppend(&j, "  \"target\": ", JsonString(rep.target), ",\n");
  absl::StrAppend(&j, "  \"floor\": ", JsonString(rep.floor), ",\n");
  absl::StrAppend(&j, "  \"inflight\": ", rep.inflight, ",\n");
  absl::StrAppend(&j, "  \"channels\": ", rep.channels, ",\n");
  absl::StrAppend(&j, "  \"dependencies\": ", rep.dependencies, ",\n");
  absl::StrAppend(&j, "  \"rounds\": ", rep.rounds, ",\n");
  absl::StrAppend(&j, "  \"warmup_s\": ", Num(rep.warmup), ",\n");
  absl::StrAppend(&j, "  \"duration_s\": ", Num(rep.duration), ",\n");
  absl::StrAppend(&j, "  \"wall_s\": ", Num(rep.wall_seconds), ",\n");
  absl::StrAppend(&j,
                  "  \"report_permits\": \"pool acquired before the timed "
                  "region, one per slot and dependency\",\n");
  absl::StrAppend(&j, "  \"failures\": ", rep.failures, ",\n");
  absl::StrAppend(&j, "  \"first_error\": ", JsonString(rep.first_error),
                  ",\n");
  absl::StrAppend(&j, "  \"rows\": [");
  bool first_row = true;
  for (const Row& r : rows) {
    if (r.rounds.empty()) continue;
    const Stats s = r.total();
    absl::StrAppend(
        &j, first_row ? "\n" : ",\n",
        "    {\"call\": ", JsonString(KindName(r.kind)),
        ", \"qps\": ", Num(s.qps()), ", \"p50_us\": ", Num(s.p50_us),
        ", \"p90_us\": ", Num(s.p90_us), ", \"p99_us\": ", Num(s.p99_us),
        ", \"calls\": ", s.calls, ", \"failures\": ", r.failures,
        ", \"server_cpu_us_per_call\": ", Num(r.server_cpu_us_per_call()),
        ", \"per_round\": [");
    for (size_t k = 0; k < r.rounds.size(); ++k) {
      const Stats& rs = r.rounds[k];
      absl::StrAppend(&j, k > 0 ? ", " : "", "{\"qps\": ", Num(rs.qps()),
                      ", \"p50_us\": ", Num(rs.p50_us),
                      ", \"p99_us\": ", Num(rs.p99_us), "}");
    }
    absl::StrAppend(&j, "]}");
    first_row = false;
  }
  absl::StrAppend(&j, "\n  ],\n");
  absl::StrAppend(
      &j,
      "  \"ratios\": {\n"
      "    \"definition\": \"latency: call / (n x floor); qps: call x n / "
      "floor; n = RPCs per call (2 for the pair); 1.0 = as fast as the floor. "
      "p50/p99/qps from all rounds merged; *_rounds: [min, median, max] of "
      "the per-round ratios\",\n"
      "    \"primary_floor\": \"echo\"");
  for (CallKind floor : kFloors) {
    const Stats base = RowOf(rows, floor).total();
    if (base.calls == 0) continue;
    absl::StrAppend(&j, ",\n    \"vs_", KindName(floor), "\": {");
    bool first = true;
    for (const Compared& c : kCompared) {
      if (RowOf(rows, c.kind).rounds.empty()) continue;
      const Ratio r = RatioOf(RowOf(rows, c.kind).total(), base, c.units);
      std::vector<double> p50s, qpss;
      for (const Ratio& k : RoundRatios(rows, c, floor)) {
        p50s.push_back(k.p50);
        qpss.push_back(k.qps);
      }
      const std::array<double, 3> p50_spread = Spread(p50s);
      const std::array<double, 3> qps_spread = Spread(qpss);
      absl::StrAppend(
          &j, first ? "\n" : ",\n", "      \"", c.name,
          "\": {\"p50\": ", absl::StrFormat("%.3f", r.p50),
          ", \"p99\": ", absl::StrFormat("%.3f", r.p99),
          ", \"qps\": ", absl::StrFormat("%.3f", r.qps), ", \"p50_rounds\": ",
          absl::StrFormat("[%.3f, %.3f, %.3f]", p50_spread[0], p50_spread[1],
                          p50_spread[2]),
          ", \"qps_rounds\": ",
          absl::StrFormat("[%.3f, %.3f, %.3f]", qps_spread[0], qps_spread[1],
                          qps_spread[2]),
          ", \"within_target\": ", WithinTarget(r) ? "true" : "false", "}");
      first = false;
    }
    absl::StrAppend(&j, "\n    }");
  }
  absl::StrAppend(&j, "\n  }\n}\n");
  return j;
}

int Run() {
  const std::string target = absl::GetFlag(FLAGS_target);
  const std::string floor_address = absl::GetFlag(FLAGS_floor);
  const int inflight = absl::GetFlag(FLAGS_inflight);
  const int channels = absl::GetFlag(FLAGS_channels);
  const double duration = absl::GetFlag(FLAGS_duration);
  const double warmup = absl::GetFlag(FLAGS_warmup);
  const int rounds = absl::GetFlag(FLAGS_rounds);
  const int dependencies = absl::GetFlag(FLAGS_dependencies);
  if (target.empty() || floor_address.empty() || inflight < 1 || channels < 1 ||
      channels > inflight || duration <= 0 || warmup < 0 || rounds < 1 ||
      dependencies < 1) {
    std::fprintf(stderr,
                 "breakerd_load: need --target and --floor, inflight >= 1, "
                 "1 <= channels <= inflight, duration > 0, warmup >= 0, "
                 "rounds >= 1, dependencies >= 1\n");
    return 2;
  }
  std::vector<CallKind> order;
  for (const std::string& name : absl::GetFlag(FLAGS_calls)) {
    const CallKind* kind = absl::c_find_if(
        kAllKinds, [&name](CallKind k) { return name == KindName(k); });
    if (kind == std::end(kAllKinds)) {
      std::fprintf(stderr, "breakerd_load: --calls: unknown call %s\n",
                   name.c_str());
      return 2;
    }
    order.push_back(*kind);
  }
  const bool target_unix = absl::StartsWith(target, "unix:");
  if (target_unix != absl::StartsWith(floor_address, "unix:")) {
    std::fprintf(stderr,
                 "breakerd_load: --target and --floor must use the same "
                 "transport\n");
    return 2;
  }

  std::vector<ChannelStubs> stubs(channels);
  std::vector<std::shared_ptr<grpc::Channel>> all_channels;
  for (int i = 0; i < channels; ++i) {
    auto to_target = MakeChannel(target, i);
    auto to_floor = MakeChannel(floor_address, i);
    stubs[i].breaker = v1::Breaker::NewStub(to_target);
    stubs[i].health = std::make_unique<grpc::GenericStub>(to_target);
    stubs[i].echo = Echo::NewStub(to_floor);
    all_channels.push_back(to_target);
    all_channels.push_back(to_floor);
  }
  for (const auto& channel : all_channels) {
    if (!channel->WaitForConnected(std::chrono::system_clock::now() +
                                   std::chrono::seconds(10))) {
      std::fprintf(stderr, "breakerd_load: cannot connect to %s or %s\n",
                   target.c_str(), floor_address.c_str());
      return 2;
    }
  }

  Report rep;
  rep.transport = target_unix ? "unix" : "tcp";
  rep.target = target;
  rep.floor = floor_address;
  rep.inflight = inflight;
  rep.channels = channels;
  rep.dependencies = dependencies;
  rep.rounds = rounds;
  rep.warmup = warmup;
  rep.duration = duration;
  rep.date = absl::Now();
  rep.load_before = ReadLoadAverage();

  LoadRunner runner(&stubs, inflight, dependencies, warmup, duration,
                    absl::GetFlag(FLAGS_target_pid),
                    absl::GetFlag(FLAGS_floor_pid));
  std::vector<Row> rows;
  for (CallKind kind : kAllKinds) rows.emplace_back(kind);
  auto row_of = [&rows](CallKind kind) -> Row* {
    for (Row& r : rows) {
      if (r.kind == kind) return &r;
    }
    return &rows.front();
  };
  bool completed = true;
  for (int round = 0; round < rounds && completed; ++round) {
    // ABBA: the order reverses every other round.
    for (size_t i = 0; i < order.size() && completed; ++i) {
      const CallKind kind = order[round % 2 == 0 ? i : order.size() - 1 - i];
      completed = runner.Measure(kind, row_of(kind));
    }
  }
  rep.wall_seconds = absl::ToDoubleSeconds(absl::Now() - rep.date);
  rep.load_after = ReadLoadAverage();
  for (const Row& r : rows) rep.failures += r.failures;
  rep.first_error = runner.FirstError();
  if (!completed && rep.failures == 0) rep.failures = 1;

  PrintTable(rep, rows);
  const std::string json_path = absl::GetFlag(FLAGS_json);
  if (!json_path.empty()) {
    std::ofstream out(json_path, std::ios::trunc);
    out << Json(rep, rows);
    if (!out.flush()) {
      std::fprintf(stderr, "breakerd_load: cannot write %s\n",
                   json_path.c_str());
      return 2;
    }
  }
  return rep.failures > 0 ? 1 : 0;
}

}  // namespace
}  // namespace bench
}  // namespace breakerd

int main(int argc, char** argv) {
  breakerd::bench::InitBenchmark(
      argc, argv,
      "breakerd_load --target=ADDR --floor=ADDR [--inflight=N --channels=M "
      "--duration=S --warmup=S --rounds=R --dependencies=K --json=PATH]: "
      "breakerd's RPCs against the gRPC floor, as ratios");
  return breakerd::bench::Run();
}

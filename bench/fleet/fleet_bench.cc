// fleet_bench: what fleet mode (--redis) costs, measured against real
// breakerd processes and a real redis-server (bench/fleet/README.md).
// bench/fleet/fleet_bench.sh starts the processes and runs each mode.
//
//   --mode=commands  Redis commands per second that one sidecar causes,
//       with --dependencies active dependencies, at two call rates: as fast
//       as --threads closed loops go, then 1/--slow_factor of that rate
//       (paced). Each cell: INFO commandstats and the sidecar's
//       breakerd_fleet_events_total{event="window_sync"} before and after
//       --duration seconds of Acquire + Report SUCCESS round-robin over
//       dep-000.. . The sidecar must be the only client of that Redis.
//   --mode=latency  One closed-loop Acquire (one in flight, one channel per
//       server) against the echo floor (--floor), grpc.health.v1 Check on
//       --target, Acquire on --target (no --redis) and Acquire on
//       --fleet_target (--redis), in --rounds ABBA rounds (bench/load's
//       LoadRunner), while a background thread per sidecar keeps
//       --dependencies dependencies busy with --background_rate pairs/s.
//   --mode=spread  --targets (three sidecars on one Redis, the config of
//       fleet_bench.sh): for each of --reps fresh dependencies, every
//       sidecar gets 3 successes and 5 timeouts (8 calls: none reaches
//       min_calls alone); then GetState on all of them every --poll_ms
//       until every one is OPEN. Reports the time from sending the last
//       failing Report to seeing the last sidecar OPEN.
//
// Each mode prints a table and writes --json. Exit code 1 if a call failed
// or a sidecar never opened; never an assertion on a timing.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "bench/common/init.h"
#include "bench/common/json.h"
#include "bench/fleet/fleet_observe.h"
#include "bench/load/load_driver.h"
#include "bench/load/load_results.h"
#include "breakerd/v1/breaker.grpc.pb.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"
#include "tests/soak/proc_stats.h"

ABSL_FLAG(std::string, mode, "", "commands, latency or spread.");
ABSL_FLAG(std::string, target, "",
          "commands: the fleet sidecar. latency: the sidecar without "
          "--redis.");
ABSL_FLAG(std::string, fleet_target, "", "latency: the sidecar with --redis.");
ABSL_FLAG(std::string, floor, "", "latency: the echo server (the floor).");
ABSL_FLAG(int, target_pid, 0, "latency: --target's pid (CPU per call).");
ABSL_FLAG(int, fleet_pid, 0, "latency: --fleet_target's pid.");
ABSL_FLAG(int, floor_pid, 0, "latency: --floor's pid.");
ABSL_FLAG(std::vector<std::string>, targets, {},
          "spread: the sidecars' gRPC addresses.");
ABSL_FLAG(std::vector<std::string>, metrics, {},
          "The fleet sidecars' /metrics addresses (host:port), in the order "
          "of --target / --fleet_target / --targets.");
ABSL_FLAG(std::string, redis, "", "Redis host:port (commands, latency).");
ABSL_FLAG(std::string, sync_interval, "250ms",
          "The sidecars' --fleet-sync-interval (for the table and the "
          "bound).");
ABSL_FLAG(int, dependencies, 100, "Active dependencies (commands, latency).");
ABSL_FLAG(double, duration, 10,
          "Seconds per cell (commands) or per timed "
          "measurement (latency).");
ABSL_FLAG(double, warmup, 1, "Seconds of untimed load first.");
ABSL_FLAG(int, threads, 4, "commands: closed loops at full speed.");
ABSL_FLAG(int, slow_factor, 10,
          "commands: the second cell runs at full rate / this.");
ABSL_FLAG(int, rounds, 4, "latency: ABBA rounds.");
ABSL_FLAG(double, background_rate, 500,
          "latency: pairs/s per sidecar over --dependencies, all along.");
ABSL_FLAG(int, reps, 10, "spread: fresh dependencies, one after another.");
ABSL_FLAG(int, poll_ms, 5, "spread: GetState period.");
ABSL_FLAG(std::string, json, "", "Write the results as JSON here.");

namespace breakerd {
namespace bench {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kDeadline = std::chrono::seconds(5);

std::unique_ptr<v1::Breaker::Stub> Stub(const std::string& address, int n) {
  grpc::ChannelArguments args;
  // A distinct argument: its own connection, not a shared subchannel.
  args.SetInt("breakerd.fleet_bench.channel", n);
  auto channel = grpc::CreateCustomChannel(
      address, grpc::InsecureChannelCredentials(), args);
  if (!channel->WaitForConnected(std::chrono::system_clock::now() +
                                 std::chrono::seconds(10))) {
    return nullptr;
  }
  return v1::Breaker::NewStub(channel);
}

std::string DepName(int i) { return absl::StrFormat("dep-%03d", i); }

double Seconds(Clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

// Acquire, then Report `outcome` with its permit; the Report's send time in
// *report_sent if given. "" or what failed.
std::string Pair(v1::Breaker::Stub* stub, const std::string& dep,
                 v1::Outcome outcome,
                 Clock::time_point* report_sent = nullptr) {
  v1::AcquireRequest areq;
  areq.set_dependency(dep);
  v1::AcquireResponse aresp;
  grpc::ClientContext actx;
  actx.set_deadline(std::chrono::system_clock::now() + kDeadline);
  grpc::Status s = stub->Acquire(&actx, areq, &aresp);
  if (!s.ok()) return absl::StrCat("Acquire ", dep, ": ", s.error_message());
  if (!aresp.allowed()) return absl::StrCat("Acquire ", dep, ": not allowed");
  v1::ReportRequest rreq;
  rreq.set_dependency(dep);
  rreq.set_permit(aresp.permit());
  rreq.set_outcome(outcome);
  v1::ReportResponse rresp;
  grpc::ClientContext rctx;
  rctx.set_deadline(std::chrono::system_clock::now() + kDeadline);
  if (report_sent != nullptr) *report_sent = Clock::now();
  s = stub->Report(&rctx, rreq, &rresp);
  if (!s.ok()) return absl::StrCat("Report ", dep, ": ", s.error_message());
  return "";
}

// Threads doing pairs round-robin over dep-000.. on one sidecar: as fast as
// they go (rate 0) or paced to `rate` pairs/s in all.
class PairLoad {
 public:
  PairLoad(std::vector<v1::Breaker::Stub*> stubs, int dependencies)
      : stubs_(std::move(stubs)), dependencies_(dependencies) {}
  ~PairLoad() { Stop(); }

  void Start(double rate) {
    stop_.store(false);
    const int n = static_cast<int>(stubs_.size());
    for (int t = 0; t < n; ++t) {
      threads_.emplace_back([this, t, n, rate] { Loop(t, n, rate); });
    }
  }
  void Stop() {
    stop_.store(true);
    for (auto& t : threads_) t.join();
    threads_.clear();
  }
  uint64_t pairs() const { return pairs_.load(); }
  uint64_t failures() const { return failures_.load(); }
  std::string first_error() const {
    absl::MutexLock lock(&mu_);
    return first_error_;
  }

 private:
  void Loop(int t, int n, double rate) {
    const auto period = rate > 0 ? std::chrono::duration_cast<Clock::duration>(
                                       std::chrono::duration<double>(n / rate))
                                 : Clock::duration::zero();
    // Threads start spread over one period, not in step.
    auto next = Clock::now() + period * t / n;
    uint64_t i = static_cast<uint64_t>(t);
    while (!stop_.load(std::memory_order_relaxed)) {
      if (rate > 0) {
        const auto now = Clock::now();
        if (next > now) std::this_thread::sleep_until(next);
        next = std::max(next + period, Clock::now() - period);
        if (stop_.load(std::memory_order_relaxed)) break;
      }
      // Round-robin over all dependencies: thread t takes t, t+n, t+2n...
      const std::string dep = DepName(static_cast<int>(i % dependencies_));
      i += static_cast<uint64_t>(n);
      const std::string err = Pair(stubs_[t], dep, v1::OUTCOME_SUCCESS);
      if (err.empty()) {
        pairs_.fetch_add(1, std::memory_order_relaxed);
      } else {
        failures_.fetch_add(1);
        absl::MutexLock lock(&mu_);
        if (first_error_.empty()) first_error_ = err;
      }
    }
  }

  std::vector<v1::Breaker::Stub*> stubs_;
  const int dependencies_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> pairs_{0};
  std::atomic<uint64_t> failures_{0};
  mutable absl::Mutex mu_;
  std::string first_error_;
  std::vector<std::thread> threads_;
};

double IntervalSeconds() {
  absl::Duration d;
  if (!absl::ParseDuration(absl::GetFlag(FLAGS_sync_interval), &d) ||
      d <= absl::ZeroDuration()) {
    std::fprintf(stderr, "fleet_bench: bad --sync_interval\n");
    std::exit(2);
  }
  return absl::ToDoubleSeconds(d);
}

bool WriteJson(const std::string& text) {
  const std::string path = absl::GetFlag(FLAGS_json);
  if (path.empty()) return true;
  std::ofstream out(path, std::ios::trunc);
  out << text << "\n";
  if (!out.flush()) {
    std::fprintf(stderr, "fleet_bench: cannot write %s\n", path.c_str());
    return false;
  }
  return true;
}

std::string Header(absl::string_view what) {
  return absl::StrFormat(
      "fleet_bench %s: started %s, %d cores, load average %s\n", what,
      absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", absl::Now(), absl::UTCTimeZone()),
      std::thread::hardware_concurrency(), ReadLoadAverage());
}

// --- commands ---------------------------------------------------------------

struct Observation {
  CommandStats commands;
  double window_syncs = 0;
  Clock::time_point at;
};

int RunCommands() {
  const std::string target = absl::GetFlag(FLAGS_target);
  const std::vector<std::string> metrics = absl::GetFlag(FLAGS_metrics);
  const int deps = absl::GetFlag(FLAGS_dependencies);
  const int threads = absl::GetFlag(FLAGS_threads);
  const double duration = absl::GetFlag(FLAGS_duration);
  const int slow_factor = absl::GetFlag(FLAGS_slow_factor);
  if (target.empty() || metrics.size() != 1 || deps < 1 || threads < 1 ||
      duration <= 0 || slow_factor < 1) {
    std::fprintf(stderr,
                 "fleet_bench: commands needs --target, one "
                 "--metrics, --redis\n");
    return 2;
  }
  const double interval = IntervalSeconds();
  const std::string header = Header("commands");
  RedisStats redis;
  if (!redis.Connect(absl::GetFlag(FLAGS_redis))) {
    std::fprintf(stderr, "fleet_bench: %s\n", redis.error().c_str());
    return 2;
  }
  std::vector<std::unique_ptr<v1::Breaker::Stub>> owned;
  std::vector<v1::Breaker::Stub*> stubs;
  for (int t = 0; t < threads; ++t) {
    owned.push_back(Stub(target, t));
    if (!owned.back()) {
      std::fprintf(stderr, "fleet_bench: cannot connect to %s\n",
                   target.c_str());
      return 2;
    }
    stubs.push_back(owned.back().get());
  }
  const std::string sync_metric =
      "breakerd_fleet_events_total{event=\"window_sync\"}";
  auto observe = [&](Observation* o) {
    std::optional<CommandStats> c = redis.Read();
    std::optional<double> w = ReadSample(metrics[0], sync_metric);
    o->at = Clock::now();
    if (!c.has_value() || !w.has_value()) {
      std::fprintf(stderr, "fleet_bench: cannot read %s\n",
                   !c.has_value() ? redis.error().c_str() : "/metrics");
      return false;
    }
    o->commands = std::move(*c);
    o->window_syncs = *w;
    return true;
  };

  // Every breaker created and the fleet thread busy before anything counts.
  PairLoad load(stubs, deps);
  load.Start(0);
  absl::SleepFor(absl::Seconds(absl::GetFlag(FLAGS_warmup)));
  load.Stop();

  struct Cell {
    std::string rate_label;
    double pairs_per_s = 0;
    double seconds = 0;
    double window_syncs = 0;
    CommandStats delta;
    std::string load_before, load_after;
  };
  std::vector<Cell> cells;
  uint64_t failures = load.failures();
  double full_rate = 0;
  for (int c = 0; c < 2; ++c) {
    Cell cell;
    const double rate = c == 0 ? 0 : full_rate / slow_factor;
    cell.rate_label = c == 0 ? "full" : absl::StrCat("1/", slow_factor);
    cell.load_before = ReadLoadAverage();
    PairLoad run(stubs, deps);
    run.Start(rate);
    // The first sync after the start is the first to carry this cell's
    // traffic; a short settle keeps the cells apart.
    absl::SleepFor(absl::Seconds(std::min(1.0, 2 * interval)));
    Observation before, after;
    const uint64_t pairs_before = run.pairs();
    if (!observe(&before)) return 2;
    absl::SleepFor(absl::Seconds(duration));
    const uint64_t pairs_after = run.pairs();
    if (!observe(&after)) return 2;
    run.Stop();
    failures += run.failures();
    if (run.failures() > 0) {
      std::fprintf(stderr, "fleet_bench: %s\n", run.first_error().c_str());
    }
    cell.load_after = ReadLoadAverage();
    cell.seconds = Seconds(after.at - before.at);
    cell.pairs_per_s = (pairs_after - pairs_before) / cell.seconds;
    cell.window_syncs = after.window_syncs - before.window_syncs;
    cell.delta = Delta(before.commands, after.commands);
    cell.delta.erase("info");  // our own INFO commandstats
    if (c == 0) full_rate = cell.pairs_per_s;
    cells.push_back(std::move(cell));
  }

  const double bound = (deps + 1) / interval;
  std::string out = header;
  absl::StrAppendFormat(
      &out,
      "one sidecar, --fleet-sync-interval=%s, %d dependencies, %d closed "
      "loops (paced for the slower rate), %.1f s per cell\n"
      "bound: (dependencies + 1 heartbeat) / interval = %.0f commands/s\n",
      absl::GetFlag(FLAGS_sync_interval), deps, threads, duration, bound);
  absl::StrAppend(&out,
                  "rate      pairs/s  sent/s  evalsha/s  eval/s  other/s  "
                  "sent/bound  syncs/s  evalsha/sync  in-scripts/s  "
                  "redis_cpu_%  load\n");
  std::string json_cells;
  for (const Cell& cell : cells) {
    double sent = 0, evalsha = 0, eval = 0, scripted = 0, usec = 0;
    std::string commands_json;
    for (const auto& [name, stat] : cell.delta) {
      usec += stat.usec;
      if (SentBySidecar(name)) {
        sent += stat.calls;
      } else {
        scripted += stat.calls;
      }
      if (name == "evalsha") evalsha = stat.calls;
      if (name == "eval") eval = stat.calls;
      absl::StrAppend(&commands_json, commands_json.empty() ? "" : ", ",
                      JsonString(name), ": ", stat.calls);
    }
    const double s = cell.seconds;
    absl::StrAppendFormat(
        &out,
        "%-6s %10.0f %7.1f %10.1f %7.1f %8.1f %11.2f %8.2f %13.1f %13.0f "
        "%11.1f  %s -> %s\n",
        cell.rate_label, cell.pairs_per_s, sent / s, evalsha / s, eval / s,
        (sent - evalsha - eval) / s, sent / s / bound, cell.window_syncs / s,
        cell.window_syncs > 0 ? evalsha / cell.window_syncs : 0.0, scripted / s,
        usec / s / 1e4, cell.load_before, cell.load_after);
    absl::StrAppendFormat(
        &json_cells,
        "%s{\"rate\": %s, \"seconds\": %.3f, \"pairs_per_s\": %.1f, "
        "\"sent_per_s\": %.2f, \"evalsha_per_s\": %.2f, \"eval_per_s\": "
        "%.2f, \"window_syncs_per_s\": %.3f, \"evalsha_per_sync\": %.2f, "
        "\"in_scripts_per_s\": %.1f, \"redis_cpu_percent\": %.2f, "
        "\"loadavg_before\": %s, \"loadavg_after\": %s, \"calls\": {%s}}",
        json_cells.empty() ? "" : ", ", JsonString(cell.rate_label), s,
        cell.pairs_per_s, sent / s, evalsha / s, eval / s,
        cell.window_syncs / s,
        cell.window_syncs > 0 ? evalsha / cell.window_syncs : 0.0, scripted / s,
        usec / s / 1e4, JsonString(cell.load_before),
        JsonString(cell.load_after), commands_json);
  }
  absl::StrAppend(&out,
                  "sent: commands the sidecar sent (EVALSHA window syncs, "
                  "EVAL heartbeats, ...); in-scripts: commands Redis ran "
                  "inside those scripts (INFO counts them too).\n");
  std::fputs(out.c_str(), stdout);
  const std::string json = absl::StrFormat(
      "{\"mode\": \"commands\", \"sync_interval\": %s, "
      "\"sync_interval_s\": %.3f, \"dependencies\": %d, \"threads\": %d, "
      "\"bound_per_s\": %.2f, \"failures\": %d, \"cells\": [%s]}",
      JsonString(absl::GetFlag(FLAGS_sync_interval)), interval, deps, threads,
      bound, failures, json_cells);
  if (!WriteJson(json)) return 2;
  return failures > 0 ? 1 : 0;
}

// --- latency ----------------------------------------------------------------

int RunLatency() {
  const std::string target = absl::GetFlag(FLAGS_target);
  const std::string fleet_target = absl::GetFlag(FLAGS_fleet_target);
  const std::string floor = absl::GetFlag(FLAGS_floor);
  const std::vector<std::string> metrics = absl::GetFlag(FLAGS_metrics);
  const int deps = absl::GetFlag(FLAGS_dependencies);
  const int rounds = absl::GetFlag(FLAGS_rounds);
  const double rate = absl::GetFlag(FLAGS_background_rate);
  if (target.empty() || fleet_target.empty() || floor.empty() ||
      metrics.size() != 1 || rounds < 1 || rate <= 0) {
    std::fprintf(stderr,
                 "fleet_bench: latency needs --target, "
                 "--fleet_target, --floor, one --metrics, --redis\n");
    return 2;
  }
  const std::string header = Header("latency");
  RedisStats redis;
  if (!redis.Connect(absl::GetFlag(FLAGS_redis))) {
    std::fprintf(stderr, "fleet_bench: %s\n", redis.error().c_str());
    return 2;
  }
  // The measured calls: one slot, one channel to each server.
  std::vector<ChannelStubs> local_stubs = ConnectChannels(target, floor, 1);
  std::vector<ChannelStubs> fleet_stubs =
      ConnectChannels(fleet_target, floor, 1);
  // The background traffic, on connections of its own.
  auto local_bg = Stub(target, 100);
  auto fleet_bg = Stub(fleet_target, 101);
  if (local_stubs.empty() || fleet_stubs.empty() || !local_bg || !fleet_bg) {
    std::fprintf(stderr, "fleet_bench: cannot connect\n");
    return 2;
  }
  const double warmup = absl::GetFlag(FLAGS_warmup);
  const double duration = absl::GetFlag(FLAGS_duration);
  const int floor_pid = absl::GetFlag(FLAGS_floor_pid);
  LoadRunner local(&local_stubs, 1, 1, std::min(warmup, 0.25), duration,
                   absl::GetFlag(FLAGS_target_pid), floor_pid);
  LoadRunner fleet(&fleet_stubs, 1, 1, std::min(warmup, 0.25), duration,
                   absl::GetFlag(FLAGS_fleet_pid), floor_pid);

  // Both sidecars get the same traffic all along, so the only difference
  // between them is the fleet thread.
  PairLoad local_load({local_bg.get()}, deps);
  PairLoad fleet_load({fleet_bg.get()}, deps);
  local_load.Start(rate);
  fleet_load.Start(rate);
  absl::SleepFor(absl::Seconds(warmup));

  const std::string sync_metric =
      "breakerd_fleet_events_total{event=\"window_sync\"}";
  const std::string load_before = ReadLoadAverage();
  std::optional<CommandStats> c0 = redis.Read();
  std::optional<double> w0 = ReadSample(metrics[0], sync_metric);
  const Clock::time_point t0 = Clock::now();

  // Row order = the ABBA order.
  struct Measured {
    const char* name;
    LoadRunner* runner;
    Row row;
  };
  std::vector<Measured> rows = {
      {"echo (floor)", &local, Row(CallKind::kEcho)},
      {"health", &local, Row(CallKind::kHealth)},
      {"acquire, no --redis", &local, Row(CallKind::kAcquire)},
      {"acquire, --redis", &fleet, Row(CallKind::kAcquire)},
  };
  bool ok = true;
  for (int r = 0; r < rounds && ok; ++r) {
    for (size_t i = 0; i < rows.size() && ok; ++i) {
      Measured& m = rows[r % 2 == 0 ? i : rows.size() - 1 - i];
      ok = m.runner->Measure(m.row.kind, &m.row);
    }
  }
  std::optional<CommandStats> c1 = redis.Read();
  std::optional<double> w1 = ReadSample(metrics[0], sync_metric);
  const double seconds = Seconds(Clock::now() - t0);
  const std::string load_after = ReadLoadAverage();
  local_load.Stop();
  fleet_load.Stop();
  uint64_t failures = local_load.failures() + fleet_load.failures();
  for (const Measured& m : rows) failures += m.row.failures;
  if (!ok && failures == 0) failures = 1;
  if (failures > 0) {
    std::fprintf(stderr, "fleet_bench: failed calls: %s %s %s %s\n",
                 local.FirstError().c_str(), fleet.FirstError().c_str(),
                 local_load.first_error().c_str(),
                 fleet_load.first_error().c_str());
  }
  double evalsha_per_s = -1, syncs_per_s = -1;
  if (c0 && c1 && w0 && w1) {
    CommandStats d = Delta(*c0, *c1);
    evalsha_per_s = d.count("evalsha") ? d["evalsha"].calls / seconds : 0;
    syncs_per_s = (*w1 - *w0) / seconds;
  }

  std::string out = header;
  absl::StrAppendFormat(
      &out,
      "closed loop, 1 in flight, 1 channel per server, %d x (%.2f s warmup "
      "+ %.2f s) per call, ABBA; background: %.0f pairs/s on each sidecar "
      "over %d dependencies; fleet sidecar --fleet-sync-interval=%s: %.1f "
      "EVALSHA/s, %.2f window syncs/s during the run; load average %s -> "
      "%s\n",
      rounds, std::min(warmup, 0.25), duration, rate, deps,
      absl::GetFlag(FLAGS_sync_interval), evalsha_per_s, syncs_per_s,
      load_before, load_after);
  absl::StrAppend(&out,
                  "call                      qps   p50_us   p99_us  "
                  "srv_cpu_us/call  p50/floor  p99/floor  p50/no-redis  "
                  "p99/no-redis\n");
  const Stats floor_stats = rows[0].row.total();
  const Stats local_stats = rows[2].row.total();
  std::string json_rows;
  for (const Measured& m : rows) {
    const Stats s = m.row.total();
    const bool is_acquire = m.row.kind == CallKind::kAcquire;
    auto ratio = [](double a, double b) { return b > 0 ? a / b : 0.0; };
    absl::StrAppendFormat(&out, "%-20s %8.0f %8.1f %8.1f %16.1f", m.name,
                          s.qps(), s.p50_us, s.p99_us,
                          m.row.server_cpu_us_per_call());
    if (m.row.kind != CallKind::kEcho) {
      absl::StrAppendFormat(&out, " %10.3f %10.3f",
                            ratio(s.p50_us, floor_stats.p50_us),
                            ratio(s.p99_us, floor_stats.p99_us));
    }
    if (&m == &rows[3]) {
      absl::StrAppendFormat(&out, " %13.3f %13.3f",
                            ratio(s.p50_us, local_stats.p50_us),
                            ratio(s.p99_us, local_stats.p99_us));
    }
    absl::StrAppend(&out, "\n");
    std::vector<std::string> round_p50;
    for (const Stats& r : m.row.rounds) {
      round_p50.push_back(absl::StrFormat("%.2f", r.p50_us));
    }
    absl::StrAppendFormat(
        &json_rows,
        "%s{\"call\": %s, \"acquire\": %s, \"qps\": %.1f, \"p50_us\": %.2f, "
        "\"p90_us\": %.2f, \"p99_us\": %.2f, \"calls\": %d, \"failures\": "
        "%d, \"server_cpu_us_per_call\": %.2f, \"round_p50_us\": [%s]}",
        json_rows.empty() ? "" : ", ", JsonString(m.name),
        is_acquire ? "true" : "false", s.qps(), s.p50_us, s.p90_us, s.p99_us,
        s.calls, m.row.failures, m.row.server_cpu_us_per_call(),
        absl::StrJoin(round_p50, ", "));
  }
  // Per round: fleet Acquire / local Acquire, p50 (same round, adjacent).
  std::vector<double> per_round;
  for (size_t r = 0;
       r < rows[3].row.rounds.size() && r < rows[2].row.rounds.size(); ++r) {
    if (rows[2].row.rounds[r].p50_us > 0) {
      per_round.push_back(rows[3].row.rounds[r].p50_us /
                          rows[2].row.rounds[r].p50_us);
    }
  }
  std::sort(per_round.begin(), per_round.end());
  if (!per_round.empty()) {
    absl::StrAppendFormat(
        &out,
        "acquire --redis / no --redis, p50 per round: %.2f..%.2f..%.2f "
        "(min..median..max)\n",
        per_round.front(), per_round[per_round.size() / 2], per_round.back());
  }
  std::fputs(out.c_str(), stdout);
  const std::string json = absl::StrFormat(
      "{\"mode\": \"latency\", \"sync_interval\": %s, \"dependencies\": %d, "
      "\"background_pairs_per_s\": %.0f, \"rounds\": %d, \"duration_s\": "
      "%.2f, \"evalsha_per_s\": %.2f, \"window_syncs_per_s\": %.3f, "
      "\"loadavg_before\": %s, \"loadavg_after\": %s, \"failures\": %d, "
      "\"rows\": [%s]}",
      JsonString(absl::GetFlag(FLAGS_sync_interval)), deps, rate, rounds,
      duration, evalsha_per_s, syncs_per_s, JsonString(load_before),
      JsonString(load_after), failures, json_rows);
  if (!WriteJson(json)) return 2;
  return failures > 0 ? 1 : 0;
}

// --- spread -----------------------------------------------------------------

std::optional<v1::State> StateOf(v1::Breaker::Stub* stub,
                                 const std::string& dep) {
  v1::GetStateRequest req;
  req.set_dependency(dep);
  v1::BreakerStatus status;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + kDeadline);
  if (!stub->GetState(&ctx, req, &status).ok()) return std::nullopt;
  return status.state();
}

int RunSpread() {
  const std::vector<std::string> targets = absl::GetFlag(FLAGS_targets);
  const std::vector<std::string> metrics = absl::GetFlag(FLAGS_metrics);
  const int reps = absl::GetFlag(FLAGS_reps);
  const int poll_ms = absl::GetFlag(FLAGS_poll_ms);
  if (targets.size() < 2 || metrics.size() != targets.size() || reps < 1 ||
      poll_ms < 1) {
    std::fprintf(stderr,
                 "fleet_bench: spread needs --targets and as many "
                 "--metrics\n");
    return 2;
  }
  const double interval = IntervalSeconds();
  const std::string header = Header("spread");
  const int n = static_cast<int>(targets.size());
  std::vector<std::unique_ptr<v1::Breaker::Stub>> stubs;
  for (int i = 0; i < n; ++i) {
    stubs.push_back(Stub(targets[i], i));
    if (!stubs.back()) {
      std::fprintf(stderr, "fleet_bench: cannot connect to %s\n",
                   targets[i].c_str());
      return 2;
    }
  }
  // Every sidecar counts all of them as members (so a quorum is possible).
  for (int i = 0; i < n; ++i) {
    const absl::Time give_up = absl::Now() + absl::Seconds(10);
    while (ReadSample(metrics[i], "breakerd_fleet_members").value_or(0) != n) {
      if (absl::Now() > give_up) {
        std::fprintf(stderr, "fleet_bench: %s never saw %d members\n",
                     targets[i].c_str(), n);
        return 1;
      }
      absl::SleepFor(absl::Milliseconds(20));
    }
  }

  const std::string load_before = ReadLoadAverage();
  std::mt19937 rng(12345);
  std::uniform_real_distribution<double> pause(0, 2 * interval);
  std::vector<double> samples;  // ms, last failing Report -> last OPEN
  int never_opened = 0, early = 0;
  std::string failure;
  for (int rep = 0; rep < reps && failure.empty(); ++rep) {
    // A fresh dependency; the wait before it lands the calls at a random
    // point of the sidecars' sync cycles.
    absl::SleepFor(absl::Seconds(0.2 + pause(rng)));
    const std::string dep =
        absl::StrCat("spread/", absl::ToUnixNanos(absl::Now()), "-", rep);
    Clock::time_point last_sent;
    for (int i = 0; i < n && failure.empty(); ++i) {
      if (i == n - 1) {
        // Before the last sidecar's calls the fleet has seen too few calls
        // (16 < min_calls): an open now would not be the fleet's window.
        for (int j = 0; j < n; ++j) {
          if (StateOf(stubs[j].get(), dep) == v1::STATE_OPEN) ++early;
        }
      }
      for (int k = 0; k < 3 && failure.empty(); ++k) {
        failure = Pair(stubs[i].get(), dep, v1::OUTCOME_SUCCESS);
      }
      for (int k = 0; k < 5 && failure.empty(); ++k) {
        failure = Pair(stubs[i].get(), dep, v1::OUTCOME_TIMEOUT, &last_sent);
      }
    }
    if (!failure.empty()) break;
    std::vector<bool> open(n, false);
    int open_count = 0;
    Clock::time_point last_open;
    auto next = Clock::now();
    const auto give_up = Clock::now() + std::chrono::seconds(5);
    while (open_count < n && Clock::now() < give_up) {
      for (int i = 0; i < n; ++i) {
        if (open[i]) continue;
        if (StateOf(stubs[i].get(), dep) == v1::STATE_OPEN) {
          open[i] = true;
          ++open_count;
          last_open = Clock::now();
        }
      }
      next += std::chrono::milliseconds(poll_ms);
      std::this_thread::sleep_until(next);
    }
    if (open_count < n) {
      ++never_opened;
      continue;
    }
    samples.push_back(Seconds(last_open - last_sent) * 1e3);
  }
  const std::string load_after = ReadLoadAverage();
  std::vector<double> sorted = samples;
  std::sort(sorted.begin(), sorted.end());
  auto median = [&]() {
    if (sorted.empty()) return 0.0;
    const size_t m = sorted.size() / 2;
    return sorted.size() % 2 == 1 ? sorted[m] : (sorted[m - 1] + sorted[m]) / 2;
  };
  auto at = [&](double q) {
    if (sorted.empty()) return 0.0;
    return sorted[std::min(sorted.size() - 1,
                           static_cast<size_t>(q * (sorted.size() - 1) + 0.5))];
  };
  std::string out = header;
  absl::StrAppendFormat(
      &out,
      "%d sidecars, --fleet-sync-interval=%s; each gets 3 successes + 5 "
      "timeouts; GetState on all every %d ms; %d dependencies; load "
      "average %s -> %s\n",
      n, absl::GetFlag(FLAGS_sync_interval), poll_ms, reps, load_before,
      load_after);
  absl::StrAppendFormat(
      &out,
      "last failing Report -> every sidecar OPEN: min %.1f ms, median %.1f "
      "ms, max %.1f ms (%d samples; %d never opened, %d open too early)\n",
      at(0), median(), at(1), static_cast<int>(samples.size()), never_opened,
      early);
  std::vector<std::string> ms;
  for (double s : samples) ms.push_back(absl::StrFormat("%.1f", s));
  absl::StrAppend(&out, "samples ms: ", absl::StrJoin(ms, " "), "\n");
  if (!failure.empty()) {
    std::fprintf(stderr, "fleet_bench: %s\n", failure.c_str());
  }
  std::fputs(out.c_str(), stdout);
  const std::string json = absl::StrFormat(
      "{\"mode\": \"spread\", \"sync_interval\": %s, \"sync_interval_s\": "
      "%.3f, \"sidecars\": %d, \"poll_ms\": %d, \"reps\": %d, "
      "\"min_ms\": %.2f, \"median_ms\": %.2f, \"max_ms\": %.2f, "
      "\"samples_ms\": [%s], \"never_opened\": %d, \"open_too_early\": %d, "
      "\"loadavg_before\": %s, \"loadavg_after\": %s, \"failed\": %s}",
      JsonString(absl::GetFlag(FLAGS_sync_interval)), interval, n, poll_ms,
      reps, at(0), median(), at(1), absl::StrJoin(ms, ", "), never_opened,
      early, JsonString(load_before), JsonString(load_after),
      failure.empty() ? "null" : JsonString(failure));
  if (!WriteJson(json)) return 2;
  return failure.empty() && never_opened == 0 && early == 0 ? 0 : 1;
}

}  // namespace
}  // namespace bench
}  // namespace breakerd

int main(int argc, char** argv) {
  breakerd::bench::InitBenchmark(
      argc, argv,
      "fleet_bench --mode=commands|latency|spread ...: fleet mode's Redis "
      "commands, Acquire against the floor, spread-out opens "
      "(bench/fleet/README.md)");
  const std::string mode = absl::GetFlag(FLAGS_mode);
  if (mode == "commands") return breakerd::bench::RunCommands();
  if (mode == "latency") return breakerd::bench::RunLatency();
  if (mode == "spread") return breakerd::bench::RunSpread();
  std::fprintf(stderr,
               "fleet_bench: --mode must be commands, latency or "
               "spread\n");
  return 2;
}

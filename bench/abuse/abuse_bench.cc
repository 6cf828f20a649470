// abuse_bench: one caller's Acquire latency while other local callers abuse
// breakerd's full-registry reads (issue 13). See bench/abuse/README.md.
//
// The parent creates --breakers breakers (Acquire + Report SUCCESS on
// dep-00000, dep-00001, ...), then runs phases of --warmup + --duration
// seconds each. In every phase a victim thread, on its own channel, keeps
// one Acquire in flight on --victim_dependency and records each latency;
// in every phase but the baseline, --abusers child processes (this program
// again, with --abuse=MODE, each on its own channel) loop one operation as
// fast as breakerd answers:
//   baseline        no abuser
//   watch_first     Watch(all), cancelled as soon as the first message arrives
//   watch_snapshot  Watch(all), the whole initial snapshot read, then cancelled
//   list_states     ListStates
// A phase reports the victim's p50/p99/max and how many Acquires took
// longer than --deadline_ms (the clients' deadline; the victim itself waits
// 10 s, so the whole tail is measured), the abusers' operations completed,
// refused (RESOURCE_EXHAUSTED) and failed otherwise, and breakerd's CPU
// share and VmHWM/VmRSS (from /proc, with --breakerd_pid; the peak is reset
// through /proc/<pid>/clear_refs at the start of each phase where allowed).
//
// Abusers are processes, not threads, as in the issue: each its own
// connection and its own client-side CPU (bench/abuse/abuser.h). They run
// at --abuser_nice so that on a small machine the victim's client thread is
// not starved by the abusers' own client work (the victim and the abusers
// share the client cores); breakerd, on its own core, sees them at full
// speed regardless.
//
// Exit code: 0 when everything ran and every victim Acquire was allowed;
// 1 if a victim call failed or an abuser did not start, report or exit
// cleanly; 2 for bad flags or setup failures. Never asserts on timing.
//
// Usage:
//   abuse_bench --target=127.0.0.1:50051 --breakerd_pid=PID --json=out.json
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "bench/abuse/abuser.h"
#include "bench/abuse/client.h"
#include "bench/common/init.h"
#include "bench/common/json.h"
#include "bench/load/latency_histogram.h"
#include "breakerd/v1/breaker.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "tests/soak/proc_stats.h"

ABSL_FLAG(std::string, target, "",
          "breakerd's gRPC address (host:port or unix:/path). Required.");
ABSL_FLAG(int, breakerd_pid, 0,
          "breakerd's process id, if on this machine: reports its CPU share "
          "and VmHWM/VmRSS per phase (from /proc).");
ABSL_FLAG(int, breakers, 10000,
          "Breakers created before the phases (dep-00000, ...): what a "
          "full-registry read has to copy.");
ABSL_FLAG(int, abusers, 2, "Abuser processes in every phase but baseline.");
ABSL_FLAG(double, duration, 10.0, "Seconds the victim is measured per phase.");
ABSL_FLAG(double, warmup, 1.0,
          "Seconds the abusers run before the victim is measured.");
ABSL_FLAG(std::vector<std::string>, phases,
          std::vector<std::string>({"baseline", "watch_first", "watch_snapshot",
                                    "list_states"}),
          "The phases to run, in this order.");
ABSL_FLAG(std::string, victim_dependency, "bench-victim/acquire",
          "The dependency the victim acquires (created during setup).");
ABSL_FLAG(int, deadline_ms, 20,
          "The clients' Acquire deadline: victim calls slower than this are "
          "counted (the victim itself waits up to 10 s).");
ABSL_FLAG(int, abuser_nice, 10,
          "Nice value of the abuser processes (0: same as the victim).");
ABSL_FLAG(std::string, label, "",
          "Free text recorded with the results (which breakerd build).");
ABSL_FLAG(std::string, json, "", "Write the results as JSON to this file.");
// Internal: the abuser side, started by the parent.
ABSL_FLAG(std::string, abuse, "",
          "Internal: run as an abuser process looping this operation "
          "(watch_first, watch_snapshot, list_states).");
ABSL_FLAG(int, snapshot_size, 0,
          "Internal (watch_snapshot): messages in a complete initial "
          "snapshot.");

namespace breakerd {
namespace bench {
namespace {

using SteadyClock = std::chrono::steady_clock;

// After the abusers exit, before the next phase: breakerd finishes what they
// left behind (cancelled streams, queued writes).
constexpr absl::Duration kSettle = absl::Milliseconds(500);

struct PhaseSpec {
  std::optional<AbuseMode> abuse;  // none: the baseline
  const char* what;
  const char* name() const {
    return abuse.has_value() ? AbuseModeName(*abuse) : "baseline";
  }
};
constexpr PhaseSpec kPhases[] = {
    {std::nullopt, "no abuser"},
    {AbuseMode::kWatchFirst, "Watch(all), cancel at the first message"},
    {AbuseMode::kWatchSnapshot, "Watch(all), read the whole snapshot, cancel"},
    {AbuseMode::kListStates, "ListStates"},
};

const PhaseSpec* FindPhase(absl::string_view name) {
  for (const PhaseSpec& p : kPhases) {
    if (name == p.name()) return &p;
  }
  return nullptr;
}

// --- /proc -----------------------------------------------------

struct Memory {
  int64_t hwm_kib = -1;
  int64_t rss_kib = -1;
};

// breakerd's VmHWM and VmRSS (tests/soak/proc_stats.h); -1 if unknown.
Memory ReadMemory(int pid) {
  if (pid <= 0) return Memory();
  return {PeakResidentKiB(pid).value_or(-1), ResidentKiB(pid).value_or(-1)};
}

// Resets VmHWM to the current VmRSS (Linux >= 4.0; needs the right to
// ptrace `pid`, which the user who started it has). False if not done.
bool ResetPeakRss(int pid) {
  if (pid <= 0) return false;
  std::ofstream out(absl::StrCat("/proc/", pid, "/clear_refs"));
  out << "5";
  return static_cast<bool>(out.flush());
}

// --- the parent: setup and the victim ---------------------------------------

std::string DependencyName(int i) { return absl::StrFormat("dep-%05d", i); }

// Acquire, then Report SUCCESS with its permit.
bool CreateBreaker(v1::Breaker::Stub* stub, const std::string& name,
                   std::string* error) {
  v1::AcquireRequest acquire;
  acquire.set_dependency(name);
  v1::AcquireResponse granted;
  grpc::ClientContext actx;
  SetDeadline(&actx);
  grpc::Status s = stub->Acquire(&actx, acquire, &granted);
  if (!s.ok() || !granted.allowed()) {
    *error = absl::StrCat("Acquire ", name, ": ",
                          s.ok() ? "not allowed" : StatusText(s));
    return false;
  }
  v1::ReportRequest report;
  report.set_dependency(name);
  report.set_permit(granted.permit());
  report.set_outcome(v1::OUTCOME_SUCCESS);
  report.mutable_latency()->set_nanos(250000);
  v1::ReportResponse reported;
  grpc::ClientContext rctx;
  SetDeadline(&rctx);
  s = stub->Report(&rctx, report, &reported);
  if (!s.ok()) {
    *error = absl::StrCat("Report ", name, ": ", StatusText(s));
    return false;
  }
  return true;
}

struct VictimResult {
  // A quantile, in nanoseconds; never above the exact max (the histogram
  // answers with its bucket's midpoint).
  double Quantile(double q) const {
    return std::min(histogram.Quantile(q), static_cast<double>(max_ns));
  }

  LatencyHistogram histogram;
  uint64_t max_ns = 0;
  uint64_t slow = 0;  // slower than the deadline
  uint64_t failures = 0;
  std::string first_error;
};

// One Acquire in flight until `until`; every call started before `until`
// is recorded.
void RunVictim(v1::Breaker::Stub* stub, const std::string& dependency,
               SteadyClock::time_point until, SteadyClock::duration slow,
               VictimResult* out) {
  v1::AcquireRequest request;
  request.set_dependency(dependency);
  v1::AcquireResponse response;
  while (SteadyClock::now() < until) {
    grpc::ClientContext ctx;
    SetDeadline(&ctx);
    const SteadyClock::time_point start = SteadyClock::now();
    const grpc::Status s = stub->Acquire(&ctx, request, &response);
    const SteadyClock::duration took = SteadyClock::now() - start;
    if (!s.ok() || !response.allowed()) {
      ++out->failures;
      if (out->first_error.empty()) {
        out->first_error =
            absl::StrCat("Acquire ", dependency, ": ",
                         s.ok() ? absl::StrCat("not allowed, state ",
                                               v1::State_Name(response.state()))
                                : StatusText(s));
      }
      continue;
    }
    const uint64_t ns = static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(took).count());
    out->histogram.Record(ns);
    out->max_ns = std::max(out->max_ns, ns);
    if (took > slow) ++out->slow;
  }
}

struct PhaseResult {
  const PhaseSpec* spec = nullptr;
  int abusers = 0;
  VictimResult victim;
  AbuseCounts abuse;  // summed over the abusers
  double server_cpu_percent = -1;
  Memory memory;
  bool peak_reset = false;
  std::vector<std::string> errors;  // abusers that failed to run
};

struct Settings {
  std::string target;
  std::string exe;  // this program, for the abusers
  int breakerd_pid = 0;
  int breakers = 0;
  int abusers = 0;
  double duration = 0;
  double warmup = 0;
  int deadline_ms = 0;
  int abuser_nice = 0;
  int snapshot_size = 0;
  std::string victim_dependency;
};

std::chrono::nanoseconds Seconds(double s) {
  return std::chrono::nanoseconds(static_cast<int64_t>(s * 1e9));
}

void RunPhase(const Settings& cfg, const PhaseSpec& spec,
              v1::Breaker::Stub* victim_stub, PhaseResult* r) {
  r->spec = &spec;
  r->abusers = spec.abuse.has_value() ? cfg.abusers : 0;
  r->peak_reset = ResetPeakRss(cfg.breakerd_pid);
  std::vector<std::unique_ptr<AbuserProcess>> abusers;
  for (int i = 0; i < r->abusers; ++i) {
    auto a = std::make_unique<AbuserProcess>();
    std::string error;
    if (!a->Start(cfg.exe,
                  {absl::StrCat("--abuse=", spec.name()),
                   absl::StrCat("--target=", cfg.target),
                   absl::StrCat("--snapshot_size=", cfg.snapshot_size),
                   absl::StrCat("--abuser_nice=", cfg.abuser_nice)},
                  &error)) {
      r->errors.push_back(error);
      continue;
    }
    abusers.push_back(std::move(a));
  }
  absl::SleepFor(absl::Seconds(cfg.warmup));
  const uint64_t cpu_before = ProcessCpuNanos(cfg.breakerd_pid);
  const SteadyClock::time_point from = SteadyClock::now();
  RunVictim(victim_stub, cfg.victim_dependency, from + Seconds(cfg.duration),
            std::chrono::milliseconds(cfg.deadline_ms), &r->victim);
  const double elapsed =
      std::chrono::duration<double>(SteadyClock::now() - from).count();
  const uint64_t cpu_after = ProcessCpuNanos(cfg.breakerd_pid);
  if (cfg.breakerd_pid > 0 && elapsed > 0) {
    r->server_cpu_percent = 100.0 * (cpu_after - cpu_before) / 1e9 / elapsed;
  }
  r->memory = ReadMemory(cfg.breakerd_pid);
  for (auto& a : abusers) a->AskToStop();
  for (auto& a : abusers) {
    AbuseCounts c;
    std::string error;
    if (!a->Collect(&c, &error)) {
      r->errors.push_back(error);
      continue;
    }
    r->abuse.Add(c);
  }
  absl::SleepFor(kSettle);
}

// --- output ------------------------------------------------------------------

std::string Ms(double ns) { return absl::StrFormat("%.3f", ns / 1e6); }

std::string CpuList() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return "?";
  std::string out;
  for (int i = 0; i < CPU_SETSIZE; ++i) {
    if (CPU_ISSET(i, &set)) absl::StrAppend(&out, out.empty() ? "" : ",", i);
  }
  return out;
}

struct Run {
  Settings cfg;
  std::string label;
  absl::Time date;
  double setup_seconds = 0;
  std::string load_before, load_after;
  std::vector<PhaseResult> phases;
};

std::string Json(const Run& run) {
  const Settings& cfg = run.cfg;
  std::string j = "{\n";
  absl::StrAppend(&j, "  \"machine\": ",
                  JsonMachine({{"client_cpus", JsonString(CpuList())}},
                              run.load_before, run.load_after),
                  ",\n");
  absl::StrAppend(&j, "  \"date\": ", JsonDate(run.date), ",\n");
  absl::StrAppend(&j, "  \"label\": ", JsonString(run.label), ",\n");
  absl::StrAppend(&j, "  \"target\": ", JsonString(cfg.target), ",\n");
  absl::StrAppend(&j, "  \"breakers\": ", cfg.breakers, ",\n");
  absl::StrAppend(&j, "  \"snapshot_size\": ", cfg.snapshot_size, ",\n");
  absl::StrAppend(&j, "  \"abusers\": ", cfg.abusers, ",\n");
  absl::StrAppend(&j, "  \"abuser_nice\": ", cfg.abuser_nice, ",\n");
  absl::StrAppend(
      &j, "  \"duration_s\": ", absl::StrFormat("%.2f", cfg.duration), ",\n");
  absl::StrAppend(&j, "  \"warmup_s\": ", absl::StrFormat("%.2f", cfg.warmup),
                  ",\n");
  absl::StrAppend(
      &j, "  \"setup_s\": ", absl::StrFormat("%.2f", run.setup_seconds), ",\n");
  absl::StrAppend(&j, "  \"deadline_ms\": ", cfg.deadline_ms, ",\n");
  absl::StrAppend(&j, "  \"victim_dependency\": ",
                  JsonString(cfg.victim_dependency), ",\n");
  absl::StrAppend(&j, "  \"phases\": [");
  bool first = true;
  for (const PhaseResult& r : run.phases) {
    const VictimResult& v = r.victim;
    absl::StrAppend(&j, first ? "\n" : ",\n");
    first = false;
    absl::StrAppend(&j, "    {\"phase\": ", JsonString(r.spec->name()),
                    ", \"what\": ", JsonString(r.spec->what),
                    ", \"abusers\": ", r.abusers, ",\n");
    absl::StrAppend(
        &j, "     \"victim\": {\"calls\": ", v.histogram.count(), ", \"qps\": ",
        absl::StrFormat("%.1f", v.histogram.count() / cfg.duration),
        ", \"p50_ms\": ", Ms(v.Quantile(0.50)),
        ", \"p90_ms\": ", Ms(v.Quantile(0.90)),
        ", \"p99_ms\": ", Ms(v.Quantile(0.99)),
        ", \"max_ms\": ", Ms(static_cast<double>(v.max_ns)),
        ", \"over_deadline\": ", v.slow, ", \"failures\": ", v.failures,
        ", \"first_error\": ", JsonString(v.first_error), "},\n");
    const AbuseCounts& a = r.abuse;
    absl::StrAppend(
        &j, "     \"abuse\": {\"ok\": ", a.ok, ", \"refused\": ", a.refused,
        ", \"other\": ", a.other, ", \"messages\": ", a.messages,
        ", \"seconds\": ", absl::StrFormat("%.2f", r.abuse.seconds),
        ", \"first_error\": ", JsonString(a.first_error), ", \"errors\": [");
    for (size_t i = 0; i < r.errors.size(); ++i) {
      absl::StrAppend(&j, i > 0 ? ", " : "", JsonString(r.errors[i]));
    }
    absl::StrAppend(&j, "]},\n");
    absl::StrAppend(&j, "     \"breakerd\": {\"cpu_percent\": ",
                    absl::StrFormat("%.1f", r.server_cpu_percent),
                    ", \"vm_hwm_kib\": ", r.memory.hwm_kib,
                    ", \"vm_rss_kib\": ", r.memory.rss_kib,
                    ", \"hwm_reset_at_phase_start\": ",
                    r.peak_reset ? "true" : "false", "}}");
  }
  absl::StrAppend(&j, "\n  ]\n}\n");
  return j;
}

std::string Mib(int64_t kib) {
  return kib < 0 ? "-" : absl::StrFormat("%.1f", kib / 1024.0);
}

void PrintTable(const Run& run) {
  const Settings& cfg = run.cfg;
  std::printf(
      "abuse_bench: %d breakers, %d abuser process(es), %.1f s per phase "
      "(+%.1f s warmup), deadline %d ms, client cpus %s, load %s -> %s%s%s\n",
      cfg.breakers, cfg.abusers, cfg.duration, cfg.warmup, cfg.deadline_ms,
      CpuList().c_str(), run.load_before.c_str(), run.load_after.c_str(),
      run.label.empty() ? "" : "\nbreakerd: ", run.label.c_str());
  std::printf("%-15s %8s %8s %8s %8s %7s %9s %8s %6s %6s %7s %7s\n", "phase",
              "acquires", "p50_ms", "p99_ms", "max_ms",
              absl::StrCat(">", cfg.deadline_ms, "ms").c_str(), "abuse_ok",
              "refused", "other", "cpu%", "HWM_MiB", "RSS_MiB");
  for (const PhaseResult& r : run.phases) {
    const VictimResult& v = r.victim;
    const bool abused = r.abusers > 0;
    std::printf(
        "%-15s %8llu %8.2f %8.2f %8.2f %7llu %9s %8s %6s %6.0f %7s %7s\n",
        r.spec->name(), static_cast<unsigned long long>(v.histogram.count()),
        v.Quantile(0.50) / 1e6, v.Quantile(0.99) / 1e6, v.max_ns / 1e6,
        static_cast<unsigned long long>(v.slow),
        abused ? absl::StrCat(r.abuse.ok).c_str() : "-",
        abused ? absl::StrCat(r.abuse.refused).c_str() : "-",
        abused ? absl::StrCat(r.abuse.other).c_str() : "-",
        r.server_cpu_percent, Mib(r.memory.hwm_kib).c_str(),
        Mib(r.memory.rss_kib).c_str());
  }
  for (const PhaseResult& r : run.phases) {
    if (r.victim.failures > 0) {
      std::printf("%s: %llu victim call(s) FAILED; first: %s\n", r.spec->name(),
                  static_cast<unsigned long long>(r.victim.failures),
                  r.victim.first_error.c_str());
    }
    if (r.abuse.other > 0) {
      std::printf("%s: abusers' other failures, first: %s\n", r.spec->name(),
                  r.abuse.first_error.c_str());
    }
    for (const std::string& e : r.errors) {
      std::printf("%s: ABUSER ERROR: %s\n", r.spec->name(), e.c_str());
    }
  }
}

int RunParent() {
  Run run;
  Settings& cfg = run.cfg;
  cfg.target = absl::GetFlag(FLAGS_target);
  cfg.breakerd_pid = absl::GetFlag(FLAGS_breakerd_pid);
  cfg.breakers = absl::GetFlag(FLAGS_breakers);
  cfg.abusers = absl::GetFlag(FLAGS_abusers);
  cfg.duration = absl::GetFlag(FLAGS_duration);
  cfg.warmup = absl::GetFlag(FLAGS_warmup);
  cfg.deadline_ms = absl::GetFlag(FLAGS_deadline_ms);
  cfg.abuser_nice = absl::GetFlag(FLAGS_abuser_nice);
  cfg.victim_dependency = absl::GetFlag(FLAGS_victim_dependency);
  run.label = absl::GetFlag(FLAGS_label);
  std::vector<const PhaseSpec*> phases;
  for (const std::string& name : absl::GetFlag(FLAGS_phases)) {
    const PhaseSpec* p = FindPhase(name);
    if (p == nullptr) {
      std::fprintf(stderr, "abuse_bench: --phases: unknown phase %s\n",
                   name.c_str());
      return 2;
    }
    phases.push_back(p);
  }
  if (cfg.target.empty() || cfg.breakers < 0 || cfg.abusers < 0 ||
      cfg.duration <= 0 || cfg.warmup < 0 || cfg.deadline_ms < 1) {
    std::fprintf(stderr,
                 "abuse_bench: need --target, breakers >= 0, abusers >= 0, "
                 "duration > 0, warmup >= 0, deadline_ms >= 1\n");
    return 2;
  }
  char exe[4096];
  const ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (n <= 0) {
    std::fprintf(stderr, "abuse_bench: cannot read /proc/self/exe\n");
    return 2;
  }
  cfg.exe.assign(exe, static_cast<size_t>(n));

  auto setup_channel = MakeChannel(cfg.target, "setup");
  auto victim_channel = MakeChannel(cfg.target, "victim");
  if (!Connect(setup_channel) || !Connect(victim_channel)) {
    std::fprintf(stderr, "abuse_bench: cannot connect to %s\n",
                 cfg.target.c_str());
    return 2;
  }
  auto setup = v1::Breaker::NewStub(setup_channel);
  auto victim = v1::Breaker::NewStub(victim_channel);

  run.date = absl::Now();
  std::string error;
  for (int i = 0; i < cfg.breakers; ++i) {
    if (!CreateBreaker(setup.get(), DependencyName(i), &error)) break;
  }
  if (error.empty()) {
    CreateBreaker(victim.get(), cfg.victim_dependency, &error);
  }
  if (!error.empty()) {
    std::fprintf(stderr, "abuse_bench: setup: %s\n", error.c_str());
    return 2;
  }
  // What a complete Watch(all) snapshot holds: every breaker breakerd has.
  {
    grpc::ClientContext ctx;
    SetDeadline(&ctx);
    v1::ListStatesResponse all;
    const grpc::Status s =
        setup->ListStates(&ctx, v1::ListStatesRequest(), &all);
    cfg.snapshot_size =
        s.ok() ? all.breakers_size() : cfg.breakers + 1;  // + the victim's
  }
  run.setup_seconds = absl::ToDoubleSeconds(absl::Now() - run.date);
  run.load_before = ReadLoadAverage();

  for (const PhaseSpec* spec : phases) {
    PhaseResult& r = run.phases.emplace_back();
    RunPhase(cfg, *spec, victim.get(), &r);
    std::fprintf(stderr, "abuse_bench: %s done: p99 %.2f ms\n", spec->name(),
                 r.victim.Quantile(0.99) / 1e6);
  }
  run.load_after = ReadLoadAverage();

  PrintTable(run);
  const std::string json_path = absl::GetFlag(FLAGS_json);
  if (!json_path.empty()) {
    std::ofstream out(json_path, std::ios::trunc);
    out << Json(run);
    if (!out.flush()) {
      std::fprintf(stderr, "abuse_bench: cannot write %s\n", json_path.c_str());
      return 2;
    }
  }
  bool failed = false;
  for (const PhaseResult& r : run.phases) {
    failed = failed || r.victim.failures > 0 || !r.errors.empty();
  }
  return failed ? 1 : 0;
}

}  // namespace
}  // namespace bench
}  // namespace breakerd

int main(int argc, char** argv) {
  breakerd::bench::InitBenchmark(
      argc, argv,
      "abuse_bench --target=ADDR [--breakerd_pid=PID --breakers=N "
      "--abusers=K --duration=S --warmup=S --json=PATH]: one caller's "
      "Acquire latency while other processes loop full-registry reads");
  const std::string mode = absl::GetFlag(FLAGS_abuse);
  if (mode.empty()) return breakerd::bench::RunParent();
  const std::optional<breakerd::bench::AbuseMode> abuse =
      breakerd::bench::ParseAbuseMode(mode);
  if (!abuse.has_value()) {
    std::fprintf(stderr, "abuse_bench: unknown --abuse=%s\n", mode.c_str());
    return 2;
  }
  breakerd::bench::AbuserOptions options;
  options.mode = *abuse;
  options.target = absl::GetFlag(FLAGS_target);
  options.snapshot_size = absl::GetFlag(FLAGS_snapshot_size);
  options.nice = absl::GetFlag(FLAGS_abuser_nice);
  return breakerd::bench::RunAbuser(options);
}

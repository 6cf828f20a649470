// bench/local for the C++ client (bench/local/cpp/run.sh): a guarded no-op
// call with local decisions on, the same over RPC, and breakerd's own
// engine doing the same (Acquire + the no-op + Report of breakerd::Registry,
// the in-process peer), each call timed alone with steady_clock in one loop
// shape; breakerd's CPU per call on both client paths; and the trip
// reaction (from the fifth failing call to a local refusal in two clients).
//
//   local_bench --addr=HOST:PORT --pid=PID --out=OUT.json [--smoke]
//
// The client phases run first: the Registry turns off absl::Mutex's
// deadlock detection for the whole process (server/engine/mutex.h), which
// an application linking only the client keeps on.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "breakerd/client.h"
#include "server/engine/clock.h"
#include "server/engine/registry.h"

namespace {

using breakerd::client::Client;
using breakerd::client::ClientOptions;
using breakerd::client::DecisionSource;
using breakerd::client::IsBreakerOpen;
using breakerd::client::Permit;
using breakerd::client::RefusalOf;
using Clock = std::chrono::steady_clock;

struct Args {
  std::string addr;
  int pid = 0;
  std::string out;
  bool smoke = false;
};

struct Counts {
  int local = 200000;
  int rpc = 20000;
  int peer = 200000;
  int trips = 100;
};

// The guarded no-op: returns at once.
absl::Status Noop() { return absl::OkStatus(); }

// breakerd's utime + stime, in nanoseconds (/proc/PID/stat, fields 14 and
// 15 in clock ticks).
int64_t SidecarCpuNanos(int pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/stat"));
  const std::string stat((std::istreambuf_iterator<char>(in)),
                         std::istreambuf_iterator<char>());
  const size_t paren = stat.rfind(')');
  if (paren == std::string::npos) return 0;
  std::vector<absl::string_view> fields = absl::StrSplit(
      absl::string_view(stat).substr(paren + 2), ' ', absl::SkipEmpty());
  // After ") ": field 3 (state) is fields[0], so field n is fields[n - 3].
  int64_t utime = 0;
  int64_t stime = 0;
  if (fields.size() < 13 || !absl::SimpleAtoi(fields[11], &utime) ||
      !absl::SimpleAtoi(fields[12], &stime)) {
    return 0;
  }
  return (utime + stime) * (int64_t{1000000000} / sysconf(_SC_CLK_TCK));
}

struct Summary {
  int64_t median = 0;
  int64_t p99 = 0;
  size_t calls = 0;
};

Summary Summarize(std::vector<int64_t> ns) {
  Summary s;
  s.calls = ns.size();
  if (ns.empty()) return s;
  std::sort(ns.begin(), ns.end());
  s.median = ns[ns.size() / 2];
  s.p99 = ns[std::min(ns.size() - 1, ns.size() * 99 / 100)];
  return s;
}

// `calls` guarded calls through `guard`, each timed alone.
std::vector<int64_t> TimeCalls(int calls,
                               absl::FunctionRef<absl::Status()> guard) {
  std::vector<int64_t> ns(calls);
  int failed = 0;
  for (int i = 0; i < calls; ++i) {
    const Clock::time_point t0 = Clock::now();
    const absl::Status s = guard();
    const Clock::time_point t1 = Clock::now();
    ns[i] =
        std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count();
    failed += !s.ok();
  }
  if (failed > 0) std::cerr << failed << " calls failed" << std::endl;
  return ns;
}

std::unique_ptr<Client> NewClient(const Args& args, bool local) {
  ClientOptions options;
  options.target = args.addr;
  options.local_decisions = local;
  auto client = Client::Create(options);
  if (!client.ok()) {
    std::cerr << client.status() << std::endl;
    std::exit(1);
  }
  (*client)->WaitForConnected(absl::Seconds(5));
  return std::move(*client);
}

// Waits (at most 5 s) until `client` grants `dep` locally; the breaker is
// created by the first call.
bool UntilLocal(Client* client, const std::string& dep) {
  const absl::Time end = absl::Now() + absl::Seconds(5);
  while (absl::Now() < end) {
    absl::StatusOr<Permit> p = client->Acquire(dep);
    if (p.ok()) {
      const bool local =
          p->allowed() && p->decision().source == DecisionSource::kLocal;
      p->Report(breakerd::client::Outcome::Success()).IgnoreError();
      if (local) return true;
    }
    absl::SleepFor(absl::Milliseconds(1));
  }
  return false;
}

// The peer: breakerd's engine in the process, the same guarded no-op.
absl::Status PeerGuard(breakerd::Registry& registry, absl::string_view dep,
                       const breakerd::ReportRequestFacts& success,
                       absl::FunctionRef<absl::Status()> fn) {
  absl::StatusOr<breakerd::AcquireResult> a = registry.Acquire(dep, 0);
  if (!a.ok() || !a->allowed) return absl::UnavailableError("refused");
  absl::Status s = fn();
  absl::StatusOr<breakerd::ReportResult> r =
      registry.Report(dep, a->permit, success);
  if (!r.ok()) return r.status();
  return s;
}

// One trip-reaction sample on `dep`, in milliseconds; negative if it failed.
double TripSample(const Args& args, const std::string& dep) {
  auto tripper = NewClient(args, /*local=*/true);
  tripper->Do(dep, Noop).IgnoreError();
  if (!UntilLocal(tripper.get(), dep)) return -1;
  auto observer = NewClient(args, /*local=*/true);
  if (!UntilLocal(observer.get(), dep)) return -1;
  for (int i = 0; i < 5; ++i) {
    tripper->Do(dep, [] { return absl::InternalError("upstream 500"); })
        .IgnoreError();
  }
  const Clock::time_point t0 = Clock::now();
  // Each client loops guarded no-op calls until one is refused locally.
  const auto until_refused = [&](Client* client, Clock::time_point* at) {
    const Clock::time_point give_up = t0 + std::chrono::seconds(10);
    while (Clock::now() < give_up) {
      const absl::Status s = client->Do(dep, Noop);
      if (IsBreakerOpen(s) && RefusalOf(s)->source == DecisionSource::kLocal) {
        *at = Clock::now();
        return;
      }
    }
    *at = Clock::time_point::max();
  };
  Clock::time_point tripper_at;
  Clock::time_point observer_at;
  std::thread other(until_refused, observer.get(), &observer_at);
  until_refused(tripper.get(), &tripper_at);
  other.join();
  const Clock::time_point last = std::max(tripper_at, observer_at);
  if (last == Clock::time_point::max()) return -1;
  return std::chrono::duration<double, std::milli>(last - t0).count();
}

std::string SummaryJson(const Summary& s) {
  return absl::StrFormat(R"({"median": %d, "p99": %d, "calls": %d})", s.median,
                         s.p99, s.calls);
}

int Run(const Args& args) {
  Counts n;
  if (args.smoke) n = Counts{2000, 500, 2000, 5};

  // --- local -------------------------------------------------------------
  Summary local;
  double local_cpu = 0;
  uint64_t dropped = 0;
  {
    auto client = NewClient(args, /*local=*/true);
    const std::string dep = "bench/local-noop";
    client->Do(dep, Noop).IgnoreError();
    if (!UntilLocal(client.get(), dep)) {
      std::cerr << "no local grant for " << dep << std::endl;
      return 1;
    }
    TimeCalls(std::min(n.local, 20000), [&] { return client->Do(dep, Noop); });
    // The warm-up's last batch lands first.
    absl::SleepFor(absl::Milliseconds(100));
    const int64_t cpu0 = SidecarCpuNanos(args.pid);
    local =
        Summarize(TimeCalls(n.local, [&] { return client->Do(dep, Noop); }));
    client->Close();  // the last batches land
    local_cpu = static_cast<double>(SidecarCpuNanos(args.pid) - cpu0) / n.local;
    dropped = client->stats().dropped_outcomes;
  }

  // --- rpc ---------------------------------------------------------------
  Summary rpc;
  double rpc_cpu = 0;
  uint64_t failed_open = 0;
  {
    auto client = NewClient(args, /*local=*/false);
    const std::string dep = "bench/rpc-noop";
    TimeCalls(std::min(n.rpc, 2000), [&] { return client->Do(dep, Noop); });
    const int64_t cpu0 = SidecarCpuNanos(args.pid);
    const uint64_t open0 = client->stats().fail_open;
    rpc = Summarize(TimeCalls(n.rpc, [&] { return client->Do(dep, Noop); }));
    rpc_cpu = static_cast<double>(SidecarCpuNanos(args.pid) - cpu0) / n.rpc;
    failed_open = client->stats().fail_open - open0;
    client->Close();
  }

  // --- trip reaction -----------------------------------------------------
  std::vector<double> trips;
  for (int i = 0; i < n.trips; ++i) {
    const double ms = TripSample(args, absl::StrCat("trip/", i));
    if (ms < 0) {
      std::cerr << "trip sample " << i << " failed" << std::endl;
      continue;
    }
    trips.push_back(ms);
  }
  std::sort(trips.begin(), trips.end());
  const auto at = [&](double q) {
    return trips.empty()
               ? 0.0
               : trips[std::min(trips.size() - 1,
                                static_cast<size_t>(q * trips.size()))];
  };

  // --- peer: breakerd's engine (last: see the file comment) ---------------
  Summary peer;
  {
    breakerd::Registry registry(std::make_shared<const breakerd::PolicySet>(),
                                breakerd::MonotonicClock::Get());
    breakerd::ReportRequestFacts success;
    success.outcome.http_status = 200;
    const std::string dep = "bench/peer-noop";
    const auto guard = [&] { return PeerGuard(registry, dep, success, Noop); };
    TimeCalls(std::min(n.peer, 20000), guard);
    peer = Summarize(TimeCalls(n.peer, guard));
  }

  std::cerr << "local: " << dropped << " outcomes dropped (bound or close); "
            << "rpc: " << failed_open << " decisions failed open" << std::endl;
  const std::string json = absl::StrFormat(
      R"({"language": "cpp", "peer": "breakerd-engine %s", "runtime": "%s",)"
      "\n"
      R"( "guarded_call_ns": {"local": %s,)"
      "\n"
      R"(                     "rpc": %s,)"
      "\n"
      R"(                     "peer": %s},)"
      "\n"
      R"( "sidecar_cpu_ns_per_call": {"local": %.0f, "rpc": %.0f},)"
      "\n"
      R"( "trip_reaction_ms": {"p50": %.2f, "p99": %.2f, "max": %.2f, "samples": %d}})"
      "\n",
      BREAKERD_BENCH_VERSION, BREAKERD_BENCH_RUNTIME, SummaryJson(local),
      SummaryJson(rpc), SummaryJson(peer), local_cpu, rpc_cpu, at(0.5),
      at(0.99), trips.empty() ? 0.0 : trips.back(), trips.size());
  std::ofstream out(args.out);
  out << json;
  return out.good() && !trips.empty() ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  for (int i = 1; i < argc; ++i) {
    absl::string_view arg = argv[i];
    if (arg == "--smoke") {
      args.smoke = true;
    } else if (absl::ConsumePrefix(&arg, "--addr=")) {
      args.addr = std::string(arg);
    } else if (absl::ConsumePrefix(&arg, "--pid=")) {
      if (!absl::SimpleAtoi(arg, &args.pid)) args.pid = 0;
    } else if (absl::ConsumePrefix(&arg, "--out=")) {
      args.out = std::string(arg);
    }
  }
  if (args.addr.empty() || args.pid <= 0 || args.out.empty()) {
    std::cerr << "usage: local_bench --addr=HOST:PORT --pid=PID "
                 "--out=OUT.json [--smoke]"
              << std::endl;
    return 2;
  }
  return Run(args);
}

// Engine micro-benchmarks: the in-process cost of breakerd's decision.
// Target (DESIGN.md): an Acquire+Report pair on a closed breaker, median,
// at most 100 ns on one thread.
#include <string>
#include <vector>

#include "benchmark/benchmark.h"
#include "server/engine/clock.h"
#include "server/engine/registry.h"

namespace breakerd {
namespace {

std::shared_ptr<const PolicySet> Defaults() {
  return std::make_shared<const PolicySet>();
}

ReportRequestFacts Success() {
  ReportRequestFacts f;
  f.outcome.http_status = 200;
  return f;
}

// One Registry shared by all threads of a run; each thread uses its own key
// (or all the same key, for the contended case).
Registry* SharedRegistry() {
  static Registry* const r = new Registry(Defaults(), MonotonicClock::Get());
  return r;
}

void BM_AcquireReportPair(benchmark::State& state, bool same_key) {
  Registry* registry = SharedRegistry();
  const std::string dep =
      same_key ? "bench/shared"
               : "bench/key-" + std::to_string(state.thread_index());
  const ReportRequestFacts facts = Success();
  for (auto _ : state) {
    auto a = registry->Acquire(dep, 0);
    auto r = registry->Report(dep, a->permit, facts);
    benchmark::DoNotOptimize(r);
  }
}
BENCHMARK_CAPTURE(BM_AcquireReportPair, distinct_keys, false)
    ->Threads(1)
    ->Threads(2)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_AcquireReportPair, same_key, true)
    ->Threads(2)
    ->UseRealTime();

void BM_RejectWhileOpen(benchmark::State& state) {
  Registry registry(Defaults(), MonotonicClock::Get());
  registry.ForceOpen("bench/open").IgnoreError();
  for (auto _ : state) {
    auto a = registry.Acquire("bench/open", 0);
    benchmark::DoNotOptimize(a);
  }
}
BENCHMARK(BM_RejectWhileOpen);

void BM_LookupAmong(benchmark::State& state) {
  auto set = std::make_shared<PolicySet>();
  set->limits.max_breakers = 1000000;
  Registry registry(set, MonotonicClock::Get());
  std::vector<std::string> names;
  for (int i = 0; i < state.range(0); ++i) {
    names.push_back("dep/" + std::to_string(i));
    registry.Acquire(names.back(), 0).IgnoreError();
  }
  size_t i = 0;
  for (auto _ : state) {
    auto a = registry.Acquire(names[i++ % names.size()], 0);
    benchmark::DoNotOptimize(a);
  }
}
BENCHMARK(BM_LookupAmong)->Arg(1)->Arg(1000)->Arg(100000);

}  // namespace
}  // namespace breakerd

BENCHMARK_MAIN();

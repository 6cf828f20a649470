// Scrape benchmarks: what one Prometheus scrape of many breakers costs, and
// what a scrape loop running beside traffic does to Acquire+Report.
// Target (DESIGN.md): a scrape of 10k breakers under 50 ms, without
// stalling Acquire.
#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "benchmark/benchmark.h"
#include "prometheus/text_serializer.h"
#include "server/engine/clock.h"
#include "server/engine/registry.h"
#include "server/metrics/collector.h"

namespace breakerd {
namespace {

// A registry with n breakers, each with some history (and a latency, so
// each exports a histogram: the worst case for the exposition size).
std::unique_ptr<Registry> Populated(int n) {
  auto set = std::make_shared<PolicySet>();
  set->limits.max_breakers = 1000000;
  auto registry = std::make_unique<Registry>(set, MonotonicClock::Get());
  ReportRequestFacts f;
  f.outcome.http_status = 200;
  f.latency = absl::Milliseconds(42);
  for (int i = 0; i < n; ++i) {
    const std::string dep =
        "provider-" + std::to_string(i % 7) + "/key-" + std::to_string(i);
    auto a = registry->Acquire(dep, 0);
    registry->Report(dep, a->permit, f).IgnoreError();
  }
  return registry;
}

ProcessStats BenchStats() {
  ProcessStats stats;
  stats.version = "bench";
  return stats;
}

void BM_Collect(benchmark::State& state) {
  auto registry = Populated(static_cast<int>(state.range(0)));
  RegistryCollector collector(registry.get(), BenchStats());
  for (auto _ : state) {
    auto families = collector.Collect();
    benchmark::DoNotOptimize(families);
  }
}
BENCHMARK(BM_Collect)->Arg(10000)->Unit(benchmark::kMillisecond);

void BM_CollectAndSerialize(benchmark::State& state) {
  auto registry = Populated(static_cast<int>(state.range(0)));
  RegistryCollector collector(registry.get(), BenchStats());
  prometheus::TextSerializer serializer;
  size_t bytes = 0;
  for (auto _ : state) {
    const std::string text = serializer.Serialize(collector.Collect());
    bytes = text.size();
    benchmark::DoNotOptimize(text);
  }
  state.counters["bytes"] = static_cast<double>(bytes);
}
BENCHMARK(BM_CollectAndSerialize)->Arg(10000)->Unit(benchmark::kMillisecond);

// What /metrics serves: the same samples as BM_CollectAndSerialize, written
// as text directly (text_format.h).
void BM_FastExposition(benchmark::State& state) {
  auto registry = Populated(static_cast<int>(state.range(0)));
  RegistryCollector collector(registry.get(), BenchStats());
  size_t bytes = 0;
  for (auto _ : state) {
    std::string text;
    collector.AppendText(&text);
    bytes = text.size();
    benchmark::DoNotOptimize(text);
  }
  state.counters["bytes"] = static_cast<double>(bytes);
}
BENCHMARK(BM_FastExposition)->Arg(10000)->Unit(benchmark::kMillisecond);

enum class Scraper { kNone, kFastExposition, kCollect };

// Acquire+Report pairs on one breaker among 10k, with or without a second
// thread scraping the whole registry in a loop: arg 0 none, 1 the text
// writer /metrics uses, 2 the prometheus-cpp Collect().
void BM_PairDuringScrapes(benchmark::State& state) {
  auto registry = Populated(10000);
  RegistryCollector collector(registry.get(), BenchStats());
  const auto mode = static_cast<Scraper>(state.range(0));
  std::atomic<bool> stop{false};
  std::atomic<int> scrapes{0};
  std::thread scraper;
  if (mode != Scraper::kNone) {
    scraper = std::thread([&] {
      while (!stop.load(std::memory_order_relaxed)) {
        if (mode == Scraper::kFastExposition) {
          std::string text;
          collector.AppendText(&text);
          benchmark::DoNotOptimize(text);
        } else {
          benchmark::DoNotOptimize(collector.Collect());
        }
        scrapes.fetch_add(1, std::memory_order_relaxed);
      }
    });
  }
  ReportRequestFacts f;
  f.outcome.http_status = 200;
  const std::string dep = "provider-0/key-0";
  for (auto _ : state) {
    auto a = registry->Acquire(dep, 0);
    auto r = registry->Report(dep, a->permit, f);
    benchmark::DoNotOptimize(r);
  }
  stop = true;
  if (scraper.joinable()) scraper.join();
  state.counters["scrapes"] = scrapes.load();
}
BENCHMARK(BM_PairDuringScrapes)
    ->ArgName("scraper")
    ->Arg(static_cast<int>(Scraper::kNone))
    ->Arg(static_cast<int>(Scraper::kFastExposition))
    ->Arg(static_cast<int>(Scraper::kCollect))
    ->UseRealTime();

}  // namespace
}  // namespace breakerd

BENCHMARK_MAIN();

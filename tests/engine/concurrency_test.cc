// Threaded tests; CI runs them under ThreadSanitizer. Time is the fake clock:
// threads race on the breaker, never on sleeps.
#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/barrier.h"
#include "gtest/gtest.h"
#include "server/engine/clock.h"
#include "server/engine/mutex.h"
#include "server/engine/registry.h"

namespace breakerd {
namespace {

using absl::Seconds;

std::shared_ptr<const PolicySet> NoJitter() {
  auto set = std::make_shared<PolicySet>();
  auto p = std::make_shared<Policy>();
  p->cooldown.jitter = 0;
  p->cooldown.base = Seconds(10);
  p->probe.lease = Seconds(5);
  set->defaults = p;
  return set;
}

// Counts every outcome and never opens: only the counting is under test.
std::shared_ptr<const PolicySet> NeverTrips() {
  auto set = std::make_shared<PolicySet>(*NoJitter());
  auto p = std::make_shared<Policy>(*set->defaults);
  p->consecutive_failures = 0;
  p->failure_rate.threshold = 0;
  set->defaults = p;
  return set;
}

void Trip(Registry& r, absl::string_view dep) {
  for (int i = 0; i < 5; ++i) {
    auto a = r.Acquire(dep, 0);
    ReportRequestFacts f;
    f.outcome.http_status = 503;
    ASSERT_TRUE(r.Report(dep, a->permit, f).ok());
  }
  ASSERT_EQ(r.Get(dep)->state, State::kOpen);
}

TEST(ConcurrencyTest, ManyThreadsGetExactlyOneProbePerLease) {
  FakeClock clock;
  Registry registry(NoJitter(), &clock);
  Trip(registry, "llm/a");
  clock.Advance(Seconds(10));

  constexpr int kThreads = 16;
  constexpr int kCallsPerThread = 200;
  for (int lease = 0; lease < 3; ++lease) {
    std::atomic<int> probes{0};
    std::atomic<int> in_flight_rejections{0};
    absl::Barrier* start = new absl::Barrier(kThreads);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&] {
        if (start->Block()) delete start;
        for (int i = 0; i < kCallsPerThread; ++i) {
          auto a = registry.Acquire("llm/a", 0);
          ASSERT_TRUE(a.ok());
          if (a->probe) ++probes;
          if (a->reason == RejectReason::kProbeInFlight) ++in_flight_rejections;
        }
      });
    }
    for (auto& th : threads) th.join();
    EXPECT_EQ(probes.load(), 1) << "lease " << lease;
    EXPECT_EQ(in_flight_rejections.load(), kThreads * kCallsPerThread - 1);
    clock.Advance(Seconds(5));  // the lease lapses: one more probe may go
  }
}

// Records, per dependency, whether an observer ever saw a generation go
// back (the order the Watch streams deliver in).
class OrderObserver : public TransitionObserver {
 public:
  void OnTransition(const Transition& t) override {
    MutexLock lock(&mu_);
    uint64_t& last = last_[t.dependency];
    if (t.generation < last) ++backwards_;
    last = t.generation;
    ++events_;
  }
  int backwards() {
    MutexLock lock(&mu_);
    return backwards_;
  }
  int events() {
    MutexLock lock(&mu_);
    return events_;
  }
  uint64_t last(const std::string& dependency) {
    MutexLock lock(&mu_);
    return last_[dependency];
  }

 private:
  Mutex mu_;
  absl::flat_hash_map<std::string, uint64_t> last_ ABSL_GUARDED_BY(mu_);
  int backwards_ ABSL_GUARDED_BY(mu_) = 0;
  int events_ ABSL_GUARDED_BY(mu_) = 0;
};

TEST(ConcurrencyTest, ObserversSeeEachBreakersTransitionsInOrder) {
  FakeClock clock;
  auto set = std::make_shared<PolicySet>(*NoJitter());
  auto strict = std::make_shared<Policy>(*set->defaults);
  strict->consecutive_failures = 1;
  set->defaults = strict;
  Registry registry(set, &clock);
  OrderObserver observer;
  registry.AddObserver(&observer);

  // Failing reports (each trips: consecutive_failures 1) race admin calls
  // on the same two breakers.
  constexpr int kRounds = 2000;
  const std::string deps[] = {"race/a", "race/b"};
  // All three start together, so the reports and the admin calls overlap
  // (without it a thread may finish before the next one starts: CI saw the
  // admin thread's 2,000 events alone).
  absl::Barrier* start = new absl::Barrier(3);
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t) {
    threads.emplace_back([&, t] {
      if (start->Block()) delete start;
      for (int i = 0; i < kRounds; ++i) {
        const std::string& dep = deps[i % 2];
        auto a = registry.Acquire(dep, 0);
        if (!a.ok() || a->permit == 0) continue;
        ReportRequestFacts f;
        f.outcome.http_status = 503;
        registry.Report(dep, a->permit, f).IgnoreError();
      }
    });
  }
  threads.emplace_back([&] {
    if (start->Block()) delete start;
    for (int i = 0; i < kRounds; ++i) {
      const std::string& dep = deps[i % 2];
      switch (i % 3) {
        case 0:
          registry.ForceOpen(dep).IgnoreError();
          break;
        case 1:
          registry.ForceClose(dep).IgnoreError();
          break;
        default:
          registry.Reset(dep).IgnoreError();
      }
    }
  });
  for (auto& th : threads) th.join();

  // Each admin call is an event; the reports' trips come on top, as many as
  // the scheduler let overlap (most runs: hundreds). The order is the point.
  EXPECT_GE(observer.events(), kRounds);
  EXPECT_EQ(observer.backwards(), 0);
  for (const std::string& dep : deps) {
    EXPECT_EQ(observer.last(dep), registry.Get(dep)->generation) << dep;
  }
}

TEST(ConcurrencyTest, ConcurrentReportsLoseNothing) {
  FakeClock clock;
  Registry registry(NeverTrips(), &clock);
  constexpr int kThreads = 8;
  constexpr int kCalls = 2000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      // Half the threads share one key, the rest have their own.
      const std::string dep =
          t % 2 == 0 ? "shared" : "own/" + std::to_string(t);
      for (int i = 0; i < kCalls; ++i) {
        auto a = registry.Acquire(dep, 0);
        ASSERT_TRUE(a.ok());
        ReportRequestFacts f;
        f.outcome.http_status = i % 3 == 0 ? 500 : 200;
        ASSERT_TRUE(registry.Report(dep, a->permit, f).ok());
      }
    });
  }
  // A scraper and a reloader race with the traffic.
  std::atomic<bool> done{false};
  std::thread scraper([&] {
    while (!done.load()) {
      registry.ForEach([](const BreakerSnapshot& s) { (void)s.window.calls; });
      registry.ApplyPolicies(registry.policies());
    }
  });
  for (auto& th : threads) th.join();
  done = true;
  scraper.join();

  uint64_t reports = 0;
  registry.ForEach([&](const BreakerSnapshot& s) {
    for (const auto& by_effect : s.reports) {
      for (uint64_t n : by_effect) reports += n;
    }
  });
  EXPECT_EQ(reports, uint64_t{kThreads} * kCalls);
  EXPECT_EQ(registry.Get("shared")->window.calls,
            uint64_t{kThreads / 2} * kCalls);
}

// Clients retrying Reports: every permit is reported by several threads at
// once, and each counts exactly once; the rest say duplicate.
TEST(ConcurrencyTest, DuplicateReportsFromManyThreadsCountEachPermitOnce) {
  FakeClock clock;
  Registry registry(NeverTrips(), &clock);
  constexpr int kPermits = 4000;
  constexpr int kThreads = 6;
  std::vector<uint64_t> permits;
  for (int i = 0; i < kPermits; ++i) {
    permits.push_back(registry.Acquire("retried", 0)->permit);
  }
  std::atomic<int> counted{0}, duplicates{0};
  std::vector<std::thread> threads;
  absl::Barrier* start = new absl::Barrier(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      if (start->Block()) delete start;
      // Each thread walks the permits from its own offset, so the same
      // permit is reported by different threads at different moments.
      for (int i = 0; i < kPermits; ++i) {
        const uint64_t permit =
            permits[(i + t * kPermits / kThreads) % kPermits];
        ReportRequestFacts f;
        f.outcome.http_status = 500;
        auto r = registry.Report("retried", permit, f);
        ASSERT_TRUE(r.ok()) << r.status();
        if (r->effect == Effect::kDuplicate) {
          ++duplicates;
        } else {
          EXPECT_EQ(r->effect, Effect::kCountedFailure);
          ++counted;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(counted.load(), kPermits);
  EXPECT_EQ(duplicates.load(), kPermits * (kThreads - 1));
  auto s = registry.Get("retried");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->window.failures, uint64_t{kPermits});
  EXPECT_EQ(s->inflight, 0u);
}

TEST(ConcurrencyTest, CreationEvictionAndCapRaceSafely) {
  FakeClock clock;
  auto set = std::make_shared<PolicySet>(*NoJitter());
  set->limits.max_breakers = 100;
  set->limits.idle_ttl = Seconds(1);
  Registry registry(set, &clock);
  std::atomic<bool> done{false};
  std::thread evictor([&] {
    while (!done.load()) {
      clock.Advance(Seconds(1));
      registry.EvictIdle();
    }
  });
  std::vector<std::thread> threads;
  std::atomic<int> exhausted{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 3000; ++i) {
        auto a = registry.Acquire("n/" + std::to_string((i * 7 + t) % 400), 0);
        if (!a.ok()) {
          ASSERT_EQ(a.status().code(), absl::StatusCode::kResourceExhausted);
          ++exhausted;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  done = true;
  evictor.join();
  EXPECT_LE(registry.size(), 100u);
  EXPECT_EQ(registry.List().size(), registry.size());
}

}  // namespace
}  // namespace breakerd

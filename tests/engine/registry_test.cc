#include "server/engine/registry.h"

#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "gtest/gtest.h"
#include "server/engine/clock.h"
#include "server/engine/dependency_name.h"

namespace breakerd {
namespace {

using absl::Seconds;

// Keeps state changes in `seen` and the other events (created, evicted,
// ramp done, reload) in `notices`.
class RecordingObserver : public TransitionObserver {
 public:
  void OnTransition(const Transition& t) override {
    (IsStateChange(t.reason) ? seen : notices).push_back(t);
  }
  std::vector<Transition> seen;
  std::vector<Transition> notices;
};

std::shared_ptr<const PolicySet> Policies(uint32_t max_breakers = 10000) {
  auto set = std::make_shared<PolicySet>();
  auto defaults = std::make_shared<Policy>();
  defaults->cooldown.jitter = 0;
  defaults->cooldown.base = Seconds(10);
  set->defaults = defaults;
  auto openai = std::make_shared<Policy>(*defaults);
  openai->match = "openai/*";
  openai->consecutive_failures = 2;
  set->policies.push_back(openai);
  set->limits.max_breakers = max_breakers;
  set->limits.idle_ttl = absl::Minutes(10);
  return set;
}

class RegistryTest : public ::testing::Test {
 protected:
  RegistryTest() : registry_(Policies(), &clock_, 42) {
    registry_.AddObserver(&observer_);
  }

  void Fail(absl::string_view dep, int n) {
    for (int i = 0; i < n; ++i) {
      auto a = registry_.Acquire(dep, 0);
      ASSERT_TRUE(a.ok()) << a.status();
      ReportRequestFacts f;
      f.outcome.explicit_class = static_cast<int>(OutcomeClass::kTimeout);
      auto r = registry_.Report(dep, a->permit, f);
      ASSERT_TRUE(r.ok()) << r.status();
    }
  }

  FakeClock clock_;
  RecordingObserver observer_;
  Registry registry_;
};

TEST_F(RegistryTest, CreatesLazilyWithTheFirstMatchingPolicy) {
  EXPECT_EQ(registry_.size(), 0u);
  ASSERT_TRUE(registry_.Acquire("openai/key-1", 0).ok());
  ASSERT_TRUE(registry_.Acquire("stripe/key-1", 0).ok());
  EXPECT_EQ(registry_.size(), 2u);
  EXPECT_EQ(registry_.Get("openai/key-1")->policy, "openai/*");
  EXPECT_EQ(registry_.Get("stripe/key-1")->policy, "defaults");
  Fail("openai/key-1", 2);
  EXPECT_EQ(registry_.Get("openai/key-1")->state, State::kOpen);
  ASSERT_EQ(observer_.seen.size(), 1u);
  EXPECT_EQ(observer_.seen[0].dependency, "openai/key-1");
}

TEST_F(RegistryTest, DependencyNamesAreValidated) {
  const std::string too_long(201, 'a');
  for (const std::string& bad :
       {std::string(), std::string("a b"), std::string("x\n"),
        std::string("caf\xc3\xa9"), std::string("a*b"), too_long}) {
    auto r = registry_.Acquire(bad, 0);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find("dependency"), std::string::npos)
        << r.status();
  }
  EXPECT_EQ(registry_.size(), 0u);
  const std::string longest(200, 'z');
  EXPECT_TRUE(registry_.Acquire(longest, 0).ok());
  EXPECT_TRUE(registry_.Acquire("A-z_0.9:x/y@z", 0).ok());
}

TEST_F(RegistryTest, CapIsEnforcedNamingTheLimit) {
  Registry small(Policies(/*max_breakers=*/3), &clock_);
  for (const char* d : {"a", "b", "c"}) ASSERT_TRUE(small.Acquire(d, 0).ok());
  auto r = small.Acquire("d", 0);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(r.status().message().find("max_breakers"), std::string::npos);
  EXPECT_TRUE(small.Acquire("a", 0).ok());  // existing ones still work
  EXPECT_EQ(small.size(), 3u);
}

TEST_F(RegistryTest, ReportValidatesBeforeChangingAnything) {
  auto a = registry_.Acquire("dep", 0);
  ReportRequestFacts ok;
  ok.outcome.http_status = 200;
  ReportRequestFacts none;  // no outcome at all
  auto r = registry_.Report("dep", a->permit, none);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(registry_.Report("dep", 0, ok).status().code(),
            absl::StatusCode::kInvalidArgument);
  ReportRequestFacts negative = ok;
  negative.latency = -Seconds(1);
  EXPECT_NE(registry_.Report("dep", a->permit, negative)
                .status()
                .message()
                .find("latency"),
            std::string::npos);
  // A permit for a dependency that has no breaker (e.g. before a restart).
  auto unknown = registry_.Report("never-seen", a->permit, ok);
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(unknown.status().message().find("permit"), std::string::npos);
  EXPECT_EQ(registry_.size(), 1u);  // nothing was created
  EXPECT_EQ(registry_.Get("dep")->reports, BreakerSnapshot().reports);
  // A garbage permit for an existing dependency.
  auto garbage = registry_.Report("dep", 12345, ok);
  EXPECT_EQ(garbage.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(garbage.status().message().find("permit"), std::string::npos);
  EXPECT_EQ(registry_.Get("dep")->reports, BreakerSnapshot().reports);
  EXPECT_EQ(registry_.unknown_permits(), 2u);
  EXPECT_TRUE(registry_.Report("dep", a->permit, ok).ok());
}

TEST_F(RegistryTest, AcquireFirstSkipsOpenDependencies) {
  Fail("openai/key-1", 2);
  std::vector<std::string> chain = {"openai/key-1", "anthropic/key-1",
                                    "google/key-1"};
  auto r = registry_.AcquireFirst(chain, 0);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->granted, 1);
  EXPECT_TRUE(r->result.allowed);
  EXPECT_FALSE(registry_.Get("google/key-1").ok());  // never touched
}

TEST_F(RegistryTest, AcquireFirstWithNoneAllowedGivesTheShortestWait) {
  Fail("openai/a", 2);
  clock_.Advance(Seconds(4));
  Fail("openai/b", 2);
  std::vector<std::string> chain = {"openai/a", "openai/b"};
  auto r = registry_.AcquireFirst(chain, 0);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->granted, -1);
  EXPECT_FALSE(r->result.allowed);
  EXPECT_EQ(r->result.retry_after, Seconds(6));
}

TEST_F(RegistryTest, AcquireFirstValidatesEveryNameFirst) {
  std::vector<std::string> chain = {"ok", "bad name"};
  auto r = registry_.AcquireFirst(chain, 0);
  EXPECT_NE(r.status().message().find("dependencies[1]"), std::string::npos);
  EXPECT_EQ(registry_.size(), 0u);
  EXPECT_FALSE(registry_.AcquireFirst({}, 0).ok());
  std::vector<std::string> many(Registry::kMaxAcquireFirst + 1, "x");
  EXPECT_NE(registry_.AcquireFirst(many, 0).status().message().find("at most"),
            std::string::npos);
}

TEST_F(RegistryTest, AdminOverridesNotifyObservers) {
  ASSERT_TRUE(registry_.ForceOpen("stripe/x").ok());  // created on demand
  EXPECT_EQ(registry_.Acquire("stripe/x", 0)->reason,
            RejectReason::kForcedOpen);
  ASSERT_TRUE(registry_.ForceClose("stripe/x").ok());
  auto reset = registry_.Reset("stripe/x");
  ASSERT_TRUE(reset.ok());
  EXPECT_EQ(reset->state, State::kClosed);
  EXPECT_EQ(registry_.Reset("nobody").status().code(),
            absl::StatusCode::kNotFound);
  ASSERT_EQ(observer_.seen.size(), 3u);
  EXPECT_EQ(observer_.seen[0].to, State::kForcedOpen);
  EXPECT_EQ(observer_.seen[1].to, State::kForcedClosed);
  EXPECT_EQ(observer_.seen[2].to, State::kClosed);
}

TEST_F(RegistryTest, ApplyPoliciesKeepsTheSameBreakersInPlace) {
  Fail("openai/key-1", 2);
  const BreakerSnapshot before = *registry_.Get("openai/key-1");
  auto next = std::make_shared<PolicySet>(*Policies());
  auto strict = std::make_shared<Policy>(*next->defaults);
  strict->match = "openai/key-*";
  strict->consecutive_failures = 7;
  next->policies.insert(next->policies.begin(), strict);
  registry_.ApplyPolicies(next);
  const BreakerSnapshot after = *registry_.Get("openai/key-1");
  EXPECT_EQ(after.state, State::kOpen);
  EXPECT_EQ(after.generation, before.generation);
  EXPECT_EQ(after.policy, "openai/key-*");
  EXPECT_EQ(registry_.policies(), next);
  // A new breaker gets the new policy: 6 failures keep it closed.
  Fail("openai/key-2", 6);
  EXPECT_EQ(registry_.Get("openai/key-2")->state, State::kClosed);
  Fail("openai/key-2", 1);
  EXPECT_EQ(registry_.Get("openai/key-2")->state, State::kOpen);
}

TEST_F(RegistryTest, EvictsOnlyIdleBreakers) {
  ASSERT_TRUE(registry_.Acquire("one-off", 0).ok());
  Fail("openai/down", 2);
  Fail("stripe/flaky", 1);
  clock_.Advance(absl::Minutes(9));
  EXPECT_EQ(registry_.EvictIdle(), 0u);
  clock_.Advance(absl::Minutes(2));
  EXPECT_EQ(registry_.EvictIdle(), 1u);
  EXPECT_FALSE(registry_.Get("one-off").ok());
  EXPECT_TRUE(registry_.Get("openai/down").ok());   // open: kept
  EXPECT_TRUE(registry_.Get("stripe/flaky").ok());  // streak: kept
  EXPECT_EQ(registry_.size(), 2u);
  // An evicted name comes back fresh on its next use.
  EXPECT_TRUE(registry_.Acquire("one-off", 0)->allowed);
  EXPECT_EQ(registry_.size(), 3u);
}

TEST_F(RegistryTest, EvictionFreesRoomUnderTheCap) {
  Registry small(Policies(/*max_breakers=*/2), &clock_);
  ASSERT_TRUE(small.Acquire("a", 0).ok());
  ASSERT_TRUE(small.Acquire("b", 0).ok());
  EXPECT_FALSE(small.Acquire("c", 0).ok());
  clock_.Advance(absl::Minutes(11));
  EXPECT_EQ(small.EvictIdle(), 2u);
  EXPECT_TRUE(small.Acquire("c", 0).ok());
}

TEST_F(RegistryTest,
       ReloadThatChangesTheModeTellsObserversAtTheSameGeneration) {
  Fail("openai/key-1", 2);
  ASSERT_EQ(registry_.Get("openai/key-1")->state, State::kOpen);
  ASSERT_TRUE(registry_.Acquire("stripe/api", 0).ok());
  const uint64_t generation = registry_.Get("openai/key-1")->generation;
  observer_.seen.clear();
  observer_.notices.clear();

  auto next = std::make_shared<PolicySet>(*Policies());
  auto shadow = std::make_shared<Policy>(*next->policies[0]);
  shadow->mode = Mode::kShadow;
  next->policies[0] = shadow;
  registry_.ApplyPolicies(next);

  // Only the breaker whose mode changed; nothing for stripe/api.
  ASSERT_EQ(observer_.notices.size(), 1u);
  const Transition& t = observer_.notices[0];
  EXPECT_EQ(t.dependency, "openai/key-1");
  EXPECT_EQ(t.reason, TransitionReason::kReload);
  EXPECT_EQ(t.from, State::kOpen);
  EXPECT_EQ(t.to, State::kOpen);
  EXPECT_TRUE(t.shadow);
  EXPECT_EQ(t.generation, generation);
  EXPECT_EQ(t.retry_after, Seconds(10));
  // Not a transition: neither the generation nor the counts move.
  const BreakerSnapshot after = *registry_.Get("openai/key-1");
  EXPECT_EQ(after.generation, generation);
  for (const auto& c : after.transitions) {
    EXPECT_NE(c.reason, TransitionReason::kReload);
  }
  // The same set again changes no mode: no event.
  registry_.ApplyPolicies(next);
  EXPECT_EQ(observer_.notices.size(), 1u);
  EXPECT_TRUE(observer_.seen.empty());
}

TEST_F(RegistryTest, TransitionsCarryTheMode) {
  auto set = std::make_shared<PolicySet>(*Policies());
  auto shadow = std::make_shared<Policy>(*set->policies[0]);
  shadow->mode = Mode::kShadow;
  set->policies[0] = shadow;
  registry_.ApplyPolicies(set);
  Fail("openai/key-1", 2);
  registry_.ForceOpen("stripe/api").IgnoreError();
  ASSERT_EQ(observer_.seen.size(), 2u);
  EXPECT_TRUE(observer_.seen[0].shadow);
  EXPECT_FALSE(observer_.seen[1].shadow);
}

TEST_F(RegistryTest, ARecreatedBreakerContinuesAboveItsEvictedGeneration) {
  // Three transitions, then back to plain closed and idle.
  registry_.ForceOpen("one-off").IgnoreError();
  registry_.ForceClose("one-off").IgnoreError();
  registry_.Reset("one-off").IgnoreError();
  const uint64_t evicted_generation = registry_.Get("one-off")->generation;
  ASSERT_EQ(evicted_generation, 3u);
  clock_.Advance(absl::Minutes(11));
  ASSERT_EQ(registry_.EvictIdle(), 1u);
  ASSERT_FALSE(registry_.Get("one-off").ok());

  // A Watch client still holds generation 3 for the name: the new breaker's
  // first transition must not look older than that.
  observer_.seen.clear();
  Fail("one-off", 5);
  ASSERT_EQ(observer_.seen.size(), 1u);
  EXPECT_EQ(observer_.seen[0].to, State::kOpen);
  EXPECT_GT(observer_.seen[0].generation, evicted_generation);
}

// What /metrics sums over every dependency must never go down: an evicted
// breaker's counts stay in SumCounters.
TEST_F(RegistryTest, SumCountersKeepsWhatEvictedBreakersCounted) {
  registry_.ForceOpen("one-off").IgnoreError();
  registry_.ForceClose("one-off").IgnoreError();
  registry_.Reset("one-off").IgnoreError();
  ASSERT_TRUE(registry_.Acquire("one-off", 0)->allowed);
  Fail("openai/down", 2);  // opens; kept
  BreakerSnapshot before;
  ASSERT_EQ(registry_.SumCounters(&before), 2u);
  EXPECT_EQ(before.acquires[static_cast<int>(Decision::kAllowed)], 3u);
  EXPECT_EQ(before.reports[static_cast<int>(OutcomeClass::kTimeout)]
                          [static_cast<int>(Effect::kCountedFailure)],
            2u);
  uint64_t transitions = 0;
  for (const auto& t : before.transitions) transitions += t.count;
  EXPECT_EQ(transitions, 4u);  // three for one-off, one for openai/down
  double seconds_before = 0;
  for (double s : before.state_seconds) seconds_before += s;

  clock_.Advance(absl::Minutes(11));
  ASSERT_EQ(registry_.EvictIdle(), 1u);
  BreakerSnapshot after;
  ASSERT_EQ(registry_.SumCounters(&after), 1u);
  EXPECT_EQ(after.acquires, before.acquires);
  EXPECT_EQ(after.reports, before.reports);
  auto by_kind = [](const BreakerSnapshot& s) {
    std::map<std::tuple<State, State, TransitionReason>, uint64_t> counts;
    for (const auto& t : s.transitions) {
      counts[{t.from, t.to, t.reason}] += t.count;
    }
    return counts;
  };
  EXPECT_EQ(by_kind(after), by_kind(before));
  EXPECT_EQ(by_kind(after).size(), 4u);
  // Both breakers lived 11 more minutes: one until its eviction (now).
  double seconds_after = 0;
  for (double s : after.state_seconds) seconds_after += s;
  EXPECT_DOUBLE_EQ(seconds_after, seconds_before + 2 * 11 * 60);
  // Re-created, the name counts from zero again, on top of the kept sum.
  ASSERT_TRUE(registry_.Acquire("one-off", 0)->allowed);
  BreakerSnapshot again;
  ASSERT_EQ(registry_.SumCounters(&again), 2u);
  EXPECT_EQ(again.acquires[static_cast<int>(Decision::kAllowed)], 4u);
}

TEST_F(RegistryTest, ListAndForEachSeeEveryBreaker) {
  for (int i = 0; i < 500; ++i) {
    ASSERT_TRUE(registry_.Acquire("dep/" + std::to_string(i), 0).ok());
  }
  EXPECT_EQ(registry_.List().size(), 500u);
  size_t n = 0;
  registry_.ForEach([&](const BreakerSnapshot&) { ++n; });
  EXPECT_EQ(n, 500u);
}

TEST(DependencyNameTest, TheAlphabetIsExactlyTheBytesValidateAccepts) {
  const std::string allowed =
      "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._:/@-";
  for (int b = 0; b < 256; ++b) {
    const char c = static_cast<char>(b);
    const bool want = allowed.find(c) != std::string::npos;
    EXPECT_EQ(IsDependencyNameByte(c), want) << b;
    EXPECT_EQ(ValidateDependency(std::string(1, c)).ok(), want) << b;
  }
  EXPECT_EQ(kDependencyNameAlphabet, "[A-Za-z0-9._:/@-]");
}

}  // namespace
}  // namespace breakerd

namespace breakerd {
namespace {

// The per-thread memory of the last lookup (Registry::Locate) must never
// hand out a breaker that was evicted, or one of another registry.
TEST(RegistryLookupMemoryTest, AnEvictedAndRecreatedBreakerIsFoundAnew) {
  FakeClock clock;
  auto set = std::make_shared<PolicySet>();
  set->limits.idle_ttl = Seconds(1);
  Registry registry(set, &clock, 7);
  auto first = registry.Acquire("hot/dep", 0);
  ASSERT_TRUE(first.ok());
  ReportRequestFacts cancelled;
  cancelled.outcome.explicit_class = static_cast<int>(OutcomeClass::kCancelled);
  ASSERT_TRUE(registry.Report("hot/dep", first->permit, cancelled).ok());
  clock.Advance(Seconds(2));
  ASSERT_EQ(registry.EvictIdle(), 1u);
  // The old permit names a breaker that is gone.
  EXPECT_FALSE(registry.Report("hot/dep", first->permit, cancelled).ok());
  auto second = registry.Acquire("hot/dep", 0);
  ASSERT_TRUE(second.ok());
  EXPECT_GT(registry.Get("hot/dep")->generation, 0u);  // above the floor
  EXPECT_TRUE(registry.Report("hot/dep", second->permit, cancelled).ok());
}

TEST(RegistryLookupMemoryTest, TwoRegistriesOnOneThreadKeepTheirOwnBreakers) {
  FakeClock clock;
  auto set = std::make_shared<PolicySet>();
  for (int round = 0; round < 3; ++round) {
    // A registry freed and another made at the same address must not
    // inherit the lookup memory.
    auto a = std::make_unique<Registry>(set, &clock, 1);
    auto b = std::make_unique<Registry>(set, &clock, 2);
    auto pa = a->Acquire("same/name", 0);
    auto pb = b->Acquire("same/name", 0);
    ASSERT_TRUE(pa.ok() && pb.ok());
    ReportRequestFacts ok;
    ok.outcome.http_status = 200;
    EXPECT_TRUE(a->Report("same/name", pa->permit, ok).ok());
    EXPECT_FALSE(a->Report("same/name", pb->permit, ok).ok());
    EXPECT_TRUE(b->Report("same/name", pb->permit, ok).ok());
    EXPECT_EQ(a->Get("same/name")->window.calls, 1u);
    EXPECT_EQ(b->Get("same/name")->window.calls, 1u);
  }
}

}  // namespace
}  // namespace breakerd

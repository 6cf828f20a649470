// ReportBatch in the engine (DESIGN.md "Local decisions"): the grant ledger
// per breaker and generation across batches, outcomes applied to the rules
// while grants cover them and refused beyond, late outcomes of an older
// generation, resent batches applied once, the limits, chain decisions and
// the decisions clients made without the sidecar.
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "server/engine/chain_stats.h"
#include "server/engine/clock.h"
#include "server/engine/registry.h"

namespace breakerd {
namespace {

using absl::Seconds;

std::shared_ptr<const PolicySet> Policies() {
  auto set = std::make_shared<PolicySet>();
  auto defaults = std::make_shared<Policy>();
  defaults->cooldown.jitter = 0;
  defaults->cooldown.base = Seconds(10);
  defaults->consecutive_failures = 3;
  defaults->failure_rate.threshold = 0;
  set->defaults = defaults;
  set->limits.max_breakers = 4;
  return set;
}

LocalOutcomeFacts Outcome(OutcomeClass c) {
  LocalOutcomeFacts o;
  o.outcome.explicit_class = static_cast<int>(c);
  return o;
}

class LocalBatchTest : public ::testing::Test {
 protected:
  LocalBatchTest() : registry_(Policies(), &clock_, 11) {}

  // The generation a Watch client holds for `dep` (created by an Acquire
  // whose permit is reported, so only batches move the breaker after).
  uint64_t Known(absl::string_view dep) {
    auto a = registry_.Acquire(dep, 0);
    EXPECT_TRUE(a.ok() && a->allowed);
    ReportRequestFacts f;
    f.outcome.explicit_class = static_cast<int>(OutcomeClass::kSuccess);
    EXPECT_TRUE(registry_.Report(dep, a->permit, f).ok());
    return registry_.Get(dep)->generation;
  }

  BatchFacts Batch(uint64_t sequence, absl::string_view dep,
                   uint64_t generation, uint32_t grants,
                   std::vector<LocalOutcomeFacts> outcomes) {
    BatchFacts b;
    b.client_id = "pod-1/worker-7";
    b.sequence = sequence;
    b.dependencies.push_back(
        DependencyBatchFacts{dep, generation, grants, std::move(outcomes)});
    return b;
  }

  static std::vector<LocalOutcomeFacts> Many(int n, OutcomeClass c) {
    return std::vector<LocalOutcomeFacts>(n, Outcome(c));
  }

  uint64_t Acquires(absl::string_view dep, Decision d) {
    return registry_.Get(dep)->acquires[static_cast<int>(d)];
  }

  FakeClock clock_;
  Registry registry_;
};

TEST_F(LocalBatchTest, GrantsAreDecisionsAndTheirOutcomesCount) {
  const uint64_t g = Known("db/a");
  auto r = registry_.ReportBatch(
      Batch(1, "db/a", g, 3, Many(3, OutcomeClass::kSuccess)));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->counted, 3u);
  EXPECT_EQ(r->late + r->refused, 0u);
  EXPECT_FALSE(r->repeated);
  const BreakerSnapshot s = *registry_.Get("db/a");
  EXPECT_EQ(s.acquires[static_cast<int>(Decision::kAllowedLocal)], 3u);
  EXPECT_EQ(s.reports[static_cast<int>(OutcomeClass::kSuccess)]
                     [static_cast<int>(Effect::kCountedSuccess)],
            4u);  // the RPC one too
  EXPECT_EQ(registry_.batch_outcomes(), (std::array<uint64_t, 3>{3, 0, 0}));
}

TEST_F(LocalBatchTest, OutcomesBeyondTheGrantsAreRefusedChangingNothing) {
  const uint64_t g = Known("db/a");
  auto r = registry_.ReportBatch(
      Batch(1, "db/a", g, 1, Many(5, OutcomeClass::kTimeout)));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->counted, 1u);
  EXPECT_EQ(r->refused, 4u);
  const BreakerSnapshot s = *registry_.Get("db/a");
  EXPECT_EQ(s.state, State::kClosed);  // 1 failure in a row, not 5
  EXPECT_EQ(s.consecutive_failures, 1u);
  EXPECT_EQ(s.generation, g);
}

TEST_F(LocalBatchTest, GrantsAccumulateAcrossBatchesOfOneGeneration) {
  const uint64_t g = Known("db/a");
  // Calls outlast a flush: granted in one batch, reported in the next.
  auto r = registry_.ReportBatch(
      Batch(1, "db/a", g, 4, Many(1, OutcomeClass::kSuccess)));
  ASSERT_TRUE(r.ok());
  r = registry_.ReportBatch(
      Batch(2, "db/a", g, 0, Many(4, OutcomeClass::kSuccess)));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->counted, 3u);
  EXPECT_EQ(r->refused, 1u);
}

TEST_F(LocalBatchTest, LocalOutcomesTripTheBreakerAndTheRestAreLate) {
  const uint64_t g = Known("db/a");
  auto r = registry_.ReportBatch(
      Batch(1, "db/a", g, 5, Many(5, OutcomeClass::kTimeout)));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->counted, 3u);  // consecutive_failures 3
  EXPECT_EQ(r->late, 2u);
  const BreakerSnapshot s = *registry_.Get("db/a");
  EXPECT_EQ(s.state, State::kOpen);
  EXPECT_EQ(s.generation, g + 1);
  // The old generation's calls are late; a generation the breaker never
  // had is refused; neither gets grants into the new generation.
  r = registry_.ReportBatch(
      Batch(2, "db/a", g, 2, Many(2, OutcomeClass::kSuccess)));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->late, 2u);
  r = registry_.ReportBatch(
      Batch(3, "db/a", g + 5, 2, Many(2, OutcomeClass::kSuccess)));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->refused, 2u);
  EXPECT_EQ(registry_.Get("db/a")->state, State::kOpen);
  // Grants declared while open (a client that had not heard yet) do not
  // let outcomes in.
  r = registry_.ReportBatch(
      Batch(4, "db/a", g + 1, 3, Many(3, OutcomeClass::kSuccess)));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->refused, 3u);
}

TEST_F(LocalBatchTest, AResentBatchIsAppliedOnce) {
  const uint64_t g = Known("db/a");
  const BatchFacts batch =
      Batch(7, "db/a", g, 2, Many(2, OutcomeClass::kSuccess));
  ASSERT_TRUE(registry_.ReportBatch(batch).ok());
  auto r = registry_.ReportBatch(batch);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->repeated);
  EXPECT_EQ(r->counted + r->late + r->refused, 0u);
  EXPECT_EQ(Acquires("db/a", Decision::kAllowedLocal), 2u);
  // Another client's batch 7 is its own; this client's 6 (sent before 7,
  // arriving after) is new.
  BatchFacts other = batch;
  other.client_id = "pod-2/worker-1";
  EXPECT_FALSE(registry_.ReportBatch(other)->repeated);
  BatchFacts earlier = batch;
  earlier.sequence = 6;
  EXPECT_FALSE(registry_.ReportBatch(earlier)->repeated);
  EXPECT_TRUE(registry_.ReportBatch(earlier)->repeated);
  // Far behind the last one seen: not known any more, so not applied.
  BatchFacts later = batch;
  later.sequence = 7 + Registry::kBatchSequenceWindow + 1;
  EXPECT_FALSE(registry_.ReportBatch(later)->repeated);
  EXPECT_TRUE(registry_.ReportBatch(earlier)->repeated);
}

TEST_F(LocalBatchTest, BadBatchesAreRefusedWholeNamingTheField) {
  const uint64_t g = Known("db/a");
  BatchFacts batch = Batch(1, "db/a", g, 2, Many(2, OutcomeClass::kSuccess));
  batch.dependencies.push_back(
      DependencyBatchFacts{"db/b", 0, 1, {Outcome(OutcomeClass::kSuccess)}});
  batch.dependencies[1].outcomes[0].latency = absl::Seconds(-1);
  auto r = registry_.ReportBatch(batch);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(),
            "dependencies[1].outcomes[0].latency: must not be negative");
  EXPECT_EQ(Acquires("db/a", Decision::kAllowedLocal), 0u);  // nothing
  // The same sequence, corrected, is applied: the refusal used nothing up.
  batch.dependencies[1].outcomes[0].latency = absl::ZeroDuration();
  r = registry_.ReportBatch(batch);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->repeated);
  EXPECT_EQ(r->late, 1u);  // db/b has no breaker: its outcome is late

  BatchFacts bad_id = Batch(2, "db/a", g, 0, {});
  bad_id.client_id = "";
  EXPECT_NE(registry_.ReportBatch(bad_id).status().message().find("client_id:"),
            std::string::npos);
  BatchFacts too_many =
      Batch(3, "db/a", g, 0, Many(600, OutcomeClass::kSuccess));
  too_many.dependencies.push_back(
      DependencyBatchFacts{"db/c", 0, 0, Many(401, OutcomeClass::kSuccess)});
  r = registry_.ReportBatch(too_many);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(r.status().message(),
            "dependencies[].outcomes: at most 1000 in one ReportBatch (got "
            "1001); split it into several batches");
}

TEST_F(LocalBatchTest, ChainDecisionsAndOutcomesAreCounted) {
  const uint64_t g = Known("llm/backup");
  BatchFacts batch = Batch(1, "llm/backup", g, 2, {});
  LocalOutcomeFacts o = Outcome(OutcomeClass::kSuccess);
  o.chain = "llm";
  o.tier = 1;
  batch.dependencies[0].outcomes = {o, o, o};  // the third is refused
  batch.chains.push_back(ChainDecisionFacts{"llm", false, 1, 2});
  batch.chains.push_back(ChainDecisionFacts{"llm", true, 0, 5});
  ASSERT_TRUE(registry_.ReportBatch(batch).ok());
  std::map<size_t, uint64_t> decisions, outcomes;
  registry_.chains().ForEachDecision(
      [&](absl::string_view, size_t tier, uint64_t n) { decisions[tier] = n; });
  registry_.chains().ForEachOutcome([&](absl::string_view, size_t tier,
                                        OutcomeClass,
                                        uint64_t n) { outcomes[tier] = n; });
  EXPECT_EQ(decisions,
            (std::map<size_t, uint64_t>{{1, 2}, {ChainStats::kNoneTier, 5}}));
  EXPECT_EQ(outcomes, (std::map<size_t, uint64_t>{{1, 2}}));
}

TEST_F(LocalBatchTest, DecisionsMadeWithoutTheSidecarAreCounted) {
  BatchFacts batch;
  batch.client_id = "pod-1";
  batch.sequence = 1;
  batch.decisions.push_back(ClientDecisionFacts{"db/a", 3, 0, 0});
  batch.decisions.push_back(ClientDecisionFacts{"db/away", 0, 7, 2});
  ASSERT_TRUE(registry_.ReportBatch(batch).ok());
  EXPECT_EQ(registry_.Get("db/a")->client_refused_local, 3u);
  const BreakerSnapshot away = *registry_.Get("db/away");  // created
  EXPECT_EQ(away.client_fail_open, 7u);
  EXPECT_EQ(away.client_fail_closed, 2u);
}

// Hung calls cover grants made in clients: a grant without an outcome
// inflight.hang_after later counts as a slow failure in the window (never
// toward consecutive failures), at the next batch, Acquire or Report; its
// real outcome, when it comes, replaces the hung count.
class LocalHungTest : public LocalBatchTest {
 protected:
  LocalHungTest() : LocalBatchTest() {
    auto set = std::make_shared<PolicySet>(*Policies());
    auto p = std::make_shared<Policy>(*set->defaults);
    p->consecutive_failures = 0;
    p->failure_rate.threshold = 0.5;
    p->failure_rate.min_calls = 4;
    p->inflight.hang_after = Seconds(2);
    set->defaults = p;
    registry_.ApplyPolicies(set);
  }
};

TEST_F(LocalHungTest, GrantsWithoutAnOutcomeHangAndTheirOutcomeReplacesIt) {
  const uint64_t g = Known("db/a");  // one counted success
  ASSERT_TRUE(registry_.ReportBatch(Batch(1, "db/a", g, 2, {})).ok());
  EXPECT_EQ(registry_.Get("db/a")->inflight, 2u);
  clock_.Advance(Seconds(2) - absl::Nanoseconds(1));
  ASSERT_TRUE(registry_.Acquire("db/a", 0).ok());
  EXPECT_EQ(registry_.Get("db/a")->hung_calls, 0u);  // not before
  clock_.Advance(absl::Nanoseconds(1));
  ASSERT_TRUE(registry_.Acquire("db/a", 0).ok());
  BreakerSnapshot s = *registry_.Get("db/a");
  EXPECT_EQ(s.hung_calls, 2u);
  EXPECT_EQ(s.window.failures, 2u);
  EXPECT_EQ(s.window.slow, 2u);
  EXPECT_EQ(s.consecutive_failures, 0u);
  EXPECT_EQ(s.state, State::kClosed);  // 2 of 3 calls, below min_calls 4
  // One of them reports after all: its success replaces one hung count.
  auto r = registry_.ReportBatch(
      Batch(2, "db/a", g, 0, Many(1, OutcomeClass::kSuccess)));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->counted, 1u);
  s = *registry_.Get("db/a");
  EXPECT_EQ(s.window.failures, 1u);
  EXPECT_EQ(s.window.calls, 3u);  // the first success, one hung, this one
}

TEST_F(LocalHungTest, HungLocalGrantsTripTheBreakerAtTheNextCall) {
  const uint64_t g = Known("db/a");
  ASSERT_TRUE(registry_.ReportBatch(Batch(1, "db/a", g, 5, {})).ok());
  clock_.Advance(Seconds(2));
  // The next batch (from another client, with nothing of its own) counts
  // them: 5 hung of 6 calls opens the breaker, reason hung_calls.
  BatchFacts other = Batch(1, "db/a", g, 0, {});
  other.client_id = "pod-2";
  ASSERT_TRUE(registry_.ReportBatch(other).ok());
  const BreakerSnapshot s = *registry_.Get("db/a");
  EXPECT_EQ(s.state, State::kOpen);
  ASSERT_EQ(s.transitions.size(), 1u);
  EXPECT_EQ(s.transitions[0].reason, TransitionReason::kHungCalls);
  EXPECT_EQ(s.inflight, 0u);
}

}  // namespace
}  // namespace breakerd

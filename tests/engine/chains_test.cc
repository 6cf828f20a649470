// Named fallback chains (ChainStats through Registry::AcquireFirst and
// Report) and AcquireFirst's edge cases: the breaker cap, a repeated name, a
// forced-open candidate's wait.
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "gtest/gtest.h"
#include "server/engine/chain_stats.h"
#include "server/engine/clock.h"
#include "server/engine/registry.h"

namespace breakerd {
namespace {

using absl::Seconds;

std::shared_ptr<const PolicySet> Policies(uint32_t max_breakers,
                                          uint32_t max_chains) {
  auto set = std::make_shared<PolicySet>();
  auto defaults = std::make_shared<Policy>();
  defaults->cooldown.jitter = 0;
  defaults->cooldown.base = Seconds(10);
  defaults->consecutive_failures = 2;
  set->defaults = defaults;
  set->limits.max_breakers = max_breakers;
  set->limits.max_chains = max_chains;
  return set;
}

// (chain, tier) -> decisions; tier "none" for none granted.
using Decisions = std::map<std::pair<std::string, std::string>, uint64_t>;
// (chain, tier, class) -> outcomes.
using Outcomes =
    std::map<std::tuple<std::string, size_t, std::string>, uint64_t>;

class ChainsTest : public ::testing::Test {
 protected:
  explicit ChainsTest(uint32_t max_breakers = 100, uint32_t max_chains = 3)
      : registry_(Policies(max_breakers, max_chains), &clock_, 42) {}

  void Fail(absl::string_view dep, int n) {
    for (int i = 0; i < n; ++i) {
      auto a = registry_.Acquire(dep, 0);
      ASSERT_TRUE(a.ok() && a->allowed) << dep;
      ASSERT_TRUE(
          registry_.Report(dep, a->permit, Facts(OutcomeClass::kTimeout)).ok());
    }
  }

  static ReportRequestFacts Facts(OutcomeClass c, absl::string_view chain = "",
                                  uint32_t tier = 0) {
    ReportRequestFacts f;
    f.outcome.explicit_class = static_cast<int>(c);
    f.chain = chain;
    f.tier = tier;
    return f;
  }

  Decisions CountedDecisions() const {
    Decisions out;
    registry_.chains().ForEachDecision([&](absl::string_view chain, size_t tier,
                                           uint64_t n) {
      out[{std::string(chain),
           tier == ChainStats::kNoneTier ? "none" : std::to_string(tier)}] = n;
    });
    return out;
  }

  Outcomes CountedOutcomes() const {
    Outcomes out;
    registry_.chains().ForEachOutcome(
        [&](absl::string_view chain, size_t tier, OutcomeClass c, uint64_t n) {
          out[{std::string(chain), tier, std::string(OutcomeClassName(c))}] = n;
        });
    return out;
  }

  FakeClock clock_;
  Registry registry_;
};

TEST_F(ChainsTest, DecisionsCountTheTierInTheCallersFullChain) {
  const std::vector<std::string> chain = {"llm/primary", "llm/backup",
                                          "llm/last"};
  // Healthy: tier 0.
  auto r = registry_.AcquireFirst(chain, 0, {"llm", 0});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->granted, 0);
  // The primary opens: tier 1.
  Fail("llm/primary", 2);
  r = registry_.AcquireFirst(chain, 0, {"llm", 0});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->granted, 1);
  // A client that moved on after a failed call sends the rest with their
  // first tier: the last one granted is tier 2.
  r = registry_.AcquireFirst({chain[2]}, 0, {"llm", 2});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->granted, 0);
  // Everything open: none.
  Fail("llm/backup", 2);
  Fail("llm/last", 2);
  r = registry_.AcquireFirst(chain, 0, {"llm", 0});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->granted, -1);
  // Without a chain name nothing is counted.
  ASSERT_TRUE(registry_.AcquireFirst(chain, 0).ok());
  EXPECT_EQ(CountedDecisions(), (Decisions{{{"llm", "0"}, 1},
                                           {{"llm", "1"}, 1},
                                           {{"llm", "2"}, 1},
                                           {{"llm", "none"}, 1}}));
}

TEST_F(ChainsTest, OutcomesCountByTierAndClassButNotDuplicates) {
  auto a = registry_.Acquire("llm/backup", 0);
  ASSERT_TRUE(a.ok());
  auto r = registry_.Report("llm/backup", a->permit,
                            Facts(OutcomeClass::kServerError, "llm", 1));
  ASSERT_TRUE(r.ok());
  // The same permit again (a retried Report): not another outcome.
  r = registry_.Report("llm/backup", a->permit,
                       Facts(OutcomeClass::kServerError, "llm", 1));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->effect, Effect::kDuplicate);
  a = registry_.Acquire("llm/last", 0);
  ASSERT_TRUE(registry_
                  .Report("llm/last", a->permit,
                          Facts(OutcomeClass::kSuccess, "llm", 2))
                  .ok());
  EXPECT_EQ(CountedOutcomes(), (Outcomes{{{"llm", 1, "server_error"}, 1},
                                         {{"llm", 2, "success"}, 1}}));
}

TEST_F(ChainsTest, NamesPastMaxChainsAreCountedAsOther) {
  for (const char* name : {"c1", "c2", "c3", "c4", "c5"}) {
    ASSERT_TRUE(registry_.AcquireFirst({"dep"}, 0, {name, 0}).ok());
  }
  ASSERT_TRUE(registry_.AcquireFirst({"dep"}, 0, {"c1", 0}).ok());
  EXPECT_EQ(CountedDecisions(), (Decisions{{{"c1", "0"}, 2},
                                           {{"c2", "0"}, 1},
                                           {{"c3", "0"}, 1},
                                           {{"other", "0"}, 2}}));
  EXPECT_EQ(registry_.chains().size(), 4u);
}

TEST_F(ChainsTest, BadChainsAndTiersAreRefusedChangingNothing) {
  auto r = registry_.AcquireFirst({"dep"}, 0, {"bad chain", 0});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("chain:"), std::string::npos)
      << r.status();
  // A tier without a chain is a mistake, not a default.
  r = registry_.AcquireFirst({"dep"}, 0, {"", 3});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find(
                "first_tier: 3 needs a chain name (chain is empty)"),
            std::string::npos)
      << r.status();
  // Tiers run 0..63: two candidates from 62 reach 63, from 63 they pass it.
  EXPECT_TRUE(registry_.AcquireFirst({"a", "b"}, 0, {"c", 62}).ok());
  r = registry_.AcquireFirst({"x", "y"}, 0, {"c", 63});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("first_tier: a chain's tiers are 0 to "
                                      "63 (this request reaches tier 64)"),
            std::string::npos)
      << r.status();
  EXPECT_FALSE(registry_.Get("x").ok());  // nothing decided
  auto a = registry_.Acquire("a", 0);
  auto rep =
      registry_.Report("a", a->permit, Facts(OutcomeClass::kSuccess, "c", 64));
  ASSERT_FALSE(rep.ok());
  EXPECT_NE(rep.status().message().find("tier:"), std::string::npos);
  rep = registry_.Report("a", a->permit, Facts(OutcomeClass::kSuccess, "", 1));
  ASSERT_FALSE(rep.ok());
  EXPECT_NE(rep.status().message().find("tier: 1 needs a chain name"),
            std::string::npos)
      << rep.status();
  // The refused Report changed nothing: the permit still reports.
  EXPECT_TRUE(
      registry_.Report("a", a->permit, Facts(OutcomeClass::kSuccess)).ok());
  EXPECT_TRUE(CountedOutcomes().empty());
}

TEST_F(ChainsTest, ARepeatedNameIsDecidedOnce) {
  Fail("llm/primary", 2);  // open: refused
  auto r = registry_.AcquireFirst({"llm/primary", "llm/primary", "llm/backup"},
                                  0, {"llm", 0});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->granted, 2);  // the tier of its place in the list
  const BreakerSnapshot s = *registry_.Get("llm/primary");
  EXPECT_EQ(s.acquires[static_cast<int>(Decision::kRejectedOpen)], 1u);
}

TEST_F(ChainsTest, AForcedOpenCandidateHasNoWaitToOffer) {
  Fail("llm/primary", 2);  // open for 10 s
  ASSERT_TRUE(registry_.ForceOpen("llm/backup").ok());
  clock_.Advance(Seconds(3));
  auto r = registry_.AcquireFirst({"llm/primary", "llm/backup"}, 0);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->granted, -1);
  EXPECT_EQ(r->result.retry_after, Seconds(7));  // the primary's, not 0
  // Only forced-open candidates: no wait is known.
  r = registry_.AcquireFirst({"llm/backup"}, 0);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->result.retry_after, absl::ZeroDuration());
  EXPECT_EQ(r->result.reason, RejectReason::kForcedOpen);
}

class ChainsAtTheCapTest : public ChainsTest {
 protected:
  ChainsAtTheCapTest() : ChainsTest(/*max_breakers=*/2, /*max_chains=*/3) {}
};

TEST_F(ChainsAtTheCapTest, ACandidateThatCannotBeCreatedIsSkipped) {
  ASSERT_TRUE(registry_.Acquire("llm/backup", 0).ok());
  ASSERT_TRUE(registry_.Acquire("other/dep", 0).ok());
  ASSERT_EQ(registry_.size(), 2u);
  // The new name cannot be created; the healthy backup is granted.
  auto r = registry_.AcquireFirst({"llm/new", "llm/backup"}, 0, {"llm", 0});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->granted, 1);
  EXPECT_TRUE(r->result.allowed);
  EXPECT_EQ(r->skipped_at_cap, 1u);
  EXPECT_EQ(registry_.acquire_first_skipped(), 1u);
  EXPECT_EQ(CountedDecisions(), (Decisions{{{"llm", "1"}, 1}}));
  // Nothing could be decided at all: RESOURCE_EXHAUSTED, as for Acquire.
  r = registry_.AcquireFirst({"llm/new", "llm/newer"}, 0, {"llm", 0});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(registry_.acquire_first_skipped(), 3u);
}

}  // namespace
}  // namespace breakerd

// Named fallback chains: First and AcquireFirst with FirstOptions::chain ask
// breakerd for every decision, with the remaining candidates and the tier of
// the first, and report each granted call with its chain and tier; breakerd
// counts them (breakerd_chain_decisions_total, breakerd_chain_outcomes_total).
// The wire form is also checked against a stand-in Breaker that records
// what it receives.
#include <signal.h>

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "breakerd/client.h"
#include "breakerd/v1/breaker.grpc.pb.h"
#include "client_fixture.h"
#include "gmock/gmock.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "gtest/gtest.h"
#include "tests/e2e/breakerd_process.h"

namespace breakerd::client {
namespace {

using ::testing::ElementsAre;
using ::testing::StartsWith;

// Counts by "<tier>" (decisions) or "<tier>/<class>" (outcomes).
using ChainCounts = std::map<std::string, double>;

class ChainTest : public ClientTest {
 protected:
  // What breakerd counted for `chain` in `metric`: keyed by tier, or by
  // tier/class for the outcomes.
  ChainCounts Counted(absl::string_view metric, absl::string_view chain) {
    ChainCounts counts;
    for (const PromSample& s : ParsePrometheus(proc_.Metrics())) {
      auto it = s.labels.find("chain");
      if (s.name != metric || it == s.labels.end() || it->second != chain) {
        continue;
      }
      auto tier = s.labels.find("tier");
      std::string key = tier == s.labels.end() ? "" : tier->second;
      if (auto cls = s.labels.find("class"); cls != s.labels.end()) {
        absl::StrAppend(&key, "/", cls->second);
      }
      if (s.value != 0) counts[key] += s.value;
    }
    return counts;
  }
  ChainCounts Decisions(absl::string_view chain) {
    return Counted("breakerd_chain_decisions_total", chain);
  }
  ChainCounts Outcomes(absl::string_view chain) {
    return Counted("breakerd_chain_outcomes_total", chain);
  }
  // Every chain sample of `metric`, summed.
  double AllChains(absl::string_view metric) {
    double sum = 0;
    for (const PromSample& s : ParsePrometheus(proc_.Metrics())) {
      if (s.name == metric) sum += s.value;
    }
    return sum;
  }

  // Waits (at most 3 s: a Report may be on its way) until breakerd's
  // counts for `chain` are these.
  bool CountsAre(absl::string_view chain, const ChainCounts& decisions,
                 const ChainCounts& outcomes) {
    return WaitUntil(
        [&] {
          return Decisions(chain) == decisions && Outcomes(chain) == outcomes;
        },
        absl::Seconds(3));
  }

  // Fails guarded calls of `dep` with a server error until breakerd refuses
  // it, then waits until `client`'s Watch cache holds it open (a plain
  // Acquire refused kLocal).
  void OpenThroughGuard(Client* client, const std::string& dep) {
    for (int i = 0;; ++i) {
      absl::Status s =
          client->Do(dep, [] { return absl::InternalError("server error"); });
      if (IsBreakerOpen(s)) break;
      ASSERT_LT(i, 5) << dep << " still not refused";
    }
    ASSERT_TRUE(WaitUntil([&] {
      absl::StatusOr<Permit> p = client->Acquire(dep);
      return p.ok() && !p->allowed() &&
             p->decision().source == DecisionSource::kLocal;
    })) << "the Watch cache never held "
        << dep << " open";
  }
};

std::string Show(const ChainCounts& counts) {
  return absl::StrJoin(counts, ", ", absl::PairFormatter("="));
}

// conformance: chain
//
// The chain conf-chain-cpp over [p, s, t]: p runs; with p open (and held
// open by the Watch cache) s runs, fails with a server error, and t runs;
// with all three open no call runs and the caller gets the breaker-open
// status, yet breakerd is asked and counts the ultimate fallback.
TEST_F(ChainTest, CountsEachTierAndTheUltimateFallback) {
  auto client = NewClient();  // the Watch cache on, a generous 2 s timeout
  ASSERT_TRUE(WaitUntil([&] { return client->WatchConnected(); }));
  const std::string chain = "conf-chain-cpp";
  const std::string p = "chain-cpp/p", s = "chain-cpp/s", t = "chain-cpp/t";
  const std::vector<std::string> deps = {p, s, t};
  FirstOptions named;
  named.chain = chain;

  std::vector<std::string> called;
  std::string failing;
  const auto call = [&](absl::string_view dep) {
    called.push_back(std::string(dep));
    return dep == failing ? absl::InternalError("server error")
                          : absl::OkStatus();
  };

  absl::Status result = client->First(deps, call, named);
  EXPECT_TRUE(result.ok()) << result;
  EXPECT_THAT(called, ElementsAre(p));

  OpenThroughGuard(client.get(), p);
  called.clear();
  failing = s;
  result = client->First(deps, call, named);
  EXPECT_TRUE(result.ok()) << result;
  EXPECT_THAT(called, ElementsAre(s, t));

  OpenThroughGuard(client.get(), s);
  OpenThroughGuard(client.get(), t);
  called.clear();
  result = client->First(deps, call, named);
  EXPECT_TRUE(IsBreakerOpen(result)) << result;
  EXPECT_TRUE(called.empty());
  // Asked of breakerd although the cache knew every candidate open.
  ASSERT_TRUE(RefusalOf(result).has_value());
  EXPECT_EQ(RefusalOf(result)->source, DecisionSource::kSidecar);

  const ChainCounts decisions = {{"0", 1}, {"1", 1}, {"2", 1}, {"none", 1}};
  const ChainCounts outcomes = {
      {"0/success", 1}, {"1/server_error", 1}, {"2/success", 1}};
  EXPECT_TRUE(CountsAre(chain, decisions, outcomes))
      << "decisions " << Show(Decisions(chain)) << "; outcomes "
      << Show(Outcomes(chain));
}

// The two-step form: AcquireFirst with a chain and the tier of its first
// candidate grants with the chain and tier in its decision, and the
// Permit's Report sends them.
TEST_F(ChainTest, AcquireFirstGrantCarriesChainAndTierToItsReport) {
  ClientOptions options;
  options.watch = false;
  auto client = NewClient(options);
  const std::string chain = "cpp-two-step";
  const std::string x = "chain-two-step/x", y = "chain-two-step/y";
  ForceOpen(x);

  absl::StatusOr<Permit> permit = client->AcquireFirst({x, y}, 0, {chain, 1});
  ASSERT_TRUE(permit.ok()) << permit.status();
  ASSERT_TRUE(permit->allowed());
  EXPECT_EQ(permit->decision().dependency, y);
  EXPECT_EQ(permit->decision().source, DecisionSource::kSidecar);
  EXPECT_EQ(permit->decision().chain, chain);
  EXPECT_EQ(permit->decision().tier, 2u);  // second, after first tier 1
  EXPECT_TRUE(permit->Report(Outcome::FromHttpStatus(429)).ok());

  // Without a chain: none counted, and the decision carries none.
  absl::StatusOr<Permit> plain = client->AcquireFirst({x, y});
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_TRUE(plain->allowed());
  EXPECT_EQ(plain->decision().chain, "");
  EXPECT_EQ(plain->decision().tier, 0u);
  EXPECT_TRUE(plain->Report(Outcome::Success()).ok());

  EXPECT_TRUE(CountsAre(chain, {{"2", 1}}, {{"2/rate_limited", 1}}))
      << "decisions " << Show(Decisions(chain)) << "; outcomes "
      << Show(Outcomes(chain));
  EXPECT_EQ(AllChains("breakerd_chain_decisions_total"), 1);
  EXPECT_EQ(ReportsFor(y), Granted(y));
}

// An invalid chain name, or a chain reaching past tier 63, is refused with
// INVALID_ARGUMENT naming `chain`, before any RPC: no call runs, breakerd
// sees no Acquire, nothing is counted.
TEST_F(ChainTest, InvalidChainIsRefusedBeforeAnyRpc) {
  ClientOptions options;
  options.watch = false;
  auto client = NewClient(options);
  const std::string dep = "chain-invalid/a";
  std::vector<std::string> long_chain;
  for (int i = 0; i < 65; ++i) {
    long_chain.push_back(absl::StrCat("chain-invalid/d", i));
  }
  struct Case {
    std::string name;
    std::vector<std::string> deps;
    FirstOptions options;
  };
  const std::vector<Case> cases = {
      {"empty", {dep}, {""}},
      {"space", {dep}, {"my chain"}},
      {"too long", {dep}, {std::string(201, 'c')}},
      {"65 tiers", long_chain, {"ok-name"}},
      {"past tier 63", {dep, "chain-invalid/b"}, {"ok-name", 63}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const ClientStats before = client->stats();
    bool ran = false;
    absl::Status first = client->First(
        c.deps,
        [&](absl::string_view) {
          ran = true;
          return absl::OkStatus();
        },
        c.options);
    absl::StatusOr<Permit> acquired =
        client->AcquireFirst(c.deps, 0, c.options);
    for (const absl::Status& s : {first, acquired.status()}) {
      EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
      EXPECT_THAT(std::string(s.message()), StartsWith("chain")) << s;
    }
    EXPECT_FALSE(ran);
    const ClientStats after = client->stats();
    EXPECT_EQ(after.fail_open, before.fail_open);
    EXPECT_EQ(after.fail_closed, before.fail_closed);
    EXPECT_EQ(after.local_rejections, before.local_rejections);
    for (const std::string& d : c.deps) {
      EXPECT_EQ(SumFor("breakerd_acquire_total", d), 0) << d;
    }
  }
}

// While breakerd is away a named chain decides as without a name: the
// fail-open grant goes to the first candidate the Watch cache does not hold
// open (with its tier), and with every candidate held open the refusal is
// local.
TEST_F(ChainTest, WhileAwayDecidesAsWithoutAName) {
  auto client = NewClientAsConfigured();
  const std::string chain = "cpp-away-chain";
  const std::string p = "chain-away/p", q = "chain-away/q";
  ForceOpen(p);
  ASSERT_TRUE(
      WaitUntil([&] { return client->CachedState(p) == State::kForcedOpen; }));

  ASSERT_TRUE(proc_.Signal(SIGSTOP));
  ASSERT_TRUE(WaitUntil([&] { return IsStopped(proc_.pid()); }));
  const ClientStats before = client->stats();
  // The first times out and marks breakerd away; the second makes no RPC.
  for (int i = 0; i < 2; ++i) {
    SCOPED_TRACE(i);
    absl::StatusOr<Permit> permit = client->AcquireFirst({p, q}, 0, {chain});
    ASSERT_TRUE(permit.ok()) << permit.status();
    EXPECT_TRUE(permit->allowed());
    EXPECT_EQ(permit->decision().source, DecisionSource::kFailOpen);
    EXPECT_EQ(permit->decision().dependency, q);
    EXPECT_EQ(permit->decision().chain, chain);
    EXPECT_EQ(permit->decision().tier, 1u);
  }
  absl::StatusOr<Permit> none = client->AcquireFirst({p}, 0, {chain});
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_FALSE(none->allowed());
  EXPECT_EQ(none->decision().source, DecisionSource::kLocal);
  const ClientStats after = client->stats();
  EXPECT_EQ(after.fail_open, before.fail_open + 2);
  EXPECT_EQ(after.away_decisions, before.away_decisions + 1);
  // One refused candidate in each of the three decisions.
  EXPECT_EQ(after.local_rejections, before.local_rejections + 3);
  ASSERT_TRUE(proc_.Signal(SIGCONT));
}

// Grants the first candidate not in `refuse` and keeps, as text, every
// AcquireFirst and Report it receives. Has no Watch.
class RecordingBreaker final : public v1::Breaker::Service {
 public:
  explicit RecordingBreaker(std::vector<std::string> refuse)
      : refuse_(std::move(refuse)) {}

  grpc::Status AcquireFirst(grpc::ServerContext*,
                            const v1::AcquireFirstRequest* request,
                            v1::AcquireFirstResponse* response) override {
    absl::MutexLock lock(&mu_);
    received_.push_back(absl::StrCat(
        "AcquireFirst [", absl::StrJoin(request->dependencies(), " "),
        "] chain=", request->chain(), " first_tier=", request->first_tier()));
    for (const std::string& dep : request->dependencies()) {
      if (std::find(refuse_.begin(), refuse_.end(), dep) != refuse_.end()) {
        continue;
      }
      response->set_allowed(true);
      response->set_permit(++permit_);
      response->set_dependency(dep);
      response->set_state(v1::STATE_CLOSED);
      return grpc::Status::OK;
    }
    response->set_state(v1::STATE_OPEN);
    response->set_reason(v1::REJECT_REASON_OPEN);
    return grpc::Status::OK;
  }

  grpc::Status Report(grpc::ServerContext*, const v1::ReportRequest* request,
                      v1::ReportResponse* response) override {
    absl::MutexLock lock(&mu_);
    received_.push_back(
        absl::StrCat("Report ", request->dependency(), " ",
                     request->has_grpc_code()
                         ? absl::StrCat("grpc_code=", request->grpc_code())
                         : v1::Outcome_Name(request->outcome()),
                     " chain=", request->chain(), " tier=", request->tier()));
    response->set_state(v1::STATE_CLOSED);
    response->set_effect(v1::EFFECT_COUNTED_SUCCESS);
    return grpc::Status::OK;
  }

  std::vector<std::string> received() {
    absl::MutexLock lock(&mu_);
    return received_;
  }

 private:
  const std::vector<std::string> refuse_;
  absl::Mutex mu_;
  uint64_t permit_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::string> received_ ABSL_GUARDED_BY(mu_);
};

// The wire form of a chain, whatever the sidecar counts: each AcquireFirst
// carries the remaining candidates, the chain and the tier of the first
// (after a failed call, the tier after the granted one); each Report the
// chain and the granted tier. Without a name, neither.
TEST(ChainWireTest, RequestsCarryTheChainAndTiers) {
  RecordingBreaker service({"w/a"});
  int port = 0;
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                           &port);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_NE(server, nullptr);
  ClientOptions options;
  options.target = absl::StrCat("127.0.0.1:", port);
  options.watch = false;
  options.decision_timeout = absl::Seconds(2);
  options.log = [](absl::string_view) {};
  auto client = Client::Create(options);
  ASSERT_TRUE(client.ok()) << client.status();
  ASSERT_TRUE((*client)->WaitForConnected(kWait));

  const std::vector<std::string> deps = {"w/a", "w/b", "w/c", "w/d"};
  std::vector<std::string> called;
  absl::Status result = (*client)->First(
      deps,
      [&](absl::string_view dep) {
        called.push_back(std::string(dep));
        return dep == "w/b" ? absl::UnavailableError("down") : absl::OkStatus();
      },
      {"wire", 1});
  EXPECT_TRUE(result.ok()) << result;
  EXPECT_THAT(called, ElementsAre("w/b", "w/c"));
  result = (*client)->First(deps,
                            [](absl::string_view) { return absl::OkStatus(); });
  EXPECT_TRUE(result.ok()) << result;
  (*client)->Close();
  server->Shutdown();

  EXPECT_THAT(
      service.received(),
      ElementsAre("AcquireFirst [w/a w/b w/c w/d] chain=wire first_tier=1",
                  "Report w/b grpc_code=14 chain=wire tier=2",  // UNAVAILABLE
                  "AcquireFirst [w/c w/d] chain=wire first_tier=3",
                  "Report w/c grpc_code=0 chain=wire tier=3",
                  "AcquireFirst [w/a w/b w/c w/d] chain= first_tier=0",
                  "Report w/b grpc_code=0 chain= tier=0"));
}

}  // namespace
}  // namespace breakerd::client

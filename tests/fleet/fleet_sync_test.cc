// FleetSync's logic with two sidecars (each its own Registry and fake
// clock) on an in-memory store, driven step by step with RunOnce: no
// threads, no sleeps. The real Redis is exercised end to end in
// tests/e2e/fleet_e2e_test.cc.
#include "server/fleet/fleet_sync.h"

#include <algorithm>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "server/engine/clock.h"
#include "server/engine/registry.h"

namespace breakerd {
namespace {

using absl::Seconds;

double NoJitter() { return 0.5; }

class FakeStore;

// What a Redis would hold, shared by every FakeStore.
struct FakeRedis {
  bool up = true;
  const absl::Time* wall = nullptr;
  std::map<std::string, uint64_t> versions;
  std::map<std::string, std::string> states;
  struct Probe {
    std::string owner;
    absl::Time until;
  };
  std::map<std::string, Probe> probes;
  std::vector<FakeStore*> subscribers;
  int claims = 0;
};

class FakeStore : public FleetStore {
 public:
  explicit FakeStore(FakeRedis* redis) : r_(redis) {}
  ~FakeStore() override { Disconnect(); }

  absl::Status Connect() override {
    if (!r_->up) return absl::UnavailableError("connection refused");
    if (!connected_) r_->subscribers.push_back(this);
    connected_ = true;
    return absl::OkStatus();
  }
  void Disconnect() override {
    if (!connected_) return;
    connected_ = false;
    inbox_.clear();
    auto& subs = r_->subscribers;
    subs.erase(std::remove(subs.begin(), subs.end(), this), subs.end());
  }
  absl::StatusOr<uint64_t> Publish(const FleetMessage& m,
                                   absl::Duration) override {
    if (absl::Status s = Check(); !s.ok()) return s;
    const uint64_t v = ++r_->versions[m.dependency];
    const std::string text = absl::StrCat(v, " ", FormatFleetBody(m));
    r_->states[m.dependency] = text;
    for (FakeStore* s : r_->subscribers) {
      s->inbox_.push_back(*ParseFleetMessage(text));
    }
    return v;
  }
  absl::StatusOr<ClaimAnswer> ClaimProbe(absl::string_view dependency,
                                         absl::string_view owner,
                                         absl::Duration lease) override {
    if (absl::Status s = Check(); !s.ok()) return s;
    ++r_->claims;
    auto it = r_->probes.find(std::string(dependency));
    if (it != r_->probes.end() && it->second.until > *r_->wall) {
      return ClaimAnswer{false, it->second.until - *r_->wall};
    }
    r_->probes[std::string(dependency)] = {std::string(owner),
                                           *r_->wall + lease};
    return ClaimAnswer{true, lease};
  }
  absl::Status ReleaseProbe(absl::string_view dependency,
                            absl::string_view owner) override {
    if (absl::Status s = Check(); !s.ok()) return s;
    auto it = r_->probes.find(std::string(dependency));
    if (it != r_->probes.end() && it->second.owner == owner) {
      r_->probes.erase(it);
    }
    return absl::OkStatus();
  }
  absl::StatusOr<std::vector<FleetMessage>> ReadStates() override {
    if (absl::Status s = Check(); !s.ok()) return s;
    std::vector<FleetMessage> out;
    for (const auto& [dep, text] : r_->states) {
      out.push_back(*ParseFleetMessage(text));
    }
    return out;
  }
  absl::Status Ping() override { return Check(); }
  absl::StatusOr<std::vector<FleetMessage>> Receive(absl::Duration) override {
    if (absl::Status s = Check(); !s.ok()) return s;
    std::vector<FleetMessage> out(inbox_.begin(), inbox_.end());
    inbox_.clear();
    return out;
  }
  void Wake() override {}

  // Delivers `m` as if published (for duplicate and ordering tests).
  void Deliver(const FleetMessage& m) { inbox_.push_back(m); }

 private:
  absl::Status Check() {
    if (!r_->up || !connected_) {
      return absl::UnavailableError("connection lost");
    }
    return absl::OkStatus();
  }
  FakeRedis* r_;
  bool connected_ = false;
  std::deque<FleetMessage> inbox_;
};

std::shared_ptr<const PolicySet> Policies() {
  auto set = std::make_shared<PolicySet>();
  auto p = std::make_shared<Policy>();
  p->cooldown.base = Seconds(10);
  p->cooldown.max = Seconds(80);
  p->cooldown.jitter = 0;
  p->failure_rate.threshold = 0;
  p->probe.lease = Seconds(5);
  set->defaults = p;
  return set;
}

// One sidecar: its own registry, clock and FleetSync.
struct Sidecar {
  Sidecar(std::string id, FakeRedis* redis, const absl::Time* wall)
      : registry(Policies(), &clock, 0, &NoJitter) {
    auto s = std::make_unique<FakeStore>(redis);
    store = s.get();
    FleetOptions o;
    o.id = std::move(id);
    o.wall_now = [wall] { return *wall; };
    sync = std::make_unique<FleetSync>(&registry, std::move(s), o);
    registry.SetProbeArbiter(sync.get());
    registry.AddObserver(sync.get());
  }
  ~Sidecar() { sync->Stop(); }

  void Step() { sync->RunOnce(absl::ZeroDuration()); }
  AcquireResult Acquire(const std::string& dep) {
    auto r = registry.Acquire(dep, 0);
    EXPECT_TRUE(r.ok());
    return *r;
  }
  void Report(const std::string& dep, uint64_t permit, OutcomeClass c) {
    ReportRequestFacts f;
    f.outcome.explicit_class = static_cast<int>(c);
    ASSERT_TRUE(registry.Report(dep, permit, f).ok());
  }
  void Trip(const std::string& dep) {
    for (int i = 0; i < 5; ++i) {
      Report(dep, Acquire(dep).permit, OutcomeClass::kTimeout);
    }
    ASSERT_EQ(State(dep), State::kOpen);
  }
  breakerd::State State(const std::string& dep) {
    auto s = registry.Get(dep);
    return s.ok() ? s->state : State::kClosed;
  }

  FakeClock clock;
  Registry registry;
  FakeStore* store;
  std::unique_ptr<FleetSync> sync;
};

class FleetSyncTest : public ::testing::Test {
 protected:
  FleetSyncTest() {
    redis_.wall = &wall_;
    a_ = std::make_unique<Sidecar>("a", &redis_, &wall_);
    b_ = std::make_unique<Sidecar>("b", &redis_, &wall_);
    StepAll();
  }
  void StepAll() {
    a_->Step();
    b_->Step();
  }
  void Advance(absl::Duration d) {
    wall_ += d;
    a_->clock.Advance(d);
    b_->clock.Advance(d);
  }

  absl::Time wall_ = absl::FromUnixSeconds(1'800'000'000);
  FakeRedis redis_;
  std::unique_ptr<Sidecar> a_, b_;
};

TEST_F(FleetSyncTest, AShadowBreakersOpenAndProbeResultAreNeverPublished) {
  // a tries a policy in shadow mode; b enforces.
  auto shadow = std::make_shared<PolicySet>(*Policies());
  auto p = std::make_shared<Policy>(*shadow->defaults);
  p->mode = Mode::kShadow;
  shadow->defaults = p;
  a_->registry.ApplyPolicies(shadow);

  a_->Trip("dep/x");
  EXPECT_TRUE(a_->Acquire("dep/x").allowed);  // shadow: allowed, yet open
  StepAll();
  StepAll();
  EXPECT_EQ(b_->State("dep/x"), State::kClosed);
  EXPECT_TRUE(b_->Acquire("dep/x").allowed);
  // Its probe result neither: the fleet never heard of this episode.
  Advance(Seconds(10));
  const AcquireResult probe = a_->Acquire("dep/x");
  ASSERT_TRUE(probe.probe);
  a_->Report("dep/x", probe.permit, OutcomeClass::kSuccess);
  StepAll();
  StepAll();
  EXPECT_EQ(a_->sync->counters().published, 0u);
  EXPECT_EQ(b_->sync->counters().applied, 0u);

  // An operator's decision on the shadow sidecar is still fleet-wide.
  ASSERT_TRUE(a_->registry.ForceOpen("dep/y").ok());
  StepAll();
  StepAll();
  EXPECT_EQ(b_->State("dep/y"), State::kForcedOpen);
}

TEST_F(FleetSyncTest, OpenPropagatesWithTheSameCooldownEnd) {
  ASSERT_TRUE(a_->sync->connected());
  a_->Trip("dep/x");
  StepAll();  // a publishes
  StepAll();  // b receives
  auto s = b_->registry.Get("dep/x");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->state, State::kOpen);
  EXPECT_EQ(s->retry_after, Seconds(10));
  AcquireResult r = b_->Acquire("dep/x");
  EXPECT_FALSE(r.allowed);
  EXPECT_EQ(r.reason, RejectReason::kOpen);
  EXPECT_EQ(a_->sync->counters().published, 1u);
  EXPECT_EQ(b_->sync->counters().applied, 1u);
  // a does not apply its own message.
  EXPECT_EQ(a_->sync->counters().applied, 0u);
}

TEST_F(FleetSyncTest, DuplicatesAndOlderVersionsChangeNothing) {
  a_->Trip("dep/x");
  StepAll();
  StepAll();
  ASSERT_EQ(b_->State("dep/x"), State::kOpen);
  const uint64_t generation = b_->registry.Get("dep/x")->generation;
  FleetMessage dup = *ParseFleetMessage(redis_.states["dep/x"]);
  b_->store->Deliver(dup);
  FleetMessage older = dup;
  older.kind = ExternalState::Kind::kClosed;
  older.version = 0;
  b_->store->Deliver(older);
  b_->Step();
  EXPECT_EQ(b_->State("dep/x"), State::kOpen);
  EXPECT_EQ(b_->registry.Get("dep/x")->generation, generation);
  EXPECT_EQ(b_->sync->counters().duplicates, 2u);
}

TEST_F(FleetSyncTest, OneProbeForTheFleetAndItsSuccessClosesEveryone) {
  a_->Trip("dep/x");
  StepAll();
  StepAll();
  Advance(Seconds(10));
  // Both are half-open: each asks the fleet and refuses meanwhile.
  EXPECT_EQ(a_->Acquire("dep/x").reason, RejectReason::kProbeInFlight);
  EXPECT_EQ(b_->Acquire("dep/x").reason, RejectReason::kProbeInFlight);
  a_->Step();  // a claims first and wins
  b_->Step();  // b loses
  EXPECT_EQ(redis_.claims, 2);
  AcquireResult probe = a_->Acquire("dep/x");
  EXPECT_TRUE(probe.probe);
  AcquireResult other = b_->Acquire("dep/x");
  EXPECT_FALSE(other.allowed);
  EXPECT_EQ(other.reason, RejectReason::kProbeInFlight);
  EXPECT_GT(other.retry_after, Seconds(4));

  a_->Report("dep/x", probe.permit, OutcomeClass::kSuccess);
  EXPECT_EQ(a_->State("dep/x"), State::kClosed);
  StepAll();  // a publishes closed and releases the claim
  StepAll();
  EXPECT_EQ(b_->State("dep/x"), State::kClosed);
  EXPECT_TRUE(b_->Acquire("dep/x").allowed);
  EXPECT_EQ(redis_.probes.count("dep/x"), 0u);
}

TEST_F(FleetSyncTest, ProbeFailureReopensEveryoneEscalated) {
  a_->Trip("dep/x");
  StepAll();
  StepAll();
  Advance(Seconds(10));
  a_->Acquire("dep/x");
  a_->Step();
  AcquireResult probe = a_->Acquire("dep/x");
  ASSERT_TRUE(probe.probe);
  a_->Report("dep/x", probe.permit, OutcomeClass::kServerError);
  StepAll();
  StepAll();
  auto s = b_->registry.Get("dep/x");
  EXPECT_EQ(s->state, State::kOpen);
  EXPECT_EQ(s->escalation_level, 1u);
  EXPECT_EQ(s->retry_after, Seconds(20));
}

TEST_F(FleetSyncTest, AnotherSidecarClaimsAfterTheProbersLeaseLapses) {
  a_->Trip("dep/x");
  StepAll();
  StepAll();
  Advance(Seconds(10));
  a_->Acquire("dep/x");
  a_->Step();
  ASSERT_TRUE(a_->Acquire("dep/x").probe);  // and a never reports
  b_->Acquire("dep/x");
  b_->Step();
  EXPECT_EQ(b_->Acquire("dep/x").reason, RejectReason::kProbeInFlight);
  Advance(Seconds(5));
  EXPECT_FALSE(b_->Acquire("dep/x").allowed);  // asks again
  b_->Step();
  EXPECT_TRUE(b_->Acquire("dep/x").probe);
}

TEST_F(FleetSyncTest, StoreDownMeansLocalBreakersThenRejoin) {
  redis_.up = false;
  StepAll();
  EXPECT_FALSE(a_->sync->connected());
  EXPECT_FALSE(a_->sync->Active());
  // Still breaking locally, probing locally.
  a_->Trip("dep/x");
  Advance(Seconds(10));
  EXPECT_TRUE(a_->Acquire("dep/x").probe);
  StepAll();  // a's open/half-open is kept for later; reconnect backs off

  redis_.up = true;
  Advance(Seconds(3));
  StepAll();
  EXPECT_TRUE(a_->sync->connected());
  EXPECT_TRUE(b_->sync->connected());
  EXPECT_EQ(a_->sync->counters().disconnects, 1u);
  // What a decided while away is published once it is back.
  StepAll();
  StepAll();
  EXPECT_GE(a_->sync->counters().published, 1u);
  EXPECT_NE(redis_.states.count("dep/x"), 0u);
}

TEST_F(FleetSyncTest, RejoinAppliesStoredOpenAndForcedStates) {
  b_->sync->Stop();
  b_.reset();
  a_->Trip("dep/open");
  ASSERT_TRUE(a_->registry.ForceOpen("dep/forced").ok());
  a_->Step();
  // A sidecar that starts now learns both from the store.
  Sidecar c("c", &redis_, &wall_);
  c.clock.Advance(Seconds(1));
  c.Step();
  EXPECT_EQ(c.State("dep/open"), State::kOpen);
  EXPECT_EQ(c.State("dep/forced"), State::kForcedOpen);
}

}  // namespace
}  // namespace breakerd

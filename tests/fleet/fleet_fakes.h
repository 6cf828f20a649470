// The fleet's test doubles: an in-memory store (FakeRedis, shared by the
// FakeStores of every sidecar, on the test's clock) and a Sidecar (its own
// Registry, fake clock and FleetSync), driven step by step with RunOnce: no
// threads, no sleeps. The real Redis is exercised end to end in
// tests/e2e/fleet_*_e2e_test.cc.
#ifndef BREAKERD_TESTS_FLEET_FLEET_FAKES_H_
#define BREAKERD_TESTS_FLEET_FLEET_FAKES_H_

#include <algorithm>
#include <array>
#include <deque>
#include <functional>
#include <iterator>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "server/engine/clock.h"
#include "server/engine/registry.h"
#include "server/fleet/fleet_store.h"
#include "server/fleet/fleet_sync.h"

namespace breakerd {
namespace fleet_testing {

inline double NoJitter() { return 0.5; }

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
  // Each member's last heartbeat, by the store's clock (`wall`).
  std::map<std::string, absl::Time> heartbeats;
  std::string incarnation;
  // The fleet windows, by dependency and bucket width in ms.
  struct Window {
    std::map<int64_t, std::array<int64_t, 3>> buckets;
    std::map<std::string, int64_t> sources;
    std::map<std::string, int64_t> trips;
  };
  std::map<std::pair<std::string, int64_t>, Window> windows;
  int window_round_trips = 0;
  // FLUSHALL: every key gone (connections and subscriptions stay).
  void Flush() {
    windows.clear();
    versions.clear();
    states.clear();
    probes.clear();
    heartbeats.clear();
    incarnation.clear();
  }
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
  absl::StatusOr<PublishAnswer> Publish(const FleetPublish& p,
                                        absl::Duration) override {
    if (absl::Status s = Check(); !s.ok()) return s;
    if (p.decided_unix_ms > 0) {
      // As the Redis script: a decision never replaces a newer one.
      auto stored = r_->states.find(p.dependency);
      if (stored != r_->states.end()) {
        absl::StatusOr<FleetMessage> cur = ParseFleetMessage(stored->second);
        if (cur.ok() && cur->format == kFleetFormat &&
            (cur->kind == ExternalState::Kind::kForcedOpen ||
             cur->kind == ExternalState::Kind::kForcedClosed ||
             cur->kind == ExternalState::Kind::kReset) &&
            cur->stored_unix_ms > p.decided_unix_ms) {
          PublishAnswer superseded;
          superseded.store_unix_ms = absl::ToUnixMillis(*r_->wall);
          superseded.superseded_by = stored->second;
          return superseded;
        }
      }
    }
    FleetMessage m;
    m.dependency = p.dependency;
    m.version = ++r_->versions[p.dependency];
    m.stored_unix_ms = p.decided_unix_ms > 0 ? p.decided_unix_ms
                                             : absl::ToUnixMillis(*r_->wall);
    m.origin = p.origin;
    m.kind = p.kind;
    if (p.kind == ExternalState::Kind::kOpen) {
      m.open_until_unix_ms = absl::ToUnixMillis(*r_->wall + p.open_remaining);
    }
    m.escalation_level = p.escalation_level;
    m.reason = p.reason;
    const std::string text = FormatFleetMessage(m);
    r_->states[m.dependency] = text;
    for (FakeStore* s : r_->subscribers) s->inbox_.push_back(text);
    return PublishAnswer{m.version, m.stored_unix_ms};
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
  absl::StatusOr<std::vector<std::string>> ReadStates() override {
    if (absl::Status s = Check(); !s.ok()) return s;
    std::vector<std::string> out;
    for (const auto& [dep, text] : r_->states) out.push_back(text);
    return out;
  }
  absl::StatusOr<HeartbeatAnswer> Heartbeat(absl::string_view id,
                                            absl::Duration ttl) override {
    if (absl::Status s = Check(); !s.ok()) return s;
    r_->heartbeats[std::string(id)] = *r_->wall;
    HeartbeatAnswer answer;
    for (const auto& [member, at] : r_->heartbeats) {
      if (*r_->wall - at <= ttl) ++answer.members;
    }
    if (r_->incarnation.empty()) {
      r_->incarnation = absl::StrCat(id, "@", absl::FormatTime(*r_->wall));
    }
    answer.incarnation = r_->incarnation;
    answer.store_unix_ms = absl::ToUnixMillis(*r_->wall);
    return answer;
  }
  absl::StatusOr<std::vector<FleetWindow>> SyncWindows(
      absl::string_view id, const std::vector<WindowSync>& syncs) override {
    if (absl::Status s = Check(); !s.ok()) return s;
    ++r_->window_round_trips;
    std::vector<FleetWindow> out;
    for (const WindowSync& w : syncs) {
      const int64_t width = absl::ToInt64Milliseconds(w.width);
      FakeRedis::Window& win = r_->windows[{w.dependency, width}];
      const int64_t bucket = absl::ToUnixMillis(*r_->wall) / width;
      const int64_t first = bucket - w.buckets + 1;
      auto& counts = win.buckets[bucket];
      counts[0] += w.calls;
      counts[1] += w.failures;
      counts[2] += w.slow;
      if (w.failures > 0 || w.slow > 0) win.sources[std::string(id)] = bucket;
      if (w.tripped) win.trips[std::string(id)] = bucket;
      FleetWindow sum;
      for (auto it = win.buckets.begin(); it != win.buckets.end();) {
        if (it->first < first) {
          it = win.buckets.erase(it);
          continue;
        }
        sum.calls += it->second[0];
        sum.failures += it->second[1];
        sum.slow += it->second[2];
        ++it;
      }
      for (auto* ids : {&win.sources, &win.trips}) {
        for (auto it = ids->begin(); it != ids->end();) {
          it = it->second < first ? ids->erase(it) : std::next(it);
        }
      }
      sum.sources = win.sources.size();
      sum.trips = win.trips.size();
      out.push_back(sum);
    }
    return out;
  }
  absl::Status EndEpisode(absl::string_view dependency,
                          absl::Duration width) override {
    if (absl::Status s = Check(); !s.ok()) return s;
    r_->windows.erase(
        {std::string(dependency), absl::ToInt64Milliseconds(width)});
    return absl::OkStatus();
  }
  absl::StatusOr<std::vector<std::string>> Receive(absl::Duration) override {
    if (absl::Status s = Check(); !s.ok()) return s;
    std::vector<std::string> out(inbox_.begin(), inbox_.end());
    inbox_.clear();
    return out;
  }
  void Wake() override {}

  // Delivers `m` as if published (for duplicate and ordering tests).
  void Deliver(const FleetMessage& m) {
    inbox_.push_back(FormatFleetMessage(m));
  }
  // Delivers any text as if published (for hostile-writer tests).
  void DeliverRaw(std::string text) { inbox_.push_back(std::move(text)); }

 private:
  absl::Status Check() {
    if (!r_->up || !connected_) {
      return absl::UnavailableError("connection lost");
    }
    return absl::OkStatus();
  }
  FakeRedis* r_;
  bool connected_ = false;
  std::deque<std::string> inbox_;
};

inline std::shared_ptr<const PolicySet> Policies() {
  auto set = std::make_shared<PolicySet>();
  auto p = std::make_shared<Policy>();
  p->cooldown.base = absl::Seconds(10);
  p->cooldown.max = absl::Seconds(80);
  p->cooldown.jitter = 0;
  p->failure_rate.threshold = 0;
  p->probe.lease = absl::Seconds(5);
  // Every local trip is published at once: these tests are about how
  // states travel. Quorum tests set their own (QuorumPolicies).
  p->fleet.quorum = 1;
  set->defaults = p;
  return set;
}

// One sidecar: its own registry, clock and FleetSync.
struct Sidecar {
  Sidecar(std::string id, FakeRedis* redis, const absl::Time* wall,
          std::function<void(FleetOptions*)> tune = nullptr,
          std::shared_ptr<const PolicySet> policies = Policies())
      : registry(std::move(policies), &clock, 0, &NoJitter) {
    auto s = std::make_unique<FakeStore>(redis);
    store = s.get();
    FleetOptions o;
    o.id = std::move(id);
    o.wall_now = [wall] { return *wall; };
    if (tune) tune(&o);
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

}  // namespace fleet_testing
}  // namespace breakerd

#endif  // BREAKERD_TESTS_FLEET_FLEET_FAKES_H_

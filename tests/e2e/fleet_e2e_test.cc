// Fleet mode and restart safety end to end: real breakerd processes sharing
// a real redis-server (started here on a free loopback port), over real
// sockets. Waits are bounded polls; cooldowns and leases are short.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "breakerd/v1/breaker.grpc.pb.h"
#include "grpcpp/client_context.h"
#include "gtest/gtest.h"
#include "tests/e2e/breakerd_process.h"
#include "tests/e2e/fleet_harness.h"

namespace breakerd {
namespace {

TEST_F(FleetTest, OneSidecarOpensAndTheOthersRefuseWithin500ms) {
  for (int i = 0; i < 3; ++i) StartSidecar();
  const std::string dep = "long/provider";
  // The others have used the dependency, and seen no failure.
  for (int i = 1; i < 3; ++i) Succeed(i, dep);
  Trip(0, dep);
  const absl::Time opened = absl::Now();
  for (int i = 1; i < 3; ++i) {
    ASSERT_TRUE(WaitUntil(
        [&] {
          Acquired a = Acquire(stubs_[i].get(), dep);
          return a.status.ok() && !a.response.allowed();
        },
        absl::Milliseconds(500)))
        << "sidecar " << i << " still allows after "
        << absl::FormatDuration(absl::Now() - opened);
    std::optional<v1::BreakerStatus> s = GetState(stubs_[i].get(), dep);
    ASSERT_TRUE(s.has_value());
    EXPECT_EQ(s->state(), v1::STATE_OPEN);
    EXPECT_EQ(s->window_failures(), 0u) << "never saw a failure itself";
    EXPECT_GT(s->retry_after().seconds(), 20);
  }
  // A sidecar that starts now reads the fleet's open state from Redis.
  StartSidecar();
  EXPECT_TRUE(WaitUntil(
      [&] { return StateOf(stubs_[3].get(), dep) == v1::STATE_OPEN; }));
}

TEST_F(FleetTest, ExactlyOneProbeForTheFleetAndItsSuccessClosesAll) {
  // 90 callers load the machine: a Redis round trip slower than the default
  // 50 ms timeout would (rightly) let that sidecar probe on its own, which
  // is the Redis-trouble test's subject, not this one's.
  for (int i = 0; i < 3; ++i) StartSidecar({"--redis-timeout=1s"});
  const std::string dep = "lease/probe";
  Trip(0, dep);
  for (int i = 1; i < 3; ++i) {
    ASSERT_TRUE(WaitUntil(
        [&] { return StateOf(stubs_[i].get(), dep) == v1::STATE_OPEN; }));
  }
  // 3 sidecars x 30 callers, from just before the cooldown ends until well
  // after: only one probe may be granted across the fleet.
  std::atomic<int> probes{0};
  std::mutex mu;
  int prober = -1;
  uint64_t probe_permit = 0;
  const absl::Time until = absl::Now() + absl::Milliseconds(2500);
  std::vector<std::thread> callers;
  for (int i = 0; i < 3; ++i) {
    for (int c = 0; c < 30; ++c) {
      callers.emplace_back([&, i, c] {
        auto stub = v1::Breaker::NewStub(sidecars_[i]->Channel(c));
        while (absl::Now() < until) {
          Acquired a = Acquire(stub.get(), dep);
          if (a.status.ok() && a.response.probe()) {
            probes.fetch_add(1);
            std::lock_guard<std::mutex> lock(mu);
            prober = i;
            probe_permit = a.response.permit();
          }
          absl::SleepFor(absl::Milliseconds(10));
        }
      });
    }
  }
  for (std::thread& t : callers) t.join();
  ASSERT_EQ(probes.load(), 1) << "probes granted across the fleet";
  ASSERT_TRUE(
      Report(stubs_[prober].get(), dep, probe_permit, v1::OUTCOME_SUCCESS)
          .ok());
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(WaitUntil([&] {
      return StateOf(stubs_[i].get(), dep) == v1::STATE_CLOSED;
    })) << "sidecar "
        << i;
  }
}

TEST_F(FleetTest, AnotherSidecarProbesAfterTheProberDies) {
  for (int i = 0; i < 3; ++i) StartSidecar();
  const std::string dep = "fleet/dead-prober";
  Trip(0, dep);
  for (int i = 1; i < 3; ++i) {
    ASSERT_TRUE(WaitUntil(
        [&] { return StateOf(stubs_[i].get(), dep) == v1::STATE_OPEN; }));
  }
  // Sidecar 0 gets the probe and dies without reporting.
  ASSERT_TRUE(WaitUntil([&] {
    return Acquire(stubs_[0].get(), dep).response.probe();
  })) << sidecars_[0]->Log();
  ASSERT_TRUE(sidecars_[0]->Signal(SIGKILL));
  // Until the 1 s lease lapses, nobody else probes; then one does.
  const absl::Time killed = absl::Now();
  int winner = -1;
  ASSERT_TRUE(WaitUntil([&] {
    for (int i = 1; i < 3; ++i) {
      if (Acquire(stubs_[i].get(), dep).response.probe()) {
        winner = i;
        return true;
      }
    }
    return false;
  }));
  EXPECT_GE(absl::Now() - killed, absl::Milliseconds(500))
      << "the dead prober's lease must be waited out";
  EXPECT_NE(winner, -1);
}

TEST_F(FleetTest, RedisDiesUnderLoadSidecarsBreakLocallyThenRejoin) {
  for (int i = 0; i < 3; ++i) StartSidecar();
  // Load on every sidecar: each Acquire must succeed within its budget.
  std::atomic<bool> stop{false};
  std::atomic<int> failed{0}, calls{0};
  std::vector<std::thread> load;
  for (int i = 0; i < 3; ++i) {
    load.emplace_back([&, i] {
      auto stub = v1::Breaker::NewStub(sidecars_[i]->Channel(100 + i));
      int n = 0;
      while (!stop.load()) {
        const std::string dep = absl::StrCat("load/dep-", n++ % 20);
        // The budget allows for a sanitizer build's slowdown on a loaded
        // machine; 250 ms is still far from a hung Redis call.
        Acquired a = Acquire(stub.get(), dep,
                             absl::Milliseconds(kSanitizerBuild ? 1000 : 250));
        calls.fetch_add(1);
        if (!a.status.ok()) {
          failed.fetch_add(1);
          continue;
        }
        if (a.response.allowed()) {
          Report(stub.get(), dep, a.response.permit(), v1::OUTCOME_SUCCESS);
        }
      }
    });
  }
  absl::SleepFor(absl::Milliseconds(300));
  redis_->Kill();
  for (auto& p : sidecars_) {
    BreakerdProcess* proc = p.get();
    EXPECT_TRUE(WaitUntil([proc] { return FleetConnected(proc) == 0; }))
        << proc->Log();
  }
  // Each sidecar still breaks on its own.
  Trip(1, "local/while-redis-down");
  EXPECT_EQ(StateOf(stubs_[2].get(), "local/while-redis-down"),
            v1::STATE_UNSPECIFIED)
      << "not propagated (no Redis), not created elsewhere";
  absl::SleepFor(absl::Milliseconds(500));

  ASSERT_TRUE(redis_->Start(redis_->port()));
  for (auto& p : sidecars_) {
    BreakerdProcess* proc = p.get();
    EXPECT_TRUE(WaitUntil([proc] { return FleetConnected(proc) == 1; }))
        << proc->Log();
  }
  stop.store(true);
  for (std::thread& t : load) t.join();
  EXPECT_EQ(failed.load(), 0) << "of " << calls.load() << " Acquires";
  EXPECT_GT(calls.load(), 100);
  for (auto& p : sidecars_) {
    EXPECT_EQ(p->CountInLog("\"event\":\"fleet_disconnected\""), 1)
        << "logged once per change";
  }
  // After the rejoin, the fleet works again: verdicts...
  Trip(0, "long/after-rejoin");
  EXPECT_TRUE(WaitUntil([&] {
    return StateOf(stubs_[2].get(), "long/after-rejoin") == v1::STATE_OPEN;
  }));
  // ...and windows: 4 calls with 2 failures each reach nobody's min_calls
  // (12), the fleet's 12 calls at 50 % open all three.
  const std::string spread = "spread/after-rejoin";
  for (int i = 0; i < 3; ++i) {
    for (v1::Outcome o : {v1::OUTCOME_SUCCESS, v1::OUTCOME_SUCCESS,
                          v1::OUTCOME_TIMEOUT, v1::OUTCOME_TIMEOUT}) {
      Acquired a = Acquire(stubs_[i].get(), spread);
      ASSERT_TRUE(a.status.ok() && a.response.allowed());
      ASSERT_TRUE(Report(stubs_[i].get(), spread, a.response.permit(), o).ok());
    }
  }
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(WaitUntil([&] {
      return StateOf(stubs_[i].get(), spread) == v1::STATE_OPEN;
    })) << "sidecar "
        << i << " did not open on the fleet's window";
  }
}

// kConfig with "trial/*" in shadow mode (30 s cooldowns): what sidecar A
// runs while an operator tries that policy on one pod first.
constexpr char kShadowTrialConfig[] = R"(
defaults:
  consecutive_failures: 5
  failure_rate: { threshold: 0 }
  cooldown: { base: 1s, max: 4s, jitter: 0 }
  probe: { lease: 1s }
  fleet: { quorum: 1 }
policies:
  - match: "trial/*"
    mode: shadow
    cooldown: { base: 30s, max: 60s, jitter: 0 }
  - match: "long/*"
    cooldown: { base: 30s, max: 60s, jitter: 0 }
  - match: "lease/*"
    probe: { lease: 10s }
)";

// The issue's split: ForceOpen through A, Reset through A (versions 1 and
// 2), FLUSHALL, ForceOpen through A again (version 1 of an empty store). B
// used to drop it as a duplicate of version 1 and stay closed; it sees the
// store's new incarnation at its next heartbeat and reads the store again.
TEST_F(FleetTest, AFlushedStoreIsDetectedAndTheFleetStaysInStep) {
  const std::string token = scratch_.WriteFile("admin-token", kFleetAdminToken);
  for (int i = 0; i < 2; ++i) {
    StartSidecar({"--admin-token-file=" + token, "--fleet-sync-interval=50ms"});
  }
  const std::string dep = "flush/provider";
  v1::AdminResponse forced;
  ASSERT_TRUE(ForceOpen(sidecars_[0].get(), dep, &forced).ok());
  ASSERT_TRUE(WaitUntil(
      [&] { return StateOf(stubs_[1].get(), dep) == v1::STATE_FORCED_OPEN; }));
  ASSERT_TRUE(ResetBreaker(sidecars_[0].get(), dep).ok());
  ASSERT_TRUE(WaitUntil(
      [&] { return StateOf(stubs_[1].get(), dep) == v1::STATE_CLOSED; }));

  ASSERT_EQ(redis_->Command({"FLUSHALL"}), "+OK");
  ASSERT_TRUE(ForceOpen(sidecars_[0].get(), dep, &forced).ok());
  EXPECT_TRUE(WaitUntil([&] {
    return StateOf(stubs_[1].get(), dep) == v1::STATE_FORCED_OPEN;
  })) << sidecars_[1]->Log();
  EXPECT_TRUE(sidecars_[1]->WaitForLog("fleet_store_reset", kWait));
  EXPECT_GE(Sample(sidecars_[1]->Metrics(),
                   "breakerd_fleet_events_total{event=\"store_reset\"}")
                .value_or(0),
            1);
}

// Sidecar A tries "trial/*" in shadow mode, sidecar B enforces it. A's
// shadow trip stays A's: B keeps allowing for twice as long as the other
// tests give an open to arrive. A's enforcing trip of another dependency
// does reach B (the fleet works), and so does an operator's ForceOpen on A's
// shadow breaker: operator decisions are fleet-wide.
TEST_F(FleetTest, ShadowTripStaysLocalWhileEnforcedTripsAndOverridesPropagate) {
  const std::string token = scratch_.WriteFile("admin-token", kFleetAdminToken);
  StartSidecar({"--admin-token-file=" + token}, kShadowTrialConfig);  // A
  StartSidecar();                                                     // B
  v1::Breaker::Stub* a = stubs_[0].get();
  v1::Breaker::Stub* b = stubs_[1].get();
  const std::string shadow_dep = "trial/provider";
  const std::string enforced_dep = "long/provider";
  // B has used both dependencies and seen no failure.
  for (const std::string& dep : {shadow_dep, enforced_dep}) {
    Acquired got = Acquire(b, dep);
    ASSERT_TRUE(got.status.ok() && got.response.allowed()) << dep;
    ASSERT_TRUE(
        Report(b, dep, got.response.permit(), v1::OUTCOME_SUCCESS).ok());
  }

  // The control: an enforcing trip on A reaches B.
  Trip(0, enforced_dep);
  EXPECT_TRUE(WaitUntil([&] {
    Acquired got = Acquire(b, enforced_dep);
    return got.status.ok() && !got.response.allowed();
  })) << "an enforcing open on A did not reach B";

  // A's shadow breaker opens and still allows.
  Trip(0, shadow_dep);
  std::optional<v1::BreakerStatus> on_a = GetState(a, shadow_dep);
  ASSERT_TRUE(on_a.has_value());
  EXPECT_EQ(on_a->state(), v1::STATE_OPEN);
  EXPECT_EQ(on_a->mode(), "shadow");
  Acquired shadow_acquire = Acquire(a, shadow_dep);
  ASSERT_TRUE(shadow_acquire.status.ok());
  EXPECT_TRUE(shadow_acquire.response.allowed()) << "shadow mode never refuses";

  // B never refuses it.
  const absl::Time tripped = absl::Now();
  int polls = 0;
  while (absl::Now() < tripped + absl::Seconds(1)) {
    Acquired got = Acquire(b, shadow_dep);
    ASSERT_TRUE(got.status.ok());
    ASSERT_TRUE(got.response.allowed())
        << "B refuses " << absl::FormatDuration(absl::Now() - tripped)
        << " after A's shadow trip: " << got.response.DebugString();
    ASSERT_TRUE(
        Report(b, shadow_dep, got.response.permit(), v1::OUTCOME_SUCCESS).ok());
    ++polls;
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_GT(polls, 10);
  std::optional<v1::BreakerStatus> on_b = GetState(b, shadow_dep);
  ASSERT_TRUE(on_b.has_value());
  EXPECT_EQ(on_b->state(), v1::STATE_CLOSED);
  EXPECT_EQ(on_b->mode(), "enforce");

  // An operator's ForceOpen on A's shadow breaker is enforced everywhere.
  v1::AdminResponse forced;
  grpc::Status s = ForceOpen(sidecars_[0].get(), shadow_dep, &forced);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(forced.status().state(), v1::STATE_FORCED_OPEN);
  EXPECT_TRUE(WaitUntil([&] {
    Acquired got = Acquire(b, shadow_dep);
    return got.status.ok() && !got.response.allowed() &&
           got.response.reason() == v1::REJECT_REASON_FORCED_OPEN;
  })) << "A's ForceOpen did not reach B";
  EXPECT_EQ(StateOf(b, shadow_dep), v1::STATE_FORCED_OPEN);
}

TEST_F(FleetTest, AHostileWriterCannotGrowSidecarsNorSilenceADependency) {
  for (int i = 0; i < 2; ++i) StartSidecar();
  const std::string dep = "hostile/dep";
  Trip(0, dep);  // 1 s cooldown
  ASSERT_TRUE(WaitUntil(
      [&] { return StateOf(stubs_[1].get(), dep) == v1::STATE_OPEN; }));
  // Version keys expire with their state: one-off names leave nothing.
  const std::string ttl =
      redis_->Command({"TTL", absl::StrCat("breakerd:{", dep, "}:version")});
  ASSERT_TRUE(absl::StartsWith(ttl, ":")) << ttl;
  EXPECT_GT(std::stoll(ttl.substr(1)), 0) << "TTL " << ttl;
  // Whoever can PUBLISH on the channel: megabyte names, and versions that
  // would make every real message look old.
  const std::string channel = "breakerd:transitions";
  const std::string huge(1 << 20, 'x');
  for (int i = 0; i < 20; ++i) {
    ASSERT_EQ(
        redis_->Command(
            {"PUBLISH", channel,
             absl::StrCat(i + 1, " evil open 1800000000000 0 ", huge, i)}),
        ":2");
  }
  for (const char* version : {"18446744073709551615", "9223372036854775807"}) {
    ASSERT_EQ(redis_->Command({"PUBLISH", channel,
                               absl::StrCat(version, " evil reset 0 0 ", dep)}),
              ":2");
  }
  for (auto& p : sidecars_) {
    EXPECT_TRUE(p->WaitForLog("fleet_message_refused", kWait));
    // Refusals are logged briefly and rate-limited: not 20 MB of names.
    EXPECT_LT(p->Log().size(), 100'000u);
    EXPECT_EQ(p->CountInLog(huge.substr(0, 100)), 0);
  }
  // The forged resets changed nothing, and the fleet still hears its own:
  // sidecar 0's probe closes sidecar 1.
  uint64_t probe = 0;
  ASSERT_TRUE(WaitUntil([&] {
    Acquired a = Acquire(stubs_[0].get(), dep);
    probe = a.response.permit();
    return a.response.probe();
  })) << "no probe: a forged reset closed the breaker";
  ASSERT_TRUE(Report(stubs_[0].get(), dep, probe, v1::OUTCOME_SUCCESS).ok());
  EXPECT_TRUE(WaitUntil([&] {
    return StateOf(stubs_[1].get(), dep) == v1::STATE_CLOSED;
  })) << "a forged version silenced the dependency";
}

TEST_F(FleetTest, ClusterOfThreePrimaries) {
  // Three cluster-mode nodes (the fixture's single Redis is not used).
  std::vector<std::unique_ptr<RedisServer>> nodes;
  std::vector<std::string> create = {"/usr/bin/redis-cli", "--cluster",
                                     "create"};
  for (int i = 0; i < 3; ++i) {
    nodes.push_back(std::make_unique<RedisServer>(scratch_.dir()));
    const int port = ClusterPort();
    ASSERT_TRUE(nodes.back()->Start(
        port, {"--cluster-enabled", "yes", "--cluster-config-file",
               absl::StrCat(scratch_.dir(), "/nodes-", port, ".conf")}));
    create.push_back(nodes.back()->address());
  }
  create.insert(create.end(), {"--cluster-replicas", "0", "--cluster-yes"});
  const std::string log = scratch_.dir() + "/cluster-create.log";
  ASSERT_TRUE(RunTool(create, log));
  const std::string info = scratch_.dir() + "/cluster-info.log";
  ASSERT_TRUE(WaitUntil([&] {
    if (!RunTool({"/usr/bin/redis-cli", "-p", std::to_string(nodes[0]->port()),
                  "cluster", "info"},
                 info)) {
      return false;
    }
    std::ifstream in(info);
    std::stringstream text;
    text << in.rdbuf();
    return absl::StrContains(text.str(), "cluster_state:ok");
  }));

  // Two sidecars, each seeded with a different node.
  redis_ = std::move(nodes[0]);
  StartSidecar();
  auto second = std::move(nodes[1]);
  std::swap(redis_, second);
  StartSidecar();
  std::swap(redis_, second);
  // Ten dependencies land on all three primaries' slots; each opened on
  // sidecar 0 opens on sidecar 1.
  for (int d = 0; d < 10; ++d) Trip(0, absl::StrCat("long/cluster-", d));
  for (int d = 0; d < 10; ++d) {
    const std::string dep = absl::StrCat("long/cluster-", d);
    EXPECT_TRUE(WaitUntil([&] {
      return StateOf(stubs_[1].get(), dep) == v1::STATE_OPEN;
    })) << dep;
  }
  // A sidecar joining now reads all ten from every primary.
  StartSidecar();
  for (int d = 0; d < 10; ++d) {
    const std::string dep = absl::StrCat("long/cluster-", d);
    EXPECT_TRUE(WaitUntil([&] {
      return StateOf(stubs_[2].get(), dep) == v1::STATE_OPEN;
    })) << dep;
  }
}

TEST_F(FleetTest, AReplicaIsRefusedAsTheFleetStore) {
  RedisServer replica(scratch_.dir());
  ASSERT_TRUE(replica.Start(
      0, {"--replicaof", "127.0.0.1", std::to_string(redis_->port())}));
  auto proc = std::make_unique<BreakerdProcess>();
  ASSERT_TRUE(proc->Start({"--redis=" + replica.address()}));
  ASSERT_TRUE(proc->WaitForLog("not a primary", kWait)) << proc->Log();
  EXPECT_EQ(FleetConnected(proc.get()), 0);
  // Still a working breaker, on its own.
  auto stub = proc->BreakerStub();
  EXPECT_TRUE(Acquire(stub.get(), "replica/dep").response.allowed());
}

// breakerd_fleet_members counts the sidecars that heartbeat (by Redis's
// clock): three, then two once one is killed without a goodbye.
TEST_F(FleetTest, MembersCountTheLiveSidecars) {
  for (int i = 0; i < 3; ++i) StartSidecar({"--fleet-sync-interval=50ms"});
  auto members = [](BreakerdProcess* p) {
    return Sample(p->Metrics(), "breakerd_fleet_members").value_or(-1);
  };
  for (auto& p : sidecars_) {
    BreakerdProcess* proc = p.get();
    EXPECT_TRUE(WaitUntil([&] { return members(proc) == 3; })) << members(proc);
  }
  kill(sidecars_[2]->pid(), SIGKILL);
  for (int i = 0; i < 2; ++i) {
    BreakerdProcess* proc = sidecars_[i].get();
    EXPECT_TRUE(WaitUntil([&] { return members(proc) == 2; })) << members(proc);
  }
  EXPECT_EQ(RedisCli(redis_->port(), "ZCARD breakerd:{members}:heartbeats"),
            "2\n");
}

// The ACL that SECURITY.md gives a fleet: its own user, only its prefix's
// keys and channels, nothing dangerous but the INFO and ROLE it asks at
// connect (and the CLUSTER reads of a Cluster).
const std::vector<std::string> kFleetAcl = {"on",
                                            ">fleet-pw-7d2c",
                                            "resetkeys",
                                            "~breakerd:*",
                                            "resetchannels",
                                            "&breakerd:*",
                                            "+@all",
                                            "-@dangerous",
                                            "+info",
                                            "+role",
                                            "+cluster|info",
                                            "+cluster|nodes",
                                            "+cluster|slots"};

// Restarts the fleet's Redis with the default user off and the fleet's
// user ("fleet", password fleet-pw-7d2c) as kFleetAcl says.
::testing::AssertionResult RestartRedisWithTheFleetAcl(RedisServer* redis) {
  redis->Kill();
  std::vector<std::string> args = {"--user", "default", "off", "--user",
                                   "fleet"};
  args.insert(args.end(), kFleetAcl.begin(), kFleetAcl.end());
  return redis->Start(0, args);
}

// --redis-username: the fleet runs as its own ACL user with the default
// user off, and that user can touch nothing outside its prefix.
TEST_F(FleetTest, AnAclUserLimitedToItsPrefixRunsTheFleet) {
  ASSERT_TRUE(RestartRedisWithTheFleetAcl(redis_.get()));
  const std::string password =
      scratch_.WriteFile("redis-password", "fleet-pw-7d2c\n");
  for (int i = 0; i < 2; ++i) {
    StartSidecar(
        {"--redis-username=fleet", "--redis-password-file=" + password});
  }
  const std::string dep = "long/acl";
  Trip(0, dep);
  EXPECT_TRUE(WaitUntil([&] {
    return StateOf(stubs_[1].get(), dep) == v1::STATE_OPEN;
  })) << sidecars_[1]->Log();
  EXPECT_TRUE(absl::StrContains(sidecars_[0]->Log(), "\"user\":\"fleet\""));

  const int port = redis_->port();
  EXPECT_TRUE(absl::StrContains(RedisCli(port, "PING"), "NOAUTH"));
  const std::string as_fleet =
      "--user fleet --pass fleet-pw-7d2c --no-auth-warning ";
  EXPECT_TRUE(absl::StrContains(
      RedisCli(port, as_fleet + "SET breakerd:scratch 1"), "OK"));
  EXPECT_TRUE(absl::StrContains(RedisCli(port, as_fleet + "SET other:key 1"),
                                "NOPERM"));
  EXPECT_TRUE(absl::StrContains(
      RedisCli(port, as_fleet + "PUBLISH other:transitions x"), "NOPERM"));
  EXPECT_TRUE(
      absl::StrContains(RedisCli(port, as_fleet + "FLUSHALL"), "NOPERM"));
}

// A wrong password for the ACL user: breakerd runs on its own, says why,
// and never logs the password.
TEST_F(FleetTest, AWrongAclPasswordKeepsTheSidecarLocal) {
  ASSERT_TRUE(RestartRedisWithTheFleetAcl(redis_.get()));
  auto proc = std::make_unique<BreakerdProcess>();
  const std::string password =
      proc->WriteFile("redis-password", "not-the-pw-31e9\n");
  ASSERT_TRUE(
      proc->Start({"--redis=" + redis_->address(), "--redis-username=fleet",
                   "--redis-password-file=" + password}));
  ASSERT_TRUE(proc->WaitForLog("WRONGPASS", kWait)) << proc->Log();
  EXPECT_EQ(FleetConnected(proc.get()), 0);
  EXPECT_FALSE(absl::StrContains(proc->Log(), "not-the-pw-31e9"));
  auto stub = proc->BreakerStub();
  EXPECT_TRUE(Acquire(stub.get(), "acl/dep").response.allowed());
}

// Pub/sub channels are server-wide; the channel names the database, so a
// trip in one database's fleet does not open another's.
TEST_F(FleetTest, FleetsInDifferentDatabasesNeverHearEachOther) {
  StartSidecar({"--redis-db=1"});
  StartSidecar({"--redis-db=2"});
  StartSidecar({"--redis-db=1"});
  const std::string dep = "long/db";
  for (int i : {1, 2}) Succeed(i, dep);
  Trip(0, dep);
  ASSERT_TRUE(WaitUntil([&] {
    return StateOf(stubs_[2].get(), dep) == v1::STATE_OPEN;
  })) << "the same database's sidecar did not follow\n"
      << sidecars_[2]->Log();
  // Each database's sidecars listen on their own channel (redis-cli prints
  // each channel, then its subscriber count): the publish that reached
  // db 1's sidecar went nowhere near db 2's.
  EXPECT_EQ(RedisCli(redis_->port(),
                     "PUBSUB NUMSUB breakerd:transitions:db1 "
                     "breakerd:transitions:db2 breakerd:transitions"),
            "breakerd:transitions:db1\n2\nbreakerd:transitions:db2\n1\n"
            "breakerd:transitions\n0\n");
  EXPECT_EQ(StateOf(stubs_[1].get(), dep), v1::STATE_CLOSED)
      << sidecars_[1]->Log();
  EXPECT_TRUE(Acquire(stubs_[1].get(), dep).response.allowed());
}

// --redis-username needs the password file (AUTH takes both): exit 2,
// naming the flag.
TEST(FleetFlagsTest, AUsernameWithoutAPasswordFileIsAConfigError) {
  BreakerdProcess proc;
  EXPECT_FALSE(
      proc.Start({"--redis=127.0.0.1:6379", "--redis-username=fleet"}));
  EXPECT_EQ(proc.WaitExit(absl::Seconds(10)), 2) << proc.Log();
  EXPECT_TRUE(absl::StrContains(proc.Log(),
                                "redis-username: needs "
                                "--redis-password-file"))
      << proc.Log();
}

// --- restart safety (no Redis needed, but harmless) ------------------------

TEST(StateFileE2eTest, RestartedSidecarComesBackOpenWithItsEscalation) {
  BreakerdProcess scratch;
  const std::string state = scratch.dir() + "/state";
  const std::string dep = "restart/dep";
  {
    BreakerdProcess proc;
    ASSERT_TRUE(proc.Start({"--config=" + proc.WriteFile("c.yaml", kConfig),
                            "--state-file=" + state}));
    auto stub = proc.BreakerStub();
    for (int n = 0; n < 5; ++n) {
      Acquired a = Acquire(stub.get(), dep);
      Report(stub.get(), dep, a.response.permit(), v1::OUTCOME_TIMEOUT);
    }
    // The 1 s cooldown ends; the probe fails: open again, escalation 1.
    uint64_t probe = 0;
    ASSERT_TRUE(WaitUntil([&] {
      Acquired a = Acquire(stub.get(), dep);
      probe = a.response.permit();
      return a.response.probe();
    }));
    Report(stub.get(), dep, probe, v1::OUTCOME_SERVER_ERROR);
    std::optional<v1::BreakerStatus> s = GetState(stub.get(), dep);
    ASSERT_EQ(s->state(), v1::STATE_OPEN);
    ASSERT_EQ(s->escalation_level(), 1u);
    ASSERT_TRUE(proc.Signal(SIGTERM));
    ASSERT_EQ(proc.WaitExit(kWait), 0);
    EXPECT_EQ(proc.CountInLog("\"event\":\"state_saved\""), 1);
  }
  BreakerdProcess again;
  ASSERT_TRUE(again.Start({"--config=" + again.WriteFile("c.yaml", kConfig),
                           "--state-file=" + state}));
  auto stub = again.BreakerStub();
  std::optional<v1::BreakerStatus> s = GetState(stub.get(), dep);
  ASSERT_TRUE(s.has_value()) << again.Log();
  EXPECT_EQ(s->escalation_level(), 1u);
  EXPECT_TRUE(s->state() == v1::STATE_OPEN ||
              s->state() == v1::STATE_HALF_OPEN);
  EXPECT_EQ(again.CountInLog("\"event\":\"state_restored\""), 1);
  // A failed probe now doubles from the saved level: 1 s * 2^2 = 4 s (max).
  uint64_t probe = 0;
  ASSERT_TRUE(WaitUntil([&] {
    Acquired a = Acquire(stub.get(), dep);
    probe = a.response.permit();
    return a.response.probe();
  }));
  Report(stub.get(), dep, probe, v1::OUTCOME_SERVER_ERROR);
  s = GetState(stub.get(), dep);
  EXPECT_EQ(s->escalation_level(), 2u);
  EXPECT_GT(s->retry_after().seconds(), 2);
}

TEST(StateFileE2eTest, CorruptStateFileIsLoggedAndSkipped) {
  BreakerdProcess proc;
  const std::string state =
      proc.WriteFile("state", "breakerd-state 1\nrestart/dep opne 0 0\n");
  ASSERT_TRUE(proc.Start({"--state-file=" + state}));
  EXPECT_EQ(proc.CountInLog("\"event\":\"state_file_skipped\""), 1);
  EXPECT_GE(proc.CountInLog("line 2"), 1) << proc.Log();
  auto stub = proc.BreakerStub();
  EXPECT_TRUE(Acquire(stub.get(), "restart/dep").response.allowed());
}

}  // namespace
}  // namespace breakerd

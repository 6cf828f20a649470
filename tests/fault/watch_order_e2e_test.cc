// Watch against the real breakerd binary: each breaker's events arrive in
// transition order (generations never go back on a stream) while Reports
// race Admin calls, and every event carries the breaker's mode.
//
// Every wait is a bounded poll.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "breakerd/v1/breaker.grpc.pb.h"
#include "grpc/grpc.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"
#include "gtest/gtest.h"
#include "server/engine/mutex.h"
#include "tests/e2e/breakerd_process.h"
#include "tests/e2e/watch_notices.h"
#include "tests/fault/fault_util.h"

namespace breakerd {
namespace fault {
namespace {

// --- Watch order under racing transitions ------------------------------------

// A Watch stream read on a thread of its own, on its own connection: every
// event is kept in the order it arrived.
class WatchRecorder {
 public:
  WatchRecorder(std::shared_ptr<grpc::Channel> channel,
                const std::vector<std::string>& names)
      : stub_(v1::Breaker::NewStub(std::move(channel))),
        call_(StartWatch(stub_.get(), names, absl::Seconds(120))),
        thread_([this] { Read(); }) {}

  ~WatchRecorder() {
    call_->ctx.TryCancel();
    thread_.join();
  }

  WatchRecorder(const WatchRecorder&) = delete;
  WatchRecorder& operator=(const WatchRecorder&) = delete;

  std::vector<v1::StateChange> events() const {
    MutexLock lock(&mu_);
    return events_;
  }

  // Waits until at least `n` events have arrived.
  bool WaitForEvents(size_t n,
                     absl::Duration timeout = absl::Seconds(5)) const {
    return WaitUntil(
        [&] {
          MutexLock lock(&mu_);
          return events_.size() >= n;
        },
        timeout);
  }

  // How the stream ended; nullopt while it is open.
  std::optional<grpc::Status> end() const {
    MutexLock lock(&mu_);
    return end_;
  }

 private:
  void Read() {
    v1::StateChange change;
    while (call_->reader->Read(&change)) {
      // The notices for local decisions (tests/e2e/local_decisions_e2e_test)
      // are not what these tests follow.
      if (IsNotice(change)) continue;
      MutexLock lock(&mu_);
      events_.push_back(change);
    }
    grpc::Status status = call_->reader->Finish();
    MutexLock lock(&mu_);
    end_ = std::move(status);
  }

  std::unique_ptr<v1::Breaker::Stub> stub_;
  std::unique_ptr<WatchCall> call_;
  mutable Mutex mu_;
  std::vector<v1::StateChange> events_ ABSL_GUARDED_BY(mu_);
  std::optional<grpc::Status> end_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;  // last: starts once the members above exist
};

// What one stream showed: each dependency's last event, and every place a
// dependency's generation went back.
struct StreamOrder {
  std::map<std::string, v1::StateChange> last;
  std::vector<std::string> backwards;
};

StreamOrder OrderOf(const std::vector<v1::StateChange>& events) {
  StreamOrder order;
  for (size_t i = 0; i < events.size(); ++i) {
    const v1::StateChange& e = events[i];
    auto it = order.last.find(e.dependency());
    if (it != order.last.end() && e.generation() < it->second.generation()) {
      order.backwards.push_back(absl::StrCat(
          "event ", i, ": ", e.dependency(), " generation ",
          it->second.generation(), " (", v1::State_Name(it->second.state()),
          ") then ", e.generation(), " (", v1::State_Name(e.state()), ")"));
    }
    order.last[e.dependency()] = e;
  }
  return order;
}

// True if a watcher holding `event` agrees with the server's `status`: the
// same generation and state. HALF_OPEN is derived from the clock, so an OPEN
// event whose cooldown has since run out agrees with HALF_OPEN at the same
// generation (the client derives it from retry_after).
bool Agrees(const v1::StateChange& event, const v1::BreakerStatus& status) {
  if (event.generation() != status.generation()) return false;
  if (event.state() == status.state()) return true;
  return event.state() == v1::STATE_OPEN &&
         status.state() == v1::STATE_HALF_OPEN;
}

// Reporters trip breakers (2 failures, 20 ms cooldowns, failed probes) while
// operators force them open, closed and reset them, all on the same three
// dependencies and on connections of their own, with three Watch streams
// open throughout (all dependencies, and two with names). On every stream a
// dependency's generation never goes back, and once the racing stops each
// stream's last event for each dependency agrees with GetState: a watcher
// never keeps refusing a breaker the server has closed.
TEST_F(FaultE2eTest, WatchStreamsKeepEachBreakersOrderWhileReportsRaceAdmin) {
  constexpr int kTransitions = 900;
  constexpr absl::Duration kMaxRacing = absl::Seconds(8);
  constexpr int kReporters = 4;
  constexpr int kOperators = 2;
  const std::string config = proc_.WriteFile("config.yaml", R"(defaults:
  consecutive_failures: 2
  failure_rate: { threshold: 0 }
  cooldown: { base: 20ms, max: 20ms, jitter: 0 }
  probe: { lease: 1s }
)");
  ASSERT_TRUE(proc_.Start({"--config=" + config,
                           "--admin-token-file=" + WriteAdminToken(),
                           "--watch-queue=100000"}));
  const std::vector<std::string> deps = {"race/a", "race/b", "race/c"};
  auto stub = proc_.BreakerStub();
  for (const std::string& dep : deps) {
    ASSERT_TRUE(Acquire(stub.get(), dep).response.allowed());
  }

  std::vector<std::unique_ptr<WatchRecorder>> streams;
  const std::vector<std::vector<std::string>> stream_names = {
      {}, {"race/a", "race/b", "race/c"}, {"race/b"}};
  for (size_t i = 0; i < stream_names.size(); ++i) {
    streams.push_back(std::make_unique<WatchRecorder>(
        proc_.Channel(static_cast<int>(i)), stream_names[i]));
  }
  for (size_t i = 0; i < streams.size(); ++i) {
    const size_t initial =
        stream_names[i].empty() ? deps.size() : stream_names[i].size();
    ASSERT_TRUE(streams[i]->WaitForEvents(initial))
        << "stream " << i << " did not send its initial states";
  }

  // Every racer's connection is up before the race: a connection attempt
  // that fails leaves its channel failing each RPC at once for its backoff,
  // which is not what this test is about (CI saw 23,846 such errors once).
  std::vector<std::shared_ptr<grpc::Channel>> racer_channels;
  for (int id : {10, 11, 12, 13, 20, 21}) {
    racer_channels.push_back(proc_.Channel(id));
    ASSERT_TRUE(racer_channels.back()->WaitForConnected(
        absl::ToChronoTime(absl::Now() + absl::Seconds(10))))
        << "racer channel " << id << " did not connect";
  }

  std::atomic<bool> stop{false};
  std::atomic<int> rpc_errors{0};
  Mutex first_error_mu;
  std::string first_error;  // guarded by first_error_mu
  auto count_error = [&](const std::string& what, const grpc::Status& status) {
    if (rpc_errors.fetch_add(1) == 0) {
      MutexLock lock(&first_error_mu);
      first_error = what + ": " + Describe(status);
    }
  };
  std::vector<std::thread> racers;
  struct StopRacers {
    std::atomic<bool>& stop;
    std::vector<std::thread>& threads;
    ~StopRacers() {
      stop.store(true);
      for (std::thread& t : threads) {
        if (t.joinable()) t.join();
      }
    }
  } stop_racers{stop, racers};
  for (int r = 0; r < kReporters; ++r) {
    racers.emplace_back([&, r] {
      auto racer = v1::Breaker::NewStub(racer_channels[r]);
      for (size_t n = r; !stop.load(); ++n) {
        const std::string& dep = deps[n % deps.size()];
        Result<v1::AcquireResponse> a = Acquire(racer.get(), dep);
        if (!a.status.ok()) {
          count_error("Acquire", a.status);
          continue;
        }
        if (!a.response.allowed()) continue;
        Result<v1::ReportResponse> reported =
            Report(racer.get(), dep, a.response.permit(), v1::OUTCOME_TIMEOUT);
        if (!reported.status.ok()) count_error("Report", reported.status);
      }
    });
  }
  const std::string bearer = BearerToken(kAdminToken);
  for (int o = 0; o < kOperators; ++o) {
    racers.emplace_back([&, o] {
      auto admin = v1::Admin::NewStub(racer_channels[kReporters + o]);
      std::mt19937 random(1234 + o);
      while (!stop.load()) {
        const std::string& dep = deps[random() % deps.size()];
        // Mostly resets, so the reporters keep tripping what was reset.
        const uint32_t pick = random() % 4;
        const AdminOp op = pick == 0   ? AdminOp::kForceOpen
                           : pick == 1 ? AdminOp::kForceClose
                                       : AdminOp::kReset;
        Result<v1::AdminResponse> answered =
            Admin(admin.get(), op, dep, bearer);
        if (!answered.status.ok()) count_error("Admin", answered.status);
      }
    });
  }
  const absl::Time started = absl::Now();
  const size_t enough = deps.size() + kTransitions;
  WaitUntil([&] { return streams[0]->events().size() >= enough; }, kMaxRacing);
  stop.store(true);
  for (std::thread& t : racers) t.join();
  const absl::Duration raced = absl::Now() - started;
  EXPECT_EQ(rpc_errors.load(), 0) << "the first: " << [&] {
    MutexLock lock(&first_error_mu);
    return first_error;
  }();

  // Whether stream i asked for `dep` (no names: all).
  auto watches = [&](size_t i, const std::string& dep) {
    const std::vector<std::string>& names = stream_names[i];
    return names.empty() ||
           std::find(names.begin(), names.end(), dep) != names.end();
  };
  // Quiet now: wait (bounded) until every stream has caught up with the
  // server's generation of every dependency.
  std::map<std::string, v1::BreakerStatus> server;
  auto caught_up = [&] {
    for (const std::string& dep : deps) {
      Result<v1::BreakerStatus> s = GetState(stub.get(), dep);
      if (!s.status.ok()) return false;
      server[dep] = s.response;
    }
    for (size_t i = 0; i < streams.size(); ++i) {
      StreamOrder order = OrderOf(streams[i]->events());
      for (const std::string& dep : deps) {
        if (!watches(i, dep)) continue;
        auto it = order.last.find(dep);
        if (it == order.last.end() ||
            it->second.generation() < server[dep].generation()) {
          return false;
        }
      }
    }
    return true;
  };
  WaitUntil(caught_up, absl::Seconds(5));

  const std::vector<v1::StateChange> all = streams[0]->events();
  const size_t transitions = all.size() - deps.size();
  std::map<std::string, int> by_reason;
  for (size_t i = deps.size(); i < all.size(); ++i)
    ++by_reason[all[i].reason()];
  std::cout << "[ figures  ] " << transitions << " transitions in " << raced
            << ": " << absl::StrJoin(by_reason, ", ", absl::PairFormatter(" "))
            << "\n";
  EXPECT_GE(transitions, 300u) << "too few transitions to show anything";
  for (size_t i = 0; i < streams.size(); ++i) {
    SCOPED_TRACE(absl::StrCat(
        "stream ", i, " (",
        stream_names[i].empty() ? "all" : absl::StrJoin(stream_names[i], ","),
        ")"));
    EXPECT_FALSE(streams[i]->end().has_value())
        << "the stream ended: " << Describe(*streams[i]->end());
    StreamOrder order = OrderOf(streams[i]->events());
    EXPECT_EQ(order.backwards.size(), 0u)
        << "generations went back:\n"
        << absl::StrJoin(order.backwards, "\n");
    for (const std::string& dep : deps) {
      if (!watches(i, dep)) {
        EXPECT_EQ(order.last.count(dep), 0u) << dep << " was not asked for";
        continue;
      }
      auto it = order.last.find(dep);
      ASSERT_NE(it, order.last.end()) << dep;
      EXPECT_TRUE(Agrees(it->second, server[dep]))
          << dep << ": the stream's last event is "
          << v1::State_Name(it->second.state()) << " at generation "
          << it->second.generation() << ", the server says "
          << v1::State_Name(server[dep].state()) << " at generation "
          << server[dep].generation();
    }
  }
}

// --- the mode on Watch -------------------------------------------------------

// Every Watch event says whether the breaker enforces, so a client never
// refuses a shadow breaker locally: the initial state and the transitions of
// a shadow breaker say "shadow", an enforcing one's "enforce"; a reload that
// moves a breaker to shadow sends an event (reason "reload") with the new
// mode at the same generation, and a new stream's initial states carry it.
TEST_F(FaultE2eTest, WatchEventsCarryTheModeAndAReloadToShadowIsAnEvent) {
  constexpr char kConfig[] = R"(defaults:
  consecutive_failures: 2
  failure_rate: { threshold: 0 }
  cooldown: { base: 60s, jitter: 0 }
policies:
  - match: "shadow/*"
    mode: shadow
)";
  const std::string config = proc_.WriteFile("config.yaml", kConfig);
  ASSERT_TRUE(proc_.Start({"--config=" + config, "--config-poll-interval=0"}));
  auto stub = proc_.BreakerStub();
  const std::string shadow = "shadow/psp";
  const std::string enforced = "enforce/psp";

  WatchRecorder watch(proc_.Channel(1), {shadow, enforced});
  ASSERT_TRUE(watch.WaitForEvents(2));
  std::vector<v1::StateChange> events = watch.events();
  ASSERT_EQ(events.size(), 2u);
  for (const v1::StateChange& e : events) {
    EXPECT_EQ(e.reason(), "initial") << e.DebugString();
    EXPECT_EQ(e.mode(), e.dependency() == shadow ? "shadow" : "enforce")
        << e.DebugString();
  }

  ReportTimeouts(stub.get(), shadow, 2);
  ReportTimeouts(stub.get(), enforced, 2);
  ASSERT_TRUE(watch.WaitForEvents(4));
  events = watch.events();
  ASSERT_EQ(events.size(), 4u);
  EXPECT_EQ(events[2].dependency(), shadow);
  EXPECT_EQ(events[2].state(), v1::STATE_OPEN);
  EXPECT_EQ(events[2].mode(), "shadow") << events[2].DebugString();
  EXPECT_EQ(events[3].dependency(), enforced);
  EXPECT_EQ(events[3].state(), v1::STATE_OPEN);
  EXPECT_EQ(events[3].mode(), "enforce") << events[3].DebugString();
  const v1::StateChange opened = events[3];
  Result<v1::AcquireResponse> a = Acquire(stub.get(), shadow);
  ASSERT_TRUE(a.status.ok()) << Describe(a.status);
  EXPECT_TRUE(a.response.allowed()) << "shadow mode never refuses";

  proc_.WriteFile("config.yaml", absl::StrCat(kConfig, R"(  - match: "enforce/*"
    mode: shadow
)"));
  ASSERT_TRUE(proc_.Signal(SIGHUP));
  ASSERT_TRUE(watch.WaitForEvents(5)) << "no event for the mode change:\n"
                                      << LogLinesWith(proc_.Log(), "config_");
  events = watch.events();
  const v1::StateChange& reload = events[4];
  EXPECT_EQ(reload.dependency(), enforced) << reload.DebugString();
  EXPECT_EQ(reload.reason(), "reload");
  EXPECT_EQ(reload.mode(), "shadow");
  EXPECT_EQ(reload.state(), v1::STATE_OPEN) << "a reload moves no state";
  EXPECT_EQ(reload.generation(), opened.generation())
      << "a reload is not a transition";
  Result<v1::BreakerStatus> s = GetState(stub.get(), enforced);
  ASSERT_TRUE(s.status.ok()) << Describe(s.status);
  EXPECT_EQ(s.response.mode(), "shadow");
  EXPECT_EQ(s.response.generation(), opened.generation());
  a = Acquire(stub.get(), enforced);
  ASSERT_TRUE(a.status.ok()) << Describe(a.status);
  EXPECT_TRUE(a.response.allowed())
      << "now in shadow: " << a.response.DebugString();

  // A stream that starts now gets the new mode in its initial states.
  WatchRecorder later(proc_.Channel(2), {});
  ASSERT_TRUE(later.WaitForEvents(2));
  for (const v1::StateChange& e : later.events()) {
    EXPECT_EQ(e.reason(), "initial") << e.DebugString();
    EXPECT_EQ(e.mode(), "shadow") << e.DebugString();
  }
}

}  // namespace
}  // namespace fault
}  // namespace breakerd

// Input limits against the real breakerd binary: the largest request, the
// most names in one AcquireFirst or Watch, the most concurrent Watch
// streams, the dependency name rules, the breaker cap and idle eviction.
// Each limit answers INVALID_ARGUMENT or RESOURCE_EXHAUSTED with a message
// naming it, and the refused request changes nothing. Limits are set small
// (flags and config) so each test is quick.
#include <cstdlib>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "breakerd/v1/breaker.grpc.pb.h"
#include "gtest/gtest.h"
#include "tests/e2e/breakerd_process.h"
#include "tests/e2e/watch_notices.h"
#include "tests/fault/fault_util.h"

namespace breakerd {
namespace fault {
namespace {

constexpr char kAdminToken[] = "limits-admin-token-81ad";

class LimitsE2eTest : public ::testing::Test {
 protected:
  // Starts breakerd with `config_yaml` (if not empty) and `flags`, with an
  // admin token.
  ::testing::AssertionResult StartWith(const std::string& config_yaml,
                                       std::vector<std::string> flags = {}) {
    if (!config_yaml.empty()) {
      flags.push_back("--config=" +
                      proc_.WriteFile("config.yaml", config_yaml));
    }
    flags.push_back("--admin-token-file=" +
                    proc_.WriteFile("admin-token", kAdminToken));
    ::testing::AssertionResult started = proc_.Start(flags);
    if (started) {
      stub_ = proc_.BreakerStub();
      admin_ = proc_.AdminStub();
    }
    return started;
  }

  // A limit reached must not take breakerd down.
  void TearDown() override {
    if (stub_ != nullptr) {
      EXPECT_FALSE(proc_.Exited())
          << "breakerd died during the test (see its log below)";
    }
  }

  BreakerdProcess proc_;
  std::unique_ptr<v1::Breaker::Stub> stub_;
  std::unique_ptr<v1::Admin::Stub> admin_;
};

void ExpectRefused(const grpc::Status& status, grpc::StatusCode code,
                   const std::vector<std::string>& message_parts,
                   const std::string& what) {
  EXPECT_EQ(status.error_code(), code) << what << ": " << Describe(status);
  for (const std::string& part : message_parts) {
    EXPECT_TRUE(absl::StrContains(status.error_message(), part))
        << what << ": the message should name `" << part
        << "`: " << status.error_message();
  }
}

// --- message size ------------------------------------------------------------

TEST_F(LimitsE2eTest, RequestLargerThanMaxMessageBytesIsResourceExhausted) {
  ASSERT_TRUE(StartWith("", {"--max-message-bytes=4096"}));
  const std::string huge(5000, 'a');  // the size check comes before the name
  ExpectRefused(Acquire(stub_.get(), huge).status,
                grpc::StatusCode::RESOURCE_EXHAUSTED, {"4096"},
                "Acquire of 5000 bytes");
  ExpectRefused(AcquireFirst(stub_.get(), {"ok/a", huge}).status,
                grpc::StatusCode::RESOURCE_EXHAUSTED, {"4096"},
                "AcquireFirst of 5000 bytes");
  EXPECT_TRUE(BreakerNames(stub_.get()).empty());

  // Under the limit: the biggest AcquireFirst (16 names of 200 bytes, about
  // 3.3 KiB) passes.
  std::vector<std::string> names;
  for (int i = 0; i < 16; ++i) {
    names.push_back(
        absl::StrCat("n", i, "/", std::string(195, 'x')).substr(0, 200));
  }
  Result<v1::AcquireFirstResponse> ok = AcquireFirst(stub_.get(), names);
  ASSERT_TRUE(ok.status.ok()) << Describe(ok.status);
  EXPECT_TRUE(ok.response.allowed());
  EXPECT_EQ(ok.response.dependency(), names[0]);
}

// The default (64 KiB) refuses a 70 kB request and takes the largest
// legitimate one: a Watch naming 64 dependencies of 200 bytes (~13 KiB).
TEST_F(LimitsE2eTest, DefaultMaxMessageBytesIs64KiB) {
  ASSERT_TRUE(StartWith(""));
  ExpectRefused(Acquire(stub_.get(), std::string(70000, 'a')).status,
                grpc::StatusCode::RESOURCE_EXHAUSTED, {"65536"},
                "Acquire of 70000 bytes");
  std::vector<std::string> names;
  for (int i = 0; i < 64; ++i) {
    names.push_back(
        absl::StrCat("w", i, "/", std::string(195, 'y')).substr(0, 200));
  }
  std::unique_ptr<WatchCall> watch = StartWatch(stub_.get(), names);
  v1::StateChange change;
  for (int i = 0; i < 64; ++i) {
    ASSERT_TRUE(ReadChange(*watch->reader, &change))
        << "initial state " << i << ": " << Describe(watch->reader->Finish());
  }
  watch->ctx.TryCancel();
  DrainWatch(*watch);
}

// --- names per request -------------------------------------------------------

TEST_F(LimitsE2eTest, AcquireFirstTakesAtMost16Names) {
  ASSERT_TRUE(StartWith(""));
  std::vector<std::string> names;
  for (int i = 0; i < 17; ++i) names.push_back(absl::StrCat("chain/", i));
  ExpectRefused(AcquireFirst(stub_.get(), names).status,
                grpc::StatusCode::INVALID_ARGUMENT,
                {"dependencies", "at most 16"}, "AcquireFirst of 17 names");
  EXPECT_TRUE(BreakerNames(stub_.get()).empty())
      << "a refused AcquireFirst created breakers";

  names.pop_back();
  Result<v1::AcquireFirstResponse> ok = AcquireFirst(stub_.get(), names);
  ASSERT_TRUE(ok.status.ok()) << Describe(ok.status);
  EXPECT_EQ(ok.response.dependency(), "chain/0");
  EXPECT_EQ(BreakerNames(stub_.get()), std::vector<std::string>{"chain/0"});
}

TEST_F(LimitsE2eTest, WatchTakesAtMost64Names) {
  ASSERT_TRUE(StartWith(""));
  std::vector<std::string> names;
  for (int i = 0; i < 65; ++i) names.push_back(absl::StrCat("w/", i));
  std::unique_ptr<WatchCall> refused = StartWatch(stub_.get(), names);
  int messages = -1;
  ExpectRefused(DrainWatch(*refused, &messages),
                grpc::StatusCode::INVALID_ARGUMENT,
                {"dependencies", "at most 64"}, "Watch of 65 names");
  EXPECT_EQ(messages, 0);
  EXPECT_EQ(MetricValue(proc_, "breakerd_watch_streams"), 0);

  names.pop_back();
  std::unique_ptr<WatchCall> ok = StartWatch(stub_.get(), names);
  v1::StateChange change;
  for (int i = 0; i < 64; ++i) {
    ASSERT_TRUE(ReadChange(*ok->reader, &change))
        << "initial state " << i << ": " << Describe(ok->reader->Finish());
    EXPECT_EQ(change.dependency(), names[i]);
  }
  EXPECT_EQ(MetricValue(proc_, "breakerd_watch_streams"), 1);
  ok->ctx.TryCancel();
  DrainWatch(*ok);
  EXPECT_TRUE(BreakerNames(stub_.get()).empty()) << "Watch creates nothing";
}

// --- concurrent Watch streams ------------------------------------------------

TEST_F(LimitsE2eTest, WatchStreamsPastMaxWatchStreamsAreResourceExhausted) {
  ASSERT_TRUE(StartWith("", {"--max-watch-streams=3"}));
  std::vector<std::unique_ptr<WatchCall>> open;
  v1::StateChange change;
  for (int i = 0; i < 3; ++i) {
    open.push_back(StartWatch(stub_.get(), {"svc/watched"}));
    ASSERT_TRUE(ReadChange(*open.back()->reader, &change))
        << "stream " << i << ": " << Describe(open.back()->reader->Finish());
  }
  EXPECT_EQ(MetricValue(proc_, "breakerd_watch_streams"), 3);

  std::unique_ptr<WatchCall> fourth = StartWatch(stub_.get(), {"svc/watched"});
  int messages = -1;
  ExpectRefused(DrainWatch(*fourth, &messages),
                grpc::StatusCode::RESOURCE_EXHAUSTED,
                {"at most 3", "Watch streams"}, "a fourth Watch");
  EXPECT_EQ(messages, 0);
  EXPECT_EQ(MetricValue(proc_, "breakerd_watch_streams"), 3);

  // The admitted streams still work.
  ASSERT_TRUE(Admin(admin_.get(), AdminOp::kForceOpen, "svc/watched",
                    BearerToken(kAdminToken))
                  .status.ok());
  for (auto& call : open) {
    ASSERT_TRUE(ReadChange(*call->reader, &change));
    EXPECT_EQ(change.state(), v1::STATE_FORCED_OPEN);
  }

  // The limit frees when a stream ends.
  open.front()->ctx.TryCancel();
  DrainWatch(*open.front());
  open.erase(open.begin());
  ASSERT_TRUE(WaitUntil(
      [&] { return MetricValue(proc_, "breakerd_watch_streams") == 2; }));
  std::unique_ptr<WatchCall> again = StartWatch(stub_.get(), {"svc/watched"});
  ASSERT_TRUE(ReadChange(*again->reader, &change))
      << Describe(again->reader->Finish());
  EXPECT_EQ(change.state(), v1::STATE_FORCED_OPEN);
  open.push_back(std::move(again));
  for (auto& call : open) {
    call->ctx.TryCancel();
    DrainWatch(*call);
  }
}

// --- dependency names --------------------------------------------------------

// Names outside 1-200 bytes of [A-Za-z0-9._:/@-] are refused by every RPC
// that takes one, naming the field; none creates a breaker. (Acquire,
// Report and GetState with "", "a b", "x\n" and 201 bytes are also covered
// by e2e_test's BadInputIsInvalidArgumentAndChangesNothing.)
TEST_F(LimitsE2eTest, DependencyNameRulesHoldOnEveryRpc) {
  ASSERT_TRUE(StartWith(""));
  const std::string bearer = BearerToken(kAdminToken);
  const std::vector<std::string> bad = {
      "",
      std::string(201, 'a'),
      "space here",
      "tab\there",
      "semi;colon",
      "glob*",
      "query?x=1",
      "percent%20",
      "comma,x",
      "quote\"x",
      "back\\slash",
      "hash#x",
      "caf\xc3\xa9",  // UTF-8 é
      std::string("nul\0byte", 8),
  };
  for (const std::string& name : bad) {
    const std::string what = absl::StrCat("name \"", absl::CEscape(name), "\"");
    ExpectRefused(Acquire(stub_.get(), name).status,
                  grpc::StatusCode::INVALID_ARGUMENT, {"dependency"},
                  "Acquire " + what);
    ExpectRefused(AcquireFirst(stub_.get(), {"ok/first", name}).status,
                  grpc::StatusCode::INVALID_ARGUMENT, {"dependencies[1]"},
                  "AcquireFirst " + what);
    ExpectRefused(GetState(stub_.get(), name).status,
                  grpc::StatusCode::INVALID_ARGUMENT, {"dependency"},
                  "GetState " + what);
    std::unique_ptr<WatchCall> watch =
        StartWatch(stub_.get(), {"ok/first", name});
    ExpectRefused(DrainWatch(*watch), grpc::StatusCode::INVALID_ARGUMENT,
                  {"dependencies[1]"}, "Watch " + what);
    ExpectRefused(Admin(admin_.get(), AdminOp::kForceOpen, name, bearer).status,
                  grpc::StatusCode::INVALID_ARGUMENT, {"dependency"},
                  "ForceOpen " + what);
  }
  EXPECT_TRUE(BreakerNames(stub_.get()).empty())
      << "a refused request created a breaker (AcquireFirst checks every "
         "name before acquiring any)";

  // Every allowed character class, and both length bounds.
  const std::string all_classes = "AZaz09._:/@-";
  const std::string longest = std::string(199, 'b') + "Z";
  for (const std::string& name : {all_classes, longest, std::string("a")}) {
    Result<v1::AcquireResponse> a = Acquire(stub_.get(), name);
    EXPECT_TRUE(a.status.ok()) << name << ": " << Describe(a.status);
  }
  EXPECT_EQ(BreakerNames(stub_.get()).size(), 3u);
}

// A name that is not even UTF-8 cannot be parsed as a proto3 string: gRPC
// (1.51) refuses the request before breakerd sees it. It must still change
// nothing, and breakerd's stderr must stay one JSON object per line
// (`breakerd --help`), whatever a client sends.
TEST_F(LimitsE2eTest, NameThatIsNotUtf8ChangesNothingAndKeepsTheLogJson) {
  ASSERT_TRUE(StartWith(""));
  const std::string not_utf8 = "bad\xff/name";
  grpc::Status acquire = Acquire(stub_.get(), not_utf8).status;
  EXPECT_FALSE(acquire.ok());
  std::unique_ptr<WatchCall> watch = StartWatch(stub_.get(), {not_utf8});
  grpc::Status watched = DrainWatch(*watch);
  EXPECT_FALSE(watched.ok());
  std::cout << "[ figures  ] non-UTF-8 name: Acquire got " << Describe(acquire)
            << "; Watch got " << Describe(watched) << "\n";
  EXPECT_TRUE(BreakerNames(stub_.get()).empty());
  EXPECT_TRUE(Acquire(stub_.get(), "ok/after").status.ok());
  for (absl::string_view line : absl::StrSplit(proc_.Log(), '\n')) {
    if (line.empty()) continue;
    EXPECT_TRUE(absl::StartsWith(line, "{") && absl::EndsWith(line, "}"))
        << "not a JSON log line: " << line;
  }
}

// --- the breaker cap ---------------------------------------------------------

TEST_F(LimitsE2eTest, BreakerCapIsResourceExhaustedNamingMaxBreakers) {
  ASSERT_TRUE(StartWith("limits: { max_breakers: 5 }\n"));
  const std::string bearer = BearerToken(kAdminToken);
  std::vector<std::string> names;
  for (int i = 0; i < 5; ++i) {
    names.push_back(absl::StrCat("cap/", i));
    Result<v1::AcquireResponse> a = Acquire(stub_.get(), names.back());
    ASSERT_TRUE(a.status.ok()) << names.back() << ": " << Describe(a.status);
  }
  const std::vector<std::string> named = {"limits.max_breakers", "5",
                                          "cap/new"};
  ExpectRefused(Acquire(stub_.get(), "cap/new").status,
                grpc::StatusCode::RESOURCE_EXHAUSTED, named, "Acquire");
  ExpectRefused(AcquireFirst(stub_.get(), {"cap/new"}).status,
                grpc::StatusCode::RESOURCE_EXHAUSTED, named, "AcquireFirst");
  ExpectRefused(
      Admin(admin_.get(), AdminOp::kForceOpen, "cap/new", bearer).status,
      grpc::StatusCode::RESOURCE_EXHAUSTED, named, "ForceOpen");
  EXPECT_EQ(GetState(stub_.get(), "cap/new").status.error_code(),
            grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(BreakerNames(stub_.get()), names);
  EXPECT_EQ(MetricValue(proc_, "breakerd_breakers"), 5);

  // The breakers that exist keep working, also behind a new name in a
  // fallback chain.
  Result<v1::AcquireResponse> existing = Acquire(stub_.get(), "cap/3");
  ASSERT_TRUE(existing.status.ok()) << Describe(existing.status);
  EXPECT_TRUE(existing.response.allowed());
  Result<v1::AcquireFirstResponse> chain =
      AcquireFirst(stub_.get(), {"cap/0", "cap/new"});
  ASSERT_TRUE(chain.status.ok()) << Describe(chain.status);
  EXPECT_EQ(chain.response.dependency(), "cap/0");
  EXPECT_EQ(BreakerNames(stub_.get()), names);
}

// --- idle eviction -----------------------------------------------------------

// Breakers with no history are evicted once idle for limits.idle_ttl (and
// not before), which frees their slots under the cap; a breaker with
// history (open, or with outcomes in its window) stays.
TEST_F(LimitsE2eTest, IdleBreakersAreEvictedAfterIdleTtlAndFreeTheCap) {
  constexpr absl::Duration kIdleTtl = absl::Seconds(1);
  ASSERT_TRUE(StartWith(R"(
defaults:
  consecutive_failures: 1
  failure_rate: { threshold: 0 }
  cooldown: { base: 60s, jitter: 0 }
limits: { max_breakers: 4, idle_ttl: 1s }
)",
                        {"--evict-interval=100ms"}));
  const absl::Time first_use = absl::Now();
  // Called once, the calls cancelled (neutral: nothing in the window) and
  // reported: no permit out keeps them (a permit out would, for the permit
  // horizon: PermitEvictionTest).
  for (const char* name : {"idle/a", "idle/b"}) {
    Result<v1::AcquireResponse> a = Acquire(stub_.get(), name);
    ASSERT_TRUE(a.status.ok()) << name << ": " << Describe(a.status);
    ASSERT_TRUE(
        Report(stub_.get(), name, a.response.permit(), v1::OUTCOME_CANCELLED)
            .status.ok());
  }
  Result<v1::AcquireResponse> tripped = Acquire(stub_.get(), "keep/open");
  ASSERT_TRUE(tripped.status.ok()) << Describe(tripped.status);
  ASSERT_EQ(Report(stub_.get(), "keep/open", tripped.response.permit(),
                   v1::OUTCOME_TIMEOUT)
                .response.state(),
            v1::STATE_OPEN);
  Result<v1::AcquireResponse> busy = Acquire(stub_.get(), "keep/busy");
  ASSERT_TRUE(busy.status.ok()) << Describe(busy.status);
  ASSERT_TRUE(Report(stub_.get(), "keep/busy", busy.response.permit(),
                     v1::OUTCOME_SUCCESS)
                  .status.ok());
  ExpectRefused(Acquire(stub_.get(), "idle/c").status,
                grpc::StatusCode::RESOURCE_EXHAUSTED,
                {"limits.max_breakers", "4"}, "a fifth breaker");

  const std::vector<std::string> kept = {"keep/busy", "keep/open"};
  ASSERT_TRUE(WaitUntil([&] { return BreakerNames(stub_.get()) == kept; },
                        kIdleTtl + absl::Seconds(5)))
      << "the idle breakers were not evicted";
  const absl::Duration took = absl::Now() - first_use;
  EXPECT_GE(took, kIdleTtl - absl::Milliseconds(50))
      << "evicted before limits.idle_ttl";
  EXPECT_TRUE(
      proc_.WaitForLog("\"event\":\"breakers_evicted\"", absl::Seconds(1)));
  EXPECT_EQ(MetricValue(proc_, "breakerd_breakers"), 2);

  // The freed slots take new names; the kept breakers kept their state.
  for (const char* name : {"idle/c", "idle/d"}) {
    Result<v1::AcquireResponse> a = Acquire(stub_.get(), name);
    EXPECT_TRUE(a.status.ok()) << name << ": " << Describe(a.status);
  }
  EXPECT_EQ(GetState(stub_.get(), "keep/open").response.state(),
            v1::STATE_OPEN);
  EXPECT_EQ(GetState(stub_.get(), "keep/busy").response.window_calls(), 1u);
}

// --- reads of the whole registry (issue 13) ----------------------------------

// Creates `n` breakers dep/0 .. dep/n-1, from 4 threads.
void CreateBreakers(v1::Breaker::Stub* stub, int n) {
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([stub, n, t] {
      for (int i = t; i < n; i += 4) {
        grpc::ClientContext ctx;
        v1::AcquireRequest req;
        req.set_dependency(absl::StrCat("dep/", i));
        v1::AcquireResponse resp;
        EXPECT_TRUE(stub->Acquire(&ctx, req, &resp).ok()) << i;
      }
    });
  }
  for (std::thread& t : threads) t.join();
}

// 200 Watch streams of every dependency that stop reading, over 10,000
// breakers: each used to hold every breaker's state (481 MB). Now a stream
// holds one Registry shard's states at a time.
TEST_F(LimitsE2eTest, UnreadWatchStreamsOfEveryDependencyHoldLittleMemory) {
  constexpr int kBreakers = 10000;
  constexpr int kStreams = 200;
  // ASan's quarantine keeps up to 256 MB of freed memory resident, which
  // would measure the allocator rather than breakerd: this breakerd gets a
  // small one (the environment is inherited by the spawned process).
  const char* asan_env = std::getenv("ASAN_OPTIONS");
  const std::string saved_asan = asan_env == nullptr ? "" : asan_env;
  setenv("ASAN_OPTIONS",
         absl::StrCat(saved_asan, saved_asan.empty() ? "" : ":",
                      "quarantine_size_mb=16")
             .c_str(),
         1);
  const bool started =
      StartWith("", {"--read-all-breakers-per-second=1000000000",
                     absl::StrCat("--max-watch-streams=", kStreams)});
  if (asan_env == nullptr) {
    unsetenv("ASAN_OPTIONS");
  } else {
    setenv("ASAN_OPTIONS", saved_asan.c_str(), 1);
  }
  ASSERT_TRUE(started);
  CreateBreakers(stub_.get(), kBreakers);
  const int64_t before = ResidentKiB(proc_.pid());
  std::vector<std::unique_ptr<WatchCall>> open;
  v1::StateChange change;
  for (int i = 0; i < kStreams; ++i) {
    open.push_back(StartWatch(stub_.get(), {}));
    ASSERT_TRUE(ReadChange(*open.back()->reader, &change))
        << "stream " << i << ": " << Describe(open.back()->reader->Finish());
  }
  ASSERT_EQ(MetricValue(proc_, "breakerd_watch_streams"), kStreams);
  const int64_t after = ResidentKiB(proc_.pid());
  ASSERT_GT(before, 0);
  // About 16 MB measured (transport buffers included); all snapshots at
  // once were ~480 MB. Sanitizer allocators add redzones and shadow.
  const int64_t bound_kib = (kSanitizerBuild ? 160 : 64) * 1024;
  EXPECT_LT(after - before, bound_kib)
      << "RSS grew from " << before << " KiB to " << after << " KiB";
  // The limit on streams still holds, and breakerd still answers.
  std::unique_ptr<WatchCall> extra = StartWatch(stub_.get(), {});
  EXPECT_EQ(DrainWatch(*extra).error_code(),
            grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_TRUE(Acquire(stub_.get(), "dep/1").status.ok());
  for (auto& call : open) call->ctx.TryCancel();
  for (auto& call : open) DrainWatch(*call);
}

TEST_F(LimitsE2eTest, ListStatesAndWatchOfEverythingAreRateLimited) {
  ASSERT_TRUE(StartWith("", {"--read-all-breakers-per-second=10"}));
  CreateBreakers(stub_.get(), 30);
  v1::ListStatesResponse listed;
  {
    grpc::ClientContext ctx;
    grpc::Status s = stub_->ListStates(&ctx, {}, &listed);
    ASSERT_TRUE(s.ok()) << Describe(s);  // the bucket goes 20 into debt
    EXPECT_EQ(listed.breakers_size(), 30);
  }
  {
    grpc::ClientContext ctx;
    ExpectRefused(stub_->ListStates(&ctx, {}, &listed),
                  grpc::StatusCode::RESOURCE_EXHAUSTED,
                  {"list_states", "10 breakers per second",
                   "--read-all-breakers-per-second", "retry in"},
                  "a second ListStates");
  }
  std::unique_ptr<WatchCall> all = StartWatch(stub_.get(), {});
  ExpectRefused(DrainWatch(*all), grpc::StatusCode::RESOURCE_EXHAUSTED,
                {"watch", "--read-all-breakers-per-second"},
                "a Watch of every dependency");
  // Watching names is not a read of everything.
  std::unique_ptr<WatchCall> named = StartWatch(stub_.get(), {"dep/1"});
  v1::StateChange change;
  EXPECT_TRUE(ReadChange(*named->reader, &change));
  named->ctx.TryCancel();
  DrainWatch(*named);
}

}  // namespace
}  // namespace fault
}  // namespace breakerd

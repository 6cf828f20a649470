// Fault tests against the real breakerd binary: what happens when the world
// around the sidecar misbehaves. A client dies holding the probe; SIGTERM
// arrives under load; the metrics port or the unix socket's directory is
// unusable; a Watch client stops reading. (Operator mishaps are in
// operations_e2e_test.cc, Watch ordering in watch_order_e2e_test.cc.)
//
// Time-based rules use short configured leases with jitter 0; every wait is
// a bounded poll.
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
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "breakerd/v1/breaker.grpc.pb.h"
#include "grpc/grpc.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"
#include "gtest/gtest.h"
#include "tests/e2e/breakerd_process.h"
#include "tests/e2e/watch_notices.h"
#include "tests/fault/fault_util.h"

namespace breakerd {
namespace fault {
namespace {

// --- a client dies holding the probe -----------------------------------------

// The first line of `path` that starts with `prefix`, if any yet.
std::optional<std::string> LineStartingWith(const std::string& path,
                                            absl::string_view prefix) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (absl::StartsWith(line, prefix)) return line;
  }
  return std::nullopt;
}

// The value of `key=` in a "k=v k=v" line.
std::optional<uint64_t> FieldOf(absl::string_view line, absl::string_view key) {
  for (absl::string_view part : absl::StrSplit(line, ' ')) {
    if (!absl::ConsumePrefix(&part, key) || !absl::ConsumePrefix(&part, "=")) {
      continue;
    }
    uint64_t value = 0;
    if (absl::SimpleAtoi(part, &value)) return value;
  }
  return std::nullopt;
}

// A separate application process takes the half-open probe and is killed
// before it reports. Nobody else probes while its lease runs; once the
// lease lapses the next caller gets the probe, and a Report arriving late
// with the dead client's permit changes nothing.
TEST_F(FaultE2eTest, ClientKilledHoldingTheProbeFreesItWhenTheLeaseLapses) {
  constexpr absl::Duration kLease = absl::Milliseconds(1500);
  const std::string config = proc_.WriteFile("config.yaml", R"(
defaults:
  consecutive_failures: 1
  failure_rate: { threshold: 0 }
  cooldown: { base: 100ms, max: 100ms, jitter: 0 }
  probe: { lease: 1500ms }
)");
  ASSERT_TRUE(proc_.Start({"--config=" + config}));
  auto stub = proc_.BreakerStub();
  const std::string dep = "svc/probe-holder-dies";

  Result<v1::AcquireResponse> first = Acquire(stub.get(), dep);
  ASSERT_TRUE(first.status.ok()) << Describe(first.status);
  ASSERT_TRUE(
      Report(stub.get(), dep, first.response.permit(), v1::OUTCOME_TIMEOUT)
          .status.ok());
  ASSERT_TRUE(WaitUntil([&] {
    return GetState(stub.get(), dep).response.state() == v1::STATE_HALF_OPEN;
  })) << "the 100 ms cooldown did not end";

  const std::string client_log = proc_.dir() + "/probe-client.log";
  pid_t client = -1;
  const absl::Time spawned = absl::Now();
  ASSERT_EQ(SpawnLogged({FAULT_PROBE_CLIENT, proc_.tcp_address(), dep},
                        client_log, &client),
            0);
  std::optional<std::string> line;
  const bool answered = WaitUntil(
      [&] {
        line = LineStartingWith(client_log, "allowed=");
        return line.has_value();
      },
      absl::Seconds(10));
  if (!answered) {
    kill(client, SIGKILL);
    WaitChild(client, absl::Seconds(5));
    std::ifstream in(client_log);
    FAIL() << "the client process printed no Acquire result:\n" << in.rdbuf();
  }
  const absl::Time granted_by = absl::Now();
  ASSERT_EQ(FieldOf(*line, "allowed"), 1u) << *line;
  ASSERT_EQ(FieldOf(*line, "probe"), 1u) << *line;
  const std::optional<uint64_t> dead_permit = FieldOf(*line, "permit");
  ASSERT_TRUE(dead_permit.has_value()) << *line;

  // While the client lives, the probe is its: everyone else is refused
  // (checked unless a very loaded machine let the lease run out already).
  Result<v1::AcquireResponse> refused = Acquire(stub.get(), dep);
  ASSERT_TRUE(refused.status.ok()) << Describe(refused.status);
  if (absl::Now() < spawned + kLease) {
    EXPECT_FALSE(refused.response.allowed());
    EXPECT_EQ(refused.response.reason(), v1::REJECT_REASON_PROBE_IN_FLIGHT)
        << refused.response.DebugString();
  }

  ASSERT_EQ(kill(client, SIGKILL), 0) << std::strerror(errno);
  EXPECT_EQ(WaitChild(client, absl::Seconds(5)), 128 + SIGKILL);

  // The dead client's connection is gone; its probe is not freed by that,
  // only by the lease.
  absl::Time reprobed;
  Result<v1::AcquireResponse> next;
  ASSERT_TRUE(WaitUntil(
      [&] {
        next = Acquire(stub.get(), dep);
        reprobed = absl::Now();
        if (!next.status.ok() || next.response.allowed()) return true;
        EXPECT_EQ(next.response.reason(), v1::REJECT_REASON_PROBE_IN_FLIGHT)
            << next.response.DebugString();
        return false;
      },
      kLease + absl::Seconds(5)))
      << "no caller got the probe after the dead client's lease";
  ASSERT_TRUE(next.status.ok()) << Describe(next.status);
  EXPECT_TRUE(next.response.probe()) << next.response.DebugString();
  // Not before the lease: it started after `spawned` (with a little slack
  // for the test's clock against breakerd's monotonic one).
  EXPECT_GE(reprobed - spawned, kLease - absl::Milliseconds(100))
      << "the probe was handed out again before the lease lapsed";
  EXPECT_LE(reprobed - granted_by, kLease + absl::Seconds(3));

  // The dead client's permit, arriving now, is late: nothing moves.
  Result<v1::ReportResponse> late =
      Report(stub.get(), dep, *dead_permit, v1::OUTCOME_SERVER_ERROR);
  ASSERT_TRUE(late.status.ok()) << Describe(late.status);
  EXPECT_EQ(late.response.effect(), v1::EFFECT_LATE);
  EXPECT_EQ(late.response.state(), v1::STATE_HALF_OPEN);

  Result<v1::ReportResponse> closed =
      Report(stub.get(), dep, next.response.permit(), v1::OUTCOME_SUCCESS);
  ASSERT_TRUE(closed.status.ok()) << Describe(closed.status);
  EXPECT_EQ(closed.response.effect(), v1::EFFECT_COUNTED_SUCCESS);
  EXPECT_EQ(closed.response.state(), v1::STATE_CLOSED);
}

// --- SIGTERM under load ------------------------------------------------------

// One Report a load thread sent, identified by its latency in milliseconds
// (unique per call), which --trace-file records for every Report breakerd
// accepted.
struct SentReport {
  int64_t id = 0;
  grpc::StatusCode code = grpc::StatusCode::OK;
  std::string message;
};

// The latency_ms of every line of a --trace-file.
std::set<int64_t> TracedIds(const std::string& path) {
  std::set<int64_t> ids;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    size_t pos = line.find("\"latency_ms\":");
    if (pos == std::string::npos) continue;
    pos += std::strlen("\"latency_ms\":");
    const size_t end = line.find_first_of(",}", pos);
    int64_t id = 0;
    if (absl::SimpleAtoi(line.substr(pos, end - pos), &id)) ids.insert(id);
  }
  return ids;
}

// Eight clients on their own connections call Acquire and Report as fast
// as they can; SIGTERM arrives mid-stream. Every call breakerd took (every
// Report it recorded in the trace) must come back OK to its client; every
// call that fails must be one breakerd never took, and fail with
// UNAVAILABLE only: no CANCELLED, INTERNAL or DEADLINE_EXCEEDED. breakerd
// exits 0.
TEST_F(FaultE2eTest, SigtermUnderLoadAnswersEveryCallItTook) {
  const std::string trace = proc_.dir() + "/trace.jsonl";
  ASSERT_TRUE(proc_.Start({"--trace-file=" + trace, "--shutdown-grace=10s"}));
  constexpr int kThreads = 8;
  constexpr int kReportsBeforeSigterm = 1000;

  std::atomic<int64_t> next_id{1};
  std::atomic<int> ok_reports{0};
  std::atomic<bool> stop{false};
  std::vector<std::vector<SentReport>> reports(kThreads);
  std::vector<std::vector<grpc::Status>> failed_acquires(kThreads);
  std::vector<std::thread> threads;
  struct StopLoad {
    std::atomic<bool>& stop;
    std::vector<std::thread>& threads;
    ~StopLoad() {
      stop.store(true);
      for (std::thread& t : threads) {
        if (t.joinable()) t.join();
      }
    }
  } stop_load{stop, threads};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      auto stub = v1::Breaker::NewStub(proc_.Channel(t));
      const std::string dep = absl::StrCat("load/", t);
      while (!stop.load()) {
        Result<v1::AcquireResponse> a = Acquire(stub.get(), dep);
        if (!a.status.ok()) {
          failed_acquires[t].push_back(a.status);
          return;
        }
        SentReport sent;
        sent.id = next_id.fetch_add(1);
        Result<v1::ReportResponse> r =
            Report(stub.get(), dep, a.response.permit(), v1::OUTCOME_SUCCESS,
                   absl::Milliseconds(sent.id));
        sent.code = r.status.error_code();
        sent.message = r.status.error_message();
        reports[t].push_back(sent);
        if (!r.status.ok()) return;
        ok_reports.fetch_add(1);
      }
    });
  }
  const bool loaded =
      WaitUntil([&] { return ok_reports.load() >= kReportsBeforeSigterm; },
                absl::Seconds(20));
  EXPECT_TRUE(loaded) << ok_reports.load() << " reports in 20 s";
  expect_exit_ = true;
  ASSERT_TRUE(proc_.Signal(SIGTERM));
  const int ok_at_sigterm = ok_reports.load();
  std::optional<int> code = proc_.WaitExit(absl::Seconds(15));
  stop.store(true);
  for (std::thread& t : threads) t.join();
  ASSERT_TRUE(code.has_value()) << "breakerd did not exit after SIGTERM";
  EXPECT_EQ(*code, 0);

  // Every call breakerd took was answered OK (the trace proves which ones it
  // took). A call it never took may fail with UNAVAILABLE, or, in the last
  // milliseconds, CANCELLED: gRPC 1.51's Server::Shutdown cancels calls that
  // reached the transport but were not yet handed to a handler. Both mean
  // "not processed" and every client fails open on both; nothing else
  // (INTERNAL, a connection reset) is acceptable.
  constexpr char kOnlyUnavailable[] =
      "a call breakerd did not take may fail with UNAVAILABLE or CANCELLED "
      "only";
  auto not_processed = [](grpc::StatusCode code) {
    return code == grpc::StatusCode::UNAVAILABLE ||
           code == grpc::StatusCode::CANCELLED;
  };
  const std::set<int64_t> traced = TracedIds(trace);
  std::map<std::string, int> failures;  // "<code>: <message>" -> count
  int ok = 0, failed = 0;
  for (const std::vector<SentReport>& per_thread : reports) {
    for (const SentReport& r : per_thread) {
      const bool took = traced.count(r.id) > 0;
      if (r.code == grpc::StatusCode::OK) {
        ++ok;
        EXPECT_TRUE(took) << "Report " << r.id << " answered OK, not traced";
        continue;
      }
      ++failed;
      EXPECT_FALSE(took) << "breakerd took Report " << r.id
                         << " but its client got code " << r.code << ": "
                         << r.message;
      EXPECT_TRUE(not_processed(r.code))
          << kOnlyUnavailable << "; Report " << r.id << ": code " << r.code
          << ": " << r.message;
      ++failures[absl::StrCat(r.code, ": ", r.message)];
    }
  }
  for (const std::vector<grpc::Status>& per_thread : failed_acquires) {
    for (const grpc::Status& s : per_thread) {
      EXPECT_TRUE(not_processed(s.error_code()))
          << kOnlyUnavailable << "; Acquire: " << Describe(s);
      ++failures[absl::StrCat(s.error_code(), ": ", s.error_message())];
    }
  }
  EXPECT_EQ(traced.size(), static_cast<size_t>(ok))
      << "the trace holds Reports no client sent or saw answered";
  std::cout << "[ figures  ] " << ok << " Reports OK (" << ok - ok_at_sigterm
            << " after SIGTERM was sent), " << failed
            << " failed; failed calls by code and message:\n";
  for (const auto& [what, count] : failures) {
    std::cout << "[ figures  ]   " << count << " x " << what << "\n";
  }
}

// --- startup failures --------------------------------------------------------

// A metrics port someone else holds: a clear error naming it, and exit 1
// before serving.
TEST_F(FaultE2eTest, MetricsPortTakenExitsNonZeroNamingThePort) {
  HeldPort held;
  ASSERT_GT(held.port(), 0);
  const std::string address = absl::StrCat("127.0.0.1:", held.port());
  expect_exit_ = true;
  StartupFailure f =
      ExpectStartupFailure(proc_, {"--metrics-listen=" + address});
  ASSERT_TRUE(f.exit_code.has_value()) << "still running; log:\n" << f.log;
  EXPECT_EQ(*f.exit_code, 1) << f.log;
  const std::string error = LogLinesWith(f.log, "\"event\":\"startup_failed\"");
  EXPECT_TRUE(absl::StrContains(error, "metrics-listen " + address))
      << "the error should name the flag and the port:\n"
      << f.log;
  EXPECT_TRUE(absl::StrContains(error, "address in use")) << f.log;
  EXPECT_FALSE(absl::StrContains(f.log, "\"event\":\"serving\"")) << f.log;
}

// The same for the gRPC port.
TEST_F(FaultE2eTest, GrpcPortTakenExitsNonZeroNamingThePort) {
  HeldPort held;
  ASSERT_GT(held.port(), 0);
  const std::string address = absl::StrCat("127.0.0.1:", held.port());
  expect_exit_ = true;
  StartupFailure f = ExpectStartupFailure(proc_, {"--listen=" + address});
  ASSERT_TRUE(f.exit_code.has_value()) << "still running; log:\n" << f.log;
  EXPECT_EQ(*f.exit_code, 1) << f.log;
  const std::string error = LogLinesWith(f.log, "\"event\":\"startup_failed\"");
  EXPECT_TRUE(absl::StrContains(error, "listen " + address)) << f.log;
  EXPECT_TRUE(absl::StrContains(error, "address in use")) << f.log;
}

TEST_F(FaultE2eTest, UnixSocketInMissingDirectoryExitsNonZero) {
  const std::string missing = proc_.dir() + "/no-such-dir";
  const std::string address = "unix:" + missing + "/breakerd.sock";
  expect_exit_ = true;
  StartupFailure f = ExpectStartupFailure(proc_, {"--listen=" + address});
  ASSERT_TRUE(f.exit_code.has_value()) << "still running; log:\n" << f.log;
  EXPECT_EQ(*f.exit_code, 1) << f.log;
  const std::string error = LogLinesWith(f.log, "\"event\":\"startup_failed\"");
  EXPECT_TRUE(absl::StrContains(error, "listen " + address)) << f.log;
  EXPECT_TRUE(absl::StrContains(error, "directory " + missing)) << f.log;
  EXPECT_TRUE(absl::StrContains(error, "does not exist")) << f.log;
  EXPECT_FALSE(std::filesystem::exists(missing));
}

// A directory breakerd may not create files in. Root ignores permission
// bits, so as root the child drops to nobody (65534) before exec.
TEST_F(FaultE2eTest, UnixSocketInUnwritableDirectoryExitsNonZero) {
  char templ[] = "/tmp/bkd-ro-XXXXXX";
  ASSERT_NE(mkdtemp(templ), nullptr) << std::strerror(errno);
  const std::string dir = templ;
  ASSERT_EQ(chmod(dir.c_str(), 0555), 0) << std::strerror(errno);
  const std::string address = "unix:" + dir + "/breakerd.sock";
  const std::string log_path = proc_.dir() + "/unwritable.log";
  const std::vector<std::string> args = {BREAKERD_BINARY, "--listen=" + address,
                                         "--metrics-listen=127.0.0.1:0"};
  pid_t pid = -1;
  int rc;
  if (geteuid() == 0) {
    rc = SpawnLoggedAs(args, log_path, 65534, 65534, &pid);
    if (rc == EACCES || rc == EPERM) {
      rmdir(dir.c_str());
      GTEST_SKIP() << "cannot run " << BREAKERD_BINARY
                   << " as nobody (65534): " << std::strerror(rc);
    }
  } else {
    rc = SpawnLogged(args, log_path, &pid);
  }
  ASSERT_EQ(rc, 0) << std::strerror(rc);
  std::optional<int> code = WaitChild(pid, absl::Seconds(10));
  std::ifstream in(log_path);
  const std::string log((std::istreambuf_iterator<char>(in)),
                        std::istreambuf_iterator<char>());
  const bool socket_left = std::filesystem::exists(dir + "/breakerd.sock");
  rmdir(dir.c_str());
  ASSERT_TRUE(code.has_value()) << "did not exit; log:\n" << log;
  EXPECT_EQ(*code, 1) << log;
  const std::string error = LogLinesWith(log, "\"event\":\"startup_failed\"");
  EXPECT_TRUE(absl::StrContains(error, "listen " + address)) << log;
  EXPECT_TRUE(absl::StrContains(error, "permission denied")) << log;
  EXPECT_FALSE(socket_left);
}

// --- a Watch client that never reads -----------------------------------------

// A channel whose transport takes little before its application reads: a
// 1 KiB stream window and no BDP probing (which would grow it). A default
// client's transport accepts megabytes for a stream nobody reads (in a trial
// run, 10000 transitions of a 200-byte name did not fill it), and meanwhile
// breakerd's writes complete and its queue stays empty; this client pushes
// back at once, so what fills is breakerd's queue for it.
std::shared_ptr<grpc::Channel> TightChannel(const BreakerdProcess& proc,
                                            int distinct_id) {
  grpc::ChannelArguments args;
  args.SetInt("breakerd.e2e.channel_id", distinct_id);
  args.SetInt(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, 1024);
  args.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  return grpc::CreateCustomChannel(proc.tcp_address(),
                                   grpc::InsecureChannelCredentials(), args);
}

// Four Watch clients open a stream each and never read; a fifth reads
// everything. Transitions pile up behind the four until each passes
// --watch-queue (16): breakerd ends those streams (RESOURCE_EXHAUSTED,
// naming the limit, seen once the client finally reads), the watch-stream
// gauge drops, breakerd's memory stays put however many transitions
// follow, and the reading client misses nothing.
TEST_F(FaultE2eTest, WatchClientsThatNeverReadAreCutOffAndMemoryStaysBounded) {
  constexpr int kSlowStreams = 4;
  constexpr int kMaxFlips = 2000;
  constexpr int kExtraFlips = 500;
  ASSERT_TRUE(proc_.Start(
      {"--admin-token-file=" + WriteAdminToken(), "--watch-queue=16"}));
  const std::string dep = "flip/" + std::string(195, 'x');  // 200 bytes
  const std::string bearer = BearerToken(kAdminToken);
  auto admin = v1::Admin::NewStub(proc_.Channel(100));

  // Each client on its own connection, as separate applications would be.
  std::vector<std::unique_ptr<v1::Breaker::Stub>> slow_stubs;
  std::vector<std::unique_ptr<WatchCall>> slow;
  for (int i = 0; i < kSlowStreams; ++i) {
    slow_stubs.push_back(v1::Breaker::NewStub(TightChannel(proc_, i)));
    slow.push_back(
        StartWatch(slow_stubs.back().get(), {dep}, absl::Seconds(120)));
  }
  auto reader_stub = v1::Breaker::NewStub(proc_.Channel(kSlowStreams));
  std::unique_ptr<WatchCall> reader =
      StartWatch(reader_stub.get(), {dep}, absl::Seconds(120));
  // Written by `reading` only; read after it is joined.
  std::vector<v1::StateChange> seen;
  std::atomic<size_t> seen_count{0};
  std::thread reading([&] {
    v1::StateChange change;
    while (ReadChange(*reader->reader, &change)) {
      seen.push_back(change);
      seen_count.store(seen.size());
    }
  });
  struct StopReading {
    std::thread& thread;
    WatchCall& call;
    ~StopReading() {
      if (!thread.joinable()) return;
      call.ctx.TryCancel();
      thread.join();
    }
  } stop_reading{reading, *reader};

  ASSERT_TRUE(WaitUntil([&] {
    return MetricValue(proc_, "breakerd_watch_streams") == kSlowStreams + 1;
  })) << "the streams did not all subscribe";
  const int64_t rss_before = ResidentKiB(proc_.pid());
  ASSERT_GT(rss_before, 0);

  // Flips in pairs; after each pair, waits for the reading client to catch
  // up. Then at most 4 transitions wait in breakerd's queue for it, well
  // under 16, however slowly a loaded machine completes breakerd's writes
  // (a burst of 20 did cut a reading client in a trial at load 13). Only
  // the non-reading clients fall behind.
  int flips = 0;
  auto flip_batch = [&] {
    for (int i = 0; i < 2; ++i, ++flips) {
      EXPECT_TRUE(
          Admin(admin.get(), AdminOp::kForceOpen, dep, bearer).status.ok());
      EXPECT_TRUE(
          Admin(admin.get(), AdminOp::kForceClose, dep, bearer).status.ok());
    }
    const size_t want = 1 + 2 * static_cast<size_t>(flips);
    return WaitUntil([&] { return seen_count.load() >= want; },
                     absl::Seconds(10));
  };
  while (flips < kMaxFlips &&
         MetricValue(proc_, "breakerd_watch_streams") != 1) {
    ASSERT_TRUE(flip_batch()) << "the reading client fell behind";
  }
  ASSERT_EQ(MetricValue(proc_, "breakerd_watch_streams"), 1)
      << "the non-reading streams were still open after " << flips << " flips";
  const int flips_to_cut = flips;
  const int64_t rss_cut = ResidentKiB(proc_.pid());
  while (flips < flips_to_cut + kExtraFlips) {
    ASSERT_TRUE(flip_batch()) << "the reading client fell behind";
  }
  const int64_t rss_after = ResidentKiB(proc_.pid());
  std::cout << "[ figures  ] streams cut after " << flips_to_cut
            << " flips; breakerd VmRSS " << rss_before << " KiB before, "
            << rss_cut << " KiB when cut, " << rss_after << " KiB after "
            << kExtraFlips << " more flips\n";
  // Queued for nobody, the 1000 transitions after the cut would hold about
  // 0.4 MiB per stream (a trial with --watch-queue=1000000 grew breakerd by
  // ~400 bytes per queued message); bounded, they hold nothing.
  if (!kSanitizerBuild) {
    EXPECT_LT(rss_after - rss_cut, 768)
        << "breakerd's memory grew with transitions nobody reads";
  }

  for (int i = 0; i < kSlowStreams; ++i) {
    int messages = 0;
    grpc::Status s = DrainWatch(*slow[i], &messages);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
        << "stream " << i << ": " << Describe(s);
    EXPECT_EQ(s.error_message(),
              "watch: client reads too slowly (queue limit 16)");
    EXPECT_LT(messages, 2 * flips_to_cut)
        << "stream " << i << " was not cut off";
  }

  // The reading client got the initial state and every transition, in
  // order, and is still subscribed.
  const size_t want = 1 + 2 * static_cast<size_t>(flips);
  EXPECT_EQ(MetricValue(proc_, "breakerd_watch_streams"), 1)
      << "the reading client was cut off too";
  reader->ctx.TryCancel();
  reading.join();
  EXPECT_EQ(reader->reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
  ASSERT_EQ(seen.size(), want);
  for (size_t i = 1; i < seen.size(); ++i) {
    ASSERT_EQ(seen[i].generation(), seen[i - 1].generation() + 1) << i;
  }
}

}  // namespace
}  // namespace fault
}  // namespace breakerd

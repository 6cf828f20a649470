// The metrics port of the real breakerd binary under scrapes nobody vetted
// (issue 13): it serves /metrics, /healthz and /readyz and nothing else;
// /metrics is streamed in pieces, so scrapes of 10,000 breakers hold little
// memory however many clients loop; a third scrape at once is refused with
// Retry-After; --metrics-dependency-label hides the dependency names.
//
// The token bucket on breakers read per second is tested on a simulated
// clock (tests/service/scrape_limiter_test.cc): here, over real sockets,
// only what does not depend on timing.
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "tests/e2e/breakerd_process.h"
#include "tests/fault/fault_util.h"

namespace breakerd {
namespace fault {
namespace {

// What breakerd streams /metrics in (kExpositionChunkBytes).
constexpr size_t kPieceBytes = 64 << 10;

// Creates `n` breakers dep/0 .. dep/n-1 from 4 threads, each with one
// reported call of 42 ms: every breaker then exports a latency histogram,
// the largest exposition a breaker has.
void CreateBreakersWithLatency(v1::Breaker::Stub* stub, int n) {
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([stub, n, t] {
      for (int i = t; i < n; i += 4) {
        const std::string dep = absl::StrCat("dep/", i);
        Result<v1::AcquireResponse> a = Acquire(stub, dep);
        ASSERT_TRUE(a.status.ok()) << dep << ": " << Describe(a.status);
        ASSERT_TRUE(Report(stub, dep, a.response.permit(), v1::OUTCOME_SUCCESS,
                           absl::Milliseconds(42))
                        .status.ok())
            << dep;
      }
    });
  }
  for (std::thread& t : threads) t.join();
}

// How long a raw client connection waits for the server.
constexpr absl::Duration kSocketTimeout = absl::Seconds(10);

// Sends an HTTP/1.1 GET of `path` (as Prometheus does).
bool SendGet(int fd, absl::string_view path) {
  const std::string request = absl::StrCat(
      "GET ", path,
      " HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/plain\r\n\r\n");
  return send(fd, request.data(), request.size(), MSG_NOSIGNAL) ==
         static_cast<ssize_t>(request.size());
}

// Reads until the server closes the connection (or 10 s pass).
std::string ReadToEnd(int fd) {
  std::string raw;
  char buf[16384];
  while (true) {
    const ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n > 0) {
      raw.append(buf, static_cast<size_t>(n));
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      return raw;
    }
  }
}

// Reads until `raw` holds a whole response head ("\r\n\r\n").
bool ReadHead(int fd, std::string* raw) {
  char buf[1024];
  while (raw->find("\r\n\r\n") == std::string::npos) {
    const ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) return false;
    raw->append(buf, static_cast<size_t>(n));
  }
  return true;
}

// An HTTP/1.1 response with a chunked body, as sent.
struct ChunkedResponse {
  std::string head;
  std::vector<size_t> chunk_sizes;  // without the final 0
  std::string body;                 // the chunks joined
  bool complete = false;            // the final 0-size chunk came
};

ChunkedResponse ParseChunked(const std::string& raw) {
  ChunkedResponse r;
  const size_t head_end = raw.find("\r\n\r\n");
  if (head_end == std::string::npos) return r;
  r.head = raw.substr(0, head_end + 2);
  size_t i = head_end + 4;
  while (i < raw.size()) {
    const size_t eol = raw.find("\r\n", i);
    if (eol == std::string::npos) return r;
    const size_t size =
        std::strtoul(raw.substr(i, eol - i).c_str(), nullptr, 16);
    i = eol + 2;
    if (size == 0) {
      r.complete = raw.compare(i, std::string::npos, "\r\n") == 0;
      return r;
    }
    if (i + size + 2 > raw.size() || raw.compare(i + size, 2, "\r\n") != 0) {
      return r;
    }
    r.chunk_sizes.push_back(size);
    r.body.append(raw, i, size);
    i += size + 2;
  }
  return r;
}

class MetricsE2eTest : public FaultE2eTest {};

// prometheus-cpp's own rendering used to be served at
// /metrics-prometheus-cpp (50 MB of memory per scrape at 10,000 breakers);
// now every path but the three answers 404.
TEST_F(MetricsE2eTest, OnlyMetricsAndTheProbesAreServed) {
  ASSERT_TRUE(proc_.Start());
  auto stub = proc_.BreakerStub();
  ASSERT_TRUE(Acquire(stub.get(), "svc/a").status.ok());
  for (const char* path :
       {"/metrics-prometheus-cpp", "/", "/metrics/", "/metricsx", "/debug"}) {
    const HttpResponse r = proc_.Get(path);
    EXPECT_EQ(r.status, 404) << path << "\n" << r.headers << "\n" << r.body;
    EXPECT_FALSE(absl::StrContains(r.body, "breakerd_")) << path;
  }
  for (const char* path : {"/metrics", "/healthz", "/readyz"}) {
    EXPECT_EQ(proc_.Get(path).status, 200) << path;
  }
}

// Only GET and HEAD read the metrics port: any other method on /metrics or
// a probe is 405 with Allow, and reads nothing.
TEST_F(MetricsE2eTest, OtherMethodsThanGetAndHeadAreRefused) {
  ASSERT_TRUE(proc_.Start());
  for (const char* request :
       {"POST /metrics HTTP/1.0\r\nContent-Length: 0\r\n\r\n",
        "POST /healthz HTTP/1.0\r\nContent-Length: 0\r\n\r\n",
        "DELETE /readyz HTTP/1.0\r\n\r\n"}) {
    const int fd = ConnectLoopback(proc_.metrics_port(), absl::Seconds(5));
    ASSERT_GE(fd, 0);
    const std::string sent = request;
    ASSERT_EQ(send(fd, sent.data(), sent.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(sent.size()));
    std::string answer;
    char buf[4096];
    for (ssize_t n; (n = recv(fd, buf, sizeof(buf), 0)) > 0;) {
      answer.append(buf, static_cast<size_t>(n));
    }
    close(fd);
    EXPECT_TRUE(absl::StartsWith(answer, "HTTP/1.1 405 ")) << answer;
    EXPECT_TRUE(absl::StrContains(answer, "Allow: GET, HEAD\r\n")) << answer;
    EXPECT_FALSE(absl::StrContains(answer, "breakerd_")) << answer;
  }
  EXPECT_EQ(proc_.Get("/healthz").status, 200);
}

// Prometheus speaks HTTP/1.1: the exposition comes in chunks of about
// 64 KiB, ended by the last chunk (an answer cut short would show), with no
// Content-Length (nothing is rendered ahead).
TEST_F(MetricsE2eTest, MetricsIsStreamedInChunksToHttp11Clients) {
  constexpr int kBreakers = 2000;
  ASSERT_TRUE(proc_.Start());
  auto stub = proc_.BreakerStub();
  CreateBreakersWithLatency(stub.get(), kBreakers);
  const int fd = ConnectLoopback(proc_.metrics_port(), kSocketTimeout);
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(SendGet(fd, "/metrics"));
  const ChunkedResponse r = ParseChunked(ReadToEnd(fd));
  close(fd);
  ASSERT_TRUE(absl::StartsWith(r.head, "HTTP/1.1 200 OK\r\n")) << r.head;
  const std::string head = absl::AsciiStrToLower(r.head);
  EXPECT_TRUE(absl::StrContains(head, "transfer-encoding: chunked")) << r.head;
  EXPECT_FALSE(absl::StrContains(head, "content-length")) << r.head;
  EXPECT_TRUE(absl::StrContains(head, "text/plain; version=0.0.4")) << r.head;
  ASSERT_TRUE(r.complete) << r.chunk_sizes.size() << " chunks";
  ASSERT_GT(r.chunk_sizes.size(), 10u) << r.body.size() << " bytes";
  for (size_t i = 0; i < r.chunk_sizes.size(); ++i) {
    // A piece's worth, plus at most one shard's lines of one family.
    EXPECT_LT(r.chunk_sizes[i], kPieceBytes + 32 * 1024) << "chunk " << i;
    if (i + 1 < r.chunk_sizes.size()) {
      EXPECT_GE(r.chunk_sizes[i], kPieceBytes) << "chunk " << i;
    }
  }
  EXPECT_EQ(Sample(r.body, "breakerd_breakers"), kBreakers);
  int states = 0;
  for (const PromSample& s : ParsePrometheus(r.body)) {
    if (s.name == "breakerd_state") ++states;
  }
  EXPECT_EQ(states, kBreakers);
}

// Two scrapes whose clients stopped reading hold both slots: a third gets
// 503 with Retry-After: 1 (not a third buffer), and once they are gone a
// scrape answers again.
TEST_F(MetricsE2eTest, AThirdScrapeAtOnceIsRefusedWithRetryAfter) {
  ASSERT_TRUE(proc_.Start());
  auto stub = proc_.BreakerStub();
  // ~3.6 MB of exposition: far more than an unread connection's buffers.
  CreateBreakersWithLatency(stub.get(), 2000);
  int held[2];
  for (int& fd : held) {
    fd = ConnectLoopback(proc_.metrics_port(), kSocketTimeout,
                         /*receive_buffer=*/4096);
    ASSERT_GE(fd, 0);
    ASSERT_TRUE(SendGet(fd, "/metrics"));
    std::string head;
    ASSERT_TRUE(ReadHead(fd, &head));
    ASSERT_TRUE(absl::StartsWith(head, "HTTP/1.1 200 OK")) << head;
  }
  // Both are being written (civetweb gives a stalled write 1 s).
  const HttpResponse third = proc_.Get("/metrics");
  EXPECT_EQ(third.status, 503) << third.headers << "\n" << third.body;
  EXPECT_TRUE(absl::StrContains(third.headers, "Retry-After: 1"))
      << third.headers;
  EXPECT_TRUE(absl::StrContains(third.body, "at most 2 scrapes")) << third.body;
  // The probes do not need a slot.
  EXPECT_EQ(proc_.Get("/readyz").status, 200);
  for (int fd : held) close(fd);
  EXPECT_TRUE(WaitUntil([&] { return proc_.Get("/metrics").status == 200; }));
}

// Issue 13: at 10,000 breakers one scrape took breakerd from 29 to 78 MB
// and two looping clients to 166 MB. Streamed, two clients scraping at once
// (and again, as the budget allows) leave the peak where it was.
TEST_F(MetricsE2eTest, ScrapesOfTenThousandBreakersHoldLittleMemory) {
  constexpr int kBreakers = 10000;
  ASSERT_TRUE(proc_.Start());
  auto stub = proc_.BreakerStub();
  CreateBreakersWithLatency(stub.get(), kBreakers);
  const int64_t before = ResidentKiB(proc_.pid());
  ASSERT_GT(before, 0);
  std::atomic<int> served{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < 2; ++c) {
    clients.emplace_back([&] {
      for (int i = 0; i < 3; ++i) {
        const HttpResponse r = proc_.Get("/metrics");
        if (r.status == 200) {
          ++served;
          EXPECT_EQ(Sample(r.body, "breakerd_breakers"), kBreakers);
        } else {
          EXPECT_EQ(r.status, 503) << r.body;  // the budget: retry later
        }
      }
    });
  }
  for (std::thread& t : clients) t.join();
  // The bucket holds two full scrapes: at least those were served.
  EXPECT_GE(served.load(), 2);
  const int64_t peak = PeakResidentKiB(proc_.pid());
  const int64_t after = ResidentKiB(proc_.pid());
  std::cout << "[ memory   ] " << served.load() << " scrapes of " << kBreakers
            << " breakers: VmRSS " << before << " -> " << after
            << " KiB, VmHWM " << peak << " KiB\n";
  // Each scrape holds one ~80 KiB piece; a whole exposition is ~18 MB.
  // Sanitizer allocators keep what is freed (breakerd_process.h).
  const int64_t bound_kib = (kSanitizerBuild ? 48 : 8) * 1024;
  EXPECT_LT(peak - before, bound_kib)
      << "peak " << peak << " KiB, " << before << " KiB before the scrapes";
  EXPECT_LT(after - before, bound_kib);
}

// --metrics-dependency-label=hash shows "h" + FNV-1a 64 of each name;
// omit shows no dependency at all and sums over dependencies.
TEST_F(MetricsE2eTest, DependencyLabelHashOrOmitKeepsNamesOffTheMetricsPort) {
  BreakerdProcess omitted;
  ASSERT_TRUE(proc_.Start({"--metrics-dependency-label=hash"}));
  ASSERT_TRUE(omitted.Start({"--metrics-dependency-label=omit"}));
  for (BreakerdProcess* p : {&proc_, &omitted}) {
    auto stub = p->BreakerStub();
    for (const char* dep : {"db/main", "pay/api"}) {
      ASSERT_TRUE(Acquire(stub.get(), dep).status.ok()) << dep;
    }
  }
  const std::string hashed = proc_.Metrics();
  EXPECT_FALSE(absl::StrContains(hashed, "db/main")) << hashed;
  EXPECT_FALSE(absl::StrContains(hashed, "pay/api")) << hashed;
  EXPECT_EQ(Sample(hashed,
                   "breakerd_state{dependency=\"hce95f71b99df0621\","
                   "mode=\"enforce\"}"),
            0);
  EXPECT_EQ(Sample(hashed,
                   "breakerd_acquire_total{dependency=\"hfe6030c37d534b36\","
                   "decision=\"allowed\"}"),
            1);

  const std::string summed = omitted.Metrics();
  EXPECT_FALSE(absl::StrContains(summed, "dependency=")) << summed;
  EXPECT_FALSE(absl::StrContains(summed, "db/main")) << summed;
  EXPECT_EQ(Sample(summed, "breakerd_acquire_total{decision=\"allowed\"}"), 2);
  EXPECT_EQ(Sample(summed, "breakerd_breakers"), 2);
  EXPECT_FALSE(absl::StrContains(summed, "breakerd_state{")) << summed;
}

TEST_F(MetricsE2eTest, BadDependencyLabelIsAConfigError) {
  StartupFailure f =
      ExpectStartupFailure(proc_, {"--metrics-dependency-label=names"});
  ASSERT_TRUE(f.exit_code.has_value()) << f.log;
  EXPECT_EQ(*f.exit_code, 2) << f.log;
  EXPECT_TRUE(absl::StrContains(f.log, "metrics-dependency-label")) << f.log;
  EXPECT_TRUE(absl::StrContains(f.log, "name|hash|omit")) << f.log;
  EXPECT_TRUE(absl::StrContains(f.log, "names")) << f.log;
}

}  // namespace
}  // namespace fault
}  // namespace breakerd

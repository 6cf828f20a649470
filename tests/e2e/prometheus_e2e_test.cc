// End-to-end test of the operator artefacts against a real Prometheus:
// starts the real breakerd binary and a real Prometheus server (the Debian
// package's /usr/bin/prometheus) scraping it every 500 ms, drives traffic
// that opens one breaker and leaves another closed, plays a scripted
// incident on a fallback chain (healthy, the primary degrades and callers
// retry, the primary opens, the fallback fails too, recovery), and then
// evaluates every PromQL expression of deploy/grafana/breakerd.json
// (template variables substituted) and of deploy/prometheus/
// breakerd-rules.yaml (if present) through Prometheus's HTTP API. The
// incident is checked as an on-call engineer would read it, through the
// dashboard's own queries over the incident's time range: tier 0, then 1,
// then none, then 0 again dominate the chain's decisions; the retry share
// rises before the open; the first probe's success is counted; one trip is
// one bar. Every metric name those expressions use must exist in a real
// scrape of breakerd. The scraped breakerd runs in fleet mode on a real
// redis-server with a second sidecar beside it, so the fleet series are real
// too (members 2, fleet windows read back, and one open that the fleet never
// confirmed, ended by its probe). Last, deploy/grafana/render.py draws the
// whole dashboard from this Prometheus into a PNG and must find data for
// every panel (BREAKERD_RENDER_PNG=<path> keeps the picture;
// BREAKERD_RENDER=skip skips this step).
//
// The incident's traffic is paced (a call every 20 ms, phases of fixed
// length); every wait is bounded and polls, and every check reads what
// Prometheus recorded, not what the test assumes happened meanwhile.
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "breakerd/v1/breaker.grpc.pb.h"
#include "grpcpp/client_context.h"
#include "gtest/gtest.h"
#include "tests/e2e/breakerd_process.h"
#include "yaml-cpp/yaml.h"

extern char** environ;

namespace breakerd {
namespace {

namespace v1 = ::breakerd::v1;

constexpr char kPrometheusBinary[] = "/usr/bin/prometheus";
constexpr char kRedisBinary[] = "/usr/bin/redis-server";
constexpr char kDashboardPath[] =
    BREAKERD_SOURCE_DIR "/deploy/grafana/breakerd.json";
constexpr char kRulesPath[] =
    BREAKERD_SOURCE_DIR "/deploy/prometheus/breakerd-rules.yaml";
constexpr char kRenderScript[] =
    BREAKERD_SOURCE_DIR "/deploy/grafana/render.py";

// The breaker that opens (5 timeouts, long cooldown so it stays open for the
// whole test) and the one that stays closed.
constexpr char kTripped[] = "llm/tripped";
constexpr char kHealthy[] = "db/healthy";
// Opens on the scraped sidecar only (the other one calls it successfully),
// so the fleet never confirms it; its probe succeeds after a 1 s cooldown
// and the episode is counted in breakerd_fleet_unconfirmed_opens_total.
constexpr char kAlone[] = "pod/alone";
// The scripted incident's fallback chain [kPrimary, kSecondary], named
// kChain in AcquireFirst and Report.
constexpr char kChain[] = "llm-chain";
constexpr char kPrimary[] = "llm-chain/primary";
constexpr char kSecondary[] = "llm-chain/secondary";
// Prometheus scrapes breakerd this often; Grafana's $__rate_interval is
// 4 scrape intervals at the incident's resolution.
constexpr absl::Duration kScrapeInterval = absl::Milliseconds(500);

// Dashboard expressions that may legitimately return no data in this
// scenario: only parsing (status "success") is asserted for them. Keyed by a
// substring of the expression, with the reason. The summary stats end in
// `or vector(0)`, and the scenario produces every other series (open
// breaker, rejections, retries, an auth error, latencies, the fleet's
// members, windows, events and an unconfirmed open, and the incident's
// chain decisions and outcomes, hung calls, a ramp, a confirmed open and
// first probes that succeeded).
const std::map<std::string, std::string>& MayBeEmpty() {
  static const auto* m = new std::map<std::string, std::string>{
      {"first_probe=\"failed\"", "no probe fails in this scenario"},
  };
  return *m;
}

bool FileExists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

std::string ReadFileOrEmpty(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A loopback port that was free a moment ago (bind to 0, read, close).
int FreePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  int port = -1;
  socklen_t len = sizeof(addr);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  ::close(fd);
  return port;
}

// A real redis-server (Debian's redis-server) on a free loopback port,
// without persistence, killed by the destructor: the fleet's store. (The
// fleet tests' RedisServer in fleet_harness.h does more; this test does not
// link that harness.)
class RedisChild {
 public:
  explicit RedisChild(std::string dir) : dir_(std::move(dir)) {}
  ~RedisChild() { Stop(); }

  ::testing::AssertionResult Start() {
    port_ = FreePort();
    if (port_ <= 0) return ::testing::AssertionFailure() << "no free port";
    const std::string log = dir_ + "/redis.log";
    const int rc = SpawnLogged(
        {kRedisBinary, "--port", std::to_string(port_), "--bind", "127.0.0.1",
         "--save", "", "--appendonly", "no", "--dir", dir_},
        log, &pid_);
    if (rc != 0) {
      return ::testing::AssertionFailure()
             << "posix_spawn " << kRedisBinary << ": " << std::strerror(rc);
    }
    if (!WaitUntil([this] { return Ping(); })) {
      return ::testing::AssertionFailure()
             << "redis-server did not answer PING:\n"
             << ReadFileOrEmpty(log);
    }
    return ::testing::AssertionSuccess();
  }

  void Stop() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

  std::string address() const { return absl::StrCat("127.0.0.1:", port_); }

 private:
  bool Ping() const {
    const int fd = ConnectLoopback(port_, absl::Seconds(1));
    if (fd < 0) return false;
    char buf[16] = {};
    const bool ok = ::write(fd, "PING\r\n", 6) == 6 &&
                    ::read(fd, buf, sizeof(buf) - 1) > 0 &&
                    std::string(buf) == "+PONG\r\n";
    ::close(fd);
    return ok;
  }

  std::string dir_;
  int port_ = -1;
  pid_t pid_ = -1;
};

// Seconds since the epoch with millisecond precision, for the HTTP API.
std::string UnixSeconds(absl::Time t) {
  return absl::StrFormat("%.3f", absl::ToDoubleSeconds(t - absl::UnixEpoch()));
}

std::string UrlEncode(absl::string_view s) {
  static const char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  return out;
}

// A real Prometheus server as a child process; stopped (SIGTERM, then
// SIGKILL after a bound) by Stop() or the destructor.
class PrometheusProcess {
 public:
  ~PrometheusProcess() { Stop(); }

  ::testing::AssertionResult Start(const std::string& dir,
                                   const std::string& config_path) {
    port_ = FreePort();
    if (port_ <= 0) return ::testing::AssertionFailure() << "no free port";
    log_path_ = dir + "/prometheus.log";
    const std::string storage = dir + "/tsdb";
    std::vector<std::string> args = {
        kPrometheusBinary,
        "--config.file=" + config_path,
        "--storage.tsdb.path=" + storage,
        absl::StrCat("--web.listen-address=127.0.0.1:", port_),
        "--log.level=warn",
    };
    pid_t pid = -1;
    const int rc = SpawnLogged(args, log_path_, &pid);
    if (rc != 0) {
      return ::testing::AssertionFailure()
             << "posix_spawn " << args[0] << ": " << std::strerror(rc);
    }
    pid_ = pid;

    // Ready once /-/ready answers 200 (TSDB open, rules loaded).
    const absl::Time deadline = absl::Now() + absl::Seconds(20);
    while (absl::Now() < deadline) {
      if (Exited()) {
        return ::testing::AssertionFailure()
               << "prometheus exited during startup:\n"
               << Log();
      }
      HttpResponse r = HttpGet(port_, "/-/ready", absl::Seconds(1));
      if (r.status == 200) return ::testing::AssertionSuccess();
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return ::testing::AssertionFailure() << "prometheus not ready within 20s:\n"
                                         << Log();
  }

  void Stop() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGTERM);
    const absl::Time deadline = absl::Now() + absl::Seconds(10);
    while (absl::Now() < deadline) {
      if (Exited()) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

  int port() const { return port_; }
  std::string Log() const { return ReadFileOrEmpty(log_path_); }

  // GET /api/v1/query?query=<expr>; the parsed JSON answer (null node if
  // there was no parseable answer).
  YAML::Node Query(const std::string& expr) const {
    HttpResponse r = HttpGet(port_, "/api/v1/query?query=" + UrlEncode(expr),
                             absl::Seconds(5));
    return ParseJson(r.body);
  }

  // GET /api/v1/query_range over [start, end] every `step`.
  YAML::Node QueryRange(const std::string& expr, absl::Time start,
                        absl::Time end, absl::Duration step) const {
    HttpResponse r = HttpGet(
        port_,
        absl::StrCat("/api/v1/query_range?query=", UrlEncode(expr),
                     "&start=", UnixSeconds(start), "&end=", UnixSeconds(end),
                     "&step=", absl::ToDoubleSeconds(step)),
        absl::Seconds(10));
    return ParseJson(r.body);
  }

  YAML::Node GetJson(const std::string& path) const {
    return ParseJson(HttpGet(port_, path, absl::Seconds(5)).body);
  }

 private:
  static YAML::Node ParseJson(const std::string& body) {
    if (body.empty()) return YAML::Node();
    try {
      return YAML::Load(body);
    } catch (const YAML::Exception&) {
      return YAML::Node();
    }
  }

  bool Exited() {
    if (pid_ <= 0) return true;
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return true;
    }
    return false;
  }

  pid_t pid_ = -1;
  int port_ = -1;
  std::string log_path_;
};

std::string StatusOf(const YAML::Node& answer) {
  if (!answer.IsMap() || !answer["status"]) return "<no answer>";
  return answer["status"].as<std::string>();
}

std::string ErrorOf(const YAML::Node& answer) {
  if (!answer.IsMap() || !answer["error"]) return "";
  return answer["error"].as<std::string>();
}

size_t ResultSize(const YAML::Node& answer) {
  if (!answer.IsMap() || !answer["data"] || !answer["data"]["result"]) {
    return 0;
  }
  return answer["data"]["result"].size();
}

// What SubstituteVariables puts in place of the template variables.
struct Substitution {
  // $dependency: the dependencies of this test (a multi-value selection).
  std::string dependency =
      absl::StrCat("(", kTripped, "|", kHealthy, "|", kAlone, "|", kPrimary,
                   "|", kSecondary, ")");
  // Grafana's built-in intervals. 1m for instant checks at the end (every
  // counter has moved inside it); the incident's checks use Grafana's values
  // for a 500 ms scrape and step.
  std::string interval = "1m";
  std::string rate_interval = "1m";
  std::string range = "1m";
};

// The incident's resolution: $__interval is the query step (one scrape),
// $__rate_interval four scrapes, as Grafana computes them.
Substitution AtIncidentResolution(std::string dependency) {
  Substitution s;
  s.dependency = std::move(dependency);
  s.interval = "500ms";
  s.rate_interval = "2s";
  s.range = "30s";
  return s;
}

// Substitutes Grafana template variables the way the dashboard would with
// "All" namespaces and pods, the chain kChain and the dependencies of `sub`.
std::string SubstituteVariables(const std::string& expr,
                                const Substitution& sub = {}) {
  static const std::regex kVar(R"(\$\{?(\w+)(?::\w+)?\}?)");
  std::string out;
  auto begin = std::sregex_iterator(expr.begin(), expr.end(), kVar);
  size_t last = 0;
  for (auto it = begin; it != std::sregex_iterator(); ++it) {
    const std::smatch& m = *it;
    out.append(expr, last, m.position(0) - last);
    const std::string name = m[1].str();
    if (name == "namespace" || name == "pod") {
      out += ".*";  // The variables' allValue.
    } else if (name == "dependency") {
      out += sub.dependency;
    } else if (name == "chain") {
      out += kChain;
    } else if (name == "top") {
      out += "10";
    } else if (name == "__interval") {
      out += sub.interval;
    } else if (name == "__rate_interval") {
      out += sub.rate_interval;
    } else if (name == "__range") {
      out += sub.range;
    } else {
      out += m[0].str();  // Unknown: left as is, so the query fails loudly.
    }
    last = m.position(0) + m.length(0);
  }
  out.append(expr, last, std::string::npos);
  return out;
}

struct DashboardTarget {
  std::string panel;
  std::string expr;
};

// Every panel of `panels`, rows' nested (collapsed) panels included.
void WalkPanels(const YAML::Node& panels,
                const std::function<void(const YAML::Node&)>& visit) {
  if (!panels || !panels.IsSequence()) return;
  for (const YAML::Node& p : panels) {
    visit(p);
    WalkPanels(p["panels"], visit);
  }
}

std::vector<DashboardTarget> DashboardTargets(const YAML::Node& dashboard) {
  std::vector<DashboardTarget> out;
  WalkPanels(dashboard["panels"], [&](const YAML::Node& p) {
    if (!p["targets"]) return;
    for (const YAML::Node& t : p["targets"]) {
      if (t["expr"]) {
        out.push_back(
            {p["title"].as<std::string>(""), t["expr"].as<std::string>()});
      }
    }
  });
  return out;
}

struct RuleExpr {
  std::string name;
  std::string expr;
};

std::vector<RuleExpr> RuleExprs(const YAML::Node& rules) {
  std::vector<RuleExpr> out;
  if (!rules["groups"]) return out;
  for (const YAML::Node& g : rules["groups"]) {
    for (const YAML::Node& r : g["rules"]) {
      std::string name = r["alert"] ? r["alert"].as<std::string>()
                                    : r["record"].as<std::string>("?");
      out.push_back({name, r["expr"].as<std::string>()});
    }
  }
  return out;
}

// The breakerd_* metric names `expr` uses: identifiers starting with
// "breakerd_" (recording-rule names contain ':' and are skipped), with the
// histogram suffixes stripped.
std::set<std::string> MetricNames(const std::string& expr) {
  static const std::regex kIdent(R"([A-Za-z_:][A-Za-z0-9_:]*)");
  std::set<std::string> out;
  for (auto it = std::sregex_iterator(expr.begin(), expr.end(), kIdent);
       it != std::sregex_iterator(); ++it) {
    std::string id = it->str();
    if (!absl::StartsWith(id, "breakerd_") || absl::StrContains(id, ':')) {
      continue;
    }
    for (absl::string_view suffix : {"_bucket", "_sum", "_count"}) {
      if (absl::EndsWith(id, suffix)) {
        id.resize(id.size() - suffix.size());
        break;
      }
    }
    out.insert(id);
  }
  return out;
}

// --- gRPC traffic -----------------------------------------------------------

void SetDeadline(grpc::ClientContext* ctx) {
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
}

v1::AcquireResponse Acquire(v1::Breaker::Stub* stub, const std::string& dep,
                            uint32_t attempt = 0) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  v1::AcquireRequest req;
  req.set_dependency(dep);
  req.set_attempt(attempt);
  v1::AcquireResponse resp;
  grpc::Status s = stub->Acquire(&ctx, req, &resp);
  EXPECT_TRUE(s.ok()) << dep << ": " << s.error_message();
  return resp;
}

v1::ReportResponse Report(v1::Breaker::Stub* stub, const std::string& dep,
                          uint64_t permit, v1::Outcome outcome,
                          int latency_ms) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  v1::ReportRequest req;
  req.set_dependency(dep);
  req.set_permit(permit);
  req.set_outcome(outcome);
  req.mutable_latency()->set_seconds(latency_ms / 1000);
  req.mutable_latency()->set_nanos((latency_ms % 1000) * 1000000);
  v1::ReportResponse resp;
  grpc::Status s = stub->Report(&ctx, req, &resp);
  EXPECT_TRUE(s.ok()) << dep << ": " << s.error_message();
  return resp;
}

// One round of traffic: healthy successes with latencies, granted retries,
// one auth error; rejections on the tripped breaker (opened by TripOnce),
// by the sidecar and, in a ReportBatch, by its clients (local decisions).
void HealthyAndRejectedTraffic(v1::Breaker::Stub* stub) {
  for (int i = 0; i < 10; ++i) {
    v1::AcquireResponse a = Acquire(stub, kHealthy);
    ASSERT_TRUE(a.allowed()) << a.DebugString();
    Report(stub, kHealthy, a.permit(), v1::OUTCOME_SUCCESS, 10 + 20 * i);
  }
  for (int i = 0; i < 2; ++i) {
    v1::AcquireResponse a = Acquire(stub, kHealthy, /*attempt=*/1);
    ASSERT_TRUE(a.allowed()) << "retry " << i << ": " << a.DebugString();
    Report(stub, kHealthy, a.permit(), v1::OUTCOME_SUCCESS, 30);
  }
  v1::AcquireResponse a = Acquire(stub, kHealthy);
  ASSERT_TRUE(a.allowed()) << a.DebugString();
  Report(stub, kHealthy, a.permit(), v1::OUTCOME_AUTH_ERROR, 5);

  for (int i = 0; i < 3; ++i) {
    EXPECT_FALSE(Acquire(stub, kTripped).allowed());
  }
  EXPECT_FALSE(Acquire(stub, kTripped, /*attempt=*/2).allowed());

  // Calls the clients refused themselves (open in their Watch cache) or
  // decided while the sidecar was away, as their next batch tells it.
  static uint64_t sequence = 0;
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  v1::ReportBatchRequest batch;
  batch.set_client_id("prometheus-e2e");
  batch.set_sequence(++sequence);
  v1::ClientDecisions* d = batch.add_decisions();
  d->set_dependency(kTripped);
  d->set_refused_local(5);
  d->set_fail_open(1);
  d->set_fail_closed(1);
  v1::ReportBatchResponse resp;
  grpc::Status s = stub->ReportBatch(&ctx, batch, &resp);
  EXPECT_TRUE(s.ok()) << s.error_message();
}

// --- the scripted incident ---------------------------------------------------

// One AcquireFirst over the chain [kPrimary, kSecondary] named kChain, as a
// client's fallback-chain helper sends it; `tier` is the granted
// candidate's position, -1 when every candidate was refused ("none").
struct ChainCall {
  bool granted = false;
  bool probe = false;
  int tier = -1;
  std::string dependency;
  uint64_t permit = 0;
};

ChainCall AcquireChain(v1::Breaker::Stub* stub, uint32_t attempt) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  v1::AcquireFirstRequest req;
  req.add_dependencies(kPrimary);
  req.add_dependencies(kSecondary);
  req.set_attempt(attempt);
  req.set_chain(kChain);
  req.set_first_tier(0);
  v1::AcquireFirstResponse resp;
  grpc::Status s = stub->AcquireFirst(&ctx, req, &resp);
  EXPECT_TRUE(s.ok()) << s.error_message();
  ChainCall c;
  c.granted = resp.allowed();
  c.probe = resp.probe();
  c.dependency = resp.dependency();
  c.permit = resp.permit();
  if (c.granted) c.tier = c.dependency == kPrimary ? 0 : 1;
  return c;
}

// Reports a granted chain call's outcome with its chain and tier.
v1::ReportResponse ReportChain(v1::Breaker::Stub* stub, const ChainCall& c,
                               v1::Outcome outcome, int latency_ms) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  v1::ReportRequest req;
  req.set_dependency(c.dependency);
  req.set_permit(c.permit);
  req.set_outcome(outcome);
  req.mutable_latency()->set_seconds(latency_ms / 1000);
  req.mutable_latency()->set_nanos((latency_ms % 1000) * 1000000);
  req.set_chain(kChain);
  req.set_tier(static_cast<uint32_t>(c.tier));
  v1::ReportResponse resp;
  grpc::Status s = stub->Report(&ctx, req, &resp);
  EXPECT_TRUE(s.ok()) << c.dependency << ": " << s.error_message();
  return resp;
}

// When each phase of the incident began, as the test saw it.
struct IncidentTimes {
  absl::Time healthy;         // tier 0 serves everything
  absl::Time degrading;       // a quarter of the primary's calls time out
                              // and are retried; two hang
  absl::Time primary_down;    // every primary call times out
  absl::Time primary_open;    // its Report answered OPEN
  absl::Time secondary_down;  // the fallback times out too: tier none
  absl::Time recovery;        // the primary's first probe succeeded
  absl::Time end;
};

// The chain's calls at a steady pace (one AcquireFirst every kCallEvery,
// plus a retry or a report), so that every phase holds a few hundred
// decisions and Prometheus scrapes each phase several times.
constexpr absl::Duration kCallEvery = absl::Milliseconds(20);
constexpr absl::Duration kPhase = absl::Seconds(2);

// Calls `step(i)` every kCallEvery until `until` or until it returns false.
void Paced(absl::Time until, const std::function<bool(int)>& step) {
  absl::Time next = absl::Now();
  for (int i = 0; absl::Now() < until; ++i) {
    if (!step(i)) return;
    next += kCallEvery;
    absl::SleepFor(next - absl::Now());
  }
}

// Plays the incident on the chain (policy "llm-chain/*" in the test's
// config: consecutive_failures 5, a 4 s cooldown, a 1 s recovery ramp,
// hang_after 300 ms, a generous retry budget, fleet quorum 1).
IncidentTimes PlayIncident(v1::Breaker::Stub* stub) {
  IncidentTimes t;
  t.healthy = absl::Now();
  Paced(t.healthy + kPhase, [&](int) {
    ChainCall c = AcquireChain(stub, 0);
    EXPECT_EQ(c.tier, 0) << "healthy: the primary serves";
    if (c.granted) ReportChain(stub, c, v1::OUTCOME_SUCCESS, 20);
    return true;
  });

  // The primary degrades: every fourth call times out and the caller
  // retries it (attempt 1, granted by the budget, succeeds); two calls hang
  // (never reported). 25 % failures stay under the 50 % threshold and no
  // five fail in a row: the breaker stays closed, the retry share rises.
  t.degrading = absl::Now();
  Paced(t.degrading + kPhase, [&](int i) {
    ChainCall c = AcquireChain(stub, 0);
    EXPECT_EQ(c.tier, 0) << "degrading: the primary still serves";
    if (!c.granted) return true;
    if (i == 11 || i == 37) return true;  // hangs: never reported
    if (i % 4 != 3) {
      ReportChain(stub, c, v1::OUTCOME_SUCCESS, 40);
      return true;
    }
    v1::ReportResponse r = ReportChain(stub, c, v1::OUTCOME_TIMEOUT, 800);
    EXPECT_EQ(r.state(), v1::STATE_CLOSED) << "tripped while degrading";
    ChainCall retry = AcquireChain(stub, 1);
    EXPECT_EQ(retry.tier, 0) << "the retry budget refused a retry";
    if (retry.granted) ReportChain(stub, retry, v1::OUTCOME_SUCCESS, 60);
    return true;
  });

  // The primary fails outright (its retries too) and opens; the chain
  // falls to tier 1, which succeeds.
  t.primary_down = absl::Now();
  bool primary_open = false;
  Paced(t.primary_down + kPhase, [&](int) {
    ChainCall c = AcquireChain(stub, 0);
    if (c.tier == 1) {
      ReportChain(stub, c, v1::OUTCOME_SUCCESS, 80);
      return true;
    }
    for (int attempt = 0; c.tier == 0; ++attempt) {
      v1::ReportResponse r = ReportChain(stub, c, v1::OUTCOME_TIMEOUT, 1000);
      if (r.state() == v1::STATE_OPEN && !primary_open) {
        primary_open = true;
        t.primary_open = absl::Now();
      }
      if (attempt > 0 || primary_open) break;
      c = AcquireChain(stub, 1);
      if (c.tier == 1) ReportChain(stub, c, v1::OUTCOME_SUCCESS, 80);
    }
    return true;
  });
  EXPECT_TRUE(primary_open) << kPrimary << " never opened";

  // The fallback fails too and opens: every candidate refused, the caller
  // serves its ultimate fallback (tier none), until the primary's cooldown
  // ends and its first probe succeeds.
  t.secondary_down = absl::Now();
  bool recovered = false;
  Paced(t.primary_open + absl::Seconds(10), [&](int) {
    ChainCall c = AcquireChain(stub, 0);
    if (c.tier == 1) {
      ReportChain(stub, c, v1::OUTCOME_TIMEOUT, 1000);
    } else if (c.tier == 0) {
      EXPECT_TRUE(c.probe) << "the primary came back without a probe";
      v1::ReportResponse r = ReportChain(stub, c, v1::OUTCOME_SUCCESS, 30);
      EXPECT_EQ(r.state(), v1::STATE_CLOSED) << r.DebugString();
      recovered = true;
      return false;
    }
    return true;
  });
  t.recovery = absl::Now();
  EXPECT_TRUE(recovered) << "no probe of " << kPrimary
                         << " within 10 s of its open";

  // Recovery: the primary ramps up (its admit share rises from 25 % to
  // 100 % over 1 s; refused first attempts fall to the still-open fallback)
  // and serves everything again.
  Paced(t.recovery + absl::Milliseconds(2500), [&](int) {
    ChainCall c = AcquireChain(stub, 0);
    if (c.granted) ReportChain(stub, c, v1::OUTCOME_SUCCESS, 20);
    return true;
  });
  t.end = absl::Now();
  return t;
}

// The expressions of the dashboard panel titled `title` (before variable
// substitution); empty if there is no such panel.
std::vector<std::string> PanelExprs(const YAML::Node& dashboard,
                                    const std::string& title) {
  std::vector<std::string> out;
  WalkPanels(dashboard["panels"], [&](const YAML::Node& p) {
    if (p["title"].as<std::string>("") != title || !p["targets"]) return;
    for (const YAML::Node& t : p["targets"]) {
      out.push_back(t["expr"].as<std::string>(""));
    }
  });
  return out;
}

// One series of a query_range answer: its labels and (time, value) points.
struct RangeSeries {
  std::map<std::string, std::string> labels;
  std::vector<std::pair<double, double>> points;
};

std::vector<RangeSeries> RangeResult(const YAML::Node& answer) {
  std::vector<RangeSeries> out;
  if (StatusOf(answer) != "success") return out;
  for (const YAML::Node& r : answer["data"]["result"]) {
    RangeSeries s;
    for (const auto& kv : r["metric"]) {
      s.labels[kv.first.as<std::string>()] = kv.second.as<std::string>();
    }
    for (const YAML::Node& v : r["values"]) {
      s.points.emplace_back(v[0].as<double>(),
                            std::stod(v[1].as<std::string>()));
    }
    out.push_back(std::move(s));
  }
  return out;
}

// Runs `args` (args[0] an absolute path) with its output in `log_path` and
// waits at most `timeout`; the exit code, or nullopt (killed) on timeout.
std::optional<int> RunLogged(const std::vector<std::string>& args,
                             const std::string& log_path,
                             absl::Duration timeout) {
  pid_t pid = -1;
  if (SpawnLogged(args, log_path, &pid) != 0) return std::nullopt;
  const absl::Time deadline = absl::Now() + timeout;
  int status = 0;
  while (::waitpid(pid, &status, WNOHANG) == 0) {
    if (absl::Now() >= deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
      return std::nullopt;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// The first time in `series` (any of them) at which a value satisfies
// `pred`; nullopt if none does.
std::optional<double> FirstTime(const std::vector<RangeSeries>& series,
                                const std::function<bool(double)>& pred) {
  std::optional<double> first;
  for (const RangeSeries& s : series) {
    for (const auto& [time, value] : s.points) {
      if (std::isfinite(value) && pred(value) && (!first || time < *first)) {
        first = time;
      }
    }
  }
  return first;
}

double SumOfPoints(const std::vector<RangeSeries>& series) {
  double sum = 0;
  for (const RangeSeries& s : series) {
    for (const auto& [time, value] : s.points) {
      if (std::isfinite(value)) sum += value;
    }
  }
  return sum;
}

// The incident as the on-call engineer would read it: the dashboard's own
// panel queries over the incident's time range, at Grafana's resolution
// for a 500 ms scrape.
void CheckIncident(const PrometheusProcess& prom, const YAML::Node& dashboard,
                   const IncidentTimes& t) {
  const absl::Time from = t.healthy - kScrapeInterval;
  const absl::Time to = t.end + kScrapeInterval;
  const Substitution primary = AtIncidentResolution(kPrimary);
  auto range = [&](const std::string& expr) {
    YAML::Node a = prom.QueryRange(expr, from, to, kScrapeInterval);
    EXPECT_EQ(StatusOf(a), "success") << expr << "\n" << ErrorOf(a);
    return RangeResult(a);
  };
  auto one_expr = [&](const std::string& title, size_t index = 0) {
    std::vector<std::string> exprs = PanelExprs(dashboard, title);
    EXPECT_GT(exprs.size(), index) << "no panel \"" << title << "\"";
    return exprs.size() > index ? SubstituteVariables(exprs[index], primary)
                                : std::string("vector(0)");
  };
  const double healthy = absl::ToDoubleSeconds(t.healthy - absl::UnixEpoch());
  auto since_start = [&](std::optional<double> unix_seconds) {
    if (!unix_seconds) return std::string("never");
    return absl::StrFormat("%.1f s", *unix_seconds - healthy);
  };

  // Tier 0, then 1, then none, then 0 again serve most of the chain's
  // decisions (more than half at some step), in that order.
  {
    std::map<double, std::pair<std::string, double>> top;  // time -> tier
    for (const RangeSeries& s : range(one_expr("Tier share: $chain"))) {
      for (const auto& [time, share] : s.points) {
        if (std::isfinite(share) && share > top[time].second) {
          top[time] = {s.labels.at("tier"), share};
        }
      }
    }
    std::vector<std::string> order;
    for (const auto& [time, tier_share] : top) {
      if (tier_share.second > 0.5 &&
          (order.empty() || order.back() != tier_share.first)) {
        order.push_back(tier_share.first);
      }
    }
    const std::vector<std::string> want = {"0", "1", "none", "0"};
    size_t matched = 0;
    for (const std::string& tier : order) {
      if (matched < want.size() && tier == want[matched]) ++matched;
    }
    const std::string seen = absl::StrJoin(order, " -> ");
    std::cout << "incident: dominant tiers " << seen << "\n";
    ASSERT_FALSE(order.empty()) << "no tier share data";
    EXPECT_EQ(order.front(), "0") << seen;
    EXPECT_EQ(matched, want.size()) << "dominant tiers: " << seen;
    const auto first_none = std::find(order.begin(), order.end(), "none");
    EXPECT_LT(std::find(order.begin(), order.end(), "1") - order.begin(),
              first_none - order.begin())
        << "tier none dominated before tier 1: " << seen;
  }

  // The retry share of the primary rises (above 5 %) before Prometheus
  // sees it open, and not before it degrades.
  {
    const std::vector<RangeSeries> share =
        range(one_expr("Retry share of calls"));
    const std::optional<double> rises =
        FirstTime(share, [](double v) { return v > 0.05; });
    const std::optional<double> opens =
        FirstTime(range(absl::StrCat("max(breakerd_state{dependency=\"",
                                     kPrimary, "\"})")),
                  [](double v) { return v >= 2; });
    std::cout << "incident: retry share above 5 % at " << since_start(rises)
              << ", open at " << since_start(opens) << " (degrading from "
              << absl::FormatDuration(t.degrading - t.healthy)
              << ", open reported at "
              << absl::FormatDuration(t.primary_open - t.healthy) << ")\n";
    ASSERT_TRUE(rises.has_value()) << "the retry share never rose";
    ASSERT_TRUE(opens.has_value()) << "Prometheus never saw the open";
    EXPECT_LT(*rises, *opens) << "the retry share rose only with the open";
    EXPECT_GE(*rises, absl::ToDoubleSeconds(t.degrading - absl::UnixEpoch()))
        << "retries before the primary degraded";
  }

  // One trip is one bar of height 1 (not a bar per step of a longer
  // window), and the first probe's success is counted.
  {
    double trips = 0;
    for (const RangeSeries& s : range(one_expr("Transitions"))) {
      if (s.labels.count("from") && s.labels.at("from") == "closed" &&
          s.labels.at("to") == "open") {
        trips += SumOfPoints({s});
      }
    }
    EXPECT_EQ(trips, 1) << "the primary opened once";
    const std::string episodes =
        absl::StrCat("breakerd_open_episodes_total{dependency=\"", kPrimary,
                     "\", first_probe=\"succeeded\"}");
    YAML::Node a = prom.Query(episodes);
    ASSERT_EQ(ResultSize(a), 1u) << episodes << "\n" << YAML::Dump(a);
    EXPECT_EQ(a["data"]["result"][0]["value"][1].as<std::string>(), "1");
    // The Opens panel's "first probe succeeded" bars (index 3).
    EXPECT_GE(SumOfPoints(range(one_expr("Opens", 3))), 1)
        << "the Opens panel shows no first probe that succeeded";
  }

  // Every dashboard and rule expression evaluates over the incident at
  // Grafana's resolution (render.py then draws them).
  const Substitution every = AtIncidentResolution(Substitution().dependency);
  for (const DashboardTarget& target : DashboardTargets(dashboard)) {
    const std::string expr = SubstituteVariables(target.expr, every);
    YAML::Node a = prom.QueryRange(expr, from, to, kScrapeInterval);
    EXPECT_EQ(StatusOf(a), "success")
        << "panel \"" << target.panel << "\": " << expr << "\n"
        << ErrorOf(a);
  }
  if (FileExists(kRulesPath)) {
    std::vector<std::string> with_data;
    for (const RuleExpr& r : RuleExprs(YAML::LoadFile(kRulesPath))) {
      YAML::Node a = prom.QueryRange(r.expr, from, to, kScrapeInterval);
      EXPECT_EQ(StatusOf(a), "success")
          << "rule " << r.name << ": " << r.expr << "\n"
          << ErrorOf(a);
      if (ResultSize(a) > 0) with_data.push_back(r.name);
    }
    std::cout << "incident: rules with data during it: "
              << absl::StrJoin(with_data, ", ") << "\n";
  }
}

// --- the tests --------------------------------------------------------------

// --- static properties of the dashboard (no processes) -----------------------

// A panel and the row it sits under ("" before the first row).
struct PlacedPanel {
  std::string row;
  std::string row_repeat;  // the row's repeat variable, "" if none
  YAML::Node panel;
};

std::vector<PlacedPanel> PlacedPanels(const YAML::Node& dash) {
  std::vector<PlacedPanel> out;
  std::string row, repeat;
  for (const YAML::Node& p : dash["panels"]) {
    if (p["type"].as<std::string>("") == "row") {
      row = p["title"].as<std::string>("");
      repeat = p["repeat"].as<std::string>("");
      for (const YAML::Node& nested : p["panels"]) {
        out.push_back({row, repeat, nested});
      }
      continue;
    }
    out.push_back({row, repeat, p});
  }
  return out;
}

std::vector<std::string> Exprs(const YAML::Node& panel) {
  std::vector<std::string> out;
  for (const YAML::Node& t : panel["targets"]) {
    out.push_back(t["expr"].as<std::string>(""));
  }
  return out;
}

// The fixed colour an override of `panel` gives the series named `name`.
std::string OverrideColour(const YAML::Node& panel, const std::string& name) {
  if (!panel || !panel["fieldConfig"]) return "";
  for (const YAML::Node& o : panel["fieldConfig"]["overrides"]) {
    if (o["matcher"]["id"].as<std::string>("") != "byName" ||
        o["matcher"]["options"].as<std::string>("") != name) {
      continue;
    }
    for (const YAML::Node& prop : o["properties"]) {
      if (prop["id"].as<std::string>("") == "color") {
        return prop["value"]["fixedColor"].as<std::string>("");
      }
    }
  }
  return "";
}

// The colour of the highest threshold step of a stat panel.
std::string AlertColour(const YAML::Node& panel) {
  if (!panel || !panel["fieldConfig"]["defaults"]["thresholds"]) return "";
  const YAML::Node steps =
      panel["fieldConfig"]["defaults"]["thresholds"]["steps"];
  return steps && steps.size() > 0
             ? steps[steps.size() - 1]["color"].as<std::string>("")
             : "";
}

class GrafanaDashboardTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dash_ = YAML::LoadFile(kDashboardPath);
    placed_ = PlacedPanels(dash_);
    for (const YAML::Node& v : dash_["templating"]["list"]) {
      vars_[v["name"].as<std::string>()] = v;
    }
  }

  // The one panel titled `title`; a test failure and a null node if not.
  YAML::Node Panel(const std::string& title) const {
    for (const PlacedPanel& p : placed_) {
      if (p.panel["title"].as<std::string>("") == title) return p.panel;
    }
    ADD_FAILURE() << "no panel \"" << title << "\"";
    return YAML::Node();
  }

  YAML::Node dash_;
  std::vector<PlacedPanel> placed_;
  std::map<std::string, YAML::Node> vars_;
};

TEST_F(GrafanaDashboardTest, StructureAndDatasourceVariable) {
  EXPECT_EQ(dash_["uid"].as<std::string>(""), "breakerd");
  EXPECT_GE(dash_["schemaVersion"].as<int>(0), 36);

  ASSERT_TRUE(vars_.count("datasource"));
  EXPECT_EQ(vars_["datasource"]["type"].as<std::string>(), "datasource");
  EXPECT_EQ(vars_["datasource"]["query"].as<std::string>(), "prometheus");
  for (const char* name : {"namespace", "pod", "dependency", "chain"}) {
    ASSERT_TRUE(vars_.count(name)) << name;
    EXPECT_EQ(vars_[name]["type"].as<std::string>(), "query") << name;
    EXPECT_TRUE(vars_[name]["multi"].as<bool>()) << name;
    EXPECT_TRUE(vars_[name]["includeAll"].as<bool>()) << name;
    EXPECT_EQ(vars_[name]["datasource"]["uid"].as<std::string>(""),
              "${datasource}")
        << name;
    EXPECT_FALSE(vars_[name]["description"].as<std::string>("").empty())
        << name;
  }
  for (const char* name : {"namespace", "pod"}) {
    EXPECT_EQ(vars_[name]["allValue"].as<std::string>(""), ".*") << name;
    EXPECT_TRUE(absl::StrContains(vars_[name]["definition"].as<std::string>(),
                                  "label_values(breakerd_state"))
        << name;
  }

  int panels = 0;
  std::set<std::string> types;
  std::set<std::string> repeated_rows;
  WalkPanels(dash_["panels"], [&](const YAML::Node& p) {
    const std::string title = p["title"].as<std::string>("");
    const std::string type = p["type"].as<std::string>("");
    types.insert(type);
    EXPECT_EQ(p["datasource"]["uid"].as<std::string>(""), "${datasource}")
        << title;
    if (type == "row") {
      if (p["repeat"]) repeated_rows.insert(p["repeat"].as<std::string>());
      return;
    }
    ++panels;
    EXPECT_FALSE(p["description"].as<std::string>("").empty()) << title;
    EXPECT_FALSE(
        p["fieldConfig"]["defaults"]["unit"].as<std::string>("").empty())
        << title;
    ASSERT_TRUE(p["targets"] && p["targets"].size() > 0) << title;
    for (const YAML::Node& t : p["targets"]) {
      EXPECT_EQ(t["datasource"]["uid"].as<std::string>(""), "${datasource}")
          << title;
      const std::string expr = t["expr"].as<std::string>("");
      for (const char* var : {"$namespace", "$pod"}) {
        EXPECT_TRUE(absl::StrContains(expr, var)) << title << ": " << expr;
      }
    }
  });
  EXPECT_EQ(repeated_rows, (std::set<std::string>{"dependency", "chain"}));
  EXPECT_GE(panels, 30);
  for (const char* type : {"stat", "timeseries", "table", "bargauge"}) {
    EXPECT_TRUE(types.count(type)) << type;
  }

  // The Fleet row (issue 16): after a row whose title starts with "Fleet",
  // panels for the members, the unconfirmed opens by pod, the fleet events,
  // and one panel comparing the fleet's failure rate with each pod's own.
  std::set<std::string> fleet_metrics;
  bool fleet_vs_local = false;
  for (const PlacedPanel& p : placed_) {
    if (!absl::StartsWith(p.row, "Fleet")) continue;
    std::set<std::string> names;
    for (const std::string& expr : Exprs(p.panel)) {
      names.merge(MetricNames(expr));
    }
    if (names.count("breakerd_fleet_failure_rate") &&
        names.count("breakerd_failure_rate")) {
      fleet_vs_local = true;
    }
    fleet_metrics.insert(names.begin(), names.end());
  }
  for (const char* name :
       {"breakerd_fleet_members", "breakerd_fleet_unconfirmed_opens_total",
        "breakerd_fleet_events_total", "breakerd_fleet_failure_rate"}) {
    EXPECT_TRUE(fleet_metrics.count(name)) << "Fleet row lacks " << name;
  }
  EXPECT_TRUE(fleet_vs_local)
      << "no Fleet-row panel with both breakerd_fleet_failure_rate and "
         "breakerd_failure_rate";
}

// The per-dependency rows repeat over a bounded default selection: the top
// $top dependencies by rejected calls, All meaning those (no allValue
// regex matching every dependency); the panels outside those rows cover
// every dependency and do not filter on $dependency.
TEST_F(GrafanaDashboardTest, DependencyRowsAreBoundedAndSummariesCoverAll) {
  ASSERT_TRUE(vars_.count("top"));
  EXPECT_EQ(vars_["top"]["type"].as<std::string>(""), "custom");
  const int top = std::stoi(vars_["top"]["current"]["value"].as<std::string>());
  EXPECT_GT(top, 0);
  EXPECT_LE(top, 20);
  for (const char* name : {"dependency", "chain"}) {
    const std::string def = vars_[name]["definition"].as<std::string>("");
    EXPECT_TRUE(absl::StrContains(def, "topk($top,")) << name << ": " << def;
    EXPECT_TRUE(absl::StartsWith(def, "query_result(")) << name << ": " << def;
    EXPECT_FALSE(vars_[name]["allValue"] && !vars_[name]["allValue"].IsNull() &&
                 !vars_[name]["allValue"].as<std::string>("").empty())
        << name << ": All must mean the top $top, not every " << name;
    EXPECT_TRUE(absl::StrContains(
        vars_[name]["description"].as<std::string>(""), "$top"))
        << name << ": the description says how the default is chosen";
  }
  EXPECT_TRUE(absl::StrContains(
      vars_["dependency"]["definition"].as<std::string>(), "rejected_"));

  int in_dependency_rows = 0;
  for (const PlacedPanel& p : placed_) {
    const std::string title = p.panel["title"].as<std::string>("");
    const bool per_dependency =
        p.row_repeat == "dependency" ||
        p.panel["repeat"].as<std::string>("") == "dependency";
    if (p.row_repeat == "dependency") ++in_dependency_rows;
    for (const std::string& expr : Exprs(p.panel)) {
      EXPECT_EQ(absl::StrContains(expr, "$dependency"), per_dependency)
          << "row \"" << p.row << "\", panel \"" << title << "\": " << expr;
    }
  }
  EXPECT_GE(in_dependency_rows, 10);
}

// The summary counts dependencies, not breakers on pods: one outage on 40
// replicas reads 1. A table lists every dependency not closed with its
// state, since when and on how many pods.
TEST_F(GrafanaDashboardTest, SummaryCountsDependenciesNotPods) {
  int counted = 0;
  for (const PlacedPanel& p : placed_) {
    if (!absl::StartsWith(p.row, "Summary") ||
        p.panel["type"].as<std::string>("") != "stat") {
      continue;
    }
    for (const std::string& expr : Exprs(p.panel)) {
      if (!MetricNames(expr).count("breakerd_state")) continue;
      ++counted;
      EXPECT_TRUE(absl::StartsWith(expr, "count(count by (dependency) ("))
          << p.panel["title"].as<std::string>("") << ": " << expr;
    }
  }
  EXPECT_GE(counted, 5);
  const YAML::Node table = Panel("Dependencies not closed");
  ASSERT_TRUE(table);
  EXPECT_EQ(table["type"].as<std::string>(""), "table");
  std::set<std::string> names;
  for (const std::string& expr : Exprs(table)) names.merge(MetricNames(expr));
  EXPECT_TRUE(names.count("breakerd_state_age_seconds"));
  EXPECT_TRUE(names.count("breakerd_state"));
  const std::string all = absl::StrJoin(Exprs(table), "\n");
  for (const char* state :
       {"\"half-open\"", "\"open\"", "\"forced open\"", "\"forced closed\""}) {
    EXPECT_TRUE(absl::StrContains(all, state)) << state;
  }
}

// Transitions are counted per $__interval (the query step), so one trip is
// one bar; $__rate_interval would draw it in several steps.
TEST_F(GrafanaDashboardTest, TransitionsCountEachTripOnce) {
  const YAML::Node panel = Panel("Transitions");
  ASSERT_TRUE(panel);
  for (const std::string& expr : Exprs(panel)) {
    EXPECT_TRUE(absl::StrContains(expr, "$__interval")) << expr;
    EXPECT_FALSE(absl::StrContains(expr, "$__rate_interval")) << expr;
    EXPECT_TRUE(absl::StrContains(expr, "breakerd_transitions_total")) << expr;
  }
  const YAML::Node opens = Panel("Opens");
  ASSERT_TRUE(opens);
  for (const std::string& expr : Exprs(opens)) {
    EXPECT_FALSE(absl::StrContains(expr, "$__rate_interval")) << expr;
  }
}

// The failure-rate threshold line is the policy's
// (breakerd_policy_threshold{rule="failure_rate"}), never a constant, and
// the failure rate is drawn only where the window holds min_calls.
TEST_F(GrafanaDashboardTest, ThresholdLinesComeFromThePolicy) {
  int failure_rate_panels = 0;
  for (const PlacedPanel& p : placed_) {
    const std::string title = p.panel["title"].as<std::string>("");
    const YAML::Node thresholds =
        p.panel["fieldConfig"]["defaults"]["thresholds"];
    if (thresholds && p.panel["type"].as<std::string>("") == "timeseries") {
      for (const YAML::Node& step : thresholds["steps"]) {
        EXPECT_TRUE(!step["value"] || step["value"].IsNull())
            << title << ": a constant threshold step";
      }
    }
    const std::vector<std::string> exprs = Exprs(p.panel);
    const std::string all = absl::StrJoin(exprs, "\n");
    if (!MetricNames(all).count("breakerd_failure_rate")) continue;
    ++failure_rate_panels;
    EXPECT_TRUE(absl::StrContains(
        all,
        "breakerd_policy_threshold{namespace=~\"$namespace\", "
        "pod=~\"$pod\", dependency=~\"$dependency\", "
        "rule=\"failure_rate\"}"))
        << title;
    EXPECT_FALSE(absl::StrContains(all, "0.5")) << title;
    EXPECT_EQ(OverrideColour(p.panel, "threshold"), "red") << title;
  }
  EXPECT_GE(failure_rate_panels, 2);
  const std::string rate =
      absl::StrJoin(Exprs(Panel("Failure rate vs threshold")), "\n");
  EXPECT_TRUE(absl::StrContains(rate, "breakerd_window_calls")) << rate;
  EXPECT_TRUE(absl::StrContains(rate, "rule=\"min_calls\"")) << rate;
}

// Forced open (every call refused) and forced closed (every call let
// through) mean opposite things: they never share a colour.
TEST_F(GrafanaDashboardTest, ForcedOpenAndForcedClosedHaveDistinctColours) {
  const std::string open = AlertColour(Panel("Dependencies forced open"));
  const std::string closed = AlertColour(Panel("Dependencies forced closed"));
  EXPECT_FALSE(open.empty());
  EXPECT_NE(open, closed);
  const YAML::Node states = Panel("Pods by state: $dependency");
  ASSERT_TRUE(states);
  EXPECT_NE(OverrideColour(states, "forced open"),
            OverrideColour(states, "forced closed"));
  EXPECT_EQ(OverrideColour(states, "forced open"), open);
  EXPECT_EQ(OverrideColour(states, "forced closed"), closed);
  EXPECT_EQ(OverrideColour(states, "open"), "red");
  // Any value mapping with both forced states (tables, timelines).
  WalkPanels(dash_["panels"], [&](const YAML::Node& p) {
    std::function<void(const YAML::Node&)> check = [&](const YAML::Node& n) {
      if (n.IsMap()) {
        if (n["forced open"] && n["forced closed"]) {
          EXPECT_NE(n["forced open"]["color"].as<std::string>(""),
                    n["forced closed"]["color"].as<std::string>(""))
              << p["title"].as<std::string>("");
        }
        for (const auto& kv : n) check(kv.second);
      } else if (n.IsSequence()) {
        for (const YAML::Node& c : n) check(c);
      }
    };
    if (p["fieldConfig"]) check(p["fieldConfig"]);
  });
}

// The seeds' monitoring list: tier share per chain (stacked, "none" red)
// and success per tier; retry share beside the failure rate; opens split
// confirmed / unconfirmed / first probe succeeded, and their durations;
// hung and in-flight calls; the ramp's admit share; breakerd's own RPC
// latency and version skew.
TEST_F(GrafanaDashboardTest, SeedsMonitoringListIsOnTheDashboard) {
  const YAML::Node tiers = Panel("Tier share: $chain");
  ASSERT_TRUE(tiers);
  EXPECT_EQ(tiers["fieldConfig"]["defaults"]["custom"]["stacking"]["mode"]
                .as<std::string>(""),
            "normal");
  EXPECT_EQ(OverrideColour(tiers, "tier none"), "red");
  EXPECT_TRUE(
      MetricNames(Exprs(tiers)[0]).count("breakerd_chain_decisions_total"));
  EXPECT_TRUE(MetricNames(Exprs(Panel("Success rate per tier: $chain"))[0])
                  .count("breakerd_chain_outcomes_total"));

  // Retry share sits beside the failure rate, in the same row line.
  const YAML::Node retry = Panel("Retry share of calls");
  const YAML::Node rate = Panel("Failure rate vs threshold");
  ASSERT_TRUE(retry && rate);
  EXPECT_EQ(retry["gridPos"]["y"].as<int>(), rate["gridPos"]["y"].as<int>());
  const std::string share = Exprs(retry)[0];
  EXPECT_TRUE(MetricNames(share).count("breakerd_retries_total")) << share;
  EXPECT_TRUE(MetricNames(share).count("breakerd_acquire_total")) << share;

  const std::string opens = absl::StrJoin(Exprs(Panel("Opens")), "\n");
  EXPECT_TRUE(absl::StrContains(opens, "event=\"confirmed_open\""));
  EXPECT_TRUE(
      absl::StrContains(opens, "breakerd_fleet_unconfirmed_opens_total"));
  EXPECT_TRUE(absl::StrContains(opens, "first_probe=\"succeeded\""));
  EXPECT_TRUE(
      MetricNames(
          absl::StrJoin(
              Exprs(Panel("Open duration by dependency (time range)")), "\n"))
          .count("breakerd_open_duration_seconds"));

  for (const auto& [title, metric] :
       std::vector<std::pair<std::string, std::string>>{
           {"Hung calls", "breakerd_hung_calls_total"},
           {"In-flight calls", "breakerd_inflight"},
           {"Admit share (recovery ramp)", "breakerd_admit_share"},
           {"breakerd RPC latency by method",
            "breakerd_grpc_server_handling_seconds"},
           {"Version skew: pods per version", "breakerd_build_info"}}) {
    const YAML::Node p = Panel(title);
    if (!p) continue;
    EXPECT_TRUE(MetricNames(absl::StrJoin(Exprs(p), "\n")).count(metric))
        << title;
  }
  EXPECT_TRUE(absl::StrContains(
      Exprs(Panel("breakerd RPC latency by method"))[0], "by (method, le)"));
  EXPECT_TRUE(
      absl::StrContains(Exprs(Panel("Version skew: pods per version"))[0],
                        "count by (version) (breakerd_build_info"));
}

// One aggregation per row, and each panel's description says which.
TEST_F(GrafanaDashboardTest, EveryPanelStatesItsAggregation) {
  for (const PlacedPanel& p : placed_) {
    EXPECT_TRUE(absl::StrContains(p.panel["description"].as<std::string>(""),
                                  "Aggregation"))
        << "row \"" << p.row << "\", panel \""
        << p.panel["title"].as<std::string>("") << "\"";
  }
}

TEST(PrometheusE2eTest, EveryDashboardAndRuleExpressionWorksOnRealScrapes) {
  if (!FileExists(kPrometheusBinary)) {
    GTEST_SKIP() << kPrometheusBinary
                 << " is missing (install the Debian package `prometheus`); "
                    "the real-Prometheus end-to-end test cannot run";
  }
  if (!FileExists(kRedisBinary)) {
    GTEST_SKIP() << kRedisBinary
                 << " is missing (install the Debian package `redis-server`); "
                    "the fleet series the dashboard and rules use need it";
  }
  const absl::Time test_start = absl::Now();
  const bool have_rules = FileExists(kRulesPath);

  BreakerdProcess proc;
  // Declared after `proc`: killed before proc removes its directory.
  RedisChild redis(proc.dir());
  ASSERT_TRUE(redis.Start());
  // Quorum 2 (the default, spelled out): with two members, an open that
  // only one sidecar saw stays local and unconfirmed.
  constexpr char kConfig[] = R"(
defaults:
  consecutive_failures: 5
  failure_rate: { threshold: 0.5, min_calls: 20, window: 30s }
  cooldown: { base: 300s, max: 300s, jitter: 0 }
  retry_budget: { ratio: 0.1, min_per_second: 1, ttl: 10s }
  fleet: { quorum: 2 }
policies:
  - match: "pod/*"
    cooldown: { base: 1s, max: 1s, jitter: 0 }
  - match: "llm-chain/*"
    failure_rate: { threshold: 0.5, min_calls: 10, window: 10s }
    cooldown: { base: 4s, max: 4s, jitter: 0 }
    retry_budget: { ratio: 0.5, min_per_second: 50, ttl: 10s }
    inflight: { hang_after: 300ms }
    recovery: { ramp: 1s, start_share: 0.25 }
    fleet: { quorum: 1 }
)";
  const std::string config = proc.WriteFile("config.yaml", kConfig);
  // With a state file, as the shipped components run it (its failure
  // counter is exported only then), and in fleet mode (the fleet families
  // are exported only then) on a real Redis, with a second sidecar (not
  // scraped) so that the fleet has two members.
  ASSERT_TRUE(
      proc.Start({"--config=" + config, "--state-file=" + proc.dir() + "/state",
                  "--redis=" + redis.address()}));
  auto stub = proc.BreakerStub();
  BreakerdProcess peer;
  ASSERT_TRUE(peer.Start({"--config=" + peer.WriteFile("config.yaml", kConfig),
                          "--redis=" + redis.address()}));
  auto peer_stub = peer.BreakerStub();
  for (BreakerdProcess* p : {&proc, &peer}) {
    ASSERT_TRUE(WaitUntil([p] {
      return Sample(p->Metrics(), "breakerd_fleet_members") == 2;
    })) << "the two sidecars never saw each other in the fleet:\n"
        << p->Log();
  }

  // Declared after `proc`: destroyed (stopped) before proc removes the
  // directory holding its TSDB.
  PrometheusProcess prom;
  std::string prom_config = absl::StrCat(R"(global:
  scrape_interval: 500ms
  scrape_timeout: 500ms
  evaluation_interval: 1s
scrape_configs:
  - job_name: breakerd
    static_configs:
      - targets: ["127.0.0.1:)",
                                         proc.metrics_port(), R"("]
)");
  if (have_rules) {
    absl::StrAppend(&prom_config, "rule_files:\n  - \"", kRulesPath, "\"\n");
  }
  const std::string prom_config_path =
      proc.WriteFile("prometheus.yml", prom_config);
  ASSERT_TRUE(prom.Start(proc.dir(), prom_config_path));

  // Open one breaker: 5 timeouts in a row (slow ones, for the histogram).
  for (int i = 0; i < 5; ++i) {
    v1::AcquireResponse a = Acquire(stub.get(), kTripped);
    ASSERT_TRUE(a.allowed()) << a.DebugString();
    v1::ReportResponse r =
        Report(stub.get(), kTripped, a.permit(), v1::OUTCOME_TIMEOUT, 2000);
    EXPECT_EQ(r.state(), i < 4 ? v1::STATE_CLOSED : v1::STATE_OPEN) << i;
  }
  HealthyAndRejectedTraffic(stub.get());
  ASSERT_FALSE(HasFatalFailure());

  // An open the fleet never confirms: kAlone trips on this sidecar (5
  // timeouts) while the peer calls it successfully; after the 1 s cooldown
  // this sidecar's probe succeeds and the unconfirmed episode is counted.
  for (int i = 0; i < 5; ++i) {
    v1::AcquireResponse a = Acquire(stub.get(), kAlone);
    ASSERT_TRUE(a.allowed()) << a.DebugString();
    Report(stub.get(), kAlone, a.permit(), v1::OUTCOME_TIMEOUT, 1000);
  }
  for (int i = 0; i < 3; ++i) {
    v1::AcquireResponse a = Acquire(peer_stub.get(), kAlone);
    ASSERT_TRUE(a.allowed())
        << "the peer must not follow a lone open: " << a.DebugString();
    Report(peer_stub.get(), kAlone, a.permit(), v1::OUTCOME_SUCCESS, 20);
  }
  {
    std::optional<uint64_t> probe;
    ASSERT_TRUE(WaitUntil(
        [&] {
          v1::AcquireResponse a = Acquire(stub.get(), kAlone);
          if (a.allowed() && a.probe()) probe = a.permit();
          if (!probe)
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
          return probe.has_value();
        },
        absl::Seconds(10)))
        << "no probe for " << kAlone << " within 10 s";
    v1::ReportResponse r =
        Report(stub.get(), kAlone, *probe, v1::OUTCOME_SUCCESS, 20);
    EXPECT_EQ(r.state(), v1::STATE_CLOSED) << r.DebugString();
  }
  const std::string unconfirmed = absl::StrCat(
      "breakerd_fleet_unconfirmed_opens_total{dependency=\"", kAlone, "\"}");
  EXPECT_EQ(Sample(proc.Metrics(), unconfirmed).value_or(-1), 1)
      << proc.Metrics();
  EXPECT_EQ(Sample(peer.Metrics(), unconfirmed).value_or(-1), -1)
      << "the peer never opened " << kAlone;

  // Wait until Prometheus has scraped both breakers, the tripped one open.
  {
    const absl::Time deadline = absl::Now() + absl::Seconds(15);
    std::string last;
    bool seen = false;
    while (!seen && absl::Now() < deadline) {
      YAML::Node a = prom.Query(absl::StrCat(
          "breakerd_state{dependency=\"", kTripped, "\"} == 2 and on() ",
          "count(breakerd_state{dependency=\"", kHealthy, "\"} == 0) == 1"));
      seen = StatusOf(a) == "success" && ResultSize(a) == 1;
      if (!seen) {
        last = YAML::Dump(a);
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
      }
    }
    ASSERT_TRUE(seen) << "Prometheus never scraped the open breaker; last "
                         "answer:\n"
                      << last << "\nprometheus log:\n"
                      << prom.Log();
  }
  // Prometheus scrapes its first targets a few seconds after it is ready;
  // the picture starts just before the first scrape.
  const absl::Time first_scraped = absl::Now();
  // The scripted incident on the chain (about 9 s).
  const IncidentTimes incident = PlayIncident(stub.get());
  ASSERT_FALSE(HasFatalFailure());

  // A second round, scraped after the first, so every counter has moved
  // between two samples inside the 1m windows.
  HealthyAndRejectedTraffic(stub.get());
  ASSERT_FALSE(HasFatalFailure());
  // Every query below sees a scrape taken after the traffic.
  {
    const absl::Time after = absl::Now();
    ASSERT_TRUE(WaitUntil(
        [&] {
          YAML::Node a = prom.Query("max(timestamp(breakerd_build_info))");
          return ResultSize(a) == 1 &&
                 std::stod(
                     a["data"]["result"][0]["value"][1].as<std::string>()) >
                     absl::ToDoubleSeconds(after - absl::UnixEpoch());
        },
        absl::Seconds(5)))
        << "no scrape after the traffic";
  }
  const YAML::Node dashboard = YAML::LoadFile(kDashboardPath);
  CheckIncident(prom, dashboard, incident);

  // Rejected calls / s counts the clients' refusals too: it reads more than
  // the sidecar's own rejected_* decisions.
  {
    const std::vector<std::string> exprs =
        PanelExprs(dashboard, "Rejected calls / s");
    ASSERT_EQ(exprs.size(), 1u);
    const std::string q = absl::StrCat(
        "(", SubstituteVariables(exprs[0]), ") - (sum(rate(breakerd_acquire_",
        "total{decision=~\"rejected_.*\"}[1m])) or vector(0))");
    YAML::Node a = prom.Query(q);
    ASSERT_EQ(ResultSize(a), 1u) << q << "\n" << YAML::Dump(a);
    EXPECT_GT(std::stod(a["data"]["result"][0]["value"][1].as<std::string>()),
              0)
        << "the clients' refusals are not counted: " << q;
  }

  // (c) The tripped breaker's state series reads 2 (open).
  {
    YAML::Node a = prom.Query(
        absl::StrCat("breakerd_state{dependency=\"", kTripped, "\"}"));
    ASSERT_EQ(StatusOf(a), "success") << YAML::Dump(a);
    ASSERT_EQ(ResultSize(a), 1u) << YAML::Dump(a);
    EXPECT_EQ(a["data"]["result"][0]["value"][1].as<std::string>(), "2");
    YAML::Node h = prom.Query(
        absl::StrCat("breakerd_state{dependency=\"", kHealthy, "\"}"));
    ASSERT_EQ(ResultSize(h), 1u) << YAML::Dump(h);
    EXPECT_EQ(h["data"]["result"][0]["value"][1].as<std::string>(), "0");
  }
  // The fleet series as Prometheus scraped them: two members, the one
  // unconfirmed open, the fleet's window read back.
  for (const auto& [query, value] :
       std::vector<std::pair<std::string, std::string>>{
           {"breakerd_fleet_members", "2"},
           {unconfirmed, "1"},
           {"breakerd_fleet_connected", "1"},
           {"breakerd_fleet_events_total{event=\"window_sync\"} > bool 0",
            "1"}}) {
    const absl::Time deadline = absl::Now() + absl::Seconds(10);
    YAML::Node a;
    std::string got;
    while (true) {
      a = prom.Query(query);
      got = ResultSize(a) == 1
                ? a["data"]["result"][0]["value"][1].as<std::string>()
                : "";
      if (got == value || absl::Now() >= deadline) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
    }
    EXPECT_EQ(got, value) << query << "\n" << YAML::Dump(a);
  }

  // (a) Every dashboard expression parses and returns data.
  const std::vector<DashboardTarget> targets = DashboardTargets(dashboard);
  ASSERT_GE(targets.size(), 12u);
  const absl::Time data_deadline = absl::Now() + absl::Seconds(30);
  std::vector<std::string> allowed_empty;
  for (const DashboardTarget& t : targets) {
    const std::string expr = SubstituteVariables(t.expr);
    std::optional<std::string> empty_reason;
    for (const auto& [needle, reason] : MayBeEmpty()) {
      if (absl::StrContains(t.expr, needle)) empty_reason = reason;
    }
    YAML::Node answer;
    while (true) {
      answer = prom.Query(expr);
      if (StatusOf(answer) != "success") break;  // A parse error won't heal.
      if (ResultSize(answer) > 0 || empty_reason.has_value()) break;
      if (absl::Now() >= data_deadline) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
    }
    EXPECT_EQ(StatusOf(answer), "success")
        << "panel \"" << t.panel << "\": " << expr << "\n"
        << ErrorOf(answer);
    if (empty_reason.has_value()) {
      if (ResultSize(answer) == 0) {
        allowed_empty.push_back(
            absl::StrCat(t.panel, " (", *empty_reason, ")"));
      }
    } else {
      EXPECT_GT(ResultSize(answer), 0u)
          << "panel \"" << t.panel << "\" has no data: " << expr;
    }
  }
  if (!allowed_empty.empty()) {
    std::cout << "Dashboard expressions without data (allowed): "
              << absl::StrJoin(allowed_empty, "; ") << "\n";
  }

  // (a') Every template variable's query works: label_values(...) through
  // its selector, query_result(...) as is; the dependency and chain
  // variables offer the incident's dependencies and chain.
  for (const YAML::Node& v : dashboard["templating"]["list"]) {
    if (v["type"].as<std::string>("") != "query") continue;
    const std::string name = v["name"].as<std::string>();
    const std::string def =
        SubstituteVariables(v["definition"].as<std::string>(""));
    std::string expr;
    static const std::regex kLabelValues(R"(^label_values\((.*),\s*\w+\)$)");
    static const std::regex kQueryResult(R"(^query_result\(([\s\S]*)\)$)");
    std::smatch m;
    if (std::regex_match(def, m, kQueryResult)) {
      expr = m[1].str();
    } else if (std::regex_match(def, m, kLabelValues)) {
      expr = m[1].str();
    } else {
      ADD_FAILURE() << "variable " << name << ": unknown query " << def;
      continue;
    }
    YAML::Node a = prom.Query(expr);
    EXPECT_EQ(StatusOf(a), "success")
        << "variable " << name << ": " << expr << "\n"
        << ErrorOf(a);
    EXPECT_GT(ResultSize(a), 0u) << "variable " << name << ": " << expr;
    const std::string dump = YAML::Dump(a);
    if (name == "dependency") {
      EXPECT_TRUE(absl::StrContains(dump, kPrimary)) << dump;
    } else if (name == "chain") {
      EXPECT_TRUE(absl::StrContains(dump, kChain)) << dump;
    }
  }

  // (b) Every alert and recording-rule expression parses, and Prometheus
  // loaded and evaluates the rule file without errors.
  std::vector<RuleExpr> rules;
  if (have_rules) {
    rules = RuleExprs(YAML::LoadFile(kRulesPath));
    EXPECT_FALSE(rules.empty()) << kRulesPath << " has no rules";
    for (const RuleExpr& r : rules) {
      YAML::Node answer = prom.Query(r.expr);
      EXPECT_EQ(StatusOf(answer), "success")
          << "rule " << r.name << ": " << r.expr << "\n"
          << ErrorOf(answer);
    }
    // Each loaded rule has been evaluated (health "ok") within a few
    // evaluation intervals; "err" carries the evaluation error.
    const absl::Time deadline = absl::Now() + absl::Seconds(10);
    std::vector<std::string> problems;
    size_t loaded = 0;
    do {
      problems.clear();
      loaded = 0;
      YAML::Node a = prom.GetJson("/api/v1/rules");
      if (StatusOf(a) != "success") {
        problems.push_back("GET /api/v1/rules: " + YAML::Dump(a));
      } else {
        for (const YAML::Node& g : a["data"]["groups"]) {
          for (const YAML::Node& r : g["rules"]) {
            ++loaded;
            const std::string health = r["health"].as<std::string>("");
            if (health != "ok") {
              problems.push_back(absl::StrCat(
                  r["name"].as<std::string>(""), ": health ", health, " ",
                  r["lastError"].as<std::string>("")));
            }
          }
        }
      }
      if (problems.empty()) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
    } while (absl::Now() < deadline);
    EXPECT_EQ(loaded, rules.size()) << "rules loaded by Prometheus";
    EXPECT_TRUE(problems.empty()) << absl::StrJoin(problems, "\n");
  } else {
    std::cout << kRulesPath << " does not exist: rule checks skipped\n";
  }

  // (d) Every metric name the dashboard and the rules use exists in a real
  // scrape of breakerd.
  std::set<std::string> used;
  for (const DashboardTarget& t : targets) used.merge(MetricNames(t.expr));
  for (const YAML::Node& v : dashboard["templating"]["list"]) {
    if (v["definition"]) {
      used.merge(MetricNames(v["definition"].as<std::string>()));
    }
  }
  for (const RuleExpr& r : rules) used.merge(MetricNames(r.expr));
  std::set<std::string> scraped;
  for (const PromSample& s : ParsePrometheus(proc.Metrics())) {
    scraped.insert(s.name);
    for (absl::string_view suffix : {"_bucket", "_sum", "_count"}) {
      if (absl::EndsWith(s.name, suffix)) {
        scraped.insert(s.name.substr(0, s.name.size() - suffix.size()));
      }
    }
  }
  EXPECT_GE(used.size(), 7u) << absl::StrJoin(used, ", ");
  for (const std::string& name : used) {
    EXPECT_TRUE(scraped.count(name))
        << name << " is used by the dashboard or the rules but is not in "
        << "breakerd's /metrics";
  }

  // (e) render.py draws every panel of the dashboard from this Prometheus
  // (first scrape to now, the incident included) into one PNG, and finds
  // data for each. Its matplotlib comes from a venv in the build tree.
  const char* render = std::getenv("BREAKERD_RENDER");
  if (render != nullptr && std::string(render) == "skip") {
    std::cout << "BREAKERD_RENDER=skip: render.py not run\n";
  } else {
    const char* keep = std::getenv("BREAKERD_RENDER_PNG");
    const std::string png = keep != nullptr && *keep != '\0'
                                ? std::string(keep)
                                : proc.dir() + "/breakerd-incident.png";
    ::unlink(png.c_str());
    const std::string binary = BREAKERD_BINARY;
    const std::string venv =
        binary.substr(0, binary.rfind('/')) + "/grafana-render-venv";
    const std::string log = proc.dir() + "/render.log";
    const absl::Time started = absl::Now();
    const std::optional<int> rc =
        RunLogged({"/usr/bin/env", "python3", kRenderScript, "--prometheus",
                   absl::StrCat("http://127.0.0.1:", prom.port()), "--start",
                   UnixSeconds(first_scraped - absl::Seconds(2)), "--end",
                   UnixSeconds(absl::Now()), "--scrape-interval", "500ms",
                   "--var", "top=1", "--venv", venv, "--out", png},
                  log, absl::Minutes(10));
    const std::string out = ReadFileOrEmpty(log);
    EXPECT_EQ(rc, std::optional<int>(0)) << "render.py:\n" << out;
    EXPECT_TRUE(absl::StrContains(out, "every panel has data")) << out;
    EXPECT_EQ(ReadFileOrEmpty(png).substr(0, 8),
              std::string("\x89PNG\r\n\x1a\n", 8))
        << png << " is not a PNG";
    const size_t summary = out.rfind("render.py: ");
    std::cout << (summary == std::string::npos ? out : out.substr(summary))
              << "  (" << absl::FormatDuration(absl::Now() - started) << ")\n";
  }

  prom.Stop();
  for (BreakerdProcess* p : {&proc, &peer}) {
    EXPECT_EQ(p->Signal(SIGTERM), true);
    EXPECT_TRUE(p->WaitExit(absl::Seconds(10)).has_value())
        << "breakerd did not exit on SIGTERM";
  }
  std::cout << "prometheus e2e: " << targets.size() << " dashboard exprs, "
            << rules.size() << " rule exprs, " << used.size()
            << " metric names, "
            << absl::ToDoubleSeconds(absl::Now() - test_start) << " s\n";
  if (HasFailure()) {
    std::cout << "prometheus log:\n" << prom.Log() << "\n";
  }
}

}  // namespace
}  // namespace breakerd

// End-to-end test of the operator artefacts against a real Prometheus:
// starts the real breakerd binary and a real Prometheus server (the Debian
// package's /usr/bin/prometheus) scraping it every second, drives traffic
// that opens one breaker and leaves another closed, and then evaluates every
// PromQL expression of deploy/grafana/breakerd.json (template variables
// substituted) and of deploy/prometheus/breakerd-rules.yaml (if present)
// through Prometheus's HTTP API. Every metric name those expressions use
// must exist in a real scrape of breakerd. The scraped breakerd runs in
// fleet mode on a real redis-server with a second sidecar beside it, so the
// fleet series are real too (members 2, fleet windows read back, and one
// open that the fleet never confirmed, ended by its probe).
//
// Every wait is bounded and polls; nothing sleeps a fixed time and assumes.
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <chrono>
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

// The breaker that opens (5 timeouts, long cooldown so it stays open for the
// whole test) and the one that stays closed.
constexpr char kTripped[] = "llm/tripped";
constexpr char kHealthy[] = "db/healthy";
// Opens on the scraped sidecar only (the other one calls it successfully),
// so the fleet never confirms it; its probe succeeds after a 1 s cooldown
// and the episode is counted in breakerd_fleet_unconfirmed_opens_total.
constexpr char kAlone[] = "pod/alone";

// Dashboard expressions that may legitimately return no data in this
// scenario: only parsing (status "success") is asserted for them. Keyed by a
// substring of the expression, with the reason. Empty today: the summary
// stats end in `or vector(0)`, and the scenario produces every other series
// (open breaker, rejections, retries, an auth error, latencies, and the
// fleet's members, windows, events and an unconfirmed open).
const std::map<std::string, std::string>& MayBeEmpty() {
  static const auto* m = new std::map<std::string, std::string>{};
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

// Substitutes Grafana template variables the way the dashboard would with
// "All" namespaces and pods and the three test dependencies selected.
std::string SubstituteVariables(const std::string& expr) {
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
      out += absl::StrCat("(", kTripped, "|", kHealthy, "|", kAlone, ")");
    } else if (name == "__rate_interval" || name == "__interval" ||
               name == "__range") {
      out += "1m";
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
// one auth error; rejections on the tripped breaker (opened by TripOnce).
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
}

// --- the tests --------------------------------------------------------------

// Static properties of the dashboard the issue asks for; no processes.
TEST(GrafanaDashboardTest, StructureAndDatasourceVariable) {
  YAML::Node dash = YAML::LoadFile(kDashboardPath);
  EXPECT_EQ(dash["uid"].as<std::string>(""), "breakerd");
  EXPECT_GE(dash["schemaVersion"].as<int>(0), 36);

  std::map<std::string, YAML::Node> vars;
  for (const YAML::Node& v : dash["templating"]["list"]) {
    vars[v["name"].as<std::string>()] = v;
  }
  ASSERT_TRUE(vars.count("datasource"));
  EXPECT_EQ(vars["datasource"]["type"].as<std::string>(), "datasource");
  EXPECT_EQ(vars["datasource"]["query"].as<std::string>(), "prometheus");
  for (const char* name : {"namespace", "pod", "dependency"}) {
    ASSERT_TRUE(vars.count(name)) << name;
    EXPECT_EQ(vars[name]["type"].as<std::string>(), "query") << name;
    EXPECT_TRUE(vars[name]["multi"].as<bool>()) << name;
    EXPECT_TRUE(vars[name]["includeAll"].as<bool>()) << name;
    EXPECT_EQ(vars[name]["allValue"].as<std::string>(""), ".*") << name;
    EXPECT_TRUE(absl::StrContains(vars[name]["definition"].as<std::string>(),
                                  "label_values(breakerd_state"))
        << name;
    EXPECT_EQ(vars[name]["datasource"]["uid"].as<std::string>(""),
              "${datasource}")
        << name;
  }

  int panels = 0;
  bool repeated_row = false;
  std::set<std::string> types;
  WalkPanels(dash["panels"], [&](const YAML::Node& p) {
    const std::string title = p["title"].as<std::string>("");
    const std::string type = p["type"].as<std::string>("");
    types.insert(type);
    EXPECT_EQ(p["datasource"]["uid"].as<std::string>(""), "${datasource}")
        << title;
    if (type == "row") {
      if (p["repeat"].as<std::string>("") == "dependency") repeated_row = true;
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
      // Per-breaker series filter on all three; the per-process families
      // have no dependency label.
      for (const char* var : {"$namespace", "$pod"}) {
        EXPECT_TRUE(absl::StrContains(expr, var)) << title << ": " << expr;
      }
      bool per_process = false;
      for (const char* name : {"breakerd_breakers", "breakerd_fleet_members",
                               "breakerd_fleet_events_total"}) {
        if (MetricNames(expr).count(name)) per_process = true;
      }
      if (!per_process) {
        EXPECT_TRUE(absl::StrContains(expr, "$dependency"))
            << title << ": " << expr;
      }
    }
  });
  EXPECT_TRUE(repeated_row);
  EXPECT_GE(panels, 16);
  EXPECT_TRUE(types.count("state-timeline"));
  EXPECT_TRUE(types.count("stat"));

  // The Fleet row (issue 16): after a row whose title starts with "Fleet",
  // panels for the members, the unconfirmed opens by pod, the fleet events,
  // and one panel comparing the fleet's failure rate with each pod's own.
  std::set<std::string> fleet_metrics;
  bool fleet_vs_local = false;
  bool in_fleet_row = false;
  for (const YAML::Node& p : dash["panels"]) {
    if (p["type"].as<std::string>("") == "row") {
      in_fleet_row = absl::StartsWith(p["title"].as<std::string>(""), "Fleet");
      continue;
    }
    if (!in_fleet_row || !p["targets"]) continue;
    std::set<std::string> names;
    for (const YAML::Node& t : p["targets"]) {
      names.merge(MetricNames(t["expr"].as<std::string>("")));
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
  scrape_interval: 1s
  scrape_timeout: 1s
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
  // A second round, scraped after the first, so every counter has moved
  // between two samples inside the 1m windows.
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  HealthyAndRejectedTraffic(stub.get());
  ASSERT_FALSE(HasFatalFailure());

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
  const YAML::Node dashboard = YAML::LoadFile(kDashboardPath);
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

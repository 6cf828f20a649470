#include "client_fixture.h"

#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <iterator>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "grpcpp/client_context.h"

namespace breakerd::client {
namespace {

// Binds `fd` to 127.0.0.1:`port` (0: any free port) and listens.
bool Listen(int fd, int port) {
  const int one = 1;
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return fd >= 0 &&
         setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) == 0 &&
         bind(fd, reinterpret_cast<const sockaddr*>(&address),
              sizeof(address)) == 0 &&
         listen(fd, 64) == 0;
}

// CPU time the whole machine has spent busy, in clock ticks: the first
// line of /proc/stat, "cpu user nice system idle iowait irq softirq steal
// ...", less idle and iowait.
int64_t BusyTicks() {
  std::ifstream in("/proc/stat");
  std::string cpu;
  int64_t fields[8] = {};
  in >> cpu;
  for (int64_t& field : fields) in >> field;
  int64_t busy = 0;
  for (int64_t field : fields) busy += field;
  return busy - fields[3] - fields[4];
}

// utime + stime of process `pid` (all its threads, exited ones included),
// in clock ticks; 0 if it is gone.
int64_t ProcessTicks(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/stat"));
  std::string stat((std::istreambuf_iterator<char>(in)),
                   std::istreambuf_iterator<char>());
  // "pid (comm) S ppid ...": utime and stime are the 12th and 13th fields
  // after the last ')'.
  const size_t paren = stat.rfind(')');
  if (paren == std::string::npos) return 0;
  std::vector<absl::string_view> fields = absl::StrSplit(
      absl::string_view(stat).substr(paren + 1), ' ', absl::SkipEmpty());
  int64_t utime = 0;
  int64_t stime = 0;
  if (fields.size() < 13 || !absl::SimpleAtoi(fields[11], &utime) ||
      !absl::SimpleAtoi(fields[12], &stime)) {
    return 0;
  }
  return utime + stime;
}

}  // namespace

OtherProcessesCpu::OtherProcessesCpu(pid_t pid)
    : pid_(pid),
      busy_ticks_(BusyTicks()),
      own_ticks_(OwnTicks()),
      start_(absl::Now()) {}

int64_t OtherProcessesCpu::OwnTicks() const {
  return ProcessTicks(getpid()) + ProcessTicks(pid_);
}

double OtherProcessesCpu::Cpus() const {
  const double ticks_per_second = static_cast<double>(sysconf(_SC_CLK_TCK));
  const double seconds = std::max(absl::ToDoubleSeconds(absl::Now() - start_),
                                  1 / ticks_per_second);
  const int64_t theirs =
      (BusyTicks() - busy_ticks_) - (OwnTicks() - own_ticks_);
  return std::max<int64_t>(theirs, 0) / ticks_per_second / seconds;
}

bool IsStopped(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/stat"));
  std::string stat((std::istreambuf_iterator<char>(in)),
                   std::istreambuf_iterator<char>());
  // "pid (comm) S ...": the state follows the last ')'.
  const size_t paren = stat.rfind(')');
  return paren != std::string::npos && paren + 2 < stat.size() &&
         stat[paren + 2] == 'T';
}

int UnusedPort() {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int port = -1;
  sockaddr_in address{};
  socklen_t length = sizeof(address);
  if (Listen(fd, 0) &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0) {
    port = ntohs(address.sin_port);
  }
  if (fd >= 0) close(fd);
  return port;
}

int PortOf(const std::string& address) {
  int port = -1;
  if (!absl::SimpleAtoi(address.substr(address.rfind(':') + 1), &port)) {
    return -1;
  }
  return port;
}

// --- PortHolder -------------------------------------------------------------

PortHolder::PortHolder(int port)
    : fd_(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)),
      listening_(Listen(fd_, port)) {
  if (listening_) accept_thread_ = std::thread([this] { AcceptLoop(); });
}

PortHolder::~PortHolder() {
  stopping_.store(true);
  if (accept_thread_.joinable()) accept_thread_.join();
  if (fd_ >= 0) close(fd_);
}

absl::Time PortHolder::last_attempt() const {
  absl::MutexLock lock(&mu_);
  return last_attempt_;
}

void PortHolder::AcceptLoop() {
  pollfd ready{fd_, POLLIN, 0};
  while (!stopping_.load()) {
    if (poll(&ready, 1, /*timeout_ms=*/5) <= 0) continue;
    const int connection = accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (connection < 0) continue;
    close(connection);
    absl::MutexLock lock(&mu_);
    last_attempt_ = absl::Now();
  }
}

// --- ClientTest -------------------------------------------------------------

void ClientTest::SetUp() { StartBreakerd(&proc_); }

void ClientTest::TearDown() {
  if (proc_.running()) proc_.Signal(SIGCONT);
}

void ClientTest::StartBreakerd(BreakerdProcess* proc,
                               std::vector<std::string> extra) {
  // A copy in the process's own folder: a test may rewrite it to reload.
  std::ifstream shared(kConfigPath);
  ASSERT_TRUE(shared.good()) << "cannot read " << kConfigPath;
  const std::string config((std::istreambuf_iterator<char>(shared)),
                           std::istreambuf_iterator<char>());
  extra.push_back("--config=" + proc->WriteFile("config.yaml", config));
  extra.push_back("--admin-token-file=" + proc->WriteFile("token", kToken));
  ASSERT_TRUE(proc->Start(extra));
}

std::unique_ptr<Client> ClientTest::NewClient(ClientOptions options,
                                              int distinct_id) {
  options.channel = proc_.Channel(distinct_id);
  return NewConnectedClient(std::move(options));
}

std::unique_ptr<Client> ClientTest::NewClientOwningItsChannel(
    ClientOptions options) {
  options.channel = nullptr;
  return NewConnectedClient(std::move(options));
}

std::unique_ptr<Client> ClientTest::NewClientAsConfigured(
    ClientOptions options) {
  options.channel = nullptr;
  return NewConnectedClient(std::move(options), /*generous_timeout=*/false);
}

ClientOptions ClientTest::QuietOptions(ClientOptions options) {
  options.log = [this](absl::string_view line) {
    absl::MutexLock lock(&log_mu_);
    log_lines_.push_back(std::string(line));
  };
  return options;
}

std::unique_ptr<Client> ClientTest::NewConnectedClient(ClientOptions options,
                                                       bool generous_timeout) {
  options.target = proc_.tcp_address();
  options = QuietOptions(std::move(options));
  // Generous enough for a loaded CI machine; the fail-open tests set their
  // own.
  if (generous_timeout && options.decision_timeout == absl::Milliseconds(20)) {
    options.decision_timeout = absl::Seconds(2);
  }
  auto client = Client::Create(std::move(options));
  EXPECT_TRUE(client.ok()) << client.status();
  EXPECT_TRUE((*client)->WaitForConnected(kWait));
  return std::move(*client);
}

int ClientTest::LogLines(absl::string_view substring) {
  absl::MutexLock lock(&log_mu_);
  int n = 0;
  for (const std::string& line : log_lines_) {
    if (absl::StrContains(line, substring)) ++n;
  }
  return n;
}

std::string ClientTest::LogText() {
  absl::MutexLock lock(&log_mu_);
  return absl::StrJoin(log_lines_, "\n");
}

double ClientTest::Metric(const std::string& selector) {
  return Sample(proc_.Metrics(), selector).value_or(0);
}

double ClientTest::Reports(const std::string& dep, const std::string& cls,
                           const std::string& effect) {
  return Metric(absl::StrCat("breakerd_reports_total{dependency=\"", dep,
                             "\",class=\"", cls, "\",effect=\"", effect,
                             "\"}"));
}

double ClientTest::Acquires(const std::string& dep,
                            const std::string& decision) {
  return Metric(absl::StrCat("breakerd_acquire_total{dependency=\"", dep,
                             "\",decision=\"", decision, "\"}"));
}

double ClientTest::SumFor(absl::string_view name, absl::string_view dep) {
  double sum = 0;
  for (const PromSample& s : ParsePrometheus(proc_.Metrics())) {
    auto it = s.labels.find("dependency");
    if (s.name == name && it != s.labels.end() && it->second == dep) {
      sum += s.value;
    }
  }
  return sum;
}

double ClientTest::Granted(const std::string& dep) {
  return Acquires(dep, "allowed") + Acquires(dep, "probe");
}

double ClientTest::ReportsFor(const std::string& dep) {
  return SumFor("breakerd_reports_total", dep);
}

void ClientTest::ForceOpen(const std::string& dep,
                           const BreakerdProcess* proc) {
  auto admin = (proc != nullptr ? proc : &proc_)->AdminStub();
  grpc::ClientContext ctx;
  ctx.set_wait_for_ready(true);
  ctx.set_deadline(std::chrono::system_clock::now() +
                   absl::ToChronoNanoseconds(kWait));
  ctx.AddMetadata("authorization", BearerToken(kToken));
  v1::ForceOpenRequest request;
  request.set_dependency(dep);
  v1::AdminResponse response;
  ASSERT_TRUE(admin->ForceOpen(&ctx, request, &response).ok());
}

void ClientTest::Trip(Client* client, const std::string& dep) {
  for (int i = 0; i < 3; ++i) {
    absl::Status s =
        client->Do(dep, [] { return absl::UnavailableError("upstream down"); });
    ASSERT_EQ(s.code(), absl::StatusCode::kUnavailable);
    ASSERT_FALSE(IsBreakerOpen(s)) << s;
  }
}

}  // namespace breakerd::client

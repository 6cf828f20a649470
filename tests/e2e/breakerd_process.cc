#include "tests/e2e/breakerd_process.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"

extern char** environ;

namespace breakerd {
namespace {

constexpr absl::Duration kPollInterval = absl::Milliseconds(5);

std::string ReadWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The string value of `"key": "..."` in a one-line JSON object, unescaped
// (only the escapes a log writer would produce for paths and addresses).
std::optional<std::string> JsonStringField(absl::string_view line,
                                           absl::string_view key) {
  const std::string quoted = absl::StrCat("\"", key, "\"");
  size_t pos = 0;
  while ((pos = line.find(quoted, pos)) != absl::string_view::npos) {
    size_t i = pos + quoted.size();
    while (i < line.size() && line[i] == ' ') ++i;
    if (i >= line.size() || line[i] != ':') {
      pos += quoted.size();
      continue;
    }
    ++i;
    while (i < line.size() && line[i] == ' ') ++i;
    if (i >= line.size() || line[i] != '"') return std::nullopt;
    ++i;
    std::string out;
    for (; i < line.size(); ++i) {
      char c = line[i];
      if (c == '"') return out;
      if (c == '\\' && i + 1 < line.size()) {
        char e = line[++i];
        switch (e) {
          case 'n':
            out.push_back('\n');
            break;
          case 't':
            out.push_back('\t');
            break;
          default:
            out.push_back(e);  // \" \\ \/
        }
        continue;
      }
      out.push_back(c);
    }
    return std::nullopt;
  }
  return std::nullopt;
}

// Reads a quoted Prometheus label value starting after the opening quote at
// text[*i]; leaves *i after the closing quote.
bool ReadLabelValue(absl::string_view text, size_t* i, std::string* out) {
  for (; *i < text.size(); ++*i) {
    char c = text[*i];
    if (c == '"') {
      ++*i;
      return true;
    }
    if (c == '\\' && *i + 1 < text.size()) {
      char e = text[++*i];
      out->push_back(e == 'n' ? '\n' : e);
      continue;
    }
    out->push_back(c);
  }
  return false;
}

// Parses `name{a="b",...}` (labels optional) from the start of `text`; sets
// *end to the index after it. Returns false if malformed.
bool ParseSeries(absl::string_view text, PromSample* sample, size_t* end) {
  size_t i = 0;
  while (i < text.size() && text[i] != '{' && text[i] != ' ' &&
         text[i] != '\t') {
    ++i;
  }
  sample->name = std::string(text.substr(0, i));
  if (sample->name.empty()) return false;
  if (i < text.size() && text[i] == '{') {
    ++i;
    while (true) {
      while (i < text.size() && (text[i] == ',' || text[i] == ' ')) ++i;
      if (i >= text.size()) return false;
      if (text[i] == '}') {
        ++i;
        break;
      }
      size_t eq = text.find('=', i);
      if (eq == absl::string_view::npos) return false;
      std::string label(absl::StripAsciiWhitespace(text.substr(i, eq - i)));
      i = eq + 1;
      if (i >= text.size() || text[i] != '"') return false;
      ++i;
      std::string value;
      if (!ReadLabelValue(text, &i, &value)) return false;
      sample->labels[label] = std::move(value);
    }
  }
  *end = i;
  return true;
}

}  // namespace

std::vector<PromSample> ParsePrometheus(absl::string_view text) {
  std::vector<PromSample> samples;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line[0] == '#') continue;
    PromSample sample;
    size_t end = 0;
    if (!ParseSeries(line, &sample, &end)) continue;
    absl::string_view rest =
        absl::StripLeadingAsciiWhitespace(line.substr(end));
    // The value, then an optional timestamp.
    std::string value_text(rest.substr(0, rest.find_first_of(" \t")));
    if (value_text.empty()) continue;
    char* parse_end = nullptr;
    sample.value = std::strtod(value_text.c_str(), &parse_end);
    if (parse_end != value_text.c_str() + value_text.size()) continue;
    samples.push_back(std::move(sample));
  }
  return samples;
}

std::optional<double> Sample(absl::string_view text,
                             absl::string_view selector) {
  PromSample want;
  size_t end = 0;
  selector = absl::StripAsciiWhitespace(selector);
  if (!ParseSeries(selector, &want, &end) || end != selector.size()) {
    return std::nullopt;
  }
  for (const PromSample& s : ParsePrometheus(text)) {
    if (s.name == want.name && s.labels == want.labels) return s.value;
  }
  return std::nullopt;
}

int ConnectLoopback(int port, absl::Duration timeout, int receive_buffer) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  if (receive_buffer > 0) {
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &receive_buffer,
               sizeof(receive_buffer));
  }
  const timeval tv = absl::ToTimeval(timeout);
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

HttpResponse HttpGet(int port, absl::string_view path, absl::Duration timeout) {
  HttpResponse response;
  const int fd = ConnectLoopback(port, timeout);
  if (fd < 0) return response;
  const std::string request =
      absl::StrCat("GET ", path,
                   " HTTP/1.0\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
  size_t sent = 0;
  while (sent < request.size()) {
    ssize_t n =
        send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) {
      close(fd);
      return response;
    }
    sent += static_cast<size_t>(n);
  }
  const absl::Time deadline = absl::Now() + timeout;
  std::string raw;
  char buf[16384];
  while (absl::Now() < deadline) {
    ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      close(fd);
      return response;  // timeout or error
    }
    raw.append(buf, static_cast<size_t>(n));
  }
  close(fd);

  size_t header_end = raw.find("\r\n\r\n");
  if (header_end == std::string::npos) return response;
  std::string headers = raw.substr(0, header_end);
  std::string body = raw.substr(header_end + 4);
  // "HTTP/1.1 200 OK"
  std::vector<absl::string_view> status_line =
      absl::StrSplit(absl::string_view(headers).substr(0, headers.find("\r\n")),
                     absl::MaxSplits(' ', 2));
  int status = -1;
  if (status_line.size() < 2 || !absl::StartsWith(status_line[0], "HTTP/") ||
      !absl::SimpleAtoi(status_line[1], &status)) {
    return response;
  }
  if (absl::StrContains(absl::AsciiStrToLower(headers),
                        "transfer-encoding: chunked")) {
    std::string decoded;
    size_t i = 0;
    while (i < body.size()) {
      size_t eol = body.find("\r\n", i);
      if (eol == std::string::npos) return response;
      std::string size_text = body.substr(i, eol - i);
      size_text = size_text.substr(0, size_text.find(';'));
      size_t chunk = std::strtoul(size_text.c_str(), nullptr, 16);
      i = eol + 2;
      if (chunk == 0) break;
      if (i + chunk > body.size()) return response;
      decoded.append(body, i, chunk);
      i += chunk + 2;
    }
    body = std::move(decoded);
  }
  response.status = status;
  response.headers = std::move(headers);
  response.body = std::move(body);
  return response;
}

int SpawnLogged(std::vector<std::string> args, const std::string& log_path,
                pid_t* pid, std::vector<std::string> extra_env) {
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  // Later entries win in getenv, which takes the first match: put the
  // additions first.
  std::vector<char*> envp;
  for (auto it = extra_env.rbegin(); it != extra_env.rend(); ++it) {
    envp.push_back(it->data());
  }
  for (char** e = environ; *e != nullptr; ++e) envp.push_back(*e);
  envp.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, log_path.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  // The child starts with no blocked signals and default dispositions for
  // the ones the tests send, whatever the test runner set up.
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t empty, defaults;
  sigemptyset(&empty);
  sigemptyset(&defaults);
  for (int s : {SIGHUP, SIGTERM, SIGINT, SIGPIPE}) sigaddset(&defaults, s);
  posix_spawnattr_setsigmask(&attr, &empty);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setflags(&attr,
                           POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  const int rc =
      posix_spawn(pid, argv[0], &actions, &attr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  return rc;
}

bool WaitUntil(const std::function<bool()>& done, absl::Duration timeout) {
  const absl::Time end = absl::Now() + timeout;
  while (absl::Now() < end) {
    if (done()) return true;
    absl::SleepFor(absl::Milliseconds(5));
  }
  return done();
}

std::string BearerToken(absl::string_view token) {
  return absl::StrCat("Bearer ", token);
}

BreakerdProcess::BreakerdProcess() {
  // Short, so that <dir>/breakerd.sock stays far below the 108-byte limit of
  // a unix socket path.
  char templ[] = "/tmp/bkd-e2e-XXXXXX";
  if (mkdtemp(templ) == nullptr) {
    ADD_FAILURE() << "mkdtemp: " << std::strerror(errno);
    dir_ = "/tmp";
  } else {
    dir_ = templ;
  }
  log_path_ = dir_ + "/breakerd.log";
}

BreakerdProcess::~BreakerdProcess() {
  if (running()) {
    kill(pid_, SIGKILL);
    int status = 0;
    while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
  }
  if (::testing::Test::HasFailure() && pid_ > 0) {
    std::string log = Log();
    constexpr size_t kMaxShown = 20000;
    if (log.size() > kMaxShown)
      log = "..." + log.substr(log.size() - kMaxShown);
    std::cerr << "---- breakerd log (" << log_path_ << ") ----\n"
              << log << "---- end of breakerd log ----\n";
  }
  if (dir_ != "/tmp") {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
}

std::string BreakerdProcess::WriteFile(absl::string_view name,
                                       absl::string_view content) {
  const std::string path = absl::StrCat(dir_, "/", name);
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << content;
    out.flush();
    if (!out) ADD_FAILURE() << "cannot write " << tmp;
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    ADD_FAILURE() << "rename " << tmp << ": " << std::strerror(errno);
  }
  return path;
}

::testing::AssertionResult BreakerdProcess::Start(
    const std::vector<std::string>& extra_flags, bool with_unix_socket,
    absl::Duration timeout) {
  if (pid_ > 0) return ::testing::AssertionFailure() << "already started";
  std::string listen = "--listen=127.0.0.1:0";
  if (with_unix_socket) absl::StrAppend(&listen, ",unix:", unix_socket_path());
  std::vector<std::string> args = {BREAKERD_BINARY, listen,
                                   "--metrics-listen=127.0.0.1:0"};
  args.insert(args.end(), extra_flags.begin(), extra_flags.end());
  pid_t pid = -1;
  const int rc = SpawnLogged(args, log_path_, &pid, extra_env_);
  if (rc != 0) {
    return ::testing::AssertionFailure()
           << "posix_spawn " << args[0] << ": " << std::strerror(rc);
  }
  pid_ = pid;
  const std::string command = absl::StrJoin(args, " ");

  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    const std::string log = Log();
    for (absl::string_view line : absl::StrSplit(log, '\n')) {
      if (!absl::StrContains(line, "\"event\":\"serving\"")) continue;
      std::optional<std::string> grpc = JsonStringField(line, "grpc");
      std::optional<std::string> metrics = JsonStringField(line, "metrics");
      int port = -1;
      if (grpc.has_value() && metrics.has_value()) {
        size_t colon = metrics->rfind(':');
        if (colon == std::string::npos ||
            !absl::SimpleAtoi(metrics->substr(colon + 1), &port)) {
          port = -1;
        }
      }
      if (!grpc.has_value() || grpc->empty() || port <= 0) {
        return ::testing::AssertionFailure()
               << "cannot parse the serving line of `" << command
               << "`: " << line << "\nlog:\n"
               << log;
      }
      grpc_addresses_ = absl::StrSplit(*grpc, ',', absl::SkipEmpty());
      metrics_port_ = port;
      if (with_unix_socket && unix_address().empty()) {
        return ::testing::AssertionFailure()
               << "no unix address in the serving line: " << line;
      }
      if (tcp_address().empty()) {
        return ::testing::AssertionFailure()
               << "no TCP address in the serving line: " << line;
      }
      return ::testing::AssertionSuccess();
    }
    if (ReapNoHang()) {
      return ::testing::AssertionFailure()
             << "`" << command << "` exited with code " << *exit_code_
             << " before serving; log:\n"
             << Log();
    }
    if (absl::Now() >= deadline) {
      return ::testing::AssertionFailure()
             << "`" << command << "` did not log \"event\":\"serving\" within "
             << timeout << "; log:\n"
             << log;
    }
    absl::SleepFor(kPollInterval);
  }
}

std::string BreakerdProcess::tcp_address() const {
  for (const std::string& a : grpc_addresses_) {
    if (!absl::StartsWith(a, "unix:")) return a;
  }
  return "";
}

std::string BreakerdProcess::unix_address() const {
  for (const std::string& a : grpc_addresses_) {
    if (absl::StartsWith(a, "unix:")) return a;
  }
  return "";
}

std::shared_ptr<grpc::Channel> BreakerdProcess::Channel(int distinct_id) const {
  return ChannelTo(tcp_address(), distinct_id);
}

std::shared_ptr<grpc::Channel> BreakerdProcess::ChannelTo(
    const std::string& address, int distinct_id) const {
  grpc::ChannelArguments args;
  if (distinct_id >= 0) args.SetInt("breakerd.e2e.channel_id", distinct_id);
  return grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(),
                                   args);
}

std::unique_ptr<breakerd::v1::Breaker::Stub> BreakerdProcess::BreakerStub()
    const {
  return breakerd::v1::Breaker::NewStub(Channel());
}

std::unique_ptr<breakerd::v1::Admin::Stub> BreakerdProcess::AdminStub() const {
  return breakerd::v1::Admin::NewStub(Channel());
}

HttpResponse BreakerdProcess::Get(absl::string_view path) const {
  return HttpGet(metrics_port_, path);
}

std::string BreakerdProcess::Metrics() const {
  HttpResponse r = Get("/metrics");
  if (r.status != 200) {
    ADD_FAILURE() << "GET /metrics on port " << metrics_port_
                  << " answered status " << r.status << ": " << r.body;
    return "";
  }
  return r.body;
}

bool BreakerdProcess::Signal(int signo) {
  if (!running()) return false;
  return kill(pid_, signo) == 0;
}

bool BreakerdProcess::ReapNoHang() {
  if (pid_ <= 0) return false;
  if (exit_code_.has_value()) return true;
  int status = 0;
  pid_t r = waitpid(pid_, &status, WNOHANG);
  if (r != pid_) return false;
  if (WIFEXITED(status)) {
    exit_code_ = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    exit_code_ = 128 + WTERMSIG(status);
  } else {
    exit_code_ = -1;
  }
  return true;
}

std::optional<int> BreakerdProcess::WaitExit(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (!ReapNoHang()) {
    if (pid_ <= 0 || absl::Now() >= deadline) return std::nullopt;
    absl::SleepFor(kPollInterval);
  }
  return exit_code_;
}

std::string BreakerdProcess::Log() const { return ReadWholeFile(log_path_); }

int BreakerdProcess::CountInLog(absl::string_view substring) const {
  const std::string log = Log();
  int count = 0;
  for (size_t pos = log.find(substring.data(), 0, substring.size());
       pos != std::string::npos;
       pos = log.find(substring.data(), pos + substring.size(),
                      substring.size())) {
    ++count;
  }
  return count;
}

bool BreakerdProcess::WaitForLog(absl::string_view substring,
                                 absl::Duration timeout, int min_count) {
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    if (CountInLog(substring) >= min_count) return true;
    if (ReapNoHang() || absl::Now() >= deadline) {
      return CountInLog(substring) >= min_count;
    }
    absl::SleepFor(kPollInterval);
  }
}

}  // namespace breakerd

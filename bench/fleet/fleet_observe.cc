#include "bench/fleet/fleet_observe.h"

#include <arpa/inet.h>
#include <hiredis/hiredis.h>
#include <netdb.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace breakerd {
namespace bench {
namespace {

// "host:port" -> {host, port}; false if there is no port.
bool SplitAddress(const std::string& address, std::string* host, int* port) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos) return false;
  *host = address.substr(0, colon);
  return absl::SimpleAtoi(address.substr(colon + 1), port) && *port > 0;
}

}  // namespace

CommandStats Delta(const CommandStats& before, const CommandStats& after) {
  CommandStats out;
  for (const auto& [name, a] : after) {
    CommandStat b;
    if (auto it = before.find(name); it != before.end()) b = it->second;
    if (a.calls == b.calls) continue;
    out[name] = CommandStat{a.calls - b.calls, a.usec - b.usec};
  }
  return out;
}

bool SentBySidecar(absl::string_view command) {
  static constexpr absl::string_view kSent[] = {
      "evalsha", "eval", "evalsha_ro", "eval_ro", "subscribe", "role",
      "select",  "scan", "ping",       "del",     "auth",      "hello",
      "client",  "info", "multi",      "exec"};
  for (absl::string_view s : kSent) {
    if (command == s) return true;
  }
  return absl::StartsWith(command, "script|") ||
         absl::StartsWith(command, "cluster|") ||
         absl::StartsWith(command, "client|");
}

RedisStats::~RedisStats() {
  if (c_ != nullptr) redisFree(c_);
}

bool RedisStats::Connect(const std::string& address) {
  std::string host;
  int port = 0;
  if (!SplitAddress(address, &host, &port)) {
    error_ = absl::StrCat("bad redis address ", address);
    return false;
  }
  timeval timeout{1, 0};
  c_ = redisConnectWithTimeout(host.c_str(), port, timeout);
  if (c_ == nullptr || c_->err != 0) {
    error_ = absl::StrCat("redis ", address, ": ",
                          c_ != nullptr ? c_->errstr : "out of memory");
    return false;
  }
  redisSetTimeout(c_, timeout);
  return true;
}

std::optional<CommandStats> RedisStats::Read() {
  if (c_ == nullptr) {
    error_ = "redis: not connected";
    return std::nullopt;
  }
  auto* reply = static_cast<redisReply*>(redisCommand(c_, "INFO commandstats"));
  if (reply == nullptr) {
    error_ = absl::StrCat("redis INFO: ", c_->errstr);
    return std::nullopt;
  }
  if (reply->type != REDIS_REPLY_STRING) {
    error_ = "redis INFO: unexpected reply";
    freeReplyObject(reply);
    return std::nullopt;
  }
  // cmdstat_evalsha:calls=12,usec=345,usec_per_call=28.75,...
  CommandStats out;
  for (absl::string_view line :
       absl::StrSplit(absl::string_view(reply->str, reply->len), '\n')) {
    line = absl::StripTrailingAsciiWhitespace(line);
    if (!absl::ConsumePrefix(&line, "cmdstat_")) continue;
    const size_t colon = line.find(':');
    if (colon == absl::string_view::npos) continue;
    CommandStat stat;
    for (absl::string_view field :
         absl::StrSplit(line.substr(colon + 1), ',')) {
      if (absl::ConsumePrefix(&field, "calls=")) {
        (void)absl::SimpleAtoi(field, &stat.calls);
      } else if (absl::ConsumePrefix(&field, "usec=")) {
        (void)absl::SimpleAtoi(field, &stat.usec);
      }
    }
    out[std::string(line.substr(0, colon))] = stat;
  }
  freeReplyObject(reply);
  return out;
}

std::optional<std::string> FetchMetrics(const std::string& address) {
  std::string host;
  int port = 0;
  if (!SplitAddress(address, &host, &port)) return std::nullopt;
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return std::nullopt;
  timeval timeout{2, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof(timeout));
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(port));
  if (inet_pton(AF_INET, host.c_str(), &sa.sin_addr) != 1 ||
      connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0) {
    close(fd);
    return std::nullopt;
  }
  const std::string request =
      absl::StrCat("GET /metrics HTTP/1.0\r\nHost: ", address, "\r\n\r\n");
  if (send(fd, request.data(), request.size(), MSG_NOSIGNAL) !=
      static_cast<ssize_t>(request.size())) {
    close(fd);
    return std::nullopt;
  }
  std::string response;
  char buf[65536];
  while (true) {
    const ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n < 0) {
      close(fd);
      return std::nullopt;
    }
    if (n == 0) break;
    response.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  const size_t body = response.find("\r\n\r\n");
  if (!absl::StartsWith(response, "HTTP/1.") ||
      response.find(" 200 ") > response.find("\r\n") ||
      body == std::string::npos) {
    return std::nullopt;
  }
  return response.substr(body + 4);
}

std::optional<double> Sample(absl::string_view exposition,
                             absl::string_view name) {
  for (absl::string_view line : absl::StrSplit(exposition, '\n')) {
    if (!absl::ConsumePrefix(&line, name) || !absl::ConsumePrefix(&line, " ")) {
      continue;
    }
    double v = 0;
    if (absl::SimpleAtod(absl::StripAsciiWhitespace(line), &v)) return v;
  }
  return std::nullopt;
}

std::optional<double> ReadSample(const std::string& metrics_address,
                                 absl::string_view name) {
  std::optional<std::string> text = FetchMetrics(metrics_address);
  if (!text.has_value()) return std::nullopt;
  return Sample(*text, name);
}

}  // namespace bench
}  // namespace breakerd

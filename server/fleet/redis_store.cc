#include "server/fleet/redis_store.h"

#include <hiredis/hiredis.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "server/engine/dependency_name.h"

namespace breakerd {
namespace {

// KEYS: version, state. ARGV: "<origin> <kind>", cooldown left in ms (-1:
// none), "<escalation> <reason> <dependency>", channel, ttl_ms (0: no
// expiry), an operator decision's time in ms (0: none; the message's time
// is then the store's). Returns {version, store time}, or {0, store time,
// the stored state} when a decision would replace a newer stored one
// (nothing is stored or published then).
// Builds the message in format v2 (FormatFleetMessage) with the store's
// own time: when it was stored and when its cooldown ends, so that no
// sidecar's clock is in it. Returns {version, store time in ms}.
// The version key lives as long as the state key: one-off names leave no
// key behind, and a forced state (no expiry) keeps its version, so the
// version restarts from 1 only once both are gone.
constexpr char kPublishScript[] = R"(
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local left = tonumber(ARGV[2])
local untl = 0
if left >= 0 then untl = now + left end
local stamp = now
local decided = tonumber(ARGV[6])
if decided > 0 then
  stamp = decided
  -- A decision never replaces a newer one: answer the stored one instead.
  local cur = redis.call('GETRANGE', KEYS[2], 0, 511)
  local f = {}
  for w in string.gmatch(cur, '%S+') do f[#f + 1] = w end
  if f[2] == 'v2' and (f[5] == 'forced_open' or f[5] == 'forced_closed' or
      f[5] == 'reset') and tonumber(f[3]) ~= nil and
      tonumber(f[3]) > decided then
    return {0, now, cur}
  end
end
local v = redis.call('INCR', KEYS[1])
local msg = string.format('%d v2 %d %s %d %s', v, stamp, ARGV[1], untl, ARGV[3])
if tonumber(ARGV[5]) > 0 then
  redis.call('SET', KEYS[2], msg, 'PX', ARGV[5])
  redis.call('PEXPIRE', KEYS[1], ARGV[5])
else
  redis.call('SET', KEYS[2], msg)
  redis.call('PERSIST', KEYS[1])
end
redis.call('PUBLISH', ARGV[4], msg)
return {v, now}
)";

// KEYS: probe. ARGV: owner, lease_ms. -1: won; else the holder's ms left
// (time is frozen inside a script, so the key cannot lapse in between).
constexpr char kClaimScript[] = R"(
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return -1
end
return redis.call('PTTL', KEYS[1])
)";

// KEYS: probe. ARGV: owner.
constexpr char kReleaseScript[] = R"(
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
)";

// KEYS: heartbeats, incarnation. ARGV: id, ttl_ms, the longest incarnation
// read. {live members, incarnation, store time in ms}. The time is Redis's own
// (TIME), so skew between the members' clocks moves nothing. The incarnation is
// read with GETRANGE, so a huge value written by someone else costs nothing.
constexpr char kHeartbeatScript[] = R"(
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZADD', KEYS[1], now, ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - tonumber(ARGV[2]))
redis.call('PEXPIRE', KEYS[1], ARGV[2])
local inc = redis.call('GETRANGE', KEYS[2], 0, tonumber(ARGV[3]) - 1)
if inc == '' then
  inc = ARGV[1] .. '@' .. t[1] .. '.' .. t[2]
  redis.call('SET', KEYS[2], inc)
end
return {redis.call('ZCARD', KEYS[1]), inc, now}
)";

// KEYS: window (hash "<bucket>:c|f|s" -> count), sources (zset id ->
// bucket), trips (zset id -> bucket). ARGV: id, width_ms, buckets, calls,
// failures, slow, tripped ("1"/"0"). Buckets are numbered by Redis TIME /
// width; the window is the last `buckets` of them, older fields and
// members are dropped (what someone else wrote that does not parse too),
// and every key expires one bucket after the window. Returns {calls,
// failures, slow, sources, trips} over the window.
constexpr char kWindowScript[] = R"(
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local w = tonumber(ARGV[2])
local n = tonumber(ARGV[3])
local b = math.floor(now / w)
local first = b - n + 1
local gained = {tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])}
local names = {'c', 'f', 's'}
for i = 1, 3 do
  if gained[i] ~= 0 then
    redis.call('HINCRBY', KEYS[1], b .. ':' .. names[i], gained[i])
  end
end
if gained[2] > 0 or gained[3] > 0 then redis.call('ZADD', KEYS[2], b, ARGV[1]) end
if ARGV[7] == '1' then redis.call('ZADD', KEYS[3], b, ARGV[1]) end
local sums = {c = 0, f = 0, s = 0}
local all = redis.call('HGETALL', KEYS[1])
for i = 1, #all, 2 do
  local bucket, kind = string.match(all[i], '^(%d+):([cfs])$')
  local v = tonumber(all[i + 1])
  if bucket == nil or v == nil or tonumber(bucket) < first then
    redis.call('HDEL', KEYS[1], all[i])
  else
    sums[kind] = sums[kind] + v
  end
end
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', '(' .. first)
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', '(' .. first)
for i = 1, 3 do redis.call('PEXPIRE', KEYS[i], w * (n + 1)) end
return {sums.c, sums.f, sums.s, redis.call('ZCARD', KEYS[2]),
        redis.call('ZCARD', KEYS[3])}
)";

// The heartbeats key is tagged like a dependency named this, so that on a
// Cluster its route is remembered like a dependency's (that dependency's
// keys are in the same slot).
constexpr absl::string_view kMembersTag = "members";

std::string ContextError(redisContext* c, absl::string_view what) {
  return absl::StrCat(
      "redis ", what, ": ",
      c != nullptr && c->err != 0 ? c->errstr : "no connection");
}

}  // namespace

absl::Status ValidateRedisOptions(const RedisOptions& o) {
  if (o.host.empty()) return absl::InvalidArgumentError("redis: empty host");
  if (o.port < 1 || o.port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("redis: port must be 1..65535 (got ", o.port, ")"));
  }
  if (o.db < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("redis-db: must be 0 or more (got ", o.db, ")"));
  }
  for (char c : o.key_prefix) {
    if (!IsDependencyNameByte(c)) {
      return absl::InvalidArgumentError(
          absl::StrCat("redis-key-prefix: only ", kDependencyNameAlphabet,
                       " allowed (got \"", o.key_prefix, "\")"));
    }
  }
  if (o.timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("redis-timeout: must be positive");
  }
  for (char c : o.username) {
    if (c < 0x21 || c > 0x7E) {
      return absl::InvalidArgumentError(
          "redis-username: printable ASCII without spaces only");
    }
  }
  return absl::OkStatus();
}

std::string FleetChannel(const RedisOptions& options) {
  return options.db == 0
             ? absl::StrCat(options.key_prefix, "transitions")
             : absl::StrCat(options.key_prefix, "transitions:db", options.db);
}

absl::Status ParseRedisAddress(absl::string_view address,
                               RedisOptions* options) {
  const size_t colon = address.rfind(':');
  if (colon == absl::string_view::npos || colon == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("redis: want host:port (got \"", address, "\")"));
  }
  absl::string_view host = address.substr(0, colon);
  if (absl::ConsumePrefix(&host, "[")) {
    if (!absl::ConsumeSuffix(&host, "]")) {
      return absl::InvalidArgumentError(
          absl::StrCat("redis: unbalanced [ in \"", address, "\""));
    }
  }
  int port = 0;
  if (!absl::SimpleAtoi(address.substr(colon + 1), &port) || port < 1 ||
      port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("redis: port must be 1..65535 (got \"",
                     address.substr(colon + 1), "\")"));
  }
  options->host = std::string(host);
  options->port = port;
  return absl::OkStatus();
}

void RedisStore::ReplyDeleter::operator()(redisReply* r) const {
  freeReplyObject(r);
}

RedisStore::RedisStore(RedisOptions options)
    : options_(std::move(options)),
      channel_(FleetChannel(options_)),
      wake_fd_(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {}

RedisStore::~RedisStore() {
  Disconnect();
  if (wake_fd_ >= 0) close(wake_fd_);
}

void RedisStore::Disconnect() {
  if (cmd_ != nullptr) redisFree(cmd_);
  if (sub_ != nullptr) redisFree(sub_);
  cmd_ = sub_ = nullptr;
  for (auto& [address, c] : nodes_) redisFree(c);
  nodes_.clear();
  routes_.clear();
  cluster_ = false;
}

absl::StatusOr<redisContext*> RedisStore::Open(const std::string& host,
                                               int port, bool select_db) {
  redisContext* c = redisConnectWithTimeout(host.c_str(), port,
                                            absl::ToTimeval(options_.timeout));
  if (c == nullptr || c->err != 0) {
    absl::Status s = absl::UnavailableError(
        absl::StrCat(ContextError(c, "connect"), " (", host, ":", port, ")"));
    if (c != nullptr) redisFree(c);
    return s;
  }
  redisSetTimeout(c, absl::ToTimeval(options_.timeout));
  absl::Status s;
  if (!options_.password.empty()) {
    s = options_.username.empty()
            ? Send(c, {"AUTH", options_.password}).status()
            : Send(c, {"AUTH", options_.username, options_.password}).status();
  }
  if (s.ok() && select_db && options_.db != 0) {
    s = Send(c, {"SELECT", absl::StrCat(options_.db)}).status();
  }
  if (!s.ok()) {
    redisFree(c);
    return s;
  }
  return c;
}

absl::StatusOr<RedisStore::ReplyPtr> RedisStore::Send(
    redisContext* c, const std::vector<std::string>& argv) {
  std::vector<const char*> ptrs;
  std::vector<size_t> lens;
  ptrs.reserve(argv.size());
  lens.reserve(argv.size());
  for (const std::string& a : argv) {
    ptrs.push_back(a.data());
    lens.push_back(a.size());
  }
  ReplyPtr r(static_cast<redisReply*>(redisCommandArgv(
      c, static_cast<int>(argv.size()), ptrs.data(), lens.data())));
  if (r == nullptr) return absl::UnavailableError(ContextError(c, argv[0]));
  if (r->type == REDIS_REPLY_ERROR) {
    const absl::string_view error(r->str, r->len);
    if (absl::StartsWith(error, "MOVED ")) return r;  // the caller follows it
    return absl::UnavailableError(absl::StrCat("redis ", argv[0], ": ", error));
  }
  return r;
}

absl::Status RedisStore::Connect() {
  Disconnect();
  absl::StatusOr<redisContext*> cmd =
      Open(options_.host, options_.port, /*select_db=*/false);
  if (!cmd.ok()) return cmd.status();
  cmd_ = *cmd;
  // A replica would refuse every write: not a fleet store.
  absl::StatusOr<ReplyPtr> role = Send(cmd_, {"ROLE"});
  if (!role.ok()) {
    Disconnect();
    return role.status();
  }
  redisReply* r = role->get();
  if (r->type == REDIS_REPLY_ARRAY && r->elements > 0 &&
      r->element[0]->type == REDIS_REPLY_STRING &&
      absl::string_view(r->element[0]->str, r->element[0]->len) != "master") {
    Disconnect();
    return absl::FailedPreconditionError(
        absl::StrCat("redis at ", options_.host, ":", options_.port, " is a ",
                     absl::string_view(r->element[0]->str, r->element[0]->len),
                     ", not a primary: point --redis at the primary"));
  }
  absl::StatusOr<ReplyPtr> info = Send(cmd_, {"INFO", "cluster"});
  if (!info.ok()) {
    Disconnect();
    return info.status();
  }
  cluster_ = (*info)->type == REDIS_REPLY_STRING &&
             absl::StrContains(absl::string_view((*info)->str, (*info)->len),
                               "cluster_enabled:1");
  if (options_.db != 0) {
    if (cluster_) {
      Disconnect();
      return absl::InvalidArgumentError(
          "redis-db: Redis Cluster has database 0 only");
    }
    if (absl::Status s =
            Send(cmd_, {"SELECT", absl::StrCat(options_.db)}).status();
        !s.ok()) {
      Disconnect();
      return s;
    }
  }
  // The window script runs for every active dependency at every sync: sent
  // by its SHA once loaded. (A user whose ACL refuses SCRIPT sends it whole.)
  window_sha_.clear();
  if (absl::StatusOr<ReplyPtr> sha =
          Send(cmd_, {"SCRIPT", "LOAD", kWindowScript});
      sha.ok() && (*sha)->type == REDIS_REPLY_STRING) {
    window_sha_.assign((*sha)->str, (*sha)->len);
  }
  absl::StatusOr<redisContext*> sub =
      Open(options_.host, options_.port, /*select_db=*/false);
  if (!sub.ok()) {
    Disconnect();
    return sub.status();
  }
  sub_ = *sub;
  // Pub/sub is cluster-wide: one subscription hears every node's PUBLISH.
  ReplyPtr reply(static_cast<redisReply*>(
      redisCommand(sub_, "SUBSCRIBE %b", channel_.data(), channel_.size())));
  if (reply == nullptr) {
    absl::Status s = absl::UnavailableError(ContextError(sub_, "SUBSCRIBE"));
    Disconnect();
    return s;
  }
  return absl::OkStatus();
}

absl::StatusOr<redisContext*> RedisStore::Node(const std::string& address) {
  if (address.empty()) return cmd_;
  auto it = nodes_.find(address);
  if (it != nodes_.end()) return it->second;
  RedisOptions parsed;
  if (absl::Status s = ParseRedisAddress(address, &parsed); !s.ok()) return s;
  absl::StatusOr<redisContext*> c =
      Open(parsed.host, parsed.port, /*select_db=*/false);
  if (!c.ok()) return c.status();
  nodes_[address] = *c;
  return *c;
}

absl::StatusOr<RedisStore::ReplyPtr> RedisStore::Command(
    const std::vector<std::string>& argv, absl::string_view dependency) {
  if (cmd_ == nullptr) return absl::UnavailableError("redis: not connected");
  auto route = routes_.find(dependency);
  absl::StatusOr<redisContext*> c =
      Node(route == routes_.end() ? std::string() : route->second);
  if (!c.ok()) return c.status();
  absl::StatusOr<ReplyPtr> r = Send(*c, argv);
  if (!r.ok() || (*r)->type != REDIS_REPLY_ERROR) return r;
  // MOVED <slot> <host>:<port>: the key's slot lives on another node
  // (Redis Cluster). Follow once, and remember it for this dependency.
  std::vector<std::string> moved =
      absl::StrSplit(absl::string_view((*r)->str, (*r)->len), ' ');
  if (moved.size() != 3) {
    return absl::UnavailableError(
        absl::StrCat("redis ", argv[0], ": malformed redirect"));
  }
  c = Node(moved[2]);
  if (!c.ok()) return c.status();
  if (!dependency.empty()) routes_[dependency] = moved[2];
  r = Send(*c, argv);
  if (r.ok() && (*r)->type == REDIS_REPLY_ERROR) {
    return absl::UnavailableError(absl::StrCat(
        "redis ", argv[0], ": ", absl::string_view((*r)->str, (*r)->len)));
  }
  return r;
}

std::string RedisStore::Key(absl::string_view dependency,
                            absl::string_view suffix) const {
  return absl::StrCat(options_.key_prefix, "{", dependency, "}:", suffix);
}

absl::StatusOr<PublishAnswer> RedisStore::Publish(const FleetPublish& p,
                                                  absl::Duration ttl) {
  const int64_t left =
      p.kind == ExternalState::Kind::kOpen
          ? std::max<int64_t>(0, absl::ToInt64Milliseconds(p.open_remaining))
          : -1;
  absl::StatusOr<ReplyPtr> r = Command(
      {"EVAL", kPublishScript, "2", Key(p.dependency, "version"),
       Key(p.dependency, "state"),
       absl::StrCat(p.origin, " ", FleetKindName(p.kind)), absl::StrCat(left),
       absl::StrCat(p.escalation_level, " ", p.reason, " ", p.dependency),
       channel_,
       absl::StrCat(std::max<int64_t>(0, absl::ToInt64Milliseconds(ttl))),
       absl::StrCat(std::max<int64_t>(0, p.decided_unix_ms))},
      p.dependency);
  if (!r.ok()) return r.status();
  const redisReply* reply = r->get();
  if (reply->type != REDIS_REPLY_ARRAY ||
      (reply->elements != 2 && reply->elements != 3) ||
      reply->element[0]->type != REDIS_REPLY_INTEGER ||
      reply->element[0]->integer < 0 ||
      reply->element[1]->type != REDIS_REPLY_INTEGER ||
      (reply->elements == 3 &&
       (reply->element[0]->integer != 0 ||
        reply->element[2]->type != REDIS_REPLY_STRING))) {
    return absl::InternalError("redis EVAL publish: unexpected reply");
  }
  PublishAnswer answer{static_cast<uint64_t>(reply->element[0]->integer),
                       reply->element[1]->integer};
  if (reply->elements == 3) {
    // Cut like every state read: one byte over the cap is refused.
    answer.superseded_by.assign(
        reply->element[2]->str,
        std::min(reply->element[2]->len, kMaxFleetMessageBytes + 1));
  }
  return answer;
}

absl::StatusOr<ClaimAnswer> RedisStore::ClaimProbe(absl::string_view dependency,
                                                   absl::string_view owner,
                                                   absl::Duration lease) {
  absl::StatusOr<ReplyPtr> r = Command(
      {"EVAL", kClaimScript, "1", Key(dependency, "probe"), std::string(owner),
       absl::StrCat(std::max<int64_t>(1, absl::ToInt64Milliseconds(lease)))},
      dependency);
  if (!r.ok()) return r.status();
  if ((*r)->type != REDIS_REPLY_INTEGER) {
    return absl::InternalError("redis EVAL claim: unexpected reply");
  }
  ClaimAnswer a;
  a.won = (*r)->integer == -1;
  a.lease =
      a.won ? lease : absl::Milliseconds(std::max<long long>(0, (*r)->integer));
  return a;
}

absl::Status RedisStore::ReleaseProbe(absl::string_view dependency,
                                      absl::string_view owner) {
  return Command({"EVAL", kReleaseScript, "1", Key(dependency, "probe"),
                  std::string(owner)},
                 dependency)
      .status();
}

absl::StatusOr<std::vector<std::string>> RedisStore::Primaries() {
  if (!cluster_) return std::vector<std::string>{""};
  absl::StatusOr<ReplyPtr> r = Send(cmd_, {"CLUSTER", "NODES"});
  if (!r.ok()) return r.status();
  if ((*r)->type != REDIS_REPLY_STRING) {
    return absl::InternalError("redis CLUSTER NODES: unexpected reply");
  }
  // "<id> <host:port@cport> <flags> ...", one node per line.
  std::vector<std::string> out;
  for (absl::string_view line : absl::StrSplit(
           absl::string_view((*r)->str, (*r)->len), '\n', absl::SkipEmpty())) {
    std::vector<absl::string_view> f = absl::StrSplit(line, ' ');
    if (f.size() < 3 || !absl::StrContains(f[2], "master") ||
        absl::StrContains(f[2], "fail")) {
      continue;
    }
    absl::string_view address = f[1].substr(0, f[1].find('@'));
    out.push_back(absl::StrContains(f[2], "myself") ? std::string()
                                                    : std::string(address));
  }
  return out;
}

absl::StatusOr<std::vector<std::string>> RedisStore::ReadStates() {
  std::vector<std::string> out;
  const std::string pattern = absl::StrCat(options_.key_prefix, "{*}:state");
  absl::StatusOr<std::vector<std::string>> primaries = Primaries();
  if (!primaries.ok()) return primaries.status();
  // SCAN walks one node's keys: on a cluster, every primary's.
  for (const std::string& node : *primaries) {
    absl::StatusOr<redisContext*> c = Node(node);
    if (!c.ok()) return c.status();
    std::string cursor = "0";
    do {
      absl::StatusOr<ReplyPtr> r =
          Send(*c, {"SCAN", cursor, "MATCH", pattern, "COUNT", "500"});
      if (!r.ok()) return r.status();
      redisReply* reply = r->get();
      if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 2) {
        return absl::InternalError("redis SCAN: unexpected reply");
      }
      cursor = std::string(reply->element[0]->str, reply->element[0]->len);
      redisReply* keys = reply->element[1];
      for (size_t i = 0; i < keys->elements; ++i) {
        // At most one byte more than a message may hold: enough to refuse
        // an oversized value without reading it.
        absl::StatusOr<ReplyPtr> value =
            Send(*c, {"GETRANGE",
                      std::string(keys->element[i]->str, keys->element[i]->len),
                      "0", absl::StrCat(kMaxFleetMessageBytes)});
        if (!value.ok()) return value.status();
        if ((*value)->type != REDIS_REPLY_STRING || (*value)->len == 0) {
          continue;  // gone since
        }
        out.emplace_back((*value)->str, (*value)->len);
      }
    } while (cursor != "0");
  }
  return out;
}

std::vector<std::string> RedisStore::WindowKeys(const WindowSync& w) const {
  const std::string base = absl::StrCat(
      "w2:", std::max<int64_t>(1, absl::ToInt64Milliseconds(w.width)));
  return {Key(w.dependency, base), Key(w.dependency, base + ":sources"),
          Key(w.dependency, base + ":trips")};
}

absl::StatusOr<FleetWindow> RedisStore::ParseWindow(const redisReply* r) {
  if (r->type != REDIS_REPLY_ARRAY || r->elements != 5) {
    return absl::InternalError("redis window sync: unexpected reply");
  }
  uint64_t v[5];
  for (size_t i = 0; i < 5; ++i) {
    if (r->element[i]->type != REDIS_REPLY_INTEGER) {
      return absl::InternalError("redis window sync: unexpected reply");
    }
    // A count driven below zero by someone else reads as zero.
    v[i] =
        static_cast<uint64_t>(std::max<long long>(0, r->element[i]->integer));
  }
  return FleetWindow{v[0], v[1], v[2], v[3], v[4]};
}

absl::StatusOr<std::vector<FleetWindow>> RedisStore::SyncWindows(
    absl::string_view id, const std::vector<WindowSync>& syncs) {
  std::vector<FleetWindow> out;
  out.reserve(syncs.size());
  if (cmd_ == nullptr) return absl::UnavailableError("redis: not connected");
  auto argv_for = [&](const WindowSync& w, bool by_sha) {
    std::vector<std::string> keys = WindowKeys(w);
    return std::vector<std::string>{
        by_sha ? "EVALSHA" : "EVAL",
        by_sha ? window_sha_ : std::string(kWindowScript),
        "3",
        keys[0],
        keys[1],
        keys[2],
        std::string(id),
        absl::StrCat(std::max<int64_t>(1, absl::ToInt64Milliseconds(w.width))),
        absl::StrCat(std::max(1, w.buckets)),
        absl::StrCat(w.calls),
        absl::StrCat(w.failures),
        absl::StrCat(w.slow),
        w.tripped ? "1" : "0"};
  };
  if (cluster_) {
    // Each dependency's keys may live on another node: one command each,
    // following MOVED (Command).
    for (const WindowSync& w : syncs) {
      absl::StatusOr<ReplyPtr> r = Command(argv_for(w, false), w.dependency);
      if (!r.ok()) return r.status();
      absl::StatusOr<FleetWindow> window = ParseWindow(r->get());
      if (!window.ok()) return window.status();
      out.push_back(*window);
    }
    return out;
  }
  // One node: every script sent, then every answer read (one round trip).
  const bool by_sha = !window_sha_.empty();
  for (const WindowSync& w : syncs) {
    std::vector<std::string> argv = argv_for(w, by_sha);
    std::vector<const char*> ptrs;
    std::vector<size_t> lens;
    for (const std::string& a : argv) {
      ptrs.push_back(a.data());
      lens.push_back(a.size());
    }
    if (redisAppendCommandArgv(cmd_, static_cast<int>(argv.size()), ptrs.data(),
                               lens.data()) != REDIS_OK) {
      return absl::UnavailableError(ContextError(cmd_, "window sync"));
    }
  }
  std::vector<ReplyPtr> replies;
  for (size_t i = 0; i < syncs.size(); ++i) {
    void* raw = nullptr;
    if (redisGetReply(cmd_, &raw) != REDIS_OK || raw == nullptr) {
      return absl::UnavailableError(ContextError(cmd_, "window sync"));
    }
    replies.emplace_back(static_cast<redisReply*>(raw));
  }
  // Every pipelined answer is read: the connection is free again.
  for (size_t i = 0; i < syncs.size(); ++i) {
    ReplyPtr& reply = replies[i];
    if (reply->type == REDIS_REPLY_ERROR) {
      const absl::string_view error(reply->str, reply->len);
      if (!absl::StartsWith(error, "NOSCRIPT")) {
        return absl::UnavailableError(
            absl::StrCat("redis window sync: ", error));
      }
      // The script cache was flushed (or a new primary took over): send
      // it whole, which caches it again.
      absl::StatusOr<ReplyPtr> r = Send(cmd_, argv_for(syncs[i], false));
      if (!r.ok()) return r.status();
      reply = std::move(*r);
    }
    absl::StatusOr<FleetWindow> window = ParseWindow(reply.get());
    if (!window.ok()) return window.status();
    out.push_back(*window);
  }
  return out;
}

absl::Status RedisStore::EndEpisode(absl::string_view dependency,
                                    absl::Duration width) {
  WindowSync w;
  w.dependency = std::string(dependency);
  w.width = width;
  std::vector<std::string> keys = WindowKeys(w);
  return Command({"DEL", keys[0], keys[1], keys[2]}, dependency).status();
}

absl::StatusOr<HeartbeatAnswer> RedisStore::Heartbeat(absl::string_view id,
                                                      absl::Duration ttl) {
  absl::StatusOr<ReplyPtr> r = Command(
      {"EVAL", kHeartbeatScript, "2", Key(kMembersTag, "heartbeats"),
       Key(kMembersTag, "incarnation"), std::string(id),
       absl::StrCat(std::max<int64_t>(1, absl::ToInt64Milliseconds(ttl))),
       absl::StrCat(kMaxIncarnationBytes)},
      kMembersTag);
  if (!r.ok()) return r.status();
  const redisReply* reply = r->get();
  if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 3 ||
      reply->element[0]->type != REDIS_REPLY_INTEGER ||
      reply->element[0]->integer < 0 ||
      reply->element[1]->type != REDIS_REPLY_STRING ||
      reply->element[2]->type != REDIS_REPLY_INTEGER) {
    return absl::InternalError("redis EVAL heartbeat: unexpected reply");
  }
  HeartbeatAnswer answer;
  answer.members = static_cast<uint64_t>(reply->element[0]->integer);
  answer.store_unix_ms = reply->element[2]->integer;
  answer.incarnation.assign(
      reply->element[1]->str,
      std::min<size_t>(reply->element[1]->len, kMaxIncarnationBytes));
  return answer;
}

void RedisStore::TakeMessage(redisReply* reply, std::vector<std::string>* out) {
  // ["message", channel, payload]; subscribe confirmations are skipped.
  if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 3) return;
  redisReply* kind = reply->element[0];
  redisReply* payload = reply->element[2];
  if (kind->type != REDIS_REPLY_STRING ||
      absl::string_view(kind->str, kind->len) != "message" ||
      payload->type != REDIS_REPLY_STRING) {
    return;
  }
  // Cut, not copied whole: one byte over the cap is enough to refuse it.
  out->emplace_back(payload->str,
                    std::min(payload->len, kMaxFleetMessageBytes + 1));
}

absl::StatusOr<std::vector<std::string>> RedisStore::Receive(
    absl::Duration timeout) {
  std::vector<std::string> out;
  if (sub_ == nullptr) return absl::UnavailableError("redis: not connected");
  auto drain = [&]() -> absl::Status {
    while (true) {
      void* raw = nullptr;
      if (redisGetReplyFromReader(sub_, &raw) != REDIS_OK) {
        return absl::UnavailableError(ContextError(sub_, "subscription"));
      }
      if (raw == nullptr) return absl::OkStatus();
      ReplyPtr reply(static_cast<redisReply*>(raw));
      TakeMessage(reply.get(), &out);
    }
  };
  if (absl::Status s = drain(); !s.ok()) return s;
  if (!out.empty()) return out;

  pollfd fds[2] = {{sub_->fd, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
  const int ms = static_cast<int>(
      std::max<int64_t>(0, absl::ToInt64Milliseconds(timeout)));
  const int n = poll(fds, 2, ms);
  if (n < 0 && errno != EINTR) {
    return absl::UnavailableError(
        absl::StrCat("redis subscription poll: ", std::strerror(errno)));
  }
  if (n > 0 && (fds[1].revents & POLLIN) != 0) {
    uint64_t drained;
    (void)!read(wake_fd_, &drained, sizeof(drained));
  }
  if (n > 0 && (fds[0].revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
    if (redisBufferRead(sub_) != REDIS_OK) {
      return absl::UnavailableError(ContextError(sub_, "subscription"));
    }
    if (absl::Status s = drain(); !s.ok()) return s;
  }
  return out;
}

void RedisStore::Wake() {
  const uint64_t one = 1;
  if (wake_fd_ >= 0) (void)!write(wake_fd_, &one, sizeof(one));
}

}  // namespace breakerd

// FleetStore on Redis, through hiredis: two connections (commands, and one
// subscribed to the fleet's channel), every call bounded by a short timeout.
//
// Works with a single Redis (or the primary of a replicated one; a replica
// is refused at connect) and with Redis Cluster: every command for a
// dependency's keys follows MOVED to the node holding the slot, and the
// stored states are read from every primary. Pub/sub is cluster-wide.
//
// Keys, all hash-tagged with the dependency so that each script touches one
// slot (Redis Cluster's rule):
//   <prefix>{<dependency>}:version   INCR per published state; expires
//                                    with the state key (never for forced)
//   <prefix>{<dependency>}:state     the last published state, in format v2
//                                    (FormatFleetMessage)
//   <prefix>{<dependency>}:probe     the fleet-wide probe's owner, PX lease
//   <prefix>{<dependency>}:w2:<width_ms>          the fleet's window: hash
//                                    "<bucket>:c|f|s" -> calls, failures,
//                                    slow calls; bucket = Redis TIME / width
//   <prefix>{<dependency>}:w2:<width_ms>:sources  zset: sidecars that
//                                    gave failures or slow calls -> bucket
//   <prefix>{<dependency>}:w2:<width_ms>:trips    zset: sidecars that
//                                    tripped it locally -> bucket
//                                    (the three expire with the window)
//   <prefix>{members}:heartbeats     the live members: a sorted set of
//                                    ids scored by their last heartbeat in
//                                    Redis TIME (ms); expires when all go
//   <prefix>{members}:incarnation    the store's incarnation ("<id>@<TIME>"
//                                    of the heartbeat that found none)
// and one pub/sub channel, <prefix>transitions (<prefix>transitions:db<N>
// for a database N other than 0), carrying the same text as the state key.
//
// Thread-safety: as FleetStore: one thread, except Wake().
#ifndef BREAKERD_SERVER_FLEET_REDIS_STORE_H_
#define BREAKERD_SERVER_FLEET_REDIS_STORE_H_

#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/fleet/fleet_store.h"

struct redisContext;
struct redisReply;

namespace breakerd {

struct RedisOptions {
  std::string host = "127.0.0.1";
  int port = 6379;
  // AUTH with this password when non-empty: as `username` (a Redis 6+ ACL
  // user) when that is set, else as Redis's default user.
  std::string username;
  std::string password;
  // SELECT this database. Pub/sub channels are server-wide, so the channel
  // of a database other than 0 names it (<prefix>transitions:db<N>): fleets
  // in different databases never hear each other.
  int db = 0;
  // Prefix of every key and of the channel; bytes of
  // kDependencyNameAlphabet (server/engine/dependency_name.h) only.
  std::string key_prefix = "breakerd:";
  // Connect and per-command timeout.
  absl::Duration timeout = absl::Milliseconds(50);
};

// Checks the options (port range, db >= 0, prefix characters, timeout > 0,
// a username of printable ASCII without spaces); INVALID_ARGUMENT naming the
// field.
absl::Status ValidateRedisOptions(const RedisOptions& options);

// Parses "host:port" ("[v6]:port" too) into options->host/port.
absl::Status ParseRedisAddress(absl::string_view address,
                               RedisOptions* options);

// The fleet's pub/sub channel for `options` (key_prefix and db).
std::string FleetChannel(const RedisOptions& options);

class RedisStore final : public FleetStore {
 public:
  // REQUIRES: ValidateRedisOptions(options).ok().
  explicit RedisStore(RedisOptions options);
  ~RedisStore() override;

  RedisStore(const RedisStore&) = delete;
  RedisStore& operator=(const RedisStore&) = delete;

  absl::Status Connect() override;
  void Disconnect() override;
  absl::StatusOr<PublishAnswer> Publish(const FleetPublish& p,
                                        absl::Duration ttl) override;
  absl::StatusOr<ClaimAnswer> ClaimProbe(absl::string_view dependency,
                                         absl::string_view owner,
                                         absl::Duration lease) override;
  absl::Status ReleaseProbe(absl::string_view dependency,
                            absl::string_view owner) override;
  absl::StatusOr<std::vector<std::string>> ReadStates() override;
  absl::StatusOr<std::vector<FleetWindow>> SyncWindows(
      absl::string_view id, const std::vector<WindowSync>& syncs) override;
  absl::Status EndEpisode(absl::string_view dependency,
                          absl::Duration width) override;
  absl::StatusOr<HeartbeatAnswer> Heartbeat(absl::string_view id,
                                            absl::Duration ttl) override;
  absl::StatusOr<std::vector<std::string>> Receive(
      absl::Duration timeout) override;
  void Wake() override;

 private:
  struct ReplyDeleter {
    void operator()(redisReply* r) const;
  };
  using ReplyPtr = std::unique_ptr<redisReply, ReplyDeleter>;

  // Connects one context (TCP, timeouts, AUTH, optionally SELECT).
  absl::StatusOr<redisContext*> Open(const std::string& host, int port,
                                     bool select_db);
  // One command on `c`. An error reply is an error, except MOVED, which is
  // returned for the caller to follow.
  absl::StatusOr<ReplyPtr> Send(redisContext* c,
                                const std::vector<std::string>& argv);
  // One command for `dependency`'s keys: on the node known to hold them
  // (the first node until told otherwise), following one MOVED redirect.
  absl::StatusOr<ReplyPtr> Command(const std::vector<std::string>& argv,
                                   absl::string_view dependency = "");
  // The context for a cluster node's "host:port" (empty: the first node),
  // connected on first use.
  absl::StatusOr<redisContext*> Node(const std::string& address);
  // Cluster: every primary's address ("" for the first node); otherwise
  // just the first node.
  absl::StatusOr<std::vector<std::string>> Primaries();
  std::string Key(absl::string_view dependency, absl::string_view suffix) const;
  // The window, sources and trips keys of w's dependency and width.
  std::vector<std::string> WindowKeys(const WindowSync& w) const;
  static absl::StatusOr<FleetWindow> ParseWindow(const redisReply* r);
  // Appends the payload of a pub/sub message reply to *out, cut to
  // kMaxFleetMessageBytes + 1 bytes.
  void TakeMessage(redisReply* reply, std::vector<std::string>* out);

  const RedisOptions options_;
  const std::string channel_;
  redisContext* cmd_ = nullptr;
  redisContext* sub_ = nullptr;
  // The window script's SHA1 once SCRIPT LOAD answered; empty: use EVAL.
  std::string window_sha_;
  // Redis Cluster: the first node runs in cluster mode.
  bool cluster_ = false;
  // Cluster: the other nodes' connections, by "host:port", and which node
  // holds each dependency's slot (learnt from MOVED).
  absl::flat_hash_map<std::string, redisContext*> nodes_;
  absl::flat_hash_map<std::string, std::string> routes_;
  // eventfd written by Wake(), polled by Receive().
  int wake_fd_ = -1;
};

}  // namespace breakerd

#endif  // BREAKERD_SERVER_FLEET_REDIS_STORE_H_

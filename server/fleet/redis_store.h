// FleetStore on Redis, through hiredis: two connections (commands, and one
// subscribed to the fleet's channel), every call bounded by a short timeout.
//
// Keys, all hash-tagged with the dependency so that each script touches one
// slot (Redis Cluster's rule):
//   <prefix>{<dependency>}:version   INCR per published state
//   <prefix>{<dependency>}:state     "<version> <body>" (FormatFleetBody)
//   <prefix>{<dependency>}:probe     the fleet-wide probe's owner, PX lease
// and one pub/sub channel, <prefix>transitions, carrying "<version> <body>".
//
// Thread-safety: as FleetStore: one thread, except Wake().
#ifndef BREAKERD_SERVER_FLEET_REDIS_STORE_H_
#define BREAKERD_SERVER_FLEET_REDIS_STORE_H_

#include <string>
#include <vector>

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
  // AUTH with this password when non-empty.
  std::string password;
  // SELECT this database (keys only: pub/sub channels are not per database,
  // so fleets sharing a Redis need distinct key_prefix values).
  int db = 0;
  // Prefix of every key and of the channel; [A-Za-z0-9._:/@-]*.
  std::string key_prefix = "breakerd:";
  // Connect and per-command timeout.
  absl::Duration timeout = absl::Milliseconds(50);
};

// Checks the options (port range, db >= 0, prefix characters, timeout > 0);
// INVALID_ARGUMENT naming the field.
absl::Status ValidateRedisOptions(const RedisOptions& options);

// Parses "host:port" ("[v6]:port" too) into options->host/port.
absl::Status ParseRedisAddress(absl::string_view address,
                               RedisOptions* options);

class RedisStore final : public FleetStore {
 public:
  // REQUIRES: ValidateRedisOptions(options).ok().
  explicit RedisStore(RedisOptions options);
  ~RedisStore() override;

  RedisStore(const RedisStore&) = delete;
  RedisStore& operator=(const RedisStore&) = delete;

  absl::Status Connect() override;
  void Disconnect() override;
  absl::StatusOr<uint64_t> Publish(const FleetMessage& m,
                                   absl::Duration ttl) override;
  absl::StatusOr<ClaimAnswer> ClaimProbe(absl::string_view dependency,
                                         absl::string_view owner,
                                         absl::Duration lease) override;
  absl::Status ReleaseProbe(absl::string_view dependency,
                            absl::string_view owner) override;
  absl::StatusOr<std::vector<FleetMessage>> ReadStates() override;
  absl::Status Ping() override;
  absl::StatusOr<std::vector<FleetMessage>> Receive(
      absl::Duration timeout) override;
  void Wake() override;

 private:
  // Connects one context (TCP, timeouts, AUTH, SELECT).
  absl::StatusOr<redisContext*> Open(bool select_db);
  // One command on the command connection; the reply is freed by the
  // caller through ReplyPtr.
  struct ReplyDeleter {
    void operator()(redisReply* r) const;
  };
  using ReplyPtr = std::unique_ptr<redisReply, ReplyDeleter>;
  absl::StatusOr<ReplyPtr> Command(const std::vector<std::string>& argv);
  std::string Key(absl::string_view dependency, absl::string_view suffix) const;
  // Appends the parsed message of a pub/sub reply to *out.
  void TakeMessage(redisReply* reply, std::vector<FleetMessage>* out);

  const RedisOptions options_;
  const std::string channel_;
  redisContext* cmd_ = nullptr;
  redisContext* sub_ = nullptr;
  // eventfd written by Wake(), polled by Receive().
  int wake_fd_ = -1;
};

}  // namespace breakerd

#endif  // BREAKERD_SERVER_FLEET_REDIS_STORE_H_

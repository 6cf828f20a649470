// What fleet_bench reads from outside breakerd's gRPC API: Redis's own
// command counters (INFO commandstats, over hiredis) and a sidecar's
// Prometheus exposition (/metrics, over plain HTTP/1.0).
//
// Thread-safety: free functions without shared state; a RedisStats is used
// from one thread.
#ifndef BREAKERD_BENCH_FLEET_FLEET_OBSERVE_H_
#define BREAKERD_BENCH_FLEET_FLEET_OBSERVE_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"

struct redisContext;

namespace breakerd {
namespace bench {

// One Redis command's counters from INFO commandstats.
struct CommandStat {
  uint64_t calls = 0;
  uint64_t usec = 0;  // Redis's time executing it
};

// Command name (as INFO spells it: "evalsha", "script|load") -> counters.
using CommandStats = std::map<std::string, CommandStat>;

// after - before, per command; commands that did not move are left out.
CommandStats Delta(const CommandStats& before, const CommandStats& after);

// True for a command a sidecar sends itself (EVALSHA, EVAL, SCRIPT LOAD,
// SUBSCRIBE, ...): one request on the wire. False for one that Redis counts
// because a script ran it (TIME, HINCRBY, ZADD, PUBLISH, ...): INFO counts
// those too. DEL and GET can be both; a sidecar sends DEL only when an
// episode ends, which the command-rate measurement never causes.
bool SentBySidecar(absl::string_view command);

// A connection to Redis that reads INFO commandstats.
class RedisStats {
 public:
  RedisStats() = default;
  ~RedisStats();
  RedisStats(const RedisStats&) = delete;
  RedisStats& operator=(const RedisStats&) = delete;

  // Connects to "host:port" (1 s timeout). False, with error(), if not.
  bool Connect(const std::string& address);
  // INFO commandstats; nullopt, with error(), if the command failed. The
  // INFO itself is counted by Redis as "info": callers leave it out.
  std::optional<CommandStats> Read();
  const std::string& error() const { return error_; }

 private:
  redisContext* c_ = nullptr;
  std::string error_;
};

// GET http://<address>/metrics; nullopt if it failed (2 s timeout).
std::optional<std::string> FetchMetrics(const std::string& address);

// The value of the sample `name` (labels included, exactly as exposed:
// `breakerd_fleet_events_total{event="window_sync"}`) in `exposition`;
// nullopt if absent.
std::optional<double> Sample(absl::string_view exposition,
                             absl::string_view name);

// FetchMetrics + Sample; nullopt if either failed.
std::optional<double> ReadSample(const std::string& metrics_address,
                                 absl::string_view name);

}  // namespace bench
}  // namespace breakerd

#endif  // BREAKERD_BENCH_FLEET_FLEET_OBSERVE_H_

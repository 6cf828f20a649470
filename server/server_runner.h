// ServerRunner: the breakerd process's wiring and its shutdown. Run() checks
// the options (ValidateServerOptions), then starts, in order: the Admin
// token (admin_token.h), the config and the one Registry with its observers
// (startup_config.h), the --state-file (state/state_keeper.h), fleet mode
// (fleet/), the gRPC server (Breaker, Admin, grpc.health.v1.Health and
// reflection on every --listen address; listeners.h) and the HTTP endpoint
// (/metrics, /healthz, /readyz on --metrics-listen; http/http_endpoint.h).
// It then runs the maintenance loop (config and token polling, state
// writes, idle eviction) and the signal thread (SIGHUP reloads) until
// SIGTERM or SIGINT, and shuts everything down gracefully. main.cc only
// parses flags into ServerOptions.
//
// Everything it reports goes to the JSON log (server/log/json_log.h); the
// libraries' own lines too (server/log/library_log.h). Once every listener
// is up it logs exactly one line
//   {"ts":...,"level":"info","event":"serving","grpc":"127.0.0.1:43125,unix:/tmp/b.sock",
//    "metrics":"127.0.0.1:9464","version":"0.1.0","config":"/etc/breakerd/config.yaml"}
// with the ports actually bound (port 0 in an address picks a free port), so
// supervisors and tests can find them. A failed start logs one
// "startup_failed" line and Run() returns ExitCodeFor(the error).
//
// Thread-safety: Run() is called once, from the main thread. RequestShutdown()
// may be called from any thread.
#ifndef BREAKERD_SERVER_SERVER_RUNNER_H_
#define BREAKERD_SERVER_SERVER_RUNNER_H_

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "server/admin_token.h"
#include "server/engine/mutex.h"
#include "server/listeners.h"
#include "server/server_options.h"
#include "server/service/call_tracker.h"
#include "server/service/rpc_stats.h"
#include "server/service/trace_writer.h"

namespace grpc {
class Server;
}  // namespace grpc

namespace breakerd {

class AdminServiceImpl;
class BreakerServiceImpl;
class ConfigReloader;
class FleetSync;
class HttpEndpoint;
class HealthService;
struct PolicySet;
struct ReloadEvent;
class Registry;
class StateKeeper;
class RegistryCollector;
class TransitionLogger;
class ReadLimiter;
class WatchHub;

// Most HTTP/2 streams (calls in progress) one gRPC connection may carry at
// once (GRPC_ARG_MAX_CONCURRENT_STREAMS, advertised in the connection's
// SETTINGS). A client that reaches it queues further calls until one ends
// (gRPC clients do; none is refused), so it bounds what one connection holds
// without failing a busy application: the clients multiplex their calls on
// one connection and keep far fewer in flight.
inline constexpr int kMaxConcurrentStreamsPerConnection = 256;

// Blocks SIGTERM, SIGINT and SIGHUP in the calling thread. main() calls it
// before anything starts a thread, so every thread inherits the mask and the
// runner's signal thread receives them through sigwait.
void BlockShutdownSignals();

class ServerRunner {
 public:
  explicit ServerRunner(ServerOptions options);
  ~ServerRunner();

  ServerRunner(const ServerRunner&) = delete;
  ServerRunner& operator=(const ServerRunner&) = delete;

  // Starts everything, serves until SIGTERM/SIGINT or RequestShutdown(), then
  // shuts down gracefully. Returns the process exit code: kExitOk after a
  // clean shutdown, kExitConfigError or kExitRuntimeError if startup failed
  // (the reason is logged as event "startup_failed" or "config_rejected").
  // REQUIRES: called once; BlockShutdownSignals() was called before any
  // thread started.
  int Run();

  // Begins the graceful shutdown, as SIGTERM does. Idempotent.
  void RequestShutdown() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // Startup, in order: ValidateServerOptions, then each step below. The
  // first error stops it (Run logs it and maps it to the exit code).
  absl::Status Start();
  absl::Status LoadConfig();
  // After each reload attempt: breakerd_config_valid, the last good config.
  void OnReload(const ReloadEvent& e);
  // Fleet mode (--redis): FleetSync built and wired to the registry (Start
  // then starts its thread, which connects; serving does not wait for it).
  absl::Status CreateFleet();
  absl::Status StartGrpc();
  absl::Status StartMetrics();
  void LogServing() const;

  void Shutdown();
  void SignalLoop();
  void MaintenanceLoop() ABSL_LOCKS_EXCLUDED(mu_);
  // Tells the maintenance thread to stop, wakes it and joins it; nothing if
  // it is not running.
  void StopMaintenanceThread() ABSL_LOCKS_EXCLUDED(mu_);
  void StopSignalThread();

  // Constant after construction.
  const ServerOptions options_;
  CallTracker call_tracker_;
  std::unique_ptr<TraceWriter> trace_;
  // Handled RPCs and their handling time (read by the metrics collector).
  RpcStats rpc_stats_;

  // --admin-token-file.
  AdminToken admin_token_{options_.admin_token_file};
  // breakerd_config_valid.
  std::atomic<bool> config_valid_{true};
  // --state-file; null without it.
  std::unique_ptr<StateKeeper> state_;
  std::vector<Listener> listeners_;
  std::unique_ptr<TransitionLogger> transition_logger_;
  std::unique_ptr<Registry> registry_;
  std::unique_ptr<ReadLimiter> read_limiter_;
  std::unique_ptr<WatchHub> watch_hub_;
  // Fleet mode only; stopped before the registry goes.
  std::unique_ptr<FleetSync> fleet_;
  std::unique_ptr<ConfigReloader> reloader_;
  std::unique_ptr<BreakerServiceImpl> breaker_service_;
  std::unique_ptr<AdminServiceImpl> admin_service_;
  // grpc.health.v1.Health (gRPC's default service is disabled).
  std::unique_ptr<HealthService> health_service_;
  std::unique_ptr<grpc::Server> server_;
  std::shared_ptr<RegistryCollector> collector_;
  // /metrics, /healthz and /readyz.
  std::unique_ptr<HttpEndpoint> http_;
  std::thread signal_thread_;
  std::thread maintenance_thread_;

  // breakerd::Mutex, not absl::Mutex: TSan builds see its synchronization.
  Mutex mu_;
  // Signalled when shutdown_requested_ or stop_maintenance_ is set.
  CondVar cv_;
  bool shutdown_requested_ ABSL_GUARDED_BY(mu_) = false;
  bool stop_maintenance_ ABSL_GUARDED_BY(mu_) = false;
  // Tells the signal thread to return at its next wakeup.
  bool stop_signals_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace breakerd

#endif  // BREAKERD_SERVER_SERVER_RUNNER_H_

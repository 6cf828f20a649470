#include "server/server_runner.h"

#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <utility>
#include <vector>

#include "absl/random/random.h"
#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/grpcpp.h"
#include "server/admin_token.h"
#include "server/cli/secret_file.h"
#include "server/config/config.h"
#include "server/engine/clock.h"
#include "server/engine/registry.h"
#include "server/fleet/fleet_sync.h"
#include "server/fleet/redis_store.h"
#include "server/http/http_endpoint.h"
#include "server/log/json_log.h"
#include "server/log/library_log.h"
#include "server/metrics/collector.h"
#include "server/service/admin_service.h"
#include "server/service/breaker_service.h"
#include "server/service/health_service.h"
#include "server/service/watch_hub.h"
#include "server/startup_config.h"
#include "server/state/state_keeper.h"

namespace breakerd {
namespace {

// Breakers and permit ledgers freed in one eviction pass past which the
// heap is trimmed.
constexpr size_t kTrimAfterFreed = 1000;

sigset_t ShutdownSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGHUP);
  return set;
}

}  // namespace

void BlockShutdownSignals() {
  const sigset_t set = ShutdownSignals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

ServerRunner::ServerRunner(ServerOptions options)
    : options_(std::move(options)) {}

ServerRunner::~ServerRunner() {
  // Reverse order of dependency: nothing may outlive what it points to.
  StopSignalThread();
  StopMaintenanceThread();
  http_.reset();
  collector_.reset();
  if (server_ != nullptr) {
    watch_hub_->Shutdown();
    health_service_->Shutdown();
    server_->Shutdown(std::chrono::system_clock::now());
    server_.reset();
  }
  health_service_.reset();
  admin_service_.reset();
  breaker_service_.reset();
  reloader_.reset();
  // The registry calls its observers; it goes before them.
  registry_.reset();
  watch_hub_.reset();
  transition_logger_.reset();
}

void ServerRunner::RequestShutdown() {
  {
    MutexLock lock(&mu_);
    shutdown_requested_ = true;
  }
  cv_.SignalAll();
}

int ServerRunner::Run() {
  RouteLibraryLogsToJson();
  if (absl::Status s = Start(); !s.ok()) {
    const absl::optional<absl::Cord> detail =
        s.GetPayload(kLibraryDiagnosticsPayload);
    if (detail.has_value()) {
      LogEvent(LogLevel::kError, "startup_failed",
               {{"error", s.message()}, {"detail", std::string(*detail)}});
    } else {
      LogEvent(LogLevel::kError, "startup_failed", {{"error", s.message()}});
    }
    return ExitCodeFor(s);
  }
  signal_thread_ = std::thread(&ServerRunner::SignalLoop, this);
  maintenance_thread_ = std::thread(&ServerRunner::MaintenanceLoop, this);
  http_->SetPhase(ServingPhase::kServing);
  LogServing();

  {
    MutexLock lock(&mu_);
    while (!shutdown_requested_) cv_.Wait(&mu_);
  }
  Shutdown();
  return kExitOk;
}

absl::Status ServerRunner::Start() {
  if (absl::Status s = ValidateServerOptions(options_); !s.ok()) return s;
  for (const std::string& address : options_.listen) {
    listeners_.push_back(*ParseListener(address));  // valid: checked above
  }
  if (absl::Status s = admin_token_.Load(); !s.ok()) return s;
  if (absl::Status s = LoadConfig(); !s.ok()) return s;
  // The fleet first (not started): it sees the overrides the state file
  // brings back, and gives the saver each override's decision time.
  if (absl::Status s = CreateFleet(); !s.ok()) return s;
  if (!options_.state_file.empty()) {
    std::function<int64_t(absl::string_view)> decided_at;
    if (FleetSync* fleet = fleet_.get(); fleet != nullptr) {
      decided_at = [fleet](absl::string_view dep) {
        return fleet->DecidedAt(dep);
      };
    }
    state_ = std::make_unique<StateKeeper>(registry_.get(), options_.state_file,
                                           options_.state_stale_after,
                                           std::move(decided_at));
  }
  if (fleet_ != nullptr) fleet_->Start();
  if (absl::Status s = StartGrpc(); !s.ok()) return s;
  return StartMetrics();
}

absl::Status ServerRunner::LoadConfig() {
  absl::StatusOr<StartupConfig> config = LoadStartupConfig(
      options_.config_path, options_.strict_config, options_.state_file);
  if (!config.ok()) return config.status();
  config_valid_.store(config->valid, std::memory_order_relaxed);
  transition_logger_ = std::make_unique<TransitionLogger>();
  registry_ =
      std::make_unique<Registry>(config->policies, MonotonicClock::Get());
  read_limiter_ = std::make_unique<ReadLimiter>(
      MonotonicClock::Get(), options_.read_all_breakers_per_second);
  watch_hub_ = std::make_unique<WatchHub>(
      registry_.get(), static_cast<size_t>(options_.max_watch_streams),
      static_cast<size_t>(options_.watch_queue), read_limiter_.get());
  registry_->AddObserver(transition_logger_.get());
  registry_->AddObserver(watch_hub_.get());
  if (!options_.config_path.empty()) {
    reloader_ = std::make_unique<ConfigReloader>(
        options_.config_path, registry_.get(),
        [this](const ReloadEvent& e) { OnReload(e); },
        std::move(config->content));
  }
  return absl::OkStatus();
}

void ServerRunner::OnReload(const ReloadEvent& e) {
  LogReload(e);
  config_valid_.store(e.ok, std::memory_order_relaxed);
  if (e.ok) SaveLastGoodConfig(options_.state_file, e.content);
}

absl::Status ServerRunner::CreateFleet() {
  if (options_.redis.empty()) return absl::OkStatus();
  absl::StatusOr<RedisOptions> redis = FleetRedisOptions(options_);
  if (!redis.ok()) return redis.status();
  if (!options_.redis_password_file.empty()) {
    absl::StatusOr<std::string> password =
        ReadSecretFile(options_.redis_password_file, "redis-password-file");
    if (!password.ok()) return password.status();
    WarnIfSecretFileIsShared(options_.redis_password_file,
                             "redis-password-file");
    redis->password = *std::move(password);
  }
  FleetOptions fleet;
  fleet.heartbeat_interval = options_.fleet_sync_interval;
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  absl::BitGen gen;
  fleet.id =
      absl::StrCat(host[0] != 0 ? host : "breakerd", "/", getpid(), "/",
                   absl::Hex(absl::Uniform<uint32_t>(gen), absl::kZeroPad8));
  LogEvent(LogLevel::kInfo, "fleet_mode",
           {{"redis", options_.redis},
            {"user", redis->username.empty() ? "default" : redis->username},
            {"db", int64_t{redis->db}},
            {"key_prefix", redis->key_prefix},
            {"id", fleet.id}});
  fleet_ = std::make_unique<FleetSync>(
      registry_.get(), std::make_unique<RedisStore>(*std::move(redis)),
      std::move(fleet));
  registry_->SetProbeArbiter(fleet_.get());
  registry_->AddObserver(fleet_.get());
  return absl::OkStatus();
}

absl::Status ServerRunner::StartGrpc() {
  for (const Listener& l : listeners_) {
    if (absl::Status s = PrepareUnixSocket(l.address); !s.ok()) return s;
  }
  if (!options_.trace_file.empty()) {
    absl::StatusOr<std::unique_ptr<TraceWriter>> trace = TraceWriter::Open(
        options_.trace_file, static_cast<uint64_t>(options_.trace_max_bytes));
    if (!trace.ok())
      return absl::InvalidArgumentError(trace.status().message());
    trace_ = *std::move(trace);
  }
  breaker_service_ = std::make_unique<BreakerServiceImpl>(
      registry_.get(), watch_hub_.get(), &call_tracker_, &rpc_stats_,
      trace_.get(), read_limiter_.get());
  // Admin calls are in flight for the shutdown's drain too.
  admin_service_ = std::make_unique<AdminServiceImpl>(
      registry_.get(), admin_token_.initial(), &rpc_stats_, &call_tracker_);
  if (state_ != nullptr) {
    // An override is on disk before the operator hears it took.
    admin_service_->SetAfterOverride([this] { state_->Persist(); });
  }
  admin_service_->SetOnAuthFailure([this](absl::string_view reason) {
    admin_token_.OnAuthFailure(reason, admin_service_->auth_failures(),
                               registry_->clock()->NowNanos());
  });

  // Our own grpc.health.v1.Health: gRPC's default one bounds no Watch
  // stream. Disabled, gRPC adds none of its own beside it.
  health_service_ = std::make_unique<HealthService>(kMaxHealthWatchStreams);

  TakeLibraryDiagnostics();
  grpc::EnableDefaultHealthCheckService(false);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  // A second breakerd on the same port must fail, not share the port.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS,
                             kMaxConcurrentStreamsPerConnection);
  builder.SetMaxReceiveMessageSize(options_.max_message_bytes);
  for (Listener& l : listeners_) {
    builder.AddListeningPort(l.address, grpc::InsecureServerCredentials(),
                             &l.selected_port);
  }
  builder.RegisterService(breaker_service_.get());
  builder.RegisterService(admin_service_.get());
  builder.RegisterService(health_service_.get());
  // Unix sockets are bound here and chmod-ed below: until then the umask
  // decides who may connect. Owner-only in between, whatever the umask
  // breakerd was started with (it is process-wide, but no other thread
  // creates files during start-up).
  const mode_t old_umask = umask(0177);
  server_ = builder.BuildAndStart();
  umask(old_umask);

  std::vector<std::string> failed;
  for (const Listener& l : listeners_) {
    if (l.selected_port == 0) failed.push_back(l.address);
  }
  if (server_ == nullptr || !failed.empty()) {
    return absl::UnavailableError(
        absl::StrCat("listen ",
                     failed.empty() ? absl::StrJoin(options_.listen, ",")
                                    : absl::StrJoin(failed, ","),
                     ": ", ListenFailureCause(TakeLibraryDiagnostics())));
  }
  for (const Listener& l : listeners_) {
    if (absl::Status s =
            SetUnixSocketMode(l.address, options_.unix_socket_mode);
        !s.ok()) {
      return s;
    }
  }
  health_service_->SetServingStatus("breakerd.v1.Breaker", true);
  health_service_->SetServingStatus("breakerd.v1.Admin", true);
  health_service_->SetServingStatus(true);
  return absl::OkStatus();
}

absl::Status ServerRunner::StartMetrics() {
  ProcessStats stats;
  stats.version = options_.version;
  ConfigReloader* reloader = reloader_.get();
  if (reloader != nullptr) {
    stats.reload_successes = [reloader] { return reloader->successes(); };
    stats.reload_failures = [reloader] { return reloader->failures(); };
  }
  stats.config_valid = [this] {
    return config_valid_.load(std::memory_order_relaxed);
  };
  WatchHub* hub = watch_hub_.get();
  stats.watch_streams = [hub] {
    return static_cast<uint64_t>(hub->active_streams());
  };
  const RpcStats* rpc_stats = &rpc_stats_;
  stats.rpc_methods = [rpc_stats] { return rpc_stats->Snapshot(); };
  const AdminServiceImpl* admin = admin_service_.get();
  stats.admin_auth_failures = [admin] { return admin->auth_failures(); };
  if (const StateKeeper* state = state_.get(); state != nullptr) {
    stats.state_save_failures = [state] { return state->save_failures(); };
  }
  if (const FleetSync* fleet = fleet_.get(); fleet != nullptr) {
    stats.fleet_connected = [fleet] { return fleet->connected(); };
    stats.fleet_counters = [fleet] { return fleet->counters(); };
    stats.fleet_members = [fleet] { return fleet->members(); };
  }
  collector_ = std::make_shared<RegistryCollector>(
      registry_.get(), stats, options_.metrics_dependency_label);
  absl::StatusOr<std::unique_ptr<HttpEndpoint>> http =
      HttpEndpoint::Start(options_.metrics_listen, collector_.get());
  if (!http.ok()) return http.status();
  http_ = *std::move(http);
  return absl::OkStatus();
}

void ServerRunner::LogServing() const {
  std::vector<std::string> grpc_addresses;
  for (const Listener& l : listeners_) grpc_addresses.push_back(l.Bound());
  LogEvent(LogLevel::kInfo, "serving",
           {{"grpc", absl::StrJoin(grpc_addresses, ",")},
            {"metrics", http_->address()},
            {"version", options_.version},
            {"config", registry_->policies()->source}});
}

void ServerRunner::Shutdown() {
  http_->SetPhase(ServingPhase::kShuttingDown);
  LogEvent(LogLevel::kInfo, "shutting_down",
           {{"grace_ms", absl::ToInt64Milliseconds(options_.shutdown_grace)}});
  health_service_->SetServingStatus(false);
  StopMaintenanceThread();

  // Watch streams (Breaker's and Health's) never end on their own; end them
  // so Shutdown need not wait out the grace period for them.
  watch_hub_->Shutdown();
  health_service_->Shutdown();
  // gRPC's Shutdown(deadline) waits until every client connection is gone,
  // and an idle client hangs up only at the deadline. So wait for the calls
  // in flight ourselves (unary calls take microseconds), bounded by the
  // grace period, then give stragglers a short final window.
  const absl::Time deadline = absl::Now() + options_.shutdown_grace;
  while (call_tracker_.active() > 0 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  const absl::Time final_deadline =
      std::min(deadline, absl::Now() + absl::Milliseconds(100));
  server_->Shutdown(absl::ToChronoTime(final_deadline));
  server_->Wait();

  // No call changes a breaker any more: let the fleet go, then save.
  if (fleet_ != nullptr) fleet_->Stop();
  if (state_ != nullptr) state_->SaveFinal();

  StopSignalThread();
  http_->Stop();  // /readyz said 503 until the calls drained
  LogEvent(LogLevel::kInfo, "stopped");
}

void ServerRunner::SignalLoop() {
  const sigset_t set = ShutdownSignals();
  while (true) {
    int sig = 0;
    if (sigwait(&set, &sig) != 0) continue;
    bool stopping;
    {
      MutexLock lock(&mu_);
      if (stop_signals_) return;
      stopping = shutdown_requested_;
    }
    const char* name = sig == SIGHUP    ? "SIGHUP"
                       : sig == SIGTERM ? "SIGTERM"
                                        : "SIGINT";
    if (sig == SIGHUP) {
      if (stopping) continue;
      admin_token_.Reload(admin_service_.get());
      if (reloader_ == nullptr) {
        LogEvent(LogLevel::kInfo, "reload_skipped",
                 {{"signal", name},
                  {"reason",
                   "no --config given: the embedded defaults apply, nothing "
                   "to reload"}});
      } else {
        reloader_->Reload("signal").IgnoreError();  // logged by LogReload
      }
      continue;
    }
    if (stopping) {
      LogEvent(LogLevel::kWarn, "signal_ignored",
               {{"signal", name}, {"reason", "already shutting down"}});
      continue;
    }
    LogEvent(LogLevel::kInfo, "shutdown_requested", {{"signal", name}});
    RequestShutdown();
  }
}

void ServerRunner::StopSignalThread() {
  if (!signal_thread_.joinable()) return;
  {
    MutexLock lock(&mu_);
    stop_signals_ = true;
  }
  // Wakes sigwait in that thread only; it sees stop_signals_ and returns.
  pthread_kill(signal_thread_.native_handle(), SIGHUP);
  signal_thread_.join();
}

void ServerRunner::StopMaintenanceThread() {
  if (!maintenance_thread_.joinable()) return;
  {
    MutexLock lock(&mu_);
    stop_maintenance_ = true;
  }
  cv_.SignalAll();
  maintenance_thread_.join();
}

void ServerRunner::MaintenanceLoop() {
  const Clock* clock = MonotonicClock::Get();
  // The poll re-reads the config and the admin token files.
  const bool poll_needed =
      reloader_ != nullptr || !options_.admin_token_file.empty();
  const absl::Duration poll =
      poll_needed ? options_.config_poll_interval : absl::ZeroDuration();
  // Opens and closes reach the --state-file this often (overrides at once).
  const absl::Duration save =
      state_ != nullptr ? kStateSaveInterval : absl::ZeroDuration();
  const absl::Duration evict = options_.evict_interval;
  absl::Time next_poll = poll > absl::ZeroDuration() ? clock->Now() + poll
                                                     : absl::InfiniteFuture();
  absl::Time next_evict = evict > absl::ZeroDuration() ? clock->Now() + evict
                                                       : absl::InfiniteFuture();
  absl::Time next_save = save > absl::ZeroDuration() ? clock->Now() + save
                                                     : absl::InfiniteFuture();
  while (true) {
    const absl::Time next = std::min({next_poll, next_evict, next_save});
    {
      MutexLock lock(&mu_);
      // InfiniteFuture - now is an infinite wait.
      while (!stop_maintenance_ && clock->Now() < next) {
        cv_.WaitWithTimeout(&mu_, next - clock->Now());
      }
      if (stop_maintenance_) return;
    }
    const absl::Time now = clock->Now();
    if (now >= next_poll) {
      if (reloader_ != nullptr) {
        reloader_->ReloadIfChanged().IgnoreError();  // logged by OnReload
      }
      admin_token_.Reload(admin_service_.get());
      next_poll = clock->Now() + poll;
    }
    if (now >= next_save) {
      state_->Persist();
      next_save = clock->Now() + save;
    }
    if (now >= next_evict) {
      size_t released = 0;
      const size_t evicted = registry_->EvictIdle(&released);
      if (evicted > 0) {
        LogEvent(LogLevel::kInfo, "breakers_evicted",
                 {{"evicted", evicted}, {"remaining", registry_->size()}});
      }
#ifdef __GLIBC__
      // After a burst of traffic on many breakers goes quiet, the permit
      // ledgers and breakers freed here are small blocks spread over the
      // heap: give their pages back to the system, so resident memory
      // follows what the breakers hold (a few ms for a heap of 100 MiB,
      // only when much was freed).
      if (evicted + released >= kTrimAfterFreed) malloc_trim(0);
#endif
      next_evict = clock->Now() + evict;
    }
  }
}

}  // namespace breakerd

// service_fuzz: arbitrary sequences of Breaker and Admin RPCs
// (server/service: BreakerServiceImpl, AdminServiceImpl, WatchHub) over one
// in-process gRPC server, started once and shared by every input, as
// tests/service/service_test.cc wires it: a Registry on a FakeClock, the
// hub registered as its observer, both services on a grpc::Server with no
// listening port, called through server->InProcessChannel().
//
// Breaker calls (Acquire, Report, AcquireFirst, GetState, ListStates) go
// straight to the handler, with grpc::testing::DefaultReactorTestPeer
// (include/grpcpp/test/default_reactor_test_peer.h), in 15 of 16 cases, so
// arbitrary bytes reach breakerd's own validation and inputs run fast; the
// 16th goes over the in-process channel (the wire path, protobuf parsing
// included). Admin (which reads the authorization metadata) and Watch
// (a stream) always go over the channel.
//
// Each input is a sequence of calls built with FuzzedDataProvider: names
// from a small pool or arbitrary bytes (empty, too long, bad bytes, invalid
// UTF-8), any attempt, issued / forged / zero / other dependencies'
// permits, any Outcome int, any http_status, any optional grpc_code,
// malformed, negative and huge Durations, Watch over any list, and Admin
// calls with no, the right, a wrong or a malformed token; plus clock moves.
// Each input first picks the hang/* policy's inflight.hang_after and the
// ramp/* policy's recovery.ramp and recovery.start_share (applied like a
// reload while no breaker exists). After the input, every breaker is
// reset, the clock moved past idle_ttl (only the breakers with a permit
// out may stay), then past every window and permit horizon (the registry
// must then be empty) and wound back, so inputs do not leak into each
// other.
//
// Invariants, each an abort when broken:
//  - Every call ends with a status the proto documents for it: Acquire OK /
//    INVALID_ARGUMENT / RESOURCE_EXHAUSTED; Report OK / INVALID_ARGUMENT;
//    AcquireFirst as Acquire; GetState OK / INVALID_ARGUMENT / NOT_FOUND;
//    ListStates OK; Watch INVALID_ARGUMENT / RESOURCE_EXHAUSTED or, once we
//    cancel it, CANCELLED; ForceOpen / ForceClose OK / UNAUTHENTICATED /
//    INVALID_ARGUMENT / RESOURCE_EXHAUSTED; Reset OK / UNAUTHENTICATED /
//    INVALID_ARGUMENT / NOT_FOUND. Never INTERNAL, UNKNOWN or a crash.
//    (One known exception over the wire, see FrameworkRefusedUtf8: a
//    string field that is not UTF-8 gets gRPC's UNIMPLEMENTED.)
//  - INVALID_ARGUMENT messages are non-empty and start with the field they
//    name; UNAUTHENTICATED ones start with "admin:"; no message contains
//    the admin token except inside a quote of the request's own fields (a
//    dependency named after the token is quoted back to its sender).
//  - Which requests are refused is predicted from the request alone: a bad
//    name, a malformed / negative / over-24h duration, a zero or
//    never-issued permit, an invalid outcome -> INVALID_ARGUMENT; a Report
//    with an issued permit and valid fields -> OK; Admin OK only with
//    exactly "Bearer <token>".
//  - A refused call (any code but OK) changes no breaker (every snapshot
//    compared), except AcquireFirst's RESOURCE_EXHAUSTED, which may have
//    asked earlier candidates first.
//  - OK responses are consistent: allowed == (permit != 0); a shadow
//    policy always allows; enums in range; REJECT_REASON_RAMP only from a
//    closed breaker whose policy ramps; GetState / admin statuses match
//    the registry; ListStates lists every breaker.
//  - Single-use permits: a Report of an issued permit answers
//    EFFECT_DUPLICATE exactly when it was reported before and its permit
//    ledger still knows it (fuzz/engine_model.h's LedgerModel, fed with
//    the calls that reach each breaker); every breaker's inflight and
//    hung-call counts are the model's. (A forged permit passes the 17-bit
//    tag with probability 2^-17, which DESIGN.md allows: then the models
//    are not checked for the rest of the input, and the process aborts if
//    that happens more often than chance explains.)
//  - Watch: the initial states first (one per distinct name, or every
//    breaker), then every transition of the watched breakers in order: per
//    dependency the generations run on by exactly one, and their number is
//    exactly what the registry's generations say happened. A Watch of
//    every dependency reads its initial states shard by shard as the client
//    reads: each is at or after the stream's start, then the generations
//    run on by one to the current one (see CheckWatchAll).
//  - After the reset at the end, idle_ttl later, eviction takes exactly
//    the breakers without a permit out (unreported and within the
//    horizon); past every horizon it takes them all.
#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "breakerd/v1/breaker.grpc.pb.h"
#include "fuzz/engine_model.h"
#include "fuzz/fuzz_check.h"
#include "google/protobuf/stubs/common.h"
#include "google/protobuf/stubs/logging.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/test/default_reactor_test_peer.h"
#include "server/engine/clock.h"
#include "server/engine/outcome.h"
#include "server/engine/policy.h"
#include "server/engine/registry.h"
#include "server/engine/types.h"
#include "server/service/admin_service.h"
#include "server/service/breaker_service.h"
#include "server/service/watch_hub.h"
#include "tests/e2e/watch_notices.h"

namespace breakerd {
namespace {

constexpr char kToken[] = "fuzz-admin-token-7f3a";
constexpr int kMaxOps = 48;
constexpr size_t kMaxStreams = 2;
constexpr uint32_t kMaxBreakers = 12;

// The pool of well-formed names; the policies below single some out.
constexpr const char* kNames[] = {
    "a",   "openai/key-1", "shadow/s", "slow/x", "rl/y",  "b",
    "c.d", "e@f:g-h_i",    "shadow/t", "hang/h", "ramp/r"};
constexpr int kNameCount = sizeof(kNames) / sizeof(kNames[0]);

// What each input chooses of the policies: hang/*'s inflight.hang_after,
// ramp/*'s recovery.ramp and recovery.start_share.
struct Knobs {
  absl::Duration hang_after = absl::Seconds(1);
  absl::Duration ramp = absl::Seconds(2);
  double start_share = 0.1;
  bool operator==(const Knobs& o) const {
    return hang_after == o.hang_after && ramp == o.ramp &&
           start_share == o.start_share;
  }
};

Knobs ConsumeKnobs(FuzzedDataProvider& fdp) {
  Knobs k;
  if (fdp.ConsumeIntegralInRange(0, 3) == 0) return k;  // the defaults
  // Within the config's ranges: hang_after (0, 5m], ramp (0, 1h],
  // start_share (0, 1], in milliseconds and millionths.
  k.hang_after =
      absl::Milliseconds(fdp.ConsumeIntegralInRange<int64_t>(1, 300000));
  k.ramp = absl::Milliseconds(fdp.ConsumeIntegralInRange<int64_t>(1, 3600000));
  k.start_share = fdp.ConsumeIntegralInRange(1, 1000000) / 1000000.0;
  return k;
}

std::shared_ptr<const PolicySet> Policies(const Knobs& knobs) {
  auto set = std::make_shared<PolicySet>();
  Policy d;
  d.consecutive_failures = 3;
  d.failure_rate = {0.5, 4, absl::Seconds(10)};
  d.cooldown = {absl::Seconds(1), absl::Seconds(8), 0.1};
  d.probe.lease = absl::Seconds(2);
  d.retry_budget = {0.1, 0.2, absl::Seconds(5)};
  set->defaults = std::make_shared<const Policy>(d);
  Policy shadow = d;
  shadow.match = "shadow/*";
  shadow.mode = Mode::kShadow;
  Policy slow = d;
  slow.match = "slow/*";
  slow.slow_call_rate = {0.5, 2, absl::Seconds(1)};
  slow.probe.required_successes = 2;
  Policy rl = d;
  rl.match = "rl/*";
  rl.rate_limited = RateLimitedHandling::kIgnore;
  rl.consecutive_failures = 1;
  Policy hang = d;
  hang.match = "hang/*";
  hang.inflight.hang_after = knobs.hang_after;
  Policy ramp = d;
  ramp.match = "ramp/*";
  ramp.recovery.ramp = knobs.ramp;
  ramp.recovery.start_share = knobs.start_share;
  for (const Policy& p : {shadow, slow, rl, hang, ramp}) {
    set->policies.push_back(std::make_shared<const Policy>(p));
  }
  set->limits.max_breakers = kMaxBreakers;
  set->limits.idle_ttl = absl::Seconds(1);
  return set;
}

// The server, shared by every input and never destroyed (gRPC's threads
// outlive LLVMFuzzerTestOneInput).
struct Fixture {
  Fixture()
      : set(Policies(knobs)),
        registry(set, &clock, /*permit_secret=*/0xf022),
        hub(&registry, kMaxStreams, /*max_queue=*/1024),
        breaker_service(&registry, &hub),
        admin_service(&registry, std::string(kToken)) {
    registry.AddObserver(&hub);
    grpc::ServerBuilder builder;
    builder.RegisterService(&breaker_service);
    builder.RegisterService(&admin_service);
    server = builder.BuildAndStart();
    FUZZ_CHECK(server != nullptr);
    channel = server->InProcessChannel(grpc::ChannelArguments());
    stub = v1::Breaker::NewStub(channel);
    admin = v1::Admin::NewStub(channel);
  }

  FakeClock clock;
  // The policies in force (ApplyKnobs changes them between inputs).
  Knobs knobs;
  std::shared_ptr<const PolicySet> set;
  Registry registry;
  WatchHub hub;
  BreakerServiceImpl breaker_service;
  AdminServiceImpl admin_service;
  std::unique_ptr<grpc::Server> server;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<v1::Breaker::Stub> stub;
  std::unique_ptr<v1::Admin::Stub> admin;
};

Fixture& TheFixture() {
  static Fixture* const fixture = new Fixture();
  return *fixture;
}

bool IsUtf8(const std::string& s) {
  return google::protobuf::internal::IsStructurallyValidUTF8(
      s.data(), static_cast<int>(s.size()));
}

absl::string_view CodeName(grpc::StatusCode code) {
  const int c = static_cast<int>(code);
  return c >= 0 && c < kGrpcCodeCount ? GrpcCodeName(c) : "?";
}

std::string StatusText(const grpc::Status& s) {
  return absl::StrCat(CodeName(s.error_code()), " \"", s.error_message(), "\"");
}

// A printable rendering of arbitrary bytes.
std::string Show(absl::string_view s) {
  std::string out = "\"";
  for (unsigned char c : s.substr(0, 60)) {
    if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\') {
      out.push_back(static_cast<char>(c));
    } else {
      absl::StrAppend(&out, "\\x", absl::Hex(c, absl::kZeroPad2));
    }
  }
  absl::StrAppend(&out, s.size() > 60 ? "\"..." : "\"");
  return out;
}

std::chrono::system_clock::time_point Deadline() {
  return std::chrono::system_clock::now() + std::chrono::seconds(20);
}

// Comparable form of every breaker (the clock does not move during a call).
auto Comparable(const BreakerSnapshot& s) {
  std::vector<std::tuple<int, int, int, uint64_t>> transitions;
  for (const auto& t : s.transitions) {
    transitions.emplace_back(static_cast<int>(t.from), static_cast<int>(t.to),
                             static_cast<int>(t.reason), t.count);
  }
  std::sort(transitions.begin(), transitions.end());
  return std::make_tuple(
      s.dependency, s.state, s.generation, s.retry_after, s.window.calls,
      s.window.failures, s.window.slow, s.consecutive_failures,
      s.escalation_level, s.probe_in_flight, s.acquires, s.reports,
      s.retries_granted, s.retries_rejected, transitions, s.latency_buckets,
      s.latency_count, s.inflight, s.hung_calls, s.admit_share);
}
using World = std::vector<decltype(Comparable(BreakerSnapshot()))>;

// Acquires a breaker has answered so far.
uint64_t Acquires(const BreakerSnapshot& s) {
  uint64_t n = 0;
  for (uint64_t a : s.acquires) n += a;
  return n;
}

bool ValidProtoDuration(const google::protobuf::Duration& d) {
  return d.seconds() >= 0 && d.nanos() >= 0 && d.nanos() <= 999999999;
}

bool ValidDurationField(const google::protobuf::Duration& d) {
  const int64_t s = d.seconds();
  const int32_t n = d.nanos();
  if (n < -999999999 || n > 999999999) return false;
  if (s < 0 || n < 0) return false;
  return s < 86400 || (s == 86400 && n == 0);
}

struct OpenWatch {
  std::unique_ptr<grpc::ClientContext> ctx;
  std::unique_ptr<grpc::ClientReader<v1::StateChange>> reader;
  bool all = false;
  std::vector<std::string> names;  // distinct, in request order
  // Generation of every breaker when the stream was subscribed.
  std::map<std::string, uint64_t> generation_at_start;
  std::string what;
};

// A permit granted, and its number among its breaker's permits.
struct Issued {
  std::string dependency;
  uint64_t permit = 0;
  uint32_t index = 0;
};

// What the harness keeps about one breaker: its permit ledger
// (fuzz/engine_model.h), the generation it last saw, its last activity.
struct Model {
  explicit Model(const Policy& p) : ledger(p) {}
  fuzz::LedgerModel ledger;
  uint64_t generation = 0;
  int64_t last_activity_ns = 0;
};

class Session {
 public:
  explicit Session(Fixture& f) : f_(f), start_ns_(f.clock.NowNanos()) {}

  void Run(FuzzedDataProvider& fdp) {
    ApplyKnobs(ConsumeKnobs(fdp));
    for (int op = 0; op < kMaxOps && fdp.remaining_bytes() > 0; ++op) {
      // Admin and Watch always take the channel (about a millisecond a
      // call on a loaded machine): they are rarer than the Breaker calls.
      // Weights out of 32: Acquire 8, Report 9, AcquireFirst 3, GetState 3,
      // ListStates 1, Watch 1, Admin 3, clock 4.
      static constexpr int kOps[32] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1,
                                       1, 1, 1, 1, 1, 1, 2, 2, 2, 3, 3,
                                       3, 4, 5, 6, 6, 6, 7, 7, 7, 7};
      switch (kOps[fdp.ConsumeIntegralInRange(0, 31)]) {
        case 0:
          Acquire(fdp);
          break;
        case 1:
          Report(fdp);
          break;
        case 2:
          AcquireFirst(fdp);
          break;
        case 3:
          GetState(fdp);
          break;
        case 4:
          ListStates(fdp);
          break;
        case 5:
          StartWatch(fdp);
          break;
        case 6:
          Admin(fdp);
          break;
        default:
          Advance(fdp);
      }
      CheckModels();
    }
  }

  // Checks and ends the Watch streams, then resets, evicts and rewinds.
  void Finish() {
    for (OpenWatch& w : watches_) CheckWatch(w);
    watches_.clear();
    // Cancelled streams leave the hub when the server sees the cancel.
    for (int i = 0; i < 20000 && f_.hub.active_streams() > 0; ++i) {
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    FUZZ_CHECK(f_.hub.active_streams() == 0, f_.hub.active_streams());

    for (const BreakerSnapshot& s : f_.registry.List()) {
      const absl::StatusOr<BreakerSnapshot> reset =
          f_.registry.Reset(s.dependency);
      FUZZ_CHECK(reset.ok(), s.dependency);
      Observe(ModelOf(s.dependency), *reset);
    }
    // Reset, and idle_ttl without a call: what stays is exactly what has
    // a permit out within its horizon.
    f_.clock.Advance(f_.set->limits.idle_ttl);
    const int64_t now = f_.clock.NowNanos();
    std::set<std::string> want;
    std::string detail;
    for (auto& [name, m] : models_) {
      m.ledger.ReleaseIdle(now, State::kClosed);
      if (m.ledger.Inflight(now, State::kClosed) > 0) want.insert(name);
      absl::StrAppend(&detail, " ", name, ": ",
                      m.ledger.Inflight(now, State::kClosed), " out;");
    }
    f_.registry.EvictIdle();
    std::set<std::string> kept;
    for (const BreakerSnapshot& s : f_.registry.List()) {
      kept.insert(s.dependency);
    }
    FUZZ_CHECK(kept == want || models_lost_, kept.size(),
               " breakers kept after Reset + ",
               absl::FormatDuration(f_.set->limits.idle_ttl), ", want ",
               want.size(), ":", detail);
    f_.clock.Advance(absl::Hours(2));
    f_.registry.EvictIdle();
    FUZZ_CHECK(f_.registry.size() == 0, f_.registry.size(),
               " breakers survive Reset + 2h idle");
    // Nothing is left that could see time go backwards.
    f_.clock.Advance(absl::Nanoseconds(start_ns_ - f_.clock.NowNanos()));
  }

 private:
  // Puts this input's policies in force (between inputs no breaker
  // exists, so this is all a reload changes).
  void ApplyKnobs(const Knobs& knobs) {
    FUZZ_TRACE("hang/* hang_after ", absl::FormatDuration(knobs.hang_after),
               "; ramp/* ramp ", absl::FormatDuration(knobs.ramp), " from ",
               knobs.start_share);
    if (knobs == f_.knobs) return;
    FUZZ_CHECK(f_.registry.size() == 0, f_.registry.size());
    f_.knobs = knobs;
    f_.set = Policies(knobs);
    f_.registry.ApplyPolicies(f_.set);
  }

  // --- the permit model ------------------------------------------------------

  // The model of `name`'s breaker (new if there was none).
  Model& ModelOf(const std::string& name) {
    auto it = models_.find(name);
    if (it == models_.end()) {
      it = models_.emplace(name, Model(*f_.set->Match(name))).first;
      it->second.generation = f_.registry.generation_floor();
    }
    return it->second;
  }

  // Follows a generation change of `s` (after any permit the call issued:
  // a call that issues one moves the generation only before it).
  void Observe(Model& m, const BreakerSnapshot& s) {
    FUZZ_CHECK(s.generation >= m.generation, s.dependency, " generation ",
               s.generation, " was ", m.generation);
    if (s.generation == m.generation) return;
    m.generation = s.generation;
    m.ledger.NewGeneration();
  }

  // A call reached `name`'s breaker, in state `before` (nullopt: it
  // created the breaker): the ledger is tended as the engine does.
  Model& Reached(const std::string& name,
                 const std::optional<BreakerSnapshot>& before) {
    Model& m = ModelOf(name);
    m.ledger.Tend(f_.clock.NowNanos(),
                  before.has_value() ? before->state : State::kClosed);
    m.last_activity_ns = f_.clock.NowNanos();
    return m;
  }

  // After an Acquire of `name` that granted `permit` (0: none).
  void Granted(const std::string& name, uint64_t permit) {
    Model& m = ModelOf(name);
    const absl::StatusOr<BreakerSnapshot> after = f_.registry.Get(name);
    FUZZ_CHECK(after.ok(), name);
    Observe(m, *after);
    if (permit == 0) return;
    issued_.push_back({name, permit, m.ledger.Issue(f_.clock.NowNanos())});
  }

  std::optional<BreakerSnapshot> Find(const std::string& name) const {
    absl::StatusOr<BreakerSnapshot> s = f_.registry.Get(name);
    if (!s.ok()) return std::nullopt;
    return *std::move(s);
  }

  // Every breaker against its model: generations followed, inflight and
  // hung calls the model's; no model without a breaker.
  void CheckModels() {
    if (models_lost_) return;
    const int64_t now = f_.clock.NowNanos();
    size_t breakers = 0;
    for (auto& [name, m] : models_) {
      const std::optional<BreakerSnapshot> s = Find(name);
      FUZZ_CHECK(s.has_value(), name, " has a model but no breaker");
      ++breakers;
      Observe(m, *s);
      FUZZ_CHECK(s->inflight == m.ledger.Inflight(now, s->state) &&
                     s->hung_calls == m.ledger.hung_total(),
                 name, " inflight ", s->inflight, " hung ", s->hung_calls,
                 "; model: ", m.ledger.Inflight(now, s->state), " and ",
                 m.ledger.hung_total());
    }
    FUZZ_CHECK(breakers == f_.registry.size(), breakers, " models for ",
               f_.registry.size(), " breakers");
  }

  // --- inputs ----------------------------------------------------------------

  std::string ConsumeName(FuzzedDataProvider& fdp) {
    switch (fdp.ConsumeIntegralInRange(0, 7)) {
      case 0:
        return fdp.ConsumeRandomLengthString(210);
      case 1:
        return std::string(fdp.ConsumeIntegralInRange<size_t>(199, 201), 'n');
      default:
        return kNames[fdp.ConsumeIntegralInRange(0, kNameCount - 1)];
    }
  }

  // One Breaker call in 16 goes over the channel.
  static bool ConsumeWire(FuzzedDataProvider& fdp) {
    return fdp.ConsumeIntegralInRange(0, 15) == 0;
  }
  static const char* Via(bool wire) { return wire ? " [wire]" : " [direct]"; }

  static uint32_t ConsumeAttempt(FuzzedDataProvider& fdp) {
    switch (fdp.ConsumeIntegralInRange(0, 5)) {
      case 0:
        return fdp.ConsumeIntegral<uint32_t>();
      case 1:
        return 1;
      default:
        return 0;
    }
  }

  static void ConsumeDuration(FuzzedDataProvider& fdp,
                              google::protobuf::Duration* d) {
    switch (fdp.ConsumeIntegralInRange(0, 3)) {
      case 0:
        d->set_seconds(fdp.ConsumeIntegral<int64_t>());
        d->set_nanos(fdp.ConsumeIntegral<int32_t>());
        break;
      case 1:
        d->set_seconds(fdp.ConsumeIntegralInRange<int64_t>(-2, 90000));
        d->set_nanos(
            fdp.ConsumeIntegralInRange<int32_t>(-1000000000, 1000000000));
        break;
      default:
        d->set_seconds(fdp.ConsumeIntegralInRange<int64_t>(0, 3));
        d->set_nanos(fdp.ConsumeIntegralInRange<int32_t>(0, 999999999));
    }
  }

  // --- checks ----------------------------------------------------------------

  // Every breaker, read through the names this input used (cheaper than
  // Registry::List, which locks all 256 shards); the count must match.
  World Snapshot() const {
    World world;
    for (const std::string& name : used_) {
      absl::StatusOr<BreakerSnapshot> s = f_.registry.Get(name);
      if (s.ok()) world.push_back(Comparable(*s));
    }
    FUZZ_CHECK(world.size() == f_.registry.size(), world.size(), " of ",
               f_.registry.size(), " breakers found by name");
    return world;
  }

  // Remembers a name the registry may now hold a breaker for.
  void Use(const std::string& name) {
    if (ValidName(name)) used_.insert(name);
  }

  // Runs a Breaker handler directly: no transport, the request as given.
  template <typename Request, typename Response>
  grpc::Status Direct(grpc::ServerUnaryReactor* (BreakerServiceImpl::*method)(
                          grpc::CallbackServerContext*, const Request*,
                          Response*),
                      const Request& request, Response* response) {
    grpc::CallbackServerContext ctx;
    grpc::testing::DefaultReactorTestPeer peer(&ctx);
    grpc::ServerUnaryReactor* reactor =
        (f_.breaker_service.*method)(&ctx, &request, response);
    FUZZ_CHECK(reactor == peer.reactor(), "handler used its own reactor");
    FUZZ_CHECK(peer.test_status_set(), "handler returned without Finish");
    return peer.test_status();
  }

  // Every status: an allowed code, messages naming their field, no token.
  // `sent`: the request's own string fields. A message may quote them back
  // ("cannot track \"<name>\""), so a caller who put the token in a name
  // gets it back; the token must appear nowhere else.
  void CheckStatus(const grpc::Status& s,
                   std::initializer_list<grpc::StatusCode> allowed,
                   const std::string& what,
                   const std::vector<std::string>& sent = {}) {
    FUZZ_TRACE(what, " -> ", StatusText(s));
    bool ok = false;
    for (grpc::StatusCode c : allowed) ok = ok || s.error_code() == c;
    FUZZ_CHECK(ok, what, " -> ", StatusText(s));
    std::string unquoted = s.error_message();
    for (const std::string& field : sent) {
      if (!field.empty()) absl::StrReplaceAll({{field, ""}}, &unquoted);
    }
    FUZZ_CHECK(!absl::StrContains(unquoted, kToken), what,
               " leaks the admin token: ", StatusText(s));
    if (s.error_code() == grpc::StatusCode::INVALID_ARGUMENT) {
      bool named = false;
      for (absl::string_view field :
           {"dependency:", "dependencies", "permit:", "outcome:",
            "http_status:", "grpc_code:", "latency:", "retry_after:"}) {
        named = named || absl::StartsWith(s.error_message(), field);
      }
      FUZZ_CHECK(named, what, " -> ", StatusText(s), " names no field");
    }
    if (s.error_code() == grpc::StatusCode::UNAUTHENTICATED) {
      FUZZ_CHECK(absl::StartsWith(s.error_message(), "admin:"), what, " -> ",
                 StatusText(s));
    }
    if (s.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) {
      FUZZ_CHECK(absl::StrContains(s.error_message(), "max_breakers") ||
                     absl::StartsWith(s.error_message(), "watch:"),
                 what, " -> ", StatusText(s));
    }
  }

  void CheckUnchanged(const World& before, const std::string& what) const {
    FUZZ_CHECK(Snapshot() == before, what,
               " was refused but changed a breaker");
  }

  bool IsShadow(const std::string& name) const {
    return f_.set->Match(name)->mode == Mode::kShadow;
  }

  static bool ValidName(const std::string& name) {
    return ValidateDependency(name).ok();
  }

  void CheckDecision(const std::string& name, bool allowed, uint64_t permit,
                     bool probe, int state, int reason,
                     const google::protobuf::Duration& retry_after,
                     const std::string& what) const {
    FUZZ_CHECK(allowed == (permit != 0), what);
    FUZZ_CHECK(state >= 1 && state <= 5, what, " state ", state);
    FUZZ_CHECK(reason >= 0 && reason <= v1::RejectReason_MAX, what, " reason ",
               reason);
    FUZZ_CHECK(allowed || reason != 0, what, " rejected without a reason");
    if (IsShadow(name)) FUZZ_CHECK(allowed, what, " shadow must allow");
    if (!IsShadow(name) && allowed) FUZZ_CHECK(reason == 0, what);
    if (reason == v1::REJECT_REASON_RAMP) {
      FUZZ_CHECK(state == v1::STATE_CLOSED &&
                     f_.set->Match(name)->recovery.ramp > absl::ZeroDuration(),
                 what, " refused by a ramp in state ", state);
    }
    if (probe) FUZZ_CHECK(allowed, what);
    FUZZ_CHECK(ValidProtoDuration(retry_after), what);
  }

  void CheckStatusMessage(const v1::BreakerStatus& st,
                          const std::string& what) const {
    const absl::StatusOr<BreakerSnapshot> s = f_.registry.Get(st.dependency());
    FUZZ_CHECK(s.ok(), what, " returned a status for an absent breaker");
    FUZZ_CHECK(st.state() == static_cast<int>(s->state) &&
                   st.generation() == s->generation &&
                   st.window_calls() == s->window.calls &&
                   st.window_failures() == s->window.failures &&
                   st.consecutive_failures() == s->consecutive_failures &&
                   st.escalation_level() == s->escalation_level &&
                   st.probe_in_flight() == s->probe_in_flight &&
                   st.admit_share() == s->admit_share &&
                   st.inflight() == s->inflight && st.policy() == s->policy,
               what, " status disagrees with the registry");
    FUZZ_CHECK(st.mode() == (IsShadow(st.dependency()) ? "shadow" : "enforce"),
               what, " mode ", st.mode());
    FUZZ_CHECK(ValidProtoDuration(st.retry_after()), what);
    FUZZ_CHECK(st.failure_rate() >= 0 && st.failure_rate() <= 1, what);
  }

  // A request carrying a string that is not UTF-8 cannot be parsed by the
  // server's protobuf (proto3 `string`); see the KNOWN FINDING below.
  // Returns true if `s` is that case and was accepted as such.
  bool FrameworkRefusedUtf8(const grpc::Status& s, bool utf8,
                            const World& before, const std::string& what) {
    if (utf8 || s.ok() ||
        s.error_code() == grpc::StatusCode::INVALID_ARGUMENT) {
      return false;
    }
    // KNOWN FINDING (fuzz/RESULTS.md): when a request's string field is
    // not valid UTF-8, the server's protobuf refuses to parse it and gRPC
    // answers UNIMPLEMENTED with an empty message (the handler never
    // runs), not INVALID_ARGUMENT naming the field. Allowed, as long as
    // nothing changed, unless BREAKERD_FUZZ_STRICT=1.
    FUZZ_TRACE(what, " -> ", StatusText(s), " (not UTF-8)");
    FUZZ_CHECK(!fuzz::StrictMode(), what, " -> ", StatusText(s),
               " (a request string is not UTF-8)");
    FUZZ_CHECK(s.error_code() == grpc::StatusCode::UNIMPLEMENTED ||
                   s.error_code() == grpc::StatusCode::INTERNAL,
               what, " -> ", StatusText(s));
    CheckUnchanged(before, what);
    ++utf8_refusals_;
    return true;
  }

  // --- calls -----------------------------------------------------------------

  void Acquire(FuzzedDataProvider& fdp) {
    v1::AcquireRequest req;
    req.set_dependency(ConsumeName(fdp));
    req.set_attempt(ConsumeAttempt(fdp));
    const bool wire = ConsumeWire(fdp);
    const std::string what = absl::StrCat("Acquire(", Show(req.dependency()),
                                          ", ", req.attempt(), ")", Via(wire));
    const std::optional<BreakerSnapshot> previous = Find(req.dependency());
    const bool existed = previous.has_value();
    const World before = Snapshot();
    Use(req.dependency());
    v1::AcquireResponse resp;
    grpc::Status s;
    if (wire) {
      grpc::ClientContext ctx;
      ctx.set_deadline(Deadline());
      s = f_.stub->Acquire(&ctx, req, &resp);
    } else {
      s = Direct(&BreakerServiceImpl::Acquire, req, &resp);
    }
    if (FrameworkRefusedUtf8(s, !wire || IsUtf8(req.dependency()), before,
                             what)) {
      return;
    }
    CheckStatus(s,
                {grpc::StatusCode::OK, grpc::StatusCode::INVALID_ARGUMENT,
                 grpc::StatusCode::RESOURCE_EXHAUSTED},
                what, {req.dependency()});
    if (!ValidName(req.dependency())) {
      FUZZ_CHECK(s.error_code() == grpc::StatusCode::INVALID_ARGUMENT, what,
                 " -> ", StatusText(s));
    } else if (!existed && before.size() >= kMaxBreakers) {
      FUZZ_CHECK(s.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED, what,
                 " -> ", StatusText(s));
    } else {
      FUZZ_CHECK(s.ok(), what, " -> ", StatusText(s));
    }
    if (!s.ok()) {
      CheckUnchanged(before, what);
      return;
    }
    FUZZ_TRACE("  ", resp.ShortDebugString());
    CheckDecision(req.dependency(), resp.allowed(), resp.permit(), resp.probe(),
                  resp.state(), resp.reason(), resp.retry_after(), what);
    Reached(req.dependency(), previous);
    Granted(req.dependency(), resp.allowed() ? resp.permit() : 0);
  }

  void Report(FuzzedDataProvider& fdp) {
    v1::ReportRequest req;
    req.set_dependency(ConsumeName(fdp));
    switch (fdp.ConsumeIntegralInRange(0, 5)) {
      case 0:
        req.set_permit(0);
        break;
      case 1: {
        // Garbage, mixed so that comparison tracing cannot copy the
        // engine's permit tag into the input.
        uint64_t x = fdp.ConsumeIntegral<uint64_t>() + 0x9e3779b97f4a7c15ULL;
        x = (x ^ (x >> 31)) * 0xd6e8feb86659fd93ULL;
        req.set_permit(x ^ (x >> 29));
        break;
      }
      default:
        // An issued permit (maybe another dependency's).
        if (!issued_.empty()) {
          const Issued& p = issued_[fdp.ConsumeIntegralInRange<size_t>(
              0, issued_.size() - 1)];
          req.set_permit(p.permit);
          if (fdp.ConsumeBool()) req.set_dependency(p.dependency);
        }
    }
    switch (fdp.ConsumeIntegralInRange(0, 3)) {
      case 0:
        req.set_outcome(
            static_cast<v1::Outcome>(fdp.ConsumeIntegral<int32_t>()));
        break;
      case 1:
        req.set_outcome(
            static_cast<v1::Outcome>(fdp.ConsumeIntegralInRange(0, 10)));
        break;
      default:
        req.set_outcome(
            static_cast<v1::Outcome>(fdp.ConsumeIntegralInRange(1, 9)));
    }
    if (fdp.ConsumeBool()) {
      req.set_http_status(fdp.ConsumeBool()
                              ? fdp.ConsumeIntegral<uint32_t>()
                              : fdp.ConsumeIntegralInRange<uint32_t>(0, 600));
    }
    if (fdp.ConsumeBool()) {
      req.set_grpc_code(fdp.ConsumeBool()
                            ? fdp.ConsumeIntegral<int32_t>()
                            : fdp.ConsumeIntegralInRange<int32_t>(-1, 17));
    }
    if (fdp.ConsumeBool()) ConsumeDuration(fdp, req.mutable_latency());
    if (fdp.ConsumeIntegralInRange(0, 3) == 0) {
      ConsumeDuration(fdp, req.mutable_retry_after());
    }

    // What the server must decide, from the request alone.
    RawOutcome raw;
    raw.explicit_class = static_cast<int>(req.outcome());
    raw.http_status = req.http_status();
    if (req.has_grpc_code()) raw.grpc_code = req.grpc_code();
    const bool outcome_ok = Classify(raw).ok();
    const bool durations_ok =
        (!req.has_latency() || ValidDurationField(req.latency())) &&
        (!req.has_retry_after() || ValidDurationField(req.retry_after()));
    const auto issued_it =
        std::find_if(issued_.begin(), issued_.end(), [&](const Issued& p) {
          return p.dependency == req.dependency() && p.permit == req.permit();
        });
    const bool issued = issued_it != issued_.end();
    const bool want_ok = ValidName(req.dependency()) && outcome_ok &&
                         durations_ok && req.permit() != 0 && issued;
    // A permit never issued for this dependency that reaches its breaker's
    // check of the permit's tag, which lets a forged value through with
    // probability 2^-17.
    const std::optional<BreakerSnapshot> previous = Find(req.dependency());
    const bool forged = ValidName(req.dependency()) && outcome_ok &&
                        durations_ok && req.permit() != 0 && !issued &&
                        previous.has_value();

    std::string what = absl::StrCat(
        "Report(", Show(req.dependency()), ", permit ", req.permit(),
        issued ? " (issued)" : "", ", outcome ", req.outcome(), ", http ",
        req.http_status(), ", grpc ",
        req.has_grpc_code() ? absl::StrCat(req.grpc_code()) : "none",
        ", latency ",
        req.has_latency() ? absl::StrCat(req.latency().seconds(), "s ",
                                         req.latency().nanos(), "ns")
                          : "none",
        ", retry_after ",
        req.has_retry_after() ? absl::StrCat(req.retry_after().seconds(), "s ",
                                             req.retry_after().nanos(), "ns")
                              : "none",
        ")");
    const bool wire = ConsumeWire(fdp);
    what += Via(wire);
    const World before = Snapshot();
    v1::ReportResponse resp;
    grpc::Status s;
    if (wire) {
      grpc::ClientContext ctx;
      ctx.set_deadline(Deadline());
      s = f_.stub->Report(&ctx, req, &resp);
    } else {
      s = Direct(&BreakerServiceImpl::Report, req, &resp);
    }
    if (FrameworkRefusedUtf8(s, !wire || IsUtf8(req.dependency()), before,
                             what)) {
      return;
    }
    CheckStatus(s, {grpc::StatusCode::OK, grpc::StatusCode::INVALID_ARGUMENT},
                what, {req.dependency()});
    if (forged && s.ok()) {
      // The value named some permit of the breaker: the models cannot
      // follow it, so they are not checked for the rest of the input.
      fuzz::ForgedPermits::Accepted(what);
      FUZZ_TRACE("  a forged permit passed the tag: models unchecked");
      models_lost_ = true;
      return;
    }
    if (forged) fuzz::ForgedPermits::Refused();
    FUZZ_CHECK(s.ok() == want_ok, what, " -> ", StatusText(s), "; want ",
               want_ok ? "OK" : "INVALID_ARGUMENT");
    if (!s.ok()) {
      CheckUnchanged(before, what);
      return;
    }
    FUZZ_TRACE("  ", resp.ShortDebugString());
    FUZZ_CHECK(resp.effect() >= 1 && resp.effect() <= v1::Effect_MAX, what);
    const absl::StatusOr<BreakerSnapshot> after =
        f_.registry.Get(req.dependency());
    FUZZ_CHECK(after.ok() && static_cast<int>(after->state) == resp.state(),
               what, " response state ", resp.state());
    // Single use: a duplicate exactly when the ledger knows it reported.
    FUZZ_CHECK(previous.has_value(), what);
    if (models_lost_) return;
    Model& m = Reached(req.dependency(), previous);
    const fuzz::LedgerModel::Mark mark =
        m.ledger.MarkReported(issued_it->index);
    const bool duplicate = mark.seen == fuzz::LedgerModel::Seen::kDuplicate;
    FUZZ_CHECK((resp.effect() == v1::EFFECT_DUPLICATE) == duplicate, what,
               " -> effect ", resp.effect(), "; permit #", issued_it->index,
               duplicate ? " was reported before" : " is reported first",
               m.ledger.Tracked(issued_it->index) ? "" : " (forgotten)");
    Observe(m, *after);
  }

  void AcquireFirst(FuzzedDataProvider& fdp) {
    v1::AcquireFirstRequest req;
    const size_t n = fdp.ConsumeIntegralInRange<size_t>(0, 18);
    for (size_t i = 0; i < n; ++i) req.add_dependencies(ConsumeName(fdp));
    req.set_attempt(ConsumeAttempt(fdp));
    bool utf8 = true, names_ok = n >= 1 && n <= 16;
    std::string what = "AcquireFirst([";
    for (const std::string& d : req.dependencies()) {
      utf8 = utf8 && IsUtf8(d);
      names_ok = names_ok && ValidName(d);
      absl::StrAppend(&what, Show(d), " ");
    }
    const bool wire = ConsumeWire(fdp);
    absl::StrAppend(&what, "], ", req.attempt(), ")", Via(wire));
    const World before = Snapshot();
    std::map<std::string, std::optional<BreakerSnapshot>> previous;
    for (const std::string& d : req.dependencies()) {
      Use(d);
      if (ValidName(d)) previous[d] = Find(d);
    }
    v1::AcquireFirstResponse resp;
    grpc::Status s;
    if (wire) {
      grpc::ClientContext ctx;
      ctx.set_deadline(Deadline());
      s = f_.stub->AcquireFirst(&ctx, req, &resp);
    } else {
      s = Direct(&BreakerServiceImpl::AcquireFirst, req, &resp);
    }
    if (FrameworkRefusedUtf8(s, !wire || utf8, before, what)) return;
    CheckStatus(s,
                {grpc::StatusCode::OK, grpc::StatusCode::INVALID_ARGUMENT,
                 grpc::StatusCode::RESOURCE_EXHAUSTED},
                what, {req.dependencies().begin(), req.dependencies().end()});
    FUZZ_CHECK(
        (s.error_code() == grpc::StatusCode::INVALID_ARGUMENT) == !names_ok,
        what, " -> ", StatusText(s));
    if (s.error_code() == grpc::StatusCode::INVALID_ARGUMENT) {
      CheckUnchanged(before, what);
      return;
    }
    // The candidates asked (up to the one granted, or up to one past
    // max_breakers) reached their breakers.
    for (const auto& [name, prev] : previous) {
      const std::optional<BreakerSnapshot> now = Find(name);
      if (!now.has_value()) continue;
      if (prev.has_value() && Acquires(*now) == Acquires(*prev)) continue;
      Reached(name, prev);
      Granted(name, s.ok() && resp.dependency() == name ? resp.permit() : 0);
    }
    if (!s.ok()) return;
    if (resp.dependency().empty()) {
      FUZZ_CHECK(!resp.allowed(), what);
    } else {
      FUZZ_CHECK(resp.allowed(), what);
      bool listed = false;
      for (const std::string& d : req.dependencies()) {
        listed = listed || d == resp.dependency();
      }
      FUZZ_CHECK(listed, what, " granted ", Show(resp.dependency()));
    }
    CheckDecision(
        resp.dependency().empty() ? req.dependencies(n - 1) : resp.dependency(),
        resp.allowed(), resp.permit(), resp.probe(), resp.state(),
        resp.reason(), resp.retry_after(), what);
  }

  void GetState(FuzzedDataProvider& fdp) {
    v1::GetStateRequest req;
    req.set_dependency(ConsumeName(fdp));
    const bool wire = ConsumeWire(fdp);
    const std::string what =
        absl::StrCat("GetState(", Show(req.dependency()), ")", Via(wire));
    const bool exists = f_.registry.Get(req.dependency()).ok();
    const World before = Snapshot();
    v1::BreakerStatus resp;
    grpc::Status s;
    if (wire) {
      grpc::ClientContext ctx;
      ctx.set_deadline(Deadline());
      s = f_.stub->GetState(&ctx, req, &resp);
    } else {
      s = Direct(&BreakerServiceImpl::GetState, req, &resp);
    }
    if (FrameworkRefusedUtf8(s, !wire || IsUtf8(req.dependency()), before,
                             what)) {
      return;
    }
    CheckStatus(s,
                {grpc::StatusCode::OK, grpc::StatusCode::INVALID_ARGUMENT,
                 grpc::StatusCode::NOT_FOUND},
                what, {req.dependency()});
    const grpc::StatusCode want = !ValidName(req.dependency())
                                      ? grpc::StatusCode::INVALID_ARGUMENT
                                  : exists ? grpc::StatusCode::OK
                                           : grpc::StatusCode::NOT_FOUND;
    FUZZ_CHECK(s.error_code() == want, what, " -> ", StatusText(s));
    CheckUnchanged(before, what);
    if (s.ok()) {
      FUZZ_CHECK(resp.dependency() == req.dependency(), what);
      CheckStatusMessage(resp, what);
    }
  }

  void ListStates(FuzzedDataProvider& fdp) {
    const bool wire = ConsumeWire(fdp);
    const World before = Snapshot();
    v1::ListStatesResponse resp;
    grpc::Status s;
    if (wire) {
      grpc::ClientContext ctx;
      ctx.set_deadline(Deadline());
      s = f_.stub->ListStates(&ctx, v1::ListStatesRequest(), &resp);
    } else {
      s = Direct(&BreakerServiceImpl::ListStates, v1::ListStatesRequest(),
                 &resp);
    }
    CheckStatus(s, {grpc::StatusCode::OK}, "ListStates");
    CheckUnchanged(before, "ListStates");
    FUZZ_CHECK(static_cast<size_t>(resp.breakers_size()) == before.size(),
               resp.breakers_size(), " listed, ", before.size(), " exist");
    for (const v1::BreakerStatus& st : resp.breakers()) {
      CheckStatusMessage(st, "ListStates");
    }
  }

  void StartWatch(FuzzedDataProvider& fdp) {
    if (watches_.size() > kMaxStreams) return;
    v1::WatchRequest req;
    size_t n = fdp.ConsumeIntegralInRange<size_t>(0, 4);
    if (fdp.ConsumeIntegralInRange(0, 15) == 0) n = 65;
    bool utf8 = true, names_ok = n <= WatchHub::kMaxWatchDependencies;
    OpenWatch w;
    w.what = "Watch([";
    for (size_t i = 0; i < n; ++i) {
      const std::string name =
          i < 8 ? ConsumeName(fdp) : kNames[i % kNameCount];
      req.add_dependencies(name);
      utf8 = utf8 && IsUtf8(name);
      names_ok = names_ok && ValidName(name);
      if (std::find(w.names.begin(), w.names.end(), name) == w.names.end()) {
        w.names.push_back(name);
      }
      absl::StrAppend(&w.what, Show(name), " ");
    }
    absl::StrAppend(&w.what, "])");
    w.all = n == 0;
    for (const std::string& name : w.names) Use(name);
    const bool full = f_.hub.active_streams() >= kMaxStreams;
    const World before = Snapshot();
    w.ctx = std::make_unique<grpc::ClientContext>();
    w.ctx->set_deadline(Deadline());
    w.reader = f_.stub->Watch(w.ctx.get(), req);
    // Returns once the server subscribed and read the initial states (or
    // ended the call).
    w.reader->WaitForInitialMetadata();
    const auto& md = w.ctx->GetServerInitialMetadata();
    const bool subscribed =
        md.find(std::string(WatchHub::kSubscribedHeader)) != md.end();
    if (!subscribed) {
      v1::StateChange change;
      FUZZ_CHECK(!w.reader->Read(&change), w.what, " sent a message");
      const grpc::Status s = w.reader->Finish();
      if (FrameworkRefusedUtf8(s, utf8, before, w.what)) return;
      CheckStatus(s,
                  {grpc::StatusCode::INVALID_ARGUMENT,
                   grpc::StatusCode::RESOURCE_EXHAUSTED},
                  w.what, w.names);
      FUZZ_CHECK(
          s.error_code() == (names_ok ? grpc::StatusCode::RESOURCE_EXHAUSTED
                                      : grpc::StatusCode::INVALID_ARGUMENT),
          w.what, " -> ", StatusText(s));
      FUZZ_CHECK(!names_ok || full, w.what, " -> ", StatusText(s));
      CheckUnchanged(before, w.what);
      return;
    }
    FUZZ_TRACE(w.what, " -> subscribed");
    FUZZ_CHECK(utf8 && names_ok && !full, w.what, " was subscribed");
    for (const BreakerSnapshot& s : f_.registry.List()) {
      w.generation_at_start[s.dependency] = s.generation;
    }
    watches_.push_back(std::move(w));
  }

  // Reads exactly the messages the stream owes, checks them, cancels.
  void CheckWatch(OpenWatch& w) {
    std::map<std::string, uint64_t> now;
    for (const BreakerSnapshot& s : f_.registry.List()) {
      now[s.dependency] = s.generation;
    }
    // A breaker absent from a map starts at the floor (constant until
    // Finish evicts): re-created breakers continue above evicted ones.
    const uint64_t floor = f_.registry.generation_floor();
    auto gen = [floor](const std::map<std::string, uint64_t>& m,
                       const std::string& name) -> uint64_t {
      auto it = m.find(name);
      return it == m.end() ? floor : it->second;
    };
    if (w.all) {
      CheckWatchAll(w, now, gen);
      return;
    }
    const std::vector<std::string>& watched = w.names;
    const size_t initial = w.names.size();
    size_t owed = initial;
    for (const std::string& name : watched) {
      owed += gen(now, name) - gen(w.generation_at_start, name);
    }

    std::map<std::string, uint64_t> last;  // generation last seen
    std::map<std::string, int> last_state;
    for (size_t i = 0; i < owed; ++i) {
      v1::StateChange c;
      FUZZ_CHECK(ReadPastNotices(w, &c), w.what, " ended after ", i, " of ",
                 owed, " messages: ", StatusText(w.reader->Finish()));
      const std::string what =
          absl::StrCat(w.what, " message ", i, ": ", c.ShortDebugString());
      FUZZ_CHECK(c.state() >= 1 && c.state() <= 5, what);
      FUZZ_CHECK(ValidProtoDuration(c.retry_after()), what);
      FUZZ_CHECK(std::find(w.names.begin(), w.names.end(), c.dependency()) !=
                     w.names.end(),
                 what, " not watched");
      if (i < initial) {
        FUZZ_CHECK(c.reason() == "initial" && c.previous() == 0, what);
        FUZZ_CHECK(c.dependency() == w.names[i], what);
        FUZZ_CHECK(c.generation() == gen(w.generation_at_start, c.dependency()),
                   what);
        FUZZ_CHECK(last.count(c.dependency()) == 0, what, " twice");
      } else {
        static const std::set<std::string> kReasons = {
            "consecutive_failures", "failure_rate",    "slow_call_rate",
            "cooldown_elapsed",     "probe_succeeded", "probe_failed",
            "forced_open",          "forced_closed",   "reset",
            "ramp_failed",          "hung_calls"};
        FUZZ_CHECK(kReasons.count(c.reason()) == 1, what);
        FUZZ_CHECK(c.previous() >= 1 && c.previous() <= 5, what);
        FUZZ_CHECK(c.generation() == gen(last, c.dependency()) + 1, what,
                   " after generation ", gen(last, c.dependency()));
        FUZZ_CHECK(
            (c.state() == v1::STATE_OPEN) ==
                (c.retry_after().seconds() > 0 || c.retry_after().nanos() > 0),
            what);
      }
      last[c.dependency()] = c.generation();
      last_state[c.dependency()] = c.state();
    }
    for (const std::string& name : watched) {
      const absl::StatusOr<BreakerSnapshot> s = f_.registry.Get(name);
      if (!s.ok() || last_state.count(name) == 0) {
        FUZZ_CHECK(!s.ok(), w.what, " ", name, " sent nothing");
        continue;
      }
      CheckLastSent(w, name, gen(last, name), last_state[name], *s);
    }
    CancelAndDrain(w);
  }

  // A Watch of every dependency reads the registry shard by shard as the
  // client reads (WatchHub), so a breaker's initial state is the one it had
  // when its shard was read: at or after the stream started. Every initial
  // state goes out before any transition; a transition follows only the
  // initial state (or, for a breaker created after its shard was read, the
  // creation) it continues. Reads until every breaker has sent its current
  // generation; a breaker created after the start that never moved may send
  // its initial state or nothing (its shard may have been read before).
  template <typename Gen>
  void CheckWatchAll(OpenWatch& w, const std::map<std::string, uint64_t>& now,
                     const Gen& gen) {
    const uint64_t floor = f_.registry.generation_floor();
    std::map<std::string, uint64_t> last;  // generation last seen
    std::map<std::string, int> last_state;
    auto owed = [&] {
      for (const auto& [name, g] : now) {
        const bool existed = w.generation_at_start.count(name) == 1;
        const bool seen = last.count(name) == 1;
        if ((existed || g != floor) && (!seen || last[name] != g)) return true;
      }
      return false;
    };
    bool transitions_started = false;
    for (size_t i = 0; owed(); ++i) {
      v1::StateChange c;
      FUZZ_CHECK(ReadPastNotices(w, &c), w.what, " ended after ", i,
                 " messages: ", StatusText(w.reader->Finish()));
      const std::string what =
          absl::StrCat(w.what, " message ", i, ": ", c.ShortDebugString());
      FUZZ_CHECK(c.state() >= 1 && c.state() <= 5, what);
      FUZZ_CHECK(ValidProtoDuration(c.retry_after()), what);
      FUZZ_CHECK(now.count(c.dependency()) == 1, what, " no such breaker");
      if (c.reason() == "initial") {
        FUZZ_CHECK(!transitions_started, what, " after a transition");
        FUZZ_CHECK(c.previous() == 0, what);
        FUZZ_CHECK(last.count(c.dependency()) == 0, what, " twice");
        FUZZ_CHECK(
            c.generation() >= gen(w.generation_at_start, c.dependency()) &&
                c.generation() <= gen(now, c.dependency()),
            what, " outside [start, now]");
      } else {
        transitions_started = true;
        FUZZ_CHECK(c.previous() >= 1 && c.previous() <= 5, what);
        FUZZ_CHECK(last.count(c.dependency()) == 1 ||
                       w.generation_at_start.count(c.dependency()) == 0,
                   what, " before its initial state");
        FUZZ_CHECK(c.generation() == gen(last, c.dependency()) + 1, what,
                   " after generation ", gen(last, c.dependency()));
      }
      last[c.dependency()] = c.generation();
      last_state[c.dependency()] = c.state();
    }
    for (const auto& [name, g] : now) {
      if (last.count(name) == 0) continue;  // created, never moved
      const absl::StatusOr<BreakerSnapshot> s = f_.registry.Get(name);
      FUZZ_CHECK(s.ok(), w.what, " ", name);
      CheckLastSent(w, name, last[name], last_state[name], *s);
    }
    CancelAndDrain(w);
  }

  // The next message of `w` that is not a notice for local decisions
  // (created, evicted, ramp_done: not state changes, so not owed), checking
  // each notice read past: at the state it tells, and an evicted breaker
  // never open to local decisions. False when the stream ends.
  bool ReadPastNotices(OpenWatch& w, v1::StateChange* c) {
    while (w.reader->Read(c)) {
      if (!IsNotice(*c)) return true;
      FUZZ_CHECK(c->previous() == c->state(), w.what, " notice ",
                 c->ShortDebugString());
      FUZZ_CHECK(c->reason() != "evicted" || !c->local_decisions(), w.what,
                 " notice ", c->ShortDebugString());
    }
    return false;
  }

  // The last message sent for `name` says its current generation and state
  // (an open breaker may have become half-open since, without a message).
  void CheckLastSent(const OpenWatch& w, const std::string& name,
                     uint64_t generation, int sent_state,
                     const BreakerSnapshot& s) {
    FUZZ_CHECK(generation == s.generation, w.what, " ", name);
    const int state = static_cast<int>(s.state);
    FUZZ_CHECK(sent_state == state || (sent_state == v1::STATE_OPEN &&
                                       state == v1::STATE_HALF_OPEN),
               w.what, " ", name, " last sent ", sent_state, " is ", state);
  }

  void CancelAndDrain(OpenWatch& w) {
    w.ctx->TryCancel();
    v1::StateChange extra;
    while (w.reader->Read(&extra)) {
    }
    const grpc::Status s = w.reader->Finish();
    CheckStatus(s, {grpc::StatusCode::CANCELLED}, w.what);
  }

  void Admin(FuzzedDataProvider& fdp) {
    const int op = fdp.ConsumeIntegralInRange(0, 2);
    const std::string name = ConsumeName(fdp);
    std::optional<std::string> auth;
    switch (fdp.ConsumeIntegralInRange(0, 5)) {
      case 0:
        break;
      case 1:
      case 2:
        auth = absl::StrCat("Bearer ", kToken);
        break;
      case 3:
        auth = absl::StrCat("bearer ", kToken);
        break;
      default: {
        // Printable ASCII (gRPC refuses other header bytes client-side),
        // around the right token or not.
        std::string v = fdp.ConsumeRandomLengthString(48);
        for (char& c : v) c = static_cast<char>(0x20 + (c & 0x7f) % 0x5f);
        if (fdp.ConsumeBool()) v = absl::StrCat("Bearer ", kToken, v);
        auth = v;
      }
    }
    const bool authorized =
        auth.has_value() && *auth == absl::StrCat("Bearer ", kToken);
    const std::string what =
        absl::StrCat(op == 0   ? "ForceOpen("
                     : op == 1 ? "ForceClose("
                               : "Reset(",
                     Show(name), ") auth ", auth ? Show(*auth) : "none");
    const bool existed = f_.registry.Get(name).ok();
    const World before = Snapshot();
    Use(name);
    const int64_t now = f_.clock.NowNanos();

    grpc::ClientContext ctx;
    ctx.set_deadline(Deadline());
    if (auth.has_value()) ctx.AddMetadata("authorization", *auth);
    v1::AdminResponse resp;
    grpc::Status s;
    if (op == 0) {
      v1::ForceOpenRequest req;
      req.set_dependency(name);
      s = f_.admin->ForceOpen(&ctx, req, &resp);
    } else if (op == 1) {
      v1::ForceCloseRequest req;
      req.set_dependency(name);
      s = f_.admin->ForceClose(&ctx, req, &resp);
    } else {
      v1::ResetRequest req;
      req.set_dependency(name);
      s = f_.admin->Reset(&ctx, req, &resp);
    }
    if (FrameworkRefusedUtf8(s, IsUtf8(name), before, what)) return;
    CheckStatus(s,
                {grpc::StatusCode::OK, grpc::StatusCode::UNAUTHENTICATED,
                 grpc::StatusCode::INVALID_ARGUMENT,
                 op == 2 ? grpc::StatusCode::NOT_FOUND
                         : grpc::StatusCode::RESOURCE_EXHAUSTED},
                what, {name});
    grpc::StatusCode want = grpc::StatusCode::OK;
    if (!authorized) {
      want = grpc::StatusCode::UNAUTHENTICATED;
    } else if (!ValidName(name)) {
      want = grpc::StatusCode::INVALID_ARGUMENT;
    } else if (op == 2 && !existed) {
      want = grpc::StatusCode::NOT_FOUND;
    } else if (op != 2 && !existed && before.size() >= kMaxBreakers) {
      want = grpc::StatusCode::RESOURCE_EXHAUSTED;
    }
    FUZZ_CHECK(s.error_code() == want, what, " -> ", StatusText(s), "; want ",
               CodeName(want));
    if (!s.ok()) {
      CheckUnchanged(before, what);
      return;
    }
    FUZZ_CHECK(resp.status().dependency() == name, what);
    Model& m = ModelOf(name);
    if (!existed) m.last_activity_ns = now;  // created
    Observe(m, *Find(name));
    FUZZ_CHECK(resp.status().state() == (op == 0   ? v1::STATE_FORCED_OPEN
                                         : op == 1 ? v1::STATE_FORCED_CLOSED
                                                   : v1::STATE_CLOSED),
               what, " -> ", resp.ShortDebugString());
    CheckStatusMessage(resp.status(), what);
  }

  void Advance(FuzzedDataProvider& fdp) {
    const absl::Duration d =
        absl::Milliseconds(fdp.ConsumeIntegralInRange(0, 20000));
    FUZZ_TRACE("clock +", absl::FormatDuration(d));
    f_.clock.Advance(d);
  }

  Fixture& f_;
  const int64_t start_ns_;
  // Every permit granted, in order (an index into it is stable from run to
  // run, while permit values depend on addresses).
  std::vector<Issued> issued_;
  // A model for every breaker, by name.
  std::map<std::string, Model> models_;
  // A forged permit passed its tag: the models are not checked any more.
  bool models_lost_ = false;
  // Every valid name passed to a call: a superset of the breakers.
  std::set<std::string> used_;
  std::vector<OpenWatch> watches_;
  uint64_t utf8_refusals_ = 0;
};

}  // namespace
}  // namespace breakerd

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  // protobuf logs every non-UTF-8 string it serializes or parses; the
  // harness expects them (see FrameworkRefusedUtf8).
  google::protobuf::SetLogHandler(nullptr);
  // Building the server spawns gRPC's threads; do it before fuzzing starts.
  breakerd::TheFixture();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider fdp(data, size);
  breakerd::Session session(breakerd::TheFixture());
  session.Run(fdp);
  session.Finish();
  return 0;
}

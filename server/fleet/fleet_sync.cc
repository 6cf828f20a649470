#include "server/fleet/fleet_sync.h"

#include <algorithm>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "server/log/json_log.h"

namespace breakerd {
namespace {

// What the fleet learns from a local transition, if anything. Operator
// decisions go out whatever the mode; a shadow breaker's own opens and
// probe results never do, or trying a policy in shadow on one pod would
// refuse calls on every enforcing pod.
std::optional<ExternalState::Kind> PublishedKind(const Transition& t) {
  if (!IsStateChange(t.reason)) return std::nullopt;
  if (t.reason == TransitionReason::kReset) return ExternalState::Kind::kReset;
  switch (t.to) {
    case State::kOpen:
      // A local trip the fleet has not confirmed stays local (FleetSync
      // publishes it once the fleet's window or a quorum agrees).
      if (t.shadow || t.fleet_local) return std::nullopt;
      return ExternalState::Kind::kOpen;
    case State::kForcedOpen:
      return ExternalState::Kind::kForcedOpen;
    case State::kForcedClosed:
      return ExternalState::Kind::kForcedClosed;
    case State::kClosed:
      // A probe's success: the fleet closes with us (unless the episode
      // was ours alone).
      if (t.from == State::kHalfOpen && !t.shadow && !t.fleet_local) {
        return ExternalState::Kind::kClosed;
      }
      return std::nullopt;
    case State::kHalfOpen:
      // Derived from the clock: every sidecar sees it on its own.
      return std::nullopt;
  }
  return std::nullopt;
}

// True on the fleet thread while it applies what the fleet decided: the
// transitions that come back through OnTransition are the fleet's own.
thread_local bool applying_fleet_state = false;

bool IsDecision(ExternalState::Kind kind) {
  return kind == ExternalState::Kind::kForcedOpen ||
         kind == ExternalState::Kind::kForcedClosed ||
         kind == ExternalState::Kind::kReset;
}

}  // namespace

FleetSync::FleetSync(Registry* registry, std::unique_ptr<FleetStore> store,
                     FleetOptions options)
    : registry_(registry),
      store_(std::move(store)),
      options_(std::move(options)),
      backoff_(options_.reconnect_min) {}

FleetSync::~FleetSync() { Stop(); }

void FleetSync::Start() {
  thread_ = std::thread([this] {
    while (!stop_.load(std::memory_order_acquire)) {
      RunOnce(absl::Milliseconds(100));
    }
  });
}

void FleetSync::Stop() {
  stop_.store(true, std::memory_order_release);
  store_->Wake();
  if (thread_.joinable()) thread_.join();
}

void FleetSync::RequestClaim(absl::string_view dependency, uint64_t generation,
                             absl::Duration lease) {
  {
    MutexLock lock(&mu_);
    claims_.push_back({std::string(dependency), generation, lease});
  }
  store_->Wake();
}

void FleetSync::OnTransition(const Transition& t) {
  if (!IsStateChange(t.reason)) return;
  if (t.external) {
    // An override read back from the state file: the decision this pod
    // knew of, as of when it was made (0: unknown, older than any stored).
    if (!applying_fleet_state &&
        (t.to == State::kForcedOpen || t.to == State::kForcedClosed)) {
      MutexLock lock(&mu_);
      RecordDecision(t.dependency, {t.to == State::kForcedOpen
                                        ? ExternalState::Kind::kForcedOpen
                                        : ExternalState::Kind::kForcedClosed,
                                    t.decided_unix_ms, /*origin=*/"",
                                    /*restored=*/true});
    }
    return;
  }
  const bool probe_done = t.from == State::kHalfOpen;
  std::optional<ExternalState::Kind> kind = PublishedKind(t);
  if (!kind.has_value() && !probe_done) return;
  {
    MutexLock lock(&mu_);
    if (probe_done) releases_.insert(t.dependency);
    if (kind.has_value()) {
      Pending p;
      p.state.dependency = t.dependency;
      p.state.origin = options_.id;
      p.state.kind = *kind;
      p.state.escalation_level = t.escalation_level;
      p.state.reason = std::string(TransitionReasonName(t.reason));
      p.open_until = options_.wall_now() + t.retry_after;
      if (IsDecision(*kind)) {
        // The operator's decision, stamped now by the fleet's clock (as
        // best known: also while the store is away), so that the newest
        // one wins wherever they meet.
        last_decision_unix_ms_ = std::max(absl::ToUnixMillis(StoreNow()),
                                          last_decision_unix_ms_ + 1);
        p.state.decided_unix_ms = last_decision_unix_ms_;
        RecordDecision(t.dependency,
                       {*kind, p.state.decided_unix_ms, options_.id});
      }
      auto [it, inserted] = publishes_.insert_or_assign(t.dependency, p);
      if (inserted) publish_order_.push_back(t.dependency);
    }
  }
  store_->Wake();
}

void FleetSync::PublishRestoredDecisions() {
  MutexLock lock(&mu_);
  for (auto& [dep, d] : decisions_) {
    if (!d.restored) continue;
    d.restored = false;
    if (d.unix_ms <= 0) continue;  // unknown age: the store's is newer
    Pending p;
    p.state.dependency = dep;
    p.state.origin = options_.id;
    p.state.kind = d.kind;
    p.state.reason = std::string(
        TransitionReasonName(d.kind == ExternalState::Kind::kForcedOpen
                                 ? TransitionReason::kForcedOpen
                                 : TransitionReason::kForcedClosed));
    p.state.decided_unix_ms = d.unix_ms;
    d.origin = options_.id;  // as the fleet will know it
    if (publishes_.try_emplace(dep, std::move(p)).second) {
      publish_order_.push_back(dep);
    }
  }
}

void FleetSync::RecordDecision(const std::string& dependency,
                               const OperatorDecision& d) {
  decisions_[dependency] = d;
  if (decisions_.size() <= std::max<size_t>(1, options_.max_tracked_versions)) {
    return;
  }
  // Bounded: the oldest decision is forgotten first.
  auto oldest = decisions_.begin();
  for (auto it = decisions_.begin(); it != decisions_.end(); ++it) {
    if (it->second.unix_ms < oldest->second.unix_ms) oldest = it;
  }
  decisions_.erase(oldest);
}

int64_t FleetSync::DecidedAt(absl::string_view dependency) const {
  MutexLock lock(&mu_);
  auto it = decisions_.find(dependency);
  return it == decisions_.end() ? 0 : it->second.unix_ms;
}

FleetCounters FleetSync::counters() const {
  MutexLock lock(&mu_);
  return counters_;
}

void FleetSync::Bump(uint64_t FleetCounters::*field) {
  MutexLock lock(&mu_);
  ++(counters_.*field);
}

void FleetSync::TakeWork(std::vector<Claim>* claims,
                         std::vector<Pending>* publishes,
                         std::vector<std::string>* releases) {
  MutexLock lock(&mu_);
  claims->swap(claims_);
  releases->assign(releases_.begin(), releases_.end());
  releases_.clear();
  if (connected_.load(std::memory_order_relaxed)) {
    for (const std::string& dep : publish_order_) {
      auto it = publishes_.find(dep);
      if (it != publishes_.end()) publishes->push_back(std::move(it->second));
    }
    publishes_.clear();
    publish_order_.clear();
  }
}

bool FleetSync::Join() {
  absl::Status s = store_->Connect();
  absl::StatusOr<std::vector<std::string>> states;
  if (s.ok()) {
    last_version_.clear();
    version_order_.clear();
    // Counted among the members at once, and the fleet's clock known
    // before any cooldown end is read. The incarnation seen before the
    // store went away is kept: a Redis that restarted without persistence
    // comes back with another one, a store reset like a FLUSHALL (the
    // first heartbeat ever sets the baseline).
    s = Heartbeat();
  }
  if (s.ok()) {
    // Subscribed first, then read: nothing published in between is missed,
    // and versions drop what arrives twice.
    states = store_->ReadStates();
    s = states.status();
  }
  if (!s.ok()) {
    store_->Disconnect();
    if (!logged_down_) {
      LogEvent(LogLevel::kWarn, "fleet_disconnected",
               {{"error", s.message()},
                {"fallback", "local breakers, local probes"}});
      logged_down_ = true;
    }
    next_connect_ = options_.wall_now() + backoff_;
    backoff_ = std::min(backoff_ * 2, options_.reconnect_max);
    return false;
  }
  for (const std::string& text : *states) ApplyText(text, /*rejoin=*/true);
  PublishRestoredDecisions();
  backoff_ = options_.reconnect_min;
  logged_down_ = false;
  connected_.store(true, std::memory_order_release);
  Bump(&FleetCounters::connects);
  LogEvent(LogLevel::kInfo, "fleet_connected",
           {{"id", options_.id},
            {"states_read", static_cast<int64_t>(states->size())},
            {"rejoin", ever_connected_}});
  ever_connected_ = true;
  return true;
}

void FleetSync::LearnStoreClock(int64_t store_unix_ms, absl::Time sent,
                                absl::Time received) {
  // The store read its clock somewhere in the round trip: take the middle.
  const absl::Time local = sent + (received - sent) / 2;
  store_offset_ns_.store(
      absl::ToInt64Nanoseconds(absl::FromUnixMillis(store_unix_ms) - local),
      std::memory_order_relaxed);
}

absl::Time FleetSync::StoreNow() const {
  return options_.wall_now() +
         absl::Nanoseconds(store_offset_ns_.load(std::memory_order_relaxed));
}

absl::Status FleetSync::Heartbeat() {
  const absl::Time sent = options_.wall_now();
  absl::StatusOr<HeartbeatAnswer> answer = store_->Heartbeat(
      options_.id, options_.heartbeat_interval * kMemberTtlIntervals);
  const absl::Time received = options_.wall_now();
  next_heartbeat_ = received + options_.heartbeat_interval;
  if (!answer.ok()) return answer.status();
  LearnStoreClock(answer->store_unix_ms, sent, received);
  members_.store(answer->members, std::memory_order_relaxed);
  if (incarnation_.empty() || answer->incarnation == incarnation_) {
    incarnation_ = answer->incarnation;
    return absl::OkStatus();
  }
  // The store forgot the fleet's keys (FLUSHALL, a restart without
  // persistence, eviction): its versions restart from 1, and the versions
  // remembered here would drop every new message as a duplicate. Forget
  // them and read the store again, as at a join.
  const std::string was = std::exchange(incarnation_, answer->incarnation);
  Bump(&FleetCounters::store_resets);
  LogEvent(LogLevel::kError, "fleet_store_reset",
           {{"incarnation_was", was},
            {"incarnation", incarnation_},
            {"action",
             "versions forgotten, stored states read again, the operator "
             "overrides this sidecar knows published again"}});
  last_version_.clear();
  version_order_.clear();
  {
    // The overrides in force are the operators' latest word: tell the
    // store again (every sidecar does, with the same decision times, so
    // the order holds; a newer one read below still wins).
    MutexLock lock(&mu_);
    for (auto& [dep, d] : decisions_) {
      d.restored = d.kind == ExternalState::Kind::kForcedOpen ||
                   d.kind == ExternalState::Kind::kForcedClosed;
    }
  }
  absl::StatusOr<std::vector<std::string>> states = store_->ReadStates();
  if (!states.ok()) return states.status();
  for (const std::string& text : *states) ApplyText(text, /*rejoin=*/true);
  PublishRestoredDecisions();
  return absl::OkStatus();
}

absl::Duration FleetSync::WindowWidth(absl::string_view dependency) const {
  return registry_->policies()->Match(dependency)->failure_rate.window /
         kFleetWindowBuckets;
}

absl::Status FleetSync::SyncWindows() {
  next_window_sync_ = options_.wall_now() + options_.heartbeat_interval;
  std::vector<FleetDelta> deltas = registry_->TakeFleetDeltas();
  if (deltas.empty()) return absl::OkStatus();
  std::vector<WindowSync> syncs;
  syncs.reserve(deltas.size());
  for (const FleetDelta& d : deltas) {
    WindowSync w;
    w.dependency = d.dependency;
    w.calls = static_cast<int64_t>(d.gained.calls);
    w.failures = static_cast<int64_t>(d.gained.failures);
    w.slow = static_cast<int64_t>(d.gained.slow);
    w.width = d.window / kFleetWindowBuckets;
    w.buckets = kFleetWindowBuckets;
    w.tripped = d.tripped;
    syncs.push_back(std::move(w));
  }
  absl::StatusOr<std::vector<FleetWindow>> windows =
      store_->SyncWindows(options_.id, syncs);
  if (!windows.ok()) return windows.status();
  Bump(&FleetCounters::window_syncs);
  const uint64_t members = members_.load(std::memory_order_relaxed);
  for (size_t i = 0; i < windows->size() && i < syncs.size(); ++i) {
    const FleetWindowEffect effect = registry_->ApplyFleetWindow(
        syncs[i].dependency, (*windows)[i], members);
    if (!effect.publish_open) continue;
    // Our local trip is confirmed: the fleet opens with us, until its end.
    Pending p;
    p.state.dependency = syncs[i].dependency;
    p.state.origin = options_.id;
    p.state.kind = ExternalState::Kind::kOpen;
    p.state.escalation_level = effect.escalation_level;
    p.state.reason = "confirmed";
    p.open_until = options_.wall_now() + effect.open_remaining;
    Bump(&FleetCounters::confirmed_opens);
    MutexLock lock(&mu_);
    auto [it, inserted] = publishes_.insert_or_assign(p.state.dependency, p);
    if (inserted) publish_order_.push_back(p.state.dependency);
  }
  return absl::OkStatus();
}

void FleetSync::Lost(const absl::Status& status) {
  connected_.store(false, std::memory_order_release);
  members_.store(0, std::memory_order_relaxed);
  store_->Disconnect();
  held_claims_.clear();
  Bump(&FleetCounters::disconnects);
  LogEvent(LogLevel::kWarn, "fleet_disconnected",
           {{"error", status.message()},
            {"fallback", "local breakers, local probes"}});
  logged_down_ = true;
  next_connect_ = options_.wall_now() + backoff_;
  AnswerClaimsLocally();
}

void FleetSync::AnswerClaimsLocally() {
  std::vector<Claim> claims;
  {
    MutexLock lock(&mu_);
    claims.swap(claims_);
  }
  for (const Claim& c : claims) {
    registry_->SetProbeClaim(c.dependency, c.generation, /*won=*/true, c.lease);
  }
}

bool FleetSync::TakeLogBudget(LogBudget* budget, uint64_t* suppressed) {
  const absl::Time now = options_.wall_now();
  if (now < budget->next) {
    ++budget->suppressed;
    return false;
  }
  *suppressed = budget->suppressed;
  budget->suppressed = 0;
  budget->next = now + options_.log_interval;
  return true;
}

std::optional<uint64_t> FleetSync::LastVersion(const std::string& dependency,
                                               absl::Time now) {
  auto it = last_version_.find(dependency);
  if (it == last_version_.end()) return std::nullopt;
  // Past state_ttl the store's version key may have expired with its state
  // and restarted from 1: what we saw then says nothing about what is new.
  if (now - it->second.updated >= options_.state_ttl) {
    version_order_.erase(it->second.order);
    last_version_.erase(it);
    return std::nullopt;
  }
  return it->second.version;
}

void FleetSync::RecordVersion(const std::string& dependency, uint64_t version,
                              absl::Time now) {
  auto [it, inserted] = last_version_.try_emplace(dependency);
  if (inserted) {
    it->second.order = version_order_.insert(version_order_.end(), dependency);
  } else {
    version_order_.splice(version_order_.end(), version_order_,
                          it->second.order);
  }
  it->second.version = version;
  it->second.updated = now;
  while (last_version_.size() >
         std::max<size_t>(1, options_.max_tracked_versions)) {
    last_version_.erase(version_order_.front());
    version_order_.pop_front();
  }
}

void FleetSync::Refuse(absl::string_view why, bool rejoin) {
  Bump(&FleetCounters::refused);
  uint64_t suppressed = 0;
  if (!TakeLogBudget(&refused_log_, &suppressed)) return;
  LogEvent(LogLevel::kWarn, "fleet_message_refused",
           {{"source", rejoin ? "stored_state" : "published"},
            {"error", why},
            {"suppressed", suppressed}});
}

void FleetSync::ApplyText(absl::string_view text, bool rejoin) {
  absl::StatusOr<FleetMessage> m = ParseFleetMessage(text);
  if (absl::IsUnimplemented(m.status())) {
    // A newer release's format: not an attack, not ours to read.
    Bump(&FleetCounters::unknown_versions);
    return;
  }
  if (!m.ok()) {
    Refuse(m.status().message(), rejoin);
    return;
  }
  Apply(*m, rejoin);
}

void FleetSync::Apply(const FleetMessage& m, bool rejoin) {
  const absl::Time now = options_.wall_now();
  const std::optional<uint64_t> last = LastVersion(m.dependency, now);
  // Operators' decisions are ordered by when they were made, not by
  // version: one published under an older version (by a pod that came back
  // before another republished an older decision) may still be the newest.
  const bool decision = IsDecision(m.kind) && m.format == kFleetFormat;
  if (last.has_value() && m.version <= *last && !decision) {
    Bump(&FleetCounters::duplicates);
    return;
  }
  // A stored state read on (re)join is the baseline, whatever its version;
  // what is published after is measured against it.
  const uint64_t base = last.value_or(0);
  if (!rejoin && m.version > base &&
      m.version - base > options_.max_version_jump) {
    Refuse(absl::StrCat("fleet message: version ", m.version, " is more than ",
                        options_.max_version_jump, " above the last seen (",
                        base, ") for ", m.dependency),
           rejoin);
    return;
  }
  RecordVersion(m.dependency, std::max(base, m.version), now);
  if (m.origin == options_.id) return;
  ExternalState state;
  state.kind = m.kind;
  state.escalation_level = m.escalation_level;
  // The cooldown end is in the store's clock (format 1: the origin's): the
  // time left is measured against the same clock, so a node whose clock
  // is off ends it with the others.
  state.open_remaining = absl::FromUnixMillis(m.open_until_unix_ms) -
                         (m.format == kFleetFormat ? StoreNow() : now);
  if (IsDecision(m.kind) && m.format == kFleetFormat) {
    // Operators' decisions are ordered by when they were made (the
    // fleet's clock): the newest wins on every pod, whichever way each
    // learns of it.
    state.decided_unix_ms = m.stored_unix_ms;
    MutexLock lock(&mu_);
    auto local = decisions_.find(m.dependency);
    if (local != decisions_.end() &&
        std::tie(local->second.unix_ms, local->second.origin) >=
            std::tie(m.stored_unix_ms, m.origin)) {
      // Not newer than what this pod decided or heard last: ours goes (or
      // went) out and wins; the same one again changes nothing.
      if (local->second.unix_ms == m.stored_unix_ms &&
          local->second.origin == m.origin) {
        ++counters_.duplicates;
      } else {
        ++counters_.stale_decisions;
      }
      return;
    }
    // A stored reset undoes a decision this pod knew of; with none known
    // there is nothing here to undo.
    if (rejoin && local == decisions_.end() &&
        m.kind == ExternalState::Kind::kReset) {
      return;
    }
    RecordDecision(m.dependency, {m.kind, m.stored_unix_ms, m.origin});
    // A decision kept to publish since the store was away, older than
    // this one, must not go out over it.
    auto pending = publishes_.find(m.dependency);
    if (pending != publishes_.end() && IsDecision(pending->second.state.kind) &&
        pending->second.state.decided_unix_ms <= m.stored_unix_ms) {
      publishes_.erase(pending);
    }
  } else if (rejoin) {
    // What we may have decided while away is newer than a stored close;
    // only outages (and, from an older release, overrides) are taken from
    // the store.
    const bool open_now = m.kind == ExternalState::Kind::kOpen &&
                          state.open_remaining > absl::ZeroDuration();
    if (!open_now && m.kind != ExternalState::Kind::kForcedOpen &&
        m.kind != ExternalState::Kind::kForcedClosed) {
      return;
    }
  }
  // The fleet's own verdicts keep their reason on every sidecar.
  TransitionReason reason = TransitionReason::kFleet;
  if (m.kind == ExternalState::Kind::kOpen) {
    for (TransitionReason r : {TransitionReason::kFleetFailureRate,
                               TransitionReason::kFleetSlowCallRate}) {
      if (m.reason == TransitionReasonName(r)) reason = r;
    }
  }
  applying_fleet_state = true;
  absl::StatusOr<BreakerSnapshot> s =
      registry_->ApplyExternal(m.dependency, state, reason);
  applying_fleet_state = false;
  if (!s.ok()) {
    uint64_t suppressed = 0;
    if (TakeLogBudget(&apply_failed_log_, &suppressed)) {
      LogEvent(LogLevel::kWarn, "fleet_apply_failed",
               {{"dependency", m.dependency},
                {"error", s.status().message()},
                {"suppressed", suppressed}});
    }
    return;
  }
  Bump(&FleetCounters::applied);
}

void FleetSync::RunOnce(absl::Duration wait) {
  if (!connected_.load(std::memory_order_acquire)) {
    // While the store is away every breaker decides on its own window:
    // what it counts meanwhile is not the fleet's.
    registry_->TakeFleetDeltas();
    const absl::Time now = options_.wall_now();
    if (now < next_connect_) {
      // Claims are answered locally while the store is away.
      AnswerClaimsLocally();
      absl::SleepFor(std::min(wait, next_connect_ - now));
      return;
    }
    if (!Join()) return;
  }

  std::vector<Claim> claims;
  std::vector<Pending> publishes;
  std::vector<std::string> releases;
  TakeWork(&claims, &publishes, &releases);
  absl::Status failed;
  for (const std::string& dep : releases) {
    if (!failed.ok() || !held_claims_.erase(dep)) continue;
    failed = store_->ReleaseProbe(dep, options_.id);
  }
  for (const Claim& c : claims) {
    if (!failed.ok()) {
      registry_->SetProbeClaim(c.dependency, c.generation, true, c.lease);
      continue;
    }
    absl::StatusOr<ClaimAnswer> a =
        store_->ClaimProbe(c.dependency, options_.id, c.lease);
    if (!a.ok()) {
      failed = a.status();
      registry_->SetProbeClaim(c.dependency, c.generation, true, c.lease);
      continue;
    }
    if (a->won) held_claims_.insert(c.dependency);
    Bump(a->won ? &FleetCounters::claims_won : &FleetCounters::claims_lost);
    registry_->SetProbeClaim(c.dependency, c.generation, a->won, a->lease);
  }
  for (Pending& p : publishes) {
    const absl::Time sent = options_.wall_now();
    absl::Duration ttl = options_.state_ttl;
    if (p.state.kind == ExternalState::Kind::kForcedOpen ||
        p.state.kind == ExternalState::Kind::kForcedClosed) {
      ttl = absl::ZeroDuration();
    } else if (p.state.kind == ExternalState::Kind::kOpen) {
      p.state.open_remaining =
          std::max(absl::ZeroDuration(), p.open_until - sent);
      ttl += p.state.open_remaining;
    }
    absl::StatusOr<PublishAnswer> a =
        failed.ok() ? store_->Publish(p.state, ttl) : failed;
    if (!a.ok()) {
      failed = a.status();
      Bump(&FleetCounters::publish_failures);
      // Kept for after the reconnect, unless something newer came.
      MutexLock lock(&mu_);
      const std::string dep = p.state.dependency;
      if (publishes_.try_emplace(dep, std::move(p)).second) {
        publish_order_.push_back(dep);
      }
      continue;
    }
    const absl::Time now = options_.wall_now();
    LearnStoreClock(a->store_unix_ms, sent, now);
    if (a->version == 0) {
      // Another pod's newer decision is in the store (made while this one
      // was away, or not heard yet): take it instead.
      {
        MutexLock lock(&mu_);
        ++counters_.stale_decisions;
      }
      ApplyText(a->superseded_by, /*rejoin=*/true);
      continue;
    }
    if (p.state.kind == ExternalState::Kind::kClosed ||
        p.state.kind == ExternalState::Kind::kReset) {
      // The episode is over for the fleet: its failures no longer count.
      failed = store_->EndEpisode(p.state.dependency,
                                  WindowWidth(p.state.dependency));
    }
    // The store's own answer: newer than anything seen, unless a message
    // for it is still in flight.
    RecordVersion(
        p.state.dependency,
        std::max(LastVersion(p.state.dependency, now).value_or(0), a->version),
        now);
    Bump(&FleetCounters::published);
  }
  if (failed.ok() && options_.wall_now() >= next_window_sync_) {
    failed = SyncWindows();
  }
  if (failed.ok() && options_.wall_now() >= next_heartbeat_) {
    failed = Heartbeat();
  }
  if (!failed.ok()) {
    Lost(failed);
    return;
  }

  // Wait for messages, but not past the next sync or heartbeat: their
  // interval is --fleet-sync-interval, not a multiple of the wait.
  const absl::Duration until_due =
      std::min(next_window_sync_, next_heartbeat_) - options_.wall_now();
  absl::StatusOr<std::vector<std::string>> messages =
      store_->Receive(std::clamp(until_due, absl::ZeroDuration(), wait));
  if (!messages.ok()) {
    Lost(messages.status());
    return;
  }
  for (const std::string& text : *messages) {
    ApplyText(text, /*rejoin=*/false);
  }
}

}  // namespace breakerd

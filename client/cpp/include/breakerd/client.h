// breakerd C++ client: asks the breakerd sidecar before each call to an
// upstream dependency and reports how the call went, in the order of
// operations of client/README.md.
//
//   auto client = breakerd::client::Client::Create({}).value();
//   absl::Status s = client->Do("openai/key-1", [&] {
//     return CallOpenAi();  // an absl::Status; its code is the outcome
//   });
//   if (breakerd::client::IsBreakerOpen(s)) ServeFallback();
//
// Or in two steps, with an RAII permit that reports OutcomeKind::kCancelled
// if it is dropped unreported:
//
//   absl::StatusOr<Permit> permit = client->Acquire("payments/psp");
//   if (!permit.ok()) return permit.status();   // INVALID_ARGUMENT only
//   if (!permit->allowed()) return Fallback(permit->decision().retry_after);
//   HttpResponse r = CallPsp();
//   permit->Report(Outcome::FromHttpStatus(r.status, r.retry_after_header));
//
// When breakerd is unreachable or slower than `decision_timeout`, calls are
// allowed (fail-open, counted and logged once per change, at most one line
// per 10 s of each kind) unless `fail_mode` is kClosed. An Acquire that times
// out (with no other RPC answered meanwhile) or finds breakerd unavailable
// marks it away: until a health check (every `away_probe_interval`) or the
// Watch stream hears from it again, decisions are made at once with no RPC,
// so a hung sidecar costs one decision_timeout, not one per call, and
// Reports are held (up to 1,024) and sent once it is back. An Acquire
// the caller stopped waiting for stays open 1 s more, and a permit it
// brings then is reported OutcomeKind::kCancelled, not leaked. With
// `watch` on, one Watch stream per Client keeps a cache of open breakers so
// calls to a dependency known to be open are refused locally, without an RPC
// (never for a breaker in shadow mode, which breakerd always allows), and,
// with `local_decisions` (the default), first attempts on a breaker whose
// latest event allows it (closed, enforced, not ramping) are granted in
// the process, with no RPC: their outcomes go to breakerd in batches
// (ReportBatch) every `flush_interval`. At most
// 32 Acquire, AcquireFirst and Report RPCs are on the wire at once; callers
// beyond that wait their turn, and each RPC's deadline runs from when it is
// sent, so a burst of calls measures breakerd, not the burst.
//
// Thread-safety: a Client is thread-safe; make one per process and share it.
// A Permit belongs to one thread at a time.
#ifndef BREAKERD_CLIENT_CPP_INCLUDE_BREAKERD_CLIENT_H_
#define BREAKERD_CLIENT_CPP_INCLUDE_BREAKERD_CLIENT_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "grpcpp/channel.h"
#include "grpcpp/support/channel_arguments.h"
#include "grpcpp/support/status.h"

namespace breakerd::client {

enum class FailMode {
  kOpen,    // sidecar trouble: allow the call (the default)
  kClosed,  // sidecar trouble: refuse the call
};

// Who made a decision.
enum class DecisionSource {
  kSidecar,     // breakerd answered
  kLocal,       // decided in the client from the Watch cache, no RPC: a
                // refusal, or a first attempt granted (local decisions)
  kFailOpen,    // breakerd unreachable, too slow or away; allowed, permit 0
  kFailClosed,  // breakerd unreachable, too slow or away; refused
};

// "sidecar", "local", "fail_open", "fail_closed".
absl::string_view DecisionSourceName(DecisionSource source);

// The client's own types for what breakerd's wire contract
// (proto/breakerd/v1/breaker.proto) says: one value for each value of the
// proto enum named, and nothing else (the build checks it). A value a newer
// breakerd sends that this client does not know reads as the zero value
// (kUnspecified, kNone).

// A breaker's state (breakerd.v1.State).
enum class State {
  kUnspecified,   // not known: no answer from breakerd (fail-open/closed)
  kClosed,        // calls flow; their outcomes count toward the trip rules
  kOpen,          // calls are refused until the cooldown ends
  kHalfOpen,      // the cooldown has ended: one probe call decides
  kForcedOpen,    // an operator forced it open: every call is refused
  kForcedClosed,  // an operator forced it closed: every call is allowed
};

// Why an Acquire was refused (breakerd.v1.RejectReason); in shadow mode,
// why it would have been.
enum class RejectReason {
  kNone,           // not refused, or refused with no breaker's reason
                   // (fail-closed)
  kOpen,           // the breaker is open, its cooldown running: retry_after
  kProbeInFlight,  // half-open, and another caller holds the probe
  kRetryBudget,    // attempt > 0 and the dependency's retry budget is spent
  kForcedOpen,     // an operator forced the breaker open
  kRamp,           // the breaker is recovering (it closed recently) and
                   // admits a rising share of first attempts and no retry;
                   // retry_after may be zero
};

// How a guarded call ended, said explicitly (breakerd.v1.Outcome).
enum class OutcomeKind {
  kUnspecified,      // none: breakerd classifies http_status or grpc_code
  kSuccess,          // counts as a success
  kTimeout,          // counts as a failure
  kConnectionError,  // the upstream could not be reached: a failure
  kServerError,      // counts as a failure
  kRateLimited,      // a failure, unless the policy ignores rate limits
  kBadRequest,       // the request was wrong: neutral
  kAuthError,        // the credential was refused: neutral, counted apart
  kCancelled,        // the caller gave up for its own reasons: neutral
  kSoftFailure,      // the upstream answered, but unusably (a model's
                     // refusal): a success for the breaker, counted apart
};

// What a Report did to the breaker (breakerd.v1.Effect).
enum class ReportEffect {
  kUnspecified,     // not known: the Report was not sent (yet)
  kCountedSuccess,  // counted as a success
  kCountedFailure,  // counted as a failure toward the trip rules
  kNeutral,         // neither (bad request, auth error, cancelled, ...)
  kLate,            // the breaker has moved on since the permit, or is
                    // open: counted in metrics, no state change
  kDuplicate,       // the permit was reported already: this Report changed
                    // nothing
};

// The proto's names: "STATE_OPEN", "REJECT_REASON_PROBE_IN_FLIGHT".
absl::string_view StateName(State state);
absl::string_view RejectReasonName(RejectReason reason);

// breakerd's answer to a Report (breakerd.v1.ReportResponse).
struct ReportResult {
  // The breaker's state after the Report.
  State state = State::kUnspecified;
  ReportEffect effect = ReportEffect::kUnspecified;
};

// What to report about a call. Either an explicit outcome, or a raw HTTP
// status or gRPC code that breakerd classifies.
struct Outcome {
  // Sent as the Report's `outcome`; kUnspecified: breakerd classifies
  // http_status (if not 0), else grpc_code.
  OutcomeKind kind = OutcomeKind::kUnspecified;
  uint32_t http_status = 0;
  std::optional<int32_t> grpc_code;
  // From a 429/503 Retry-After: the breaker's cooldown is at least this.
  absl::Duration retry_after = absl::ZeroDuration();

  static Outcome Of(OutcomeKind kind);
  static Outcome Success() { return Of(OutcomeKind::kSuccess); }
  // `retry_after_header`: the Retry-After header's value, seconds form
  // ("120"); anything else is ignored.
  static Outcome FromHttpStatus(int status,
                                absl::string_view retry_after_header = "");
  static Outcome FromGrpcCode(grpc::StatusCode code);
  // The outcome attached by Classified(), if any; else the code, sent as
  // grpc_code (absl and gRPC status codes share their numbers; OK is a
  // success). The default classifier of Do, Retry and First.
  static Outcome FromStatus(const absl::Status& status);

  // False for outcomes a retry cannot fix: success, soft failure, bad
  // request, auth error, cancelled (by outcome, HTTP status or gRPC code).
  // True for timeout, connection error, server error, rate limited (HTTP
  // 408, 429, 5xx; gRPC DEADLINE_EXCEEDED, UNAVAILABLE, INTERNAL, UNKNOWN,
  // DATA_LOSS, RESOURCE_EXHAUSTED: the codes breakerd counts as failures).
  // ABORTED, like breakerd, is the request's conflict: not retried.
  bool Retryable() const;
};

struct ClientOptions {
  // gRPC target: "host:port" or "unix:/path". Empty: the environment
  // variable BREAKERD_ADDR, else "127.0.0.1:50051".
  std::string target;
  // Use this channel instead of creating one for `target`. Its arguments
  // are the caller's: create it with ClientChannelArguments() to keep the
  // client's capped reconnect backoff.
  std::shared_ptr<grpc::Channel> channel;
  // How long a caller waits for the answer to its Acquire or AcquireFirst
  // RPC from when it is sent (the RPC stays open 1 s more, for a late
  // permit), and the deadline of each Report RPC and of each health check
  // while breakerd is away. Default 20 ms; must be positive.
  absl::Duration decision_timeout = absl::Milliseconds(20);
  // What a decision is when breakerd cannot answer (error, timeout, away).
  // Default kOpen.
  FailMode fail_mode = FailMode::kOpen;
  // Keep one Watch stream and refuse locally while a breaker is open (and
  // not in shadow mode). Default true.
  bool watch = true;
  // With `watch`: grant first attempts in the process, with no RPC, while
  // the Watch stream is live, breakerd is not marked away and the
  // dependency's latest event says CLOSED with local_decisions (breakerd's
  // policy allows it; never half-open, forced, ramping or shadow), and send
  // their outcomes, the local refusals and the fail-open / fail-closed
  // decisions to breakerd in batches (ReportBatch). Retries, and everything
  // else, ask breakerd as before. Off: every decision asks breakerd and no
  // batch is sent. Default true.
  bool local_decisions = true;
  // With local_decisions: how long what was decided locally waits before a
  // batch goes (a batch goes at once at 1,000 outcomes). Default 5 ms; must
  // be positive.
  absl::Duration flush_interval = absl::Milliseconds(5);
  // Watch reconnect backoff: full jitter, doubling from initial to max.
  // Defaults 100 ms and 5 s; 0 < initial <= max.
  absl::Duration watch_backoff_initial = absl::Milliseconds(100);
  absl::Duration watch_backoff_max = absl::Seconds(5);
  // While breakerd is away (an Acquire or AcquireFirst RPC ended in
  // DEADLINE_EXCEEDED or UNAVAILABLE), the wait before each
  // grpc.health.v1.Health/Check (service "") that tells it is back. Nothing
  // is sent while breakerd is present. Default 100 ms; must be positive.
  absl::Duration away_probe_interval = absl::Milliseconds(100);
  // Receives one line when the sidecar becomes unreachable (away) or comes
  // back, when it starts or stops answering Acquire with other errors, and
  // when Reports start or stop failing: at most one line per 10 s of each
  // kind; a change within the 10 s is counted, and the line that ends them
  // (at once, or when the 10 s are up) gives the state and "(N changes not
  // logged since the previous line)". Default: stderr. Called from the
  // caller's thread or the client's own threads, one line at a time, under
  // a lock of the client's: it must not call the client.
  std::function<void(absl::string_view)> log;
  // Turns a guarded call's status into the outcome Do, Retry and First
  // report (and that decides whether Retry retries and First moves on).
  // Default (empty): Outcome::FromStatus. If it throws, the call is
  // reported with what Outcome::FromStatus makes of its status and the
  // exception reaches the caller of Do, Retry or First. Must be
  // thread-safe.
  std::function<Outcome(const absl::Status&)> classifier;
};

// The arguments of the channel the client creates: its reconnect backoff
// starts at 100 ms and is capped at 1 s (gRPC's default grows to 120 s, so
// a client would fail open for up to two minutes after the sidecar is
// back). For a channel passed in ClientOptions::channel.
grpc::ChannelArguments ClientChannelArguments();

// What Acquire answered.
struct Decision {
  bool allowed = false;
  uint64_t permit = 0;
  bool probe = false;
  State state = State::kUnspecified;
  RejectReason reason = RejectReason::kNone;
  absl::Duration retry_after = absl::ZeroDuration();
  // The dependency the decision is for (for AcquireFirst: the one granted,
  // empty if none).
  std::string dependency;
  DecisionSource source = DecisionSource::kSidecar;
  // For a grant of AcquireFirst with FirstOptions::chain: the chain's name
  // and the granted dependency's position in it (0-based), which the
  // Permit's Report sends with the outcome. Else empty and 0.
  std::string chain;
  uint32_t tier = 0;
  // For a first attempt granted locally (source kLocal, allowed): the
  // generation of the Watch event it was decided on, which its outcome is
  // batched with. Else 0.
  uint64_t generation = 0;
};

// Counters since the Client was created.
struct ClientStats {
  // Decisions with source kFailOpen / kFailClosed: after an Acquire or
  // AcquireFirst RPC failed, or made at once while breakerd is away.
  uint64_t fail_open = 0;
  uint64_t fail_closed = 0;
  // Refusals with source kLocal (refused from the Watch cache; local grants
  // are not counted here).
  uint64_t local_rejections = 0;
  // Reports that failed, were made after Close, or were held while
  // breakerd was away and dropped (past 1,024 held, or at Close).
  uint64_t report_errors = 0;
  // Times the Watch stream ended and was started again.
  uint64_t watch_reconnects = 0;
  // The fail_open / fail_closed decisions made while breakerd is away, with
  // no RPC attempted (a subset of those two counters).
  uint64_t away_decisions = 0;
  // Outcomes of locally granted calls that never reached breakerd: made
  // while breakerd was away, past 10,000 held unacknowledged, in a batch
  // dropped after its third failed send, reported after Close, or left at
  // Close.
  uint64_t dropped_outcomes = 0;
};

// `status` carrying the outcome to report for it, which Outcome::FromStatus
// (the default classifier) returns: e.g. a model's refusal, a success for
// the breaker that retrying cannot fix:
//   return Classified(absl::FailedPreconditionError("content filter"),
//                     Outcome::Of(OutcomeKind::kSoftFailure));
// An OK status carries nothing and is returned as it is.
absl::Status Classified(absl::Status status, const Outcome& outcome);

// The status Do/Retry/First return when a call was refused: UNAVAILABLE,
// message "breaker open: <dependency> (<reason>, retry after <d>, <source>)",
// with the decision attached.
bool IsBreakerOpen(const absl::Status& status);
// The refusal attached to a status from Do/Retry/First; nullopt if
// !IsBreakerOpen(status).
std::optional<Decision> RefusalOf(const absl::Status& status);

class Client;

namespace internal {
struct LocalSlot;
}  // namespace internal

// One allowed (or refused) Acquire. Movable, not copyable. An allowed
// permit is reported exactly once: by Report(), or by the destructor with
// OutcomeKind::kCancelled. A refused permit reports nothing.
class Permit {
 public:
  Permit(Permit&& other) noexcept;
  Permit& operator=(Permit&& other) noexcept;
  Permit(const Permit&) = delete;
  Permit& operator=(const Permit&) = delete;
  ~Permit();

  bool allowed() const { return decision_.allowed; }
  const Decision& decision() const { return decision_; }
  bool reported() const { return reported_; }

  // Reports `outcome` with the latency since the Acquire (or `latency` if
  // given), and for a grant of a named chain its chain and tier. Returns the
  // breaker's answer (state, effect) or the RPC's error (FAILED_PRECONDITION,
  // nothing sent, once the client is closed); the error is also counted in
  // report_errors. While breakerd is away the Report is held and sent once it
  // is back (Client::Report): OK with an empty ReportResult (kUnspecified). A
  // permit that was not allowed, or is already reported, or came from fail-open
  // (permit 0), sends nothing and returns OK with an empty ReportResult.
  // A local grant (source kLocal, allowed) sends no RPC: the outcome is
  // queued for the next batch and Report returns at once, OK with an empty
  // ReportResult (state and effect kUnspecified: breakerd applies it later);
  // dropped instead (counted in dropped_outcomes, still OK) while breakerd is
  // away or 10,000 outcomes wait; FAILED_PRECONDITION after Close (counted
  // in dropped_outcomes); INVALID_ARGUMENT, counted in report_errors, for an
  // outcome breakerd would refuse (no outcome, HTTP status or gRPC code; an
  // HTTP status outside 100-599, a gRPC code outside 0-16).
  absl::StatusOr<ReportResult> Report(
      const Outcome& outcome, std::optional<absl::Duration> latency = {});

 private:
  friend class Client;
  Permit(Client* client, Decision decision,
         std::shared_ptr<internal::LocalSlot> local = nullptr);

  Client* client_ = nullptr;
  Decision decision_;
  // A local grant's slot, until reported.
  std::shared_ptr<internal::LocalSlot> local_;
  // Monotonic, for the reported latency.
  absl::Duration acquired_at_;
  bool reported_ = false;
};

struct RetryOptions {
  int max_attempts = 3;
  absl::Duration base = absl::Milliseconds(100);
  absl::Duration max_backoff = absl::Seconds(2);
};

// A named fallback chain, for First and AcquireFirst:
//   client->First({"llm/primary", "llm/backup"}, call, {"llm"});
// breakerd counts each decision in breakerd_chain_decisions_total{chain,
// tier} (tier "none" when every candidate was refused: the ultimate
// fallback) and each granted call's Report in
// breakerd_chain_outcomes_total{chain,tier,class}. A dependency's tier is
// its position in the chain, 0-based, at most 63.
struct FirstOptions {
  // The chain's name, named like a dependency (1-200 bytes of
  // [A-Za-z0-9._:/@-]; anything else, the empty name included, is
  // INVALID_ARGUMENT naming `chain`, before any RPC). With a name every
  // decision is asked of breakerd, with every remaining candidate (those
  // the Watch cache holds open too) and the tier of the first, so that it
  // counts the ultimate fallback; while breakerd is away, or its answer
  // does not come, the decision is made as without a name. Default
  // nullopt: not a chain (the Watch cache leaves out what it holds open;
  // breakerd counts no chain).
  std::optional<std::string> chain;
  // The tier of the first dependency passed: nonzero for a caller that
  // walks its chain itself with AcquireFirst (after a failed call on tier
  // n, it passes the dependencies after that one and n + 1). First moves
  // it on by itself. Default 0; counted only with `chain`.
  uint32_t first_tier = 0;
};

class Client {
 public:
  // Creates the channel (unless given), starts connecting, the away-probe
  // thread (idle while breakerd is present) and, with `watch`, the Watch
  // thread. Fails (INVALID_ARGUMENT) only on bad options.
  static absl::StatusOr<std::unique_ptr<Client>> Create(ClientOptions options);
  // Close().
  // REQUIRES: no Permit of this client outlives it, and no call of it is
  // in flight.
  ~Client();

  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // Ends the Watch stream and any health check in flight, waits for the
  // Acquire and AcquireFirst RPCs still open (a late one: at most
  // decision_timeout + 1 s after it was sent) and reports the permits they
  // bring OutcomeKind::kCancelled, sends what was decided locally and not
  // yet sent (within 10 x decision_timeout; the rest is dropped, its
  // outcomes counted in dropped_outcomes), joins the client's threads and
  // drops a log line held back by the rate limit.
  // From then on Acquire, AcquireFirst, Do, Retry and First fail at once
  // with FAILED_PRECONDITION "breakerd client is closed" (no RPC, nothing
  // counted as fail_open), callers waiting for a place in the send window
  // get that error too, WaitForConnected returns false at once, and a
  // Report is not sent: counted in report_errors, FAILED_PRECONDITION (as
  // are the Reports still held from while breakerd was away).
  // Calls already on the wire finish. Idempotent.
  // REQUIRES: not called from the log function.
  void Close();

  // Asks whether a call to `dependency` may go (attempt 0: first try;
  // attempt > 0: a retry, subject to the retry budget). Returns a Permit
  // (allowed or not); an error only for INVALID_ARGUMENT from breakerd (a
  // bad dependency name: fix the caller) and FAILED_PRECONDITION once the
  // client is closed. Waits for a place among the 32 RPCs on the wire
  // (while breakerd answers), then never longer than decision_timeout.
  // Without an RPC: refused (kLocal) while the Watch cache holds the
  // breaker open; a first attempt granted (kLocal, permit 0, state
  // kClosed, its generation) with local_decisions while the cache allows
  // it and breakerd is not away (report it with Permit::Report); else
  // kFailOpen / kFailClosed at once while breakerd is away (also for
  // callers still waiting for a place when it is marked away). An RPC failing
  // with DEADLINE_EXCEEDED or UNAVAILABLE marks breakerd away, except a
  // DEADLINE_EXCEEDED while breakerd answered other RPCs of this client after
  // it was sent (late, not away: only this decision fails open). The RPC the
  // caller stopped waiting for stays open 1 s more: a permit breakerd grants
  // then is reported kCancelled by a thread of the client's (even while
  // breakerd is marked away), not leaked (a lost probe permit would refuse the
  // dependency kProbeInFlight for its whole lease).
  absl::StatusOr<Permit> Acquire(absl::string_view dependency,
                                 uint32_t attempt = 0);

  // A fallback chain in one round trip: the first of `dependencies` that
  // breakerd allows (decision().dependency says which). Dependencies known
  // to be open locally are left out; with none left, refused locally. A
  // first attempt (attempt 0) with local_decisions is granted locally, with
  // no RPC, when the cache allows the first dependency left (with
  // options.chain: only the first dependency passed, with its tier; the
  // chain's decision is batched for breakerd to count). Away,
  // fail-open and a late permit as Acquire (a fail-open decision names the
  // first dependency left). With options.chain, breakerd counts the
  // decision, and every dependency is sent to it (see FirstOptions); a
  // grant's decision carries the chain and tier, and the Permit's Report
  // sends them. INVALID_ARGUMENT, before any RPC, for an invalid chain name
  // or a tier past 63.
  absl::StatusOr<Permit> AcquireFirst(
      const std::vector<std::string>& dependencies, uint32_t attempt = 0,
      const FirstOptions& options = {});

  // The guard: Acquire (an error from it is returned); refused -> the
  // breaker-open status (fn is not called); allowed -> fn(), its status
  // classified (ClientOptions::classifier) and reported with the measured
  // latency; returns fn's status. The permit is reported exactly once: if
  // fn throws, as OutcomeKind::kServerError, and the exception goes on; if the
  // classifier throws, as Outcome::FromStatus of fn's status, and the
  // exception goes on. (For an HTTP call, use Acquire and
  // Permit::Report(Outcome::FromHttpStatus(...)).)
  absl::Status Do(absl::string_view dependency,
                  absl::FunctionRef<absl::Status()> fn, uint32_t attempt = 0);

  // Up to options.max_attempts guarded calls of fn, each preceded by
  // Acquire(dependency, attempt) and, for attempt >= 1, a full-jitter sleep
  // of uniform(0, min(max_backoff, base * 2^(attempt-1))). Stops at once on
  // a refusal (returns the breaker-open status, even after failed attempts)
  // and on an outcome that is not Retryable() (a soft failure is not
  // retried). Returns the last status. Exceptions as Do's.
  absl::Status Retry(absl::string_view dependency,
                     absl::FunctionRef<absl::Status()> fn,
                     const RetryOptions& options = {});

  // The fallback chain: AcquireFirst over `dependencies`; runs fn(granted)
  // as a guard; if it fails with a Retryable() outcome, goes on with the
  // dependencies after the granted one; with any other outcome (bad
  // request, auth error, cancelled, soft failure) stops and returns that
  // status. Returns fn's first OK, else the last failure, else the
  // breaker-open status of the last answer. Exceptions as Do's.
  // With options.chain, breakerd counts the chain (FirstOptions): each
  // AcquireFirst sends the remaining dependencies with the tier of the
  // first (after a failed call, the tier after the granted one), and each
  // call's Report its chain and tier. INVALID_ARGUMENT, before any RPC, for
  // an invalid chain name or a tier past 63.
  absl::Status First(const std::vector<std::string>& dependencies,
                     absl::FunctionRef<absl::Status(absl::string_view)> fn,
                     const FirstOptions& options = {});

  // Reports a permit obtained elsewhere (two-step use across threads).
  // Permit 0 (fail-open, or a local grant: report that one through its
  // Permit) sends nothing and returns OK with an empty ReportResult.
  // Waits for a place among the RPCs on the wire as Acquire. Made while
  // breakerd is away, the Report is held (not an error, not counted: OK
  // with an empty ReportResult) and sent by a thread of the client's, reports
  // first through the window, once breakerd is back (health check or
  // Watch message); at most 1,024 are held, past that the oldest is
  // dropped and counted in report_errors, as is a held Report whose RPC
  // then fails and those still held at Close. After Close nothing is sent
  // (FAILED_PRECONDITION, counted in report_errors), and a failed RPC is
  // counted too.
  absl::StatusOr<ReportResult> Report(absl::string_view dependency,
                                      uint64_t permit, const Outcome& outcome,
                                      absl::Duration latency);

  // The state the Watch cache holds for `dependency` (nullopt: unknown, or
  // the stream is down). A breaker in shadow mode is cached, and can be
  // kOpen here, but is never refused locally.
  std::optional<State> CachedState(absl::string_view dependency) const;
  // True while the Watch stream is up and has delivered its first snapshot.
  bool WatchConnected() const;

  ClientStats stats() const;

  // Waits at most `timeout` for the channel to connect. For start-up code
  // and tests; normal use never needs it. False at once once closed.
  bool WaitForConnected(absl::Duration timeout);

 private:
  class Impl;
  // Permit::Report sends its decision's chain and tier (Impl::SendReport).
  friend class Permit;
  explicit Client(std::unique_ptr<Impl> impl);

  // Acquire past the Watch cache: the away decision, or breakerd's.
  absl::StatusOr<Permit> AcquireFromSidecar(absl::string_view dependency,
                                            uint32_t attempt);

  // Runs fn and calls `report` exactly once with its outcome (see Do); sets
  // *outcome to what was reported.
  absl::Status RunGranted(absl::FunctionRef<absl::Status()> fn,
                          absl::FunctionRef<void(const Outcome&)> report,
                          Outcome* outcome);

  std::unique_ptr<Impl> impl_;
};

}  // namespace breakerd::client

#endif  // BREAKERD_CLIENT_CPP_INCLUDE_BREAKERD_CLIENT_H_

// The breakerd client: Acquire before a call, Report after it.
import { randomBytes } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import * as grpc from '@grpc/grpc-js';
import { abortOutcome, runAbortable } from './abort';
import { ChangeLog, type ChangeLogOptions, type LogSink } from './change-log';
import { BreakerOpenError, ClientClosedError, DecisionSource, type Decision, type StateName } from './decision';
import type { AcquireFirstResponse__Output } from './generated/breakerd/v1/AcquireFirstResponse';
import type { AcquireResponse__Output } from './generated/breakerd/v1/AcquireResponse';
import type { BreakerClient } from './generated/breakerd/v1/Breaker';
import type { Effect__Output } from './generated/breakerd/v1/Effect';
import type { ReportRequest } from './generated/breakerd/v1/ReportRequest';
import type { ReportResponse__Output } from './generated/breakerd/v1/ReportResponse';
import type { HealthClient } from './generated/grpc/health/v1/Health';
import { LocalBatcher, Tally, type Position } from './local-batch';
import { Outcome, type OutcomeReport } from './outcome';
import { checkName, isName, MAX_CHAIN_TIER } from './names';
import { breakerdV1, durationToMs, healthV1, msToDuration } from './proto';
import { SendWindow } from './send-window';
import { AnswerClock, NOT_SENT_AWAY, sendUnary, writtenAtOf, type SendOptions, type UnaryInvoke } from './unary';
import { Watcher } from './watch';

/**
 * Where log lines go: once when breakerd becomes unreachable (or away), once
 * when it is back (likewise for Reports and the Watch stream), at most one
 * line per 10 s per kind, with the number of changes not logged meanwhile.
 */
export interface Logger {
  warn(message: string): void;
  info(message: string): void;
}

/** Options of a BreakerdClient; every one has a default. */
export interface BreakerdClientOptions {
  /**
   * breakerd's gRPC address: `host:port` or `unix:/path`. Default: the
   * environment variable BREAKERD_ADDR, else `127.0.0.1:50051`. Plaintext:
   * breakerd is a sidecar on loopback or a unix socket.
   */
  target?: string;
  /**
   * How long an Acquire, AcquireFirst or Report RPC may take from when it is
   * written, in ms. Default 20. At most 32 of them are on the wire at once; a
   * burst beyond that waits its turn, and is answered at once from the fail
   * mode when breakerd is marked away. An RPC past this timeout stays open
   * one more second so that a permit breakerd granted late is returned
   * (reported OUTCOME_CANCELLED) instead of leaked.
   */
  decisionTimeoutMs?: number;
  /** What to answer when breakerd is unreachable or too slow. Default 'open'. */
  failMode?: 'open' | 'closed';
  /** Keep a Watch stream and refuse locally while a breaker is open. Default true. */
  watch?: boolean;
  /**
   * Decide first attempts in the client while the Watch stream says a
   * breaker is CLOSED and breakerd allows it (its event's local_decisions),
   * with no RPC; what happened goes to breakerd in ReportBatch requests
   * (client/README.md, "Local decisions"). Needs `watch`. Default true.
   */
  localDecisions?: boolean;
  /** With local decisions: how often a batch is sent while there is something to send, in ms. Default 5. */
  flushIntervalMs?: number;
  /** Watch reconnect backoff, doubling from initialMs to maxMs with full jitter. Default 100 / 5000. */
  watchBackoff?: { initialMs?: number; maxMs?: number };
  /**
   * While breakerd is away (an Acquire found it unavailable, or timed out
   * with no RPC of this client answered since it was written), how often a Health/Check asks whether it is back, in ms. Nothing is sent
   * while it is present. Default 100.
   */
  awayProbeIntervalMs?: number;
  /** Default `console`; `null` silences the client. */
  logger?: Logger | null;
  /** @internal For tests: the clock, timer and interval of the rate-limited log lines. */
  changeLog?: ChangeLogOptions;
  /** @internal For tests: how many reports are held while away (default MAX_HELD_REPORTS). */
  maxHeldReports?: number;
  /** @internal For tests: how many outcomes of local grants are held unacknowledged (default MAX_UNACKED_OUTCOMES). */
  maxUnackedOutcomes?: number;
  /**
   * Extra gRPC channel options, merged over the client's reconnect settings
   * (backoff 100 ms growing to at most 1 s, so the client is back within
   * about a second of a restarted breakerd; independent of watchBackoff).
   */
  channelOptions?: grpc.ChannelOptions;
}

/** Counters for the application to read (e.g. to export as metrics). */
export interface ClientStats {
  /** Decisions answered FAIL_OPEN (breakerd unreachable or too slow). */
  failOpen: number;
  /** Decisions answered FAIL_CLOSED. */
  failClosed: number;
  /** Dependencies refused from the Watch cache without asking breakerd. */
  localRejections: number;
  /** Reports that failed (never seen by the caller), and reports held while away then dropped (past the bound, or at close()). */
  reportErrors: number;
  /** Times the Watch stream was opened again after it ended. */
  watchReconnects: number;
  /** Decisions made with no RPC while breakerd was away (each also counted in failOpen or failClosed). */
  awayDecisions: number;
  /**
   * Outcomes of locally granted calls never acknowledged by breakerd: past
   * the 10,000 held, made while breakerd was away or after close(), in a
   * ReportBatch dropped after three sends, or left when close() ended.
   */
  droppedOutcomes: number;
}

/** What breakerd did with a Report. */
export interface ReportResult {
  state: StateName;
  effect: Effect__Output;
}

/** How a call settled: its value or what it threw. */
export type Settled<T> = { ok: true; value: T } | { ok: false; error: unknown };

/**
 * Maps a settled call to its report, e.g. a fetch Response's status. Return
 * undefined for the default: success for a value, Outcome.fromError for an
 * error. If it throws, the permit is still reported, once, as the default
 * would have it, and the guard (retry, first) rejects with what it threw.
 */
export type Classifier<T> = (settled: Settled<T>) => OutcomeReport | undefined;

/** Options of acquire() and acquireFirst(). */
export interface AcquireOptions {
  /**
   * Gives up waiting for the decision: the promise rejects with the
   * signal's reason, and a permit breakerd grants anyway is reported
   * OUTCOME_CANCELLED.
   */
  signal?: AbortSignal;
}

/** Options of acquireFirst(). */
export interface AcquireFirstOptions extends AcquireOptions {
  /**
   * The fallback chain's name (named like a dependency). With it, every
   * dependency goes to breakerd, also those the Watch cache knows to be open,
   * with the name and `firstTier`, and breakerd counts the decision in
   * breakerd_chain_decisions_total{chain,tier} (tier "none" when it refuses
   * all); a granted decision carries `chain` and `tier`, and report() with it
   * carries them too (breakerd_chain_outcomes_total). While breakerd is away
   * or does not answer, decided as without it. Checked before any RPC: a bad
   * name throws a RangeError naming `chain`.
   */
  chain?: string;
  /** With `chain`: where dependencies[0] sits in the caller's full chain, 0-based. Default 0. */
  firstTier?: number;
}

/** Where a permit sits in a named fallback chain; a Decision has both when it does. */
export interface ChainPosition {
  readonly chain?: string;
  readonly tier?: number;
}

export interface GuardOptions<T> {
  classify?: Classifier<T>;
  /** The attempt number sent with Acquire (0 = first try). Default 0. */
  attempt?: number;
  /**
   * The caller gives up: during the Acquire, or while the call runs (pass
   * the same signal to the call, e.g. fetch, so that it stops too). The
   * guard rejects at once with the signal's reason, and the permit is
   * reported exactly once, as OUTCOME_CANCELLED (neutral), or
   * OUTCOME_TIMEOUT when the reason is a TimeoutError (AbortSignal.timeout).
   */
  signal?: AbortSignal;
}

export interface RetryOptions<T> {
  /** Attempts in all, the first included. Default 3. */
  maxAttempts?: number;
  /** Backoff before attempt n >= 1: uniform(0, min(maxMs, baseMs * 2^(n-1))). Default 100. */
  baseMs?: number;
  /** Default 2000. */
  maxMs?: number;
  classify?: Classifier<T>;
  /** As for guard(); an abort also ends a backoff sleep, and stops retrying. */
  signal?: AbortSignal;
}

export interface FirstOptions<T> {
  classify?: Classifier<T>;
  /** As for guard(); an abort stops the chain. */
  signal?: AbortSignal;
  /**
   * The chain's name (named like a dependency), for breakerd to count it:
   * each AcquireFirst (the first, and the one after a failed call worth
   * moving on from) asks breakerd with every dependency left, also those the
   * Watch cache knows to be open, the name and the first one's position in
   * `dependencies`, so that breakerd counts every decision
   * (breakerd_chain_decisions_total{chain,tier}, tier "none" when none is
   * granted) and each call's outcome with its tier
   * (breakerd_chain_outcomes_total{chain,tier,class}). While breakerd is
   * away or does not answer, the chain goes on as without a name. Checked
   * before any RPC: a bad name rejects with a RangeError naming `chain`.
   */
  chain?: string;
}

const DEFAULT_TARGET = '127.0.0.1:50051';
const CLOSED_STATES: ReadonlySet<StateName> = new Set<StateName>(['STATE_CLOSED', 'STATE_FORCED_CLOSED']);
const WARMUP_DEPENDENCY = 'breakerd-client.warmup';
const INVALID_ARGUMENT = grpc.status.INVALID_ARGUMENT;
const DEADLINE_EXCEEDED = grpc.status.DEADLINE_EXCEEDED;
/**
 * Acquire errors that mean breakerd is not answering: it is away (a
 * DEADLINE_EXCEEDED only when no other RPC was answered since it was written).
 */
const AWAY_CODES: ReadonlySet<unknown> = new Set([DEADLINE_EXCEEDED, grpc.status.UNAVAILABLE]);
/** RPCs on the wire at once; more wait their turn (send-window.ts says why). */
const SEND_WINDOW = 32;

/**
 * Reports held while breakerd is away, at most (client/README.md, "Sidecar
 * away"): past that the oldest held one is dropped, counted in reportErrors.
 */
export const MAX_HELD_REPORTS = 1024;

/** A Report made while breakerd was away, sent once it is back. */
interface HeldReport {
  dependency: string;
  permit: string;
  outcome: OutcomeReport;
  latencyMs: number | undefined;
  position: ChainPosition | undefined;
}

/** The channel's reconnect backoff (client/README.md, "Sidecar away": capped at 1 s). */
export const CHANNEL_RECONNECT_BACKOFF_MS = { initial: 100, max: 1000 } as const;

/** The channel options the client sets, with the caller's `extra` merged over them. */
export function channelOptionsFor(extra: grpc.ChannelOptions = {}): grpc.ChannelOptions {
  return {
    'grpc.initial_reconnect_backoff_ms': CHANNEL_RECONNECT_BACKOFF_MS.initial,
    'grpc.max_reconnect_backoff_ms': CHANNEL_RECONNECT_BACKOFF_MS.max,
    ...extra,
  };
}

/**
 * A client of breakerd. Create one per process and share it: it owns one
 * channel and one Watch stream, and every method is safe to call
 * concurrently from any number of async tasks. The Watch stream does not keep
 * the process alive; close() ends it and the channel.
 *
 * Sidecar away: after an Acquire or AcquireFirst RPC fails with
 * UNAVAILABLE, or with DEADLINE_EXCEEDED while breakerd answered no other
 * RPC of this client after it was written, decisions come from the fail
 * mode at once with no RPC (counted in awayDecisions) and reports are held
 * (at most MAX_HELD_REPORTS), until a Health/Check (every
 * awayProbeIntervalMs, on an unref()ed timer) or the Watch stream hears from
 * breakerd again; then the held reports are sent. A DEADLINE_EXCEEDED
 * while breakerd answers others was one late answer: that decision alone
 * fails open (or closed), and the client stays present.
 *
 * Local decisions (options.localDecisions, on by default with watch): a
 * first attempt is granted in the client while the Watch stream says its
 * breaker is CLOSED with local_decisions, with no RPC; the grants, their
 * outcomes and the decisions made without breakerd go to it in ReportBatch
 * requests (local-batch.ts), one at a time, every flushIntervalMs while
 * there is something to send (an unref()ed timer), and at close().
 *
 * Order of operations: acquire() before the call (if refused, do not call),
 * the call with its own timeout, then report() with the permit whatever
 * happened. guard(), retry() and first() do all of it.
 */
export class BreakerdClient {
  /** The address this client talks to. */
  readonly target: string;
  private readonly decisionTimeoutMs: number;
  private readonly failMode: 'open' | 'closed';
  private readonly logger: Logger | null;
  private readonly awayProbeIntervalMs: number;
  private readonly stub: BreakerClient;
  private readonly health: HealthClient;
  private readonly watcher: Watcher | undefined;
  private readonly window = new SendWindow(SEND_WINDOW);
  /** When breakerd last answered an RPC: tells a late answer from an absent breakerd. */
  private readonly answers = new AnswerClock();
  private readonly counters: Omit<ClientStats, 'droppedOutcomes'> = {
    failOpen: 0, failClosed: 0, localRejections: 0, reportErrors: 0, watchReconnects: 0, awayDecisions: 0,
  };
  /** Local decisions' books; undefined when local decisions are off (or watch is). */
  private readonly batcher: LocalBatcher | undefined;
  /** Decisions of acquire()/acquireFirst() granted locally, until report() takes them. */
  private readonly localGrants = new WeakMap<Decision, Tally>();
  /** breakerd unreachable (wrong) / reachable (right): its log lines, rate limited. */
  private readonly sidecarLog: ChangeLog;
  /** A decision failed open (closed) for a late answer while breakerd answered others (wrong) / one in time (right). */
  private readonly lateLog: ChangeLog;
  /** Reports failing (wrong) / accepted (right). */
  private readonly reportLog: ChangeLog;
  /** The Watch stream ended (wrong) / back (right). */
  private readonly watchLog: ChangeLog;
  private watchEverUp = false;
  /** Decide with no RPC until a probe or the Watch stream hears from breakerd. */
  private away = false;
  /** The next probe while away (unref()ed); undefined while present or while a probe is out. */
  private probeTimer: NodeJS.Timeout | undefined;
  private probing = false;
  private closed = false;
  /** Reports made while away (oldest first), sent when breakerd is back. */
  private held: HeldReport[] = [];
  private readonly maxHeldReports: number;

  constructor(options: BreakerdClientOptions = {}) {
    this.target = options.target ?? (process.env['BREAKERD_ADDR'] || DEFAULT_TARGET);
    this.decisionTimeoutMs = options.decisionTimeoutMs ?? 20;
    this.failMode = options.failMode ?? 'open';
    this.awayProbeIntervalMs = options.awayProbeIntervalMs ?? 100;
    this.maxHeldReports = options.maxHeldReports ?? MAX_HELD_REPORTS;
    if (!(Number.isInteger(this.maxHeldReports) && this.maxHeldReports >= 1)) {
      throw new RangeError(`maxHeldReports must be >= 1, got ${this.maxHeldReports}`);
    }
    if (!(this.awayProbeIntervalMs > 0)) {
      throw new RangeError(`awayProbeIntervalMs must be > 0, got ${this.awayProbeIntervalMs}`);
    }
    if (!(this.decisionTimeoutMs > 0)) throw new RangeError(`decisionTimeoutMs must be > 0, got ${this.decisionTimeoutMs}`);
    if (this.failMode !== 'open' && this.failMode !== 'closed') {
      throw new RangeError(`failMode must be 'open' or 'closed', got ${String(this.failMode)}`);
    }
    this.logger = options.logger === undefined ? console : options.logger;
    const sink: LogSink = (level, message) => this.logger?.[level](message);
    const logOptions: ChangeLogOptions = options.changeLog ?? {};
    this.sidecarLog = new ChangeLog(sink, logOptions);
    this.lateLog = new ChangeLog(sink, logOptions);
    this.reportLog = new ChangeLog(sink, logOptions);
    this.watchLog = new ChangeLog(sink, logOptions);
    // The Watch stream's own reconnect loop (not the channel's).
    const initialMs = options.watchBackoff?.initialMs ?? 100;
    const maxMs = options.watchBackoff?.maxMs ?? 5000;
    // Reconnect quickly once breakerd is back (gRPC's default backoff grows to 2 min).
    const channelOptions = channelOptionsFor(options.channelOptions);
    this.stub = new (breakerdV1().Breaker)(this.target, grpc.credentials.createInsecure(), channelOptions);
    // The probe asks over the same channel the decisions use.
    this.health = new (healthV1().Health)(this.target, grpc.credentials.createInsecure(), {
      channelOverride: this.stub.getChannel(),
    });
    if (options.watch ?? true) {
      this.watcher = new Watcher(
        { target: this.target, channelOptions, initialBackoffMs: initialMs, maxBackoffMs: maxMs },
        {
          onUp: () => {
            if (this.watchEverUp) {
              this.watchLog.right('info', `breakerd: watch stream at ${this.target} is back; watching breaker states`);
            } else {
              this.watchEverUp = true; // the first connect is not a change
              this.logger?.info(`breakerd: watching breaker states at ${this.target}`);
            }
          },
          onDown: (details) =>
            this.watchLog.wrong('warn', `breakerd: watch stream at ${this.target} ended (${details}); deciding remotely until it is back`),
          onReconnect: () => void this.counters.watchReconnects++,
          onMessage: () => this.markBack('the watch stream'),
        },
      );
      if (options.localDecisions ?? true) {
        this.batcher = new LocalBatcher({
          clientId: `node-${process.pid}-${randomBytes(4).toString('hex')}`,
          flushIntervalMs: options.flushIntervalMs,
          timeoutMs: 10 * this.decisionTimeoutMs,
          maxUnacked: options.maxUnackedOutcomes,
          send: (request, timeoutMs) => this.sendBatch(request, timeoutMs),
        });
      }
    }
  }

  /**
   * May `dependency` be called now? Decided in the client (source LOCAL, no
   * RPC): refused while the Watch cache says it is open, and, for a first
   * attempt with local decisions on, granted (permit "0": report it with
   * this decision) while the cache says CLOSED with local_decisions;
   * otherwise breakerd answers
   * (SIDECAR), or, when it is unreachable or slower than decisionTimeoutMs,
   * the fail mode does (FAIL_OPEN: allowed with permit "0"; FAIL_CLOSED),
   * at once and with no RPC while breakerd is away.
   * Rejects only on INVALID_ARGUMENT (a bad dependency name: a programming
   * error), with the signal's reason when `options.signal` aborts, and with
   * ClientClosedError after close() (no RPC).
   *
   * @param attempt 0 for the first try, 1, 2, ... for retries (spends the retry budget).
   */
  async acquire(dependency: string, attempt = 0, options: AcquireOptions = {}): Promise<Decision> {
    this.throwIfClosed('acquire');
    const { signal } = options;
    signal?.throwIfAborted();
    if (attempt === 0) {
      const tally = this.grantLocally(dependency);
      if (tally !== undefined) return this.localGrant(dependency, tally, undefined);
    }
    const local = this.watcher?.refusal(dependency);
    if (local) {
      this.countLocalRefusal(dependency);
      return { allowed: false, permit: '0', probe: false, ...local, dependency, source: DecisionSource.LOCAL };
    }
    if (this.away) return this.awayDecision(dependency);
    try {
      const r = await this.send<AcquireResponse__Output>(
        (callOptions, done) => this.stub.Acquire({ dependency, attempt }, callOptions, done),
        { lane: 'decision', signal, onLate: (late) => this.returnPermit(dependency, late) },
      );
      this.decidedBySidecar();
      return {
        allowed: r.allowed, permit: r.permit, probe: r.probe, state: r.state, reason: r.reason,
        retryAfterMs: durationToMs(r.retry_after), dependency, source: DecisionSource.SIDECAR,
      };
    } catch (err) {
      if (signal?.aborted && err === signal.reason) throw err;
      return this.unreachable(dependency, err);
    }
  }

  /**
   * Acquire over a fallback chain in one round trip: the first allowed
   * dependency in order of preference is granted (`decision.dependency`).
   * Dependencies refused locally are dropped before the RPC; if none is
   * left the answer is a LOCAL refusal with the shortest wait. On FAIL_OPEN
   * the first remaining dependency is granted. When every candidate is
   * refused, `dependency` names the last one. With `options.chain` every
   * dependency goes to breakerd, which counts the decision (see
   * AcquireFirstOptions.chain); the Watch cache is used only while breakerd
   * is away or when it does not answer, as without it. `options.signal` and
   * ClientClosedError as for acquire().
   */
  async acquireFirst(dependencies: readonly string[], attempt = 0, options: AcquireFirstOptions = {}): Promise<Decision> {
    this.throwIfClosed('acquireFirst');
    const { signal, chain, firstTier = 0 } = options;
    if (chain !== undefined) checkName(chain, 'chain');
    if (!(Number.isInteger(firstTier) && firstTier >= 0)) {
      throw new RangeError(`firstTier must be an integer >= 0, got ${firstTier}`);
    }
    if (dependencies.length === 0) throw new RangeError('acquireFirst needs at least one dependency');
    signal?.throwIfAborted();
    // A named chain's first candidate granted locally is counted at its tier
    // in the batch; any other case goes to breakerd, which counts it.
    if (attempt === 0 && chain !== undefined && firstTier <= MAX_CHAIN_TIER) {
      const tally = this.grantLocally(dependencies[0]!);
      if (tally !== undefined) {
        this.batcher!.chainGrant(chain, firstTier);
        return this.localGrant(dependencies[0]!, tally, { chain, tier: firstTier });
      }
    }
    const candidates: string[] = [];
    let refused: Decision | undefined;
    const refusedDependencies: string[] = [];
    for (const dependency of dependencies) {
      const local = this.watcher?.refusal(dependency);
      if (!local) {
        candidates.push(dependency);
        continue;
      }
      refusedDependencies.push(dependency);
      const retryAfterMs = Math.min(local.retryAfterMs, refused?.retryAfterMs ?? Infinity);
      refused = { allowed: false, permit: '0', probe: false, ...local, retryAfterMs, dependency, source: DecisionSource.LOCAL };
    }
    // Decided as the Watch cache has it: LOCAL when it refuses every
    // candidate, else the fail mode's for the first it does not (notSent:
    // no RPC was made, counted in awayDecisions).
    const withoutSidecar = (notSent: boolean): Decision => {
      if (chain !== undefined) for (const d of refusedDependencies) this.countLocalRefusal(d);
      if (candidates.length === 0) return refused!;
      return notSent ? this.awayDecision(candidates[0]!) : this.failDecision(candidates[0]!);
    };
    if (chain === undefined) {
      for (const d of refusedDependencies) this.countLocalRefusal(d);
      // The first candidate the cache does not refuse, granted locally when it may be.
      const tally = attempt === 0 && candidates.length > 0 ? this.grantLocally(candidates[0]!) : undefined;
      if (tally !== undefined) return this.localGrant(candidates[0]!, tally, undefined);
    }
    if (this.away || (chain === undefined && candidates.length === 0)) return withoutSidecar(true);
    const sent = chain === undefined ? candidates : [...dependencies];
    const tierOf = (granted: string): ChainPosition => {
      const index = sent.indexOf(granted);
      return chain === undefined || index < 0 ? {} : { chain, tier: firstTier + index };
    };
    const request = chain === undefined
      ? { dependencies: sent, attempt }
      : { dependencies: sent, attempt, chain, first_tier: firstTier };
    const last = sent[sent.length - 1]!;
    try {
      const r = await this.send<AcquireFirstResponse__Output>(
        (callOptions, done) => this.stub.AcquireFirst(request, callOptions, done),
        { lane: 'decision', signal, onLate: (late) => this.returnPermit(late.dependency, late, tierOf(late.dependency)) },
      );
      this.decidedBySidecar();
      return {
        allowed: r.allowed, permit: r.permit, probe: r.probe, state: r.state, reason: r.reason,
        retryAfterMs: durationToMs(r.retry_after), dependency: r.dependency || last,
        source: DecisionSource.SIDECAR, ...(r.allowed ? tierOf(r.dependency) : {}),
      };
    } catch (err) {
      if (signal?.aborted && err === signal.reason) throw err;
      if (chain === undefined) return this.unreachable(candidates[0]!, err);
      return withoutSidecar(this.noteUnreachable(err));
    }
  }

  /**
   * Tells breakerd how a permitted call went. A local grant (permit "0",
   * source LOCAL) reported with its decision as `position` goes into the
   * next ReportBatch: no RPC, resolves to undefined at once, once per
   * decision (after close(), or while breakerd is away, it is dropped and
   * counted in stats().droppedOutcomes). Any other permit of "0" (fail-open,
   * refused) is not sent. Never rejects: failures are counted in
   * stats().reportErrors and logged once per change, and so are reports
   * after close(). A report made while breakerd is away is held, not sent and
   * not an error (at most MAX_HELD_REPORTS: past that the oldest held one is
   * dropped and counted), and sent as soon as breakerd is back; the result is
   * undefined then.
   *
   * @param latencyMs how long the call took (feeds the slow-call rule and histogram)
   * @param position for a permit granted through a named fallback chain: its
   *   chain and tier (pass the Decision), sent with the outcome for breakerd
   *   to count in breakerd_chain_outcomes_total; left out when the name is
   *   not valid or the tier not in 0..63 (breakerd would refuse the Report)
   */
  async report(
    dependency: string,
    permit: string,
    outcome: OutcomeReport,
    latencyMs?: number,
    position?: ChainPosition,
  ): Promise<ReportResult | undefined> {
    if (!permit || permit === '0') {
      // A local grant, reported with its decision: into the batch, once.
      const tally = position === undefined ? undefined : this.localGrants.get(position as Decision);
      if (tally !== undefined) {
        this.localGrants.delete(position as Decision);
        this.batcher!.outcome(tally, outcome, latencyMs ?? NaN, position);
      }
      return undefined;
    }
    if (this.away && !this.closed) {
      this.hold({ dependency, permit, outcome, latencyMs, position });
      return undefined;
    }
    return this.sendReport(dependency, permit, outcome, latencyMs, false, position);
  }

  /** Sends a Report (while away only when `keep`: a late permit going back); never rejects. */
  private async sendReport(
    dependency: string,
    permit: string,
    outcome: OutcomeReport,
    latencyMs: number | undefined,
    keep: boolean,
    position: ChainPosition | undefined,
  ): Promise<ReportResult | undefined> {
    if (this.closed) {
      this.counters.reportErrors++;
      return undefined;
    }
    const request: ReportRequest = {
      dependency,
      permit,
      outcome: outcome.outcome ?? 'OUTCOME_UNSPECIFIED',
      http_status: outcome.httpStatus ?? 0,
      latency: latencyMs === undefined ? null : msToDuration(latencyMs),
      retry_after: outcome.retryAfterMs === undefined ? null : msToDuration(outcome.retryAfterMs),
    };
    if (outcome.grpcCode !== undefined) request.grpc_code = outcome.grpcCode;
    // breakerd refuses a whole Report whose chain or tier is not valid: the
    // outcome would be lost, so such a position is left out instead.
    const tier = position?.tier ?? 0;
    if (isName(position?.chain) && Number.isInteger(tier) && tier >= 0 && tier <= MAX_CHAIN_TIER) {
      request.chain = position.chain;
      request.tier = tier;
    }
    try {
      const r = await this.send<ReportResponse__Output>(
        (callOptions, done) => this.stub.Report(request, callOptions, done),
        { lane: 'report', keep },
      );
      if (this.reportLog.isWrong) this.reportLog.right('info', 'breakerd: reports are accepted again');
      return { state: r.state, effect: r.effect };
    } catch (err) {
      if (err === NOT_SENT_AWAY && !keep && !this.closed) {
        // Queued when breakerd was marked away: held like a report made while away
        // (or sent again if it is already back).
        if (!this.away) return this.sendReport(dependency, permit, outcome, latencyMs, false, position);
        this.hold({ dependency, permit, outcome, latencyMs, position });
        return undefined;
      }
      this.counters.reportErrors++;
      if (err === NOT_SENT_AWAY) return undefined;
      if (!this.reportLog.isWrong) {
        this.reportLog.wrong('warn', `breakerd: report failed (${describe(err)}); counting report errors until one succeeds`);
      }
      return undefined;
    }
  }

  /**
   * Runs `fn` under the breaker: acquire; if refused, throw BreakerOpenError
   * without calling; else run it, measure it, report its classified outcome
   * exactly once (a local grant's into the next ReportBatch) and return its
   * result or rethrow its error (a classifier that throws: see
   * Classifier). When `options.signal` aborts (during the
   * Acquire or the call), rejects at once with its reason; the permit, if
   * any, is reported as the abort (see GuardOptions.signal). After close(),
   * rejects with ClientClosedError without calling.
   */
  async guard<T>(dependency: string, fn: () => T | PromiseLike<T>, options: GuardOptions<T> = {}): Promise<T> {
    this.throwIfClosed('guard');
    const { signal } = options;
    if (signal === undefined && (options.attempt ?? 0) === 0) {
      // The fast path: granted locally, the call and its outcome with no
      // other await, promise or object than the call's own.
      const tally = this.grantLocally(dependency);
      if (tally !== undefined) {
        const started = performance.now();
        let value: Awaited<T>;
        try {
          value = await fn();
        } catch (error) {
          this.localOutcome(tally, { ok: false, error }, options.classify, performance.now() - started);
          throw error;
        }
        const latencyMs = performance.now() - started;
        if (options.classify === undefined) this.batcher!.outcome(tally, Outcome.SUCCESS, latencyMs, undefined);
        else this.localOutcome(tally, { ok: true, value }, options.classify, latencyMs);
        return value;
      }
    }
    const decision = await this.acquire(dependency, options.attempt ?? 0, { signal });
    if (!decision.allowed) throw new BreakerOpenError(decision);
    const { settled } = await this.runPermitted(decision, fn, options.classify, signal);
    return unwrap(settled);
  }

  /**
   * Calls `fn(attempt)` as a guard up to maxAttempts times, sleeping with
   * full-jitter backoff before each retry, and acquiring with `attempt > 0`
   * so breakerd's retry budget applies. Any refusal stops at once with
   * BreakerOpenError (no sleep, no further attempt); so does an outcome not
   * worth retrying (success, bad request, auth error, cancelled, soft
   * failure), returning or rethrowing that attempt's result. After the last
   * attempt its result or error is returned or rethrown. `options.signal`
   * aborting rejects at once with its reason (in a backoff sleep too) and
   * stops: no further attempt. After close(), rejects with ClientClosedError.
   */
  async retry<T>(
    dependency: string,
    fn: (attempt: number) => T | PromiseLike<T>,
    options: RetryOptions<T> = {},
  ): Promise<T> {
    this.throwIfClosed('retry');
    const { maxAttempts = 3, baseMs = 100, maxMs = 2000, classify, signal } = options;
    if (!Number.isInteger(maxAttempts) || maxAttempts < 1) {
      throw new RangeError(`maxAttempts must be a positive integer, got ${maxAttempts}`);
    }
    let lastState: StateName | undefined;
    for (let attempt = 0; ; attempt++) {
      // No retry is allowed while the breaker is not closed: when the last
      // report or the Watch cache already says so, ask at once (and be refused).
      const refusalKnown =
        (lastState !== undefined && !CLOSED_STATES.has(lastState)) || this.watcher?.refusal(dependency) !== undefined;
      if (attempt > 0 && !refusalKnown) {
        await sleep(Math.random() * Math.min(maxMs, baseMs * 2 ** (attempt - 1)), undefined, { signal }).catch(
          (err: unknown) => {
            throw signal?.aborted ? signal.reason : err;
          },
        );
      }
      const decision = await this.acquire(dependency, attempt, { signal });
      if (!decision.allowed) throw new BreakerOpenError(decision);
      const { settled, report, result } = await this.runPermitted(decision, () => fn(attempt), classify, signal);
      if (attempt + 1 >= maxAttempts || !Outcome.isRetryable(report) || signal?.aborted) return unwrap(settled);
      lastState = result?.state;
    }
  }

  /**
   * A fallback chain: acquireFirst over `dependencies`, then the granted
   * dependency's `fn(dependency)` as a guard. If that call fails with an
   * outcome worth retrying (timeout, connection error, server error, rate
   * limited), the chain goes on with the dependencies after it; any other
   * outcome (success, bad request, auth error, cancelled, soft failure)
   * stops it, returning or rethrowing that call's result. When none is
   * granted, throws the BreakerOpenError of the last answer; when the last
   * one's call fails, returns or rethrows what it gave. After close(),
   * rejects with ClientClosedError. Without `options.chain`, dependencies
   * the Watch cache knows to be open are skipped without asking breakerd;
   * with it, breakerd is asked and counts the chain (FirstOptions.chain).
   */
  async first<T>(
    dependencies: readonly string[],
    fn: (dependency: string) => T | PromiseLike<T>,
    options: FirstOptions<T> = {},
  ): Promise<T> {
    this.throwIfClosed('first');
    const { classify, signal, chain } = options;
    if (chain !== undefined) checkName(chain, 'chain');
    const all = [...dependencies];
    let firstTier = 0; // where the remaining dependencies start in `all`
    for (;;) {
      const remaining = all.slice(firstTier);
      const decision = await this.acquireFirst(remaining, 0, chain === undefined ? { signal } : { signal, chain, firstTier });
      if (!decision.allowed) throw new BreakerOpenError(decision);
      const { settled, report } = await this.runPermitted(decision, () => fn(decision.dependency), classify, signal);
      const index = remaining.indexOf(decision.dependency);
      firstTier += index + 1;
      if (!Outcome.isRetryable(report) || index < 0 || firstTier >= all.length || signal?.aborted) return unwrap(settled);
    }
  }

  /** A snapshot of the counters. */
  stats(): ClientStats {
    return { ...this.counters, droppedOutcomes: this.batcher?.dropped ?? 0 };
  }

  /** True while the Watch stream is established (false when watch is off). */
  get watching(): boolean {
    return this.watcher?.connected ?? false;
  }

  /** The state the Watch cache holds for `dependency`, if any (for diagnostics). */
  cachedState(dependency: string): StateName | undefined {
    return this.watcher?.state(dependency);
  }

  /**
   * Resolves once the channel is connected and one RPC has gone through it
   * (the first call on a channel is much slower than the next ones: call it
   * at startup so that early decisions do not fail open on the 20 ms
   * deadline). Rejects if breakerd is not reachable within `timeoutMs`
   * (default 5000), and with ClientClosedError after close(). Optional: the
   * client works without it.
   */
  async ready(timeoutMs = 5000): Promise<void> {
    this.throwIfClosed('ready');
    const deadline = Date.now() + timeoutMs;
    await new Promise<void>((resolve, reject) =>
      this.stub.waitForReady(deadline, (err) => (err ? reject(err) : resolve())),
    );
    // GetState of a name never used: NOT_FOUND, and nothing is created.
    await new Promise<void>((resolve) =>
      this.stub.GetState({ dependency: WARMUP_DEPENDENCY }, { deadline }, () => resolve()),
    );
  }

  /**
   * Sends what local decisions have left to send (for at most
   * decisionTimeoutMs), ends the Watch stream and the away probe, and closes
   * the channel. Idempotent. Afterwards acquire, acquireFirst, guard, retry,
   * first and ready reject with ClientClosedError, and reports are dropped
   * (counted in reportErrors; outcomes of local grants in droppedOutcomes),
   * as are reports still held from an away spell.
   */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.counters.reportErrors += this.held.length;
    this.held = [];
    clearTimeout(this.probeTimer);
    this.probeTimer = undefined;
    await this.batcher?.close(this.decisionTimeoutMs);
    this.stub.close();
    await this.watcher?.close();
    this.sidecarLog.close();
    this.lateLog.close();
    this.reportLog.close();
    this.watchLog.close();
  }

  /**
   * Runs a permitted call and reports it exactly once: an abort of `signal`
   * as abortOutcome() says (the classifier is not asked), anything else as
   * classified. A classifier that throws: reported as the default classifies
   * the call, then its error is rethrown.
   */
  private async runPermitted<T>(
    decision: Decision,
    fn: () => T | PromiseLike<T>,
    classify: Classifier<T> | undefined,
    signal: AbortSignal | undefined,
  ): Promise<{ settled: Settled<T>; report: OutcomeReport; result: ReportResult | undefined }> {
    const started = performance.now();
    const settled = await runAbortable(fn, signal);
    const latencyMs = performance.now() - started;
    let report: OutcomeReport;
    let classifierFailed: { error: unknown } | undefined;
    if (!settled.ok && settled.aborted) {
      report = abortOutcome(settled.error);
    } else {
      try {
        report = classify?.(settled) ?? defaultOutcome(settled);
      } catch (error) {
        classifierFailed = { error };
        report = defaultOutcome(settled);
      }
    }
    const result = await this.report(decision.dependency, decision.permit, report, latencyMs, decision);
    if (classifierFailed) throw classifierFailed.error;
    return { settled, report, result };
  }

  /**
   * A first attempt granted in the client, if the Watch cache allows it
   * (client/README.md, "Local decisions"): local decisions on, breakerd not
   * away, the stream live and its latest event for `dependency` CLOSED,
   * enforcing, with local_decisions. Counted in the batch; returns the books
   * the call's outcome goes to.
   */
  private grantLocally(dependency: string): Tally | undefined {
    const batcher = this.batcher;
    if (batcher === undefined || this.away) return undefined;
    const entry = this.watcher!.entry(dependency);
    if (entry === undefined || !entry.grantable) return undefined;
    let tally = entry.tally;
    if (tally === undefined) entry.tally = tally = new Tally(dependency, entry.generation.toString());
    batcher.grant(tally);
    return tally;
  }

  /** The Decision of a local grant, remembered until report() is given it. */
  private localGrant(dependency: string, tally: Tally, position: Position | undefined): Decision {
    const decision: Decision = {
      allowed: true, permit: '0', probe: false, state: 'STATE_CLOSED', reason: 'REJECT_REASON_UNSPECIFIED',
      retryAfterMs: 0, dependency, source: DecisionSource.LOCAL, ...position,
    };
    this.localGrants.set(decision, tally);
    return decision;
  }

  /**
   * The classified outcome of a call guard() granted locally, into the
   * batch; a classifier that throws: the default's outcome, then its error
   * is rethrown (as runPermitted does).
   */
  private localOutcome<T>(tally: Tally, settled: Settled<T>, classify: Classifier<T> | undefined, latencyMs: number): void {
    let report: OutcomeReport;
    try {
      report = classify?.(settled) ?? defaultOutcome(settled);
    } catch (error) {
      this.batcher!.outcome(tally, defaultOutcome(settled), latencyMs, undefined);
      throw error;
    }
    this.batcher!.outcome(tally, report, latencyMs, undefined);
  }

  /** A call refused from the Watch cache: counted, and told to breakerd in the next batch. */
  private countLocalRefusal(dependency: string): void {
    this.counters.localRejections++;
    this.batcher?.refusedLocal(dependency);
  }

  /** Use after close() fails at once, before anything is sent or counted. */
  private throwIfClosed(operation: string): void {
    if (this.closed) throw new ClientClosedError(operation);
  }

  /**
   * The fail-mode decision for an RPC error; INVALID_ARGUMENT is rethrown.
   * UNAVAILABLE marks breakerd away, and so does a timeout unless breakerd
   * answered another RPC after this one was written: then it was only late,
   * and the client stays present (client/README.md, "Sidecar away").
   */
  private unreachable(dependency: string, err: unknown): Decision {
    return this.noteUnreachable(err) ? this.awayDecision(dependency) : this.failDecision(dependency);
  }

  /**
   * unreachable()'s bookkeeping: rethrows INVALID_ARGUMENT, marks breakerd
   * away or notes the late answer. True when the RPC was never sent (away).
   */
  private noteUnreachable(err: unknown): boolean {
    if (err === NOT_SENT_AWAY) return true;
    const code = (err as { code?: unknown }).code;
    if (code === INVALID_ARGUMENT) throw err;
    if (!this.closed) {
      const writtenAt = code === DEADLINE_EXCEEDED ? writtenAtOf(err) : undefined;
      if (writtenAt !== undefined && this.answers.answeredSince(writtenAt)) this.noteLate(err);
      else if (AWAY_CODES.has(code)) this.markAway(err);
      else this.noteSidecar(false, err);
    }
    return false;
  }

  /** breakerd decided (logs the end of a spell of unreachable or late answers). */
  private decidedBySidecar(): void {
    this.noteSidecar(true);
    if (this.lateLog.isWrong) this.lateLog.right('info', `breakerd: ${this.target} answers decisions in time again`);
  }

  /** A decision failed for a late answer while breakerd answered others: logged on change, not away. */
  private noteLate(err: unknown): void {
    if (this.lateLog.isWrong) return;
    this.lateLog.wrong(
      'warn',
      `breakerd: ${this.target} was late with a decision (${describe(err)}) while answering others; ` +
        `that decision failed ${this.failMode}, and breakerd is not marked away`,
    );
  }

  /** The fail-mode decision made with no RPC while breakerd is away. */
  private awayDecision(dependency: string): Decision {
    this.counters.awayDecisions++;
    return this.failDecision(dependency);
  }

  /** The fail mode's answer for `dependency`, counted. */
  private failDecision(dependency: string): Decision {
    const open = this.failMode === 'open';
    if (open) this.counters.failOpen++;
    else this.counters.failClosed++;
    this.batcher?.failed(dependency, open);
    return {
      allowed: open, permit: '0', probe: false, state: 'STATE_UNSPECIFIED',
      reason: 'REJECT_REASON_UNSPECIFIED', retryAfterMs: 0, dependency,
      source: open ? DecisionSource.FAIL_OPEN : DecisionSource.FAIL_CLOSED,
    };
  }

  /** Starts an away spell (logged once) and its probe. */
  private markAway(err: unknown): void {
    if (this.away) return;
    this.away = true;
    this.batcher?.pause();
    // Nothing queued waits for a breakerd that is not answering.
    this.window.flush();
    if (!this.sidecarLog.isWrong) {
      this.sidecarLog.wrong(
        'warn',
        `breakerd: ${this.target} unreachable (${describe(err)}); failing ${this.failMode} with no RPC until it answers a health check`,
      );
    }
    if (!this.probing) this.scheduleProbe();
  }

  /** Ends an away spell (logged once); `via` says what answered. */
  private markBack(via: string): void {
    if (!this.away) return;
    this.away = false;
    clearTimeout(this.probeTimer);
    this.probeTimer = undefined;
    if (this.sidecarLog.isWrong) this.sidecarLog.right('info', `breakerd: ${this.target} is reachable again (${via} answered)`);
    this.sendHeld();
    this.batcher?.resume();
  }

  /** Holds a report made while away; past MAX_HELD_REPORTS the oldest held one is dropped (counted). */
  private hold(report: HeldReport): void {
    if (this.held.length >= this.maxHeldReports) {
      this.held.shift();
      this.counters.reportErrors++;
    }
    this.held.push(report);
  }

  /**
   * Sends the reports held while away, oldest first, through the window's
   * report lane; called where breakerd is marked back (a probe's or the Watch
   * stream's callback), never from an unrelated caller. One whose RPC fails
   * is counted in reportErrors; one flushed unsent because breakerd is away
   * again is held again.
   */
  private sendHeld(): void {
    const held = this.held;
    this.held = [];
    for (const r of held) void this.sendReport(r.dependency, r.permit, r.outcome, r.latencyMs, false, r.position);
  }

  /** The next probe, on a timer that never keeps the process alive. */
  private scheduleProbe(): void {
    if (this.probeTimer || this.closed) return;
    this.probeTimer = setTimeout(() => this.probe(), this.awayProbeIntervalMs);
    this.probeTimer.unref();
  }

  /** One Health/Check of the whole server (service ""), with the decision deadline. */
  private probe(): void {
    this.probeTimer = undefined;
    if (!this.away || this.closed) return;
    this.probing = true;
    this.health.Check({ service: '' }, { deadline: Date.now() + this.decisionTimeoutMs }, (err, res) => {
      this.probing = false;
      if (!err && res?.status === 'SERVING') this.markBack('a health check');
      else if (this.away) this.scheduleProbe();
    });
  }

  private noteSidecar(reachable: boolean, err?: unknown): void {
    if (reachable === !this.sidecarLog.isWrong) return;
    if (reachable) this.sidecarLog.right('info', `breakerd: ${this.target} is reachable again`);
    else this.sidecarLog.wrong('warn', `breakerd: ${this.target} unreachable (${describe(err)}); failing ${this.failMode}`);
  }

  /** Reports a permit that arrived after its caller stopped waiting: the call was never made. */
  private returnPermit(dependency: string, late: { allowed: boolean; permit: string }, position?: ChainPosition): void {
    if (!late.allowed || !late.permit || late.permit === '0') return;
    void this.sendReport(dependency, late.permit, Outcome.CANCELLED, undefined, true, position);
  }

  /**
   * One ReportBatch, already encoded (batch-encoding.ts), outside the
   * window; an answer counts as breakerd answering (AnswerClock).
   */
  private sendBatch(request: Buffer, timeoutMs: number): Promise<unknown> {
    const method = breakerdV1().Breaker.service.ReportBatch;
    return new Promise((resolve, reject) =>
      this.stub.makeUnaryRequest(
        method.path,
        (bytes: Buffer) => bytes,
        method.responseDeserialize,
        request,
        { deadline: Date.now() + timeoutMs },
        (err, res) => {
          if (err) return reject(err);
          this.answers.answered();
          resolve(res);
        },
      ),
    );
  }

  /** One RPC through the window, its timeout running from when it is written (unary.ts). */
  private send<Res>(invoke: UnaryInvoke<Res>, options: SendOptions<Res>): Promise<Res> {
    return sendUnary(this.window, this.answers, this.decisionTimeoutMs, invoke, options);
  }
}

/** The default classification: success for a value, Outcome.fromError for an error. */
function defaultOutcome<T>(settled: Settled<T>): OutcomeReport {
  return settled.ok ? Outcome.SUCCESS : Outcome.fromError(settled.error);
}

function unwrap<T>(settled: Settled<T>): T {
  if (settled.ok) return settled.value;
  throw settled.error;
}

function describe(err: unknown): string {
  const e = err as { details?: unknown; message?: unknown };
  return String(e?.details || e?.message || err);
}

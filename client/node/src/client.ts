// The breakerd client: Acquire before a call, Report after it.
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import * as grpc from '@grpc/grpc-js';
import { BreakerOpenError, DecisionSource, type Decision, type StateName } from './decision';
import type { AcquireFirstResponse__Output } from './generated/breakerd/v1/AcquireFirstResponse';
import type { AcquireResponse__Output } from './generated/breakerd/v1/AcquireResponse';
import type { BreakerClient } from './generated/breakerd/v1/Breaker';
import type { Effect__Output } from './generated/breakerd/v1/Effect';
import type { ReportRequest } from './generated/breakerd/v1/ReportRequest';
import type { ReportResponse__Output } from './generated/breakerd/v1/ReportResponse';
import type { HealthClient } from './generated/grpc/health/v1/Health';
import { Outcome, type OutcomeReport } from './outcome';
import { breakerdV1, durationToMs, healthV1, msToDuration } from './proto';
import { Watcher } from './watch';

/** Where log lines go: once when breakerd becomes unreachable (or away), once when it is back. */
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
  /** Deadline of each Acquire, AcquireFirst and Report RPC, in ms. Default 20. */
  decisionTimeoutMs?: number;
  /** What to answer when breakerd is unreachable or too slow. Default 'open'. */
  failMode?: 'open' | 'closed';
  /** Keep a Watch stream and refuse locally while a breaker is open. Default true. */
  watch?: boolean;
  /** Watch reconnect backoff, doubling from initialMs to maxMs with full jitter. Default 100 / 5000. */
  watchBackoff?: { initialMs?: number; maxMs?: number };
  /**
   * While breakerd is away (an Acquire timed out or found it unavailable),
   * how often a Health/Check asks whether it is back, in ms. Nothing is sent
   * while it is present. Default 100.
   */
  awayProbeIntervalMs?: number;
  /** Default `console`; `null` silences the client. */
  logger?: Logger | null;
  /** Extra gRPC channel options (merged over the client's reconnect settings). */
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
  /** Reports that failed (never seen by the caller). */
  reportErrors: number;
  /** Times the Watch stream was opened again after it ended. */
  watchReconnects: number;
  /** Decisions made with no RPC while breakerd was away (each also counted in failOpen or failClosed). */
  awayDecisions: number;
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
 * undefined for the default: success for a value, Outcome.fromError for an error.
 */
export type Classifier<T> = (settled: Settled<T>) => OutcomeReport | undefined;

export interface GuardOptions<T> {
  classify?: Classifier<T>;
  /** The attempt number sent with Acquire (0 = first try). Default 0. */
  attempt?: number;
}

export interface RetryOptions<T> {
  /** Attempts in all, the first included. Default 3. */
  maxAttempts?: number;
  /** Backoff before attempt n >= 1: uniform(0, min(maxMs, baseMs * 2^(n-1))). Default 100. */
  baseMs?: number;
  /** Default 2000. */
  maxMs?: number;
  classify?: Classifier<T>;
}

export interface FirstOptions<T> {
  classify?: Classifier<T>;
}

const DEFAULT_TARGET = '127.0.0.1:50051';
const CLOSED_STATES: ReadonlySet<StateName> = new Set<StateName>(['STATE_CLOSED', 'STATE_FORCED_CLOSED']);
const WARMUP_DEPENDENCY = 'breakerd-client.warmup';
const INVALID_ARGUMENT = grpc.status.INVALID_ARGUMENT;
/** Acquire errors that mean breakerd is not answering in time: it is away. */
const AWAY_CODES: ReadonlySet<unknown> = new Set([grpc.status.DEADLINE_EXCEEDED, grpc.status.UNAVAILABLE]);

/**
 * A client of breakerd. Create one per process and share it: it owns one
 * channel and one Watch stream, and every method is safe to call
 * concurrently from any number of async tasks. The Watch stream does not keep
 * the process alive; close() ends it and the channel.
 *
 * Sidecar away: after an Acquire or AcquireFirst RPC fails with
 * DEADLINE_EXCEEDED or UNAVAILABLE, decisions come from the fail mode at
 * once with no RPC (counted in awayDecisions) and reports are not sent,
 * until a Health/Check (every awayProbeIntervalMs, on an unref()ed timer)
 * or the Watch stream hears from breakerd again.
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
  private readonly counters: ClientStats = {
    failOpen: 0, failClosed: 0, localRejections: 0, reportErrors: 0, watchReconnects: 0, awayDecisions: 0,
  };
  private sidecarReachable = true;
  /** Decide with no RPC until a probe or the Watch stream hears from breakerd. */
  private away = false;
  /** The next probe while away (unref()ed); undefined while present or while a probe is out. */
  private probeTimer: NodeJS.Timeout | undefined;
  private probing = false;
  private reportsWorking = true;
  private closed = false;

  constructor(options: BreakerdClientOptions = {}) {
    this.target = options.target ?? (process.env['BREAKERD_ADDR'] || DEFAULT_TARGET);
    this.decisionTimeoutMs = options.decisionTimeoutMs ?? 20;
    this.failMode = options.failMode ?? 'open';
    this.awayProbeIntervalMs = options.awayProbeIntervalMs ?? 100;
    if (!(this.awayProbeIntervalMs > 0)) {
      throw new RangeError(`awayProbeIntervalMs must be > 0, got ${this.awayProbeIntervalMs}`);
    }
    if (!(this.decisionTimeoutMs > 0)) throw new RangeError(`decisionTimeoutMs must be > 0, got ${this.decisionTimeoutMs}`);
    if (this.failMode !== 'open' && this.failMode !== 'closed') {
      throw new RangeError(`failMode must be 'open' or 'closed', got ${String(this.failMode)}`);
    }
    this.logger = options.logger === undefined ? console : options.logger;
    const initialMs = options.watchBackoff?.initialMs ?? 100;
    const maxMs = options.watchBackoff?.maxMs ?? 5000;
    // Reconnect quickly once breakerd is back (gRPC's default backoff grows to 2 min).
    const channelOptions: grpc.ChannelOptions = {
      'grpc.initial_reconnect_backoff_ms': initialMs,
      'grpc.max_reconnect_backoff_ms': maxMs,
      ...options.channelOptions,
    };
    this.stub = new (breakerdV1().Breaker)(this.target, grpc.credentials.createInsecure(), channelOptions);
    // The probe asks over the same channel the decisions use.
    this.health = new (healthV1().Health)(this.target, grpc.credentials.createInsecure(), {
      channelOverride: this.stub.getChannel(),
    });
    if (options.watch ?? true) {
      this.watcher = new Watcher(
        { target: this.target, channelOptions, initialBackoffMs: initialMs, maxBackoffMs: maxMs },
        {
          onUp: () => this.logger?.info(`breakerd: watching breaker states at ${this.target}`),
          onDown: (details) =>
            this.logger?.warn(`breakerd: watch stream at ${this.target} ended (${details}); deciding remotely until it is back`),
          onReconnect: () => void this.counters.watchReconnects++,
          onMessage: () => this.markBack('the watch stream'),
        },
      );
    }
  }

  /**
   * May `dependency` be called now? Refused locally (source LOCAL, no RPC)
   * while the Watch cache says it is open; otherwise breakerd answers
   * (SIDECAR), or, when it is unreachable or slower than decisionTimeoutMs,
   * the fail mode does (FAIL_OPEN: allowed with permit "0"; FAIL_CLOSED),
   * at once and with no RPC while breakerd is away.
   * Rejects only on INVALID_ARGUMENT (a bad dependency name: a programming error).
   *
   * @param attempt 0 for the first try, 1, 2, ... for retries (spends the retry budget).
   */
  async acquire(dependency: string, attempt = 0): Promise<Decision> {
    const local = this.watcher?.refusal(dependency);
    if (local) {
      this.counters.localRejections++;
      return { allowed: false, permit: '0', probe: false, ...local, dependency, source: DecisionSource.LOCAL };
    }
    if (this.away) return this.awayDecision(dependency);
    try {
      const r = await this.unary<AcquireResponse__Output>((options, done) =>
        this.stub.Acquire({ dependency, attempt }, options, done),
      );
      this.noteSidecar(true);
      return {
        allowed: r.allowed, permit: r.permit, probe: r.probe, state: r.state, reason: r.reason,
        retryAfterMs: durationToMs(r.retry_after), dependency, source: DecisionSource.SIDECAR,
      };
    } catch (err) {
      return this.unreachable(dependency, err);
    }
  }

  /**
   * Acquire over a fallback chain in one round trip: the first allowed
   * dependency in order of preference is granted (`decision.dependency`).
   * Dependencies refused locally are dropped before the RPC; if none is
   * left the answer is a LOCAL refusal with the shortest wait. On FAIL_OPEN
   * the first remaining dependency is granted. When every candidate is
   * refused, `dependency` names the last one.
   */
  async acquireFirst(dependencies: readonly string[], attempt = 0): Promise<Decision> {
    if (dependencies.length === 0) throw new RangeError('acquireFirst needs at least one dependency');
    const candidates: string[] = [];
    let refused: Decision | undefined;
    for (const dependency of dependencies) {
      const local = this.watcher?.refusal(dependency);
      if (!local) {
        candidates.push(dependency);
        continue;
      }
      this.counters.localRejections++;
      const retryAfterMs = Math.min(local.retryAfterMs, refused?.retryAfterMs ?? Infinity);
      refused = { allowed: false, permit: '0', probe: false, ...local, retryAfterMs, dependency, source: DecisionSource.LOCAL };
    }
    if (candidates.length === 0) return refused!;
    if (this.away) return this.awayDecision(candidates[0]!);
    const last = candidates[candidates.length - 1]!;
    try {
      const r = await this.unary<AcquireFirstResponse__Output>((options, done) =>
        this.stub.AcquireFirst({ dependencies: candidates, attempt }, options, done),
      );
      this.noteSidecar(true);
      return {
        allowed: r.allowed, permit: r.permit, probe: r.probe, state: r.state, reason: r.reason,
        retryAfterMs: durationToMs(r.retry_after), dependency: r.dependency || last,
        source: DecisionSource.SIDECAR,
      };
    } catch (err) {
      return this.unreachable(candidates[0]!, err);
    }
  }

  /**
   * Tells breakerd how a permitted call went. A permit of "0" (fail-open,
   * refused) is not sent. Never rejects: failures are counted in
   * stats().reportErrors and logged once per change, and so are reports not
   * sent while breakerd is away; the result is undefined then.
   *
   * @param latencyMs how long the call took (feeds the slow-call rule and histogram)
   */
  async report(
    dependency: string,
    permit: string,
    outcome: OutcomeReport,
    latencyMs?: number,
  ): Promise<ReportResult | undefined> {
    if (!permit || permit === '0') return undefined;
    if (this.away) {
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
    try {
      const r = await this.unary<ReportResponse__Output>((options, done) => this.stub.Report(request, options, done));
      if (!this.reportsWorking) {
        this.reportsWorking = true;
        this.logger?.info('breakerd: reports are accepted again');
      }
      return { state: r.state, effect: r.effect };
    } catch (err) {
      this.counters.reportErrors++;
      if (this.reportsWorking) {
        this.reportsWorking = false;
        this.logger?.warn(`breakerd: report failed (${describe(err)}); counting report errors until one succeeds`);
      }
      return undefined;
    }
  }

  /**
   * Runs `fn` under the breaker: acquire; if refused, throw BreakerOpenError
   * without calling; else run it, measure it, report its classified outcome
   * (exactly once, OUTCOME_CANCELLED if classification itself throws) and
   * return its result or rethrow its error.
   */
  async guard<T>(dependency: string, fn: () => T | PromiseLike<T>, options: GuardOptions<T> = {}): Promise<T> {
    const decision = await this.acquire(dependency, options.attempt ?? 0);
    if (!decision.allowed) throw new BreakerOpenError(decision);
    const { settled } = await this.runPermitted(decision, fn, options.classify);
    return unwrap(settled);
  }

  /**
   * Calls `fn(attempt)` as a guard up to maxAttempts times, sleeping with
   * full-jitter backoff before each retry, and acquiring with `attempt > 0`
   * so breakerd's retry budget applies. Any refusal stops at once with
   * BreakerOpenError (no sleep, no further attempt); so does an outcome not
   * worth retrying (success, bad request, auth error, cancelled, soft
   * failure), returning or rethrowing that attempt's result. After the last
   * attempt its result or error is returned or rethrown.
   */
  async retry<T>(
    dependency: string,
    fn: (attempt: number) => T | PromiseLike<T>,
    options: RetryOptions<T> = {},
  ): Promise<T> {
    const { maxAttempts = 3, baseMs = 100, maxMs = 2000, classify } = options;
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
        await sleep(Math.random() * Math.min(maxMs, baseMs * 2 ** (attempt - 1)));
      }
      const decision = await this.acquire(dependency, attempt);
      if (!decision.allowed) throw new BreakerOpenError(decision);
      const { settled, report, result } = await this.runPermitted(decision, () => fn(attempt), classify);
      if (attempt + 1 >= maxAttempts || !Outcome.isRetryable(report)) return unwrap(settled);
      lastState = result?.state;
    }
  }

  /**
   * A fallback chain: acquireFirst over `dependencies`, then the granted
   * dependency's `fn(dependency)` as a guard. If that call fails (an outcome
   * worth retrying), the chain goes on with the dependencies after it. When
   * none is granted, throws the BreakerOpenError of the last answer; when the
   * last one's call fails, returns or rethrows what it gave.
   */
  async first<T>(
    dependencies: readonly string[],
    fn: (dependency: string) => T | PromiseLike<T>,
    options: FirstOptions<T> = {},
  ): Promise<T> {
    let remaining = [...dependencies];
    for (;;) {
      const decision = await this.acquireFirst(remaining);
      if (!decision.allowed) throw new BreakerOpenError(decision);
      const { settled, report } = await this.runPermitted(decision, () => fn(decision.dependency), options.classify);
      remaining = remaining.slice(remaining.indexOf(decision.dependency) + 1);
      if (!Outcome.isRetryable(report) || remaining.length === 0) return unwrap(settled);
    }
  }

  /** A snapshot of the counters. */
  stats(): ClientStats {
    return { ...this.counters };
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
   * (default 5000). Optional: the client works without it.
   */
  async ready(timeoutMs = 5000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    await new Promise<void>((resolve, reject) =>
      this.stub.waitForReady(deadline, (err) => (err ? reject(err) : resolve())),
    );
    // GetState of a name never used: NOT_FOUND, and nothing is created.
    await new Promise<void>((resolve) =>
      this.stub.GetState({ dependency: WARMUP_DEPENDENCY }, { deadline }, () => resolve()),
    );
  }

  /** Ends the Watch stream and the away probe, and closes the channel. Idempotent. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    clearTimeout(this.probeTimer);
    this.probeTimer = undefined;
    this.stub.close();
    await this.watcher?.close();
  }

  /** Runs a permitted call and reports it exactly once. */
  private async runPermitted<T>(
    decision: Decision,
    fn: () => T | PromiseLike<T>,
    classify: Classifier<T> | undefined,
  ): Promise<{ settled: Settled<T>; report: OutcomeReport; result: ReportResult | undefined }> {
    const started = performance.now();
    let settled: Settled<T>;
    try {
      settled = { ok: true, value: await fn() };
    } catch (error) {
      settled = { ok: false, error };
    }
    const latencyMs = performance.now() - started;
    let report: OutcomeReport = Outcome.CANCELLED;
    let result: ReportResult | undefined;
    try {
      report = classify?.(settled) ?? (settled.ok ? Outcome.SUCCESS : Outcome.fromError(settled.error));
    } finally {
      result = await this.report(decision.dependency, decision.permit, report, latencyMs);
    }
    return { settled, report, result };
  }

  /**
   * The fail-mode decision for an RPC error; INVALID_ARGUMENT is rethrown.
   * A timeout or UNAVAILABLE marks breakerd away.
   */
  private unreachable(dependency: string, err: unknown): Decision {
    const code = (err as { code?: unknown }).code;
    if (code === INVALID_ARGUMENT) throw err;
    if (!this.closed) {
      if (AWAY_CODES.has(code)) this.markAway(err);
      else this.noteSidecar(false, err);
    }
    return this.failDecision(dependency);
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
    if (this.sidecarReachable) {
      this.sidecarReachable = false;
      this.logger?.warn(
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
    if (this.sidecarReachable) return;
    this.sidecarReachable = true;
    this.logger?.info(`breakerd: ${this.target} is reachable again (${via} answered)`);
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
    if (reachable === this.sidecarReachable) return;
    this.sidecarReachable = reachable;
    if (reachable) this.logger?.info(`breakerd: ${this.target} is reachable again`);
    else this.logger?.warn(`breakerd: ${this.target} unreachable (${describe(err)}); failing ${this.failMode}`);
  }

  /** One unary RPC with the decision deadline, never wait-for-ready. */
  private unary<Res>(
    invoke: (options: grpc.CallOptions, done: (err: grpc.ServiceError | null, res?: Res) => void) => void,
  ): Promise<Res> {
    return new Promise((resolve, reject) =>
      invoke({ deadline: Date.now() + this.decisionTimeoutMs }, (err, res) => (err ? reject(err) : resolve(res!))),
    );
  }
}

function unwrap<T>(settled: Settled<T>): T {
  if (settled.ok) return settled.value;
  throw settled.error;
}

function describe(err: unknown): string {
  const e = err as { details?: unknown; message?: unknown };
  return String(e?.details || e?.message || err);
}

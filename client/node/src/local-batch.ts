// The books of local decisions (client/README.md, "Local decisions"): the
// grants and outcomes of calls decided in the client, the chain decisions
// made there and the decisions made without breakerd, sent to breakerd in
// ReportBatch requests, one at a time, off the caller's path.
import {
  encodeReportBatch, type BatchChain, type BatchDecisions, type BatchDependency, type BatchRequest, type Position,
} from './batch-encoding';
import type { ScheduleTimer } from './change-log';
import type { OutcomeReport } from './outcome';

export type { Position } from './batch-encoding';

/** How often a batch is sent while there is something to send, in ms (the default of `flushIntervalMs`). */
export const FLUSH_INTERVAL_MS = 5;
/** Outcomes in one request at most (breakerd refuses more); this many waiting are sent at once. */
export const MAX_BATCH_OUTCOMES = 1000;
/** Outcomes held and not yet acknowledged by breakerd, at most; past that they are dropped and counted. */
export const MAX_UNACKED_OUTCOMES = 10_000;
/** A request that fails is sent again, unchanged, at the next flush: this many sends in all. */
export const MAX_SENDS = 3;

/**
 * The grants and outcomes of one dependency at one generation (the Watch
 * event the client decided on) not yet put in a request. A call granted
 * locally keeps its tally, so its outcome counts at the generation of its
 * grant whatever the cache says by then.
 */
export class Tally {
  /** Grants not yet in a request. */
  grants = 0;
  /** Outcomes not yet in a request, as parallel arrays (no object per call). */
  reports: OutcomeReport[] = [];
  /** ms; NaN: none. */
  latencies: number[] = [];
  positions: (Position | undefined)[] = [];
  /** In its batcher's list of tallies with something to send. */
  queued = false;

  /** @param generation a uint64 in decimal. */
  constructor(
    readonly dependency: string,
    readonly generation: string,
  ) {}
}

/** Sends one encoded ReportBatchRequest with a timeout (ms); rejects when it fails. */
export type SendBatch = (request: Buffer, timeoutMs: number) => Promise<unknown>;

export interface LocalBatcherOptions {
  /** The request's client_id: fixed for the client's life. */
  clientId: string;
  /** Default FLUSH_INTERVAL_MS. */
  flushIntervalMs?: number;
  /** Each request's deadline, in ms (10 x the decision timeout). */
  timeoutMs: number;
  send: SendBatch;
  /** Default MAX_UNACKED_OUTCOMES. */
  maxUnacked?: number;
  /** The flush timer; default setTimeout, unref()ed. */
  schedule?: ScheduleTimer;
  /** Runs a task soon, off the caller's call; default setImmediate, unref()ed. */
  soon?: (task: () => void) => void;
}

/** A request built once and sent up to MAX_SENDS times, unchanged. */
interface Built {
  readonly request: Buffer;
  readonly outcomes: number;
  sends: number;
}

interface DecisionCounts {
  refused_local: number;
  fail_open: number;
  fail_closed: number;
}

const defaultSchedule: ScheduleTimer = (task, delayMs) => {
  const timer = setTimeout(task, delayMs);
  timer.unref();
  return () => clearTimeout(timer);
};

const defaultSoon = (task: () => void): void => {
  setImmediate(task).unref();
};

/**
 * Collects what the client decided and saw without breakerd and sends it in
 * ReportBatch requests: every flush interval while there is something to
 * send (no timer runs otherwise), at once when MAX_BATCH_OUTCOMES outcomes
 * wait, and at close(). One request is in flight at a time; a failed one is
 * sent again unchanged (same sequence: breakerd applies it once) at the next
 * flush, MAX_SENDS times in all, then dropped. While paused (breakerd away)
 * nothing is sent, new outcomes are dropped, and the decision counters keep
 * counting, to go in the first request after resume(). Every dropped outcome
 * is counted in `dropped`. Nothing here blocks or throws at the caller.
 *
 * Not thread-safe: everything runs on the client's event loop.
 */
export class LocalBatcher {
  /** Outcomes dropped: past the bound, while paused, after close(), or in a request dropped after MAX_SENDS. */
  dropped = 0;

  private readonly clientId: string;
  private readonly flushIntervalMs: number;
  private readonly timeoutMs: number;
  private readonly sendBatch: SendBatch;
  private readonly maxUnacked: number;
  private readonly schedule: ScheduleTimer;
  private readonly soon: (task: () => void) => void;

  /** Tallies with something not yet in a request, in the order they got it. */
  private dirty: Tally[] = [];
  private readonly decisions = new Map<string, DecisionCounts>();
  /** Chain decisions by chain and tier. */
  private readonly chains = new Map<string, { chain: string; tier: number; count: number }>();
  /** Outcomes in tallies (not yet in a request). */
  private unbuilt = 0;
  /** Outcomes held in tallies and in requests not yet acknowledged. */
  private unacked = 0;
  private sequence = 0;
  /** The request on the wire, and when it settles. */
  private inFlight: Promise<void> | undefined;
  /** A request that failed, to be sent again at the next flush. */
  private retry: Built | undefined;
  private cancelTimer: (() => void) | undefined;
  private soonPending = false;
  private paused = false;
  private closing = false;
  private closed = false;

  constructor(options: LocalBatcherOptions) {
    this.clientId = options.clientId;
    this.flushIntervalMs = options.flushIntervalMs ?? FLUSH_INTERVAL_MS;
    if (!(this.flushIntervalMs > 0)) throw new RangeError(`flushIntervalMs must be > 0, got ${this.flushIntervalMs}`);
    this.timeoutMs = options.timeoutMs;
    this.sendBatch = options.send;
    this.maxUnacked = options.maxUnacked ?? MAX_UNACKED_OUTCOMES;
    this.schedule = options.schedule ?? defaultSchedule;
    this.soon = options.soon ?? defaultSoon;
  }

  /** A first attempt granted in the client on `tally`'s generation. */
  grant(tally: Tally): void {
    tally.grants++;
    if (!tally.queued) this.enqueue(tally);
  }

  /**
   * The outcome of a call granted on `tally`, with its latency (NaN: none)
   * and, for a named chain, its position. Dropped (counted) past the bound,
   * while paused and after close().
   */
  outcome(tally: Tally, report: OutcomeReport, latencyMs: number, position: Position | undefined): void {
    if (this.paused || this.closed || this.unacked >= this.maxUnacked) {
      this.dropped++;
      return;
    }
    tally.reports.push(report);
    tally.latencies.push(latencyMs);
    tally.positions.push(position);
    this.unacked++;
    if (!tally.queued) this.enqueue(tally);
    if (++this.unbuilt >= MAX_BATCH_OUTCOMES && this.inFlight === undefined && !this.soonPending && !this.closing) {
      this.soonPending = true;
      this.soon(() => {
        this.soonPending = false;
        this.flush();
      });
    }
  }

  /** A call refused from the Watch cache. */
  refusedLocal(dependency: string): void {
    this.countsOf(dependency).refused_local++;
  }

  /** A call allowed (fail_open) or refused (fail_closed) by the fail mode, without breakerd. */
  failed(dependency: string, open: boolean): void {
    const counts = this.countsOf(dependency);
    if (open) counts.fail_open++;
    else counts.fail_closed++;
  }

  /** A named chain's candidate at `tier` granted in the client. */
  chainGrant(chain: string, tier: number): void {
    const key = `${tier} ${chain}`;
    const held = this.chains.get(key);
    if (held) held.count++;
    else this.chains.set(key, { chain, tier, count: 1 });
    this.wake();
  }

  /** breakerd is away: send nothing, drop new outcomes, keep counting decisions. */
  pause(): void {
    this.paused = true;
    this.cancelTimer?.();
    this.cancelTimer = undefined;
  }

  /** breakerd answers again: what waited goes in the next flush. */
  resume(): void {
    if (!this.paused) return;
    this.paused = false;
    this.wake();
  }

  /**
   * Sends what is left, a request at a time, for at most `budgetMs`; then
   * counts every outcome not acknowledged in `dropped`. Later outcomes are
   * dropped. Idempotent.
   */
  async close(budgetMs: number): Promise<void> {
    if (this.closing) return;
    this.closing = true;
    this.cancelTimer?.();
    this.cancelTimer = undefined;
    let timedOut = false;
    let wakeTimeout: (() => void) | undefined;
    const timeout = new Promise<void>((resolve) => {
      wakeTimeout = resolve;
    });
    const cancelBudget = this.schedule(() => {
      timedOut = true;
      wakeTimeout!();
    }, budgetMs);
    try {
      while (!timedOut && !this.paused) {
        if (this.inFlight === undefined) {
          const next = this.retry ?? this.build();
          if (next === undefined) break;
          this.send(next);
        }
        await Promise.race([this.inFlight, timeout]);
      }
    } finally {
      cancelBudget();
      this.closed = true;
      this.dropped += this.unacked;
      this.unacked = 0;
      this.unbuilt = 0;
      this.retry = undefined;
      this.dirty = [];
      this.decisions.clear();
      this.chains.clear();
    }
  }

  /** Something to send and nothing sent yet: flush at the next interval. */
  private wake(): void {
    if (this.cancelTimer !== undefined || this.inFlight !== undefined || this.paused || this.closing) return;
    this.cancelTimer = this.schedule(() => {
      this.cancelTimer = undefined;
      this.flush();
    }, this.flushIntervalMs);
  }

  private enqueue(tally: Tally): void {
    tally.queued = true;
    this.dirty.push(tally);
    if (this.cancelTimer === undefined) this.wake();
  }

  private countsOf(dependency: string): DecisionCounts {
    let counts = this.decisions.get(dependency);
    if (counts === undefined) {
      counts = { refused_local: 0, fail_open: 0, fail_closed: 0 };
      this.decisions.set(dependency, counts);
      this.wake();
    }
    return counts;
  }

  /** Sends the failed request again, else a new one of what waits, unless one is on the wire. */
  private flush(): void {
    if (this.inFlight !== undefined || this.paused || this.closing) return;
    const next = this.retry ?? this.build();
    if (next !== undefined) this.send(next);
  }

  private send(built: Built): void {
    built.sends++;
    this.retry = undefined;
    this.inFlight = this.sendBatch(built.request, this.timeoutMs).then(
      () => this.settled(built, true),
      () => this.settled(built, false),
    );
  }

  private settled(built: Built, ok: boolean): void {
    this.inFlight = undefined;
    if (this.closed) return; // close() counted it already
    if (ok || built.sends >= MAX_SENDS) {
      this.unacked -= built.outcomes;
      if (!ok) this.dropped += built.outcomes;
    } else {
      this.retry = built;
    }
    if (this.closing || this.paused) return; // close() goes on by itself; resume() wakes
    if (this.retry === undefined && this.unbuilt >= MAX_BATCH_OUTCOMES) this.flush();
    else if (this.retry !== undefined || this.dirty.length > 0 || this.decisions.size > 0 || this.chains.size > 0) this.wake();
  }

  /** A new request of what waits (at most MAX_BATCH_OUTCOMES outcomes), or undefined when nothing does. */
  private build(): Built | undefined {
    if (this.dirty.length === 0 && this.decisions.size === 0 && this.chains.size === 0) return undefined;
    const dependencies: BatchDependency[] = [];
    const rest: Tally[] = [];
    let room = MAX_BATCH_OUTCOMES;
    for (const tally of this.dirty) {
      const taken = Math.min(room, tally.reports.length);
      room -= taken;
      if (tally.grants === 0 && taken === 0) {
        rest.push(tally); // outcomes waiting for room in the next request
        continue;
      }
      let { reports, latencies, positions } = tally;
      if (taken === reports.length) {
        tally.reports = [];
        tally.latencies = [];
        tally.positions = [];
      } else {
        reports = reports.splice(0, taken);
        latencies = latencies.splice(0, taken);
        positions = positions.splice(0, taken);
      }
      dependencies.push({ dependency: tally.dependency, generation: tally.generation, grants: tally.grants, reports, latencies, positions });
      tally.grants = 0;
      if (tally.reports.length > 0) rest.push(tally);
      else tally.queued = false;
    }
    this.dirty = rest;
    const outcomes = MAX_BATCH_OUTCOMES - room;
    this.unbuilt -= outcomes;
    const decisions: BatchDecisions[] = [];
    for (const [dependency, counts] of this.decisions) decisions.push({ dependency, ...counts });
    this.decisions.clear();
    const chains: BatchChain[] = [...this.chains.values()];
    this.chains.clear();
    this.sequence++;
    const request: BatchRequest = { clientId: this.clientId, sequence: this.sequence, dependencies, chains, decisions };
    return { request: encodeReportBatch(request), outcomes, sends: 0 };
  }
}

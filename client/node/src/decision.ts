// What Acquire answers, and the errors thrown instead of an answer.
import type { RejectReason__Output } from './generated/breakerd/v1/RejectReason';
import type { State__Output } from './generated/breakerd/v1/State';

/** A breaker state, e.g. `'STATE_OPEN'`. */
export type StateName = State__Output;
/** Why an Acquire was refused, e.g. `'REJECT_REASON_OPEN'`. */
export type RejectReasonName = RejectReason__Output;

/** Who answered an Acquire. */
export const DecisionSource = {
  /** breakerd answered. */
  SIDECAR: 'SIDECAR',
  /** Refused from the Watch cache, with no RPC. */
  LOCAL: 'LOCAL',
  /** breakerd unreachable or slower than decisionTimeoutMs; allowed, permit "0". */
  FAIL_OPEN: 'FAIL_OPEN',
  /** Same trouble with failMode 'closed'; refused. */
  FAIL_CLOSED: 'FAIL_CLOSED',
} as const;
export type DecisionSource = (typeof DecisionSource)[keyof typeof DecisionSource];

/** The answer to "may I call this dependency now?". Immutable. */
export interface Decision {
  readonly allowed: boolean;
  /** Opaque (a uint64 in decimal); pass it to report(). "0" when there is none. */
  readonly permit: string;
  /** True when this call is the half-open probe: its result decides. */
  readonly probe: boolean;
  readonly state: StateName;
  /** Why it was refused; REJECT_REASON_UNSPECIFIED when allowed. */
  readonly reason: RejectReasonName;
  /** When refused: how long until trying again is useful. */
  readonly retryAfterMs: number;
  /** The dependency asked about (for acquireFirst: the one granted, or the last refused). */
  readonly dependency: string;
  readonly source: DecisionSource;
  /**
   * For a permit breakerd granted through a named fallback chain
   * (acquireFirst with `chain`): the chain's name and the granted
   * dependency's position in the caller's full chain (0-based). Pass the
   * decision to report() so that its Report carries both. Absent otherwise.
   */
  readonly chain?: string;
  readonly tier?: number;
}

/**
 * Thrown by guard, retry and first when the breaker refuses: the call was
 * not made. Carries the refusing decision's reason, retry-after and source.
 */
export class BreakerOpenError extends Error {
  override readonly name = 'BreakerOpenError';
  readonly dependency: string;
  readonly reason: RejectReasonName;
  readonly retryAfterMs: number;
  readonly source: DecisionSource;
  readonly state: StateName;

  constructor(readonly decision: Decision) {
    super(
      `breaker for "${decision.dependency}" refused the call: ${decision.reason} ` +
        `(${decision.source}, retry after ${Math.round(decision.retryAfterMs)} ms)`,
    );
    this.dependency = decision.dependency;
    this.reason = decision.reason;
    this.retryAfterMs = decision.retryAfterMs;
    this.source = decision.source;
    this.state = decision.state;
  }
}

/**
 * Thrown by acquire, acquireFirst, guard, retry, first and ready once the
 * client is closed: nothing is sent to breakerd, nothing is counted as a
 * fail-open decision, and a guarded function is not called. (report() after
 * close never throws: the report is dropped and counted in reportErrors.)
 */
export class ClientClosedError extends Error {
  override readonly name = 'ClientClosedError';

  /** @param operation the method called after close(), e.g. `'acquire'`. */
  constructor(readonly operation: string) {
    super(`breakerd client is closed: ${operation}() after close()`);
  }
}

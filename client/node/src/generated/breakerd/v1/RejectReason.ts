// Original file: proto/breakerd/v1/breaker.proto

/**
 * Why an Acquire was (or, in shadow mode, would have been) rejected.
 */
export const RejectReason = {
  REJECT_REASON_UNSPECIFIED: 'REJECT_REASON_UNSPECIFIED',
  /**
   * The breaker is open and its cooldown is running; see retry_after.
   */
  REJECT_REASON_OPEN: 'REJECT_REASON_OPEN',
  /**
   * The breaker is half-open and another caller holds the probe.
   */
  REJECT_REASON_PROBE_IN_FLIGHT: 'REJECT_REASON_PROBE_IN_FLIGHT',
  /**
   * attempt > 0 and the dependency's retry budget is spent.
   */
  REJECT_REASON_RETRY_BUDGET: 'REJECT_REASON_RETRY_BUDGET',
  /**
   * An operator forced the breaker open through Admin.
   */
  REJECT_REASON_FORCED_OPEN: 'REJECT_REASON_FORCED_OPEN',
  /**
   * Gentle recovery (policy recovery.ramp): the breaker closed recently and
   * admits only a rising share of first attempts (see
   * BreakerStatus.admit_share); this one is past the share, or it is a
   * retry, which a ramping breaker never allows.
   */
  REJECT_REASON_RAMP: 'REJECT_REASON_RAMP',
} as const;

/**
 * Why an Acquire was (or, in shadow mode, would have been) rejected.
 */
export type RejectReason =
  | 'REJECT_REASON_UNSPECIFIED'
  | 0
  /**
   * The breaker is open and its cooldown is running; see retry_after.
   */
  | 'REJECT_REASON_OPEN'
  | 1
  /**
   * The breaker is half-open and another caller holds the probe.
   */
  | 'REJECT_REASON_PROBE_IN_FLIGHT'
  | 2
  /**
   * attempt > 0 and the dependency's retry budget is spent.
   */
  | 'REJECT_REASON_RETRY_BUDGET'
  | 3
  /**
   * An operator forced the breaker open through Admin.
   */
  | 'REJECT_REASON_FORCED_OPEN'
  | 4
  /**
   * Gentle recovery (policy recovery.ramp): the breaker closed recently and
   * admits only a rising share of first attempts (see
   * BreakerStatus.admit_share); this one is past the share, or it is a
   * retry, which a ramping breaker never allows.
   */
  | 'REJECT_REASON_RAMP'
  | 5

/**
 * Why an Acquire was (or, in shadow mode, would have been) rejected.
 */
export type RejectReason__Output = typeof RejectReason[keyof typeof RejectReason]

package io.breakerd.client;

/** Why a call was refused; {@link #NONE} when it was allowed or breakerd did not say. */
public enum RejectReason {
  /** Not refused, or refused without a breaker reason (fail-closed). */
  NONE,
  /** The breaker is open and its cooldown is running; see {@link Decision#retryAfter()}. */
  OPEN,
  /** The breaker is half-open and another caller holds the probe. */
  PROBE_IN_FLIGHT,
  /** A retry ({@code attempt > 0}) was refused: the dependency's retry budget is spent. */
  RETRY_BUDGET,
  /** An operator forced the breaker open. */
  FORCED_OPEN,
  /**
   * Gentle recovery: the breaker closed recently and admits a rising share of first attempts and
   * no retry; {@link Decision#retryAfter()} may be zero.
   */
  RAMP
}

package io.breakerd.client;

/**
 * The state of one breaker, as breakerd reports it.
 *
 * <p>{@link #UNKNOWN} is used when breakerd did not answer (a fail-open or
 * fail-closed decision) or sent a state this client does not know.
 */
public enum State {
  /** Not known: breakerd did not answer, or the value is not recognised. */
  UNKNOWN,
  /** Calls flow; outcomes are counted toward the trip rules. */
  CLOSED,
  /** Calls are refused until the cooldown ends. */
  OPEN,
  /** The cooldown has ended; one probe call decides. */
  HALF_OPEN,
  /** An operator forced the breaker open: every call is refused. */
  FORCED_OPEN,
  /** An operator forced the breaker closed: every call is allowed. */
  FORCED_CLOSED
}

package io.breakerd.client;

import java.time.Duration;

/**
 * A call was refused: the breaker is open (or half-open with its probe out,
 * the retry budget is spent, an operator forced it open), or breakerd could not
 * answer and the fail mode is closed. The guarded call was not made.
 *
 * <p>For speed (an open breaker may refuse many calls) the exception carries no
 * stack trace.
 */
public final class BreakerOpenException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  private final transient Decision decision;

  /** Wraps a refusal. */
  public BreakerOpenException(Decision decision) {
    super(message(decision), null, true, false);
    if (decision.allowed()) {
      throw new IllegalArgumentException("decision was allowed");
    }
    this.decision = decision;
  }

  /** The refusal. */
  public Decision decision() {
    return decision;
  }

  /** The dependency refused (for a fallback chain, may be empty: none was granted). */
  public String dependency() {
    return decision.dependency();
  }

  /** Why breakerd (or the Watch cache) refused; {@link RejectReason#NONE} for fail-closed. */
  public RejectReason reason() {
    return decision.reason();
  }

  /** How long until trying again is useful; {@link Duration#ZERO} when not known. */
  public Duration retryAfter() {
    return decision.retryAfter();
  }

  /** Who refused: {@code SIDECAR}, {@code LOCAL} or {@code FAIL_CLOSED}. */
  public Decision.Source source() {
    return decision.source();
  }

  private static String message(Decision d) {
    String what = d.dependency().isEmpty() ? "every dependency" : "'" + d.dependency() + "'";
    return "breaker refused " + what + ": reason " + d.reason() + ", state " + d.state()
        + ", retry after " + d.retryAfter().toMillis() + " ms, source " + d.source();
  }
}

package io.breakerd.client;

import java.time.Duration;
import java.util.Objects;

/**
 * The answer to an Acquire: may the caller call {@link #dependency()} now?
 *
 * <p>Immutable and thread-safe.
 *
 * @param allowed whether the call may be made
 * @param permit the opaque permit to pass back in the Report; 0 when refused or
 *     when breakerd did not answer (a Report with permit 0 is never sent)
 * @param probe whether this call is the half-open probe whose result decides
 * @param state the breaker's state ({@link State#UNKNOWN} when breakerd did not answer)
 * @param reason why the call was refused ({@link RejectReason#NONE} when allowed)
 * @param retryAfter when refused, how long until trying again is useful
 *     ({@link Duration#ZERO} when not known); never null
 * @param dependency the dependency asked for; for a fallback chain, the one granted
 *     (empty when none was granted)
 * @param source who decided
 */
public record Decision(
    boolean allowed,
    long permit,
    boolean probe,
    State state,
    RejectReason reason,
    Duration retryAfter,
    String dependency,
    Source source) {

  /** Who made a {@link Decision}. */
  public enum Source {
    /** breakerd answered. */
    SIDECAR,
    /** Refused by the client from its Watch cache, without asking breakerd. */
    LOCAL,
    /** breakerd was unreachable or slower than the decision timeout: allowed, permit 0. */
    FAIL_OPEN,
    /** breakerd was unreachable or slower than the decision timeout, fail mode closed: refused. */
    FAIL_CLOSED
  }

  /** Checks that no component is null; a negative {@code retryAfter} becomes zero. */
  public Decision {
    Objects.requireNonNull(state, "state");
    Objects.requireNonNull(reason, "reason");
    Objects.requireNonNull(retryAfter, "retryAfter");
    Objects.requireNonNull(dependency, "dependency");
    Objects.requireNonNull(source, "source");
    if (retryAfter.isNegative()) {
      retryAfter = Duration.ZERO;
    }
  }
}

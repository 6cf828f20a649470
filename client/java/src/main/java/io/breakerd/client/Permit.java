package io.breakerd.client;

import java.time.Duration;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * Permission to make one call, from an allowed Acquire. Report how the call went
 * exactly once ({@link #success()}, {@link #report(Outcome)}, ...); closing a
 * permit that was not reported reports {@link Outcome.Kind#CANCELLED} (neutral),
 * so use it in try-with-resources:
 *
 * <pre>{@code
 * try (Permit p = client.acquire("payments/api")) {
 *   var response = http.send(request, BodyHandlers.ofString());
 *   p.report(Outcome.fromHttpStatus(response.statusCode()));
 * }
 * }</pre>
 *
 * <p>The latency reported is the time from the Acquire to the report. Thread-safe:
 * of concurrent reports exactly one is sent. A Report's failure never reaches the
 * caller (it is counted in {@link Stats#reportErrors()}).
 */
public final class Permit implements AutoCloseable {
  private final BreakerdClient client;
  private final Decision decision;
  private final long startNanos;
  private final AtomicBoolean reported = new AtomicBoolean();

  Permit(BreakerdClient client, Decision decision) {
    this.client = client;
    this.decision = decision;
    this.startNanos = System.nanoTime();
  }

  /** The allowed decision this permit came from. */
  public Decision decision() {
    return decision;
  }

  /** The dependency to call (for a fallback chain: the one granted). */
  public String dependency() {
    return decision.dependency();
  }

  /** Whether this call is the half-open probe whose result decides the breaker. */
  public boolean isProbe() {
    return decision.probe();
  }

  /** Whether this permit was reported (or closed). */
  public boolean isReported() {
    return reported.get();
  }

  /** Reports a success. */
  public void success() {
    report(Outcome.success());
  }

  /** Reports the call's error, classified by {@link Outcome#fromThrowable(Throwable)}. */
  public void failure(Throwable error) {
    report(Outcome.fromThrowable(error));
  }

  /** Reports {@code outcome} with the time since the Acquire as latency. */
  public void report(Outcome outcome) {
    report(outcome, Duration.ofNanos(System.nanoTime() - startNanos));
  }

  /**
   * Reports {@code outcome} with an explicit latency.
   *
   * @throws IllegalStateException if this permit was already reported
   */
  public void report(Outcome outcome, Duration latency) {
    if (!reported.compareAndSet(false, true)) {
      throw new IllegalStateException("permit for '" + dependency() + "' was already reported");
    }
    client.report(decision, outcome, latency);
  }

  /** Reports {@link Outcome.Kind#CANCELLED} unless the permit was already reported. */
  @Override
  public void close() {
    if (reported.compareAndSet(false, true)) {
      Duration latency = Duration.ofNanos(System.nanoTime() - startNanos);
      client.report(decision, Outcome.cancelled(), latency);
    }
  }
}

package io.breakerd.client;

import java.time.Duration;
import java.util.Objects;
import java.util.concurrent.Callable;

/**
 * Permission to make one call, from an allowed Acquire. Make the call through
 * {@link #call(Callable)}, so that an exception it throws is reported by its
 * class (a {@link java.net.ConnectException} counts against the breaker, as in
 * the guard {@link BreakerdClient#call(String, Callable)}), and report what a
 * returned result says; use it in try-with-resources:
 *
 * <pre>{@code
 * try (Permit p = client.acquire("payments/api")) {      // BreakerOpenException: don't call
 *   var response = p.call(() -> http.send(request, BodyHandlers.ofString())); // throws: reported
 *   p.report(Outcome.fromHttpStatus(response.statusCode()));  // returned: what it says
 * }
 * }</pre>
 *
 * <p>Each permit is reported exactly once: by {@link #success()},
 * {@link #failure(Throwable)} or {@link #report(Outcome)}; by {@link #call(Callable)}
 * when the call throws; and by {@link #close()}, which reports a success if a
 * {@link #call(Callable) call} returned and nothing else was reported, and
 * {@link Outcome.Kind#CANCELLED} (neutral) if no call ran. Close cannot see an
 * exception thrown past it: a call made outside {@link #call(Callable)} whose
 * exception is not passed to {@link #failure(Throwable)} is reported CANCELLED
 * and does not count against the breaker.
 *
 * <p>The latency reported is the time from the Acquire to the end of
 * {@link #call(Callable)}, or, without it, to the report. Reports never wait
 * on the thread's interrupt flag (an interrupted thread still reports). Thread-safe:
 * of concurrent reports exactly one is sent. A Report's failure never reaches the
 * caller (it is counted in {@link Stats#reportErrors()}). A permit granted
 * through a named fallback chain ({@link BreakerdClient#acquireFirst(String,
 * java.util.List, int)}) reports its chain and tier with the outcome.
 */
public final class Permit implements AutoCloseable {
  private enum Stage {
    /** Acquired; nothing ran, nothing reported. */
    NEW,
    /** {@link #call(Callable)} is running. */
    CALLING,
    /** {@link #call(Callable)} returned; a success unless something else is reported. */
    RETURNED,
    /** The Report was sent (or there was nothing to send). */
    REPORTED
  }

  // Constant after construction.
  private final BreakerdClient client;
  private final Decision decision;
  /** Null unless granted through a named fallback chain. */
  private final ChainTier chainTier;
  private final long startNanos;

  private final Object lock = new Object();
  private Stage stage = Stage.NEW; // guarded by lock
  private long callNanos; // guarded by lock: the returned call's latency (stage RETURNED)

  Permit(BreakerdClient client, Decision decision) {
    this(client, decision, null);
  }

  /** {@code chainTier}: where a permit granted through a named chain sits in it, else null. */
  Permit(BreakerdClient client, Decision decision, ChainTier chainTier) {
    this.client = client;
    this.decision = decision;
    this.chainTier = chainTier;
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
    synchronized (lock) {
      return stage == Stage.REPORTED;
    }
  }

  /**
   * Makes the call this permit allows. If it throws, the error is reported at
   * once, classified by {@link Outcome#fromThrowable(Throwable)} like the guard
   * does (CANCELLED if the thread is left interrupted: the caller gave up), and
   * rethrown. If it returns, its result is returned and nothing is
   * sent yet: report what the result says (e.g. {@link Outcome#fromHttpStatus(int)}),
   * or let {@link #close()} report a success. If the thread is interrupted
   * before the call starts (e.g. its task was cancelled during the Acquire),
   * the call is not made: the permit is reported CANCELLED and
   * {@link InterruptedException} is thrown.
   *
   * @return what {@code call} returned
   * @throws Exception what {@code call} threw (after it was reported)
   * @throws IllegalStateException if this permit was already reported or already made a call
   */
  public <T> T call(Callable<T> call) throws Exception {
    Objects.requireNonNull(call, "call");
    synchronized (lock) {
      if (stage != Stage.NEW) {
        throw new IllegalStateException("permit for '" + dependency() + "' was already "
            + (stage == Stage.REPORTED ? "reported" : "used for a call"));
      }
      stage = Stage.CALLING;
    }
    if (Thread.interrupted()) {
      finish(Outcome.cancelled(), System.nanoTime() - startNanos);
      throw interruptedBeforeCall(this);
    }
    T value;
    try {
      value = call.call();
    } catch (Throwable t) {
      finish(errorOutcome(Classifier.standard(), t), System.nanoTime() - startNanos);
      throw t;
    }
    synchronized (lock) {
      if (stage == Stage.CALLING) {
        stage = Stage.RETURNED;
        callNanos = System.nanoTime() - startNanos;
      }
    }
    return value;
  }

  /** Reports a success. */
  public void success() {
    report(Outcome.success());
  }

  /** Reports the call's error, classified by {@link Outcome#fromThrowable(Throwable)}. */
  public void failure(Throwable error) {
    report(Outcome.fromThrowable(error));
  }

  /**
   * Reports {@code outcome}; the latency is the returned {@link #call(Callable)
   * call}'s, else the time since the Acquire.
   *
   * @throws IllegalStateException if this permit was already reported
   */
  public void report(Outcome outcome) {
    long latency;
    synchronized (lock) {
      latency = stage == Stage.RETURNED ? callNanos : System.nanoTime() - startNanos;
    }
    report(outcome, Duration.ofNanos(latency));
  }

  /**
   * Reports {@code outcome} with an explicit latency.
   *
   * @throws IllegalStateException if this permit was already reported
   */
  public void report(Outcome outcome, Duration latency) {
    Objects.requireNonNull(outcome, "outcome");
    Objects.requireNonNull(latency, "latency");
    synchronized (lock) {
      if (stage == Stage.REPORTED) {
        throw new IllegalStateException("permit for '" + dependency() + "' was already reported");
      }
      stage = Stage.REPORTED;
    }
    client.report(decision, chainTier, outcome, latency);
  }

  /**
   * Reports unless the permit was already reported: a success if a
   * {@link #call(Callable) call} returned, else {@link Outcome.Kind#CANCELLED}.
   */
  @Override
  public void close() {
    Stage was;
    long latency;
    synchronized (lock) {
      was = stage;
      if (was == Stage.REPORTED) {
        return;
      }
      stage = Stage.REPORTED;
      latency = was == Stage.RETURNED ? callNanos : System.nanoTime() - startNanos;
    }
    Outcome outcome = was == Stage.RETURNED ? Outcome.success() : Outcome.cancelled();
    client.report(decision, chainTier, outcome, Duration.ofNanos(latency));
  }

  /** Sends {@code outcome} unless a report got there first (e.g. close from another thread). */
  private void finish(Outcome outcome, long latencyNanos) {
    synchronized (lock) {
      if (stage == Stage.REPORTED) {
        return;
      }
      stage = Stage.REPORTED;
    }
    client.report(decision, chainTier, outcome, Duration.ofNanos(latencyNanos));
  }

  /**
   * The outcome of a call that threw {@code error}: CANCELLED if it left its
   * thread interrupted (its caller was cancelled, whatever the library made of
   * the interrupt, e.g. gRPC's CANCELLED or an {@code InterruptedIOException}),
   * else what {@code classifier} says.
   */
  static Outcome errorOutcome(Classifier<?> classifier, Throwable error) {
    return Thread.currentThread().isInterrupted() ? Outcome.cancelled() : classifier.onError(error);
  }

  /** What a call not made because its thread was interrupted throws. */
  static InterruptedException interruptedBeforeCall(Permit permit) {
    return new InterruptedException("interrupted before the call to '" + permit.dependency()
        + "' started (the permit was reported CANCELLED)");
  }
}

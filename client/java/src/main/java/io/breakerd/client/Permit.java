package io.breakerd.client;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
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
 *
 * <p>A permit granted in the client (local decisions: source
 * {@link Decision.Source#LOCAL}, permit 0) is reported the same way; its
 * outcome goes into the client's next ReportBatch and the report returns at
 * once, with no RPC (after {@link BreakerdClient#close()}, or while breakerd is
 * away, it is dropped and counted in {@link Stats#droppedOutcomes()}).
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
  /** Null unless granted locally: where its outcome is batched. */
  private final LocalBatches.Ledger ledger;
  private final long startNanos;

  /** Changed only by compare-and-set ({@link #STAGE}): no lock on the guards' hot path. */
  private volatile Stage stage = Stage.NEW;
  /** The returned call's latency: written before stage becomes RETURNED, read after. */
  private long callNanos;

  private static final VarHandle STAGE;

  static {
    try {
      STAGE = MethodHandles.lookup().findVarHandle(Permit.class, "stage", Stage.class);
    } catch (ReflectiveOperationException e) {
      throw new ExceptionInInitializerError(e);
    }
  }

  Permit(BreakerdClient client, Decision decision) {
    this(client, decision, null, null);
  }

  /**
   * {@code chainTier}: where a permit granted through a named chain sits in
   * it, else null; {@code ledger}: where a local grant's outcome goes, else null.
   */
  Permit(BreakerdClient client, Decision decision, ChainTier chainTier,
      LocalBatches.Ledger ledger) {
    this.client = client;
    this.decision = decision;
    this.chainTier = chainTier;
    this.ledger = ledger;
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
    return stage == Stage.REPORTED;
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
    if (!STAGE.compareAndSet(this, Stage.NEW, Stage.CALLING)) {
      throw new IllegalStateException("permit for '" + dependency() + "' was already "
          + (stage == Stage.REPORTED ? "reported" : "used for a call"));
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
    callNanos = System.nanoTime() - startNanos;
    STAGE.compareAndSet(this, Stage.CALLING, Stage.RETURNED); // unless reported meanwhile
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
    Objects.requireNonNull(outcome, "outcome");
    Stage was;
    long latency;
    do {
      was = stage;
      if (was == Stage.REPORTED) {
        throw alreadyReported();
      }
      latency = was == Stage.RETURNED ? callNanos : System.nanoTime() - startNanos;
    } while (!STAGE.compareAndSet(this, was, Stage.REPORTED));
    client.report(decision, chainTier, ledger, outcome, latency);
  }

  /**
   * Reports {@code outcome} with an explicit latency.
   *
   * @throws IllegalStateException if this permit was already reported
   */
  public void report(Outcome outcome, Duration latency) {
    Objects.requireNonNull(outcome, "outcome");
    Objects.requireNonNull(latency, "latency");
    if (STAGE.getAndSet(this, Stage.REPORTED) == Stage.REPORTED) {
      throw alreadyReported();
    }
    client.report(decision, chainTier, ledger, outcome, latency.toNanos());
  }

  private IllegalStateException alreadyReported() {
    return new IllegalStateException("permit for '" + dependency() + "' was already reported");
  }

  /**
   * Reports unless the permit was already reported: a success if a
   * {@link #call(Callable) call} returned, else {@link Outcome.Kind#CANCELLED}.
   */
  @Override
  public void close() {
    if (stage == Stage.REPORTED) {
      return; // the common case after a guarded call: no atomic write
    }
    Stage was = (Stage) STAGE.getAndSet(this, Stage.REPORTED);
    if (was == Stage.REPORTED) {
      return;
    }
    long latency = was == Stage.RETURNED ? callNanos : System.nanoTime() - startNanos;
    Outcome outcome = was == Stage.RETURNED ? Outcome.success() : Outcome.cancelled();
    client.report(decision, chainTier, ledger, outcome, latency);
  }

  /** Sends {@code outcome} unless a report got there first (e.g. close from another thread). */
  private void finish(Outcome outcome, long latencyNanos) {
    if (STAGE.getAndSet(this, Stage.REPORTED) == Stage.REPORTED) {
      return;
    }
    client.report(decision, chainTier, ledger, outcome, latencyNanos);
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

package io.breakerd.client;

import io.breakerd.v1.AcquireFirstRequest;
import io.breakerd.v1.AcquireFirstResponse;
import io.breakerd.v1.AcquireRequest;
import io.breakerd.v1.AcquireResponse;
import io.breakerd.v1.BreakerGrpc;
import io.breakerd.v1.GetStateRequest;
import io.breakerd.v1.ReportRequest;
import io.grpc.ConnectivityState;
import io.grpc.Grpc;
import io.grpc.InsecureChannelCredentials;
import io.grpc.ManagedChannel;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.health.v1.HealthCheckRequest;
import io.grpc.health.v1.HealthCheckResponse;
import io.grpc.health.v1.HealthGrpc;
import io.grpc.stub.StreamObserver;
import java.lang.System.Logger.Level;
import java.lang.reflect.UndeclaredThrowableException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.Optional;
import java.util.concurrent.Callable;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.LongAdder;

/**
 * A client of the breakerd sidecar: ask before each call to a dependency, report
 * how it went.
 *
 * <pre>{@code
 * try (BreakerdClient breakerd = BreakerdClient.builder().target("127.0.0.1:50051").build()) {
 *   String body = breakerd.call("payments/api", () -> fetch());   // guard
 *   try (Permit p = breakerd.acquire("search/api")) {               // by hand
 *     HttpResponse<String> r = p.call(() -> search());   // an exception is reported by its class
 *     p.report(Outcome.fromHttpStatus(r.statusCode()));
 *   }
 * }
 * }</pre>
 *
 * <p>Build one per process and share it: it is thread-safe and owns one gRPC
 * channel and (with {@code watch} on) one Watch stream whose events let it
 * refuse calls to open breakers locally, without an RPC (never to a breaker in
 * shadow mode, which breakerd always allows).
 *
 * <p>Every Acquire, AcquireFirst and Report RPC has the decision timeout as
 * deadline and is never wait-for-ready. When breakerd cannot answer, the
 * decision is {@link Decision.Source#FAIL_OPEN} (allowed, permit 0) or, with
 * {@link FailMode#CLOSED}, {@link Decision.Source#FAIL_CLOSED} (refused); the
 * client logs once when breakerd becomes unreachable and once when it is back
 * (logger {@code io.breakerd.client.BreakerdClient}, {@link System.Logger}), at
 * most one line per 10 s of each, the next line counting the changes not logged
 * meanwhile (so a flapping sidecar cannot flood the log). Acquire, AcquireFirst
 * and Report do not heed the calling thread's interrupt flag (their deadline
 * bounds them; the flag is kept), so a cancelled task still reports its permit.
 * Report errors never reach the caller: they are counted in {@link #stats()}.
 * INVALID_ARGUMENT from breakerd (e.g. a malformed dependency name) is a
 * programming error and is thrown as {@link IllegalArgumentException}.
 *
 * <p>When an Acquire or AcquireFirst RPC fails with DEADLINE_EXCEEDED or
 * UNAVAILABLE, breakerd is <em>away</em>: until it is back, decisions fail open
 * (or closed) at once without an RPC (counted in {@link Stats#awayDecisions()})
 * and Reports are not sent (counted in {@link Stats#reportErrors()}), so a hung
 * sidecar does not cost every call the decision timeout. Meanwhile a
 * {@code grpc.health.v1.Health/Check} probe runs every away probe interval; the
 * client is back when it answers SERVING or the Watch stream delivers a message.
 */
public final class BreakerdClient implements AutoCloseable {

  /** The target used when neither the builder nor {@code BREAKERD_ADDR} names one. */
  public static final String DEFAULT_TARGET = "127.0.0.1:50051";

  /** The default deadline of each Acquire, AcquireFirst and Report RPC: 20 ms. */
  public static final Duration DEFAULT_DECISION_TIMEOUT = Duration.ofMillis(20);

  /** The default time between health probes while breakerd is away: 100 ms. */
  public static final Duration DEFAULT_AWAY_PROBE_INTERVAL = Duration.ofMillis(100);

  /** The health of the whole server (service ""). */
  private static final HealthCheckRequest HEALTH_CHECK = HealthCheckRequest.getDefaultInstance();

  private static final System.Logger LOG = System.getLogger(BreakerdClient.class.getName());

  // Constant after construction.
  private final String target;
  private final long timeoutNanos;
  private final long awayProbeIntervalNanos;
  private final FailMode failMode;
  private final ManagedChannel channel;
  private final BreakerGrpc.BreakerBlockingStub stub; // awaitReady only
  /** Acquire, AcquireFirst and Report: answers awaited without regard to interrupts. */
  private final BreakerGrpc.BreakerFutureStub decisions;
  private final HealthGrpc.HealthStub health;
  private final ScheduledExecutorService scheduler; // Watch reconnects and away probes
  private final WatchCache watch; // null when watch is off

  private final LongAdder failOpen = new LongAdder();
  private final LongAdder failClosed = new LongAdder();
  private final LongAdder localRejections = new LongAdder();
  private final LongAdder reportErrors = new LongAdder();
  private final LongAdder watchReconnects = new LongAdder();
  private final LongAdder awayDecisions = new LongAdder();
  /** Decide without RPCs until the health probe or the Watch stream hears from breakerd. */
  private final AtomicBoolean away = new AtomicBoolean();
  /** A probe is scheduled or in flight (at most one chain of them runs). */
  private final AtomicBoolean probing = new AtomicBoolean();
  /** Wrong while breakerd did not answer and was not heard from since; rate-limited lines. */
  private final ChangeLog sidecarLog;
  /** Wrong while Reports fail; rate-limited lines. */
  private final ChangeLog reportLog;

  private BreakerdClient(Builder b) {
    this.target = b.target != null ? b.target : defaultTarget();
    this.timeoutNanos = b.decisionTimeout.toNanos();
    this.awayProbeIntervalNanos = b.awayProbeInterval.toNanos();
    this.failMode = b.failMode;
    this.channel = Grpc.newChannelBuilder(target, InsecureChannelCredentials.create()).build();
    this.stub = BreakerGrpc.newBlockingStub(channel);
    // The answer only completes a future; the caller's thread does the rest.
    this.decisions = BreakerGrpc.newFutureStub(channel).withExecutor(Runnable::run);
    this.health = HealthGrpc.newStub(channel);
    this.scheduler = Executors.newSingleThreadScheduledExecutor(r -> {
      Thread t = new Thread(r, "breakerd-client");
      t.setDaemon(true);
      return t;
    });
    this.sidecarLog = newChangeLog();
    this.reportLog = newChangeLog();
    if (b.watch) {
      this.watch = new WatchCache(channel, scheduler, b.watchBackoffBase, b.watchBackoffMax,
          watchReconnects, target, this::watchDelivered, newChangeLog());
      watch.start();
    } else {
      this.watch = null;
      channel.getState(true); // connect now rather than on the first Acquire
    }
  }

  /** A builder with the defaults. */
  public static Builder builder() {
    return new Builder();
  }

  /** A client with every default (target: {@code BREAKERD_ADDR}, else {@value #DEFAULT_TARGET}). */
  public static BreakerdClient create() {
    return builder().build();
  }

  /**
   * Waits, at most {@code timeout}, until breakerd answers. Optional: call it
   * once at startup so that the first decisions of a fresh process are not
   * fail-open because the connection (and, in a cold JVM, the RPC code path)
   * is still being set up. Makes one wait-for-ready GetState RPC for a name no
   * breaker has; creates nothing.
   *
   * @return whether breakerd answered in time
   */
  public boolean awaitReady(Duration timeout) {
    try {
      stub.withWaitForReady()
          .withDeadlineAfter(timeout.toNanos(), TimeUnit.NANOSECONDS)
          .getState(GetStateRequest.newBuilder().setDependency("breakerd-client/ready").build());
      return true;
    } catch (StatusRuntimeException e) {
      Status.Code code = e.getStatus().getCode();
      return code != Status.Code.DEADLINE_EXCEEDED && code != Status.Code.UNAVAILABLE
          && code != Status.Code.CANCELLED;
    }
  }

  /** The gRPC target this client talks to. */
  public String target() {
    return target;
  }

  /**
   * Asks whether {@code dependency} may be called now (a first try).
   *
   * @return a permit to report through (use try-with-resources)
   * @throws BreakerOpenException if the call is refused; do not make it
   * @throws IllegalArgumentException if breakerd rejects the name
   */
  public Permit acquire(String dependency) {
    return acquire(dependency, 0);
  }

  /**
   * Like {@link #acquire(String)} for try number {@code attempt}: 0 for the first
   * try, 1, 2, ... for retries (which spend the dependency's retry budget and are
   * refused while the breaker is not closed).
   */
  public Permit acquire(String dependency, int attempt) {
    Decision d = decide(dependency, attempt);
    if (!d.allowed()) {
      throw new BreakerOpenException(d);
    }
    return new Permit(this, d);
  }

  /**
   * Asks for the first dependency of {@code dependencies} (in order of preference)
   * that may be called now, in one round trip. Dependencies the Watch cache knows
   * to be open are dropped before the RPC. On fail-open the first one is granted.
   *
   * @return a permit for the granted dependency ({@link Permit#dependency()})
   * @throws BreakerOpenException if none may be called
   */
  public Permit acquireFirst(List<String> dependencies) {
    Decision d = decideFirst(dependencies, 0);
    if (!d.allowed()) {
      throw new BreakerOpenException(d);
    }
    return new Permit(this, d);
  }

  /**
   * Guards {@code call}: acquire, run, report, return. A returned value is
   * reported as a success, an error by {@link Outcome#fromThrowable(Throwable)}.
   * If the thread is interrupted by the time the permit is granted (a task
   * cancelled during the Acquire), {@code call} is not run: the permit is
   * reported CANCELLED and {@link InterruptedException} is thrown. An error
   * that leaves the thread interrupted (the call was cancelled) is reported
   * CANCELLED, whatever it is.
   *
   * @return what {@code call} returned
   * @throws BreakerOpenException if refused; {@code call} was not run
   * @throws Exception what {@code call} threw (after it was reported)
   */
  public <T> T call(String dependency, Callable<T> call) throws Exception {
    return call(dependency, call, Classifier.standard());
  }

  /** Like {@link #call(String, Callable)}, with the outcome from {@code classifier}. */
  public <T> T call(String dependency, Callable<T> call, Classifier<? super T> classifier)
      throws Exception {
    try (Permit permit = acquire(dependency)) {
      return run(permit, call, classifier).get();
    }
  }

  /**
   * Guards {@code call} and retries it per {@code policy}: before try
   * {@code attempt >= 1} it sleeps a full-jitter backoff, then acquires with that
   * {@code attempt}. Any refusal stops at once with {@link BreakerOpenException}
   * (the previous try's error, if any, is attached as suppressed). An outcome that
   * is not {@link Outcome#isRetryable() retryable} stops too. After the last try
   * the last result is returned or its error thrown.
   */
  public <T> T retry(String dependency, RetryPolicy policy, Callable<T> call) throws Exception {
    return retry(dependency, policy, call, Classifier.standard());
  }

  /** Like {@link #retry(String, RetryPolicy, Callable)}, classified by {@code classifier}. */
  public <T> T retry(
      String dependency, RetryPolicy policy, Callable<T> call, Classifier<? super T> classifier)
      throws Exception {
    Objects.requireNonNull(policy, "policy");
    Attempt<T> last = null;
    for (int attempt = 0; attempt < policy.maxAttempts(); attempt++) {
      if (attempt > 0) {
        TimeUnit.NANOSECONDS.sleep(policy.backoff(attempt).toNanos());
      }
      Decision d = decide(dependency, attempt);
      if (!d.allowed()) {
        throw refused(d, last);
      }
      try (Permit permit = new Permit(this, d)) {
        last = run(permit, call, classifier);
      }
      if (!last.outcome.isRetryable()) {
        break;
      }
    }
    return last.get();
  }

  /**
   * A fallback chain: AcquireFirst over {@code dependencies}, then {@code call}
   * runs, guarded, with the granted one. If that call fails with a
   * {@link Outcome#isRetryable() retryable} outcome the chain goes on with the
   * dependencies after it (a new AcquireFirst). Returns the first call that
   * ends otherwise; when the list runs out after a failed call, that call's
   * error is thrown (or its result returned).
   *
   * @throws BreakerOpenException when no remaining dependency is granted
   */
  public <T> T first(List<String> dependencies, DependencyCall<T> call) throws Exception {
    return first(dependencies, call, Classifier.standard());
  }

  /** Like {@link #first(List, DependencyCall)}, with the outcome from {@code classifier}. */
  public <T> T first(
      List<String> dependencies, DependencyCall<T> call, Classifier<? super T> classifier)
      throws Exception {
    List<String> remaining = List.copyOf(dependencies);
    if (remaining.isEmpty()) {
      throw new IllegalArgumentException("dependencies must not be empty");
    }
    Attempt<T> last = null;
    while (!remaining.isEmpty()) {
      Decision d = decideFirst(remaining, 0);
      if (!d.allowed()) {
        throw refused(d, last);
      }
      String granted = d.dependency();
      try (Permit permit = new Permit(this, d)) {
        last = run(permit, () -> call.call(granted), classifier);
      }
      int index = remaining.indexOf(granted);
      if (!last.outcome.isRetryable() || index < 0) {
        break;
      }
      remaining = remaining.subList(index + 1, remaining.size());
    }
    return last.get();
  }

  /**
   * What the Watch stream last said about {@code dependency}; empty when it said
   * nothing, when watch is off, or while the stream is down (the cache is then
   * cleared). No RPC.
   */
  public Optional<State> watchedState(String dependency) {
    return watch == null ? Optional.empty() : watch.state(dependency);
  }

  /** A snapshot of this client's counters. */
  public Stats stats() {
    return new Stats(
        failOpen.sum(),
        failClosed.sum(),
        localRejections.sum(),
        reportErrors.sum(),
        watchReconnects.sum(),
        awayDecisions.sum());
  }

  /**
   * Ends the Watch stream, the away probes and the channel. Permits still out
   * cannot be reported any more, and decisions made after close fail open (or
   * closed).
   */
  @Override
  public void close() {
    if (watch != null) {
      watch.close();
    }
    scheduler.shutdownNow();
    channel.shutdownNow();
    try {
      channel.awaitTermination(5, TimeUnit.SECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  @Override
  public String toString() {
    return "BreakerdClient{target=" + target + ", failMode=" + failMode + "}";
  }

  // --- Acquire, AcquireFirst, Report ---

  Decision decide(String dependency, int attempt) {
    Objects.requireNonNull(dependency, "dependency");
    if (attempt < 0) {
      throw new IllegalArgumentException("attempt must be >= 0, got " + attempt);
    }
    Decision local = watch == null ? null : watch.refusal(dependency);
    if (local != null) {
      localRejections.increment();
      return local;
    }
    if (away.get()) {
      awayDecisions.increment();
      return failed(dependency);
    }
    AcquireResponse r;
    try {
      r = answer(deadlined().acquire(
          AcquireRequest.newBuilder().setDependency(dependency).setAttempt(attempt).build()));
    } catch (StatusRuntimeException e) {
      return unanswered(e, dependency);
    }
    answered();
    return new Decision(
        r.getAllowed(),
        r.getPermit(),
        r.getProbe(),
        Protos.state(r.getState()),
        Protos.reason(r.getReason()),
        Protos.duration(r.getRetryAfter()),
        dependency,
        Decision.Source.SIDECAR);
  }

  Decision decideFirst(List<String> dependencies, int attempt) {
    if (dependencies.isEmpty()) {
      throw new IllegalArgumentException("dependencies must not be empty");
    }
    List<String> candidates = new ArrayList<>(dependencies.size());
    Decision lastLocal = null;
    Duration shortestLocal = null;
    for (String dependency : dependencies) {
      Decision local = watch == null ? null : watch.refusal(Objects.requireNonNull(dependency));
      if (local == null) {
        candidates.add(dependency);
        continue;
      }
      lastLocal = local;
      if (local.reason() == RejectReason.OPEN
          && (shortestLocal == null || local.retryAfter().compareTo(shortestLocal) < 0)) {
        shortestLocal = local.retryAfter();
      }
    }
    Duration localWait = shortestLocal == null ? Duration.ZERO : shortestLocal;
    if (candidates.isEmpty()) {
      localRejections.increment();
      return new Decision(false, 0, false, lastLocal.state(), lastLocal.reason(), localWait, "",
          Decision.Source.LOCAL);
    }
    if (away.get()) {
      awayDecisions.increment();
      return failed(candidates.get(0));
    }
    AcquireFirstResponse r;
    try {
      r = answer(deadlined().acquireFirst(AcquireFirstRequest.newBuilder()
          .addAllDependencies(candidates)
          .setAttempt(attempt)
          .build()));
    } catch (StatusRuntimeException e) {
      return unanswered(e, candidates.get(0));
    }
    answered();
    Duration retryAfter = Protos.duration(r.getRetryAfter());
    if (!r.getAllowed() && shortestLocal != null && shortestLocal.compareTo(retryAfter) < 0) {
      retryAfter = shortestLocal;
    }
    return new Decision(
        r.getAllowed(),
        r.getPermit(),
        r.getProbe(),
        Protos.state(r.getState()),
        Protos.reason(r.getReason()),
        retryAfter,
        r.getDependency(),
        Decision.Source.SIDECAR);
  }

  /** Sends the Report for an allowed decision; never throws for an RPC failure. */
  void report(Decision decision, Outcome outcome, Duration latency) {
    if (decision.permit() == 0) {
      return; // fail-open: breakerd issued nothing to report against
    }
    if (away.get()) {
      reportErrors.increment(); // not sent: it would wait out the deadline
      return;
    }
    ReportRequest.Builder req = ReportRequest.newBuilder()
        .setDependency(decision.dependency())
        .setPermit(decision.permit())
        .setLatency(Protos.duration(latency.isNegative() ? Duration.ZERO : latency));
    if (outcome.isExplicit()) {
      req.setOutcome(Protos.outcome(outcome.kind()));
    } else if (outcome.httpStatus() != 0) {
      req.setHttpStatus(outcome.httpStatus());
    } else {
      req.setGrpcCode(outcome.grpcCode().orElseThrow());
    }
    if (!outcome.retryAfter().isZero()) {
      req.setRetryAfter(Protos.duration(outcome.retryAfter()));
    }
    try {
      answer(deadlined().report(req.build()));
      if (reportLog.isWrong()) {
        reportLog.right(Level.INFO, "breakerd at " + target + " accepts Reports again");
      }
    } catch (StatusRuntimeException e) {
      reportErrors.increment();
      if (!reportLog.isWrong()) {
        reportLog.wrong(Level.WARNING, "breakerd at " + target + " did not take a Report for "
            + decision.dependency() + ": " + Protos.describe(e.getStatus())
            + " (counted in report_errors; logged again when Reports work again)");
      }
    }
  }

  private BreakerGrpc.BreakerFutureStub deadlined() {
    return decisions.withDeadlineAfter(timeoutNanos, TimeUnit.NANOSECONDS);
  }

  /**
   * Waits for an RPC's answer without regard to the thread's interrupt flag,
   * which is restored afterwards: an interrupted caller (e.g. a task cancelled
   * with {@code Future.cancel(true)}) still gets its decision, and its permit
   * is still reported. The RPC's deadline bounds the wait.
   *
   * @throws StatusRuntimeException when the RPC failed
   */
  private static <T> T answer(Future<T> rpc) {
    boolean interrupted = Thread.interrupted();
    try {
      while (true) {
        try {
          return rpc.get();
        } catch (InterruptedException e) {
          interrupted = true;
        } catch (ExecutionException e) {
          if (e.getCause() instanceof StatusRuntimeException failed) {
            throw failed;
          }
          throw Status.fromThrowable(e.getCause()).asRuntimeException();
        }
      }
    } finally {
      if (interrupted) {
        Thread.currentThread().interrupt();
      }
    }
  }

  /** A rate-limited log of one condition's changes, flushed on the client's thread. */
  private ChangeLog newChangeLog() {
    return new ChangeLog(ChangeLog.INTERVAL, System::nanoTime,
        (task, delayNanos) -> {
          try {
            scheduler.schedule(task, delayNanos, TimeUnit.NANOSECONDS);
          } catch (RejectedExecutionException closed) {
            // the client is closed: the held-back line is dropped
          }
        },
        (level, message) -> LOG.log(level, message));
  }

  /** After an answer from breakerd: clears "away" and logs "back" once. Cheap when present. */
  private void answered() {
    heardFrom("it answered");
  }

  /** The Watch stream delivered a message: breakerd is there. */
  private void watchDelivered() {
    heardFrom("its Watch stream delivered a message");
  }

  private void heardFrom(String how) {
    if (away.get()) {
      away.set(false);
    }
    if (sidecarLog.isWrong()) {
      sidecarLog.right(Level.INFO,
          "breakerd at " + target + " is back (" + how + "): decisions go to it again");
    }
  }

  private Decision unanswered(StatusRuntimeException e, String dependency) {
    Status status = e.getStatus();
    Status.Code code = status.getCode();
    if (code == Status.Code.INVALID_ARGUMENT) {
      throw new IllegalArgumentException("breakerd: " + status.getDescription(), e);
    }
    String failing = failMode == FailMode.OPEN ? "open" : "closed";
    if ((code == Status.Code.DEADLINE_EXCEEDED || code == Status.Code.UNAVAILABLE)
        && away.compareAndSet(false, true)) {
      sidecarLog.wrong(Level.WARNING, "breakerd at " + target + " did not answer ("
          + Protos.describe(status) + "): away, failing " + failing
          + " without RPCs until a health check or the Watch stream hears from it");
      startProbing();
    } else if (!sidecarLog.isWrong()) {
      sidecarLog.wrong(Level.WARNING, "breakerd at " + target + " did not answer ("
          + Protos.describe(status) + "): failing " + failing + " until it does");
    }
    return failed(dependency);
  }

  /** The FAIL_OPEN (or FAIL_CLOSED) decision, counted. */
  private Decision failed(String dependency) {
    if (failMode == FailMode.OPEN) {
      failOpen.increment();
      return new Decision(true, 0, false, State.UNKNOWN, RejectReason.NONE, Duration.ZERO,
          dependency, Decision.Source.FAIL_OPEN);
    }
    failClosed.increment();
    return new Decision(false, 0, false, State.UNKNOWN, RejectReason.NONE, Duration.ZERO,
        dependency, Decision.Source.FAIL_CLOSED);
  }

  // --- away probes: one chain of Health/Check every away_probe_interval while away ---

  private void startProbing() {
    if (probing.compareAndSet(false, true)) {
      scheduleProbe();
    }
  }

  private void scheduleProbe() {
    try {
      scheduler.schedule(this::probe, awayProbeIntervalNanos, TimeUnit.NANOSECONDS);
    } catch (RejectedExecutionException closed) {
      probing.set(false);
    }
  }

  private void stopProbing() {
    probing.set(false);
    if (away.get()) {
      startProbing(); // marked away again after the caller looked
    }
  }

  private void probe() {
    if (!away.get()) {
      stopProbing();
      return;
    }
    // The channel's own reconnect backoff grows to minutes; a local sidecar
    // that comes back should be found by the next probe.
    if (channel.getState(false) == ConnectivityState.TRANSIENT_FAILURE) {
      channel.resetConnectBackoff();
    }
    health.withDeadlineAfter(timeoutNanos, TimeUnit.NANOSECONDS)
        .check(HEALTH_CHECK, new StreamObserver<HealthCheckResponse>() {
          @Override
          public void onNext(HealthCheckResponse response) {
            if (response.getStatus() == HealthCheckResponse.ServingStatus.SERVING) {
              heardFrom("its health check answered SERVING");
            }
          }

          @Override
          public void onError(Throwable error) {
            probed();
          }

          @Override
          public void onCompleted() {
            probed();
          }
        });
  }

  private void probed() {
    if (away.get()) {
      scheduleProbe();
    } else {
      stopProbing();
    }
  }

  // --- guard plumbing ---

  /** How one guarded try ended. */
  private record Attempt<T>(T value, Throwable error, Outcome outcome) {
    T get() throws Exception {
      if (error == null) {
        return value;
      }
      if (error instanceof Exception e) {
        throw e;
      }
      if (error instanceof Error e) {
        throw e;
      }
      throw new UndeclaredThrowableException(error);
    }
  }

  /**
   * Runs one guarded try and reports it. A thread interrupted by the time the
   * permit is granted (e.g. cancelled during the Acquire) does not make the
   * call: the permit is reported CANCELLED and the try ends with an
   * {@link InterruptedException} (the flag cleared, as that exception means).
   */
  private static <T> Attempt<T> run(
      Permit permit, Callable<T> call, Classifier<? super T> classifier) {
    if (Thread.interrupted()) {
      Outcome cancelled = Outcome.cancelled();
      permit.report(cancelled);
      return new Attempt<>(null, Permit.interruptedBeforeCall(permit), cancelled);
    }
    T value;
    try {
      value = call.call();
    } catch (Throwable t) {
      Outcome outcome = Permit.errorOutcome(classifier, t);
      permit.report(outcome);
      return new Attempt<>(null, t, outcome);
    }
    Outcome outcome = classifier.onResult(value);
    permit.report(outcome);
    return new Attempt<>(value, null, outcome);
  }

  private static BreakerOpenException refused(Decision d, Attempt<?> previous) {
    BreakerOpenException e = new BreakerOpenException(d);
    if (previous != null && previous.error != null) {
      e.addSuppressed(previous.error);
    }
    return e;
  }

  private static String defaultTarget() {
    String env = System.getenv("BREAKERD_ADDR");
    return env == null || env.isBlank() ? DEFAULT_TARGET : env.trim();
  }

  /**
   * Options of a {@link BreakerdClient}. Not thread-safe; build once.
   */
  public static final class Builder {
    private String target;
    private Duration decisionTimeout = DEFAULT_DECISION_TIMEOUT;
    private FailMode failMode = FailMode.OPEN;
    private boolean watch = true;
    private Duration watchBackoffBase = Duration.ofMillis(100);
    private Duration watchBackoffMax = Duration.ofSeconds(5);
    private Duration awayProbeInterval = DEFAULT_AWAY_PROBE_INTERVAL;

    private Builder() {}

    /**
     * breakerd's gRPC address: {@code host:port} or {@code unix:/path}. Default:
     * the environment variable {@code BREAKERD_ADDR}, else {@value BreakerdClient#DEFAULT_TARGET}.
     */
    public Builder target(String target) {
      this.target = Objects.requireNonNull(target, "target");
      return this;
    }

    /** The deadline of each Acquire, AcquireFirst and Report RPC. Default 20 ms. */
    public Builder decisionTimeout(Duration timeout) {
      if (timeout.isNegative() || timeout.isZero()) {
        throw new IllegalArgumentException("decisionTimeout must be positive, got " + timeout);
      }
      this.decisionTimeout = timeout;
      return this;
    }

    /** What to decide when breakerd cannot answer. Default {@link FailMode#OPEN}. */
    public Builder failMode(FailMode failMode) {
      this.failMode = Objects.requireNonNull(failMode, "failMode");
      return this;
    }

    /** Whether to keep a Watch stream and refuse open breakers locally. Default true. */
    public Builder watch(boolean watch) {
      this.watch = watch;
      return this;
    }

    /**
     * The Watch stream's reconnect backoff: a full-jitter sleep capped at
     * {@code base} doubling up to {@code max}. Default 100 ms to 5 s.
     */
    public Builder watchBackoff(Duration base, Duration max) {
      if (base.isNegative() || base.isZero() || max.compareTo(base) < 0) {
        throw new IllegalArgumentException("need 0 < base <= max, got " + base + ", " + max);
      }
      this.watchBackoffBase = base;
      this.watchBackoffMax = max;
      return this;
    }

    /**
     * How often the health probe runs while breakerd is away (after an Acquire
     * missed its deadline or found breakerd unavailable); nothing runs while it
     * is present. Default 100 ms.
     */
    public Builder awayProbeInterval(Duration interval) {
      if (interval.isNegative() || interval.isZero()) {
        throw new IllegalArgumentException("awayProbeInterval must be positive, got " + interval);
      }
      this.awayProbeInterval = interval;
      return this;
    }

    /** Builds the client; it connects in the background (no call blocks on it). */
    public BreakerdClient build() {
      return new BreakerdClient(this);
    }
  }
}

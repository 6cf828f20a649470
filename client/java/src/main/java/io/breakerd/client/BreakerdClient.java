package io.breakerd.client;

import com.google.common.util.concurrent.ListenableFuture;
import io.breakerd.v1.AcquireFirstRequest;
import io.breakerd.v1.AcquireFirstResponse;
import io.breakerd.v1.AcquireRequest;
import io.breakerd.v1.AcquireResponse;
import io.breakerd.v1.BreakerGrpc;
import io.breakerd.v1.BreakerStatus;
import io.breakerd.v1.GetStateRequest;
import io.breakerd.v1.ReportBatchRequest;
import io.breakerd.v1.ReportBatchResponse;
import io.breakerd.v1.ReportRequest;
import io.grpc.ConnectivityState;
import io.grpc.Grpc;
import io.grpc.InsecureChannelCredentials;
import io.grpc.ManagedChannel;
import io.grpc.ManagedChannelBuilder;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.health.v1.HealthCheckRequest;
import io.grpc.health.v1.HealthCheckResponse;
import io.grpc.health.v1.HealthGrpc;
import io.grpc.netty.shaded.io.grpc.netty.NettyChannelBuilder;
import io.grpc.netty.shaded.io.netty.channel.EventLoopGroup;
import io.grpc.netty.shaded.io.netty.channel.MultiThreadIoEventLoopGroup;
import io.grpc.netty.shaded.io.netty.channel.epoll.Epoll;
import io.grpc.netty.shaded.io.netty.channel.epoll.EpollIoHandler;
import io.grpc.netty.shaded.io.netty.channel.epoll.EpollSocketChannel;
import io.grpc.netty.shaded.io.netty.channel.nio.NioIoHandler;
import io.grpc.netty.shaded.io.netty.channel.socket.nio.NioSocketChannel;
import io.grpc.netty.shaded.io.netty.util.concurrent.DefaultThreadFactory;
import io.grpc.stub.StreamObserver;
import java.lang.System.Logger.Level;
import java.lang.reflect.UndeclaredThrowableException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.Optional;
import java.util.concurrent.Callable;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
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
 * <p>Every Acquire, AcquireFirst and Report RPC waits at most the decision
 * timeout for its answer and is never wait-for-ready. When breakerd cannot answer, the
 * decision is {@link Decision.Source#FAIL_OPEN} (allowed, permit 0) or, with
 * {@link FailMode#CLOSED}, {@link Decision.Source#FAIL_CLOSED} (refused); the
 * client logs once when breakerd becomes unreachable and once when it is back
 * (logger {@code io.breakerd.client.BreakerdClient}, {@link System.Logger}), at
 * most one line per 10 s of each, the next line counting the changes not logged
 * meanwhile (so a flapping sidecar cannot flood the log). At most
 * {@value SendWindow#LIMIT} of these RPCs are on the wire at once; more wait
 * their turn (reports first). The decision timeout runs from when the request
 * is written to the connection (from when the RPC starts if the channel is not
 * connected), and is judged on the connection's own I/O thread after it has
 * read what breakerd sent, so it measures breakerd, not the application's own
 * burst or a JVM pause; an RPC whose caller stopped waiting stays open
 * {@value UnarySender#LATE_ANSWER_SECONDS} s more, and a permit that arrives then is
 * reported CANCELLED rather than lost.
 * Report errors never reach the caller: they are counted in {@link #stats()}.
 * INVALID_ARGUMENT from breakerd (e.g. a malformed dependency name) is a
 * programming error and is thrown as {@link IllegalArgumentException}.
 *
 * <p>When an Acquire or AcquireFirst RPC fails with UNAVAILABLE, or times out
 * while breakerd answered no other RPC of this client since its request was
 * written, breakerd is <em>away</em> (a timeout while it answers others is one
 * late answer: that decision alone fails open): until it is back, decisions fail open
 * (or closed) at once without an RPC (counted in {@link Stats#awayDecisions()}),
 * so a hung sidecar does not cost every call the decision timeout, and Reports
 * are held, not sent and not dropped (up to {@value HeldReports#LIMIT}; past that
 * the oldest is dropped and counted in {@link Stats#reportErrors()}): they are
 * sent, from the client's own thread, as soon as breakerd is back. Meanwhile a
 * {@code grpc.health.v1.Health/Check} probe runs every away probe interval; the
 * client is back when it answers SERVING or the Watch stream delivers a message.
 * Callers still waiting for a place in the window are then answered at once
 * from the fail mode.
 *
 * <p>Interrupts: {@link #acquire}, {@link #acquireFirst} and Reports do not heed
 * the calling thread's interrupt flag (their timeout bounds them; the flag is
 * kept), so a cancelled task still gets its decision and reports its permit.
 * The guards ({@link #call}, {@link #retry}, {@link #first}) give up at once
 * when interrupted while they wait for a decision and throw
 * {@link InterruptedException}; the Acquire RPC is not cancelled with them (it
 * stays open until {@value UnarySender#LATE_ANSWER_SECONDS} s past its timeout), and a
 * permit it brings is reported {@link Outcome.Kind#CANCELLED}.
 *
 * <p>Local decisions (option {@code localDecisions}, default on, with
 * {@code watch}): a first attempt is granted in the client, with no RPC, while
 * the Watch cache says the breaker is CLOSED, breakerd allows local decisions
 * for it and is not away (a {@link Decision.Source#LOCAL} grant, permit 0).
 * What happened (grants, outcomes, chain decisions, local refusals and
 * fail-open / fail-closed decisions) goes to breakerd in ReportBatch requests
 * every flush interval while there is something to send; outcomes that cannot
 * be sent are counted in {@link Stats#droppedOutcomes()}, never waited for.
 *
 * <p>After {@link #close()} every decision, guard and {@link #awaitReady} throws
 * {@link ClientClosedException} at once, without an RPC.
 */
public final class BreakerdClient implements AutoCloseable {

  /** The target used when neither the builder nor {@code BREAKERD_ADDR} names one. */
  public static final String DEFAULT_TARGET = "127.0.0.1:50051";

  /** How long each Acquire, AcquireFirst and Report waits for its answer by default: 20 ms. */
  public static final Duration DEFAULT_DECISION_TIMEOUT = Duration.ofMillis(20);

  /** The default time between health probes while breakerd is away: 100 ms. */
  public static final Duration DEFAULT_AWAY_PROBE_INTERVAL = Duration.ofMillis(100);

  /** How often local decisions are sent to breakerd by default, while there are some: 5 ms. */
  public static final Duration DEFAULT_FLUSH_INTERVAL = Duration.ofMillis(5);

  /** A ReportBatch's deadline, in decision timeouts. */
  private static final int BATCH_DEADLINE_TIMEOUTS = 10;

  /** How often {@link #awaitReady} looks at the connection while it waits. */
  private static final long READY_POLL_NANOS = TimeUnit.MILLISECONDS.toNanos(100);

  /** The health of the whole server (service ""). */
  private static final HealthCheckRequest HEALTH_CHECK = HealthCheckRequest.getDefaultInstance();

  private static final System.Logger LOG = System.getLogger(BreakerdClient.class.getName());

  // Constant after construction.
  private final String target;
  private final long timeoutNanos;
  private final long awayProbeIntervalNanos;
  private final FailMode failMode;
  private final ManagedChannel channel;
  /** The connection's I/O thread, owned by this client; null if the transport is not Netty. */
  private final EventLoopGroup io;
  /** Acquire, AcquireFirst and Report RPCs, through {@link #window}. */
  private final UnarySender sender;
  /** awaitReady's GetState. */
  private final BreakerGrpc.BreakerFutureStub readiness;
  private final HealthGrpc.HealthStub health;
  /** Watch reconnects, away probes, log lines (and RPC timeouts if the transport is not Netty). */
  private final ScheduledThreadPoolExecutor scheduler;
  private final WatchCache watch; // null when watch is off
  /** Local decisions on their way to breakerd; null when local decisions (or watch) are off. */
  private final LocalBatches batches;
  private final BreakerGrpc.BreakerStub batchStub;
  /** At most {@value SendWindow#LIMIT} Acquire, AcquireFirst and Report RPCs on the wire. */
  private final SendWindow window = new SendWindow(SendWindow.LIMIT);
  /** Reports made while breakerd is away: sent once it is back. */
  private final HeldReports<HeldReport> held = new HeldReports<>(HeldReports.LIMIT);

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
  /** Set once by {@link #close()}: everything after it throws {@link ClientClosedException}. */
  private final AtomicBoolean closed = new AtomicBoolean();
  /** Wrong while breakerd did not answer and was not heard from since; rate-limited lines. */
  private final ChangeLog sidecarLog;
  /** Wrong while Reports fail; rate-limited lines. */
  private final ChangeLog reportLog;

  private BreakerdClient(Builder b) {
    this.target = b.target != null ? b.target : defaultTarget();
    this.timeoutNanos = b.decisionTimeout.toNanos();
    this.awayProbeIntervalNanos = b.awayProbeInterval.toNanos();
    this.failMode = b.failMode;
    ManagedChannelBuilder<?> channelBuilder =
        Grpc.newChannelBuilder(target, InsecureChannelCredentials.create());
    this.scheduler = new ScheduledThreadPoolExecutor(1, r -> {
      Thread t = new Thread(r, "breakerd-client");
      t.setDaemon(true);
      return t;
    });
    scheduler.setRemoveOnCancelPolicy(true); // an RPC's timeout is cancelled when it is answered
    // close(): drop the probes and held-back lines, write the lines already queued.
    scheduler.setExecuteExistingDelayedTasksAfterShutdownPolicy(false);
    scheduler.setContinueExistingPeriodicTasksAfterShutdownPolicy(false);
    this.io = channelBuilder instanceof NettyChannelBuilder netty
        ? ownIoThread(netty, target) : null;
    this.channel = channelBuilder.build();
    // RPC timeouts run on the connection's I/O thread, which reads what
    // breakerd sent before it runs a due timeout: a starved or paused JVM does
    // not time out answers already received.
    this.sender = new UnarySender(channel, window, timeoutNanos,
        io != null ? io.next() : scheduler, io != null, closed::get, away::get);
    this.readiness = BreakerGrpc.newFutureStub(channel);
    this.health = HealthGrpc.newStub(channel);
    this.sidecarLog = newChangeLog();
    this.reportLog = newChangeLog();
    this.batchStub = BreakerGrpc.newStub(channel).withExecutor(Runnable::run);
    boolean local = b.watch && b.localDecisions;
    this.batches = local
        ? new LocalBatches(LocalBatches.newClientId(), b.flushInterval,
            b.decisionTimeout.multipliedBy(BATCH_DEADLINE_TIMEOUTS), this::sendBatch,
            this::schedule, away::get, newChangeLog())
        : null;
    if (b.watch) {
      this.watch = new WatchCache(channel, scheduler, b.watchBackoffBase, b.watchBackoffMax,
          watchReconnects, target, this::watchDelivered, newChangeLog(), local);
      watch.start();
    } else {
      this.watch = null;
      channel.getState(true); // connect now rather than on the first Acquire
    }
  }

  /**
   * Gives {@code netty} a one-thread event loop group of its own (epoll when
   * available, as gRPC's default is), so that RPC timeouts can run on the
   * connection's I/O thread.
   */
  private static EventLoopGroup ownIoThread(NettyChannelBuilder netty, String target) {
    boolean epoll = Epoll.isAvailable();
    EventLoopGroup group = new MultiThreadIoEventLoopGroup(1,
        new DefaultThreadFactory("breakerd-client-io", true),
        epoll ? EpollIoHandler.newFactory() : NioIoHandler.newFactory());
    netty.eventLoopGroup(group);
    if (!target.startsWith("unix")) { // unix: targets come with gRPC's epoll domain socket type
      netty.channelType(epoll ? EpollSocketChannel.class : NioSocketChannel.class);
    }
    return group;
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
   * breaker has; creates nothing. While it waits, the channel's reconnect
   * backoff is reset every 100 ms, so a breakerd that starts meanwhile is found
   * at once rather than at gRPC's next attempt (1 s and more apart). An
   * interrupt ends the wait (false; the flag is kept).
   *
   * @return whether breakerd answered in time
   * @throws ClientClosedException if the client is closed
   */
  public boolean awaitReady(Duration timeout) {
    checkOpen();
    ListenableFuture<BreakerStatus> rpc = readiness.withWaitForReady()
        .withDeadlineAfter(timeout.toNanos(), TimeUnit.NANOSECONDS)
        .getState(GetStateRequest.newBuilder().setDependency("breakerd-client/ready").build());
    while (true) {
      try {
        rpc.get(READY_POLL_NANOS, TimeUnit.NANOSECONDS);
        return true;
      } catch (TimeoutException stillWaiting) {
        if (channel.getState(false) == ConnectivityState.TRANSIENT_FAILURE) {
          channel.resetConnectBackoff();
        }
      } catch (ExecutionException e) {
        checkOpen();
        Status.Code code = Status.fromThrowable(e.getCause()).getCode();
        return code != Status.Code.DEADLINE_EXCEEDED && code != Status.Code.UNAVAILABLE
            && code != Status.Code.CANCELLED;
      } catch (InterruptedException e) {
        rpc.cancel(false);
        Thread.currentThread().interrupt();
        return false;
      }
    }
  }

  /** The gRPC target this client talks to. */
  public String target() {
    return target;
  }

  /**
   * Asks whether {@code dependency} may be called now (a first try). Waits for
   * breakerd's answer whatever the thread's interrupt flag (which is kept), so
   * a cancelled task still gets its decision and can report its permit. With
   * local decisions, a breaker the Watch cache holds CLOSED (and breakerd lets
   * the client decide) is granted at once, without an RPC: report it through
   * the permit as any other; its outcome goes into the next batch.
   *
   * @return a permit to report through (use try-with-resources)
   * @throws BreakerOpenException if the call is refused; do not make it
   * @throws IllegalArgumentException if breakerd rejects the name
   * @throws ClientClosedException if the client is closed
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
    LocalBatches.Ledger local = localGrant(dependency, attempt, false);
    if (local != null) {
      return new Permit(this, local.decision, null, local);
    }
    Decision d = uninterruptibly(() -> decide(dependency, attempt, false));
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
   * @throws ClientClosedException if the client is closed
   */
  public Permit acquireFirst(List<String> dependencies) {
    LocalBatches.Ledger local = localFirst(dependencies, null, 0, false);
    if (local != null) {
      return new Permit(this, local.decision, null, local);
    }
    Decision d = uninterruptibly(() -> decideFirst(dependencies, 0, false, null, 0));
    if (!d.allowed()) {
      throw new BreakerOpenException(d);
    }
    return new Permit(this, d);
  }

  /**
   * Like {@link #acquireFirst(List)}, for the named fallback chain {@code chain}:
   * {@code dependencies} are the candidates left of the caller's full chain,
   * the first of them at position {@code firstTier} (0-based) in it. All of
   * them go to breakerd, even those the Watch cache knows to be open, with the
   * chain's name and first tier, so that breakerd counts the decision in
   * {@code breakerd_chain_decisions_total{chain,tier}} (tier {@code none} when it
   * refuses every one); the permit's Report carries the chain and the granted
   * dependency's tier ({@code breakerd_chain_outcomes_total}). While breakerd
   * is away, or when it does not answer, the decision is made as by
   * {@link #acquireFirst(List)}.
   *
   * @param chain the chain's name, named like a dependency
   * @param firstTier where {@code dependencies.get(0)} sits in the full chain, 0-based
   * @throws IllegalArgumentException if {@code chain} is not a valid name (before any RPC),
   *     or {@code firstTier} is negative
   */
  public Permit acquireFirst(String chain, List<String> dependencies, int firstTier) {
    Names.check(chain, "chain");
    if (firstTier < 0) {
      throw new IllegalArgumentException("firstTier must be >= 0, got " + firstTier);
    }
    List<String> sent = List.copyOf(dependencies);
    LocalBatches.Ledger local = localFirst(sent, chain, firstTier, false);
    Decision d = local != null ? local.decision
        : uninterruptibly(() -> decideFirst(sent, 0, false, chain, firstTier));
    if (!d.allowed()) {
      throw new BreakerOpenException(d);
    }
    return new Permit(this, d, chainTier(chain, firstTier, sent, d.dependency()), local);
  }

  /**
   * Guards {@code call}: acquire, run, report, return. A returned value is
   * reported as a success, an error by {@link Outcome#fromThrowable(Throwable)}.
   * If the thread is interrupted before or while it waits for the decision (a
   * task cancelled during the Acquire), {@link InterruptedException} is thrown
   * at once and {@code call} is not run; a permit breakerd grants all the same
   * is reported CANCELLED when it arrives. An error that leaves the thread
   * interrupted (the call was cancelled) is reported CANCELLED, whatever it is.
   *
   * @return what {@code call} returned
   * @throws BreakerOpenException if refused; {@code call} was not run
   * @throws ClientClosedException if the client is closed; {@code call} was not run
   * @throws Exception what {@code call} threw (after it was reported)
   */
  public <T> T call(String dependency, Callable<T> call) throws Exception {
    return call(dependency, call, Classifier.standard());
  }

  /** Like {@link #call(String, Callable)}, with the outcome from {@code classifier}. */
  public <T> T call(String dependency, Callable<T> call, Classifier<? super T> classifier)
      throws Exception {
    Objects.requireNonNull(call, "call");
    Objects.requireNonNull(classifier, "classifier");
    LocalBatches.Ledger local = localGrant(dependency, 0, true);
    Decision d = local != null ? local.decision : decide(dependency, 0, true);
    if (!d.allowed()) {
      throw new BreakerOpenException(d);
    }
    try (Permit permit = new Permit(this, d, null, local)) {
      return run(permit, call, classifier).get();
    }
  }

  /**
   * Guards {@code call} and retries it per {@code policy}: before try
   * {@code attempt >= 1} it sleeps a full-jitter backoff, then acquires with that
   * {@code attempt}. Any refusal stops at once with {@link BreakerOpenException}
   * (the previous try's error, if any, is attached as suppressed). An outcome that
   * is not {@link Outcome#isRetryable() retryable} (a success, bad request, auth
   * error, cancellation or soft failure) stops too, and so does a classifier
   * that throws. After the last try the last result is returned or its error
   * thrown. Interrupts, refusals and close are handled as by
   * {@link #call(String, Callable)}; an interrupt during a backoff throws
   * {@link InterruptedException}.
   */
  public <T> T retry(String dependency, RetryPolicy policy, Callable<T> call) throws Exception {
    return retry(dependency, policy, call, Classifier.standard());
  }

  /** Like {@link #retry(String, RetryPolicy, Callable)}, classified by {@code classifier}. */
  public <T> T retry(
      String dependency, RetryPolicy policy, Callable<T> call, Classifier<? super T> classifier)
      throws Exception {
    Objects.requireNonNull(policy, "policy");
    Objects.requireNonNull(call, "call");
    Objects.requireNonNull(classifier, "classifier");
    Attempt<T> last = null;
    for (int attempt = 0; attempt < policy.maxAttempts(); attempt++) {
      if (attempt > 0) {
        TimeUnit.NANOSECONDS.sleep(policy.backoff(attempt).toNanos());
      }
      LocalBatches.Ledger local = localGrant(dependency, attempt, true);
      Decision d = local != null ? local.decision : decide(dependency, attempt, true);
      if (!d.allowed()) {
        throw refused(d, last);
      }
      try (Permit permit = new Permit(this, d, null, local)) {
        last = run(permit, call, classifier);
      }
      if (!last.worthAnotherTry()) {
        break;
      }
    }
    return last.get();
  }

  /**
   * A fallback chain: AcquireFirst over {@code dependencies}, then {@code call}
   * runs, guarded, with the granted one. If that call fails with a
   * {@link Outcome#isRetryable() retryable} outcome (timeout, connection or
   * server error, rate limited) the chain goes on with the dependencies after
   * it (a new AcquireFirst). Any other outcome (a success, or a bad request,
   * auth error, cancellation or soft failure, which the next dependency would
   * not mend) ends the chain with that call's result or error, as does a
   * classifier that throws. When the list runs out after a failed call, that
   * call's error is thrown (or its result returned). Interrupts and close are
   * handled as by {@link #call(String, Callable)}.
   *
   * <p>Dependencies the Watch cache knows to be open are skipped without
   * asking breakerd; to have breakerd count the chain, name it with
   * {@link #first(String, List, DependencyCall)}.
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
    return runChain(null, dependencies, call, classifier);
  }

  /**
   * Like {@link #first(List, DependencyCall)}, for a fallback chain named
   * {@code chain}, which breakerd counts: every AcquireFirst, the first and
   * the one after a failed call worth moving on from, asks breakerd with all
   * the dependencies left (even those the Watch cache knows to be open), the
   * chain's name and the position of the first of them in
   * {@code dependencies}, as {@link #acquireFirst(String, List, int)} does.
   * breakerd counts each decision in
   * {@code breakerd_chain_decisions_total{chain,tier}} (tier {@code none} when
   * it refuses every one: the caller's last resort), and each call's Report
   * carries the chain and the granted dependency's tier
   * ({@code breakerd_chain_outcomes_total{chain,tier,class}}). While breakerd is
   * away, or when it does not answer, the chain goes on as without a name.
   *
   * @param chain the chain's name, named like a dependency
   * @throws IllegalArgumentException if {@code chain} is not a valid name (before any RPC)
   */
  public <T> T first(String chain, List<String> dependencies, DependencyCall<T> call)
      throws Exception {
    return first(chain, dependencies, call, Classifier.standard());
  }

  /** Like {@link #first(String, List, DependencyCall)}, with the outcome from {@code classifier}. */
  public <T> T first(String chain, List<String> dependencies, DependencyCall<T> call,
      Classifier<? super T> classifier) throws Exception {
    return runChain(Names.check(chain, "chain"), dependencies, call, classifier);
  }

  /** The fallback chain of {@link #first}; {@code chain} null: not named. */
  private <T> T runChain(String chain, List<String> dependencies, DependencyCall<T> call,
      Classifier<? super T> classifier) throws Exception {
    Objects.requireNonNull(call, "call");
    Objects.requireNonNull(classifier, "classifier");
    List<String> all = List.copyOf(dependencies);
    if (all.isEmpty()) {
      throw new IllegalArgumentException("dependencies must not be empty");
    }
    Attempt<T> last = null;
    int firstTier = 0; // where the remaining dependencies start in all
    while (firstTier < all.size()) {
      List<String> remaining = all.subList(firstTier, all.size());
      LocalBatches.Ledger local = localFirst(remaining, chain, firstTier, true);
      Decision d = local != null ? local.decision
          : decideFirst(remaining, 0, true, chain, firstTier);
      if (!d.allowed()) {
        throw refused(d, last);
      }
      String granted = d.dependency();
      try (Permit permit =
          new Permit(this, d, chainTier(chain, firstTier, remaining, granted), local)) {
        last = run(permit, () -> call.call(granted), classifier);
      }
      int index = remaining.indexOf(granted);
      if (!last.worthAnotherTry() || index < 0) {
        break;
      }
      firstTier += index + 1;
    }
    return last.get();
  }

  /**
   * Where {@code granted} sits in a named chain whose dependencies {@code sent}
   * start at {@code firstTier}; null without a chain name (or a grant outside
   * {@code sent}).
   */
  private static ChainTier chainTier(
      String chain, int firstTier, List<String> sent, String granted) {
    int index = sent.indexOf(granted);
    return chain == null || index < 0 ? null : new ChainTier(chain, firstTier + index);
  }

  /**
   * What the Watch cache holds for {@code dependency}: the state the stream last
   * said; empty when it said nothing, when watch is off, or while the stream is
   * down (the cache is then cleared). No RPC.
   */
  public Optional<State> cachedState(String dependency) {
    return watch == null ? Optional.empty() : watch.state(dependency);
  }

  /** Whether breakerd is marked away now (for tests). */
  boolean isAway() {
    return away.get();
  }

  /** A snapshot of this client's counters. */
  public Stats stats() {
    return new Stats(
        failOpen.sum(),
        failClosed.sum(),
        localRejections.sum(),
        reportErrors.sum(),
        watchReconnects.sum(),
        awayDecisions.sum(),
        batches == null ? 0 : batches.dropped());
  }

  /**
   * Sends the local decisions not yet sent (waiting at most the decision
   * timeout; what is left is counted in {@link Stats#droppedOutcomes()}), then
   * ends the Watch stream, the away probes and the channel. Idempotent. From
   * now on decisions, guards and {@link #awaitReady} throw
   * {@link ClientClosedException}; Reports of permits still out, and Reports
   * held while breakerd was away, are not sent (counted in
   * {@link Stats#reportErrors()}, never thrown).
   */
  @Override
  public void close() {
    if (!closed.compareAndSet(false, true)) {
      return;
    }
    window.flush(); // callers still queued: closed; queued Reports: counted
    dropHeld(); // Reports held while breakerd was away: counted
    if (batches != null) {
      batches.close(timeoutNanos); // the last local decisions, within the decision timeout
    }
    if (watch != null) {
      watch.close();
    }
    scheduler.shutdown();
    channel.shutdownNow();
    try {
      channel.awaitTermination(5, TimeUnit.SECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
    if (io != null) {
      io.shutdownGracefully(0, 1, TimeUnit.SECONDS);
    }
  }

  @Override
  public String toString() {
    return "BreakerdClient{target=" + target + ", failMode=" + failMode + "}";
  }

  // --- Acquire, AcquireFirst, Report ---

  /**
   * The decision for one dependency. {@code interruptible}: an interrupt, before
   * or during the wait for breakerd's answer, throws InterruptedException at
   * once (the RPC is kept and a permit it brings reported CANCELLED); else the
   * wait ignores interrupts and keeps the flag.
   */
  private Decision decide(String dependency, int attempt, boolean interruptible)
      throws InterruptedException {
    Objects.requireNonNull(dependency, "dependency");
    if (attempt < 0) {
      throw new IllegalArgumentException("attempt must be >= 0, got " + attempt);
    }
    checkOpen();
    Decision local = watch == null ? null : watch.refusal(dependency);
    if (local != null) {
      localRejections.increment();
      if (batches != null) {
        batches.refusedLocal(dependency);
      }
      return local;
    }
    if (away.get()) {
      return notSent(dependency);
    }
    AcquireRequest req =
        AcquireRequest.newBuilder().setDependency(dependency).setAttempt(attempt).build();
    long startNanos = System.nanoTime();
    UnarySender.Rpc<AcquireRequest, AcquireResponse> rpc =
        sender.newRpc(BreakerGrpc.getAcquireMethod(), req, false, late -> {
          if (late.getAllowed()) {
            latePermit(dependency, late.getPermit(), startNanos, null);
          }
        });
    AcquireResponse r;
    try {
      r = sender.await(rpc, interruptible, dependency);
    } catch (StatusRuntimeException e) {
      return unanswered(e, dependency, rpc.writtenNanos());
    } catch (UnarySender.NotSent e) {
      return notSent(dependency);
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

  /**
   * A first attempt granted in the client (the Watch cache says CLOSED with
   * local decisions on), counted for the next batch; null when the decision
   * is not the client's to make: local decisions off, a retry, breakerd away,
   * or no such entry in the cache. {@code interruptible}: a thread already
   * interrupted gets none (its decision throws as without local decisions).
   *
   * @throws ClientClosedException if the client is closed
   */
  private LocalBatches.Ledger localGrant(String dependency, int attempt, boolean interruptible) {
    checkOpen();
    if (batches == null || attempt != 0 || away.get()
        || (interruptible && Thread.currentThread().isInterrupted())) {
      return null;
    }
    LocalBatches.Ledger ledger = watch.ledger(Objects.requireNonNull(dependency, "dependency"));
    if (ledger != null) {
      batches.grant(ledger);
    }
    return ledger;
  }

  /**
   * Like {@link #localGrant}, for a fallback chain: its first remaining
   * candidate, when the cache allows a local grant for it. Without a chain
   * name, candidates the cache refuses are skipped first (as the AcquireFirst
   * would drop them; their refusals are counted); with one, only
   * {@code dependencies.get(0)} may be granted locally, so that breakerd still
   * decides (and counts) the chain otherwise. A named chain's local grant is
   * counted for breakerd as a chain decision at {@code firstTier}.
   */
  private LocalBatches.Ledger localFirst(List<String> dependencies, String chain, int firstTier,
      boolean interruptible) {
    checkOpen();
    if (batches == null || away.get() || dependencies.isEmpty()
        || (interruptible && Thread.currentThread().isInterrupted())) {
      return null;
    }
    if (chain != null) {
      LocalBatches.Ledger ledger = watch.ledger(Objects.requireNonNull(dependencies.get(0)));
      if (ledger != null) {
        batches.grant(ledger);
        batches.chainGrant(new ChainTier(chain, firstTier));
      }
      return ledger;
    }
    for (int i = 0; i < dependencies.size(); i++) {
      String dependency = Objects.requireNonNull(dependencies.get(i));
      LocalBatches.Ledger ledger = watch.ledger(dependency);
      if (ledger != null) {
        for (int j = 0; j < i; j++) {
          batches.refusedLocal(dependencies.get(j));
        }
        batches.grant(ledger);
        return ledger;
      }
      if (watch.refusal(dependency) == null) {
        return null; // the first it does not refuse is breakerd's to decide
      }
    }
    return null;
  }

  /**
   * Like {@link #decide}, for the first grantable of {@code dependencies}.
   * Without a chain name ({@code chain} null) the dependencies the Watch cache
   * refuses are dropped before the RPC, and none left is a LOCAL refusal. With
   * one, breakerd gets them all, with {@code chain} and {@code firstTier}, so
   * that it counts every decision of the chain ({@code none} too); the cache
   * is used only while breakerd is away or when it does not answer, as
   * without a name.
   */
  private Decision decideFirst(List<String> dependencies, int attempt, boolean interruptible,
      String chain, int firstTier) throws InterruptedException {
    if (dependencies.isEmpty()) {
      throw new IllegalArgumentException("dependencies must not be empty");
    }
    checkOpen();
    Filtered local = filter(dependencies);
    if (away.get() || (chain == null && local.candidates().isEmpty())) {
      return withoutSidecar(local, true, false);
    }
    List<String> sent = chain == null ? local.candidates() : dependencies;
    if (chain == null) {
      countRefused(local); // dropped before the RPC
    }
    AcquireFirstRequest.Builder req = AcquireFirstRequest.newBuilder()
        .addAllDependencies(sent)
        .setAttempt(attempt);
    if (chain != null) {
      req.setChain(chain).setFirstTier(firstTier);
    }
    long startNanos = System.nanoTime();
    UnarySender.Rpc<AcquireFirstRequest, AcquireFirstResponse> rpc =
        sender.newRpc(BreakerGrpc.getAcquireFirstMethod(), req.build(), false, late -> {
          if (late.getAllowed()) {
            latePermit(late.getDependency(), late.getPermit(), startNanos,
                chainTier(chain, firstTier, sent, late.getDependency()));
          }
        });
    AcquireFirstResponse r;
    try {
      r = sender.await(rpc, interruptible, String.join(", ", sent));
    } catch (StatusRuntimeException e) {
      noteUnanswered(e, rpc.writtenNanos());
      return withoutSidecar(local, false, chain == null);
    } catch (UnarySender.NotSent e) {
      return withoutSidecar(local, true, chain == null);
    }
    answered();
    Duration retryAfter = Protos.duration(r.getRetryAfter());
    Duration shortestLocal = local.shortestOpen();
    if (chain == null && !r.getAllowed() && shortestLocal != null
        && shortestLocal.compareTo(retryAfter) < 0) {
      retryAfter = shortestLocal; // a dropped dependency reopens sooner
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

  /**
   * What the Watch cache leaves of a list of candidates.
   *
   * @param candidates those it does not refuse, in order
   * @param lastRefusal its last refusal, null if none
   * @param shortestOpen the shortest wait of those it refuses as OPEN, null if none
   */
  private record Filtered(List<String> candidates, List<String> refused, Decision lastRefusal,
      Duration shortestOpen) {}

  private Filtered filter(List<String> dependencies) {
    List<String> candidates = new ArrayList<>(dependencies.size());
    List<String> refused = new ArrayList<>(0);
    Decision lastLocal = null;
    Duration shortestLocal = null;
    for (String dependency : dependencies) {
      Decision local = watch == null ? null : watch.refusal(Objects.requireNonNull(dependency));
      if (local == null) {
        candidates.add(Objects.requireNonNull(dependency));
        continue;
      }
      refused.add(dependency);
      lastLocal = local;
      if (local.reason() == RejectReason.OPEN
          && (shortestLocal == null || local.retryAfter().compareTo(shortestLocal) < 0)) {
        shortestLocal = local.retryAfter();
      }
    }
    return new Filtered(candidates, refused, lastLocal, shortestLocal);
  }

  /**
   * The candidates the Watch cache refused, for breakerd's books: each was a
   * call refused in the client (breakerd counts each candidate of an
   * AcquireFirst it decides the same way).
   */
  private void countRefused(Filtered local) {
    if (batches != null) {
      for (String dependency : local.refused()) {
        batches.refusedLocal(dependency);
      }
    }
  }

  /**
   * An AcquireFirst decided without breakerd: a LOCAL refusal when the Watch
   * cache refuses every candidate, else the fail mode's decision for the first
   * it does not ({@code notSent}: no RPC was made, counted in away_decisions).
   * {@code refusalsCounted}: the cache's refusals were counted for breakerd already.
   */
  private Decision withoutSidecar(Filtered local, boolean notSent, boolean refusalsCounted) {
    checkOpen();
    if (!refusalsCounted) {
      countRefused(local);
    }
    if (local.candidates().isEmpty()) {
      localRejections.increment();
      Decision last = local.lastRefusal();
      Duration wait = local.shortestOpen() == null ? Duration.ZERO : local.shortestOpen();
      return new Decision(false, 0, false, last.state(), last.reason(), wait, "",
          Decision.Source.LOCAL);
    }
    String first = local.candidates().get(0);
    return notSent ? notSent(first) : failed(first);
  }

  /**
   * Reports an allowed decision's outcome. A local grant ({@code ledger} not
   * null): the outcome is put in the next batch, at once, with no RPC. Else
   * sends the Report and waits until it is answered (or counted as an error);
   * never throws for an RPC failure, never heeds the thread's interrupt flag
   * (kept).
   */
  void report(Decision decision, ChainTier chainTier, LocalBatches.Ledger ledger,
      Outcome outcome, long latencyNanos) {
    if (ledger != null) {
      if (batches != null) {
        batches.outcome(ledger, outcome, latencyNanos, chainTier);
      }
      return;
    }
    if (decision.permit() == 0) {
      return; // fail-open: nothing to report against
    }
    UnarySender.joinUninterruptibly(
        sendReport(decision, chainTier, outcome, Duration.ofNanos(latencyNanos), false));
  }

  /**
   * Starts the Report for an allowed decision (when the window has room), with
   * its chain and tier when {@code chainTier} is not null.
   * {@code keep}: sent even while breakerd is away (a late permit going back).
   *
   * @return completes once the Report is answered or counted in report_errors
   */
  private CompletableFuture<Void> sendReport(
      Decision decision, ChainTier chainTier, Outcome outcome, Duration latency, boolean keep) {
    if (decision.permit() == 0) {
      return CompletableFuture.completedFuture(null); // fail-open: nothing to report against
    }
    if (closed.get()) {
      reportErrors.increment(); // not sent: the channel is gone
      return CompletableFuture.completedFuture(null);
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
    if (chainTier != null) {
      req.setChain(chainTier.chain()).setTier(chainTier.tier());
    }
    HeldReport report = new HeldReport(decision, req.build());
    if (away.get() && !keep) {
      hold(report); // away: it would wait out the timeout; sent once breakerd is back
      return CompletableFuture.completedFuture(null);
    }
    return sendReport(report, keep);
  }

  /**
   * Sends {@code report} through the window. One the window does not send
   * because breakerd is away meanwhile is held; one not sent because the
   * client closed, or that fails, is counted in report_errors.
   */
  private CompletableFuture<Void> sendReport(HeldReport report, boolean keep) {
    return sender.send(sender.newRpc(BreakerGrpc.getReportMethod(), report.request(), keep, null))
        .handle((ok, error) -> {
          if (error instanceof UnarySender.NotSent && !closed.get()) {
            hold(report); // marked away while it waited for a place
          } else {
            reported(report.decision(), error);
          }
          return null;
        });
  }

  /** A Report made while breakerd is away, and the decision it is for. */
  private record HeldReport(Decision decision, ReportRequest request) {}

  /**
   * Holds {@code report} until breakerd is back; past {@value HeldReports#LIMIT}
   * held, the oldest is given up (counted in report_errors). Not an error itself.
   */
  private void hold(HeldReport report) {
    HeldReport dropped = held.add(report);
    if (dropped != null) {
      reportErrors.increment();
      if (!reportLog.isWrong()) {
        reportLog.wrong(Level.WARNING, "breakerd at " + target + " is away and "
            + HeldReports.LIMIT + " Reports are held: the oldest, for "
            + dropped.decision().dependency() + ", is dropped (counted in report_errors;"
            + " logged again when Reports work again)");
      }
    }
    // Back (or closed) since the caller looked: heardFrom()/close() may have
    // taken the held reports before this one was added.
    if (closed.get()) {
      dropHeld();
    } else if (!away.get()) {
      sendHeld();
    }
  }

  /**
   * breakerd is back: sends the held reports, in the order they were made,
   * from the client's own thread (not some unrelated caller's).
   */
  private void sendHeld() {
    try {
      scheduler.execute(() -> {
        for (HeldReport report : held.takeAll()) {
          sendReport(report, false); // away again meanwhile: held again
        }
      });
    } catch (RejectedExecutionException clientClosed) {
      dropHeld();
    }
  }

  /** The client is closed: the held reports are given up, counted in report_errors. */
  private void dropHeld() {
    reportErrors.add(held.takeAll().size());
  }

  /** Counts and logs how a Report ended ({@code error} null: accepted). */
  private void reported(Decision decision, Throwable error) {
    if (error == null) {
      if (reportLog.isWrong()) {
        reportLog.right(Level.INFO, "breakerd at " + target + " accepts Reports again");
      }
      return;
    }
    reportErrors.increment();
    if (error instanceof StatusRuntimeException e && !reportLog.isWrong()) {
      reportLog.wrong(Level.WARNING, "breakerd at " + target + " did not take a Report for "
          + decision.dependency() + ": " + Protos.describe(e.getStatus())
          + " (counted in report_errors; logged again when Reports work again)");
    }
  }

  /**
   * The permit of an Acquire whose caller stopped waiting (its timeout, or an
   * interrupt) before the answer came: reported CANCELLED (neutral), without
   * waiting, even while breakerd is away, so that breakerd does not hold it (a
   * lost probe permit would refuse the dependency for its lease).
   */
  private void latePermit(String dependency, long permit, long startNanos, ChainTier chainTier) {
    Decision late = new Decision(true, permit, false, State.UNKNOWN, RejectReason.NONE,
        Duration.ZERO, dependency, Decision.Source.SIDECAR);
    sendReport(late, chainTier, Outcome.cancelled(),
        Duration.ofNanos(System.nanoTime() - startNanos), true);
  }

  /** Sends one ReportBatch (outside the window: one is in flight at a time). */
  private CompletableFuture<ReportBatchResponse> sendBatch(
      ReportBatchRequest request, long deadlineNanos) {
    CompletableFuture<ReportBatchResponse> answer = new CompletableFuture<>();
    batchStub.withDeadlineAfter(deadlineNanos, TimeUnit.NANOSECONDS)
        .reportBatch(request, new StreamObserver<ReportBatchResponse>() {
          @Override
          public void onNext(ReportBatchResponse response) {
            answer.complete(response);
          }

          @Override
          public void onError(Throwable error) {
            answer.completeExceptionally(error);
          }

          @Override
          public void onCompleted() {
            answer.completeExceptionally(
                Status.INTERNAL.withDescription("no ReportBatch response").asRuntimeException());
          }
        });
    return answer;
  }

  /** Runs {@code task} on the client's thread after {@code delayNanos}; dropped once closed. */
  private void schedule(Runnable task, long delayNanos) {
    try {
      scheduler.schedule(task, delayNanos, TimeUnit.NANOSECONDS);
    } catch (RejectedExecutionException closed) {
      // the client is closed: close() sent what was left
    }
  }

  /** A rate-limited log of one condition's changes, written on the client's thread. */
  private ChangeLog newChangeLog() {
    return new ChangeLog(ChangeLog.INTERVAL, System::nanoTime,
        (task, delayNanos) -> {
          try {
            scheduler.schedule(task, delayNanos, TimeUnit.NANOSECONDS);
          } catch (RejectedExecutionException closed) {
            // the client is closed: the held-back line is dropped
          }
        },
        this::logLater);
  }

  /**
   * Writes a line on the client's thread, in order: a decision never waits for
   * the logger (a JVM's first java.util.logging line takes ~100 ms).
   */
  private void logLater(Level level, String message) {
    try {
      scheduler.execute(() -> LOG.log(level, message));
    } catch (RejectedExecutionException closed) {
      LOG.log(level, message);
    }
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
    if (away.get() && away.compareAndSet(true, false)) {
      sendHeld();
      if (batches != null) {
        batches.wake(); // decisions counted while away, and batches held back
      }
    }
    if (sidecarLog.isWrong()) {
      sidecarLog.right(Level.INFO,
          "breakerd at " + target + " is back (" + how + "): decisions go to it again");
    }
  }

  /**
   * The decision for an Acquire or AcquireFirst that failed with {@code e}; the
   * RPC's request was written at {@code writtenNanos}. UNAVAILABLE, or a
   * timeout with no answer from breakerd to any RPC since that write, marks
   * breakerd away; a timeout while breakerd answered others meanwhile is one
   * late answer: only this decision fails open.
   */
  private Decision unanswered(StatusRuntimeException e, String dependency, long writtenNanos) {
    noteUnanswered(e, writtenNanos);
    return failed(dependency);
  }

  /**
   * {@link #unanswered}'s bookkeeping: throws for INVALID_ARGUMENT (and when
   * closed), marks breakerd away or logs the late answer.
   */
  private void noteUnanswered(StatusRuntimeException e, long writtenNanos) {
    checkOpen(); // closed meanwhile: the channel's shutdown failed the RPC
    Status status = e.getStatus();
    Status.Code code = status.getCode();
    if (code == Status.Code.INVALID_ARGUMENT) {
      throw new IllegalArgumentException("breakerd: " + status.getDescription(), e);
    }
    String failing = failMode == FailMode.OPEN ? "open" : "closed";
    boolean late = code == Status.Code.DEADLINE_EXCEEDED && sender.answeredSince(writtenNanos);
    if (late) {
      if (!sidecarLog.isWrong()) {
        sidecarLog.wrong(Level.WARNING, "breakerd at " + target + " answered late ("
            + Protos.describe(status) + "; it answered other calls meanwhile, so it is not"
            + " marked away): that decision failed " + failing);
      }
    } else if ((code == Status.Code.DEADLINE_EXCEEDED || code == Status.Code.UNAVAILABLE)
        && away.compareAndSet(false, true)) {
      sidecarLog.wrong(Level.WARNING, "breakerd at " + target + " did not answer ("
          + Protos.describe(status) + "): away, failing " + failing
          + " without RPCs until a health check or the Watch stream hears from it");
      window.flush(); // callers waiting for a place: answered now from the fail mode
      startProbing();
    } else if (!sidecarLog.isWrong()) {
      sidecarLog.wrong(Level.WARNING, "breakerd at " + target + " did not answer ("
          + Protos.describe(status) + "): failing " + failing + " until it does");
    }
  }

  /** A decision made without an RPC: away (counted), or closed (thrown). */
  private Decision notSent(String dependency) {
    checkOpen();
    awayDecisions.increment();
    return failed(dependency);
  }

  /** @throws ClientClosedException if {@link #close()} was called */
  private void checkOpen() {
    if (closed.get()) {
      throw new ClientClosedException(target);
    }
  }

  /** A decision for acquire/acquireFirst, whose wait ignores interrupts. */
  private static Decision uninterruptibly(InterruptibleDecision decision) {
    try {
      return decision.get();
    } catch (InterruptedException e) {
      throw new AssertionError("an uninterruptible wait was interrupted", e);
    }
  }

  @FunctionalInterface
  private interface InterruptibleDecision {
    Decision get() throws InterruptedException;
  }

  /** The FAIL_OPEN (or FAIL_CLOSED) decision, counted. */
  private Decision failed(String dependency) {
    if (failMode == FailMode.OPEN) {
      failOpen.increment();
      if (batches != null) {
        batches.failOpen(dependency);
      }
      return new Decision(true, 0, false, State.UNKNOWN, RejectReason.NONE, Duration.ZERO,
          dependency, Decision.Source.FAIL_OPEN);
    }
    failClosed.increment();
    if (batches != null) {
      batches.failClosed(dependency);
    }
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

  /**
   * How one guarded try ended.
   *
   * @param classifierFailed the classifier threw: {@code error} is its exception
   */
  private record Attempt<T>(T value, Throwable error, Outcome outcome, boolean classifierFailed) {
    /** Whether a retry or the next dependency of a chain may help. */
    boolean worthAnotherTry() {
      return !classifierFailed && outcome.isRetryable();
    }

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
   * Runs one guarded try and reports it, exactly once. A thread interrupted by
   * the time the permit is granted does not make the call: the permit is
   * reported CANCELLED and the try ends with an {@link InterruptedException}
   * (the flag cleared, as that exception means). A classifier that throws
   * does not lose the permit: it is reported as {@link Classifier#standard()}
   * classifies the call, and the try ends with the classifier's exception (the
   * call's own error, if any, attached as suppressed).
   */
  private static <T> Attempt<T> run(
      Permit permit, Callable<T> call, Classifier<? super T> classifier) {
    if (Thread.interrupted()) {
      Outcome cancelled = Outcome.cancelled();
      permit.report(cancelled);
      return new Attempt<>(null, Permit.interruptedBeforeCall(permit), cancelled, false);
    }
    T value;
    try {
      value = call.call();
    } catch (Throwable t) {
      Outcome outcome;
      try {
        outcome = Permit.errorOutcome(classifier, t);
      } catch (RuntimeException | Error classifierError) {
        Outcome standard = Permit.errorOutcome(Classifier.standard(), t);
        permit.report(standard);
        classifierError.addSuppressed(t);
        return new Attempt<>(null, classifierError, standard, true);
      }
      permit.report(outcome);
      return new Attempt<>(null, t, outcome, false);
    }
    Outcome outcome;
    try {
      outcome = classifier.onResult(value);
    } catch (RuntimeException | Error classifierError) {
      Outcome standard = Classifier.standard().onResult(value);
      permit.report(standard);
      return new Attempt<>(null, classifierError, standard, true);
    }
    permit.report(outcome);
    return new Attempt<>(value, null, outcome, false);
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
    private boolean localDecisions = true;
    private Duration flushInterval = DEFAULT_FLUSH_INTERVAL;

    private Builder() {}

    /**
     * breakerd's gRPC address: {@code host:port} or {@code unix:/path}. Default:
     * the environment variable {@code BREAKERD_ADDR}, else {@value BreakerdClient#DEFAULT_TARGET}.
     */
    public Builder target(String target) {
      this.target = Objects.requireNonNull(target, "target");
      return this;
    }

    /**
     * How long each Acquire, AcquireFirst and Report waits for breakerd's
     * answer, from when its request is written to the connection. Default 20 ms.
     */
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
     * timed out or found breakerd unavailable); nothing runs while it
     * is present. Default 100 ms.
     */
    public Builder awayProbeInterval(Duration interval) {
      if (interval.isNegative() || interval.isZero()) {
        throw new IllegalArgumentException("awayProbeInterval must be positive, got " + interval);
      }
      this.awayProbeInterval = interval;
      return this;
    }

    /**
     * Whether first attempts may be granted in the client, with no RPC, while
     * the Watch cache says the breaker is CLOSED and breakerd allows local
     * decisions for it (its event's {@code local_decisions}); what happened is
     * sent to breakerd in batches. Needs {@link #watch(boolean) watch} (off
     * without it). Off: every decision the cache does not refuse goes to
     * breakerd. Default true.
     */
    public Builder localDecisions(boolean localDecisions) {
      this.localDecisions = localDecisions;
      return this;
    }

    /**
     * How often the local decisions made since the last batch are sent to
     * breakerd, while there are some (nothing runs while there are none); a
     * batch holding 1,000 outcomes goes at once. Default 5 ms.
     */
    public Builder flushInterval(Duration interval) {
      if (interval.isNegative() || interval.isZero()) {
        throw new IllegalArgumentException("flushInterval must be positive, got " + interval);
      }
      this.flushInterval = interval;
      return this;
    }

    /** Builds the client; it connects in the background (no call blocks on it). */
    public BreakerdClient build() {
      return new BreakerdClient(this);
    }
  }
}

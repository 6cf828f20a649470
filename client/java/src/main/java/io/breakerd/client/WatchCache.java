package io.breakerd.client;

import io.breakerd.v1.BreakerGrpc;
import io.breakerd.v1.StateChange;
import io.breakerd.v1.WatchRequest;
import io.grpc.ManagedChannel;
import io.grpc.Status;
import io.grpc.stub.ClientCallStreamObserver;
import io.grpc.stub.ClientResponseObserver;
import java.lang.System.Logger.Level;
import java.time.Duration;
import java.util.Optional;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.LongAdder;

/**
 * One Watch stream over every dependency and the cache it feeds:
 * {@code dependency -> (state, mode, local_decisions, generation, open_until)}.
 * An event older than the one the cache holds for its dependency (a lower
 * generation) is ignored; an equal generation is applied (a {@code reload} or
 * {@code ramp_done} event changes the mode or {@code local_decisions} without
 * a transition); {@code created} adds an entry and {@code evicted} removes it.
 * When the stream ends or fails the cache is cleared at once and the stream is
 * started again after a full-jitter backoff, so an entry exists only while the
 * stream is live. With local decisions on, an entry that is CLOSED with
 * {@code local_decisions} true and not in shadow mode carries the
 * {@link LocalBatches.Ledger} its local grants are counted in (kept by
 * equal-generation events). Thread-safe.
 */
final class WatchCache {
  /** The one mode that never refuses; any other (empty, from an older breakerd) enforces. */
  private static final String SHADOW = "shadow";
  /** The notice that a breaker is gone: forget the dependency. */
  private static final String EVICTED = "evicted";

  /**
   * What the stream last said about one dependency.
   *
   * @param generation the breaker's generation (unsigned) of that event
   * @param openUntilNanos when state is OPEN: System.nanoTime() at which the cooldown ends
   * @param local whether first attempts may be granted locally (see the class comment)
   * @param ledger where this generation's local grants are counted: non-null when
   *     {@code local}, and kept by equal-generation events that turn it off
   */
  private record Entry(State state, boolean shadow, long generation, long openUntilNanos,
      boolean local, LocalBatches.Ledger ledger) {}

  private final ConcurrentHashMap<String, Entry> entries = new ConcurrentHashMap<>();
  private final ManagedChannel channel;
  private final BreakerGrpc.BreakerStub stub;
  private final ScheduledExecutorService scheduler;
  private final long backoffBaseNanos;
  private final long backoffMaxNanos;
  private final LongAdder reconnects;
  private final String target;
  private final Runnable onMessage; // after each message: breakerd is there
  private final ChangeLog log; // "ended" / "back", rate limited
  private final boolean localDecisions; // entries that allow it get a ledger

  private final Object lock = new Object();
  private ClientCallStreamObserver<WatchRequest> current; // guarded by lock
  private boolean closed; // guarded by lock
  private int failures; // guarded by lock: stream ends since the last message
  private boolean up; // guarded by lock: a message arrived on the current stream
  private boolean down; // guarded by lock: "ended" was logged, "back" was not yet

  /**
   * A cache fed by a stream on {@code channel} once {@link #start()} is called;
   * reconnects are scheduled on {@code scheduler} and counted in
   * {@code reconnects}; {@code onMessage} runs after every event received;
   * "ended" and "back" go to {@code log}. {@code localDecisions}: keep a
   * ledger for the entries that allow local grants.
   */
  WatchCache(
      ManagedChannel channel,
      ScheduledExecutorService scheduler,
      Duration backoffBase,
      Duration backoffMax,
      LongAdder reconnects,
      String target,
      Runnable onMessage,
      ChangeLog log,
      boolean localDecisions) {
    this.channel = channel;
    this.stub = BreakerGrpc.newStub(channel);
    this.scheduler = scheduler;
    this.backoffBaseNanos = backoffBase.toNanos();
    this.backoffMaxNanos = backoffMax.toNanos();
    this.reconnects = reconnects;
    this.target = target;
    this.onMessage = onMessage;
    this.log = log;
    this.localDecisions = localDecisions;
  }

  void start() {
    connect();
  }

  /**
   * A local refusal for {@code dependency}, or null when the call must go to
   * breakerd: refused while the cache says FORCED_OPEN, or OPEN with time left,
   * unless the breaker is in shadow mode (breakerd allows all its calls).
   */
  Decision refusal(String dependency) {
    Entry e = entries.get(dependency);
    if (e == null || e.shadow) {
      return null;
    }
    if (e.state == State.FORCED_OPEN) {
      return refused(dependency, State.FORCED_OPEN, RejectReason.FORCED_OPEN, 0);
    }
    if (e.state == State.OPEN) {
      long left = e.openUntilNanos - System.nanoTime();
      if (left > 0) {
        return refused(dependency, State.OPEN, RejectReason.OPEN, left);
      }
    }
    return null;
  }

  /**
   * The ledger to grant a first attempt to {@code dependency} under, or null
   * when the cache does not allow a local grant (no entry, not CLOSED,
   * {@code local_decisions} false, shadow mode, or local decisions off).
   */
  LocalBatches.Ledger ledger(String dependency) {
    Entry e = entries.get(dependency);
    return e == null || !e.local ? null : e.ledger;
  }

  /** The state the stream last reported for {@code dependency}, if any. */
  Optional<State> state(String dependency) {
    Entry e = entries.get(dependency);
    return e == null ? Optional.empty() : Optional.of(e.state);
  }

  void close() {
    ClientCallStreamObserver<WatchRequest> call;
    synchronized (lock) {
      closed = true;
      call = current;
      current = null;
    }
    if (call != null) {
      call.cancel("client closed", null);
    }
    entries.clear();
  }

  private static Decision refused(String dependency, State state, RejectReason reason, long nanos) {
    return new Decision(
        false, 0, false, state, reason, Duration.ofNanos(nanos), dependency,
        Decision.Source.LOCAL);
  }

  private void connect() {
    synchronized (lock) {
      if (closed) {
        return;
      }
    }
    stub.watch(WatchRequest.getDefaultInstance(), new Observer());
  }

  /**
   * Records one event of the stream, unless the cache already holds a later
   * generation for its dependency: {@code evicted} removes the entry, any
   * other event replaces it. Called by the stream; package-private for tests.
   */
  void apply(StateChange change) {
    long generation = change.getGeneration();
    if (EVICTED.equals(change.getReason())) {
      entries.computeIfPresent(change.getDependency(), (dependency, held) ->
          Long.compareUnsigned(generation, held.generation) < 0 ? held : null);
      return;
    }
    State state = Protos.state(change.getState());
    long openUntil = state == State.OPEN
        ? System.nanoTime() + Protos.duration(change.getRetryAfter()).toNanos() : 0;
    boolean shadow = SHADOW.equals(change.getMode());
    boolean local = localDecisions && change.getLocalDecisions() && state == State.CLOSED
        && !shadow;
    entries.compute(change.getDependency(), (dependency, held) -> {
      if (held != null && Long.compareUnsigned(generation, held.generation) < 0) {
        return held;
      }
      // The same generation keeps its ledger: its grants and outcomes go on.
      LocalBatches.Ledger ledger =
          held != null && held.generation == generation ? held.ledger : null;
      if (local && ledger == null) {
        ledger = new LocalBatches.Ledger(dependency, generation);
      }
      return new Entry(state, shadow, generation, openUntil, local, ledger);
    });
  }

  private void ended(Throwable error) {
    entries.clear();
    synchronized (lock) {
      current = null;
      if (closed) {
        return;
      }
      if (up) {
        down = true;
        String why = error == null ? "completed" : Protos.describe(Status.fromThrowable(error));
        log.wrong(Level.WARNING, "breakerd Watch stream to " + target + " ended (" + why
            + "): local refusals off until it is back");
      }
      up = false;
      reconnects.increment();
      long cap = backoffBaseNanos << Math.min(failures, 20);
      cap = cap <= 0 || cap > backoffMaxNanos ? backoffMaxNanos : cap;
      failures++;
      long delay = ThreadLocalRandom.current().nextLong(cap + 1);
      scheduler.schedule(this::reconnect, delay, TimeUnit.NANOSECONDS);
    }
  }

  private void reconnect() {
    // The channel has its own (slower) reconnect backoff; follow ours instead.
    channel.resetConnectBackoff();
    connect();
  }

  private final class Observer implements ClientResponseObserver<WatchRequest, StateChange> {
    private boolean received; // callbacks of one call are serialized

    @Override
    public void beforeStart(ClientCallStreamObserver<WatchRequest> call) {
      synchronized (lock) {
        current = call;
      }
    }

    @Override
    public void onNext(StateChange change) {
      if (!received) {
        received = true;
        synchronized (lock) {
          failures = 0;
          if (down) {
            down = false;
            log.right(Level.INFO, "breakerd Watch stream to " + target + " is back");
          }
          up = true;
        }
      }
      apply(change);
      onMessage.run();
    }

    @Override
    public void onError(Throwable error) {
      ended(error);
    }

    @Override
    public void onCompleted() {
      ended(null);
    }
  }
}

package io.breakerd.client;

import io.breakerd.v1.ChainDecision;
import io.breakerd.v1.ClientDecisions;
import io.breakerd.v1.DependencyBatch;
import io.breakerd.v1.LocalOutcome;
import io.breakerd.v1.ReportBatchRequest;
import io.breakerd.v1.ReportBatchResponse;
import java.lang.System.Logger.Level;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.LongAdder;
import java.util.function.BooleanSupplier;

/**
 * What a client decided without breakerd, on its way to breakerd in
 * {@code ReportBatch} requests (client README, "Local decisions"): per
 * dependency and generation the first attempts granted locally and the
 * outcomes of those calls ({@link Ledger}), the chain decisions made locally,
 * and per dependency the local refusals and fail-open / fail-closed
 * decisions.
 *
 * <p>A request is sent every flush interval while there is something to
 * send (nothing runs while there is not), at once when 1,000 outcomes wait,
 * and at {@link #close}. One request is in flight at a time. A request that
 * fails is sent again unchanged (same sequence: breakerd applies it once) at
 * the next flush, at most {@value #MAX_SENDS} times, then dropped; no newer
 * request is built before it is acknowledged or dropped, so a batch's
 * outcomes never reach breakerd before the grants they belong to. At most
 * {@value #MAX_UNACKED} outcomes are held unacknowledged; one past that, one
 * recorded while breakerd is away or after close, and those of a dropped
 * request are counted in {@link #dropped()}. Nothing is sent while breakerd is
 * away: the client decisions made meanwhile wait for {@link #wake()}.
 *
 * <p>Thread-safe. The recording methods ({@link #grant}, {@link #outcome},
 * {@link #refusedLocal} ...) never block on I/O: they take a short lock of
 * their own ledger or counter and at most schedule a flush.
 */
final class LocalBatches {
  /** breakerd's limit on outcomes in one ReportBatch. */
  static final int MAX_OUTCOMES = 1000;
  /** breakerd's limit on dependencies, chains and decisions in one ReportBatch. */
  static final int MAX_ENTRIES = 1000;
  /** Outcomes held at most, not yet acknowledged by breakerd. */
  static final int MAX_UNACKED = 10_000;
  /** Sends of one request at most (the first and two more). */
  static final int MAX_SENDS = 3;

  /** Sends one request; completes with breakerd's answer or the RPC's failure. */
  interface Transport {
    CompletableFuture<ReportBatchResponse> send(ReportBatchRequest request, long deadlineNanos);
  }

  /**
   * The grants and outcomes of one dependency at one generation (the Watch
   * event the client decided on) not yet taken into a request, and the
   * decision every local grant under it returns. One per Watch cache entry
   * that allows local grants; equal-generation events keep it. Thread-safe.
   */
  static final class Ledger {
    // Constant after construction.
    final String dependency;
    final long generation;
    /** What a local grant returns: allowed, permit 0, CLOSED, source LOCAL. */
    final Decision decision;

    /** Grants not yet taken; changed only through {@link #GRANTS}. */
    private volatile int grants;
    /** Outcomes held, oldest first, in chunks; only the last one is appended to. */
    private final ArrayDeque<Chunk> chunks = new ArrayDeque<>(); // guarded by this
    /**
     * In the batches' queue of ledgers with something to send (set by
     * compare-and-set, so it is queued once per take; cleared by take).
     */
    private volatile boolean queued;

    private static final VarHandle GRANTS;
    private static final VarHandle QUEUED;

    static {
      try {
        MethodHandles.Lookup lookup = MethodHandles.lookup();
        GRANTS = lookup.findVarHandle(Ledger.class, "grants", int.class);
        QUEUED = lookup.findVarHandle(Ledger.class, "queued", boolean.class);
      } catch (ReflectiveOperationException e) {
        throw new ExceptionInInitializerError(e);
      }
    }

    Ledger(String dependency, long generation) {
      this.dependency = dependency;
      this.generation = generation;
      this.decision = new Decision(true, 0, false, State.CLOSED, RejectReason.NONE, Duration.ZERO,
          dependency, Decision.Source.LOCAL);
    }

    /** @return whether the caller must queue this ledger (it had nothing to send) */
    boolean addGrant() {
      GRANTS.getAndAdd(this, 1);
      return markQueued();
    }

    /** @return whether the caller must queue this ledger */
    boolean addOutcome(Outcome outcome, long latencyNanos, ChainTier chainTier) {
      synchronized (this) {
        Chunk last = chunks.peekLast();
        if (last == null || last.end == Chunk.SIZE) {
          last = new Chunk();
          chunks.addLast(last);
        }
        last.outcomes[last.end] = outcome;
        last.latencies[last.end] = latencyNanos;
        last.chains[last.end] = chainTier;
        last.end++;
      }
      return markQueued();
    }

    private boolean markQueued() {
      return !queued && QUEUED.compareAndSet(this, false, true);
    }

    /**
     * Takes the grants and at most {@code room} outcomes (the oldest); the
     * ledger stays queued when outcomes are left. Whole chunks change hands
     * (at most one is split, copying less than a chunk), so the callers
     * appending meanwhile wait for no large copy.
     */
    Taken take(int room) {
      // Cleared first: what is added from now on queues the ledger again.
      queued = false;
      List<Chunk> taken;
      int n = 0;
      boolean more;
      synchronized (this) {
        taken = new ArrayList<>(chunks.size());
        while (n < room && !chunks.isEmpty()) {
          Chunk first = chunks.peekFirst();
          int size = first.end - first.start;
          if (size <= room - n) {
            taken.add(chunks.pollFirst());
            n += size;
          } else {
            taken.add(first.split(room - n));
            n = room;
          }
        }
        more = !chunks.isEmpty();
      }
      // Read after the outcomes: the grant of every outcome taken is in it.
      int g = (int) GRANTS.getAndSet(this, 0);
      return new Taken(g, n, taken, more && markQueued());
    }

    /**
     * What {@link #take} took: {@code count} outcomes in {@code chunks};
     * {@code more}: outcomes were left and the caller must queue the ledger again.
     */
    record Taken(int grants, int count, List<Chunk> chunks, boolean more) {}
  }

  /** Outcomes {@code [start, end)} of one ledger, in arrival order. */
  static final class Chunk {
    static final int SIZE = 256;
    final Outcome[] outcomes = new Outcome[SIZE];
    final long[] latencies = new long[SIZE];
    final ChainTier[] chains = new ChainTier[SIZE]; // null outside named chains
    int start;
    int end;

    /** Moves the first {@code n} (fewer than held) into a new chunk. */
    Chunk split(int n) {
      Chunk head = new Chunk();
      System.arraycopy(outcomes, start, head.outcomes, 0, n);
      System.arraycopy(latencies, start, head.latencies, 0, n);
      System.arraycopy(chains, start, head.chains, 0, n);
      head.end = n;
      Arrays.fill(outcomes, start, start + n, null);
      Arrays.fill(chains, start, start + n, null);
      start += n;
      return head;
    }
  }

  /** A request built and not yet acknowledged. */
  private static final class Pending {
    final ReportBatchRequest request;
    final int outcomes;
    int sends; // guarded by LocalBatches.lock

    Pending(ReportBatchRequest request, int outcomes) {
      this.request = request;
      this.outcomes = outcomes;
    }
  }

  /** One dependency's decisions made without breakerd since the last request. */
  private static final class Counts {
    int refusedLocal; // guarded by this
    int failOpen; // guarded by this
    int failClosed; // guarded by this
    boolean removed; // guarded by this: no longer in the map; count in a new one

    synchronized boolean isEmpty() {
      return refusedLocal == 0 && failOpen == 0 && failClosed == 0;
    }
  }

  private static final int REFUSED_LOCAL = 0;
  private static final int FAIL_OPEN = 1;
  private static final int FAIL_CLOSED = 2;

  // Constant after construction.
  private final String clientId;
  private final long flushIntervalNanos;
  private final long deadlineNanos;
  private final Transport transport;
  private final ChangeLog.Timer timer;
  private final Runnable flushNow; // runs flush() at once on the timer's thread
  private final BooleanSupplier away;
  private final ChangeLog log;

  /** Ledgers with something to send, each at most once. */
  private final ConcurrentLinkedQueue<Ledger> queue = new ConcurrentLinkedQueue<>();
  private final ConcurrentHashMap<String, Counts> decisions = new ConcurrentHashMap<>();
  private final HashMap<ChainTier, Integer> chains = new HashMap<>(); // guarded by itself
  /** Outcomes in ledgers (not yet in a request). */
  private final AtomicInteger queuedOutcomes = new AtomicInteger();
  /** Outcomes in the pending request; written under lock. */
  private volatile int pendingOutcomes;
  private final LongAdder dropped = new LongAdder();
  private final AtomicBoolean flushScheduled = new AtomicBoolean();
  /** A flush was asked for at once (1,000 outcomes wait); cleared when a request is built. */
  private final AtomicBoolean urgent = new AtomicBoolean();
  /** Set by close: outcomes recorded from now on are dropped. */
  private volatile boolean closing;

  private final Object lock = new Object();
  private long sequence; // guarded by lock: the last one used
  private Pending pending; // guarded by lock
  private boolean inFlight; // guarded by lock
  private boolean closed; // guarded by lock

  /**
   * Batches sent by {@code transport} with a deadline of {@code deadline}
   * each, every {@code flushInterval} while there is something to send, on
   * {@code timer} ({@code flushNow} runs its task at once on the same
   * thread). Nothing is sent while {@code away}; dropped requests go to
   * {@code log}.
   */
  LocalBatches(String clientId, Duration flushInterval, Duration deadline, Transport transport,
      ChangeLog.Timer timer, BooleanSupplier away, ChangeLog log) {
    this.clientId = Names.check(clientId, "client_id");
    this.flushIntervalNanos = flushInterval.toNanos();
    this.deadlineNanos = deadline.toNanos();
    this.transport = transport;
    this.timer = timer;
    this.flushNow = () -> timer.schedule(this::flush, 0);
    this.away = away;
    this.log = log;
  }

  /**
   * A client id as the contract names it: {@code <language>-<pid>-<8 random
   * hex digits>}, fixed for the client's life.
   */
  static String newClientId() {
    return String.format("java-%d-%08x", ProcessHandle.current().pid(),
        ThreadLocalRandom.current().nextInt());
  }

  String clientId() {
    return clientId;
  }

  /**
   * Outcomes dropped: past the bound, while breakerd was away, after close, or
   * in a dropped request.
   */
  long dropped() {
    return dropped.sum();
  }

  // --- recording (the callers' threads) ---

  /** A first attempt granted locally under {@code ledger}. */
  void grant(Ledger ledger) {
    if (ledger.addGrant()) {
      queue.add(ledger);
      requestFlush();
    }
  }

  /** The outcome of a call granted locally under {@code ledger}; {@code chainTier} may be null. */
  void outcome(Ledger ledger, Outcome outcome, long latencyNanos, ChainTier chainTier) {
    if (closing || away.getAsBoolean()
        || queuedOutcomes.get() + pendingOutcomes >= MAX_UNACKED) { // full: no atomic write
      dropped.increment();
      return;
    }
    int queued = queuedOutcomes.incrementAndGet();
    if (queued + pendingOutcomes > MAX_UNACKED) {
      queuedOutcomes.decrementAndGet();
      dropped.increment();
      return;
    }
    if (ledger.addOutcome(outcome, Math.max(0, latencyNanos), chainTier)) {
      queue.add(ledger);
    }
    if (queued >= MAX_OUTCOMES) {
      if (!urgent.get() && urgent.compareAndSet(false, true)) {
        flushNow.run();
      }
    } else {
      requestFlush();
    }
  }

  /** A named chain's candidate at {@code chainTier} was granted locally. */
  void chainGrant(ChainTier chainTier) {
    synchronized (chains) {
      chains.merge(chainTier, 1, Integer::sum);
    }
    requestFlush();
  }

  /** The Watch cache refused a call to {@code dependency}. */
  void refusedLocal(String dependency) {
    count(dependency, REFUSED_LOCAL);
  }

  /** A call to {@code dependency} was allowed because breakerd could not answer. */
  void failOpen(String dependency) {
    count(dependency, FAIL_OPEN);
  }

  /** A call to {@code dependency} was refused because breakerd could not answer. */
  void failClosed(String dependency) {
    count(dependency, FAIL_CLOSED);
  }

  private void count(String dependency, int which) {
    while (true) {
      Counts c = decisions.get(dependency);
      if (c == null) {
        c = decisions.computeIfAbsent(dependency, d -> new Counts());
      }
      synchronized (c) {
        if (!c.removed) {
          switch (which) {
            case REFUSED_LOCAL -> c.refusedLocal++;
            case FAIL_OPEN -> c.failOpen++;
            default -> c.failClosed++;
          }
          break;
        }
      }
    }
    requestFlush();
  }

  /** breakerd answers again: what waited while it was away goes out. */
  void wake() {
    if (hasWork()) {
      requestFlush();
    }
  }

  // --- sending (the timer's thread, and gRPC's for answers) ---

  private void requestFlush() {
    if (!flushScheduled.get() && flushScheduled.compareAndSet(false, true)) {
      timer.schedule(this::scheduledFlush, flushIntervalNanos);
    }
  }

  private void scheduledFlush() {
    flushScheduled.set(false);
    flush();
  }

  /**
   * Sends the pending request (again), or builds the next one and sends it,
   * unless one is in flight (its answer calls this again), breakerd is away
   * or the batches are closed. Package-private for tests, which run it by hand.
   */
  void flush() {
    Pending p;
    synchronized (lock) {
      if (closed || inFlight || away.getAsBoolean()) {
        return;
      }
      if (pending == null) {
        pending = build();
        if (pending == null) {
          return;
        }
      }
      p = pending;
      p.sends++;
      inFlight = true;
    }
    send(p, deadlineNanos).whenComplete((response, error) -> answered(p, error));
  }

  private CompletableFuture<ReportBatchResponse> send(Pending p, long deadline) {
    try {
      return transport.send(p.request, deadline);
    } catch (RuntimeException e) {
      return CompletableFuture.failedFuture(e);
    }
  }

  private void answered(Pending p, Throwable error) {
    synchronized (lock) {
      inFlight = false;
      settle(p, error);
      lock.notifyAll(); // close() waits for the request in flight
      if (closed) {
        return;
      }
    }
    if (queuedOutcomes.get() >= MAX_OUTCOMES) {
      flushNow.run();
    } else if (hasWork()) {
      requestFlush();
    }
  }

  /**
   * What the end of one send of {@code p} means: acknowledged; failed for the
   * last time (dropped, its outcomes counted); or failed, to be sent again.
   */
  private void settle(Pending p, Throwable error) {
    assert Thread.holdsLock(lock);
    if (pending != p) {
      return;
    }
    if (error == null) {
      pending = null;
      pendingOutcomes = 0;
      if (log.isWrong()) {
        log.right(Level.INFO, "breakerd takes ReportBatch requests again");
      }
      return;
    }
    if (p.sends < MAX_SENDS && !closed) {
      return;
    }
    pending = null;
    pendingOutcomes = 0;
    dropped.add(p.outcomes);
    if (!log.isWrong()) {
      log.wrong(Level.WARNING, "breakerd did not take ReportBatch " + p.request.getSequence()
          + " after " + p.sends + " sends (" + error + "): its " + p.outcomes
          + " outcomes are dropped (counted in dropped_outcomes)");
    }
  }

  private boolean hasWork() {
    if (!queue.isEmpty() || !decisions.isEmpty()) {
      return true;
    }
    synchronized (chains) {
      if (!chains.isEmpty()) {
        return true;
      }
    }
    synchronized (lock) {
      return pending != null;
    }
  }

  /** The next request from what waits, or null when nothing does. */
  private Pending build() {
    assert Thread.holdsLock(lock);
    urgent.set(false);
    ReportBatchRequest.Builder req = ReportBatchRequest.newBuilder().setClientId(clientId);
    int outcomes = 0;
    int entries = 0;
    Ledger ledger;
    while (outcomes < MAX_OUTCOMES && entries < MAX_ENTRIES && (ledger = queue.poll()) != null) {
      Ledger.Taken t = ledger.take(MAX_OUTCOMES - outcomes);
      if (t.more()) {
        queue.add(ledger); // outcomes left for the next request: still queued
      }
      if (t.grants() == 0 && t.count() == 0) {
        continue;
      }
      DependencyBatch.Builder d = req.addDependenciesBuilder()
          .setDependency(ledger.dependency)
          .setGeneration(ledger.generation)
          .setGrants(t.grants());
      for (Chunk c : t.chunks()) {
        for (int i = c.start; i < c.end; i++) {
          d.addOutcomes(localOutcome(c.outcomes[i], c.latencies[i], c.chains[i]));
        }
      }
      outcomes += t.count();
      entries++;
    }
    // The sum of queued and pending never reads low: no outcome slips past the bound.
    pendingOutcomes = outcomes;
    queuedOutcomes.addAndGet(-outcomes);

    synchronized (chains) {
      Iterator<Map.Entry<ChainTier, Integer>> it = chains.entrySet().iterator();
      for (int n = 0; n < MAX_ENTRIES && it.hasNext(); n++) {
        Map.Entry<ChainTier, Integer> e = it.next();
        it.remove();
        req.addChains(ChainDecision.newBuilder()
            .setChain(e.getKey().chain())
            .setTier(e.getKey().tier())
            .setCount(e.getValue()));
      }
    }

    int n = 0;
    for (Map.Entry<String, Counts> e : decisions.entrySet()) {
      if (n >= MAX_ENTRIES) {
        break;
      }
      Counts c = e.getValue();
      synchronized (c) {
        if (c.isEmpty()) {
          c.removed = true; // nothing since the last request: forget the dependency
          decisions.remove(e.getKey(), c);
          continue;
        }
        req.addDecisions(ClientDecisions.newBuilder()
            .setDependency(e.getKey())
            .setRefusedLocal(c.refusedLocal)
            .setFailOpen(c.failOpen)
            .setFailClosed(c.failClosed));
        c.refusedLocal = 0;
        c.failOpen = 0;
        c.failClosed = 0;
      }
      n++;
    }

    if (req.getDependenciesCount() == 0 && req.getChainsCount() == 0
        && req.getDecisionsCount() == 0) {
      return null;
    }
    req.setSequence(++sequence);
    return new Pending(req.build(), outcomes);
  }

  private static LocalOutcome localOutcome(Outcome o, long latencyNanos, ChainTier chainTier) {
    LocalOutcome.Builder b = LocalOutcome.newBuilder()
        .setLatency(com.google.protobuf.Duration.newBuilder()
            .setSeconds(latencyNanos / 1_000_000_000L)
            .setNanos((int) (latencyNanos % 1_000_000_000L)));
    if (o.isExplicit()) {
      b.setOutcome(Protos.outcome(o.kind()));
    } else if (o.httpStatus() != 0) {
      b.setHttpStatus(o.httpStatus());
    } else {
      b.setGrpcCode(o.grpcCode().orElseThrow());
    }
    if (!o.retryAfter().isZero()) {
      b.setRetryAfter(Protos.duration(o.retryAfter()));
    }
    if (chainTier != null) {
      b.setChain(chainTier.chain()).setTier(chainTier.tier());
    }
    return b.build();
  }

  /**
   * Sends what waits, waiting at most {@code waitNanos} in all (first for the
   * request in flight), unless breakerd is away; then drops what is left
   * (its outcomes counted). Later outcomes are dropped. Idempotent.
   */
  void close(long waitNanos) {
    long end = System.nanoTime() + waitNanos;
    closing = true;
    synchronized (lock) {
      if (closed) {
        return;
      }
      closed = true; // scheduled flushes do nothing from now
      try {
        while (inFlight) {
          long left = end - System.nanoTime();
          if (left <= 0) {
            break;
          }
          TimeUnit.NANOSECONDS.timedWait(lock, left);
        }
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        end = System.nanoTime(); // send nothing more
      }
    }
    while (!away.getAsBoolean()) {
      long left = end - System.nanoTime();
      Pending p;
      synchronized (lock) {
        if (inFlight || left <= 0) {
          break;
        }
        if (pending == null) {
          pending = build();
        }
        if (pending == null) {
          break;
        }
        p = pending;
        p.sends++;
      }
      Throwable error = null;
      try {
        send(p, left).get(left, TimeUnit.NANOSECONDS);
      } catch (ExecutionException e) {
        error = e.getCause();
      } catch (TimeoutException e) {
        error = e;
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        error = e;
      }
      synchronized (lock) {
        settle(p, error); // closed: a failure drops it
      }
      if (error != null) {
        break;
      }
    }
    synchronized (lock) {
      if (pending != null) {
        dropped.add(pending.outcomes);
        pending = null;
        pendingOutcomes = 0;
      }
    }
    dropped.add(queuedOutcomes.getAndSet(0));
  }
}

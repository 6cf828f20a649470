package io.breakerd.client;

import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.concurrent.locks.ReentrantLock;

/**
 * How many Acquire, AcquireFirst and Report RPCs a client has on the wire at
 * once, and who waits.
 *
 * <p>breakerd takes at most 256 streams per connection, and a burst of a
 * thousand threads starting RPCs together, each with its 20 ms deadline
 * running from its start, loses most of them to the client's own backlog
 * (the extra streams wait for a place, CPU time goes to the threads) before
 * breakerd has seen them. The window starts at most {@link #LIMIT} RPCs at a
 * time and queues the rest, reports first (they end work already begun and
 * give permits back), then decisions, each lane first in first out; a job's
 * RPC, and so its timeout, starts only when it gets a place, so the timeout
 * measures breakerd, not the burst.
 *
 * <p>Thread-safe. {@link Job#start()} and {@link Job#drop()} run on the thread
 * that submits the job or ends the one before it (a gRPC transport thread),
 * outside the window's lock: they must not block.
 */
final class SendWindow {
  /** RPCs on the wire at most: the same as the Node client's window. */
  static final int LIMIT = 32;

  /** A unit of work waiting for a place in the window. */
  interface Job {
    /** Reports go before decisions. */
    boolean isReport();

    /** Not flushed: a late permit going back to breakerd is sent even while it is away. */
    boolean keep();

    /**
     * Starts the RPC; the job calls {@link SendWindow#done()} exactly once when
     * it no longer holds its place (answered, or its caller's timeout is up).
     * Must not throw.
     */
    void start();

    /** Called instead of {@link #start()} when the job is flushed from the queue. */
    void drop();
  }

  // Constant after construction.
  private final int limit;

  /** Not a monitor: a burst of threads contending would spin on it, not park. */
  private final ReentrantLock lock = new ReentrantLock();
  private int inFlight; // guarded by lock: jobs started and not done
  private final LinkedHashSet<Job> reports = new LinkedHashSet<>(); // guarded by lock
  private final LinkedHashSet<Job> decisions = new LinkedHashSet<>(); // guarded by lock
  /** Jobs to start on this thread once the start in progress returns (no recursion). */
  private final ThreadLocal<ArrayDeque<Job>> starting = new ThreadLocal<>();

  /** REQUIRES: {@code limit >= 1}. */
  SendWindow(int limit) {
    if (limit < 1) {
      throw new IllegalArgumentException("window limit must be >= 1, got " + limit);
    }
    this.limit = limit;
  }

  /** Starts {@code job} now if there is room, else queues it in its lane. */
  void submit(Job job) {
    lock.lock();
    try {
      if (inFlight >= limit) {
        (job.isReport() ? reports : decisions).add(job);
        return;
      }
      inFlight++;
    } finally {
      lock.unlock();
    }
    start(job);
  }

  /**
   * Removes a job still queued (its caller gave up).
   *
   * @return false if it was started or dropped already
   */
  boolean withdraw(Job job) {
    lock.lock();
    try {
      return reports.remove(job) || decisions.remove(job);
    } finally {
      lock.unlock();
    }
  }

  /** A started job no longer holds its place: the next one (reports first) gets it. */
  void done() {
    Job next;
    lock.lock();
    try {
      next = poll(reports);
      if (next == null) {
        next = poll(decisions);
      }
      if (next == null) {
        inFlight--;
        return;
      }
    } finally {
      lock.unlock();
    }
    start(next); // the place passes on: inFlight unchanged
  }

  /**
   * Drops every queued job not marked {@link Job#keep()} (breakerd is away, or
   * the client closed: nothing should wait for it).
   */
  void flush() {
    List<Job> dropped = new ArrayList<>();
    lock.lock();
    try {
      for (LinkedHashSet<Job> lane : List.of(reports, decisions)) {
        for (Iterator<Job> it = lane.iterator(); it.hasNext(); ) {
          Job job = it.next();
          if (!job.keep()) {
            it.remove();
            dropped.add(job);
          }
        }
      }
    } finally {
      lock.unlock();
    }
    dropped.forEach(Job::drop);
  }

  /** Jobs started and not yet done. */
  int active() {
    lock.lock();
    try {
      return inFlight;
    } finally {
      lock.unlock();
    }
  }

  /** Jobs waiting for a place. */
  int queued() {
    lock.lock();
    try {
      return reports.size() + decisions.size();
    } finally {
      lock.unlock();
    }
  }

  /**
   * Runs {@code job.start()}, or, when called from inside a start on this
   * thread (an RPC that failed at once ends its job, which starts the next),
   * leaves it to that outer call: a long queue never grows the stack.
   */
  private void start(Job job) {
    ArrayDeque<Job> pending = starting.get();
    if (pending != null) {
      pending.add(job);
      return;
    }
    pending = new ArrayDeque<>();
    starting.set(pending);
    try {
      for (Job next = job; next != null; next = pending.poll()) {
        next.start();
      }
    } finally {
      starting.remove();
    }
  }

  /** REQUIRES: lock held. */
  private static Job poll(LinkedHashSet<Job> lane) {
    Iterator<Job> it = lane.iterator();
    if (!it.hasNext()) {
      return null;
    }
    Job first = it.next();
    it.remove();
    return first;
  }
}

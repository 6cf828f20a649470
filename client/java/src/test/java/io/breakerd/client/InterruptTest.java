package io.breakerd.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.grpc.Status;
import java.io.InterruptedIOException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.logging.Handler;
import java.util.logging.Level;
import java.util.logging.LogRecord;
import java.util.logging.Logger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.junit.jupiter.api.function.Executable;

/**
 * A cancelled (interrupted) caller still reports its permit, once, as CANCELLED,
 * and its next decision comes from breakerd: the interrupt flag is no reason to
 * fail open, and nothing is logged as if breakerd were unreachable. A caller
 * interrupted while its Acquire is in flight returns at once; the permit that
 * comes later is reported CANCELLED.
 */
class InterruptTest {
  private static final Duration WAIT = Duration.ofSeconds(5);
  /** Held strongly: java.util.logging keeps loggers only weakly. */
  private static final Logger CLIENT_LOG = Logger.getLogger(BreakerdClient.class.getName());

  @RegisterExtension final BreakerdExtension breakerd = new BreakerdExtension();

  private BreakerdServer server;
  private BreakerdClient client;
  private final List<LogRecord> records = new ArrayList<>(); // guarded by itself
  private final Handler capture = new Handler() {
    @Override
    public void publish(LogRecord record) {
      synchronized (records) {
        records.add(record);
      }
    }

    @Override
    public void flush() {}

    @Override
    public void close() {}
  };

  @BeforeEach
  void start() {
    server = breakerd.server();
    client = breakerd.client();
    CLIENT_LOG.addHandler(capture);
  }

  @AfterEach
  void stop() throws Exception {
    CLIENT_LOG.removeHandler(capture);
    Thread.interrupted(); // whatever a test left on the test thread
    server.thaw();
  }

  /** This client's WARNING lines (other tests' clients talk to other ports). */
  private List<String> warnings() {
    List<String> out = new ArrayList<>();
    synchronized (records) {
      for (LogRecord r : records) {
        if (r.getLevel().intValue() >= Level.WARNING.intValue()
            && r.getMessage().contains(client.target())) {
          out.add(r.getMessage());
        }
      }
    }
    return out;
  }

  /**
   * What grpc-java's blocking stub does when its thread is interrupted: ends the
   * call CANCELLED ("Thread interrupted") and leaves the interrupt flag set.
   */
  private static Object blockUntilInterrupted(CountDownLatch started) {
    started.countDown();
    try {
      new CountDownLatch(1).await();
      throw new AssertionError("unreachable");
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw Status.CANCELLED.withDescription("Thread interrupted").withCause(e)
          .asRuntimeException();
    }
  }

  @Test
  void callCancelledWhileItRunsIsReportedCancelledOnceAndTheNextAcquireIsAnswered()
      throws Exception {
    String dep = "interrupt/running";
    CountDownLatch started = new CountDownLatch(1);
    CompletableFuture<Boolean> stillInterrupted = new CompletableFuture<>();
    CompletableFuture<Decision> next = new CompletableFuture<>();
    ExecutorService pool = Executors.newSingleThreadExecutor();
    try {
      Future<?> task = pool.submit(() -> {
        try {
          client.call(dep, () -> blockUntilInterrupted(started));
        } catch (Exception cancelled) {
          // the task was cancelled; it goes on to its next call all the same
        }
        stillInterrupted.complete(Thread.currentThread().isInterrupted());
        try (Permit p = client.acquire(dep)) {
          p.success();
          next.complete(p.decision());
        } catch (Throwable t) {
          next.completeExceptionally(t);
        }
        return null;
      });
      assertTrue(started.await(WAIT.toMillis(), TimeUnit.MILLISECONDS));
      assertTrue(task.cancel(true));

      Decision d = next.get(WAIT.toMillis(), TimeUnit.MILLISECONDS);
      assertTrue(stillInterrupted.get(), "the call left the flag set, as gRPC's blocking stub does");
      assertEquals(Decision.Source.SIDECAR, d.source(), "the next Acquire went to breakerd");
      assertTrue(d.permit() != 0);
    } finally {
      pool.shutdownNow();
      pool.awaitTermination(5, TimeUnit.SECONDS);
    }

    // Both reports arrive (the cancelled one first); exactly one is CANCELLED.
    server.assertReports(dep, "cancelled", 1);
    server.assertReports(dep, "success", 1);
    assertEquals(2, server.reports(dep));
    assertEquals(2, server.acquires(dep));
    Stats stats = client.stats();
    assertEquals(0, stats.reportErrors());
    assertEquals(0, stats.failOpen());
    assertEquals(List.of(), warnings());
  }

  @Test
  void errorThatLeavesTheThreadInterruptedIsCancelledWhateverItIs() throws Exception {
    String dep = "interrupt/io";
    // E.g. an HTTP library that turns the interrupt into an InterruptedIOException
    // and restores the flag: the caller gave up, the upstream did not fail.
    assertThrows(InterruptedIOException.class, () -> client.call(dep, () -> {
      Thread.currentThread().interrupt();
      throw new InterruptedIOException("interrupted while reading");
    }));
    assertTrue(Thread.interrupted(), "the flag is the caller's: kept");
    server.assertReports(dep, "cancelled", 1);
    assertEquals(1, server.reports(dep));
    assertEquals(0, server.status(dep).getConsecutiveFailures());
  }

  @Test
  void guardsOnAnInterruptedThreadThrowAtOnceWithoutAnRpc() throws Exception {
    String dep = "interrupt/before";
    AtomicInteger calls = new AtomicInteger();
    List<Executable> guards = List.of(
        () -> client.call(dep, calls::incrementAndGet),
        () -> client.retry(dep, RetryPolicy.defaults(), calls::incrementAndGet),
        () -> client.first(List.of(dep), d -> calls.incrementAndGet()));
    for (Executable guard : guards) {
      Thread.currentThread().interrupt(); // the caller gave up before the guard
      assertThrows(InterruptedException.class, guard);
      assertFalse(Thread.currentThread().isInterrupted(), "cleared, as InterruptedException means");
    }
    assertEquals(0, calls.get(), "a cancelled caller does not make the call");
    assertEquals(0, server.acquires(dep), "nothing is asked for a caller that gave up");
    assertEquals(0, client.stats().failOpen());
    assertEquals(List.of(), warnings());
  }

  // conformance: cancel-call
  @Test
  void callsCancelledWhileTheyRunAreReportedCancelledOnceAndTheBreakerStaysClosed()
      throws Exception {
    String dep = "interrupt/cancel-call";
    ExecutorService pool = Executors.newSingleThreadExecutor();
    try {
      for (int i = 0; i < 5; i++) {
        // Upstreams give up in both ways Java has: InterruptedException (flag
        // cleared), or another error with the flag kept (gRPC's blocking stub).
        boolean throwsInterrupted = i % 2 == 0;
        CountDownLatch started = new CountDownLatch(1);
        CompletableFuture<String> seen = new CompletableFuture<>();
        Future<?> task = pool.submit(() -> {
          try {
            client.call(dep, () -> {
              if (!throwsInterrupted) {
                return blockUntilInterrupted(started);
              }
              started.countDown();
              new CountDownLatch(1).await();
              return null;
            });
            seen.complete("returned");
          } catch (InterruptedException e) {
            seen.complete("InterruptedException");
          } catch (Throwable t) {
            seen.complete(Thread.currentThread().isInterrupted() ? "flag kept" : t.toString());
          }
        });
        assertTrue(started.await(WAIT.toMillis(), TimeUnit.MILLISECONDS));
        assertTrue(task.cancel(true));
        assertEquals(throwsInterrupted ? "InterruptedException" : "flag kept",
            seen.get(WAIT.toMillis(), TimeUnit.MILLISECONDS), "what the caller saw");
      }
    } finally {
      pool.shutdownNow();
      pool.awaitTermination(5, TimeUnit.SECONDS);
    }
    server.assertReports(dep, "cancelled", 5);
    assertEquals(5, server.reports(dep), "no other class: " + server.samples(dep));
    server.assertEveryPermitReported(dep);
    assertEquals(io.breakerd.v1.State.STATE_CLOSED, server.status(dep).getState());
    assertEquals(0, client.stats().failOpen());
  }

  // conformance: cancel-acquire
  @Test
  void callerInterruptedDuringTheAcquireReturnsAtOnceAndTheLatePermitIsReportedCancelled()
      throws Exception {
    String dep = "interrupt/cancel-acquire";
    AtomicInteger calls = new AtomicInteger();
    CompletableFuture<Throwable> seen = new CompletableFuture<>();
    ExecutorService pool = Executors.newSingleThreadExecutor();
    server.freeze(); // the client's decision timeout is 2 s: the Acquire waits
    try {
      long start = System.nanoTime();
      Future<?> task = pool.submit(() -> {
        try {
          client.call(dep, calls::incrementAndGet);
          seen.complete(null);
        } catch (Throwable t) {
          seen.complete(t);
        }
      });
      sleepUntil(start, 50);
      assertTrue(task.cancel(true));
      // At once: well before breakerd can answer (it continues at 300 ms).
      Throwable t = seen.get(200, TimeUnit.MILLISECONDS);
      assertTrue(t instanceof InterruptedException, "the caller got " + t);
      sleepUntil(start, 300);
    } finally {
      server.thaw();
      pool.shutdownNow();
    }
    assertEquals(0, calls.get(), "the guarded function never runs");
    // The permit breakerd granted after SIGCONT comes back, once, CANCELLED.
    server.assertReports(dep, "cancelled", 1);
    server.assertEveryPermitReported(dep);
    assertEquals(1, server.permitsGranted(dep));
    assertEquals(1, server.reports(dep));
    assertEquals(0, client.stats().failOpen());
  }

  private static void sleepUntil(long startNanos, long millis) throws InterruptedException {
    long left = startNanos + TimeUnit.MILLISECONDS.toNanos(millis) - System.nanoTime();
    if (left > 0) {
      TimeUnit.NANOSECONDS.sleep(left);
    }
  }

  @Test
  void byHandPermitOnAnInterruptedThreadIsAnsweredAndReported() throws Exception {
    String dep = "interrupt/by-hand";
    AtomicInteger calls = new AtomicInteger();
    Thread.currentThread().interrupt();
    try (Permit p = client.acquire(dep)) {
      assertEquals(Decision.Source.SIDECAR, p.decision().source());
      assertTrue(Thread.currentThread().isInterrupted(), "the flag is kept for the caller");
      assertThrows(InterruptedException.class, () -> p.call(calls::incrementAndGet));
    }
    assertEquals(0, calls.get());

    // close() on an interrupted thread reports too.
    Thread.currentThread().interrupt();
    try (Permit p = client.acquire(dep)) {
      assertEquals(Decision.Source.SIDECAR, p.decision().source());
    }
    assertTrue(Thread.interrupted());

    server.assertReports(dep, "cancelled", 2);
    assertEquals(2, server.reports(dep));
    assertEquals(0, client.stats().failOpen());
    assertEquals(0, client.stats().reportErrors());
    assertEquals(List.of(), warnings());
  }
}

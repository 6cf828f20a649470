package io.breakerd.client;

import static io.breakerd.client.BreakerdServer.eventually;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.grpc.Status;
import java.io.InterruptedIOException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
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

/**
 * A cancelled (interrupted) caller still reports its permit, once, as CANCELLED,
 * and its next decision comes from breakerd: the interrupt flag is no reason to
 * fail open, and nothing is logged as if breakerd were unreachable.
 */
class InterruptTest {
  private static final Duration WAIT = Duration.ofSeconds(5);
  /** Held strongly: java.util.logging keeps loggers only weakly. */
  private static final Logger CLIENT_LOG = Logger.getLogger(BreakerdClient.class.getName());

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
  void start() throws Exception {
    server = BreakerdServer.start();
    client = server.client();
    assertTrue(client.awaitReady(WAIT));
    CLIENT_LOG.addHandler(capture);
  }

  @AfterEach
  void stop() {
    CLIENT_LOG.removeHandler(capture);
    Thread.interrupted(); // whatever a test left on the test thread
    client.close();
    server.close();
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

  private double reports(String dep, String cls) throws Exception {
    return server.metric("breakerd_reports_total", Map.of("dependency", dep, "class", cls));
  }

  private double allReports(String dep) throws Exception {
    return server.metric("breakerd_reports_total", Map.of("dependency", dep));
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
    assertTrue(eventually(WAIT, () -> {
      try {
        return allReports(dep) == 2;
      } catch (Exception e) {
        throw new IllegalStateException(e);
      }
    }), "expected 2 reports, got " + allReports(dep));
    assertEquals(1, reports(dep, "cancelled"));
    assertEquals(1, reports(dep, "success"));
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
    assertTrue(eventually(WAIT, () -> {
      try {
        return reports(dep, "cancelled") == 1;
      } catch (Exception e) {
        throw new IllegalStateException(e);
      }
    }), "expected one CANCELLED report, got " + allReports(dep) + " reports");
    assertEquals(1, allReports(dep));
    assertEquals(0, server.status(dep).getConsecutiveFailures());
  }

  @Test
  void guardInterruptedDuringTheAcquireDoesNotCallAndReportsCancelledOnce() throws Exception {
    String dep = "interrupt/acquire";
    AtomicInteger calls = new AtomicInteger();
    Thread.currentThread().interrupt(); // cancelled before the Acquire answers
    assertThrows(InterruptedException.class, () -> client.call(dep, calls::incrementAndGet));
    assertFalse(Thread.currentThread().isInterrupted(), "cleared, as InterruptedException means");

    assertEquals(0, calls.get(), "a cancelled caller does not make the call");
    assertTrue(eventually(WAIT, () -> {
      try {
        return reports(dep, "cancelled") == 1;
      } catch (Exception e) {
        throw new IllegalStateException(e);
      }
    }), "the permit breakerd granted was not reported CANCELLED");
    assertEquals(1, allReports(dep));
    assertEquals(1, server.acquires(dep));
    assertEquals(0, client.stats().failOpen());
    assertEquals(0, client.stats().reportErrors());
    assertEquals(List.of(), warnings());
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

    assertTrue(eventually(WAIT, () -> {
      try {
        return reports(dep, "cancelled") == 2;
      } catch (Exception e) {
        throw new IllegalStateException(e);
      }
    }), "expected 2 CANCELLED reports, got " + reports(dep, "cancelled"));
    assertEquals(2, allReports(dep));
    assertEquals(0, client.stats().failOpen());
    assertEquals(0, client.stats().reportErrors());
    assertEquals(List.of(), warnings());
  }
}

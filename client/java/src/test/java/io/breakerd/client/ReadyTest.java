package io.breakerd.client;

import static io.breakerd.client.BreakerdServer.millisSince;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** awaitReady: true once breakerd listens, false when its timeout ends with nothing there. */
class ReadyTest {

  // conformance: wait-ready
  @Test
  void awaitReadyWaitsForBreakerdToStartAndGivesUpWhenItsTimeoutEnds() throws Exception {
    String address = "127.0.0.1:" + BreakerdServer.freePort();
    try (BreakerdClient client = BreakerdClient.builder().target(address).build()) {
      // Nothing listening: failure when the 500 ms are up, not later.
      long t0 = System.nanoTime();
      assertFalse(client.awaitReady(Duration.ofMillis(500)));
      long ms = millisSince(t0);
      assertTrue(ms >= 450 && ms < 500 + 300, "gave up after " + ms + " ms");

      // Called before breakerd listens, it returns once breakerd starts (300 ms later),
      // although the failed attempts above have grown gRPC's reconnect backoff.
      long called = System.nanoTime();
      CompletableFuture<Boolean> ready =
          CompletableFuture.supplyAsync(() -> client.awaitReady(Duration.ofSeconds(10)));
      TimeUnit.NANOSECONDS.sleep(called + TimeUnit.MILLISECONDS.toNanos(300) - System.nanoTime());
      assertFalse(ready.isDone(), "returned before breakerd listened: " + ready.getNow(null));
      try (BreakerdServer server = BreakerdServer.startOn(address)) {
        long serving = System.nanoTime();
        assertTrue(ready.get(10, TimeUnit.SECONDS));
        long after = millisSince(serving);
        assertTrue(after < 1500, "ready " + after + " ms after breakerd served");

        // The next Acquire is decided by breakerd.
        try (Permit p = client.acquire("ready/dep")) {
          assertEquals(Decision.Source.SIDECAR, p.decision().source());
          p.success();
        }
        assertEquals(1, server.acquires("ready/dep"));
      }
    }
  }
}

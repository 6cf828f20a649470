package io.breakerd.client;

import static io.breakerd.client.BreakerdServer.eventually;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.Optional;
import org.junit.jupiter.api.Test;

/** Required test 6: the cache learns transitions with no Acquire, and survives a restart. */
class WatchTest {
  private static final Duration WAIT = Duration.ofSeconds(15);

  @Test
  void learnsTransitionsAndReconnectsAfterRestart() throws Exception {
    try (BreakerdServer server = BreakerdServer.start();
        BreakerdClient client = server.client(
            b -> b.watchBackoff(Duration.ofMillis(50), Duration.ofMillis(500)))) {
      String before = "watch/before-restart";
      server.forceOpen(before);
      assertTrue(eventually(WAIT,
          () -> client.cachedState(before).equals(Optional.of(State.FORCED_OPEN))),
          "the cache never learned the transition");
      assertEquals(0, server.acquires(before), "learned without any Acquire");
      assertEquals(0, client.stats().watchReconnects());

      server.restart(); // same gRPC port, fresh state

      String after = "watch/after-restart";
      // Poll the forced-open through the restart: the stream must come back by itself.
      assertTrue(eventually(WAIT, () -> {
        try {
          server.forceOpen(after);
        } catch (RuntimeException notYet) {
          return false;
        }
        return client.cachedState(after).equals(Optional.of(State.FORCED_OPEN));
      }), "the Watch stream did not come back after the restart");
      assertTrue(client.stats().watchReconnects() >= 1);
      // The new process knows nothing of the old breaker, and neither does the cache.
      assertEquals(Optional.empty(), client.cachedState(before));
      BreakerOpenException e = org.junit.jupiter.api.Assertions.assertThrows(
          BreakerOpenException.class, () -> client.acquire(after));
      assertEquals(Decision.Source.LOCAL, e.source());
    }
  }

  @Test
  void unixSocketTarget() throws Exception {
    // The README promises unix:/path targets; check one against a second listener.
    java.nio.file.Path dir = java.nio.file.Files.createTempDirectory("bd-java-uds-");
    java.nio.file.Path sock = dir.resolve("breakerd.sock");
    try (BreakerdServer server = BreakerdServer.start("unix:" + sock);
        BreakerdClient client = BreakerdClient.builder()
            .target("unix:" + sock)
            .decisionTimeout(Duration.ofSeconds(2))
            .build()) {
      assertEquals("done", client.call("watch/uds", () -> "done"));
      assertEquals(1, server.reports("watch/uds", "success", "counted_success"));
    } finally {
      BreakerdServer.deleteTree(dir);
    }
  }
}

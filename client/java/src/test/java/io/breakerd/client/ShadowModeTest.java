package io.breakerd.client;

import static io.breakerd.client.BreakerdServer.eventually;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.time.Duration;
import java.util.Optional;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** A breaker in shadow mode is open in the Watch cache but never refused locally. */
class ShadowModeTest {
  private static final Duration WAIT = Duration.ofSeconds(10);
  private static final String CONFIG = """
      defaults:
        consecutive_failures: 3
        failure_rate: { threshold: 0 }
        cooldown: { base: 30s, max: 60s, jitter: 0 }
      policies:
        - match: "payments/*"
          mode: shadow
          consecutive_failures: 3
      """;

  private static BreakerdServer server;
  private static BreakerdClient client;

  @BeforeAll
  static void start() throws Exception {
    server = BreakerdServer.startWithConfig(CONFIG);
    client = server.client();
  }

  @AfterAll
  static void stop() throws Exception {
    for (AutoCloseable c : new AutoCloseable[] {client, server}) {
      if (c != null) {
        c.close();
      }
    }
  }

  /** Three failing guarded calls (consecutive_failures: 3), then the Watch cache sees OPEN. */
  private static void tripAndWatch(String dep) throws InterruptedException {
    for (int i = 0; i < 3; i++) {
      assertThrows(IOException.class, () -> client.call(dep, () -> {
        throw new IOException("upstream down");
      }));
    }
    assertEquals(io.breakerd.v1.State.STATE_OPEN, server.status(dep).getState());
    assertTrue(eventually(WAIT, () -> client.watchedState(dep).equals(Optional.of(State.OPEN))),
        "the Watch cache never saw " + dep + " open");
  }

  @Test
  void openShadowBreakerGoesToTheSidecarAndIsAllowed() throws Exception {
    String dep = "payments/psp";
    tripAndWatch(dep);
    assertEquals("shadow", server.status(dep).getMode());
    long localBefore = client.stats().localRejections();
    double acquiresBefore = server.acquires(dep);

    try (Permit p = client.acquire(dep)) {
      assertTrue(p.decision().allowed());
      assertEquals(Decision.Source.SIDECAR, p.decision().source());
      p.success();
    }
    // Retries follow the same rule.
    try (Permit p = client.acquire(dep, 1)) {
      assertEquals(Decision.Source.SIDECAR, p.decision().source());
    }

    assertEquals(localBefore, client.stats().localRejections());
    assertEquals(acquiresBefore + 2, server.acquires(dep), "breakerd decided both");
  }

  @Test
  void openEnforceBreakerTrippedTheSameWayIsRefusedLocally() throws Exception {
    String dep = "orders/api";
    tripAndWatch(dep);
    assertEquals("enforce", server.status(dep).getMode());
    long localBefore = client.stats().localRejections();
    double acquiresBefore = server.acquires(dep);

    BreakerOpenException e = assertThrows(BreakerOpenException.class, () -> client.acquire(dep));

    assertEquals(Decision.Source.LOCAL, e.source());
    assertEquals(RejectReason.OPEN, e.reason());
    assertEquals(localBefore + 1, client.stats().localRejections());
    assertEquals(acquiresBefore, server.acquires(dep), "breakerd must see no Acquire");
  }
}

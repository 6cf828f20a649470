package io.breakerd.client;

import static io.breakerd.client.BreakerdServer.eventually;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.Optional;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

/** A breaker in shadow mode is open in the Watch cache but never refused locally. */
class ShadowModeTest {
  private static final Duration WAIT = Duration.ofSeconds(10);
  // payments/* is in shadow mode in BreakerdServer.CONFIG.
  @RegisterExtension static final BreakerdExtension breakerd = new BreakerdExtension();

  private final BreakerdServer server = breakerd.server();
  private final BreakerdClient client = breakerd.client();

  /** Three failing guarded calls (consecutive_failures: 3), then the Watch cache sees OPEN. */
  private void tripAndWatch(String dep) throws Exception {
    server.trip(client, dep);
    assertTrue(eventually(WAIT, () -> client.cachedState(dep).equals(Optional.of(State.OPEN))),
        "the Watch cache never saw " + dep + " open");
  }

  // conformance: shadow
  @Test
  void openShadowBreakerGoesToTheSidecarAndIsAllowed() throws Exception {
    String dep = "payments/psp";
    tripAndWatch(dep);
    assertEquals("shadow", server.status(dep).getMode());
    Stats before = client.stats();
    double acquiresBefore = server.acquires(dep);

    // 20 guarded calls all run: each decision allowed by breakerd, none LOCAL.
    AtomicInteger ran = new AtomicInteger();
    for (int i = 0; i < 20; i++) {
      assertEquals(i + 1, client.call(dep, ran::incrementAndGet));
    }
    assertEquals(20, ran.get());
    Stats after = client.stats();
    assertEquals(before.localRejections(), after.localRejections(), "refused locally");
    assertEquals(before.failOpen(), after.failOpen(), "not decided by breakerd");
    assertEquals(acquiresBefore + 20, server.acquires(dep), "breakerd decided all 20");
    // By hand, first tries and retries alike: SIDECAR.
    for (int attempt : new int[] {0, 1}) {
      try (Permit p = client.acquire(dep, attempt)) {
        assertTrue(p.decision().allowed());
        assertEquals(Decision.Source.SIDECAR, p.decision().source());
        p.success();
      }
    }
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

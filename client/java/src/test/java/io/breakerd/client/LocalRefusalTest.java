package io.breakerd.client;

import static io.breakerd.client.BreakerdServer.eventually;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

/** Required test 2: a breaker opened through one client is refused locally by another. */
class LocalRefusalTest {
  private static final Duration WAIT = Duration.ofSeconds(10);

  @RegisterExtension static final BreakerdExtension breakerd = new BreakerdExtension();

  private static BreakerdServer server;
  private static BreakerdClient first;
  private static BreakerdClient second;

  @BeforeAll
  static void start() {
    server = breakerd.server();
    first = breakerd.client();
    second = breakerd.newClient(b -> {}); // its own channel and Watch stream
  }

  /** Three failures through {@code first} open {@code dep} (consecutive_failures: 3). */
  private static void trip(String dep) throws Exception {
    server.trip(first, dep);
  }

  /** How many {@code method} RPCs breakerd handled (every status code). */
  private static double rpcs(String method) throws Exception {
    return server.metric("breakerd_grpc_server_handled_total", Map.of("method", method));
  }

  @Test
  void openedByOneClientRefusedLocallyByAnother() throws Exception {
    String dep = "refusal/tripped";
    trip(dep);
    assertTrue(eventually(WAIT, () -> second.cachedState(dep).equals(Optional.of(State.OPEN))),
        "the second client's Watch never reported OPEN");

    double acquiresBefore = server.acquires(dep);
    double rpcsBefore = rpcs("Acquire");
    long localBefore = second.stats().localRejections();
    AtomicInteger calls = new AtomicInteger();
    BreakerOpenException e = assertThrows(BreakerOpenException.class,
        () -> second.call(dep, calls::incrementAndGet));

    assertEquals(Decision.Source.LOCAL, e.source());
    assertEquals(RejectReason.OPEN, e.reason());
    assertEquals(State.OPEN, e.decision().state());
    assertTrue(e.retryAfter().compareTo(Duration.ZERO) > 0
        && e.retryAfter().compareTo(Duration.ofSeconds(30)) <= 0, "retryAfter " + e.retryAfter());
    assertEquals(0, calls.get(), "a refused guard must not call");
    assertEquals(localBefore + 1, second.stats().localRejections());
    assertEquals(acquiresBefore, server.acquires(dep), "breakerd must see no Acquire");
    assertEquals(rpcsBefore, rpcs("Acquire"), "breakerd must handle no Acquire RPC");
    assertTrue(acquiresBefore > 0);
  }

  @Test
  void forcedOpenIsRefusedLocallyAndInChains() throws Exception {
    String dep = "refusal/forced";
    server.forceOpen(dep);
    assertTrue(eventually(WAIT,
        () -> second.cachedState(dep).equals(Optional.of(State.FORCED_OPEN))));
    double acquiresBefore = server.acquires(dep);

    BreakerOpenException e = assertThrows(BreakerOpenException.class, () -> second.acquire(dep));
    assertEquals(Decision.Source.LOCAL, e.source());
    assertEquals(RejectReason.FORCED_OPEN, e.reason());

    // Retries follow the same rule.
    e = assertThrows(BreakerOpenException.class, () -> second.acquire(dep, 2));
    assertEquals(Decision.Source.LOCAL, e.source());

    // A chain whose every candidate is refused locally makes no RPC either.
    double chainAcquires = rpcs("AcquireFirst");
    e = assertThrows(BreakerOpenException.class, () -> second.acquireFirst(List.of(dep, dep)));
    assertEquals(Decision.Source.LOCAL, e.source());
    assertEquals(chainAcquires, rpcs("AcquireFirst"));
    assertEquals(acquiresBefore, server.acquires(dep));
  }

  @Test
  void openPastItsCooldownGoesToBreakerd() throws Exception {
    String dep = "short/local"; // cooldown 1 s
    trip(dep);
    assertTrue(eventually(WAIT, () -> second.cachedState(dep).equals(Optional.of(State.OPEN))));
    BreakerOpenException e = assertThrows(BreakerOpenException.class, () -> second.acquire(dep));
    assertEquals(Decision.Source.LOCAL, e.source());
    assertTrue(e.retryAfter().compareTo(Duration.ofSeconds(1)) <= 0);

    // Once the cooldown is over the cache no longer refuses: breakerd grants the probe.
    Decision[] probe = new Decision[1];
    assertTrue(eventually(WAIT, () -> {
      try (Permit p = second.acquire(dep)) {
        p.success();
        probe[0] = p.decision();
        return true;
      } catch (BreakerOpenException stillOpen) {
        return false;
      }
    }));
    assertEquals(Decision.Source.SIDECAR, probe[0].source());
    assertTrue(probe[0].probe());
    assertEquals(io.breakerd.v1.State.STATE_CLOSED, server.status(dep).getState());
    assertTrue(eventually(WAIT,
        () -> second.cachedState(dep).equals(Optional.of(State.CLOSED))));
  }
}

package io.breakerd.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.junit.jupiter.api.function.Executable;

/** A closed client refuses every use at once, sends nothing and counts nothing as fail-open. */
class ClosedTest {
  @RegisterExtension static final BreakerdExtension breakerd = new BreakerdExtension();

  // conformance: closed
  @Test
  void everyUseAfterCloseFailsAtOnceWithoutAnRpc() throws Exception {
    BreakerdServer server = breakerd.server();
    BreakerdClient client = breakerd.newClient(b -> {});
    String dep = "closed/dep";
    String other = "closed/other";
    Permit reported = client.acquire(dep);
    Permit dropped = client.acquire(dep);
    assertEquals(Decision.Source.SIDECAR, reported.decision().source());
    assertEquals(Decision.Source.SIDECAR, dropped.decision().source());
    double acquires = server.acquires(dep);

    client.close();
    client.close(); // closing twice is fine

    Stats before = client.stats();
    AtomicInteger calls = new AtomicInteger();
    List<Executable> uses = List.of(
        () -> client.acquire(dep),
        () -> client.acquire(dep, 1),
        () -> client.acquireFirst(List.of(dep, other)),
        () -> client.call(dep, calls::incrementAndGet),
        () -> client.retry(dep, RetryPolicy.defaults(), calls::incrementAndGet),
        () -> client.first(List.of(dep, other), d -> calls.incrementAndGet()),
        () -> client.awaitReady(Duration.ofSeconds(5)));
    for (Executable use : uses) {
      long t0 = System.nanoTime();
      ClientClosedException e = assertThrows(ClientClosedException.class, use);
      long ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0);
      assertTrue(e.getMessage().contains("breakerd client is closed"), e.getMessage());
      assertTrue(ms < 1000, "took " + ms + " ms: not at once");
    }
    assertEquals(0, calls.get(), "no guarded function ran");
    assertEquals(acquires, server.acquires(dep), "no Acquire reached breakerd");
    assertEquals(0, server.acquires(other));
    Stats after = client.stats();
    assertEquals(before.failOpen(), after.failOpen());
    assertEquals(before.failClosed(), after.failClosed());
    assertEquals(before.awayDecisions(), after.awayDecisions());

    // A Report after close is dropped and counted, never thrown.
    reported.success();
    dropped.close();
    assertEquals(before.reportErrors() + 2, client.stats().reportErrors());
    assertEquals(0, server.reports(dep));
  }
}

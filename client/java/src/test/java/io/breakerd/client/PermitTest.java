package io.breakerd.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.net.ConnectException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * The documented by-hand pattern ({@code try (Permit p = acquire(dep)) { r = p.call(...);
 * p.report(...); }}) reports what happened, so it opens the breaker as the guard does.
 */
class PermitTest {
  private static final int CALLS = 10;
  /** The default policy of {@link BreakerdServer#CONFIG}: consecutive_failures 3. */
  private static final int THRESHOLD = 3;

  @RegisterExtension static final BreakerdExtension breakerd = new BreakerdExtension();

  /** A loopback port nothing listens on: connecting is refused. */
  private static int closedPort;

  private final BreakerdServer server = breakerd.server();
  private final BreakerdClient client = breakerd.client();

  @BeforeAll
  static void reservePort() throws Exception {
    closedPort = BreakerdServer.freePort();
  }

  /** An upstream that is down: a real connection refused; would answer 200 otherwise. */
  private static int upstream(AtomicInteger calls) throws IOException {
    calls.incrementAndGet();
    try (Socket s = new Socket()) {
      s.connect(new InetSocketAddress(InetAddress.getLoopbackAddress(), closedPort), 2000);
    }
    return 200;
  }

  private void assertCounted(String dep, String cls, String effect, int expected)
      throws Exception {
    server.assertReports(dep, cls, effect, expected);
  }

  @Test
  void byHandPatternOpensTheBreakerOnConnectionRefusedLikeTheGuard() throws Exception {
    String byHand = "permit/by-hand-refused";
    AtomicInteger byHandCalls = new AtomicInteger();
    int byHandConnectErrors = 0;
    int byHandRefusals = 0;
    for (int i = 0; i < CALLS; i++) {
      try (Permit p = client.acquire(byHand)) { // the README's by-hand pattern
        int status = p.call(() -> upstream(byHandCalls));
        p.report(Outcome.fromHttpStatus(status));
      } catch (ConnectException e) {
        byHandConnectErrors++;
      } catch (BreakerOpenException e) {
        byHandRefusals++;
      }
    }

    String guarded = "permit/guard-refused";
    AtomicInteger guardCalls = new AtomicInteger();
    int guardRefusals = 0;
    for (int i = 0; i < CALLS; i++) {
      try {
        client.call(guarded, () -> upstream(guardCalls));
      } catch (ConnectException e) {
        // reported by the guard
      } catch (BreakerOpenException e) {
        guardRefusals++;
      }
    }

    assertEquals(THRESHOLD, guardCalls.get(), "the guard stops calling at the threshold");
    assertEquals(CALLS - THRESHOLD, guardRefusals);
    assertEquals(THRESHOLD, byHandCalls.get(), "by hand stops calling at the threshold too");
    assertEquals(THRESHOLD, byHandConnectErrors);
    assertEquals(CALLS - THRESHOLD, byHandRefusals);
    assertCounted(byHand, "connection_error", "counted_failure", THRESHOLD);
    assertCounted(byHand, "cancelled", "neutral", 0);
    assertEquals(io.breakerd.v1.State.STATE_OPEN, server.status(byHand).getState());
  }

  @Test
  void returnedCallIsReportedByItsResult() throws Exception {
    String dep = "permit/http-503";
    try (Permit p = client.acquire(dep)) {
      int status = p.call(() -> 503);
      assertFalse(p.isReported(), "a returned call waits for what its result says");
      p.report(Outcome.fromHttpStatus(status));
      assertTrue(p.isReported());
    }
    assertCounted(dep, "server_error", "counted_failure", 1);
    assertEquals(1, server.reports(dep));
  }

  @Test
  void returnedCallNotReportedIsASuccessOnClose() throws Exception {
    String dep = "permit/returned";
    try (Permit p = client.acquire(dep)) {
      assertEquals("ok", p.call(() -> "ok"));
    }
    assertCounted(dep, "success", "counted_success", 1);
  }

  @Test
  void thrownErrorIsReportedAtOnceAndRethrown() throws Exception {
    String dep = "permit/thrown";
    IOException boom = new IOException("boom");
    try (Permit p = client.acquire(dep)) {
      assertSame(boom, assertThrows(IOException.class, () -> p.call(() -> {
        throw boom;
      })));
      assertTrue(p.isReported());
      assertThrows(IllegalStateException.class, p::success);
    }
    assertCounted(dep, "server_error", "counted_failure", 1);
  }

  @Test
  void onePermitMakesOneCall() throws Exception {
    try (Permit p = client.acquire("permit/twice")) {
      p.call(() -> 1);
      assertThrows(IllegalStateException.class, () -> p.call(() -> 2));
    }
    try (Permit p = client.acquire("permit/reported-first")) {
      p.success();
      assertThrows(IllegalStateException.class, () -> p.call(() -> 1));
    }
  }
}

package io.breakerd.client;

import static io.breakerd.client.BreakerdServer.eventually;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.List;
import java.util.Optional;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * A frozen or gone breakerd makes the client "away": decisions fail open (or
 * closed) at once without an RPC until a health probe or the Watch stream hears
 * from it again. Asserts counters and sources, never the duration of one call.
 */
class SidecarAwayTest {
  private static final Duration WAIT = Duration.ofSeconds(10);
  /** How long the client may take to notice breakerd is back (probe every 100 ms). */
  private static final Duration BACK = Duration.ofSeconds(3);
  /** Generous, so that a loaded machine does not make a healthy breakerd look away. */
  private static final Duration TIMEOUT = Duration.ofMillis(500);
  private static final int AWAY_CALLS = 5;

  private BreakerdServer server;

  @BeforeEach
  void start() throws Exception {
    server = BreakerdServer.start();
  }

  @AfterEach
  void stop() throws Exception {
    server.thaw(); // whatever happened in the test
    server.close();
  }

  /** Acquires (reporting success) until breakerd itself answers; the last decision. */
  private static Decision untilSidecar(BreakerdClient client, String dep, Duration within)
      throws InterruptedException {
    Decision[] last = new Decision[1];
    eventually(within, () -> {
      try (Permit p = client.acquire(dep)) {
        p.success();
        last[0] = p.decision();
      } catch (BreakerOpenException refused) {
        last[0] = refused.decision();
      }
      return last[0].source() == Decision.Source.SIDECAR;
    });
    return last[0];
  }

  private static Decision.Source source(BreakerdClient client, String dep) {
    try (Permit p = client.acquire(dep)) {
      return p.decision().source();
    } catch (BreakerOpenException refused) {
      return refused.source();
    }
  }

  @Test
  void frozenSidecarIsAwayUntilTheHealthProbeAnswers() throws Exception {
    String dep = "away/frozen";
    try (BreakerdClient open = server.client(b -> b.decisionTimeout(TIMEOUT).watch(false));
        BreakerdClient closed = server.client(
            b -> b.decisionTimeout(TIMEOUT).watch(false).failMode(FailMode.CLOSED))) {
      assertEquals(Decision.Source.SIDECAR, untilSidecar(open, dep, WAIT).source());
      assertEquals(Decision.Source.SIDECAR, untilSidecar(closed, dep, WAIT).source());
      Stats open0 = open.stats();
      Stats closed0 = closed.stats();

      server.freeze();
      try {
        // The first decision is an RPC that misses its deadline: away from now on.
        assertEquals(Decision.Source.FAIL_OPEN, source(open, dep));
        assertEquals(open0.failOpen() + 1, open.stats().failOpen());
        assertEquals(open0.awayDecisions(), open.stats().awayDecisions());
        // Then every decision is made at once, without an RPC.
        for (int i = 0; i < AWAY_CALLS; i++) {
          assertEquals(Decision.Source.FAIL_OPEN, source(open, dep));
        }
        assertEquals(open0.awayDecisions() + AWAY_CALLS, open.stats().awayDecisions());
        assertEquals(open0.failOpen() + 1 + AWAY_CALLS, open.stats().failOpen());
        assertEquals(Decision.Source.FAIL_OPEN,
            open.acquireFirst(List.of("away/a", "away/b")).decision().source());
        assertEquals(open0.awayDecisions() + AWAY_CALLS + 1, open.stats().awayDecisions());

        // Fail-closed: refused the same way.
        assertEquals(Decision.Source.FAIL_CLOSED, source(closed, dep));
        assertEquals(closed0.awayDecisions(), closed.stats().awayDecisions());
        for (int i = 0; i < AWAY_CALLS; i++) {
          BreakerOpenException e =
              assertThrows(BreakerOpenException.class, () -> closed.acquire(dep));
          assertEquals(Decision.Source.FAIL_CLOSED, e.source());
        }
        assertEquals(closed0.awayDecisions() + AWAY_CALLS, closed.stats().awayDecisions());
        assertEquals(closed0.failClosed() + 1 + AWAY_CALLS, closed.stats().failClosed());
        assertEquals(0, closed.stats().failOpen());
      } finally {
        server.thaw();
      }

      // The probe finds breakerd again; the next decisions are its own.
      assertEquals(Decision.Source.SIDECAR, untilSidecar(open, dep, BACK).source(),
          "not back within " + BACK + " of SIGCONT");
      assertEquals(Decision.Source.SIDECAR, untilSidecar(closed, dep, BACK).source(),
          "not back within " + BACK + " of SIGCONT");
    }
  }

  @Test
  void awayClientSendsNothingUntilTheWatchStreamDelivers() throws Exception {
    String dep = "away/watched";
    String unseen = "away/unseen";
    // No probe within the test: only the Watch stream can end "away".
    try (BreakerdClient client = server.client(
        b -> b.decisionTimeout(TIMEOUT).awayProbeInterval(Duration.ofHours(1)))) {
      // The stream is up and has delivered: nothing is left in flight for it.
      server.forceOpen("away/ready");
      assertTrue(eventually(WAIT,
          () -> client.watchedState("away/ready").equals(Optional.of(State.FORCED_OPEN))));
      Permit[] granted = new Permit[1];
      assertTrue(eventually(WAIT, () -> {
        Permit p = client.acquire(dep);
        if (p.decision().source() != Decision.Source.SIDECAR) {
          p.close(); // permit 0: nothing is sent
          return false;
        }
        granted[0] = p; // reported below, while away
        return true;
      }));
      Permit held = granted[0];

      server.freeze();
      try {
        assertEquals(Decision.Source.FAIL_OPEN, source(client, dep));
      } finally {
        server.thaw();
      }
      server.status(dep); // breakerd answers again; the client does not know yet
      Stats before = client.stats();

      assertEquals(Decision.Source.FAIL_OPEN, source(client, unseen));
      try (Permit first = client.acquireFirst(List.of(unseen, dep))) {
        assertEquals(Decision.Source.FAIL_OPEN, first.decision().source());
        assertEquals(unseen, first.dependency());
      }
      assertEquals(before.awayDecisions() + 2, client.stats().awayDecisions());
      assertEquals(0, server.acquires(unseen), "no Acquire RPC while away");

      held.success(); // not sent while away: counted as a Report error
      assertEquals(before.reportErrors() + 1, client.stats().reportErrors());
      assertEquals(0, server.reports(dep, "success", "counted_success"));

      // Any Watch message (here: a transition of another breaker) means back.
      server.forceOpen("away/poke");
      assertEquals(Decision.Source.SIDECAR, untilSidecar(client, dep, BACK).source(),
          "a Watch message did not end away");
      assertEquals(1, server.reports(dep, "success", "counted_success"));
    }
  }

  @Test
  void goneSidecarIsProbedUntilItIsBackOnItsPort() throws Exception {
    String dep = "away/restarted";
    try (BreakerdClient client = server.client(b -> b.decisionTimeout(TIMEOUT).watch(false))) {
      assertEquals(Decision.Source.SIDECAR, untilSidecar(client, dep, WAIT).source());
      server.kill();

      assertEquals(Decision.Source.FAIL_OPEN, source(client, dep)); // UNAVAILABLE: away
      // A call cut by the kill itself may fail with another code (not away
      // yet): the next one finds the connection refused.
      for (int i = 0; i < 10 && client.stats().awayDecisions() == 0; i++) {
        assertEquals(Decision.Source.FAIL_OPEN, source(client, dep));
      }
      long away0 = client.stats().awayDecisions();
      assertTrue(away0 > 0, "the client never marked the killed breakerd away");
      for (int i = 0; i < AWAY_CALLS; i++) {
        assertEquals(Decision.Source.FAIL_OPEN, source(client, dep));
      }
      assertEquals(away0 + AWAY_CALLS, client.stats().awayDecisions());

      server.restart(); // same port
      assertEquals(Decision.Source.SIDECAR, untilSidecar(client, dep, WAIT).source(),
          "the probe never found the restarted breakerd");
    }
  }
}

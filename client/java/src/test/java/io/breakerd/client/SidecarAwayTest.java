package io.breakerd.client;

import static io.breakerd.client.BreakerdServer.decision;
import static io.breakerd.client.BreakerdServer.eventually;
import static io.breakerd.client.BreakerdServer.millisSince;
import static io.breakerd.client.BreakerdServer.untilSidecar;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * A frozen or gone breakerd makes the client "away": decisions fail open (or
 * closed) at once without an RPC until a health probe or the Watch stream hears
 * from it again, which happens within 1.5 s of breakerd answering again,
 * however long it was gone. The scenarios' numbers, no tighter.
 */
class SidecarAwayTest {
  private static final Duration WAIT = Duration.ofSeconds(10);
  /** How long the client may take to notice breakerd is back (probe every 100 ms). */
  private static final Duration BACK = Duration.ofMillis(1500);
  /** Generous, so that a loaded machine does not make a healthy breakerd look away. */
  private static final Duration TIMEOUT = Duration.ofMillis(500);
  private static final int AWAY_CALLS = 100;

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

  private static Decision.Source source(BreakerdClient client, String dep) {
    return decision(client, dep).source();
  }

  /** A client with the defaults (20 ms decision timeout, Watch on), ready. */
  private BreakerdClient defaults(FailMode failMode) {
    BreakerdClient c =
        BreakerdClient.builder().target(server.address()).failMode(failMode).build();
    assertTrue(c.awaitReady(WAIT));
    return c;
  }

  // conformance: hung-sidecar
  @Test
  void hungSidecarCostsOneDecisionTimeoutThenIsAwayUntilItAnswers() throws Exception {
    String dep = "away/hung";
    try (BreakerdClient open = defaults(FailMode.OPEN);
        BreakerdClient closed = defaults(FailMode.CLOSED)) {
      assertEquals(Decision.Source.SIDECAR, untilSidecar(open, dep, WAIT).source());
      assertEquals(Decision.Source.SIDECAR, untilSidecar(closed, dep, WAIT).source());
      Stats open0 = open.stats();
      Stats closed0 = closed.stats();

      server.freeze();
      long thawed;
      try {
        // The first decision is an RPC that misses its deadline: away from now on.
        long t0 = System.nanoTime();
        assertEquals(Decision.Source.FAIL_OPEN, source(open, dep));
        long ms = millisSince(t0);
        assertTrue(ms <= 20 + 100, "took " + ms + " ms");
        assertEquals(open0.failOpen() + 1, open.stats().failOpen());
        assertEquals(open0.awayDecisions(), open.stats().awayDecisions());
        // Then every decision is made at once, without an RPC.
        t0 = System.nanoTime();
        for (int i = 0; i < AWAY_CALLS; i++) {
          assertEquals(Decision.Source.FAIL_OPEN, source(open, dep));
        }
        ms = millisSince(t0);
        assertTrue(ms < 100, AWAY_CALLS + " took " + ms + " ms");
        assertEquals(open0.awayDecisions() + AWAY_CALLS, open.stats().awayDecisions());
        assertEquals(open0.failOpen() + 1 + AWAY_CALLS, open.stats().failOpen());
        assertEquals(Decision.Source.FAIL_OPEN,
            open.acquireFirst(List.of("away/a", "away/b")).decision().source());
        assertEquals(open0.awayDecisions() + AWAY_CALLS + 1, open.stats().awayDecisions());

        // Fail-closed: refused the same way.
        t0 = System.nanoTime();
        assertEquals(Decision.Source.FAIL_CLOSED, source(closed, dep));
        ms = millisSince(t0);
        assertTrue(ms <= 20 + 100, "took " + ms + " ms");
        assertEquals(closed0.awayDecisions(), closed.stats().awayDecisions());
        t0 = System.nanoTime();
        for (int i = 0; i < AWAY_CALLS; i++) {
          BreakerOpenException e =
              assertThrows(BreakerOpenException.class, () -> closed.acquire(dep));
          assertEquals(Decision.Source.FAIL_CLOSED, e.source());
        }
        ms = millisSince(t0);
        assertTrue(ms < 100, AWAY_CALLS + " took " + ms + " ms");
        assertEquals(closed0.awayDecisions() + AWAY_CALLS, closed.stats().awayDecisions());
        assertEquals(closed0.failClosed() + 1 + AWAY_CALLS, closed.stats().failClosed());
        assertEquals(0, closed.stats().failOpen());
      } finally {
        server.thaw();
        thawed = System.nanoTime();
      }

      // The probe finds breakerd again; the next decisions are its own.
      for (BreakerdClient client : List.of(open, closed)) {
        Duration left = BACK.minusNanos(System.nanoTime() - thawed);
        assertEquals(Decision.Source.SIDECAR, untilSidecar(client, dep, left).source(),
            "not back within " + BACK + " of SIGCONT");
      }
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
          () -> client.cachedState("away/ready").equals(Optional.of(State.FORCED_OPEN))));
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

      held.success(); // not sent while away, not dropped: held, not an error
      assertEquals(before.reportErrors(), client.stats().reportErrors());
      assertEquals(0, server.reports(dep, "success", "counted_success"));

      // Any Watch message (here: a transition of another breaker) means back,
      // and the held Report goes out.
      server.forceOpen("away/poke");
      assertEquals(Decision.Source.SIDECAR, untilSidecar(client, dep, BACK).source(),
          "a Watch message did not end away");
      server.assertReports(dep, "success", "counted_success", 2); // held + untilSidecar's
      assertEquals(before.reportErrors(), client.stats().reportErrors());
    }
  }

  // conformance: report-while-away
  @Test
  void reportMadeWhileAwayIsHeldAndSentWhenBreakerdIsBack() throws Exception {
    String dep = "short/report-while-away"; // opens after 3 failures, cools down in 1 s
    String other = "away/other";
    try (BreakerdClient tripper = server.client(); // 2 s timeout: every trip failure counts
        BreakerdClient client = defaults(FailMode.OPEN)) {
      assertEquals(Decision.Source.SIDECAR, untilSidecar(client, other, WAIT).source());
      server.trip(tripper, dep);
      Stats before = client.stats();
      long[] thawed = new long[1];
      boolean[] probed = new boolean[1];

      // The first Acquire after the cooldown is the probe: take it with a guarded call.
      assertTrue(eventually(WAIT, () -> {
        long failOpen = client.stats().failOpen();
        try {
          return client.call(dep, () -> {
            if (client.stats().failOpen() != failOpen) {
              return false; // failed open (a loaded machine): not the probe, try again
            }
            assertEquals(io.breakerd.v1.State.STATE_HALF_OPEN, server.status(dep).getState());
            server.freeze();
            try {
              long away0 = client.stats().awayDecisions();
              assertEquals(Decision.Source.FAIL_OPEN, source(client, other)); // marks away
              assertEquals(Decision.Source.FAIL_OPEN, source(client, other));
              assertEquals(away0 + 1, client.stats().awayDecisions(), "not marked away");
            } finally {
              server.thaw();
              thawed[0] = System.nanoTime();
            }
            probed[0] = true;
            return true; // success, reported while breakerd is still marked away
          });
        } catch (BreakerOpenException stillOpen) {
          return false; // cooling down
        }
      }), "never got the probe permit");
      assertTrue(probed[0]);

      // Held, then sent once the probe (or the Watch stream) finds breakerd back.
      boolean closedInTime = eventually(BACK.plusMillis(500).minusNanos(
          System.nanoTime() - thawed[0]),
          () -> server.status(dep).getState() == io.breakerd.v1.State.STATE_CLOSED);
      assertTrue(closedInTime, "not CLOSED within 2 s of SIGCONT: " + server.samples(dep));
      assertEquals(1, server.reports(dep, "success"), "the probe's report: " + server.samples(dep));
      assertEquals(before.reportErrors(), client.stats().reportErrors());
      // Nobody is refused PROBE_IN_FLIGHT for the rest of the lease.
      Decision next = untilSidecar(client, dep, WAIT);
      assertTrue(next.allowed(), "after the probe's report: " + next);
    }
  }

  // conformance: restart
  @Test
  void backWithinOneAndAHalfSecondsOfARestartAfterAnOutage() throws Exception {
    String dep = "away/restarted";
    try (BreakerdClient client = defaults(FailMode.OPEN)) {
      assertEquals(Decision.Source.SIDECAR, untilSidecar(client, dep, WAIT).source());

      // gRPC's default reconnect backoff (1 s, x1.6, +-20%) is more than 2 s
      // from its next attempt past 2 s of outage: end the outage at the first
      // connection attempt past 2 s.
      long crashed;
      long lastAttempt;
      try (BreakerdServer.PortHolder holder = server.crash()) {
        crashed = System.nanoTime();
        lastAttempt = crashed;
        while (lastAttempt - crashed < TimeUnit.SECONDS.toNanos(2)) {
          assertEquals(Decision.Source.FAIL_OPEN, source(client, dep), "during the outage");
          Long attempt = holder.nextAttempt(Duration.ofMillis(20));
          if (attempt != null) {
            lastAttempt = attempt;
          } else if (millisSince(crashed) > 15_000) {
            throw new AssertionError("no connection attempt from the client in 15 s of outage");
          }
        }
      }
      assertTrue(client.stats().awayDecisions() > 0, "the client never marked breakerd away");
      server.restart(); // same port, fresh state
      long restarted = System.nanoTime();
      server.forceOpen(dep);

      Decision d = decision(client, dep);
      while (d.source() == Decision.Source.FAIL_OPEN && millisSince(restarted) < 20_000) {
        Thread.sleep(10);
        d = decision(client, dep);
      }
      long took = millisSince(restarted);
      long outage = TimeUnit.NANOSECONDS.toMillis(restarted - crashed);
      assertNotEquals(Decision.Source.FAIL_OPEN, d.source(),
          "still failing open " + took + " ms after the restart (outage " + outage + " ms)");
      // From breakerd, or LOCAL once the Watch stream has learnt it too.
      assertFalse(d.allowed(), "the force-open's refusal: " + d);
      assertEquals(RejectReason.FORCED_OPEN, d.reason());
      assertTrue(took <= BACK.toMillis(), "decisions came from breakerd again " + took
          + " ms after its restart (outage " + outage + " ms); want within " + BACK);
      System.err.println("restart: back " + took + " ms after the restart, outage " + outage
          + " ms");
    }
  }
}

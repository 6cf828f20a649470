package io.breakerd.client;

import static io.breakerd.client.BreakerdServer.eventually;
import static io.breakerd.client.BreakerdServer.millisSince;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Consumer;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * Local decisions against the real breakerd (client README, "Local
 * decisions"): first attempts granted in the client while the Watch cache
 * says CLOSED and breakerd allows it ({@code local/*} and
 * {@code local-short/*} in the conformance config), what happened sent in
 * ReportBatch requests, and everything else still decided by breakerd. Bounds
 * are loose: the figures are in bench/local/java.
 */
class LocalDecisionsTest {
  private static final Duration WAIT = Duration.ofSeconds(10);
  /** How long the {@code created} event may take to reach the cache. */
  private static final Duration CREATED = Duration.ofSeconds(2);

  @RegisterExtension static final BreakerdExtension breakerd = new BreakerdExtension();

  private static BreakerdServer server;

  @BeforeAll
  static void start() {
    server = breakerd.server();
  }

  /** A client of its own (2 s decision timeout), with {@code options}; closed by the fixture. */
  private static BreakerdClient client(Consumer<BreakerdClient.Builder> options) {
    return breakerd.newClient(options);
  }

  /**
   * Turns the fast path on for {@code dep} (SCENARIOS.md, local-fast-path):
   * one guarded call creates the breaker; then two-step Acquires, reported with
   * the decision, until one is granted LOCAL. Then waits until breakerd has
   * every outcome (so that later deltas are the test's own).
   */
  static void untilLocal(BreakerdServer server, BreakerdClient client, String dep)
      throws Exception {
    assertEquals("ok", client.call(dep, () -> "ok"));
    Decision[] last = new Decision[1];
    boolean local = eventually(CREATED, () -> {
      try (Permit p = client.acquire(dep)) {
        p.success();
        last[0] = p.decision();
        return last[0].source() == Decision.Source.LOCAL;
      }
    });
    assertTrue(local, dep + ": no local grant within " + CREATED + "; last " + last[0]);
    assertTrue(eventually(WAIT, () -> decided(server, dep) == server.reports(dep)),
        dep + ": breakerd did not get every outcome:\n" + server.samples(dep));
  }

  /** Every decision {@code server} counted for {@code dep} that lets a call run. */
  static double decided(BreakerdServer server, String dep) throws Exception {
    return acquires(server, dep, "allowed") + acquires(server, dep, "probe")
        + acquires(server, dep, "allowed_local");
  }

  static double acquires(BreakerdServer server, String dep, String decision) throws Exception {
    return server.metric("breakerd_acquire_total", Map.of("dependency", dep, "decision", decision));
  }

  static double acquires(String dep, String decision) throws Exception {
    return acquires(server, dep, decision);
  }

  static double rpcs(String method) throws Exception {
    return server.metric("breakerd_grpc_server_handled_total", Map.of("method", method));
  }

  static double clientDecisions(BreakerdServer s, String dep, String decision) throws Exception {
    return s.metric("breakerd_client_decisions_total",
        Map.of("dependency", dep, "decision", decision));
  }

  private static Object fail() throws IOException {
    throw new IOException("upstream down"); // a server error
  }

  // conformance: local-fast-path
  @Test
  void aClosedBreakerIsDecidedInTheClientAndBatched() throws Exception {
    String dep = "local/fast-java";
    BreakerdClient c = client(b -> {});
    untilLocal(server, c, dep);
    double acquireRpcs = rpcs("Acquire");
    double reportRpcs = rpcs("Report");
    double batchRpcs = rpcs("ReportBatch");
    double allowedLocal = acquires(dep, "allowed_local");
    double all = server.acquires(dep);
    double successes = server.reports(dep, "success");
    double reports = server.reports(dep);

    for (int i = 0; i < 10_000; i++) {
      int n = i;
      assertEquals(n, c.call(dep, () -> n));
    }
    c.close(); // flushes

    assertTrue(eventually(WAIT, () -> acquires(dep, "allowed_local") == allowedLocal + 10_000
        && server.reports(dep) == reports + 10_000), server.samples(dep));
    assertEquals(all + 10_000, server.acquires(dep), "allowed_local and nothing else");
    assertEquals(successes + 10_000, server.reports(dep, "success"));
    assertEquals(acquireRpcs, rpcs("Acquire"), "no Acquire RPC");
    assertEquals(reportRpcs, rpcs("Report"), "no Report RPC");
    assertTrue(rpcs("ReportBatch") >= batchRpcs + 1);
    assertEquals(0, c.stats().droppedOutcomes());
  }

  // conformance: local-two-step
  @Test
  void aTwoStepLocalGrantIsReportedThroughItsPermitIntoTheBatch() throws Exception {
    String dep = "local/two-step-java";
    BreakerdClient c = client(b -> {});
    untilLocal(server, c, dep);
    double reportRpcs = rpcs("Report");
    double serverErrors = server.reports(dep, "server_error");
    double successes = server.reports(dep, "success");

    Permit p = c.acquire(dep);
    Decision d = p.decision();
    assertTrue(d.allowed());
    assertEquals(Decision.Source.LOCAL, d.source());
    assertEquals(0, d.permit());
    assertEquals(State.CLOSED, d.state());
    assertFalse(d.probe());

    // The raw permit 0 (a Permit made from the decision alone): nothing sent.
    new Permit(c, d).report(Outcome.success());

    long t0 = System.nanoTime();
    p.report(Outcome.of(Outcome.Kind.SERVER_ERROR)); // returns at once: no RPC, no effect
    assertTrue(millisSince(t0) < 200, "report took " + millisSince(t0) + " ms");
    assertTrue(p.isReported());

    assertTrue(eventually(Duration.ofSeconds(3),
        () -> server.reports(dep, "server_error") == serverErrors + 1), server.samples(dep));
    assertEquals(reportRpcs, rpcs("Report"), "no Report RPC");
    assertEquals(successes, server.reports(dep, "success"),
        "the raw permit 0 (reported before) sent nothing");
    assertThrows(IllegalStateException.class, () -> p.report(Outcome.success()));
  }

  // conformance: local-trip
  @Test
  void fiveLocalFailuresTripTheBreakerAndTheClientRefusesLocally() throws Exception {
    String dep = "local/trip-java";
    BreakerdClient c = client(b -> {});
    untilLocal(server, c, dep);
    double acquireRpcs = rpcs("Acquire");

    for (int i = 0; i < 5; i++) {
      assertThrows(IOException.class, () -> c.call(dep, LocalDecisionsTest::fail));
    }
    long fifth = System.nanoTime();
    assertEquals(acquireRpcs, rpcs("Acquire"), "the five failures were granted locally");

    AtomicInteger ran = new AtomicInteger();
    int made = 0;
    BreakerOpenException refused = null;
    while (refused == null && millisSince(fifth) < 10_000) {
      try {
        made++;
        c.call(dep, ran::incrementAndGet);
      } catch (BreakerOpenException e) {
        made--;
        refused = e;
      }
    }
    long took = millisSince(fifth);
    assertTrue(refused != null, "never refused");
    assertEquals(Decision.Source.LOCAL, refused.source());
    assertEquals(RejectReason.OPEN, refused.reason());
    assertTrue(took <= 2000, "refused locally " + took + " ms after the fifth failure");
    assertEquals(made, ran.get(), "every call made before the refusal ran");
    assertEquals(io.breakerd.v1.State.STATE_OPEN, server.status(dep).getState());
    assertEquals(1, server.metric("breakerd_transitions_total",
        Map.of("dependency", dep, "to", "open", "reason", "consecutive_failures")));

    for (int i = 0; i < 20; i++) {
      BreakerOpenException e = assertThrows(BreakerOpenException.class,
          () -> c.call(dep, ran::incrementAndGet));
      assertEquals(Decision.Source.LOCAL, e.source());
    }
    c.close();
    long refusals = c.stats().localRejections();
    assertEquals(21, refusals);
    assertTrue(eventually(Duration.ofSeconds(3),
        () -> clientDecisions(server, dep, "refused_local") == refusals),
        "breakerd counted " + clientDecisions(server, dep, "refused_local")
            + " local refusals, the client " + refusals);
    System.err.println("local-trip: refused locally " + took + " ms after the fifth failure");
  }

  // conformance: local-probe
  @Test
  void afterTheCooldownOnlyOneProcessProbesAndNoneIsGrantedLocally() throws Exception {
    String dep = "local-short/probe-java";
    BreakerdClient c = client(b -> {});
    untilLocal(server, c, dep);

    List<Child> children = new ArrayList<>();
    try {
      for (int i = 0; i < 3; i++) {
        children.add(Child.start(server.address(), dep));
      }
      for (Child child : children) {
        assertTrue(child.awaitLine("ready", Duration.ofSeconds(60)),
            "a child did not get ready: " + child.lines);
      }
      double probes = acquires(dep, "probe");
      for (int i = 0; i < 5; i++) {
        assertThrows(IOException.class, () -> c.call(dep, LocalDecisionsTest::fail));
      }
      List<String> results = new ArrayList<>();
      for (Child child : children) {
        assertTrue(child.process.waitFor(60, TimeUnit.SECONDS), "a child did not end: "
            + child.lines);
        assertEquals(0, child.process.exitValue(), "a child failed: " + child.lines);
        results.add(child.result());
        System.err.println("local-probe child: " + child.lines);
      }
      long ran = results.stream().filter(r -> r.startsWith("ran ")).count();
      assertEquals(1, ran, "exactly one process runs its call: " + results + "; outputs: "
          + children.stream().map(ch -> ch.lines.toString()).toList());
      for (String r : results) {
        assertFalse(r.contains("LOCAL") && r.startsWith("ran "),
            "granted locally while the breaker was not closed: " + results);
        if (r.startsWith("ran ")) {
          assertEquals("ran SIDECAR probe", r, results.toString());
        } else {
          assertTrue(r.equals("refused SIDECAR PROBE_IN_FLIGHT") || r.equals("refused LOCAL OPEN"),
              results.toString());
        }
      }
      assertEquals(probes + 1, acquires(dep, "probe"), server.samples(dep));
      assertTrue(eventually(Duration.ofSeconds(3), () -> server.metric(
          "breakerd_transitions_total",
          Map.of("dependency", dep, "to", "closed", "reason", "probe_succeeded")) == 1),
          server.samples(dep));
    } finally {
      for (Child child : children) {
        child.process.destroyForcibly();
      }
    }
  }

  // conformance: local-stream-drop
  @Test
  void whileBreakerdIsDownNothingIsGrantedLocallyAndFailOpensReachItsReturn() throws Exception {
    String dep = "local/drop-java";
    try (BreakerdServer own = BreakerdServer.start();
        BreakerdClient c = own.client()) {
      assertTrue(c.awaitReady(WAIT));
      untilLocal(own, c, dep);

      own.stop();
      // The stream ended with breakerd: the cache is cleared.
      assertTrue(eventually(WAIT, () -> c.cachedState(dep).isEmpty()));
      long failOpen = c.stats().failOpen();
      AtomicInteger ran = new AtomicInteger();
      for (int i = 0; i < 5; i++) {
        try (Permit p = c.acquire(dep)) {
          assertEquals(Decision.Source.FAIL_OPEN, p.decision().source());
          p.success();
        }
        assertEquals(1, c.call(dep, () -> ran.incrementAndGet() > 0 ? 1 : 0));
      }
      long failOpens = c.stats().failOpen() - failOpen;
      assertEquals(10, failOpens, "every call while down failed open");
      assertEquals(5, ran.get());

      own.restart(); // same port, a new breakerd
      long restarted = System.nanoTime();
      // Polled closely: the decisions counted while it was down go out within
      // the flush interval of its return, and could create the breaker (and
      // a cache entry that grants locally) before the first call.
      while (c.isAway() && millisSince(restarted) < WAIT.toMillis()) {
        Thread.sleep(1);
      }
      assertFalse(c.isAway(), "the client never saw breakerd back");
      Decision first;
      try (Permit p = c.acquire(dep)) {
        first = p.decision();
        p.success();
      }
      assertEquals(Decision.Source.SIDECAR, first.source());
      assertEquals(1, own.metric("breakerd_acquire_total",
          Map.of("dependency", dep, "decision", "allowed")));
      assertTrue(eventually(Duration.ofSeconds(3),
          () -> clientDecisions(own, dep, "fail_open") == failOpens),
          "the new breakerd counted " + clientDecisions(own, dep, "fail_open")
              + " fail-open decisions; the client made " + failOpens);
      System.err.println("local-stream-drop: fail-opens counted " + millisSince(restarted)
          + " ms after the restart");
    }
  }

  // conformance: local-off
  @Test
  void withTheOptionOffEveryCallGoesToBreakerd() throws Exception {
    String dep = "local/off-java";
    BreakerdClient c = client(b -> b.localDecisions(false));
    assertEquals("ok", c.call(dep, () -> "ok"));
    assertTrue(eventually(CREATED, () -> c.cachedState(dep).equals(Optional.of(State.CLOSED))));
    try (Permit p = c.acquire(dep)) {
      assertEquals(Decision.Source.SIDECAR, p.decision().source());
      p.success();
    }
    assertTrue(eventually(WAIT, () -> decided(server, dep) == server.reports(dep)));
    double allowed = acquires(dep, "allowed");
    double reportRpcs = rpcs("Report");

    for (int i = 0; i < 100; i++) {
      c.call(dep, () -> "ok");
    }

    assertEquals(allowed + 100, acquires(dep, "allowed"));
    assertEquals(0, acquires(dep, "allowed_local"));
    assertEquals(reportRpcs + 100, rpcs("Report"));
  }

  @Test
  void aNamedChainGrantedLocallyIsCountedAsAChainDecision() throws Exception {
    String primary = "local/chain-primary-java";
    String backup = "local/chain-backup-java";
    BreakerdClient c = client(b -> {});
    untilLocal(server, c, primary);
    double acquireFirstRpcs = rpcs("AcquireFirst");

    assertEquals(primary, c.first("conf-local-chain-java", List.of(primary, backup), dep -> dep));
    // By hand too: a permit from a local grant, reported with its decision.
    try (Permit p = c.acquireFirst("conf-local-chain-java", List.of(primary, backup), 0)) {
      assertEquals(Decision.Source.LOCAL, p.decision().source());
      assertEquals(primary, p.dependency());
      p.report(Outcome.fromHttpStatus(500));
    }
    // Without a name, the first candidate the cache does not refuse.
    try (Permit p = c.acquireFirst(List.of(primary, backup))) {
      assertEquals(Decision.Source.LOCAL, p.decision().source());
      p.success();
    }
    c.close();

    assertEquals(acquireFirstRpcs, rpcs("AcquireFirst"), "no AcquireFirst RPC");
    assertTrue(eventually(Duration.ofSeconds(3), () -> server.metric(
        "breakerd_chain_decisions_total", Map.of("chain", "conf-local-chain-java", "tier", "0"))
        == 2), "chain decisions");
    assertTrue(eventually(Duration.ofSeconds(3), () -> server.metric(
        "breakerd_chain_outcomes_total",
        Map.of("chain", "conf-local-chain-java", "tier", "0", "class", "success")) == 1
        && server.metric("breakerd_chain_outcomes_total",
        Map.of("chain", "conf-local-chain-java", "tier", "0", "class", "server_error")) == 1),
        "chain outcomes");
  }

  @Test
  void retriesAndUnknownDependenciesGoToBreakerd() throws Exception {
    String dep = "local/retry-java";
    BreakerdClient c = client(b -> {});
    try (Permit p = c.acquire("local/unknown-java")) {
      assertEquals(Decision.Source.SIDECAR, p.decision().source(), "seen for the first time");
      p.success();
    }
    untilLocal(server, c, dep);
    try (Permit p = c.acquire(dep, 1)) {
      assertEquals(Decision.Source.SIDECAR, p.decision().source(), "a retry");
      p.success();
    }
    try (Permit p = c.acquire(dep)) {
      assertEquals(Decision.Source.LOCAL, p.decision().source());
      p.success();
    }
    // The retry helper: its first attempt local, the retry asked of breakerd.
    double allowed = acquires(dep, "allowed");
    AtomicInteger tries = new AtomicInteger();
    assertEquals("ok", c.retry(dep, RetryPolicy.ofAttempts(2).withBackoff(Duration.ofMillis(1),
        Duration.ofMillis(1)),
        () -> {
          if (tries.incrementAndGet() == 1) {
            throw new IOException("once");
          }
          return "ok";
        }));
    assertEquals(allowed + 1, acquires(dep, "allowed"), "only the retry went to breakerd");
  }

  /** A child JVM running {@link LocalProbeChild}, its output lines collected. */
  private static final class Child {
    final Process process;
    final List<String> lines = new CopyOnWriteArrayList<>();

    private Child(Process process) {
      this.process = process;
      Thread reader = new Thread(() -> {
        try (BufferedReader r = new BufferedReader(
            new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8))) {
          for (String line; (line = r.readLine()) != null; ) {
            lines.add(line);
          }
        } catch (IOException ended) {
          // the process ended
        }
      }, "child-output");
      reader.setDaemon(true);
      reader.start();
    }

    static Child start(String target, String dep) throws IOException {
      String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
      ProcessBuilder pb = new ProcessBuilder(java, "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
          "-cp", System.getProperty("java.class.path"), LocalProbeChild.class.getName(),
          target, dep, "PT2S");
      pb.redirectErrorStream(true);
      return new Child(pb.start());
    }

    boolean awaitLine(String line, Duration within) throws Exception {
      return eventually(within, () -> lines.contains(line) || !process.isAlive())
          && lines.contains(line);
    }

    /** The child's last line starting "ran " or "refused ". */
    String result() {
      String result = "no result: " + lines;
      for (String line : lines) {
        if (line.startsWith("ran ") || line.startsWith("refused ")) {
          result = line;
        }
      }
      return result;
    }
  }
}

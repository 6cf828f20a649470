package io.breakerd.client;

import static io.breakerd.client.BreakerdServer.eventually;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.TreeMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * A named fallback chain: the helper asks breakerd with the chain's name and
 * first tier, also for candidates its Watch cache knows to be open, so that
 * breakerd counts every decision (tier {@code none} too) and every outcome
 * with its tier; without a name nothing is counted as a chain.
 */
class ChainTest {
  private static final Duration WAIT = Duration.ofSeconds(10);
  private static final Pattern LABEL = Pattern.compile("(\\w+)=\"((?:[^\"\\\\]|\\\\.)*)\"");

  @RegisterExtension static final BreakerdExtension breakerd = new BreakerdExtension();

  private final BreakerdServer server = breakerd.server();
  private final BreakerdClient client = breakerd.client();

  // conformance: chain
  @Test
  void namedChainIsCountedAtEveryTierAndWhenNoneIsGranted() throws Exception {
    String chain = "conf-chain-java";
    String p = "chain-java/p";
    String s = "chain-java/s";
    String t = "chain-java/t";
    List<String> deps = List.of(p, s, t);
    List<String> seen = new CopyOnWriteArrayList<>();

    // 1. Every dependency closed: p runs.
    assertEquals("from " + p, client.first(chain, deps, dep -> {
      seen.add(dep);
      return "from " + dep;
    }));
    assertEquals(List.of(p), seen);

    // 2. p open, and the Watch cache knows it: breakerd is asked about p all
    // the same; s fails with a server error, then t succeeds.
    open(p);
    double pAcquires = server.acquires(p);
    seen.clear();
    assertEquals("from " + t, client.first(chain, deps, dep -> {
      seen.add(dep);
      if (dep.equals(s)) {
        throw new IOException(dep + " is down");
      }
      return "from " + dep;
    }));
    assertEquals(List.of(s, t), seen);
    assertEquals(pAcquires + 1, server.acquires(p), "breakerd was not asked about p");

    // 3. All three open, and the cache knows: breakerd refuses the chain, no call runs.
    open(s);
    open(t);
    seen.clear();
    long localBefore = client.stats().localRejections();
    BreakerOpenException none = assertThrows(BreakerOpenException.class,
        () -> client.first(chain, deps, seen::add));
    assertEquals(Decision.Source.SIDECAR, none.source());
    assertEquals(RejectReason.OPEN, none.reason());
    assertTrue(seen.isEmpty());
    assertEquals(localBefore, client.stats().localRejections());

    assertEquals(Map.of("0", 1.0, "1", 1.0, "2", 1.0, "none", 1.0),
        chainSamples("breakerd_chain_decisions_total", chain));
    assertEquals(Map.of("0/success", 1.0, "1/server_error", 1.0, "2/success", 1.0),
        chainSamples("breakerd_chain_outcomes_total", chain));
  }

  @Test
  void invalidChainNameIsRefusedBeforeAnyRpc() throws Exception {
    String dep = "chain-java/never-asked";
    double rpcsBefore = rpcs("AcquireFirst");
    List<String> seen = new CopyOnWriteArrayList<>();
    for (String bad : Arrays.asList("", "two words", "x".repeat(201), "caf\u00e9", null)) {
      IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
          () -> client.first(bad, List.of(dep), seen::add));
      assertTrue(e.getMessage().startsWith("chain: "), e.getMessage());
      e = assertThrows(IllegalArgumentException.class,
          () -> client.acquireFirst(bad, List.of(dep), 0));
      assertTrue(e.getMessage().startsWith("chain: "), e.getMessage());
    }
    assertTrue(seen.isEmpty());
    assertEquals(rpcsBefore, rpcs("AcquireFirst"));
    assertEquals(0, server.acquires(dep));
    // The longest valid name is taken.
    assertEquals(dep, client.first("c".repeat(200), List.of(dep), d -> d));
  }

  @Test
  void acquireFirstWithAChainSendsItsFirstTierAndThePermitReportsItsTier() throws Exception {
    String chain = "tier-java";
    String x = "chain-java/tier-x";
    String y = "chain-java/tier-y";
    server.forceOpen(x);
    assertTrue(eventually(WAIT,
        () -> client.cachedState(x).equals(Optional.of(State.FORCED_OPEN))));
    // The caller's chain is [.., .., x, y]: x is refused by breakerd, y is tier 3.
    try (Permit permit = client.acquireFirst(chain, List.of(x, y), 2)) {
      assertEquals(y, permit.dependency());
      assertEquals(Decision.Source.SIDECAR, permit.decision().source());
      permit.report(Outcome.of(Outcome.Kind.RATE_LIMITED));
    }
    assertEquals(Map.of("3", 1.0), chainSamples("breakerd_chain_decisions_total", chain));
    assertEquals(Map.of("3/rate_limited", 1.0),
        chainSamples("breakerd_chain_outcomes_total", chain));
    assertThrows(IllegalArgumentException.class, () -> client.acquireFirst(chain, List.of(y), -1));
  }

  @Test
  void withoutANameBreakerdCountsNoChain() throws Exception {
    double decisions = server.metric("breakerd_chain_decisions_total", Map.of());
    double outcomes = server.metric("breakerd_chain_outcomes_total", Map.of());
    String a = "chain-java/unnamed-a";
    String b = "chain-java/unnamed-b";
    assertEquals(b, client.first(List.of(a, b), dep -> {
      if (dep.equals(a)) {
        throw new IOException(dep + " is down");
      }
      return dep;
    }));
    try (Permit permit = client.acquireFirst(List.of(a, b))) {
      permit.success();
    }
    assertEquals(decisions, server.metric("breakerd_chain_decisions_total", Map.of()));
    assertEquals(outcomes, server.metric("breakerd_chain_outcomes_total", Map.of()));
  }

  @Test
  void whenBreakerdDoesNotAnswerTheNamedChainUsesTheWatchCacheAsBefore() throws Exception {
    String p = "chain-java/away-p";
    String s = "chain-java/away-s";
    BreakerdClient c = breakerd.newClient(b -> b.decisionTimeout(Duration.ofMillis(300)));
    server.forceOpen(p);
    assertTrue(eventually(WAIT, () -> c.cachedState(p).equals(Optional.of(State.FORCED_OPEN))));
    List<String> seen = new CopyOnWriteArrayList<>();
    server.freeze();
    try {
      // The AcquireFirst times out: fail open on the first dependency the cache does not refuse.
      assertEquals(s, c.first("away-java", List.of(p, s), dep -> {
        seen.add(dep);
        return dep;
      }));
      long awayBefore = c.stats().awayDecisions();
      // Now away: no RPC, the same decision.
      assertEquals(s, c.first("away-java", List.of(p, s), dep -> {
        seen.add(dep);
        return dep;
      }));
      assertEquals(awayBefore + 1, c.stats().awayDecisions());
      assertEquals(List.of(s, s), seen);
      assertEquals(2, c.stats().failOpen());
      // Every candidate refused by the cache: a LOCAL refusal, as without a name.
      BreakerOpenException e = assertThrows(BreakerOpenException.class,
          () -> c.first("away-java", List.of(p), seen::add));
      assertEquals(Decision.Source.LOCAL, e.source());
    } finally {
      server.thaw();
    }
  }

  /**
   * Opens {@code dep}'s breaker with guarded calls that fail (as many as
   * breakerd needs: three in a row open it) and waits until the client's Watch
   * cache holds it open: a plain Acquire is refused LOCAL.
   */
  private void open(String dep) throws Exception {
    for (int i = 0; i < 3 && server.status(dep).getState() != io.breakerd.v1.State.STATE_OPEN;
        i++) {
      assertThrows(IOException.class, () -> client.call(dep, () -> {
        throw new IOException(dep + " is down");
      }));
    }
    assertEquals(io.breakerd.v1.State.STATE_OPEN, server.status(dep).getState());
    assertTrue(eventually(WAIT, () -> client.cachedState(dep).equals(Optional.of(State.OPEN))),
        "the Watch cache never held " + dep + " open");
    assertEquals(Decision.Source.LOCAL,
        assertThrows(BreakerOpenException.class, () -> client.acquire(dep)).source());
  }

  /**
   * The nonzero samples of {@code family} for {@code chain}, keyed by their
   * other labels' values in order (tier, or tier/class).
   */
  private Map<String, Double> chainSamples(String family, String chain) throws Exception {
    Map<String, Double> out = new TreeMap<>();
    for (String line : server.scrape().split("\n")) {
      if (!line.startsWith(family + "{")) {
        continue;
      }
      int close = line.lastIndexOf('}');
      Map<String, String> labels = new TreeMap<>();
      Matcher m = LABEL.matcher(line.substring(family.length() + 1, close));
      while (m.find()) {
        labels.put(m.group(1), m.group(2));
      }
      double value = Double.parseDouble(line.substring(close + 1).trim().split(" ")[0]);
      if (!chain.equals(labels.remove("chain")) || value == 0) {
        continue;
      }
      String key = labels.containsKey("class")
          ? labels.get("tier") + "/" + labels.get("class") : labels.get("tier");
      out.merge(key, value, Double::sum);
    }
    return out;
  }

  /** How many {@code method} RPCs breakerd handled (every status code). */
  private double rpcs(String method) throws Exception {
    return server.metric("breakerd_grpc_server_handled_total", Map.of("method", method));
  }
}

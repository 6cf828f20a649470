package breakerd.bench.local;

import io.breakerd.client.BreakerOpenException;
import io.breakerd.client.BreakerdClient;
import io.breakerd.client.Decision;
import io.breakerd.client.Permit;
import io.github.resilience4j.circuitbreaker.CircuitBreaker;
import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Arrays;
import java.util.Locale;
import java.util.concurrent.Callable;
import java.util.function.Supplier;
import java.util.jar.Manifest;

/**
 * bench/local for the Java client (see bench/local/java/run.sh): in one run,
 * against the breakerd at {@code BREAKERD_ADDR} (bench/local/breakerd.yaml),
 * each call timed on its own with System.nanoTime after a warm-up:
 *
 * <ul>
 *   <li>{@code local}: {@link BreakerdClient#call} around a no-op, local decisions on;
 *   <li>{@code rpc}: the same with {@code localDecisions(false)} (an Acquire and a
 *       Report RPC per call);
 *   <li>{@code peer}: resilience4j's {@link CircuitBreaker#executeSupplier} around the
 *       same no-op;
 * </ul>
 *
 * breakerd's CPU (utime + stime of {@code BREAKERD_PID}, clock ticks of
 * {@code CLK_TCK}) per call on both client paths, and the trip reaction: from
 * the fifth failure (which trips the breaker) to the local refusal in both
 * the failing client and an observer client of the same process.
 *
 * <p>Usage: {@code java -jar local-bench.jar [--smoke] OUT.json}.
 */
public final class LocalBench {
  private static final Callable<Integer> NOOP = () -> 1;
  private static final Supplier<Integer> PEER_NOOP = () -> 1;
  private static final IOException UPSTREAM_DOWN = new IOException("upstream down");
  private static final Callable<Integer> FAILING = () -> {
    throw UPSTREAM_DOWN;
  };
  /**
   * Generous, so that the RPC figures are breakerd's answers, not fail-open
   * decisions on a loaded machine (counted and printed if any).
   */
  private static final Duration DECISION_TIMEOUT = Duration.ofSeconds(1);
  private static final Duration WAIT = Duration.ofSeconds(10);

  private final boolean smoke;
  private final String target;
  private final long breakerdPid;
  private final long clockTicks;

  private LocalBench(boolean smoke) {
    this.smoke = smoke;
    this.target = System.getenv("BREAKERD_ADDR");
    this.breakerdPid = Long.parseLong(System.getenv("BREAKERD_PID"));
    this.clockTicks = Long.parseLong(System.getenv().getOrDefault("CLK_TCK", "100"));
  }

  public static void main(String[] args) throws Exception {
    boolean smoke = args.length == 2 && args[0].equals("--smoke");
    if (args.length != (smoke ? 2 : 1)) {
      System.err.println("usage: java -jar local-bench.jar [--smoke] OUT.json");
      System.exit(2);
    }
    Path out = Path.of(args[args.length - 1]);
    Files.writeString(out, new LocalBench(smoke).run());
  }

  /** The distribution of one path: median and p99 of single calls, in ns. */
  private record Timing(long median, long p99, int calls) {
    String json() {
      return String.format(Locale.ROOT, "{\"median\": %d, \"p99\": %d, \"calls\": %d}",
          median, p99, calls);
    }
  }

  private String run() throws Exception {
    int localCalls = smoke ? 2_000 : 200_000;
    int rpcCalls = smoke ? 500 : 20_000;
    int tripSamples = smoke ? 5 : 100;

    long[] cpu = new long[2];
    Timing local = local(localCalls, cpu);
    Timing rpc = rpc(rpcCalls, cpu);
    Timing peer = peer(localCalls);
    double[] trip = tripReaction(tripSamples);

    String runtime =
        System.getProperty("java.vm.name") + " " + System.getProperty("java.vm.version");
    return String.format(Locale.ROOT,
        "{\"language\": \"java\", \"peer\": \"resilience4j %s\", \"runtime\": \"%s\",%n"
            + " \"guarded_call_ns\": {\"local\": %s,%n"
            + "                     \"rpc\": %s, \"peer\": %s},%n"
            + " \"sidecar_cpu_ns_per_call\": {\"local\": %d, \"rpc\": %d},%n"
            + " \"trip_reaction_ms\": {\"p50\": %.2f, \"p99\": %.2f, \"max\": %.2f,"
            + " \"samples\": %d}}%n",
        resilience4jVersion(), runtime, local.json(), rpc.json(), peer.json(), cpu[0], cpu[1],
        trip[0], trip[1], trip[2], tripSamples);
  }

  private BreakerdClient client(boolean localDecisions) {
    BreakerdClient c = BreakerdClient.builder()
        .target(target)
        .decisionTimeout(DECISION_TIMEOUT)
        .localDecisions(localDecisions)
        .build();
    if (!c.awaitReady(WAIT)) {
      throw new IllegalStateException("breakerd at " + target + " is not ready");
    }
    return c;
  }

  /** Guarded no-op calls decided in the client; {@code cpu[0]}: breakerd's ns per call. */
  private Timing local(int calls, long[] cpu) throws Exception {
    String dep = "bench/local";
    BreakerdClient c = client(true);
    c.call(dep, NOOP); // creates the breaker: its `created` event turns the fast path on
    untilLocal(c, dep);
    for (int i = 0; i < calls; i++) {
      c.call(dep, NOOP);
    }
    Thread.sleep(200); // the warm-up's last batch lands
    long[] ns = new long[calls];
    long cpu0 = breakerdCpuNanos();
    for (int i = 0; i < calls; i++) {
      long t0 = System.nanoTime();
      c.call(dep, NOOP);
      ns[i] = System.nanoTime() - t0;
    }
    c.close(); // sends the last batch and waits for it
    cpu[0] = (breakerdCpuNanos() - cpu0) / calls;
    System.err.printf("local: %s, %d outcomes dropped%n", c.stats(), c.stats().droppedOutcomes());
    return timing("local", ns);
  }

  /** The same through breakerd (Acquire and Report RPCs); {@code cpu[1]}: ns per call. */
  private Timing rpc(int calls, long[] cpu) throws Exception {
    String dep = "bench/rpc";
    try (BreakerdClient c = client(false)) {
      for (int i = 0; i < Math.max(calls / 10, 200); i++) {
        c.call(dep, NOOP);
      }
      long failOpen = c.stats().failOpen();
      long[] ns = new long[calls];
      long cpu0 = breakerdCpuNanos();
      for (int i = 0; i < calls; i++) {
        long t0 = System.nanoTime();
        c.call(dep, NOOP);
        ns[i] = System.nanoTime() - t0;
      }
      cpu[1] = (breakerdCpuNanos() - cpu0) / calls; // each Report was answered before call returned
      System.err.printf("rpc: %d fail-open decisions while measured%n",
          c.stats().failOpen() - failOpen);
      return timing("rpc", ns);
    }
  }

  /** resilience4j's breaker around the same no-op, in process. */
  private static Timing peer(int calls) {
    CircuitBreaker cb = CircuitBreaker.ofDefaults("bench/peer");
    for (int i = 0; i < calls; i++) {
      cb.executeSupplier(PEER_NOOP);
    }
    long[] ns = new long[calls];
    for (int i = 0; i < calls; i++) {
      long t0 = System.nanoTime();
      cb.executeSupplier(PEER_NOOP);
      ns[i] = System.nanoTime() - t0;
    }
    return timing("peer", ns);
  }

  /**
   * Samples of the trip reaction, each on a fresh dependency: the fast path on
   * in the failing client and in an observer client, five failures, then each
   * client's guarded no-op calls until one is refused LOCAL; the sample is the
   * later refusal. Returns p50, p99 and max in ms.
   */
  private double[] tripReaction(int samples) throws Exception {
    double[] ms = new double[samples];
    try (BreakerdClient failing = client(true)) {
      for (int n = 0; n < samples; n++) {
        String dep = "trip/" + n;
        failing.call(dep, NOOP);
        untilLocal(failing, dep);
        try (BreakerdClient observer = client(true)) {
          untilLocal(observer, dep);
          for (int i = 0; i < 5; i++) {
            try {
              failing.call(dep, FAILING);
            } catch (IOException expected) {
              // reported as a server error
            }
          }
          long t0 = System.nanoTime();
          untilRefusedLocally(failing, dep);
          long last = untilRefusedLocally(observer, dep);
          ms[n] = (last - t0) / 1e6;
        }
      }
    }
    System.err.println("trip_reaction_ms samples: " + Arrays.toString(ms));
    Arrays.sort(ms);
    return new double[] {rank(ms, 0.50), rank(ms, 0.99), ms[ms.length - 1]};
  }

  /**
   * Guarded no-op calls until one is refused LOCAL; when (System.nanoTime).
   * The thread yields between calls: on a two-core machine a loop that never
   * yields holds a core the client's I/O threads and breakerd need to deliver
   * the very refusal it waits for.
   */
  private static long untilRefusedLocally(BreakerdClient c, String dep) throws Exception {
    long end = System.nanoTime() + WAIT.toNanos();
    while (System.nanoTime() < end) {
      try {
        c.call(dep, NOOP);
      } catch (BreakerOpenException e) {
        if (e.source() == Decision.Source.LOCAL) {
          return System.nanoTime();
        }
      }
      Thread.yield();
    }
    throw new IllegalStateException(dep + " was not refused locally within " + WAIT);
  }

  /** Two-step Acquires, reported with the decision, until one is granted LOCAL. */
  private static void untilLocal(BreakerdClient c, String dep) throws Exception {
    long end = System.nanoTime() + WAIT.toNanos();
    while (System.nanoTime() < end) {
      try (Permit p = c.acquire(dep)) {
        p.success();
        if (p.decision().source() == Decision.Source.LOCAL) {
          return;
        }
      }
      Thread.sleep(1);
    }
    throw new IllegalStateException(dep + ": no local grant within " + WAIT);
  }

  private static Timing timing(String path, long[] ns) {
    long[] sorted = ns.clone();
    Arrays.sort(sorted);
    System.err.printf("%s: p10 %d, p50 %d, p90 %d, p99 %d, p99.9 %d, max %d ns%n", path,
        rank(sorted, 0.10), rank(sorted, 0.50), rank(sorted, 0.90), rank(sorted, 0.99),
        rank(sorted, 0.999), sorted[sorted.length - 1]);
    return new Timing(rank(sorted, 0.50), rank(sorted, 0.99), sorted.length);
  }

  /** The nearest-rank percentile {@code q} of sorted {@code values}. */
  private static long rank(long[] sorted, double q) {
    int i = (int) Math.ceil(q * sorted.length) - 1;
    return sorted[Math.max(0, Math.min(sorted.length - 1, i))];
  }

  private static double rank(double[] sorted, double q) {
    int i = (int) Math.ceil(q * sorted.length) - 1;
    return sorted[Math.max(0, Math.min(sorted.length - 1, i))];
  }

  /** breakerd's CPU time so far: utime + stime (fields 14 and 15 of /proc/PID/stat). */
  private long breakerdCpuNanos() throws IOException {
    String stat = Files.readString(Path.of("/proc", Long.toString(breakerdPid), "stat"));
    String[] fields = stat.substring(stat.lastIndexOf(')') + 2).split(" ");
    long ticks = Long.parseLong(fields[11]) + Long.parseLong(fields[12]); // fields 14, 15
    return ticks * 1_000_000_000L / clockTicks;
  }

  private static String resilience4jVersion() throws IOException {
    try (InputStream in = LocalBench.class.getResourceAsStream("/META-INF/MANIFEST.MF")) {
      String v = in == null ? null
          : new Manifest(in).getMainAttributes().getValue("Resilience4j-Version");
      return v == null ? "unknown" : v;
    }
  }
}

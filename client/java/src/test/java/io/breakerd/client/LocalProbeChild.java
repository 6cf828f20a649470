package io.breakerd.client;

import java.time.Duration;
import java.util.Optional;
import java.util.concurrent.TimeUnit;

/**
 * One of the other processes of the {@code local-probe} scenario
 * ({@link LocalDecisionsTest}), run in a JVM of its own:
 * {@code java -cp CLASSPATH io.breakerd.client.LocalProbeChild TARGET DEPENDENCY [TIMEOUT]}.
 * With a client of default options (but the decision timeout, an ISO-8601
 * duration such as {@code PT2S}, when given: a loaded test machine answers
 * slower than the default 20 ms) it prints {@code ready}, waits until its
 * Watch cache holds the breaker open (an Acquire refused {@code LOCAL}),
 * sleeps until that refusal's {@code retry_after} has passed, then makes one
 * guarded call that takes 300 ms and succeeds, and prints how it was decided:
 * {@code ran SOURCE probe|noprobe STATE} or {@code refused SOURCE REASON} (with
 * {@code decided in N us} before it and its counters after).
 * Exit status 0 unless something else went wrong (then the reason is printed).
 */
public final class LocalProbeChild {
  private static final Duration WAIT = Duration.ofSeconds(30);

  private LocalProbeChild() {}

  public static void main(String[] args) throws Exception {
    String target = args[0];
    String dep = args[1];
    BreakerdClient.Builder options = BreakerdClient.builder().target(target);
    if (args.length > 2) {
      options.decisionTimeout(Duration.parse(args[2]));
    }
    try (BreakerdClient client = options.build()) {
      if (!client.awaitReady(WAIT)) {
        System.out.println("error: breakerd not ready");
        System.exit(1);
      }
      // A fresh JVM's first RPCs are slow: warm the path up elsewhere, so the
      // call that matters is not decided by the 20 ms timeout.
      for (int i = 0; i < 50; i++) {
        client.call("warm/java-probe-child", () -> null);
      }
      System.out.println("ready");
      System.out.flush();

      long end = System.nanoTime() + WAIT.toNanos();
      Decision refusal = null;
      while (refusal == null && System.nanoTime() < end) {
        if (client.cachedState(dep).equals(Optional.of(State.OPEN))) {
          try (Permit p = client.acquire(dep)) {
            System.out.println("error: granted before the cache refused: " + p.decision());
            System.exit(1);
          } catch (BreakerOpenException e) {
            if (e.source() == Decision.Source.LOCAL) {
              refusal = e.decision();
            }
          }
        }
        Thread.sleep(2);
      }
      if (refusal == null) {
        System.out.println("error: the cache never held " + dep + " open");
        System.exit(1);
      }
      TimeUnit.NANOSECONDS.sleep(refusal.retryAfter().toNanos() + TimeUnit.MILLISECONDS.toNanos(5));

      long t0 = System.nanoTime();
      try (Permit p = client.acquire(dep)) {
        System.out.println("decided in " + (System.nanoTime() - t0) / 1000 + " us");
        Decision d = p.decision();
        p.call(() -> {
          Thread.sleep(300);
          return null;
        });
        p.success();
        System.out.println("ran " + d.source() + (d.probe() ? " probe" : " noprobe " + d.state()));
      } catch (BreakerOpenException e) {
        System.out.println("decided in " + (System.nanoTime() - t0) / 1000 + " us");
        System.out.println("refused " + e.source() + " " + e.reason());
      }
      System.out.println("stats " + client.stats());
    }
  }
}

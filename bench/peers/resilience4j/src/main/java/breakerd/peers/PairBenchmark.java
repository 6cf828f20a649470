// Peer benchmark: resilience4j doing the same work as breakerd's engine
// benchmark (bench/engine_bench.cc): one "pair" = registry lookup by dependency
// name + tryAcquirePermission() + onSuccess(duration) on a CLOSED breaker.
//
// Benchmark-only: never linked into breakerd.
package breakerd.peers;

import io.github.resilience4j.circuitbreaker.CircuitBreaker;
import io.github.resilience4j.circuitbreaker.CircuitBreakerConfig;
import io.github.resilience4j.circuitbreaker.CircuitBreakerRegistry;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Threads;

@BenchmarkMode({Mode.AverageTime, Mode.SampleTime})
@OutputTimeUnit(TimeUnit.NANOSECONDS)
public class PairBenchmark {

  /**
   * breakerd defaults, where resilience4j has an equivalent:
   * failure_rate {threshold 0.5, min_calls 20, window 30s} -> failureRateThreshold 50,
   * TIME_BASED sliding window of 30 s, minimumNumberOfCalls 20; cooldown base 30 s ->
   * waitDurationInOpenState 30 s; required_successes 1 -> 1 call in half-open.
   * Not expressible: consecutive_failures 5 (resilience4j has no such rule).
   * Everything else (sliding-window synchronization SYNCHRONIZED, slow-call rule at
   * 100% / 60 s, no automatic open->half-open transition) is resilience4j's default.
   */
  static CircuitBreakerConfig breakerdDefaults() {
    return CircuitBreakerConfig.custom()
        .failureRateThreshold(50)
        .slidingWindowType(CircuitBreakerConfig.SlidingWindowType.TIME_BASED)
        .slidingWindowSize(30)
        .minimumNumberOfCalls(20)
        .waitDurationInOpenState(Duration.ofSeconds(30))
        .permittedNumberOfCallsInHalfOpenState(1)
        .build();
  }

  /** One registry shared by all threads of a run, as in engine_bench.cc. */
  @State(Scope.Benchmark)
  public static class Registry {
    CircuitBreakerRegistry registry;
    // Reported call duration: a field (not a constant) so it cannot be folded; no
    // clock read, like breakerd's benchmark which reports an outcome without one.
    long durationNanos = 1_000_000L;

    @Setup(Level.Trial)
    public void setup() {
      registry = CircuitBreakerRegistry.of(breakerdDefaults());
    }
  }

  private static final AtomicInteger NEXT_KEY = new AtomicInteger();

  /** Per-thread dependency name: bench/key-0, bench/key-1, ... */
  @State(Scope.Thread)
  public static class ThreadKey {
    String name;

    @Setup(Level.Trial)
    public void setup() {
      name = "bench/key-" + NEXT_KEY.getAndIncrement();
    }
  }

  static boolean pair(Registry r, String name) {
    CircuitBreaker cb = r.registry.circuitBreaker(name);
    if (!cb.tryAcquirePermission()) {
      throw new IllegalStateException("not permitted: " + cb.getState());
    }
    cb.onSuccess(r.durationNanos, TimeUnit.NANOSECONDS);
    return true;
  }

  @Benchmark
  @Threads(1)
  public boolean pair_1thread(Registry r, ThreadKey k) {
    return pair(r, k.name);
  }

  @Benchmark
  @Threads(2)
  public boolean pair_2threads_distinct_keys(Registry r, ThreadKey k) {
    return pair(r, k.name);
  }

  @Benchmark
  @Threads(2)
  public boolean pair_2threads_same_key(Registry r) {
    return pair(r, "bench/shared");
  }

  /** A breaker forced open (like breakerd's ForceOpen): lookup + refused permission. */
  @State(Scope.Benchmark)
  public static class Open {
    CircuitBreakerRegistry registry;

    @Setup(Level.Trial)
    public void setup() {
      registry = CircuitBreakerRegistry.of(breakerdDefaults());
      CircuitBreaker cb = registry.circuitBreaker("bench/open");
      cb.transitionToForcedOpenState();
      if (cb.tryAcquirePermission()) {
        throw new IllegalStateException("forced-open breaker permitted a call");
      }
    }

    @TearDown(Level.Trial)
    public void check() {
      if (registry.circuitBreaker("bench/open").getState() != CircuitBreaker.State.FORCED_OPEN) {
        throw new IllegalStateException("breaker left FORCED_OPEN");
      }
    }
  }

  @Benchmark
  @Threads(1)
  public boolean reject_open(Open o) {
    return o.registry.circuitBreaker("bench/open").tryAcquirePermission();
  }

  /** Empty method in SampleTime: the timer floor included in every sample. */
  @Benchmark
  @Threads(1)
  @BenchmarkMode(Mode.SampleTime)
  public int timer_floor() {
    return 0;
  }
}

package io.breakerd.client;

import java.time.Duration;
import java.util.Objects;
import java.util.concurrent.ThreadLocalRandom;

/**
 * How {@link BreakerdClient#retry} retries: at most {@code maxAttempts} calls
 * in all, sleeping {@code uniform(0, min(max, base * 2^(attempt-1)))} (full
 * jitter) before attempt {@code attempt >= 1}. Immutable and thread-safe.
 *
 * @param maxAttempts calls in all, first try included (default 3); at least 1
 * @param base the first backoff cap (default 100 ms); positive
 * @param max the largest backoff cap (default 2 s); at least {@code base}
 */
public record RetryPolicy(int maxAttempts, Duration base, Duration max) {

  /** Validates the components. */
  public RetryPolicy {
    Objects.requireNonNull(base, "base");
    Objects.requireNonNull(max, "max");
    if (maxAttempts < 1) {
      throw new IllegalArgumentException("maxAttempts must be at least 1, got " + maxAttempts);
    }
    if (base.isNegative() || base.isZero()) {
      throw new IllegalArgumentException("base must be positive, got " + base);
    }
    if (max.compareTo(base) < 0) {
      throw new IllegalArgumentException("max must be at least base, got " + max);
    }
  }

  /** 3 attempts, backoff 100 ms doubling up to 2 s. */
  public static RetryPolicy defaults() {
    return new RetryPolicy(3, Duration.ofMillis(100), Duration.ofSeconds(2));
  }

  /** The defaults with {@code maxAttempts} attempts. */
  public static RetryPolicy ofAttempts(int maxAttempts) {
    return defaults().withMaxAttempts(maxAttempts);
  }

  /** This policy with {@code maxAttempts} attempts. */
  public RetryPolicy withMaxAttempts(int maxAttempts) {
    return new RetryPolicy(maxAttempts, base, max);
  }

  /** This policy with backoff {@code base} doubling up to {@code max}. */
  public RetryPolicy withBackoff(Duration base, Duration max) {
    return new RetryPolicy(maxAttempts, base, max);
  }

  /**
   * The cap of the sleep before retry number {@code attempt} (1-based):
   * {@code min(max, base * 2^(attempt-1))}; zero for {@code attempt < 1}.
   */
  public Duration backoffCap(int attempt) {
    if (attempt < 1) {
      return Duration.ZERO;
    }
    int shift = Math.min(attempt - 1, 30);
    long nanos = base.toNanos();
    long cap = nanos > (Long.MAX_VALUE >> shift) ? Long.MAX_VALUE : nanos << shift;
    return Duration.ofNanos(Math.min(cap, max.toNanos()));
  }

  /** A random sleep before {@code attempt}, uniform in {@code [0, backoffCap(attempt)]}. */
  public Duration backoff(int attempt) {
    long cap = backoffCap(attempt).toNanos();
    if (cap == 0) {
      return Duration.ZERO;
    }
    return Duration.ofNanos(ThreadLocalRandom.current().nextLong(cap + 1));
  }
}

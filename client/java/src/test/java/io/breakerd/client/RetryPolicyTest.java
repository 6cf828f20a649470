package io.breakerd.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import org.junit.jupiter.api.Test;

/** The retry policy's defaults and full-jitter backoff, without breakerd. */
class RetryPolicyTest {

  @Test
  void defaults() {
    RetryPolicy p = RetryPolicy.defaults();
    assertEquals(3, p.maxAttempts());
    assertEquals(Duration.ofMillis(100), p.base());
    assertEquals(Duration.ofSeconds(2), p.max());
  }

  @Test
  void capDoublesUpToMax() {
    RetryPolicy p = RetryPolicy.defaults();
    assertEquals(Duration.ZERO, p.backoffCap(0));
    assertEquals(Duration.ofMillis(100), p.backoffCap(1));
    assertEquals(Duration.ofMillis(200), p.backoffCap(2));
    assertEquals(Duration.ofMillis(1600), p.backoffCap(5));
    assertEquals(Duration.ofSeconds(2), p.backoffCap(6));
    assertEquals(Duration.ofSeconds(2), p.backoffCap(200));
  }

  @Test
  void backoffIsUniformWithinTheCap() {
    RetryPolicy p = RetryPolicy.defaults();
    Duration min = Duration.ofDays(1);
    Duration max = Duration.ZERO;
    for (int i = 0; i < 2000; i++) {
      Duration d = p.backoff(2);
      assertTrue(!d.isNegative() && d.compareTo(Duration.ofMillis(200)) <= 0, d.toString());
      min = d.compareTo(min) < 0 ? d : min;
      max = d.compareTo(max) > 0 ? d : max;
    }
    // Full jitter: spread over the whole range, not clustered near the cap.
    assertTrue(min.compareTo(Duration.ofMillis(20)) < 0, "min " + min);
    assertTrue(max.compareTo(Duration.ofMillis(180)) > 0, "max " + max);
  }

  @Test
  void rejectsNonsense() {
    assertThrows(IllegalArgumentException.class, () -> RetryPolicy.ofAttempts(0));
    assertThrows(IllegalArgumentException.class,
        () -> new RetryPolicy(3, Duration.ZERO, Duration.ofSeconds(1)));
    assertThrows(IllegalArgumentException.class,
        () -> new RetryPolicy(3, Duration.ofSeconds(2), Duration.ofSeconds(1)));
  }
}

package io.breakerd.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import java.io.IOException;
import java.time.Duration;
import java.util.Arrays;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** Required test 4: the retry helper never retries while the breaker is open. */
class RetryTest {
  /** Short sleeps keep the test quick; the backoff itself is covered by RetryPolicyTest. */
  private static final RetryPolicy FIVE = RetryPolicy.ofAttempts(5)
      .withBackoff(Duration.ofMillis(1), Duration.ofMillis(10));
  private static BreakerdServer server;
  private static BreakerdClient client;

  @BeforeAll
  static void start() throws Exception {
    server = BreakerdServer.start();
    client = server.client();
  }

  @AfterAll
  static void stop() throws Exception {
    if (client != null) {
      client.close();
    }
    if (server != null) {
      server.close();
    }
  }

  @Test
  void stopsWhenTheBreakerOpens() throws Exception {
    String dep = "retry/always-fails";
    AtomicInteger calls = new AtomicInteger();
    BreakerOpenException e = assertThrows(BreakerOpenException.class,
        () -> client.retry(dep, FIVE, () -> {
          calls.incrementAndGet();
          throw new IOException("upstream 500");
        }));
    assertEquals(3, calls.get(), "consecutive_failures 3 opens the breaker: no 4th call");
    assertEquals(RejectReason.OPEN, e.reason());
    assertTrue(e.source() == Decision.Source.SIDECAR || e.source() == Decision.Source.LOCAL);
    assertTrue(Arrays.stream(e.getSuppressed()).anyMatch(s -> s instanceof IOException),
        "the last call's error is attached");
    assertEquals(3, server.reports(dep, "server_error", "counted_failure"));
    assertEquals(io.breakerd.v1.State.STATE_OPEN, server.status(dep).getState());
  }

  @Test
  void stopsWhenTheBreakerOpensOnResults() throws Exception {
    String dep = "retry/always-503";
    AtomicInteger calls = new AtomicInteger();
    assertThrows(BreakerOpenException.class, () -> client.retry(dep, FIVE,
        () -> {
          calls.incrementAndGet();
          return 503;
        },
        Classifier.ofResult(Outcome::fromHttpStatus)));
    assertEquals(3, calls.get());
  }

  @Test
  void badRequestIsNotRetried() throws Exception {
    String dep = "retry/bad-request";
    AtomicInteger calls = new AtomicInteger();
    StatusRuntimeException bad = Status.INVALID_ARGUMENT.asRuntimeException();
    StatusRuntimeException thrown = assertThrows(StatusRuntimeException.class,
        () -> client.retry(dep, FIVE, () -> {
          calls.incrementAndGet();
          throw bad;
        }));
    assertSame(bad, thrown);
    assertEquals(1, calls.get());
    assertEquals(1, server.reports(dep, "bad_request", "neutral"));

    AtomicInteger httpCalls = new AtomicInteger();
    int status = client.retry("retry/http-404", FIVE, () -> {
      httpCalls.incrementAndGet();
      return 404;
    }, Classifier.ofResult(Outcome::fromHttpStatus));
    assertEquals(404, status);
    assertEquals(1, httpCalls.get());
  }

  @Test
  void retriesUntilSuccess() throws Exception {
    String dep = "retry/flaky";
    AtomicInteger calls = new AtomicInteger();
    String result = client.retry(dep, FIVE, () -> {
      if (calls.incrementAndGet() < 3) {
        throw new IOException("flaky");
      }
      return "third time";
    });
    assertEquals("third time", result);
    assertEquals(3, calls.get());
    assertEquals(2, server.reports(dep, "server_error", "counted_failure"));
    assertEquals(1, server.reports(dep, "success", "counted_success"));
  }

  @Test
  void lastErrorIsThrownAfterMaxAttempts() throws Exception {
    String dep = "retry/two-attempts";
    AtomicInteger calls = new AtomicInteger();
    assertThrows(IOException.class, () -> client.retry(dep, FIVE.withMaxAttempts(2), () -> {
      calls.incrementAndGet();
      throw new IOException("still down");
    }));
    assertEquals(2, calls.get());
  }
}

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
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * Required test 4: the retry helper never retries while the breaker is open,
 * nor an outcome that another try would not mend.
 */
class RetryTest {
  /** Short sleeps keep the test quick; the backoff itself is covered by RetryPolicyTest. */
  private static final RetryPolicy FIVE = RetryPolicy.ofAttempts(5)
      .withBackoff(Duration.ofMillis(1), Duration.ofMillis(10));

  @RegisterExtension static final BreakerdExtension breakerd = new BreakerdExtension();

  private final BreakerdServer server = breakerd.server();
  private final BreakerdClient client = breakerd.client();

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

  // conformance: soft-failure
  @Test
  void softFailureIsNotRetried() throws Exception {
    RetryPolicy three = RetryPolicy.ofAttempts(3)
        .withBackoff(Duration.ofMillis(1), Duration.ofMillis(10));
    // A result the classifier calls a soft failure (a model refusal, a content filter).
    String dep = "retry/soft-result";
    AtomicInteger calls = new AtomicInteger();
    String answer = client.retry(dep, three, () -> {
      calls.incrementAndGet();
      return "I cannot help with that";
    }, Classifier.ofResult(r -> Outcome.of(Outcome.Kind.SOFT_FAILURE)));
    assertEquals("I cannot help with that", answer, "the caller gets the call's result");
    assertEquals(1, calls.get(), "a soft failure is not retried");
    server.assertReports(dep, "soft_failure", 1);
    assertEquals(1, server.reports(dep));

    // An error the classifier calls a soft failure.
    String errDep = "retry/soft-error";
    AtomicInteger errCalls = new AtomicInteger();
    IOException filtered = new IOException("content filter");
    assertSame(filtered, assertThrows(IOException.class, () -> client.retry(errDep, three, () -> {
      errCalls.incrementAndGet();
      throw filtered;
    }, Classifier.standard().withErrors(e -> Outcome.of(Outcome.Kind.SOFT_FAILURE)))),
        "the caller gets the call's error");
    assertEquals(1, errCalls.get());
    server.assertReports(errDep, "soft_failure", 1);
    assertEquals(1, server.reports(errDep));
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

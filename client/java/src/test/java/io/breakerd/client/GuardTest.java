package io.breakerd.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.breakerd.v1.BreakerStatus;
import io.grpc.Status;
import java.io.IOException;
import java.net.SocketTimeoutException;
import java.util.List;
import java.util.concurrent.Callable;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * Required test 1: the guard reports the right classes, and a refused guard
 * does not call; a classifier that throws loses no permit.
 */
class GuardTest {
  @RegisterExtension static final BreakerdExtension breakerd = new BreakerdExtension();

  private final BreakerdServer server = breakerd.server();
  private final BreakerdClient client = breakerd.client();

  /** Runs {@code call} guarded and asserts breakerd counted one report of class/effect. */
  private void assertReported(String dep, String cls, String effect, Callable<?> guarded)
      throws Exception {
    try {
      guarded.call();
    } catch (Exception expected) {
      // errors are rethrown by the guard; the report is what we check
    }
    server.assertReports(dep, cls, effect, 1);
  }

  @Test
  void successIsCountedSuccess() throws Exception {
    assertEquals("ok", client.call("guard/success", () -> "ok"));
    assertReported("guard/success", "success", "counted_success", () -> null);
  }

  @Test
  void http503IsCountedFailure() throws Exception {
    int status = client.call("guard/http-503", () -> 503,
        Classifier.ofResult(Outcome::fromHttpStatus));
    assertEquals(503, status);
    assertReported("guard/http-503", "server_error", "counted_failure", () -> null);
    BreakerStatus s = server.status("guard/http-503");
    assertEquals(1, s.getConsecutiveFailures());
    assertEquals(1, s.getWindowFailures());
  }

  @Test
  void http404IsNeutralBadRequest() throws Exception {
    assertReported("guard/http-404", "bad_request", "neutral",
        () -> client.call("guard/http-404", () -> 404,
            Classifier.ofResult(Outcome::fromHttpStatus)));
    assertEquals(0, server.status("guard/http-404").getWindowCalls());
  }

  @Test
  void thrownErrorIsServerErrorAndRethrown() throws Exception {
    IOException boom = new IOException("boom");
    IOException thrown = assertThrows(IOException.class,
        () -> client.call("guard/error", () -> {
          throw boom;
        }));
    assertSame(boom, thrown);
    assertReported("guard/error", "server_error", "counted_failure", () -> null);
  }

  @Test
  void timeoutErrorIsTimeout() throws Exception {
    assertReported("guard/timeout", "timeout", "counted_failure",
        () -> client.call("guard/timeout", () -> {
          throw new SocketTimeoutException("read timed out");
        }));
  }

  @Test
  void grpcCodesAreClassifiedByBreakerd() throws Exception {
    assertReported("guard/grpc-unavailable", "connection_error", "counted_failure",
        () -> client.call("guard/grpc-unavailable", () -> {
          throw Status.UNAVAILABLE.asRuntimeException();
        }));
    assertReported("guard/grpc-deadline", "timeout", "counted_failure",
        () -> client.call("guard/grpc-deadline", () -> {
          throw Status.DEADLINE_EXCEEDED.asRuntimeException();
        }));
    assertReported("guard/grpc-not-found", "bad_request", "neutral",
        () -> client.call("guard/grpc-not-found", () -> {
          throw Status.NOT_FOUND.asException();
        }));
    assertReported("guard/grpc-denied", "auth_error", "neutral",
        () -> client.call("guard/grpc-denied", () -> {
          throw Status.PERMISSION_DENIED.asRuntimeException();
        }));
    assertReported("guard/grpc-exhausted", "rate_limited", "counted_failure",
        () -> client.call("guard/grpc-exhausted", () -> {
          throw Status.RESOURCE_EXHAUSTED.asRuntimeException();
        }));
    assertReported("guard/grpc-ok", "success", "counted_success",
        () -> client.call("guard/grpc-ok", () -> Status.OK,
            Classifier.ofResult(Outcome::fromGrpcStatus)));
  }

  @Test
  void permitReportsExplicitOutcomes() throws Exception {
    try (Permit p = client.acquire("guard/soft")) {
      assertEquals(Decision.Source.SIDECAR, p.decision().source());
      assertTrue(p.decision().permit() != 0);
      p.report(Outcome.of(Outcome.Kind.SOFT_FAILURE));
      assertTrue(p.isReported());
      assertThrows(IllegalStateException.class, p::success);
    }
    assertReported("guard/soft", "soft_failure", "counted_success", () -> null);
  }

  @Test
  void unreportedPermitIsCancelledOnClose() throws Exception {
    try (Permit p = client.acquire("guard/abandoned")) {
      assertFalse(p.isReported());
    }
    assertReported("guard/abandoned", "cancelled", "neutral", () -> null);
  }

  @Test
  void retryAfterHeaderStretchesTheCooldown() throws Exception {
    String dep = "guard/retry-after";
    for (int i = 0; i < 3; i++) {
      client.call(dep, () -> 503,
          Classifier.ofResult(s -> Outcome.fromHttpStatus(s, "120")));
    }
    BreakerStatus s = server.status(dep);
    assertEquals(io.breakerd.v1.State.STATE_OPEN, s.getState());
    // The policy's cooldown is 30 s; the upstream asked for 120 s.
    assertTrue(s.getRetryAfter().getSeconds() > 60, "retry_after " + s.getRetryAfter());
  }

  @Test
  void refusedGuardDoesNotCall() throws Exception {
    String dep = "guard/refused";
    server.forceOpen(dep);
    AtomicInteger calls = new AtomicInteger();
    BreakerOpenException e = assertThrows(BreakerOpenException.class,
        () -> client.call(dep, calls::incrementAndGet));
    assertEquals(0, calls.get());
    assertEquals(RejectReason.FORCED_OPEN, e.reason());
    assertEquals(dep, e.dependency());
    assertTrue(e.source() == Decision.Source.SIDECAR || e.source() == Decision.Source.LOCAL);
    assertEquals(0, server.reports(dep));
  }

  // conformance: classifier-raises
  @Test
  void classifierThatThrowsOnTheCallsErrorReachesTheCallerAndTheDefaultIsReported()
      throws Exception {
    String dep = "guard/classifier-throws";
    IOException upstream = new IOException("upstream down");
    IllegalStateException broken = new IllegalStateException("classifier bug");
    Classifier<Object> classifier = Classifier.standard().withErrors(e -> {
      throw broken;
    });

    IllegalStateException thrown = assertThrows(IllegalStateException.class,
        () -> client.call(dep, () -> {
          throw upstream;
        }, classifier));

    assertSame(broken, thrown, "the classifier's error reaches the caller");
    assertSame(upstream, thrown.getSuppressed()[0], "with the call's error attached");
    // Reported once, as the default classifier makes a plain error: server_error.
    server.assertReports(dep, "server_error", "counted_failure", 1);
    server.assertEveryPermitReported(dep);
    assertEquals(1, server.reports(dep));
  }

  @Test
  void classifierThatThrowsOnTheResultReachesTheCallerAndTheDefaultIsReported()
      throws Exception {
    String dep = "guard/classifier-throws-on-result";
    IllegalStateException broken = new IllegalStateException("classifier bug");
    IllegalStateException thrown = assertThrows(IllegalStateException.class,
        () -> client.call(dep, () -> 200, Classifier.<Integer>ofResult(status -> {
          throw broken;
        })));
    assertSame(broken, thrown);
    server.assertReports(dep, "success", "counted_success", 1);
    server.assertEveryPermitReported(dep);
    assertEquals(1, server.reports(dep));
  }

  @Test
  void classifierThatThrowsStopsRetryAndFallbackChain() throws Exception {
    IllegalStateException broken = new IllegalStateException("classifier bug");
    Classifier<Object> classifier = Classifier.standard().withErrors(e -> {
      throw broken;
    });
    AtomicInteger calls = new AtomicInteger();
    assertSame(broken, assertThrows(IllegalStateException.class,
        () -> client.retry("guard/classifier-retry", RetryPolicy.ofAttempts(3), () -> {
          calls.incrementAndGet();
          throw new IOException("upstream down"); // worth a retry, but not classified
        }, classifier)));
    assertEquals(1, calls.get(), "no retry after the classifier threw");
    server.assertReports("guard/classifier-retry", "server_error", 1);

    List<String> seen = new CopyOnWriteArrayList<>();
    assertSame(broken, assertThrows(IllegalStateException.class,
        () -> client.first(List.of("guard/classifier-a", "guard/classifier-b"),
            dep -> {
              seen.add(dep);
              throw new IOException(dep + " down");
            }, classifier)));
    assertEquals(List.of("guard/classifier-a"), seen, "the chain stops");
    server.assertReports("guard/classifier-a", "server_error", 1);
  }

  @Test
  void invalidNameIsAProgrammingError() {
    assertThrows(IllegalArgumentException.class, () -> client.acquire("not a valid name!"));
  }
}

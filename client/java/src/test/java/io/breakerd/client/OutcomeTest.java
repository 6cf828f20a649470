package io.breakerd.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.breakerd.client.Outcome.Kind;
import io.grpc.Status;
import java.io.IOException;
import java.net.ConnectException;
import java.net.SocketTimeoutException;
import java.net.UnknownHostException;
import java.net.http.HttpTimeoutException;
import java.time.Duration;
import java.util.concurrent.CancellationException;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeoutException;
import org.junit.jupiter.api.Test;

/** The outcome helpers, without breakerd. */
class OutcomeTest {

  @Test
  void httpStatusesAreSentRawAndClassifiedLikeBreakerd() {
    Outcome o = Outcome.fromHttpStatus(503);
    assertFalse(o.isExplicit());
    assertEquals(503, o.httpStatus());
    assertEquals(Kind.SERVER_ERROR, o.kind());
    assertEquals(Kind.SUCCESS, Outcome.fromHttpStatus(204).kind());
    assertEquals(Kind.SUCCESS, Outcome.fromHttpStatus(304).kind());
    assertEquals(Kind.TIMEOUT, Outcome.fromHttpStatus(408).kind());
    assertEquals(Kind.TIMEOUT, Outcome.fromHttpStatus(504).kind());
    assertEquals(Kind.RATE_LIMITED, Outcome.fromHttpStatus(429).kind());
    assertEquals(Kind.AUTH_ERROR, Outcome.fromHttpStatus(401).kind());
    assertEquals(Kind.AUTH_ERROR, Outcome.fromHttpStatus(403).kind());
    assertEquals(Kind.BAD_REQUEST, Outcome.fromHttpStatus(404).kind());
    assertEquals(Kind.SERVER_ERROR, Outcome.fromHttpStatus(529).kind());
    assertThrows(IllegalArgumentException.class, () -> Outcome.fromHttpStatus(600));
    assertThrows(IllegalArgumentException.class, () -> Outcome.fromHttpStatus(0));
  }

  @Test
  void retryAfterHeaderSecondsFormOnly() {
    assertEquals(Duration.ofSeconds(120), Outcome.fromHttpStatus(429, " 120 ").retryAfter());
    assertEquals(Duration.ZERO,
        Outcome.fromHttpStatus(503, "Wed, 21 Oct 2015 07:28:00 GMT").retryAfter());
    assertEquals(Duration.ZERO, Outcome.fromHttpStatus(503, "-5").retryAfter());
    assertEquals(Duration.ZERO, Outcome.fromHttpStatus(503, null).retryAfter());
    assertEquals(Duration.ofSeconds(3),
        Outcome.of(Kind.RATE_LIMITED).withRetryAfter(Duration.ofSeconds(3)).retryAfter());
  }

  @Test
  void grpcStatusesAreSentRawAndClassifiedLikeBreakerd() {
    Outcome o = Outcome.fromGrpcStatus(Status.UNAVAILABLE);
    assertFalse(o.isExplicit());
    assertEquals(14, o.grpcCode().orElseThrow());
    assertEquals(Kind.CONNECTION_ERROR, o.kind());
    assertEquals(Kind.SUCCESS, Outcome.fromGrpcCode(Status.Code.OK).kind());
    assertEquals(Kind.CANCELLED, Outcome.fromGrpcCode(Status.Code.CANCELLED).kind());
    assertEquals(Kind.TIMEOUT, Outcome.fromGrpcCode(Status.Code.DEADLINE_EXCEEDED).kind());
    assertEquals(Kind.RATE_LIMITED, Outcome.fromGrpcCode(Status.Code.RESOURCE_EXHAUSTED).kind());
    assertEquals(Kind.AUTH_ERROR, Outcome.fromGrpcCode(Status.Code.UNAUTHENTICATED).kind());
    assertEquals(Kind.BAD_REQUEST, Outcome.fromGrpcCode(Status.Code.ABORTED).kind());
    assertEquals(Kind.SERVER_ERROR, Outcome.fromGrpcCode(Status.Code.DATA_LOSS).kind());
    assertEquals(Kind.SERVER_ERROR,
        Outcome.fromGrpcStatus(Status.INTERNAL.asRuntimeException()).kind());
  }

  @Test
  void throwablesMapToExplicitClasses() {
    assertEquals(Outcome.of(Kind.TIMEOUT), Outcome.fromThrowable(new SocketTimeoutException()));
    assertEquals(Outcome.of(Kind.TIMEOUT), Outcome.fromThrowable(new TimeoutException()));
    assertEquals(Outcome.of(Kind.TIMEOUT), Outcome.fromThrowable(new HttpTimeoutException("t")));
    assertEquals(Outcome.of(Kind.CONNECTION_ERROR), Outcome.fromThrowable(new ConnectException()));
    assertEquals(Outcome.of(Kind.CONNECTION_ERROR),
        Outcome.fromThrowable(new UnknownHostException("nowhere")));
    assertEquals(Outcome.of(Kind.CANCELLED), Outcome.fromThrowable(new InterruptedException()));
    assertEquals(Outcome.of(Kind.CANCELLED), Outcome.fromThrowable(new CancellationException()));
    assertEquals(Outcome.of(Kind.SERVER_ERROR), Outcome.fromThrowable(new IOException()));
    assertEquals(Outcome.of(Kind.SERVER_ERROR), Outcome.fromThrowable(new IllegalStateException()));
    assertEquals(Outcome.of(Kind.TIMEOUT),
        Outcome.fromThrowable(new ExecutionException(new TimeoutException())));
    assertEquals(Outcome.fromGrpcCode(Status.Code.NOT_FOUND),
        Outcome.fromThrowable(Status.NOT_FOUND.asException()));
    assertTrue(Outcome.fromThrowable(new IOException()).isExplicit());
  }

  @Test
  void onlyFailuresThatMayPassAreRetryable() {
    assertTrue(Kind.TIMEOUT.isRetryable());
    assertTrue(Kind.CONNECTION_ERROR.isRetryable());
    assertTrue(Kind.SERVER_ERROR.isRetryable());
    assertTrue(Kind.RATE_LIMITED.isRetryable());
    assertFalse(Kind.SUCCESS.isRetryable());
    assertFalse(Kind.BAD_REQUEST.isRetryable());
    assertFalse(Kind.AUTH_ERROR.isRetryable());
    assertFalse(Kind.CANCELLED.isRetryable());
    assertFalse(Kind.SOFT_FAILURE.isRetryable(), "the upstream answered: not retried");
    assertFalse(Outcome.of(Kind.SOFT_FAILURE).isRetryable());
  }

  @Test
  void classifierOverrides() {
    Classifier<Integer> c = Classifier.<Integer>ofResult(Outcome::fromHttpStatus)
        .withErrors(e -> Outcome.of(Kind.BAD_REQUEST));
    assertEquals(Kind.SERVER_ERROR, c.onResult(500).kind());
    assertEquals(Kind.BAD_REQUEST, c.onError(new IOException()).kind());
    assertEquals(Outcome.success(), Classifier.standard().onResult("anything"));
  }
}

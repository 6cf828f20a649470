package io.breakerd.client;

import io.grpc.Status;
import io.grpc.StatusException;
import io.grpc.StatusRuntimeException;
import java.net.ConnectException;
import java.net.NoRouteToHostException;
import java.net.SocketTimeoutException;
import java.net.UnknownHostException;
import java.net.http.HttpTimeoutException;
import java.nio.channels.ClosedByInterruptException;
import java.nio.channels.UnresolvedAddressException;
import java.time.Duration;
import java.util.Objects;
import java.util.OptionalInt;
import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeoutException;

/**
 * How a guarded call ended, as reported to breakerd.
 *
 * <p>An outcome is one of: an explicit {@link Kind} (sent as {@code outcome}),
 * an HTTP status (sent as {@code http_status}; breakerd classifies it) or a
 * gRPC status code (sent as {@code grpc_code}; breakerd classifies it), plus an
 * optional Retry-After. {@link #kind()} is always known: for HTTP and gRPC
 * outcomes it is computed with the same table breakerd uses, so the retry
 * helper and the fallback chain can tell what is worth retrying.
 *
 * <p>Immutable and thread-safe.
 */
public final class Outcome {

  /** The classes breakerd knows (enum {@code breakerd.v1.Outcome}). */
  public enum Kind {
    /** The call worked. Counts as a success. */
    SUCCESS,
    /** The call timed out. Counts as a failure. */
    TIMEOUT,
    /** The upstream could not be reached. Counts as a failure. */
    CONNECTION_ERROR,
    /** The upstream failed. Counts as a failure. */
    SERVER_ERROR,
    /** The upstream is rate limiting. Counts as a failure unless the policy ignores it. */
    RATE_LIMITED,
    /** The request was wrong. Neutral. */
    BAD_REQUEST,
    /** The credential was refused. Neutral, counted apart. */
    AUTH_ERROR,
    /** The caller gave up for its own reasons. Neutral. */
    CANCELLED,
    /** The upstream answered but the answer is unusable. A success for the breaker. */
    SOFT_FAILURE;

    /**
     * Whether another attempt (a retry, or the next dependency of a fallback
     * chain) may help: timeouts, connection and server errors, rate limiting.
     * Success, bad request, auth error, cancelled and soft failure are final (a
     * soft failure is an answer from the upstream: asking again is not the
     * breaker's business).
     */
    public boolean isRetryable() {
      return switch (this) {
        case TIMEOUT, CONNECTION_ERROR, SERVER_ERROR, RATE_LIMITED -> true;
        case SUCCESS, BAD_REQUEST, AUTH_ERROR, CANCELLED, SOFT_FAILURE -> false;
      };
    }
  }

  private static final Outcome SUCCESS = new Outcome(Kind.SUCCESS, true, 0, null, Duration.ZERO);
  private static final Outcome CANCELLED =
      new Outcome(Kind.CANCELLED, true, 0, null, Duration.ZERO);

  private final Kind kind;
  private final boolean explicit;
  private final int httpStatus;
  private final Integer grpcCode;
  private final Duration retryAfter;

  private Outcome(
      Kind kind, boolean explicit, int httpStatus, Integer grpcCode, Duration retryAfter) {
    this.kind = kind;
    this.explicit = explicit;
    this.httpStatus = httpStatus;
    this.grpcCode = grpcCode;
    this.retryAfter = retryAfter;
  }

  /** An explicit outcome of the given kind. */
  public static Outcome of(Kind kind) {
    Objects.requireNonNull(kind, "kind");
    return switch (kind) {
      case SUCCESS -> SUCCESS;
      case CANCELLED -> CANCELLED;
      default -> new Outcome(kind, true, 0, null, Duration.ZERO);
    };
  }

  /** An explicit success. */
  public static Outcome success() {
    return SUCCESS;
  }

  /** An explicit cancellation (neutral): what a permit closed unreported sends. */
  public static Outcome cancelled() {
    return of(Kind.CANCELLED);
  }

  /**
   * The upstream answered with an HTTP status; breakerd classifies it (1xx-3xx
   * success; 408 and 504 timeout; 429 rate limited; 401 and 403 auth error;
   * other 4xx bad request; 5xx server error).
   *
   * @throws IllegalArgumentException if {@code status} is not in 100..599
   */
  public static Outcome fromHttpStatus(int status) {
    return fromHttpStatus(status, null);
  }

  /**
   * Like {@link #fromHttpStatus(int)}, with the response's Retry-After header
   * value (may be null). Only the delay-seconds form ({@code "120"}) is used;
   * an HTTP-date or a malformed value is ignored.
   */
  public static Outcome fromHttpStatus(int status, String retryAfterHeader) {
    if (status < 100 || status > 599) {
      throw new IllegalArgumentException("HTTP status must be 100..599, got " + status);
    }
    Duration retryAfter = parseRetryAfter(retryAfterHeader);
    return new Outcome(classifyHttp(status), false, status, null, retryAfter);
  }

  /** The upstream was a gRPC call that ended with {@code code}; breakerd classifies it. */
  public static Outcome fromGrpcCode(Status.Code code) {
    Objects.requireNonNull(code, "code");
    return new Outcome(classifyGrpc(code), false, 0, code.value(), Duration.ZERO);
  }

  /** The upstream was a gRPC call that ended with {@code status}; breakerd classifies its code. */
  public static Outcome fromGrpcStatus(Status status) {
    return fromGrpcCode(status.getCode());
  }

  /** The upstream gRPC call failed with {@code error}; breakerd classifies its code. */
  public static Outcome fromGrpcStatus(StatusRuntimeException error) {
    return fromGrpcStatus(error.getStatus());
  }

  /**
   * Classifies an error raised by a guarded call: gRPC status exceptions by
   * their code; {@link SocketTimeoutException}, {@link TimeoutException} and
   * {@link HttpTimeoutException} as {@link Kind#TIMEOUT}; {@link ConnectException},
   * {@link UnknownHostException}, {@link NoRouteToHostException} and
   * {@link UnresolvedAddressException} as {@link Kind#CONNECTION_ERROR};
   * {@link InterruptedException}, {@link CancellationException} and
   * {@link ClosedByInterruptException} as {@link Kind#CANCELLED}; anything
   * else as {@link Kind#SERVER_ERROR}. {@link ExecutionException} and
   * {@link CompletionException} are unwrapped first.
   */
  public static Outcome fromThrowable(Throwable error) {
    Throwable t = error;
    while ((t instanceof ExecutionException || t instanceof CompletionException)
        && t.getCause() != null) {
      t = t.getCause();
    }
    if (t instanceof StatusRuntimeException e) {
      return fromGrpcStatus(e.getStatus());
    }
    if (t instanceof StatusException e) {
      return fromGrpcStatus(e.getStatus());
    }
    if (t instanceof SocketTimeoutException
        || t instanceof TimeoutException
        || t instanceof HttpTimeoutException) {
      return of(Kind.TIMEOUT);
    }
    if (t instanceof ConnectException
        || t instanceof UnknownHostException
        || t instanceof NoRouteToHostException
        || t instanceof UnresolvedAddressException) {
      return of(Kind.CONNECTION_ERROR);
    }
    if (t instanceof InterruptedException
        || t instanceof CancellationException
        || t instanceof ClosedByInterruptException) {
      return of(Kind.CANCELLED);
    }
    return of(Kind.SERVER_ERROR);
  }

  /**
   * This outcome with the upstream's Retry-After: if it opens the breaker, the
   * cooldown is at least this long. Zero or negative clears it.
   */
  public Outcome withRetryAfter(Duration retryAfter) {
    Duration d = retryAfter == null || retryAfter.isNegative() ? Duration.ZERO : retryAfter;
    return new Outcome(kind, explicit, httpStatus, grpcCode, d);
  }

  /** The class of this outcome (for HTTP and gRPC outcomes, as breakerd will classify it). */
  public Kind kind() {
    return kind;
  }

  /** Shorthand for {@code kind().isRetryable()}. */
  public boolean isRetryable() {
    return kind.isRetryable();
  }

  /** Whether the kind is sent explicitly (rather than an HTTP status or gRPC code). */
  public boolean isExplicit() {
    return explicit;
  }

  /** The HTTP status sent, or 0 when none. */
  public int httpStatus() {
    return httpStatus;
  }

  /** The gRPC status code sent, if any. */
  public OptionalInt grpcCode() {
    return grpcCode == null ? OptionalInt.empty() : OptionalInt.of(grpcCode);
  }

  /** The upstream's Retry-After; {@link Duration#ZERO} when none. */
  public Duration retryAfter() {
    return retryAfter;
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof Outcome other
        && kind == other.kind
        && explicit == other.explicit
        && httpStatus == other.httpStatus
        && Objects.equals(grpcCode, other.grpcCode)
        && retryAfter.equals(other.retryAfter);
  }

  @Override
  public int hashCode() {
    return Objects.hash(kind, explicit, httpStatus, grpcCode, retryAfter);
  }

  @Override
  public String toString() {
    StringBuilder s = new StringBuilder("Outcome{").append(kind);
    if (httpStatus != 0) {
      s.append(", http ").append(httpStatus);
    }
    if (grpcCode != null) {
      s.append(", grpc ").append(Status.Code.values()[grpcCode]);
    }
    if (!retryAfter.isZero()) {
      s.append(", retryAfter ").append(retryAfter);
    }
    return s.append('}').toString();
  }

  private static Kind classifyHttp(int status) {
    if (status < 400) {
      return Kind.SUCCESS;
    }
    return switch (status) {
      case 408, 504 -> Kind.TIMEOUT;
      case 429 -> Kind.RATE_LIMITED;
      case 401, 403 -> Kind.AUTH_ERROR;
      default -> status < 500 ? Kind.BAD_REQUEST : Kind.SERVER_ERROR;
    };
  }

  private static Kind classifyGrpc(Status.Code code) {
    return switch (code) {
      case OK -> Kind.SUCCESS;
      case CANCELLED -> Kind.CANCELLED;
      case DEADLINE_EXCEEDED -> Kind.TIMEOUT;
      case UNAVAILABLE -> Kind.CONNECTION_ERROR;
      case RESOURCE_EXHAUSTED -> Kind.RATE_LIMITED;
      case UNAUTHENTICATED, PERMISSION_DENIED -> Kind.AUTH_ERROR;
      case INVALID_ARGUMENT, NOT_FOUND, ALREADY_EXISTS, FAILED_PRECONDITION, ABORTED,
          OUT_OF_RANGE, UNIMPLEMENTED -> Kind.BAD_REQUEST;
      case UNKNOWN, INTERNAL, DATA_LOSS -> Kind.SERVER_ERROR;
    };
  }

  private static Duration parseRetryAfter(String header) {
    if (header == null) {
      return Duration.ZERO;
    }
    String v = header.trim();
    if (v.isEmpty() || v.length() > 9 || !v.chars().allMatch(c -> c >= '0' && c <= '9')) {
      return Duration.ZERO;
    }
    return Duration.ofSeconds(Long.parseLong(v));
  }
}

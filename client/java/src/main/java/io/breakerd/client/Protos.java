package io.breakerd.client;

import java.time.Duration;

/** Conversions between the generated breakerd.v1 types and this package's types. */
final class Protos {
  private Protos() {}

  static State state(io.breakerd.v1.State s) {
    return switch (s) {
      case STATE_CLOSED -> State.CLOSED;
      case STATE_OPEN -> State.OPEN;
      case STATE_HALF_OPEN -> State.HALF_OPEN;
      case STATE_FORCED_OPEN -> State.FORCED_OPEN;
      case STATE_FORCED_CLOSED -> State.FORCED_CLOSED;
      default -> State.UNKNOWN;
    };
  }

  static RejectReason reason(io.breakerd.v1.RejectReason r) {
    return switch (r) {
      case REJECT_REASON_OPEN -> RejectReason.OPEN;
      case REJECT_REASON_PROBE_IN_FLIGHT -> RejectReason.PROBE_IN_FLIGHT;
      case REJECT_REASON_RETRY_BUDGET -> RejectReason.RETRY_BUDGET;
      case REJECT_REASON_FORCED_OPEN -> RejectReason.FORCED_OPEN;
      case REJECT_REASON_RAMP -> RejectReason.RAMP;
      default -> RejectReason.NONE;
    };
  }

  static io.breakerd.v1.Outcome outcome(Outcome.Kind k) {
    return switch (k) {
      case SUCCESS -> io.breakerd.v1.Outcome.OUTCOME_SUCCESS;
      case TIMEOUT -> io.breakerd.v1.Outcome.OUTCOME_TIMEOUT;
      case CONNECTION_ERROR -> io.breakerd.v1.Outcome.OUTCOME_CONNECTION_ERROR;
      case SERVER_ERROR -> io.breakerd.v1.Outcome.OUTCOME_SERVER_ERROR;
      case RATE_LIMITED -> io.breakerd.v1.Outcome.OUTCOME_RATE_LIMITED;
      case BAD_REQUEST -> io.breakerd.v1.Outcome.OUTCOME_BAD_REQUEST;
      case AUTH_ERROR -> io.breakerd.v1.Outcome.OUTCOME_AUTH_ERROR;
      case CANCELLED -> io.breakerd.v1.Outcome.OUTCOME_CANCELLED;
      case SOFT_FAILURE -> io.breakerd.v1.Outcome.OUTCOME_SOFT_FAILURE;
    };
  }

  /** "CODE: description", without the cause's stack trace (for log lines). */
  static String describe(io.grpc.Status status) {
    String d = status.getDescription();
    return d == null ? status.getCode().toString() : status.getCode() + ": " + d;
  }

  static Duration duration(com.google.protobuf.Duration d) {
    Duration out = Duration.ofSeconds(d.getSeconds(), d.getNanos());
    return out.isNegative() ? Duration.ZERO : out;
  }

  static com.google.protobuf.Duration duration(Duration d) {
    return com.google.protobuf.Duration.newBuilder()
        .setSeconds(d.getSeconds())
        .setNanos(d.getNano())
        .build();
  }
}

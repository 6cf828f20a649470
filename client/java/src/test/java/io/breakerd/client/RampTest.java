package io.breakerd.client;

import static io.breakerd.client.BreakerdServer.eventually;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.breakerd.v1.AcquireRequest;
import io.breakerd.v1.AcquireResponse;
import io.breakerd.v1.BreakerStatus;
import io.breakerd.v1.ReportRequest;
import java.io.IOException;
import java.time.Duration;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * Gentle recovery: a breaker its probe closed admits a rising share of first attempts and no
 * retry while it ramps; its refusal, REJECT_REASON_RAMP, is a refusal like any other.
 */
class RampTest {
  private static final Duration WAIT = Duration.ofSeconds(10);

  @RegisterExtension static final BreakerdExtension breakerd = new BreakerdExtension();

  private final BreakerdServer server = breakerd.server();
  private final BreakerdClient client = breakerd.client();

  private void report(String dep, long permit, io.breakerd.v1.Outcome outcome) {
    server.breaker().report(ReportRequest.newBuilder()
        .setDependency(dep).setPermit(permit).setOutcome(outcome).build());
  }

  /**
   * Opens {@code dep} (a ramp/* breaker: 3 failures, 1 s cooldown) over gRPC and closes it with a
   * successful probe once its cooldown has passed.
   */
  private void rampUp(String dep) throws Exception {
    AcquireRequest acquire = AcquireRequest.newBuilder().setDependency(dep).build();
    for (int i = 0; i < 3; i++) {
      AcquireResponse granted = server.breaker().acquire(acquire);
      assertTrue(granted.getAllowed(), "failure " + (i + 1) + " allowed");
      report(dep, granted.getPermit(), io.breakerd.v1.Outcome.OUTCOME_SERVER_ERROR);
    }
    assertEquals(io.breakerd.v1.State.STATE_OPEN, server.status(dep).getState());
    assertTrue(eventually(WAIT, () -> {
      AcquireResponse probe = server.breaker().acquire(acquire);
      if (!probe.getProbe()) {
        return false;
      }
      report(dep, probe.getPermit(), io.breakerd.v1.Outcome.OUTCOME_SUCCESS);
      return true;
    }), "no probe of " + dep);
    BreakerStatus status = server.status(dep);
    assertEquals(io.breakerd.v1.State.STATE_CLOSED, status.getState());
    assertTrue(status.getAdmitShare() > 0 && status.getAdmitShare() < 1,
        "admit share " + status.getAdmitShare());
  }

  // conformance: ramp
  @Test
  void aRampRefusalIsARefusalFromTheSidecar() throws Exception {
    String dep = "ramp/java";
    rampUp(dep);

    BreakerOpenException refused =
        assertThrows(BreakerOpenException.class, () -> client.acquire(dep, 1));
    Decision d = refused.decision();
    assertEquals(false, d.allowed());
    assertEquals(0, d.permit());
    assertEquals(RejectReason.RAMP, d.reason());
    assertEquals(Decision.Source.SIDECAR, d.source());
    assertEquals(State.CLOSED, d.state());

    AtomicInteger calls = new AtomicInteger();
    RetryPolicy three = RetryPolicy.ofAttempts(3)
        .withBackoff(Duration.ofMillis(1), Duration.ofMillis(5));
    BreakerOpenException stopped = assertThrows(BreakerOpenException.class,
        () -> client.retry(dep, three, () -> {
          calls.incrementAndGet();
          throw new IOException("upstream 500");
        }));
    assertTrue(calls.get() <= 1, calls.get() + " calls: the first attempt at most");
    assertEquals(RejectReason.RAMP, stopped.reason());
    assertEquals(Decision.Source.SIDECAR, stopped.source());
  }
}

package io.breakerd.client;

import static io.breakerd.client.BreakerdServer.untilSidecar;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.breakerd.v1.AcquireRequest;
import io.breakerd.v1.AcquireResponse;
import io.breakerd.v1.BreakerGrpc;
import io.breakerd.v1.ReportRequest;
import io.breakerd.v1.ReportResponse;
import io.grpc.Grpc;
import io.grpc.InsecureServerCredentials;
import io.grpc.Server;
import io.grpc.protobuf.services.HealthStatusManager;
import io.grpc.stub.StreamObserver;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * One late answer is not an absent sidecar: against a stand-in Breaker service
 * on a real loopback socket that holds back the answers for one dependency,
 * a timeout while other calls are answered fails that decision open and
 * nothing more; a timeout with nothing answered since marks breakerd away.
 */
class LateAnswerTest {
  private static final String SLOW = "late/slow";
  /** Long enough for a loaded machine to answer the other calls meanwhile. */
  private static final Duration TIMEOUT = Duration.ofMillis(300);
  /** How long the stand-in holds back an answer for {@link #SLOW}: past the timeout. */
  private static final Duration HOLD = Duration.ofMillis(1500);

  private final ScheduledExecutorService later = Executors.newSingleThreadScheduledExecutor();
  private final AtomicLong permits = new AtomicLong();
  /** Counted down when a request for {@link #SLOW} arrives. */
  private volatile CountDownLatch slowArrived = new CountDownLatch(1);
  /** Completed to let the stand-in answer the requests it holds for others. */
  private volatile CompletableFuture<Void> othersMayGo = CompletableFuture.completedFuture(null);
  private Server standIn;

  @BeforeEach
  void start() throws Exception {
    standIn = Grpc.newServerBuilderForPort(0, InsecureServerCredentials.create())
        .addService(new BreakerGrpc.BreakerImplBase() {
          @Override
          public void acquire(AcquireRequest req, StreamObserver<AcquireResponse> answer) {
            AcquireResponse allowed = AcquireResponse.newBuilder()
                .setAllowed(true)
                .setPermit(permits.incrementAndGet())
                .setState(io.breakerd.v1.State.STATE_CLOSED)
                .build();
            Runnable reply = () -> {
              answer.onNext(allowed);
              answer.onCompleted();
            };
            if (req.getDependency().equals(SLOW)) {
              slowArrived.countDown();
              later.schedule(reply, HOLD.toMillis(), TimeUnit.MILLISECONDS);
            } else {
              othersMayGo.thenRun(reply);
            }
          }

          @Override
          public void report(ReportRequest req, StreamObserver<ReportResponse> answer) {
            answer.onNext(ReportResponse.getDefaultInstance());
            answer.onCompleted();
          }
        })
        .addService(new HealthStatusManager().getHealthService()) // SERVING
        .build()
        .start();
  }

  @AfterEach
  void stop() throws Exception {
    standIn.shutdownNow();
    standIn.awaitTermination(5, TimeUnit.SECONDS);
    later.shutdownNow();
  }

  private BreakerdClient client() throws Exception {
    BreakerdClient c = BreakerdClient.builder()
        .target("127.0.0.1:" + standIn.getPort())
        .decisionTimeout(TIMEOUT)
        .watch(false) // the stand-in has no Watch
        .build();
    assertTrue(c.awaitReady(Duration.ofSeconds(10)));
    assertEquals(Decision.Source.SIDECAR,
        untilSidecar(c, "late/warm-up", Duration.ofSeconds(10)).source(),
        "the stand-in never answered");
    return c;
  }

  // conformance: late-not-away
  @Test
  void timeoutWhileOthersAreAnsweredFailsThatDecisionOpenAndNothingMore() throws Exception {
    try (BreakerdClient client = client()) {
      Stats before = client.stats();
      // Another Acquire waits at the stand-in until the slow one has arrived
      // (so it is written), then is answered: an answer after the slow write.
      othersMayGo = new CompletableFuture<>();
      slowArrived = new CountDownLatch(1);
      CompletableFuture<Decision> other = CompletableFuture.supplyAsync(() -> {
        try (Permit p = client.acquire("late/other")) {
          return p.decision();
        }
      });
      CompletableFuture<Decision> slow = CompletableFuture.supplyAsync(() -> {
        try (Permit p = client.acquire(SLOW)) {
          return p.decision();
        }
      });
      assertTrue(slowArrived.await(10, TimeUnit.SECONDS), "the slow Acquire never arrived");
      othersMayGo.complete(null);

      assertEquals(Decision.Source.SIDECAR, other.get(10, TimeUnit.SECONDS).source());
      assertEquals(Decision.Source.FAIL_OPEN, slow.get(10, TimeUnit.SECONDS).source(),
          "the held-back decision fails open");
      assertEquals(before.failOpen() + 1, client.stats().failOpen());

      // Sent after its timeout: decided by the sidecar, with no away decision.
      try (Permit p = client.acquire("late/next")) {
        assertEquals(Decision.Source.SIDECAR, p.decision().source());
      }
      assertEquals(before.awayDecisions(), client.stats().awayDecisions());
      assertEquals(before.failOpen() + 1, client.stats().failOpen());
    }
  }

  @Test
  void timeoutWithNothingAnsweredSinceMarksBreakerdAway() throws Exception {
    try (BreakerdClient client = client()) {
      long away0 = client.stats().awayDecisions();
      try (Permit p = client.acquire(SLOW)) {
        assertEquals(Decision.Source.FAIL_OPEN, p.decision().source());
      }
      try (Permit p = client.acquire("late/next")) {
        assertEquals(Decision.Source.FAIL_OPEN, p.decision().source(), "away: no RPC");
      }
      assertEquals(away0 + 1, client.stats().awayDecisions());
    }
  }
}

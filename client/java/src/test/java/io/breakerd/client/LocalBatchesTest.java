package io.breakerd.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.breakerd.v1.ClientDecisions;
import io.breakerd.v1.DependencyBatch;
import io.breakerd.v1.LocalOutcome;
import io.breakerd.v1.ReportBatchRequest;
import io.breakerd.v1.ReportBatchResponse;
import io.grpc.Status;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.LinkedBlockingDeque;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * The batches alone, with a hand-run timer and a transport the test answers:
 * what goes in a request, the resend of a failed one, the 10,000-outcome bound,
 * and client decisions held while breakerd is away. No sleeps, no breakerd.
 */
class LocalBatchesTest {
  private static final Duration FLUSH = Duration.ofMillis(5);
  private static final String DEP = "dep/a";

  /** Tasks scheduled on the timer, run by {@link #runTimers()}; their delays. */
  private final ArrayDeque<Runnable> tasks = new ArrayDeque<>();
  private final List<Long> delays = new ArrayList<>();
  /** Requests sent and the answers the test completes. */
  private final List<ReportBatchRequest> sent = new ArrayList<>();
  private final LinkedBlockingDeque<CompletableFuture<ReportBatchResponse>> answers =
      new LinkedBlockingDeque<>();
  private final List<Long> deadlines = new ArrayList<>();
  private boolean away;
  private LocalBatches batches;

  @BeforeEach
  void create() {
    batches = new LocalBatches("java-1-0000abcd", FLUSH, Duration.ofMillis(200),
        (request, deadlineNanos) -> {
          sent.add(request);
          deadlines.add(deadlineNanos);
          CompletableFuture<ReportBatchResponse> answer = new CompletableFuture<>();
          answers.add(answer);
          return answer;
        },
        (task, delayNanos) -> {
          tasks.add(task);
          delays.add(delayNanos);
        },
        () -> away,
        new ChangeLog(ChangeLog.INTERVAL, System::nanoTime, (task, delay) -> {},
            (level, message) -> {}));
  }

  /** Runs the scheduled tasks (and those they schedule) until none is left. */
  private void runTimers() {
    for (Runnable task; (task = tasks.poll()) != null; ) {
      task.run();
    }
  }

  private void answerOk() {
    answers.poll().complete(ReportBatchResponse.getDefaultInstance());
  }

  private void answerFailure() {
    answers.poll().completeExceptionally(Status.UNAVAILABLE.asRuntimeException());
  }

  private static LocalBatches.Ledger ledger(String dep, long generation) {
    return new LocalBatches.Ledger(dep, generation);
  }

  @Test
  void grantsAndOutcomesGoPerDependencyAndGenerationAfterTheFlushInterval() {
    LocalBatches.Ledger a = ledger(DEP, 3);
    LocalBatches.Ledger b = ledger("dep/b", 0);
    batches.grant(a);
    batches.grant(a);
    batches.grant(b);
    batches.outcome(a, Outcome.success(), 1_500_000_000L, null);
    batches.outcome(a, Outcome.fromHttpStatus(503, "7"), 2_000, new ChainTier("llm", 2));
    assertEquals(1, tasks.size(), "one flush scheduled, whatever the number of calls");
    assertEquals(FLUSH.toNanos(), delays.get(0));
    assertTrue(sent.isEmpty(), "nothing is sent before the flush interval");

    runTimers();

    assertEquals(1, sent.size());
    ReportBatchRequest r = sent.get(0);
    assertEquals("java-1-0000abcd", r.getClientId());
    assertEquals(1, r.getSequence());
    assertEquals(Duration.ofMillis(200).toNanos(), deadlines.get(0));
    assertEquals(2, r.getDependenciesCount());
    DependencyBatch da = r.getDependencies(0);
    assertEquals(DEP, da.getDependency());
    assertEquals(3, da.getGeneration());
    assertEquals(2, da.getGrants());
    assertEquals(2, da.getOutcomesCount());
    LocalOutcome success = da.getOutcomes(0);
    assertEquals(io.breakerd.v1.Outcome.OUTCOME_SUCCESS, success.getOutcome());
    assertEquals(1, success.getLatency().getSeconds());
    assertEquals(500_000_000, success.getLatency().getNanos());
    assertEquals("", success.getChain());
    LocalOutcome http = da.getOutcomes(1);
    assertEquals(io.breakerd.v1.Outcome.OUTCOME_UNSPECIFIED, http.getOutcome());
    assertEquals(503, http.getHttpStatus());
    assertEquals(7, http.getRetryAfter().getSeconds());
    assertEquals("llm", http.getChain());
    assertEquals(2, http.getTier());
    DependencyBatch db = r.getDependencies(1);
    assertEquals("dep/b", db.getDependency());
    assertEquals(1, db.getGrants());
    assertEquals(0, db.getOutcomesCount());

    answerOk();
    runTimers();
    assertEquals(1, sent.size(), "nothing left: nothing runs");
    assertTrue(tasks.isEmpty());
  }

  @Test
  void oneRequestInFlightAtATimeAndTheNextAfterItsAnswer() {
    LocalBatches.Ledger a = ledger(DEP, 1);
    batches.grant(a);
    runTimers();
    assertEquals(1, sent.size());
    batches.outcome(a, Outcome.success(), 10, null);
    runTimers();
    assertEquals(1, sent.size(), "the first is still in flight");

    answerOk();
    runTimers();
    assertEquals(2, sent.size());
    assertEquals(2, sent.get(1).getSequence());
    assertEquals(0, sent.get(1).getDependencies(0).getGrants());
    assertEquals(1, sent.get(1).getDependencies(0).getOutcomesCount());
  }

  @Test
  void aFailedRequestIsResentUnchangedThenDroppedAfterThreeSends() {
    LocalBatches.Ledger a = ledger(DEP, 1);
    for (int i = 0; i < 5; i++) {
      batches.grant(a);
      batches.outcome(a, Outcome.of(Outcome.Kind.SERVER_ERROR), 10, null);
    }
    runTimers();
    answerFailure();
    batches.grant(a); // newer work waits behind the failed request
    batches.outcome(a, Outcome.success(), 10, null);
    runTimers();
    answerFailure();
    runTimers();

    assertEquals(3, sent.size());
    assertEquals(sent.get(0), sent.get(1), "resent unchanged, same sequence");
    assertEquals(sent.get(0), sent.get(2));
    assertEquals(1, sent.get(2).getSequence());
    assertEquals(0, batches.dropped());

    answerFailure();
    assertEquals(5, batches.dropped(), "the third failure drops it, its outcomes counted");
    runTimers();
    assertEquals(4, sent.size());
    ReportBatchRequest next = sent.get(3);
    assertEquals(2, next.getSequence(), "the next request has the next sequence");
    assertEquals(1, next.getDependencies(0).getGrants());
    assertEquals(1, next.getDependencies(0).getOutcomesCount());
    answerOk();
    assertEquals(5, batches.dropped());
  }

  @Test
  void atMostTenThousandOutcomesWaitUnacknowledged() {
    LocalBatches.Ledger a = ledger(DEP, 1);
    batches.grant(a);
    // The timer is not run: nothing is sent, everything waits.
    for (int i = 0; i < LocalBatches.MAX_UNACKED; i++) {
      batches.outcome(a, Outcome.success(), 1, null);
    }
    assertEquals(0, batches.dropped());
    batches.outcome(a, Outcome.success(), 1, null);
    assertEquals(1, batches.dropped(), "the 10,001st is dropped and counted");

    runTimers(); // one request of 1,000, not answered: still unacknowledged
    assertEquals(1, sent.size());
    assertEquals(LocalBatches.MAX_OUTCOMES, sent.get(0).getDependencies(0).getOutcomesCount());
    batches.outcome(a, Outcome.success(), 1, null);
    assertEquals(2, batches.dropped(), "the request in flight still counts toward the bound");

    answerOk(); // 1,000 acknowledged: room for 1,000 more
    batches.outcome(a, Outcome.success(), 1, null);
    assertEquals(2, batches.dropped());
  }

  @Test
  void aThousandOutcomesAreSentAtOnceAndRequestsSplitAtTheLimit() {
    LocalBatches.Ledger a = ledger(DEP, 1);
    for (int i = 0; i < 2500; i++) {
      batches.grant(a);
      batches.outcome(a, Outcome.success(), 1, null);
    }
    assertTrue(delays.contains(0L), "the 1,000th outcome asks for a flush at once");
    runTimers();
    assertEquals(1, sent.size());
    assertEquals(2500, sent.get(0).getDependencies(0).getGrants(), "every grant in the first");
    assertEquals(1000, sent.get(0).getDependencies(0).getOutcomesCount());
    answerOk();
    runTimers();
    assertEquals(1000, sent.get(1).getDependencies(0).getOutcomesCount());
    assertEquals(0, sent.get(1).getDependencies(0).getGrants());
    answerOk();
    runTimers();
    assertEquals(500, sent.get(2).getDependencies(0).getOutcomesCount());
    answerOk();
    runTimers();
    assertEquals(3, sent.size());
    assertEquals(0, batches.dropped());
  }

  @Test
  void clientDecisionsAreKeptWhileAwayAndSentWhenBreakerdAnswersAgain() {
    away = true;
    batches.refusedLocal(DEP);
    batches.refusedLocal(DEP);
    batches.failOpen(DEP);
    batches.failOpen("dep/b");
    batches.failClosed("dep/b");
    runTimers();
    assertTrue(sent.isEmpty(), "nothing is sent while breakerd is away");

    away = false;
    batches.wake();
    runTimers();
    assertEquals(1, sent.size());
    List<ClientDecisions> decisions = new ArrayList<>(sent.get(0).getDecisionsList());
    decisions.sort((x, y) -> x.getDependency().compareTo(y.getDependency()));
    assertEquals(2, decisions.size());
    assertEquals(ClientDecisions.newBuilder().setDependency(DEP).setRefusedLocal(2)
        .setFailOpen(1).build(), decisions.get(0));
    assertEquals(ClientDecisions.newBuilder().setDependency("dep/b").setFailOpen(1)
        .setFailClosed(1).build(), decisions.get(1));

    answerOk();
    batches.refusedLocal(DEP);
    runTimers();
    assertEquals(2, sent.size());
    assertEquals(1, sent.get(1).getDecisionsCount(), "counted since the last request only");
    assertEquals(1, sent.get(1).getDecisions(0).getRefusedLocal());
  }

  @Test
  void outcomesWhileAwayAreDroppedAndCounted() {
    LocalBatches.Ledger a = ledger(DEP, 1);
    batches.grant(a);
    away = true;
    batches.outcome(a, Outcome.success(), 1, null);
    batches.outcome(a, Outcome.success(), 1, null);
    assertEquals(2, batches.dropped());
    away = false;
    batches.wake();
    runTimers();
    assertEquals(1, sent.get(0).getDependencies(0).getGrants());
    assertEquals(0, sent.get(0).getDependencies(0).getOutcomesCount());
  }

  @Test
  void chainGrantsAreCountedPerChainAndTier() {
    batches.chainGrant(new ChainTier("llm", 0));
    batches.chainGrant(new ChainTier("llm", 0));
    batches.chainGrant(new ChainTier("llm", 1));
    runTimers();
    assertEquals(2, sent.get(0).getChainsCount());
    int total = sent.get(0).getChainsList().stream()
        .mapToInt(c -> c.getCount()).sum();
    assertEquals(3, total);
    assertTrue(sent.get(0).getChainsList().stream()
        .anyMatch(c -> c.getChain().equals("llm") && c.getTier() == 0 && c.getCount() == 2
            && !c.getNone()));
  }

  @Test
  void closeSendsWhatIsLeftAndDropsTheRestAfterward() throws Exception {
    LocalBatches.Ledger a = ledger(DEP, 1);
    batches.grant(a);
    batches.outcome(a, Outcome.success(), 1, null);
    Thread closer = new Thread(() -> batches.close(Duration.ofSeconds(10).toNanos()));
    closer.start();
    answers.poll(10, TimeUnit.SECONDS).complete(ReportBatchResponse.getDefaultInstance());
    assertTrue(joined(closer));
    assertEquals(1, sent.size());
    assertEquals(1, sent.get(0).getDependencies(0).getOutcomesCount());
    assertEquals(0, batches.dropped());

    batches.outcome(a, Outcome.success(), 1, null);
    assertEquals(1, batches.dropped(), "after close an outcome is dropped");
    runTimers();
    assertEquals(1, sent.size());
  }

  @Test
  void closeWhileAwaySendsNothingAndCountsTheOutcomes() {
    LocalBatches.Ledger a = ledger(DEP, 1);
    batches.grant(a);
    batches.outcome(a, Outcome.success(), 1, null);
    batches.outcome(a, Outcome.success(), 1, null);
    away = true;
    batches.close(Duration.ofSeconds(5).toNanos());
    assertTrue(sent.isEmpty());
    assertEquals(2, batches.dropped());
  }

  @Test
  void clientIdIsJavaPidAndEightHexDigits() {
    String id = LocalBatches.newClientId();
    assertTrue(id.matches("java-" + ProcessHandle.current().pid() + "-[0-9a-f]{8}"), id);
  }

  private static boolean joined(Thread t) {
    try {
      t.join(10_000);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
    return !t.isAlive();
  }
}

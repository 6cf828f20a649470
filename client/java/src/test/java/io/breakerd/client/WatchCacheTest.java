package io.breakerd.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;

import io.breakerd.v1.StateChange;
import io.grpc.Grpc;
import io.grpc.InsecureChannelCredentials;
import io.grpc.ManagedChannel;
import java.time.Duration;
import java.util.Optional;
import java.util.concurrent.atomic.LongAdder;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * The Watch cache fed event by event, without breakerd: generation order, mode,
 * and the notices local decisions depend on (created, reload, ramp_done, evicted).
 */
class WatchCacheTest {
  private static final String DEP = "cache/dep";

  private ManagedChannel channel; // never used: the stream is not started
  private WatchCache cache;

  @BeforeEach
  void create() {
    channel = Grpc.newChannelBuilder("127.0.0.1:1", InsecureChannelCredentials.create()).build();
    cache = new WatchCache(channel, null, Duration.ofMillis(100), Duration.ofSeconds(5),
        new LongAdder(), "127.0.0.1:1", () -> {},
        new ChangeLog(ChangeLog.INTERVAL, System::nanoTime, (task, delay) -> {},
            (level, message) -> {}), true);
  }

  @AfterEach
  void close() {
    channel.shutdownNow();
  }

  private static StateChange event(
      long generation, io.breakerd.v1.State state, String reason, String mode) {
    StateChange.Builder b = StateChange.newBuilder()
        .setDependency(DEP)
        .setState(state)
        .setReason(reason)
        .setGeneration(generation)
        .setMode(mode);
    if (state == io.breakerd.v1.State.STATE_OPEN) {
      b.setRetryAfter(Protos.duration(Duration.ofSeconds(30)));
    }
    return b.build();
  }

  private static StateChange open(long generation, String mode) {
    return event(generation, io.breakerd.v1.State.STATE_OPEN, "consecutive_failures", mode);
  }

  private static StateChange closed(long generation) {
    return event(generation, io.breakerd.v1.State.STATE_CLOSED, "probe_succeeded", "enforce");
  }

  @Test
  void anOlderGenerationArrivingLateIsIgnored() {
    cache.apply(closed(6));
    cache.apply(open(5, "enforce"));

    assertNull(cache.refusal(DEP));
    assertEquals(Optional.of(State.CLOSED), cache.state(DEP));
  }

  @Test
  void aNewerGenerationReplacesTheOlder() {
    cache.apply(open(5, "enforce"));
    assertNotNull(cache.refusal(DEP));

    cache.apply(closed(6));

    assertNull(cache.refusal(DEP));
    assertEquals(Optional.of(State.CLOSED), cache.state(DEP));
  }

  @Test
  void aReloadAtTheSameGenerationChangesTheMode() {
    cache.apply(open(6, "enforce"));
    Decision refused = cache.refusal(DEP);
    assertNotNull(refused);
    assertEquals(Decision.Source.LOCAL, refused.source());
    assertEquals(RejectReason.OPEN, refused.reason());

    cache.apply(event(6, io.breakerd.v1.State.STATE_OPEN, "reload", "shadow"));
    assertNull(cache.refusal(DEP), "a shadow breaker is never refused locally");
    assertEquals(Optional.of(State.OPEN), cache.state(DEP));

    cache.apply(event(6, io.breakerd.v1.State.STATE_OPEN, "reload", "enforce"));
    assertNotNull(cache.refusal(DEP), "back to enforce: refused again");
  }

  @Test
  void anEmptyModeFromAnOlderSidecarIsEnforced() {
    cache.apply(open(1, ""));
    assertNotNull(cache.refusal(DEP));

    cache.apply(event(2, io.breakerd.v1.State.STATE_FORCED_OPEN, "forced_open", ""));
    assertEquals(RejectReason.FORCED_OPEN, cache.refusal(DEP).reason());
  }

  @Test
  void aShadowBreakerForcedOpenIsNotRefusedLocally() {
    cache.apply(event(3, io.breakerd.v1.State.STATE_FORCED_OPEN, "forced_open", "shadow"));

    assertNull(cache.refusal(DEP));
    assertEquals(Optional.of(State.FORCED_OPEN), cache.state(DEP));
  }

  /** An event for {@link #DEP} with local_decisions as given. */
  private static StateChange local(long generation, io.breakerd.v1.State state, String reason,
      String mode, boolean localDecisions) {
    return event(generation, state, reason, mode).toBuilder()
        .setLocalDecisions(localDecisions).build();
  }

  @Test
  void createdAddsAnEntryThatGrantsLocally() {
    assertNull(cache.ledger(DEP));
    cache.apply(local(4, io.breakerd.v1.State.STATE_CLOSED, "created", "enforce", true));

    LocalBatches.Ledger ledger = cache.ledger(DEP);
    assertNotNull(ledger);
    assertEquals(4, ledger.generation);
    assertEquals(DEP, ledger.dependency);
    Decision d = ledger.decision;
    assertEquals(true, d.allowed());
    assertEquals(0, d.permit());
    assertEquals(false, d.probe());
    assertEquals(State.CLOSED, d.state());
    assertEquals(Decision.Source.LOCAL, d.source());
    assertEquals(Optional.of(State.CLOSED), cache.state(DEP));
  }

  @Test
  void onlyClosedEnforcedEntriesWithLocalDecisionsGrant() {
    cache.apply(local(1, io.breakerd.v1.State.STATE_CLOSED, "created", "enforce", false));
    assertNull(cache.ledger(DEP), "breakerd's policy says no");
    cache.apply(local(1, io.breakerd.v1.State.STATE_CLOSED, "reload", "shadow", true));
    assertNull(cache.ledger(DEP), "a shadow breaker always goes to breakerd");
    cache.apply(local(2, io.breakerd.v1.State.STATE_HALF_OPEN, "cooldown_elapsed", "enforce",
        true));
    assertNull(cache.ledger(DEP), "half-open goes to breakerd");
    cache.apply(local(3, io.breakerd.v1.State.STATE_FORCED_CLOSED, "forced_closed", "enforce",
        true));
    assertNull(cache.ledger(DEP), "forced states go to breakerd");
  }

  @Test
  void equalGenerationNoticesTurnLocalGrantsOffAndOnKeepingTheLedger() {
    cache.apply(local(7, io.breakerd.v1.State.STATE_CLOSED, "created", "enforce", true));
    LocalBatches.Ledger ledger = cache.ledger(DEP);
    assertNotNull(ledger);

    cache.apply(local(7, io.breakerd.v1.State.STATE_CLOSED, "reload", "enforce", false));
    assertNull(cache.ledger(DEP), "a reload that turns local decisions off is applied");

    cache.apply(local(7, io.breakerd.v1.State.STATE_CLOSED, "ramp_done", "enforce", true));
    assertSame(ledger, cache.ledger(DEP),
        "the same generation keeps its ledger: grants and outcomes carry on");

    cache.apply(local(8, io.breakerd.v1.State.STATE_CLOSED, "reset", "enforce", true));
    assertNotNull(cache.ledger(DEP));
    assertEquals(8, cache.ledger(DEP).generation, "a new generation starts a new ledger");
  }

  @Test
  void aLowerGenerationNoticeIsIgnored() {
    cache.apply(local(9, io.breakerd.v1.State.STATE_CLOSED, "created", "enforce", true));
    cache.apply(local(8, io.breakerd.v1.State.STATE_CLOSED, "reload", "enforce", false));
    assertNotNull(cache.ledger(DEP));
    cache.apply(local(8, io.breakerd.v1.State.STATE_CLOSED, "evicted", "enforce", false));
    assertNotNull(cache.ledger(DEP), "an eviction older than the entry is ignored");
  }

  @Test
  void evictedForgetsTheDependency() {
    cache.apply(local(5, io.breakerd.v1.State.STATE_CLOSED, "created", "enforce", true));
    cache.apply(local(5, io.breakerd.v1.State.STATE_CLOSED, "evicted", "enforce", false));

    assertNull(cache.ledger(DEP));
    assertEquals(Optional.empty(), cache.state(DEP));

    // Re-created above the evicted generation.
    cache.apply(local(6, io.breakerd.v1.State.STATE_CLOSED, "created", "enforce", true));
    assertEquals(6, cache.ledger(DEP).generation);
  }

  @Test
  void anOpenBreakerIsRefusedNotGranted() {
    cache.apply(local(2, io.breakerd.v1.State.STATE_OPEN, "consecutive_failures", "enforce",
        false));
    assertNull(cache.ledger(DEP));
    assertNotNull(cache.refusal(DEP));
  }

  @Test
  void withLocalDecisionsOffNoEntryGrants() {
    WatchCache off = new WatchCache(channel, null, Duration.ofMillis(100), Duration.ofSeconds(5),
        new LongAdder(), "127.0.0.1:1", () -> {},
        new ChangeLog(ChangeLog.INTERVAL, System::nanoTime, (task, delay) -> {},
            (level, message) -> {}), false);
    off.apply(local(1, io.breakerd.v1.State.STATE_CLOSED, "created", "enforce", true));
    assertNull(off.ledger(DEP));
    assertEquals(Optional.of(State.CLOSED), off.state(DEP));
  }
}

package io.breakerd.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;

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

/** The Watch cache fed event by event, without breakerd: generation order and mode. */
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
            (level, message) -> {}));
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
}

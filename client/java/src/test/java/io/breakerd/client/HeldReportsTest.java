package io.breakerd.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;

import java.time.Duration;
import java.util.List;
import java.util.stream.IntStream;
import org.junit.jupiter.api.Test;

/** The bound on Reports held while breakerd is away. */
class HeldReportsTest {
  /**
   * A client with nothing at its target: the first Acquire finds it
   * UNAVAILABLE, away from then on (no probe within the test).
   */
  @Test
  void clientCountsTheOldestGivenUpPastTheBoundAndTheRestOnClose() throws Exception {
    BreakerdClient client = BreakerdClient.builder()
        .target("127.0.0.1:" + BreakerdServer.freePort())
        .watch(false)
        .decisionTimeout(Duration.ofSeconds(2))
        .awayProbeInterval(Duration.ofHours(1))
        .build();
    try {
      assertEquals(Decision.Source.FAIL_OPEN, client.acquire("held/dep").decision().source());
      assertEquals(Decision.Source.FAIL_OPEN, client.acquire("held/dep").decision().source());
      assertEquals(1, client.stats().awayDecisions(), "not away");
      for (int i = 1; i <= 1024; i++) {
        new Permit(client, permit(i)).success();
      }
      assertEquals(0, client.stats().reportErrors(), "1,024 held: no error");
      new Permit(client, permit(1025)).success();
      assertEquals(1, client.stats().reportErrors(), "the 1,025th gives up the oldest");
    } finally {
      client.close();
    }
    assertEquals(1 + 1024, client.stats().reportErrors(), "held ones dropped on close");
  }

  private static Decision permit(long id) {
    return new Decision(true, id, false, State.CLOSED, RejectReason.NONE, Duration.ZERO,
        "held/dep", Decision.Source.SIDECAR);
  }

  @Test
  void holdsUpTo1024AndGivesUpTheOldestPastThat() {
    HeldReports<Integer> held = new HeldReports<>(HeldReports.LIMIT);
    assertEquals(1024, HeldReports.LIMIT);
    for (int i = 0; i < 1024; i++) {
      assertNull(held.add(i), "room for report " + i);
    }
    assertEquals(0, held.add(1024), "the 1,025th gives up the oldest");
    assertEquals(1024, held.size());
    assertEquals(IntStream.rangeClosed(1, 1024).boxed().toList(), held.takeAll(),
        "the rest, oldest first");
    assertEquals(List.of(), held.takeAll());
    assertEquals(0, held.size());
  }
}

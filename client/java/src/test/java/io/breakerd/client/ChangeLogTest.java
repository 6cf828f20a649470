package io.breakerd.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.System.Logger.Level;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * The rate limit of the "unreachable" / "back" lines, on a clock and a timer
 * that move only when the test says so: no sleeps.
 */
class ChangeLogTest {
  private static final long SECOND = Duration.ofSeconds(1).toNanos();
  private static final long MILLI = Duration.ofMillis(1).toNanos();

  /** A task the log asked to run at {@code dueNanos}. */
  private record Pending(Runnable task, long dueNanos) {}

  private long now;
  private final List<Pending> timer = new ArrayList<>();
  private final List<String> lines = new ArrayList<>();
  private ChangeLog log;

  @BeforeEach
  void create() {
    now = 1_000 * SECOND; // any origin: nanoTime may be negative or huge
    log = new ChangeLog(ChangeLog.INTERVAL, () -> now,
        (task, delayNanos) -> timer.add(new Pending(task, now + delayNanos)),
        (level, message) -> lines.add(level + " " + message));
  }

  /** Moves the clock by {@code nanos}, running the timer tasks that fall due on the way. */
  private void advance(long nanos) {
    long end = now + nanos;
    while (true) {
      Pending next = timer.stream()
          .filter(p -> p.dueNanos <= end)
          .min((a, b) -> Long.compare(a.dueNanos, b.dueNanos))
          .orElse(null);
      if (next == null) {
        break;
      }
      timer.remove(next);
      now = Math.max(now, next.dueNanos);
      next.task.run();
    }
    now = end;
  }

  /** {@code times} flips (away, then back), one every {@code step} nanoseconds. */
  private void flip(int times, long step) {
    for (int i = 0; i < times; i++) {
      log.wrong(Level.WARNING, "unreachable");
      advance(step / 2);
      log.right(Level.INFO, "back");
      advance(step - step / 2);
    }
  }

  @Test
  void oneOutageLogsBothLinesAtOnce() {
    assertFalse(log.right(Level.INFO, "back"), "it starts right: not a change");
    assertTrue(log.wrong(Level.WARNING, "unreachable"));
    assertFalse(log.wrong(Level.WARNING, "unreachable again"), "not a change: ignored");
    assertTrue(log.isWrong());
    advance(2 * SECOND);
    assertTrue(log.right(Level.INFO, "back"));
    assertFalse(log.isWrong());
    assertEquals(List.of("WARNING unreachable", "INFO back"), lines);
    assertTrue(timer.isEmpty(), "nothing held back, nothing scheduled");
  }

  // conformance: log-flap
  @Test
  void hundredFlipsInASecondLogTheFirstChangeAtOnceThenOneLineWithTheCount() {
    // 100 flips (200 changes) within 1 s, as under CPU load with a borderline deadline.
    flip(100, 10 * MILLI);
    assertEquals(List.of("WARNING unreachable", "INFO back"), lines,
        "only the first change of each kind is logged at once; the other flips are counted");

    // Nothing more until the 10 s are up...
    advance(8 * SECOND + 900 * MILLI);
    assertEquals(2, lines.size(), "a line before the 10 s were up: " + lines);
    // ...then one line tells the state they ended in and the count.
    advance(200 * MILLI);
    assertEquals(List.of("WARNING unreachable", "INFO back",
        "INFO back (198 changes not logged since the previous line)"), lines);

    // Then it is quiet: nothing more is scheduled and nothing more is logged.
    advance(60 * SECOND);
    assertEquals(3, lines.size());
    assertTrue(timer.isEmpty());
  }

  @Test
  void heldBackStateIsLoggedWhenItsIntervalIsUp() {
    log.wrong(Level.WARNING, "unreachable 1");
    advance(SECOND);
    log.right(Level.INFO, "back");
    advance(SECOND);
    log.wrong(Level.WARNING, "unreachable 2"); // 2 s after the last "unreachable" line: held
    advance(7 * SECOND);
    assertEquals(List.of("WARNING unreachable 1", "INFO back"), lines,
        "no second 'unreachable' line within 10 s of the first");

    advance(SECOND); // 10 s after the first "unreachable" line
    assertEquals(List.of("WARNING unreachable 1", "INFO back",
        "WARNING unreachable 2 (1 change not logged since the previous line)"), lines,
        "the last line says how things are: unreachable again, with the latest message");
  }

  @Test
  void linesOfEachKindAreAtLeastTheIntervalApart() {
    List<Long> unreachableAt = new ArrayList<>();
    List<Long> backAt = new ArrayList<>();
    ChangeLog timed = new ChangeLog(ChangeLog.INTERVAL, () -> now,
        (task, delayNanos) -> timer.add(new Pending(task, now + delayNanos)),
        (level, message) -> (level == Level.WARNING ? unreachableAt : backAt).add(now));
    // Flip every 300 ms for 60 s.
    for (int i = 0; i < 100; i++) {
      timed.wrong(Level.WARNING, "unreachable");
      advance(300 * MILLI);
      timed.right(Level.INFO, "back");
      advance(300 * MILLI);
    }
    advance(20 * SECOND);
    for (List<Long> times : List.of(unreachableAt, backAt)) {
      for (int i = 1; i < times.size(); i++) {
        assertTrue(times.get(i) - times.get(i - 1) >= ChangeLog.INTERVAL.toNanos(),
            "two lines of one kind " + (times.get(i) - times.get(i - 1)) + " ns apart");
      }
    }
    int total = unreachableAt.size() + backAt.size();
    assertTrue(total <= 2 * (80 / 10 + 1), total + " lines for 200 changes in 60 s");
    assertTrue(total >= 6, "still logs while flapping: " + total);
  }

  @Test
  void aChangeAfterTheIntervalIsLoggedAtOnceWithTheEarlierCount() {
    flip(3, 2 * MILLI); // lines 1 and 2 logged, 4 changes held
    log.wrong(Level.WARNING, "unreachable again"); // 5 held; the state is now "unreachable"
    advance(10 * SECOND);
    assertEquals("WARNING unreachable again (5 changes not logged since the previous line)",
        lines.get(lines.size() - 1));
    advance(30 * SECOND);
    log.right(Level.INFO, "back at last");
    assertEquals("INFO back at last", lines.get(lines.size() - 1), "no count: none was held");
    assertEquals(4, lines.size());
  }
}

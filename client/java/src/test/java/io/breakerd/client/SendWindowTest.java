package io.breakerd.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/** The send window on its own: places, lanes, withdrawal, flush. */
class SendWindowTest {
  private final SendWindow window = new SendWindow(2);
  /** What happened, in order: "start NAME" or "drop NAME". */
  private final List<String> events = new ArrayList<>();

  /** A job that records its start (and, if {@code doneAtOnce}, ends in its start). */
  private final class Job implements SendWindow.Job {
    private final String name;
    private final boolean report;
    private final boolean keep;
    private final boolean doneAtOnce;

    Job(String name, boolean report, boolean keep, boolean doneAtOnce) {
      this.name = name;
      this.report = report;
      this.keep = keep;
      this.doneAtOnce = doneAtOnce;
    }

    @Override
    public boolean isReport() {
      return report;
    }

    @Override
    public boolean keep() {
      return keep;
    }

    @Override
    public void start() {
      events.add("start " + name);
      if (doneAtOnce) {
        window.done(); // e.g. an RPC that fails as it starts
      }
    }

    @Override
    public void drop() {
      events.add("drop " + name);
    }
  }

  private Job decision(String name) {
    return new Job(name, false, false, false);
  }

  private Job report(String name) {
    return new Job(name, true, false, false);
  }

  @Test
  void atMostLimitStartAndTheRestWaitReportsFirst() {
    window.submit(decision("d1"));
    window.submit(decision("d2"));
    window.submit(decision("d3"));
    window.submit(report("r1"));
    window.submit(decision("d4"));
    window.submit(report("r2"));
    assertEquals(List.of("start d1", "start d2"), events);
    assertEquals(2, window.active());
    assertEquals(4, window.queued());

    window.done();
    window.done();
    assertEquals(List.of("start d1", "start d2", "start r1", "start r2"), events,
        "reports first, each lane in order");
    window.done();
    window.done();
    assertEquals(List.of("start d1", "start d2", "start r1", "start r2", "start d3", "start d4"),
        events);
    window.done();
    window.done();
    assertEquals(0, window.active());
    assertEquals(0, window.queued());
  }

  @Test
  void aWithdrawnJobNeverStarts() {
    Job started = decision("d1");
    window.submit(started);
    window.submit(decision("d2"));
    Job queued = decision("d3");
    window.submit(queued);

    assertTrue(window.withdraw(queued));
    assertFalse(window.withdraw(queued));
    assertFalse(window.withdraw(started), "a started job cannot be withdrawn");
    window.done();
    window.done();
    assertEquals(List.of("start d1", "start d2"), events);
  }

  @Test
  void flushDropsTheQueueButKeepsLatePermits() {
    window.submit(decision("d1"));
    window.submit(decision("d2"));
    window.submit(decision("d3"));
    window.submit(report("r1"));
    window.submit(new Job("late", true, true, false));

    window.flush();
    assertEquals(List.of("start d1", "start d2", "drop r1", "drop d3"), events);
    assertEquals(1, window.queued());
    window.done();
    assertEquals("start late", events.get(events.size() - 1), "kept, and sent");
  }

  @Test
  void jobsEndingAsTheyStartDoNotGrowTheStack() {
    window.submit(decision("d1"));
    window.submit(decision("d2"));
    int n = 100_000;
    for (int i = 0; i < n; i++) {
      window.submit(new Job("q" + i, false, false, true));
    }
    window.done(); // each queued job ends in its start, which starts the next
    assertEquals(2 + n, events.size());
    assertEquals(1, window.active());
    assertEquals(0, window.queued());
  }
}

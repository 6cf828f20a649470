package io.breakerd.client;

import java.lang.System.Logger.Level;
import java.time.Duration;
import java.util.function.LongSupplier;

/**
 * The log lines of one condition that goes wrong and right again (breakerd
 * unreachable / back, Reports failing / accepted, the Watch stream ended /
 * back), rate limited so that a flapping condition cannot flood the log.
 *
 * <p>Each direction (the "wrong" line and the "right" line) is logged at most
 * once per interval (10 s). A change that comes sooner is not logged but
 * counted; the next line says how many changes were not logged. When changes
 * were held back, one line with the current state (the latest message of that
 * direction) is logged as soon as that direction's interval allows, so the
 * last line always ends up telling how things are.
 *
 * <p>The log owns the condition's state, which starts right:
 * {@link #wrong(Level, String)} and {@link #right(Level, String)} change it (a
 * call that changes nothing is ignored), so concurrent callers cannot leave the
 * state, or the log, saying the opposite of the last change. Lines are written under the log's lock, in the order of the
 * changes. Time comes from the injected clock and the held-back line is
 * written by a task on the injected timer, so tests move time by hand.
 * Thread-safe.
 */
final class ChangeLog {
  /** The shortest time between two lines of the same direction: 10 s. */
  static final Duration INTERVAL = Duration.ofSeconds(10);

  /** Where the lines go (a {@link System.Logger} in production). */
  interface Sink {
    void log(Level level, String message);
  }

  /** Runs a task after a delay; may drop it when the client is closed. */
  interface Timer {
    void schedule(Runnable task, long delayNanos);
  }

  private record Line(Level level, String message) {}

  // Constant after construction.
  private final long intervalNanos;
  private final LongSupplier nanoClock;
  private final Timer timer;
  private final Sink sink;

  private final Object lock = new Object();
  /** The condition as last reported; written under lock, read without it as a hint. */
  private volatile boolean wrong;
  private final Line[] latest = new Line[2]; // guarded by lock: per direction
  private final long[] lastLoggedNanos = new long[2]; // guarded by lock: per direction
  private final boolean[] everLogged = new boolean[2]; // guarded by lock: per direction
  private long unlogged; // guarded by lock: changes not logged since the last line
  private boolean flushScheduled; // guarded by lock

  ChangeLog(Duration interval, LongSupplier nanoClock, Timer timer, Sink sink) {
    this.intervalNanos = interval.toNanos();
    this.nanoClock = nanoClock;
    this.timer = timer;
    this.sink = sink;
  }

  /** Whether the condition is wrong now: a cheap check before building a message. */
  boolean isWrong() {
    return wrong;
  }

  /**
   * The condition went wrong (e.g. breakerd did not answer): logs {@code message}
   * or counts the change.
   *
   * @return false, doing nothing, if it was already wrong
   */
  boolean wrong(Level level, String message) {
    return change(true, new Line(level, message));
  }

  /**
   * The condition is right again (e.g. breakerd is back): logs {@code message}
   * or counts the change.
   *
   * @return false, doing nothing, if it was already right
   */
  boolean right(Level level, String message) {
    return change(false, new Line(level, message));
  }

  private boolean change(boolean toWrong, Line line) {
    synchronized (lock) {
      if (wrong == toWrong) {
        return false;
      }
      wrong = toWrong;
      latest[index(toWrong)] = line;
      long now = nanoClock.getAsLong();
      if (mayLog(toWrong, now)) {
        emit(now);
      } else {
        unlogged++;
        scheduleFlush(toWrong, now);
      }
      return true;
    }
  }

  /** The held-back state, once its direction's interval is over. */
  private void flush() {
    synchronized (lock) {
      flushScheduled = false;
      if (unlogged == 0) {
        return; // a change since then was logged, with the count
      }
      long now = nanoClock.getAsLong();
      if (mayLog(wrong, now)) {
        emit(now);
      } else {
        scheduleFlush(wrong, now);
      }
    }
  }

  /** REQUIRES: lock held, {@link #mayLog} for the current direction. Writes its line. */
  private void emit(long now) {
    int i = index(wrong);
    Line line = latest[i];
    String text = line.message;
    if (unlogged > 0) {
      text += " (" + unlogged + (unlogged == 1 ? " change" : " changes")
          + " not logged since the previous line)";
    }
    lastLoggedNanos[i] = now;
    everLogged[i] = true;
    unlogged = 0;
    sink.log(line.level, text);
  }

  /** REQUIRES: lock held. */
  private boolean mayLog(boolean direction, long now) {
    int i = index(direction);
    return !everLogged[i] || now - lastLoggedNanos[i] >= intervalNanos;
  }

  /** REQUIRES: lock held. At most one flush is pending; it re-checks what to write. */
  private void scheduleFlush(boolean direction, long now) {
    if (flushScheduled) {
      return;
    }
    flushScheduled = true;
    long delay = lastLoggedNanos[index(direction)] + intervalNanos - now;
    timer.schedule(this::flush, Math.max(delay, 0));
  }

  private static int index(boolean wrong) {
    return wrong ? 1 : 0;
  }
}

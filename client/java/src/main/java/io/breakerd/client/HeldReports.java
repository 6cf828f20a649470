package io.breakerd.client;

import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;

/**
 * Reports made while breakerd is away, kept in memory until it is back: a
 * permit never reported keeps its breaker from closing (a probe's refuses the
 * dependency {@code PROBE_IN_FLIGHT} for its whole lease). At most
 * {@link #LIMIT} are held; past that the oldest is given up to make room.
 *
 * <p>Thread-safe.
 *
 * @param <T> what is held
 */
final class HeldReports<T> {
  /** Reports held at most per client (the same in every client). */
  static final int LIMIT = 1024;

  private final int limit;
  private final ArrayDeque<T> held = new ArrayDeque<>(); // guarded by this

  /** REQUIRES: {@code limit >= 1}. */
  HeldReports(int limit) {
    if (limit < 1) {
      throw new IllegalArgumentException("limit must be >= 1, got " + limit);
    }
    this.limit = limit;
  }

  /**
   * Holds {@code report}.
   *
   * @return the oldest report, given up to make room; null when there was room
   */
  synchronized T add(T report) {
    T dropped = held.size() >= limit ? held.pollFirst() : null;
    held.addLast(report);
    return dropped;
  }

  /** Takes every held report, oldest first, and holds none. */
  synchronized List<T> takeAll() {
    List<T> all = new ArrayList<>(held);
    held.clear();
    return all;
  }

  /** How many are held. */
  synchronized int size() {
    return held.size();
  }
}

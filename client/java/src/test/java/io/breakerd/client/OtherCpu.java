package io.breakerd.client;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * How many CPUs the processes other than this JVM and the given ones kept
 * busy, on average, between {@link #start} and {@link #cpus()}, from
 * {@code /proc}. On a shared machine other programs' work delays every
 * process now and then by tens of milliseconds, whatever a client does
 * (SCENARIOS.md, {@code burst}).
 */
final class OtherCpu {
  /** USER_HZ: the unit of /proc's CPU times on Linux. */
  private static final double TICKS_PER_SECOND = 100;

  private final long[] pids;
  private final long busy0;
  private final long ours0;
  private final long start;

  private OtherCpu(long[] pids) throws IOException {
    this.pids = pids;
    this.busy0 = busyTicks();
    this.ours0 = ourTicks(pids);
    this.start = System.nanoTime();
  }

  /** Starts measuring; {@code pids} (e.g. breakerd's) count as ours, like this JVM. */
  static OtherCpu start(long... pids) throws IOException {
    return new OtherCpu(pids);
  }

  /** CPUs the others kept busy since {@link #start}, on average. */
  double cpus() throws IOException {
    double seconds = Math.max((System.nanoTime() - start) / 1e9, 1 / TICKS_PER_SECOND);
    long theirs = (busyTicks() - busy0) - (ourTicks(pids) - ours0);
    return Math.max(0, theirs) / TICKS_PER_SECOND / seconds;
  }

  /** CPU time the whole machine spent busy (the first line of /proc/stat). */
  private static long busyTicks() throws IOException {
    String[] f = Files.readAllLines(Path.of("/proc/stat")).get(0).trim().split("\\s+");
    long sum = 0;
    for (int i = 1; i <= 8; i++) { // user nice system idle iowait irq softirq steal
      sum += Long.parseLong(f[i]);
    }
    return sum - Long.parseLong(f[4]) - Long.parseLong(f[5]); // minus idle, iowait
  }

  private static long ourTicks(long[] pids) throws IOException {
    long sum = processTicks(ProcessHandle.current().pid());
    for (long pid : pids) {
      sum += processTicks(pid);
    }
    return sum;
  }

  /** utime + stime of every thread of {@code pid}. */
  private static long processTicks(long pid) throws IOException {
    String stat = Files.readString(Path.of("/proc", Long.toString(pid), "stat"));
    String[] f = stat.substring(stat.lastIndexOf(')') + 2).split(" ");
    return Long.parseLong(f[11]) + Long.parseLong(f[12]);
  }
}

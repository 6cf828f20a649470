// The log lines of one condition that goes wrong and right again (breakerd
// unreachable / back, Reports failing / accepted, the Watch stream ended /
// back), rate limited so that a flapping condition cannot flood the log
// (client/README.md, "Fail-open"). The same as the Java client's ChangeLog.
import { performance } from 'node:perf_hooks';

/** The shortest time between two lines of the same direction, in ms. */
export const CHANGE_LOG_INTERVAL_MS = 10_000;

export type LogLevel = 'warn' | 'info';

/** Where the lines go (the client's Logger in production). */
export type LogSink = (level: LogLevel, message: string) => void;

/** Runs `task` once after `delayMs`; returns a function that cancels it. */
export type ScheduleTimer = (task: () => void, delayMs: number) => () => void;

export interface ChangeLogOptions {
  /** Default CHANGE_LOG_INTERVAL_MS. */
  intervalMs?: number;
  /** A monotonic clock in ms. Default performance.now. */
  clock?: () => number;
  /** Default setTimeout, unref()ed: a held-back line never keeps the process alive. */
  schedule?: ScheduleTimer;
}

const defaultSchedule: ScheduleTimer = (task, delayMs) => {
  const timer = setTimeout(task, delayMs);
  timer.unref();
  return () => clearTimeout(timer);
};

interface Line {
  level: LogLevel;
  message: string;
}

/**
 * Each direction (the "wrong" line and the "right" line) is logged at most
 * once per interval, so one outage logs both of its lines at once. A change
 * that comes sooner is not logged but counted; the next line says how many
 * changes were not logged. When changes were held back, one line with the
 * current state (the latest message of that direction) is logged as soon as
 * that direction's interval allows, so the last line always tells how things
 * are.
 *
 * The log owns the condition's state, which starts right: wrong() and right()
 * change it (a call that changes nothing is ignored and returns false).
 */
export class ChangeLog {
  private readonly intervalMs: number;
  private readonly clock: () => number;
  private readonly schedule: ScheduleTimer;
  private wrongNow = false;
  /** Per direction (index 0 right, 1 wrong): the latest message, when it was last logged. */
  private readonly latest: [Line | undefined, Line | undefined] = [undefined, undefined];
  private readonly lastLoggedAt: [number | undefined, number | undefined] = [undefined, undefined];
  /** Changes not logged since the last line. */
  private unlogged = 0;
  private cancelFlush: (() => void) | undefined;
  private closed = false;

  constructor(
    private readonly sink: LogSink,
    options: ChangeLogOptions = {},
  ) {
    this.intervalMs = options.intervalMs ?? CHANGE_LOG_INTERVAL_MS;
    this.clock = options.clock ?? (() => performance.now());
    this.schedule = options.schedule ?? defaultSchedule;
  }

  /** Whether the condition is wrong now. */
  get isWrong(): boolean {
    return this.wrongNow;
  }

  /** The condition went wrong: logs `message` or counts the change. False, doing nothing, if it was already wrong. */
  wrong(level: LogLevel, message: string): boolean {
    return this.change(true, { level, message });
  }

  /** The condition is right again: logs `message` or counts the change. False, doing nothing, if it was already right. */
  right(level: LogLevel, message: string): boolean {
    return this.change(false, { level, message });
  }

  /** Drops a held-back line (the client is closed); later changes are still tracked and logged. */
  close(): void {
    this.closed = true;
    this.cancelFlush?.();
    this.cancelFlush = undefined;
  }

  private change(toWrong: boolean, line: Line): boolean {
    if (this.wrongNow === toWrong) return false;
    this.wrongNow = toWrong;
    this.latest[index(toWrong)] = line;
    const now = this.clock();
    if (this.mayLog(toWrong, now)) {
      this.emit(now);
    } else {
      this.unlogged++;
      this.scheduleFlush(toWrong, now);
    }
    return true;
  }

  /** The held-back state, once its direction's interval is over. */
  private flush(): void {
    this.cancelFlush = undefined;
    if (this.unlogged === 0) return; // a change since then was logged, with the count
    const now = this.clock();
    if (this.mayLog(this.wrongNow, now)) this.emit(now);
    else this.scheduleFlush(this.wrongNow, now);
  }

  /** Writes the current direction's latest line (REQUIRES: mayLog for it). */
  private emit(now: number): void {
    const i = index(this.wrongNow);
    const line = this.latest[i]!;
    let text = line.message;
    if (this.unlogged > 0) {
      text += ` (${this.unlogged} ${this.unlogged === 1 ? 'change' : 'changes'} not logged since the previous line)`;
    }
    this.lastLoggedAt[i] = now;
    this.unlogged = 0;
    this.sink(line.level, text);
  }

  private mayLog(toWrong: boolean, now: number): boolean {
    const last = this.lastLoggedAt[index(toWrong)];
    return last === undefined || now - last >= this.intervalMs;
  }

  /** At most one flush is pending; it re-checks what to write when it runs. */
  private scheduleFlush(toWrong: boolean, now: number): void {
    if (this.cancelFlush || this.closed) return;
    const last = this.lastLoggedAt[index(toWrong)] ?? now;
    this.cancelFlush = this.schedule(() => this.flush(), Math.max(last + this.intervalMs - now, 0));
  }
}

function index(wrong: boolean): 0 | 1 {
  return wrong ? 1 : 0;
}

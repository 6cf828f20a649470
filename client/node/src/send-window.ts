// How many unary RPCs the client has on the wire at once, and who waits.
//
// Node runs every RPC of a process on one event loop, where grpc-js spends
// a good part of a millisecond on each, and breakerd takes at most 256
// streams per connection: of a thousand Acquires started together, each
// timed from when it was issued, most expire before they are even written.
// The window starts at most `limit` RPCs at a time, so each is written in
// the turn it is started and its timeout (unary.ts) measures breakerd, not
// the client's own backlog.

/** A unit of work waiting for a place in the window. */
export interface SendJob {
  /** Reports are started before decisions: they end work already begun and return permits. */
  readonly lane: 'report' | 'decision';
  /** Kept when the queue is flushed (a late permit going back to breakerd). */
  readonly keep?: boolean;
  /** Starts the RPC; the job calls SendWindow.done() exactly once when it stops waiting for it. */
  start(): void;
  /** Called instead of start() when the job is flushed from the queue. */
  drop(): void;
}

/**
 * A bound on RPCs in flight, with a FIFO queue per lane. Not thread-safe:
 * everything runs on the client's event loop.
 */
export class SendWindow {
  private inFlight = 0;
  private readonly reports = new Set<SendJob>();
  private readonly decisions = new Set<SendJob>();

  /** REQUIRES: limit >= 1. */
  constructor(private readonly limit: number) {
    if (!(Number.isInteger(limit) && limit >= 1)) throw new RangeError(`window limit must be >= 1, got ${limit}`);
  }

  /** RPCs started and not yet done. */
  get active(): number {
    return this.inFlight;
  }

  /** Jobs waiting for a place. */
  get queued(): number {
    return this.reports.size + this.decisions.size;
  }

  /** Starts `job` now if there is room, else queues it in its lane. */
  submit(job: SendJob): void {
    if (this.inFlight < this.limit) {
      this.inFlight++;
      job.start();
    } else {
      (job.lane === 'report' ? this.reports : this.decisions).add(job);
    }
  }

  /** Removes a job still queued (its caller gave up); false if it was started or dropped already. */
  withdraw(job: SendJob): boolean {
    return this.reports.delete(job) || this.decisions.delete(job);
  }

  /** A started job no longer holds its place: start the next one (reports first). */
  done(): void {
    this.inFlight--;
    while (this.inFlight < this.limit) {
      const next = first(this.reports) ?? first(this.decisions);
      if (!next) return;
      this.reports.delete(next);
      this.decisions.delete(next);
      this.inFlight++;
      next.start();
    }
  }

  /** Drops every queued job not marked `keep` (breakerd is away: nothing should wait for it). */
  flush(): void {
    for (const lane of [this.reports, this.decisions]) {
      for (const job of [...lane]) {
        if (job.keep) continue;
        lane.delete(job);
        job.drop();
      }
    }
  }
}

function first<T>(set: Set<T>): T | undefined {
  for (const item of set) return item;
  return undefined;
}

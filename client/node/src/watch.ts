// The client's side of the Watch stream: a cache of breaker states fed by
// the worker in watch-worker.ts, answering "refuse locally?".
import * as path from 'node:path';
import { performance } from 'node:perf_hooks';
import { Worker } from 'node:worker_threads';
import type { StateName } from './decision';
import { StateCache, type CacheEntry, type LocalRefusal } from './state-cache';
import type { WatchEvent, WatchWorkerData } from './watch-worker';

export interface WatcherHooks {
  onUp(): void;
  onDown(details: string): void;
  onReconnect(): void;
  /** The stream received something from breakerd (its header or a StateChange). */
  onMessage(): void;
}

/** Delay before restarting a worker that died (a bug, not a stream error). */
const WORKER_RESTART_MS = 1000;

/**
 * Keeps one Watch stream (in an unref()ed worker thread) and the cache
 * dependency -> (state, mode, generation, open_until, local_decisions).
 * Cleared whenever the stream is down.
 */
export class Watcher {
  private readonly cache = new StateCache();
  private worker: Worker | undefined;
  private restartTimer: NodeJS.Timeout | undefined;
  private closed = false;
  private up = false;

  constructor(
    private readonly data: WatchWorkerData,
    private readonly hooks: WatcherHooks,
  ) {
    this.start();
  }

  /** True while the stream is established. */
  get connected(): boolean {
    return this.up;
  }

  /** The cached state of a dependency, if the stream has told one. */
  state(dependency: string): StateName | undefined {
    return this.cache.state(dependency);
  }

  /**
   * The cache's entry for `dependency` while the stream is live (it has
   * delivered something and not ended since: the cache is cleared when it
   * ends), else undefined.
   */
  entry(dependency: string): CacheEntry | undefined {
    return this.up ? this.cache.entry(dependency) : undefined;
  }

  /** A refusal while the cache says FORCED_OPEN, or OPEN with cooldown left, and the breaker enforces. */
  refusal(dependency: string): LocalRefusal | undefined {
    return this.cache.refusal(dependency, performance.now());
  }

  /** Ends the stream and the worker. */
  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.restartTimer);
    this.markDown('client closed');
    const worker = this.worker;
    this.worker = undefined;
    await worker?.terminate();
  }

  private start(): void {
    const worker = new Worker(path.join(__dirname, 'watch-worker.js'), { workerData: this.data });
    worker.on('message', (event: WatchEvent) => this.handle(event));
    worker.on('error', (err) => this.markDown(`watch worker failed: ${err.message}`));
    worker.on('exit', () => {
      if (this.closed || this.worker !== worker) return;
      this.markDown('watch worker exited');
      this.restartTimer = setTimeout(() => this.start(), WORKER_RESTART_MS).unref();
    });
    worker.unref(); // after the listeners: adding a 'message' listener refs the port again
    this.worker = worker;
  }

  private handle(event: WatchEvent): void {
    if (this.closed) return;
    switch (event.type) {
      case 'up':
        this.up = true;
        this.hooks.onUp();
        this.hooks.onMessage();
        break;
      case 'change':
        this.cache.apply(event.change, performance.now());
        this.hooks.onMessage();
        break;
      case 'down':
        this.markDown(event.details);
        break;
      case 'reconnect':
        this.hooks.onReconnect();
        break;
    }
  }

  private markDown(details: string): void {
    this.cache.clear();
    if (!this.up) return;
    this.up = false;
    if (!this.closed) this.hooks.onDown(details);
  }
}

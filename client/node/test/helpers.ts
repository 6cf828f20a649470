// Test fixtures: a real breakerd child process, its /metrics and Admin API.
import { spawn, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import * as readline from 'node:readline';
import { setTimeout as sleep } from 'node:timers/promises';
import * as grpc from '@grpc/grpc-js';
import { breakerdV1 } from '../src/proto';
import type { AdminClient } from '../src/generated/breakerd/v1/Admin';
import type { BreakerClient } from '../src/generated/breakerd/v1/Breaker';
import type { BreakerStatus__Output } from '../src/generated/breakerd/v1/BreakerStatus';

/** consecutive_failures 3, no failure-rate rule, 30 s cooldowns; `short/*` cools down in 1 s. */
export const CONFIG = `defaults:
  consecutive_failures: 3
  failure_rate: { threshold: 0 }
  cooldown: { base: 30s, max: 60s, jitter: 0 }
policies:
  - match: "short/*"
    cooldown: { base: 1s, max: 2s, jitter: 0 }
`;

const START_TIMEOUT_MS = 10_000;

/** The breakerd binary under test, from BREAKERD_BIN. */
export function breakerdBin(): string {
  const bin = process.env['BREAKERD_BIN'];
  if (!bin) throw new Error('BREAKERD_BIN is not set: point it at the breakerd binary');
  fs.accessSync(bin, fs.constants.X_OK);
  return bin;
}

/** True when every thread of `pid` is in state T (stopped), per /proc. */
function allThreadsStopped(pid: number): boolean {
  const tasks = fs.readdirSync(`/proc/${pid}/task`);
  return tasks.every((tid) => {
    const stat = fs.readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).startsWith('T');
  });
}

/** Polls `check` until it returns a truthy value; fails after `timeoutMs`. */
export async function waitFor<T>(
  what: string,
  check: () => T | Promise<T>,
  timeoutMs = 10_000,
): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value) return value as NonNullable<T>;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(20);
  }
}

/** An error as an HTTP client library would throw it for a response status. */
export function httpError(status: number): Error {
  return Object.assign(new Error(`HTTP ${status}`), { status });
}

/** A running breakerd on free loopback ports, with a temp dir for its config and token. */
export class Breakerd {
  readonly token = 'test-admin-token';
  private proc: ChildProcess | undefined;
  private stderrTail: string[] = [];
  private stubs: { breaker: BreakerClient; admin: AdminClient } | undefined;
  grpcAddr = '';
  metricsAddr = '';

  private constructor(readonly dir: string) {}

  static async start(config = CONFIG): Promise<Breakerd> {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bd-node-test-'));
    fs.writeFileSync(path.join(dir, 'config.yaml'), config);
    fs.writeFileSync(path.join(dir, 'token'), 'test-admin-token\n');
    const b = new Breakerd(dir);
    await b.launch('127.0.0.1:0');
    return b;
  }

  /** Starts the process again on the same gRPC address (after stop() or kill()). */
  async restart(): Promise<void> {
    await this.launch(this.grpcAddr);
  }

  private async launch(listen: string): Promise<void> {
    const proc = spawn(
      breakerdBin(),
      [
        `--listen=${listen}`,
        '--metrics-listen=127.0.0.1:0',
        `--config=${path.join(this.dir, 'config.yaml')}`,
        `--admin-token-file=${path.join(this.dir, 'token')}`,
      ],
      { stdio: ['ignore', 'ignore', 'pipe'] },
    );
    this.proc = proc;
    const serving = new Promise<{ grpc: string; metrics: string }>((resolve, reject) => {
      // Keeps reading stderr for the life of the process so it never blocks.
      readline.createInterface({ input: proc.stderr! }).on('line', (line) => {
        this.stderrTail = [...this.stderrTail.slice(-19), line];
        try {
          const event = JSON.parse(line) as { event?: string; grpc?: string; metrics?: string };
          if (event.event === 'serving') resolve({ grpc: event.grpc!, metrics: event.metrics! });
        } catch {
          // not JSON: keep it in the tail only
        }
      });
      proc.once('exit', (code, signal) => reject(new Error(`breakerd exited (${code ?? signal}) before serving`)));
      proc.once('error', reject);
    });
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`breakerd not serving after ${START_TIMEOUT_MS} ms`)), START_TIMEOUT_MS);
    });
    try {
      const addrs = await Promise.race([serving, timeout]);
      this.grpcAddr = addrs.grpc.split(',')[0]!;
      this.metricsAddr = addrs.metrics;
    } catch (err) {
      proc.kill('SIGKILL');
      throw new Error(`${(err as Error).message}; stderr:\n${this.stderrTail.join('\n')}`);
    } finally {
      clearTimeout(timer);
    }
  }

  /** SIGTERM, then SIGKILL if it has not exited within 5 s. */
  async stop(): Promise<void> {
    await this.signal('SIGTERM', 5000);
  }

  /** SIGKILL: the sidecar vanishes without a goodbye. */
  async kill(): Promise<void> {
    await this.signal('SIGKILL', 5000);
  }

  /** Pauses (SIGSTOP) or resumes (SIGCONT) the process: connections stay open, nothing answers. */
  async pause(paused: boolean): Promise<void> {
    const pid = this.proc?.pid;
    this.proc?.kill(paused ? 'SIGSTOP' : 'SIGCONT');
    // The signal is delivered asynchronously: a thread already running may
    // still answer. Wait until every thread of breakerd is stopped.
    if (paused && pid !== undefined) {
      await waitFor('breakerd to stop', () => allThreadsStopped(pid));
    }
  }

  /** Stops the process, closes the helper channels and removes the temp dir. */
  async dispose(): Promise<void> {
    this.stubs?.breaker.close();
    this.stubs?.admin.close();
    this.stubs = undefined;
    this.proc?.kill('SIGCONT');
    await this.stop();
    fs.rmSync(this.dir, { recursive: true, force: true });
  }

  private async signal(signal: NodeJS.Signals, graceMs: number): Promise<void> {
    const proc = this.proc;
    if (!proc || proc.exitCode !== null || proc.signalCode !== null) return;
    const exited = new Promise<void>((resolve) => proc.once('exit', () => resolve()));
    proc.kill(signal);
    const timer = setTimeout(() => proc.kill('SIGKILL'), graceMs);
    await exited;
    clearTimeout(timer);
  }

  /** The Prometheus text of GET /metrics. */
  async metrics(): Promise<string> {
    const res = await fetch(`http://${this.metricsAddr}/metrics`);
    if (!res.ok) throw new Error(`GET /metrics: HTTP ${res.status}`);
    return res.text();
  }

  /** The sum of the samples of `name` whose labels include `labels` (0 if none). */
  async metric(name: string, labels: Record<string, string>): Promise<number> {
    let sum = 0;
    for (const line of (await this.metrics()).split('\n')) {
      const m = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
      if (!m || m[1] !== name) continue;
      const have = new Map([...(m[2] ?? '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)].map((l) => [l[1]!, l[2]!]));
      if (Object.entries(labels).every(([k, v]) => have.get(k) === v)) sum += Number(m[3]);
    }
    return sum;
  }

  /** breakerd_reports_total for one dependency, class and effect. */
  reports(dependency: string, cls: string, effect: string): Promise<number> {
    return this.metric('breakerd_reports_total', { dependency, class: cls, effect });
  }

  /** breakerd_acquire_total for one dependency, every decision. */
  acquires(dependency: string): Promise<number> {
    return this.metric('breakerd_acquire_total', { dependency });
  }

  getState(dependency: string): Promise<BreakerStatus__Output> {
    return new Promise((resolve, reject) =>
      this.grpc().breaker.GetState({ dependency }, (err, res) => (err ? reject(err) : resolve(res!))),
    );
  }

  /** Admin ForceOpen / ForceClose / Reset with the bearer token. */
  admin(method: 'ForceOpen' | 'ForceClose' | 'Reset', dependency: string): Promise<BreakerStatus__Output> {
    const md = new grpc.Metadata();
    md.set('authorization', `Bearer ${this.token}`);
    return new Promise((resolve, reject) =>
      this.grpc().admin[method]({ dependency }, md, (err, res) => (err ? reject(err) : resolve(res!.status!))),
    );
  }

  private grpc(): { breaker: BreakerClient; admin: AdminClient } {
    if (!this.stubs) {
      const v1 = breakerdV1();
      const insecure = grpc.credentials.createInsecure();
      this.stubs = { breaker: new v1.Breaker(this.grpcAddr, insecure), admin: new v1.Admin(this.grpcAddr, insecure) };
    }
    return this.stubs;
  }
}

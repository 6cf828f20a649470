// Test fixtures: a real breakerd child process, its /metrics and Admin API.
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import * as readline from 'node:readline';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import * as grpc from '@grpc/grpc-js';
import { breakerdV1 } from '../src/proto';
import type { AdminClient } from '../src/generated/breakerd/v1/Admin';
import type { BreakerClient } from '../src/generated/breakerd/v1/Breaker';
import type { AcquireResponse__Output } from '../src/generated/breakerd/v1/AcquireResponse';
import type { BreakerStatus__Output } from '../src/generated/breakerd/v1/BreakerStatus';
import type { Outcome } from '../src/generated/breakerd/v1/Outcome';
import type { ReportResponse__Output } from '../src/generated/breakerd/v1/ReportResponse';

/**
 * The config every client's suite starts breakerd with
 * (client/conformance/breakerd.yaml): consecutive_failures 3, no
 * failure-rate rule, 30 s cooldowns; `short/*` cools down in 1 s;
 * `payments/*` is in shadow mode; `ramp/*` cools down in 1 s and recovers
 * gently over 60 s once its probe has closed it. Read from dist/test at run
 * time.
 */
export const CONFIG = fs.readFileSync(path.join(__dirname, '..', '..', '..', 'conformance', 'breakerd.yaml'), 'utf8');

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

/** Clock ticks per second of /proc's CPU times (getconf CLK_TCK; 100 where it cannot be asked). */
const CLOCK_TICKS = ((): number => {
  try {
    return Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
  } catch {
    return 100;
  }
})();

/** CPU time the whole machine has spent busy, in clock ticks (/proc/stat). */
function busyTicks(): number {
  const line = fs.readFileSync('/proc/stat', 'utf8').split('\n', 1)[0]!;
  const f = line.trim().split(/\s+/).slice(1, 9).map(Number); // user nice system idle iowait irq softirq steal
  return f.reduce((sum, v) => sum + v, 0) - f[3]! - f[4]!;
}

/** CPU time process `pid` has used (all its threads), in clock ticks. */
function processTicks(pid: number): number {
  const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return Number(fields[11]) + Number(fields[12]); // utime stime
}

/**
 * Starts measuring how many CPUs processes other than this one and `pids`
 * keep busy (client/python/tests/conftest.py's cpu_of_others); the function
 * returned stops and gives their average since. On a shared machine other
 * programs' work delays every process now and then by tens of
 * milliseconds, whatever the client does.
 */
export function cpuOfOthers(...pids: number[]): () => number {
  const ours = [process.pid, ...pids];
  const ticksOfOurs = (): number => ours.reduce((sum, pid) => sum + processTicks(pid), 0);
  const busy = busyTicks();
  const mine = ticksOfOurs();
  const started = performance.now();
  return () => {
    const elapsedS = Math.max((performance.now() - started) / 1000, 1 / CLOCK_TICKS);
    const theirs = busyTicks() - busy - (ticksOfOurs() - mine);
    return Math.max(0, theirs) / CLOCK_TICKS / elapsedS;
  };
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

  /** The process id of the running breakerd. */
  get pid(): number {
    const pid = this.proc?.pid;
    if (pid === undefined) throw new Error('breakerd is not running');
    return pid;
  }

  /** Starts breakerd with `config`, its gRPC server on `listen` (default: a free loopback port). */
  static async start(config = CONFIG, listen = '127.0.0.1:0'): Promise<Breakerd> {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bd-node-test-'));
    fs.writeFileSync(path.join(dir, 'config.yaml'), config);
    fs.writeFileSync(path.join(dir, 'token'), 'test-admin-token\n');
    const b = new Breakerd(dir);
    try {
      await b.launch(listen);
    } catch (err) {
      fs.rmSync(dir, { recursive: true, force: true });
      throw err;
    }
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

  /**
   * Kills breakerd (SIGKILL) and holds its gRPC address (see PortHolder)
   * until release(); restart() after that. The helper's own channels are
   * closed first, so every connection attempt the holder sees is the client's.
   */
  async crash(): Promise<PortHolder> {
    await this.kill();
    this.closeStubs();
    const [host, port] = splitHostPort(this.grpcAddr);
    return waitFor("the crashed breakerd's port to be free", () => PortHolder.listen(host, port).catch(() => undefined));
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
    this.closeStubs();
    this.proc?.kill('SIGCONT');
    await this.stop();
    fs.rmSync(this.dir, { recursive: true, force: true });
  }

  private closeStubs(): void {
    this.stubs?.breaker.close();
    this.stubs?.admin.close();
    this.stubs = undefined;
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

  /**
   * breakerd's report counts for one dependency as sorted `class/effect count`
   * strings, e.g. `['cancelled/neutral 3']`: every class it counted, and how often.
   */
  async reportsOf(dependency: string): Promise<string[]> {
    const prefix = `breakerd_reports_total{dependency="${dependency}",`;
    return (await this.metrics())
      .split('\n')
      .filter((l) => l.startsWith(prefix))
      .map((l) => /class="(\w+)",effect="(\w+)"\} (\S+)/.exec(l)!)
      .map(([, cls, effect, count]) => `${cls}/${effect} ${count}`)
      .sort();
  }

  /** breakerd_acquire_total for one dependency, every decision. */
  acquires(dependency: string): Promise<number> {
    return this.metric('breakerd_acquire_total', { dependency });
  }

  /** breakerd's own Acquire, with no client in between. */
  acquireRaw(dependency: string, attempt = 0): Promise<AcquireResponse__Output> {
    return new Promise((resolve, reject) =>
      this.grpc().breaker.Acquire({ dependency, attempt }, (err, res) => (err ? reject(err) : resolve(res!))),
    );
  }

  /** breakerd's own Report of an explicit outcome, with no client in between. */
  reportRaw(dependency: string, permit: string | number, outcome: Outcome): Promise<ReportResponse__Output> {
    return new Promise((resolve, reject) =>
      this.grpc().breaker.Report({ dependency, permit, outcome }, (err, res) => (err ? reject(err) : resolve(res!))),
    );
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

/**
 * Holds a crashed breakerd's address until release(), so nothing else takes
 * it before the restart, and stands in for the dead sidecar: it accepts each
 * connection and closes it at once (to a gRPC client, a failed connection
 * attempt), noting when, so a test can restart breakerd right after one of
 * the client's attempts. (client/go's portHolder.)
 */
export class PortHolder {
  /** performance.now() of each connection accepted, in order. */
  readonly attempts: number[] = [];
  private readonly waiters = new Set<() => void>();

  private constructor(private readonly server: net.Server) {
    server.on('connection', (socket) => {
      this.attempts.push(performance.now());
      socket.destroy();
      for (const wake of this.waiters) wake();
    });
  }

  static listen(host: string, port: number): Promise<PortHolder> {
    return new Promise((resolve, reject) => {
      const server = net.createServer();
      server.once('error', reject);
      server.listen({ host, port, exclusive: true }, () => resolve(new PortHolder(server)));
    });
  }

  /** Resolves at the next connection attempt, or after `timeoutMs`, whichever is first. */
  nextAttempt(timeoutMs: number): Promise<void> {
    return new Promise((resolve) => {
      const wake = (): void => {
        clearTimeout(timer);
        this.waiters.delete(wake);
        resolve();
      };
      const timer = setTimeout(wake, timeoutMs);
      this.waiters.add(wake);
    });
  }

  /** Frees the address (idempotent). */
  async release(): Promise<void> {
    if (!this.server.listening) return;
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

function splitHostPort(addr: string): [string, number] {
  const i = addr.lastIndexOf(':');
  return [addr.slice(0, i).replace(/^\[|\]$/g, ''), Number(addr.slice(i + 1))];
}

/** A loopback port nothing listens on (free when this resolves; nothing holds it). */
export async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as net.AddressInfo).port;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** A clock and a timer moved by hand (a ChangeLog's `clock` and `schedule`). */
export class FakeTime {
  now = 0;
  private tasks: { at: number; task: () => void; cancelled: boolean }[] = [];

  readonly clock = (): number => this.now;
  readonly schedule = (task: () => void, delayMs: number): (() => void) => {
    const t = { at: this.now + delayMs, task, cancelled: false };
    this.tasks.push(t);
    return () => void (t.cancelled = true);
  };

  get pending(): number {
    return this.tasks.filter((t) => !t.cancelled).length;
  }

  /** Moves the clock to `to`, running each task due on the way at its own time. */
  advanceTo(to: number): void {
    for (;;) {
      const due = this.tasks.filter((t) => !t.cancelled && t.at <= to).sort((a, b) => a.at - b.at)[0];
      if (!due) break;
      this.tasks = this.tasks.filter((t) => t !== due);
      this.now = Math.max(this.now, due.at);
      due.task();
    }
    this.now = Math.max(this.now, to);
  }
}

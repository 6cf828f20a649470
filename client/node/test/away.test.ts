// breakerd hung (SIGSTOP): after one timed-out Acquire the client decides with no RPC until breakerd answers again.
import assert from 'node:assert/strict';
import { performance } from 'node:perf_hooks';
import { after, before, describe, it } from 'node:test';
import { CHANGE_LOG_INTERVAL_MS } from '../src/change-log';
import { BreakerdClient, Outcome, type Logger } from '../src/index';
import { Breakerd, FakeTime, waitFor } from './helpers';

describe('sidecar away', () => {
  let bd: Breakerd;
  let open: BreakerdClient;
  let closed: BreakerdClient;
  const logs: string[] = [];
  const logger: Logger = { warn: (m) => logs.push(`warn ${m}`), info: (m) => logs.push(`info ${m}`) };
  /** The clock of `open`'s rate-limited lines: a flap while warming up on a loaded machine holds nothing back. */
  const logTime = new FakeTime();

  before(async () => {
    bd = await Breakerd.start();
    // The defaults (20 ms decisions, Watch on), and the same with fail mode closed.
    open = new BreakerdClient({ target: bd.grpcAddr, logger, changeLog: { clock: logTime.clock, schedule: logTime.schedule } });
    closed = new BreakerdClient({ target: bd.grpcAddr, failMode: 'closed', logger: null });
    await Promise.all([open.ready(), closed.ready()]);
  });
  after(async () => {
    await Promise.all([open.close(), closed.close()]);
    await bd.dispose(); // SIGCONT first
  });

  /** Waits for a decision breakerd itself made, and reports it. */
  async function sidecarDecision(client: BreakerdClient, dep: string, timeoutMs?: number): Promise<void> {
    await waitFor('a decision from breakerd', async () => {
      const d = await client.acquire(dep);
      await client.report(dep, d.permit, Outcome.SUCCESS);
      return d.source === 'SIDECAR';
    }, timeoutMs);
  }

  /** Times `n` decisions made one after another. */
  async function decideInTurn(client: BreakerdClient, dep: string, n: number): Promise<{ sources: Set<string>; ms: number }> {
    const sources = new Set<string>();
    const started = performance.now();
    for (let i = 0; i < n; i++) {
      const d = await client.acquire(dep);
      sources.add(`${d.source} allowed=${d.allowed} permit=${d.permit}`);
    }
    return { sources, ms: performance.now() - started };
  }

  // conformance: hung-sidecar
  it('fails open (or closed) with no RPC while breakerd is stopped, and decides with it again within 1.5 s of SIGCONT', async () => {
    const dep = 'away/dep';
    const away = 'away/no-rpc'; // asked only while breakerd is away
    await sidecarDecision(open, dep);
    await sidecarDecision(closed, dep);
    // Past the 10 s of any line logged so far (a line held back is logged on the way).
    logTime.advanceTo(logTime.now + 2 * CHANGE_LOG_INTERVAL_MS);
    const logsBefore = logs.length;
    const was = { open: open.stats(), closed: closed.stats() };

    await bd.pause(true);
    let resumed: number;
    try {
      // The first decision pays the RPC's timeout (20 ms) and marks breakerd away.
      const timed = async (client: BreakerdClient) => {
        const started = performance.now();
        const d = await client.acquire(dep);
        return { d, ms: performance.now() - started };
      };
      const [first, firstClosed] = await Promise.all([timed(open), timed(closed)]);
      assert.equal(first.d.source, 'FAIL_OPEN');
      assert.equal(first.d.allowed, true);
      assert.ok(first.ms < 20 + 100, `the first decision took ${Math.round(first.ms)} ms`);
      assert.equal(firstClosed.d.source, 'FAIL_CLOSED');
      assert.equal(firstClosed.d.allowed, false);
      assert.ok(firstClosed.ms < 20 + 100, `the first decision (fail mode closed) took ${Math.round(firstClosed.ms)} ms`);

      const n = 100;
      const next = await decideInTurn(open, away, n);
      assert.deepEqual([...next.sources], ['FAIL_OPEN allowed=true permit=0']);
      assert.ok(next.ms < 100, `${n} decisions while away took ${Math.round(next.ms)} ms`);
      const nextClosed = await decideInTurn(closed, away, n);
      assert.deepEqual([...nextClosed.sources], ['FAIL_CLOSED allowed=false permit=0']);
      assert.ok(nextClosed.ms < 100, `${n} decisions while away (fail mode closed) took ${Math.round(nextClosed.ms)} ms`);
      const chain = await open.acquireFirst(['away/a', 'away/b']);
      assert.equal(chain.source, 'FAIL_OPEN');
      assert.equal(chain.dependency, 'away/a');
      assert.equal(await open.report(dep, '12345', Outcome.SUCCESS), undefined, 'held while away, not sent');

      const now = { open: open.stats(), closed: closed.stats() };
      assert.equal(now.open.awayDecisions, was.open.awayDecisions + n + 1, 'every decision while away made no RPC');
      assert.equal(now.open.failOpen, was.open.failOpen + 1 + n + 1);
      assert.equal(now.open.reportErrors, was.open.reportErrors, 'a held report is not an error');
      assert.equal(now.closed.awayDecisions, was.closed.awayDecisions + n);
      assert.equal(now.closed.failClosed, was.closed.failClosed + 1 + n);
      assert.equal(now.closed.failOpen, 0);
    } finally {
      await bd.pause(false);
      resumed = performance.now();
    }

    // The health probe (every 100 ms) finds breakerd again.
    await Promise.all([sidecarDecision(open, dep, 1500), sidecarDecision(closed, dep, 1500)]);
    const backMs = performance.now() - resumed;
    assert.ok(backMs < 1500, `decisions came from breakerd again ${Math.round(backMs)} ms after SIGCONT`);
    assert.equal(await bd.acquires(away), 0, 'breakerd never saw a decision made while away');
    const lines = logs.slice(logsBefore);
    assert.equal(lines.filter((l) => l.includes('unreachable')).length, 1, lines.join(' | '));
    assert.equal(lines.filter((l) => l.includes('reachable again')).length, 1, lines.join(' | '));
  });

  it('answers a burst queued behind a stopped breakerd at once when it is marked away', async () => {
    // 200 decisions, most of them queued behind the 32 RPCs on the wire: when
    // those time out, the rest are answered with no RPC instead of each
    // waiting its own decision timeout in turn.
    const timeoutMs = 300;
    const burst = new BreakerdClient({ target: bd.grpcAddr, decisionTimeoutMs: timeoutMs, watch: false, logger: null });
    try {
      await burst.ready();
      await sidecarDecision(burst, 'away/burst');
      const before = burst.stats();
      await bd.pause(true);
      let decisions;
      try {
        decisions = await Promise.all(
          Array.from({ length: 200 }, async () => {
            const started = performance.now();
            const d = await burst.acquire('away/burst');
            return { source: d.source, ms: performance.now() - started };
          }),
        );
      } finally {
        await bd.pause(false);
      }
      assert.ok(decisions.every((d) => d.source === 'FAIL_OPEN'));
      // Waiting in turn, the last of 200 would take seven timeouts (2.1 s).
      const slowest = Math.max(...decisions.map((d) => d.ms));
      assert.ok(slowest < 3 * timeoutMs, `the slowest decision took ${slowest} ms`);
      assert.ok(burst.stats().awayDecisions > before.awayDecisions, 'queued decisions made no RPC');
      assert.equal(burst.stats().failOpen - before.failOpen, 200);
    } finally {
      await burst.close();
    }
  });
});

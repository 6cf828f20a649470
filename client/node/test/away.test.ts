// breakerd hung (SIGSTOP): after one timed-out Acquire the client decides with no RPC until breakerd answers again.
import assert from 'node:assert/strict';
import { performance } from 'node:perf_hooks';
import { after, before, describe, it } from 'node:test';
import { BreakerdClient, Outcome, type Logger } from '../src/index';
import { Breakerd, waitFor } from './helpers';

describe('sidecar away', () => {
  let bd: Breakerd;
  let open: BreakerdClient;
  let closed: BreakerdClient;
  const logs: string[] = [];
  const logger: Logger = { warn: (m) => logs.push(`warn ${m}`), info: (m) => logs.push(`info ${m}`) };

  before(async () => {
    bd = await Breakerd.start();
    // The decision timeout is what the first call after the stop waits; generous for a loaded machine.
    open = new BreakerdClient({ target: bd.grpcAddr, decisionTimeoutMs: 500, logger });
    closed = new BreakerdClient({ target: bd.grpcAddr, decisionTimeoutMs: 500, failMode: 'closed', watch: false, logger: null });
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

  it('fails open (or closed) with no RPC while breakerd is stopped, and comes back after SIGCONT', async () => {
    const dep = 'away/dep';
    await sidecarDecision(open, dep);
    await sidecarDecision(closed, dep);
    const logsBefore = logs.length;

    await bd.pause(true);
    try {
      // The first decision pays the RPC's timeout and marks breakerd away.
      const first = await open.acquire(dep);
      assert.equal(first.source, 'FAIL_OPEN');
      assert.equal(first.allowed, true);
      assert.equal((await closed.acquire(dep)).source, 'FAIL_CLOSED');

      const before = open.stats();
      const closedBefore = closed.stats();
      const n = 5;
      for (let i = 0; i < n; i++) {
        const d = await open.acquire(dep);
        assert.equal(d.source, 'FAIL_OPEN');
        assert.equal(d.allowed, true);
        assert.equal(d.permit, '0');
        const c = await closed.acquire(dep);
        assert.equal(c.source, 'FAIL_CLOSED');
        assert.equal(c.allowed, false);
      }
      const chain = await open.acquireFirst(['away/a', 'away/b']);
      assert.equal(chain.source, 'FAIL_OPEN');
      assert.equal(chain.dependency, 'away/a');
      assert.equal(await open.report(dep, '12345', Outcome.SUCCESS), undefined, 'not sent while away');

      const after = open.stats();
      const closedAfter = closed.stats();
      assert.equal(after.awayDecisions, before.awayDecisions + n + 1, 'every decision while away made no RPC');
      assert.equal(after.failOpen, before.failOpen + n + 1);
      assert.equal(after.reportErrors, before.reportErrors + 1);
      assert.equal(closedAfter.awayDecisions, closedBefore.awayDecisions + n);
      assert.equal(closedAfter.failClosed, closedBefore.failClosed + n);
      assert.equal(closedAfter.failOpen, 0);
    } finally {
      await bd.pause(false);
    }

    // The health probe (every 100 ms) finds breakerd again.
    await sidecarDecision(open, dep, 3000);
    await sidecarDecision(closed, dep, 3000);
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

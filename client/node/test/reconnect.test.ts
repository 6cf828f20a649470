// breakerd killed and restarted on the same port after a long absence: the
// channel's reconnect backoff is capped at 1 s (client/README.md, "Sidecar
// away"), so the client decides with breakerd again within about a second.
import assert from 'node:assert/strict';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, describe, it } from 'node:test';
import { BreakerdClient, Outcome, type Logger } from '../src/index';
import { Breakerd, waitFor } from './helpers';

/** Longer than the old 5 s cap, so that the backoff has grown to its maximum. */
const GONE_MS = 8000;
/** The 1 s cap plus room for connecting and a loaded machine. */
const BACK_WITHIN_MS = 1500;

describe('reconnect after a restart', () => {
  let bd: Breakerd;
  let client: BreakerdClient;
  const logs: string[] = [];
  const logger: Logger = { warn: (m) => logs.push(`warn ${m}`), info: (m) => logs.push(`info ${m}`) };

  before(async () => {
    bd = await Breakerd.start();
    client = new BreakerdClient({ target: bd.grpcAddr, decisionTimeoutMs: 500, logger });
    await client.ready();
  });
  after(async () => {
    await client.close();
    await bd.dispose();
  });

  async function sidecarDecision(dep: string, timeoutMs?: number): Promise<void> {
    await waitFor('a decision from breakerd', async () => {
      const d = await client.acquire(dep);
      await client.report(dep, d.permit, Outcome.SUCCESS);
      return d.source === 'SIDECAR';
    }, timeoutMs);
  }

  it(`decides with breakerd again within ${BACK_WITHIN_MS} ms of a restart after ${GONE_MS} ms away`, async () => {
    const dep = 'reconnect/dep';
    await sidecarDecision(dep);
    const logsBefore = logs.length;

    await bd.kill();
    assert.equal((await client.acquire(dep)).source, 'FAIL_OPEN');
    // Keep deciding while it is gone, as an application does (all with no RPC while away).
    const goneUntil = performance.now() + GONE_MS;
    while (performance.now() < goneUntil) {
      assert.notEqual((await client.acquire(dep)).source, 'SIDECAR');
      await sleep(100);
    }

    await bd.restart();
    const restarted = performance.now();
    await sidecarDecision(dep, BACK_WITHIN_MS + 1000);
    const tookMs = performance.now() - restarted;
    assert.ok(tookMs < BACK_WITHIN_MS, `back ${Math.round(tookMs)} ms after the restart`);

    const lines = logs.slice(logsBefore);
    assert.equal(lines.filter((l) => l.includes('unreachable')).length, 1, lines.join(' | '));
    assert.equal(lines.filter((l) => l.includes('reachable again')).length, 1, lines.join(' | '));
  });
});

describe('rate-limited reachability lines', () => {
  let bd: Breakerd;
  before(async () => {
    bd = await Breakerd.start();
  });
  after(async () => {
    await bd.dispose();
  });

  it('holds back a second outage within 10 s and logs the state it ended in, with the count', async () => {
    // The client's log clock and timer are moved by hand; the RPCs run in real time.
    let now = 0;
    const timers: { at: number; task: () => void }[] = [];
    const lines: string[] = [];
    const client = new BreakerdClient({
      target: bd.grpcAddr,
      decisionTimeoutMs: 300,
      watch: false,
      logger: { warn: (m) => lines.push(`warn ${m}`), info: (m) => lines.push(`info ${m}`) },
      changeLog: {
        clock: () => now,
        schedule: (task, delayMs) => {
          const t = { at: now + delayMs, task };
          timers.push(t);
          return () => {
            const i = timers.indexOf(t);
            if (i >= 0) timers.splice(i, 1);
          };
        },
      },
    });
    try {
      await client.ready();
      const dep = 'reconnect/flap';
      const sidecar = () =>
        waitFor('a decision from breakerd', async () => (await client.acquire(dep)).source === 'SIDECAR', 5000);
      await sidecar();
      for (let outage = 0; outage < 2; outage++) {
        now += 1000;
        await bd.pause(true);
        try {
          assert.equal((await client.acquire(dep)).source, 'FAIL_OPEN');
        } finally {
          await bd.pause(false);
        }
        await sidecar();
      }
      assert.equal(lines.length, 2, lines.join(' | '));
      assert.match(lines[0]!, /^warn .*unreachable/);
      assert.match(lines[1]!, /^info .*reachable again/);

      // The held-back flush is due 10 s after the first "unreachable" line; the "back" kind's 10 s end later.
      for (;;) {
        const due = timers.sort((a, b) => a.at - b.at).shift();
        if (!due) break;
        now = Math.max(now, due.at);
        due.task();
      }
      assert.equal(lines.length, 3, lines.join(' | '));
      assert.match(lines[2]!, /^info .*reachable again.*\(2 changes not logged since the previous line\)$/);
    } finally {
      await client.close();
    }
  });
});

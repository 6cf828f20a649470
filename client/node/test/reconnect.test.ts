// breakerd killed and restarted on the same port after an outage long enough
// for gRPC's default reconnect backoff to be seconds from its next attempt:
// the channel's backoff is capped at 1 s (client/README.md, "Sidecar away"),
// so the client decides with breakerd again within about a second. And the
// start-up wait for breakerd (ready()).
import assert from 'node:assert/strict';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, describe, it } from 'node:test';
import { CHANGE_LOG_INTERVAL_MS } from '../src/change-log';
import { BreakerdClient, Outcome, type Decision, type Logger } from '../src/index';
import { Breakerd, FakeTime, freePort, waitFor } from './helpers';

/**
 * With gRPC's default backoff the attempts come about 0, 1 and 2.6 s into
 * the outage (each wait +-20 %) and the next one 2.56 s (+-20 %) after that:
 * past 2 s of outage, an uncapped client is at least 2 s from its next attempt.
 */
const MIN_OUTAGE_MS = 2000;
/** The 1 s cap plus room for connecting and a loaded machine. */
const BACK_WITHIN_MS = 1500;

describe('restart', () => {
  let bd: Breakerd;
  let client: BreakerdClient;
  const logs: string[] = [];
  const logger: Logger = { warn: (m) => logs.push(`warn ${m}`), info: (m) => logs.push(`info ${m}`) };

  before(async () => {
    bd = await Breakerd.start();
    // The default 20 ms decisions, with the Watch stream off: it runs on a
    // channel of its own (in its worker thread), whose connection attempts
    // the port holder would count too, so that the outage could end right
    // after the Watch channel's attempt and just before the decisions'
    // channel's next one, and a restart found through the Watch (LOCAL)
    // would hide an uncapped backoff of the channel the decisions use.
    client = new BreakerdClient({ target: bd.grpcAddr, watch: false, logger });
    await client.ready();
  });
  after(async () => {
    await client.close();
    await bd.dispose();
  });

  // conformance: restart
  it(`decides with breakerd again within ${BACK_WITHIN_MS} ms of a restart after an outage past ${MIN_OUTAGE_MS} ms`, async (t) => {
    const dep = 'restart/dep';
    await waitFor('a decision from breakerd', async () => {
      const d = await client.acquire(dep);
      await client.report(dep, d.permit, Outcome.SUCCESS);
      return d.source === 'SIDECAR';
    });
    const logsBefore = logs.length;

    const holder = await bd.crash();
    const crashed = performance.now();
    try {
      // Keep deciding, as an application does, until the first connection
      // attempt past MIN_OUTAGE_MS.
      for (let lastAttempt = crashed; lastAttempt - crashed < MIN_OUTAGE_MS; ) {
        const d = await client.acquire(dep);
        assert.equal(d.source, 'FAIL_OPEN', 'every decision during the outage fails open');
        await holder.nextAttempt(20);
        lastAttempt = holder.attempts.at(-1) ?? crashed;
        if (performance.now() - crashed > 15_000) {
          assert.fail(`no connection attempt from the client in the ${15_000 - MIN_OUTAGE_MS} ms after the first ${MIN_OUTAGE_MS} ms of outage`);
        }
      }
    } finally {
      await holder.release();
    }
    await bd.restart();
    const restarted = performance.now();
    await bd.admin('ForceOpen', dep);

    // Measured past the limit too, so that a failure says how long it took.
    let d: Decision;
    do {
      await sleep(10);
      d = await client.acquire(dep);
    } while (d.source === 'FAIL_OPEN' && performance.now() - restarted < 20_000);
    const tookMs = Math.round(performance.now() - restarted);
    const outageMs = Math.round(restarted - crashed);
    t.diagnostic(`${d.source} back ${tookMs} ms after the restart, outage ${outageMs} ms, ${holder.attempts.length} connection attempts`);
    assert.notEqual(d.source, 'FAIL_OPEN', `still failing open ${tookMs} ms after the restart (outage ${outageMs} ms)`);
    assert.equal(d.source, 'SIDECAR');
    assert.equal(d.allowed, false);
    assert.equal(d.reason, 'REJECT_REASON_FORCED_OPEN', `first decision after the restart: ${JSON.stringify(d)}`);
    assert.ok(tookMs <= BACK_WITHIN_MS, `decisions came from breakerd again ${tookMs} ms after its restart (outage ${outageMs} ms)`);

    const lines = logs.slice(logsBefore);
    assert.equal(lines.filter((l) => l.includes('unreachable')).length, 1, lines.join(' | '));
    assert.equal(lines.filter((l) => l.includes('reachable again')).length, 1, lines.join(' | '));
  });
});

describe('ready()', () => {
  /** ready() before breakerd listens, breakerd started 300 ms later: ready resolves, breakerd decides. */
  async function waitsForBreakerdStartedLater(port: number): Promise<void> {
    const client = new BreakerdClient({ target: `127.0.0.1:${port}`, logger: null });
    let bd: Breakerd | undefined;
    try {
      const readyAt = client.ready().then(() => performance.now());
      await sleep(300);
      const startedAt = performance.now();
      bd = await Breakerd.start(undefined, `127.0.0.1:${port}`);
      assert.ok((await readyAt) >= startedAt, 'ready() resolved only once breakerd was started');
      const d = await client.acquire('wait-ready/dep');
      assert.equal(d.source, 'SIDECAR');
    } finally {
      await client.close();
      await bd?.dispose();
    }
  }

  /** Nothing listening: ready(500) rejects when its 500 ms are up, not later. */
  async function failsWhenItsTimeoutEnds(port: number): Promise<void> {
    const client = new BreakerdClient({ target: `127.0.0.1:${port}`, watch: false, logger: null });
    try {
      const started = performance.now();
      await assert.rejects(client.ready(500));
      const tookMs = performance.now() - started;
      assert.ok(tookMs >= 490 && tookMs < 750, `ready(500) with nothing listening failed after ${Math.round(tookMs)} ms`);
    } finally {
      await client.close();
    }
  }

  // conformance: wait-ready
  it('waits for a breakerd started 300 ms later, and fails when its 500 ms are up with nothing listening', async () => {
    // Both at once, on two ports.
    const later = await freePort();
    let nobody = await freePort();
    while (nobody === later) nobody = await freePort();
    await Promise.all([waitsForBreakerdStartedLater(later), failsWhenItsTimeoutEnds(nobody)]);
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
    const time = new FakeTime();
    const lines: string[] = [];
    const client = new BreakerdClient({
      target: bd.grpcAddr,
      decisionTimeoutMs: 300,
      watch: false,
      logger: { warn: (m) => lines.push(`warn ${m}`), info: (m) => lines.push(`info ${m}`) },
      changeLog: { clock: time.clock, schedule: time.schedule },
    });
    try {
      await client.ready();
      const dep = 'reconnect/flap';
      const sidecar = () =>
        waitFor('a decision from breakerd', async () => (await client.acquire(dep)).source === 'SIDECAR', 5000);
      await sidecar();
      for (let outage = 0; outage < 2; outage++) {
        time.advanceTo(time.now + 1000);
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
      time.advanceTo(time.now + 2 * CHANGE_LOG_INTERVAL_MS);
      assert.equal(time.pending, 0);
      assert.equal(lines.length, 3, lines.join(' | '));
      assert.match(lines[2]!, /^info .*reachable again.*\(2 changes not logged since the previous line\)$/);
    } finally {
      await client.close();
    }
  });
});

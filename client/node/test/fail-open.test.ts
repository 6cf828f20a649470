// breakerd paused or gone: decisions come promptly from the fail mode; the Watch cache is dropped.
import assert from 'node:assert/strict';
import { performance } from 'node:perf_hooks';
import { after, before, describe, it } from 'node:test';
import { CHANGE_LOG_INTERVAL_MS } from '../src/change-log';
import { BreakerdClient, BreakerOpenError, type Logger } from '../src/index';
import { Breakerd, FakeTime, waitFor } from './helpers';

/** Generous: the contract says "never later than decision_timeout" (20 ms). */
const PROMPT_MS = 500;

describe('fail-open and fail-closed', () => {
  let bd: Breakerd;
  let open: BreakerdClient;
  let closed: BreakerdClient;
  const logs: string[] = [];
  const logger: Logger = { warn: (m) => logs.push(`warn ${m}`), info: (m) => logs.push(`info ${m}`) };
  /** The clock of `open`'s rate-limited lines: a flap while warming up on a loaded machine holds nothing back. */
  const logTime = new FakeTime();

  before(async () => {
    bd = await Breakerd.start();
    // The default 20 ms decision timeout.
    open = new BreakerdClient({ target: bd.grpcAddr, logger, changeLog: { clock: logTime.clock, schedule: logTime.schedule } });
    closed = new BreakerdClient({ target: bd.grpcAddr, failMode: 'closed', watch: false, logger: null });
    await Promise.all([open.ready(), closed.ready()]);
    await waitFor('the watch stream', () => open.watching);
  });
  after(async () => {
    await Promise.all([open.close(), closed.close()]);
    await bd.dispose();
  });

  async function timed<T>(fn: () => Promise<T>): Promise<[T, number]> {
    const started = performance.now();
    const value = await fn();
    return [value, performance.now() - started];
  }

  it('answers from the fail mode within the decision timeout while breakerd does not answer', async () => {
    await waitFor('a decision from breakerd', async () => (await open.acquire('fo/paused')).source === 'SIDECAR');
    // Past the 10 s of any line logged so far (a line held back is logged on the way).
    logTime.advanceTo(logTime.now + 2 * CHANGE_LOG_INTERVAL_MS);
    const logsBefore = logs.length;
    await bd.pause(true);
    try {
      const [d, ms] = await timed(() => open.acquire('fo/paused'));
      assert.equal(d.source, 'FAIL_OPEN');
      assert.equal(d.allowed, true);
      assert.ok(ms < PROMPT_MS, `took ${ms} ms`);
      const [c, cms] = await timed(() => closed.acquire('fo/paused'));
      assert.equal(c.source, 'FAIL_CLOSED');
      assert.equal(c.allowed, false);
      assert.ok(cms < PROMPT_MS, `took ${cms} ms`);
    } finally {
      await bd.pause(false);
    }
    await waitFor('breakerd to answer again', async () => (await open.acquire('fo/paused')).source === 'SIDECAR');
    const lines = logs.slice(logsBefore);
    assert.equal(lines.filter((l) => l.includes('unreachable')).length, 1, lines.join(' | '));
    assert.equal(lines.filter((l) => l.includes('reachable again')).length, 1, lines.join(' | '));
  });

  it('fails open promptly, runs the call and drops the Watch cache once breakerd is killed', async () => {
    await bd.admin('ForceOpen', 'fo/forced');
    await waitFor('the FORCED_OPEN event', () => open.cachedState('fo/forced') === 'STATE_FORCED_OPEN');
    assert.equal((await open.acquire('fo/forced')).source, 'LOCAL');
    await waitFor('a decision from breakerd', async () => (await open.acquire('fo/a')).source === 'SIDECAR');
    const before = open.stats();
    const logsBefore = logs.length;

    await bd.kill();
    await waitFor('the watch stream to drop', () => !open.watching);
    assert.equal(open.cachedState('fo/forced'), undefined, 'cache cleared when the stream ended');

    for (let i = 0; i < 5; i++) {
      const [d, ms] = await timed(() => open.acquire('fo/a'));
      assert.equal(d.source, 'FAIL_OPEN');
      assert.equal(d.allowed, true);
      assert.equal(d.permit, '0');
      assert.ok(ms < PROMPT_MS, `acquire ${i} took ${ms} ms`);
    }
    // Once the stream is down the open dependency is decided remotely, i.e. fails open too.
    assert.equal((await open.acquire('fo/forced')).source, 'FAIL_OPEN');

    let ran = false;
    const [result, ms] = await timed(() => open.guard('fo/a', async () => { ran = true; return 'upstream'; }));
    assert.equal(result, 'upstream');
    assert.equal(ran, true);
    assert.ok(ms < PROMPT_MS, `guard took ${ms} ms`);

    const after = open.stats();
    assert.equal(after.failOpen, before.failOpen + 7);
    assert.equal(after.reportErrors, before.reportErrors, 'permit 0 is not reported');
    // Logged once at most: within 10 s of the previous test's line it is held back (counted, logged later).
    const warnings = logs.slice(logsBefore).filter((l) => l.includes('unreachable'));
    assert.ok(warnings.length <= 1, `logged at most once: ${logs.slice(logsBefore).join(' | ')}`);
  });

  it('fails closed when told to, without running the call', async () => {
    const before = closed.stats().failClosed;
    const [d, ms] = await timed(() => closed.acquire('fo/b'));
    assert.equal(d.allowed, false);
    assert.equal(d.source, 'FAIL_CLOSED');
    assert.ok(ms < PROMPT_MS, `took ${ms} ms`);
    let ran = false;
    await assert.rejects(
      closed.guard('fo/b', async () => { ran = true; }),
      (e) => e instanceof BreakerOpenError && e.source === 'FAIL_CLOSED',
    );
    assert.equal(ran, false);
    assert.equal(closed.stats().failClosed, before + 2);
  });

  it('fails open over a fallback chain with the first dependency', async () => {
    const seen: string[] = [];
    assert.equal(await open.first(['fo/c', 'fo/d'], async (dep) => { seen.push(dep); return dep; }), 'fo/c');
    assert.deepEqual(seen, ['fo/c']);
  });
});

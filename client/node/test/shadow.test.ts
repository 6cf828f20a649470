// A shadow breaker is never refused locally: the sidecar allows all its calls.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { BreakerdClient } from '../src/index';
import { Breakerd, httpError, waitFor } from './helpers';

describe('shadow mode', () => {
  let bd: Breakerd;
  let tripper: BreakerdClient;
  let watcher: BreakerdClient;

  before(async () => {
    bd = await Breakerd.start(); // payments/* is in shadow mode in CONFIG
    tripper = new BreakerdClient({ target: bd.grpcAddr, decisionTimeoutMs: 2000, watch: false, logger: null });
    watcher = new BreakerdClient({ target: bd.grpcAddr, decisionTimeoutMs: 2000, logger: null });
    await waitFor('the watch stream', () => watcher.watching);
  });
  after(async () => {
    await Promise.all([tripper.close(), watcher.close()]);
    await bd.dispose();
  });

  async function trip(dep: string): Promise<void> {
    for (let i = 0; i < 3; i++) {
      await tripper.guard(dep, () => Promise.reject(httpError(503))).catch(() => undefined);
    }
    assert.equal((await bd.getState(dep)).state, 'STATE_OPEN', `${dep} opened after 3 failures`);
    await waitFor(`the OPEN event of ${dep}`, () => watcher.cachedState(dep) === 'STATE_OPEN');
  }

  // conformance: shadow
  it('asks breakerd, which allows it, for an open shadow breaker', async () => {
    const dep = 'payments/psp';
    await trip(dep);
    assert.equal((await bd.getState(dep)).mode, 'shadow');
    const rejectionsBefore = watcher.stats().localRejections;
    const acquiresBefore = await bd.acquires(dep);

    // 20 guarded calls (the upstream still failing: the breaker stays open) all run.
    let ran = 0;
    for (let i = 0; i < 20; i++) {
      assert.equal(watcher.cachedState(dep), 'STATE_OPEN', `the cache says OPEN before call ${i + 1}`);
      await assert.rejects(
        watcher.guard(dep, async () => {
          ran++;
          throw httpError(503);
        }),
        /HTTP 503/,
      );
    }
    assert.equal(ran, 20);
    // Allowed, not failed open, not refused locally, and counted by breakerd (as shadow_rejected_open): SIDECAR.
    assert.equal(await bd.acquires(dep), acquiresBefore + 20, 'every decision was breakerd\'s');
    assert.equal(watcher.stats().failOpen, 0);
    assert.equal(watcher.stats().localRejections, rejectionsBefore);

    const d = await watcher.acquire(dep);
    assert.equal(d.source, 'SIDECAR');
    assert.equal(d.allowed, true);
    await watcher.report(dep, d.permit, { outcome: 'OUTCOME_CANCELLED' });
    const first = await watcher.acquireFirst([dep]);
    assert.equal(first.source, 'SIDECAR');
    assert.equal(first.allowed, true);
    await watcher.report(dep, first.permit, { outcome: 'OUTCOME_CANCELLED' });

    assert.equal(watcher.stats().localRejections, rejectionsBefore);
    assert.equal(await bd.acquires(dep), acquiresBefore + 20 + 2, 'every decision was breakerd\'s');
  });

  it('still refuses locally an enforcing breaker tripped the same way (control)', async () => {
    const dep = 'enforced/psp';
    await trip(dep);
    const rejectionsBefore = watcher.stats().localRejections;
    const d = await watcher.acquire(dep);
    assert.equal(d.source, 'LOCAL');
    assert.equal(d.allowed, false);
    assert.equal(d.reason, 'REJECT_REASON_OPEN');
    assert.equal(watcher.stats().localRejections, rejectionsBefore + 1);
  });
});

// A breaker opened through one client is refused locally by another, from its Watch cache.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { BreakerdClient, BreakerOpenError } from '../src/index';
import { Breakerd, httpError, waitFor } from './helpers';

describe('local refusal from the Watch cache', () => {
  let bd: Breakerd;
  let tripper: BreakerdClient;
  let watcher: BreakerdClient;

  before(async () => {
    bd = await Breakerd.start();
    tripper = new BreakerdClient({ target: bd.grpcAddr, decisionTimeoutMs: 2000, watch: false, logger: null });
    watcher = new BreakerdClient({ target: bd.grpcAddr, decisionTimeoutMs: 2000, logger: null });
    await waitFor('the watch stream', () => watcher.watching);
  });
  after(async () => {
    await Promise.all([tripper.close(), watcher.close()]);
    await bd.dispose();
  });

  it('refuses locally, with no RPC, a breaker another client tripped', async () => {
    const dep = 'refusal/tripped';
    for (let i = 0; i < 3; i++) {
      await assert.rejects(tripper.guard(dep, () => Promise.reject(httpError(503))));
    }
    assert.equal((await tripper.acquire(dep)).source, 'SIDECAR');
    await waitFor('the OPEN event', () => watcher.cachedState(dep) === 'STATE_OPEN');

    const acquiresBefore = await bd.acquires(dep);
    const rejectionsBefore = watcher.stats().localRejections;
    const d = await watcher.acquire(dep);
    assert.equal(d.allowed, false);
    assert.equal(d.source, 'LOCAL');
    assert.equal(d.reason, 'REJECT_REASON_OPEN');
    assert.equal(d.state, 'STATE_OPEN');
    assert.equal(d.permit, '0');
    assert.ok(d.retryAfterMs > 20_000 && d.retryAfterMs <= 30_000, `retryAfterMs ${d.retryAfterMs}`);

    let ran = false;
    await assert.rejects(
      watcher.guard(dep, async () => { ran = true; }),
      (e) => e instanceof BreakerOpenError && e.source === 'LOCAL' && e.reason === 'REJECT_REASON_OPEN',
    );
    // A retry (attempt > 0) follows the same rule.
    assert.equal((await watcher.acquire(dep, 1)).source, 'LOCAL');
    assert.equal(ran, false);
    assert.equal(watcher.stats().localRejections, rejectionsBefore + 3);
    assert.equal(await bd.acquires(dep), acquiresBefore, 'breakerd saw no Acquire from the watching client');
  });

  it('refuses a forced-open breaker locally and asks again once it is closed', async () => {
    const dep = 'refusal/forced';
    await bd.admin('ForceOpen', dep);
    await waitFor('the FORCED_OPEN event', () => watcher.cachedState(dep) === 'STATE_FORCED_OPEN');
    const d = await watcher.acquire(dep);
    assert.equal(d.source, 'LOCAL');
    assert.equal(d.reason, 'REJECT_REASON_FORCED_OPEN');

    await bd.admin('Reset', dep);
    await waitFor('the CLOSED event', () => watcher.cachedState(dep) === 'STATE_CLOSED');
    const again = await watcher.acquire(dep);
    assert.equal(again.source, 'SIDECAR');
    assert.equal(again.allowed, true);
  });

  it('drops locally refused dependencies before AcquireFirst', async () => {
    const [open, free] = ['refusal/first-open', 'refusal/first-free'];
    await bd.admin('ForceOpen', open);
    await waitFor('the FORCED_OPEN event', () => watcher.cachedState(open) === 'STATE_FORCED_OPEN');
    const acquiresBefore = await bd.acquires(open);

    const granted = await watcher.acquireFirst([open, free]);
    assert.equal(granted.allowed, true);
    assert.equal(granted.dependency, free);
    assert.equal(granted.source, 'SIDECAR');
    await watcher.report(free, granted.permit, { outcome: 'OUTCOME_SUCCESS' });

    const none = await watcher.acquireFirst([open]);
    assert.equal(none.allowed, false);
    assert.equal(none.source, 'LOCAL');
    assert.equal(none.dependency, open);
    assert.equal(await bd.acquires(open), acquiresBefore, 'the open dependency was never sent');
  });
});

// The Watch cache: learns transitions without any Acquire, honours open_until, reconnects.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { BreakerdClient } from '../src/index';
import { Breakerd, httpError, waitFor } from './helpers';

describe('watch', () => {
  let bd: Breakerd;
  let tripper: BreakerdClient;
  let client: BreakerdClient;

  before(async () => {
    bd = await Breakerd.start();
    tripper = new BreakerdClient({ target: bd.grpcAddr, decisionTimeoutMs: 2000, watch: false, logger: null });
    client = new BreakerdClient({ target: bd.grpcAddr, decisionTimeoutMs: 2000, logger: null });
    await waitFor('the watch stream', () => client.watching);
  });
  after(async () => {
    await Promise.all([tripper.close(), client.close()]);
    await bd.dispose();
  });

  it('learns transitions without any Acquire from this client', async () => {
    const dep = 'watch/learn';
    await bd.admin('ForceOpen', dep);
    await waitFor('FORCED_OPEN', () => client.cachedState(dep) === 'STATE_FORCED_OPEN');
    await bd.admin('ForceClose', dep);
    await waitFor('FORCED_CLOSED', () => client.cachedState(dep) === 'STATE_FORCED_CLOSED');
    assert.equal(await bd.acquires(dep), 0);
  });

  it('learns the breakers that were open before it connected from the initial snapshot', async () => {
    const dep = 'watch/snapshot';
    await bd.admin('ForceOpen', dep);
    const late = new BreakerdClient({ target: bd.grpcAddr, decisionTimeoutMs: 2000, logger: null });
    try {
      await waitFor('the snapshot', () => late.cachedState(dep) === 'STATE_FORCED_OPEN');
      assert.equal((await late.acquire(dep)).source, 'LOCAL');
    } finally {
      await late.close();
    }
  });

  it('refuses locally only until the cooldown ends, then asks breakerd (half-open probe)', async () => {
    const dep = 'short/watch-cooldown'; // 1 s cooldown
    for (let i = 0; i < 3; i++) {
      await assert.rejects(tripper.guard(dep, () => Promise.reject(httpError(500))));
    }
    await waitFor('OPEN', () => client.cachedState(dep) === 'STATE_OPEN');
    const local = await client.acquire(dep);
    assert.equal(local.source, 'LOCAL');
    assert.ok(local.retryAfterMs > 0 && local.retryAfterMs <= 1000, `retryAfterMs ${local.retryAfterMs}`);
    const acquiresBefore = await bd.acquires(dep);

    // LOCAL refusals cost breakerd nothing; the first decision past open_until is its own.
    const probe = await waitFor('a decision from breakerd', async () => {
      const d = await client.acquire(dep);
      return d.source === 'LOCAL' ? undefined : d;
    }, 5000);
    assert.equal(probe.source, 'SIDECAR');
    assert.equal(probe.allowed, true);
    assert.equal(probe.probe, true);
    assert.equal(await bd.acquires(dep), acquiresBefore + 1);
    assert.equal((await client.report(dep, probe.permit, { outcome: 'OUTCOME_SUCCESS' }))?.state, 'STATE_CLOSED');
    await waitFor('CLOSED', () => client.cachedState(dep) === 'STATE_CLOSED');
  });

  it('clears the cache when breakerd stops and re-learns after it restarts', async () => {
    const dep = 'watch/restart';
    await bd.admin('ForceOpen', dep);
    await waitFor('FORCED_OPEN', () => client.cachedState(dep) === 'STATE_FORCED_OPEN');
    const reconnects = client.stats().watchReconnects;

    await bd.stop();
    await waitFor('the stream to drop', () => !client.watching);
    assert.equal(client.cachedState(dep), undefined);

    await bd.restart();
    await waitFor('the stream to come back', () => client.watching, 15_000);
    assert.ok(client.stats().watchReconnects > reconnects);
    // The new breakerd starts empty; what it opens now is learnt from the new stream.
    await bd.admin('ForceOpen', dep);
    await waitFor('FORCED_OPEN again', () => client.cachedState(dep) === 'STATE_FORCED_OPEN');
    assert.equal((await client.acquire(dep)).source, 'LOCAL');
  });

  it('close() ends the stream', async () => {
    const c = new BreakerdClient({ target: bd.grpcAddr, logger: null });
    await waitFor('the watch stream', () => c.watching);
    await c.close();
    assert.equal(c.watching, false);
    await c.close(); // idempotent
  });
});

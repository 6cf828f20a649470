// first(): a fallback chain over AcquireFirst skips open dependencies and moves on after a failure.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { BreakerdClient, BreakerOpenError, Outcome } from '../src/index';
import { Breakerd, httpError, waitFor } from './helpers';

describe('fallback chain', () => {
  let bd: Breakerd;
  let remote: BreakerdClient;
  let watching: BreakerdClient;

  before(async () => {
    bd = await Breakerd.start();
    remote = new BreakerdClient({ target: bd.grpcAddr, decisionTimeoutMs: 2000, watch: false, logger: null });
    watching = new BreakerdClient({ target: bd.grpcAddr, decisionTimeoutMs: 2000, logger: null });
    await bd.admin('ForceOpen', 'chain/a');
    await waitFor('the FORCED_OPEN event', () => watching.cachedState('chain/a') === 'STATE_FORCED_OPEN');
  });
  after(async () => {
    await Promise.all([remote.close(), watching.close()]);
    await bd.dispose();
  });

  for (const which of ['breakerd', 'the Watch cache'] as const) {
    it(`skips an open dependency (refused by ${which})`, async () => {
      const client = which === 'breakerd' ? remote : watching;
      const b = which === 'breakerd' ? 'chain/b1' : 'chain/b2';
      const called: string[] = [];
      const result = await client.first(['chain/a', b], async (dep) => {
        called.push(dep);
        return `answer from ${dep}`;
      });
      assert.equal(result, `answer from ${b}`);
      assert.deepEqual(called, [b]);
      assert.equal(await bd.reports(b, 'success', 'counted_success'), 1);
    });
  }

  it('moves on to the next dependency when the granted call fails', async () => {
    const called: string[] = [];
    const result = await remote.first(['chain/c', 'chain/d', 'chain/e'], async (dep) => {
      called.push(dep);
      if (dep === 'chain/c') throw httpError(503);
      return dep;
    });
    assert.equal(result, 'chain/d');
    assert.deepEqual(called, ['chain/c', 'chain/d']);
    assert.equal(await bd.reports('chain/c', 'server_error', 'counted_failure'), 1);
    assert.equal(await bd.reports('chain/d', 'success', 'counted_success'), 1);
    assert.equal(await bd.acquires('chain/e'), 0);
  });

  it('rethrows the last failure when every call failed', async () => {
    const called: string[] = [];
    await assert.rejects(
      remote.first(['chain/f', 'chain/g'], async (dep) => { called.push(dep); throw httpError(500); }),
      /HTTP 500/,
    );
    assert.deepEqual(called, ['chain/f', 'chain/g']);
  });

  // conformance: first-non-retryable
  it('stops after an outcome not worth retrying, and moves on after one worth retrying', async () => {
    // a's call fails with a bad request: b is not called, the caller gets a's error.
    const called: string[] = [];
    const bad = httpError(400);
    await assert.rejects(
      remote.first(['chain/h', 'chain/i'], async (dep) => { called.push(dep); if (dep === 'chain/h') throw bad; return dep; }),
      (e) => e === bad,
    );
    assert.deepEqual(called, ['chain/h']);
    assert.equal(await bd.acquires('chain/i'), 0);
    // A soft failure (the upstream answered) stops the chain too, with a's result.
    called.length = 0;
    const answer = await remote.first(['chain/k', 'chain/l'], async (dep) => { called.push(dep); return `refusal from ${dep}`; }, {
      classify: () => Outcome.SOFT_FAILURE,
    });
    assert.equal(answer, 'refusal from chain/k');
    assert.deepEqual(called, ['chain/k']);
    // a's call fails with a server error: b is called and its result returned.
    called.length = 0;
    const result = await remote.first(['chain/m', 'chain/n'], async (dep) => {
      called.push(dep);
      if (dep === 'chain/m') throw httpError(500);
      return `answer from ${dep}`;
    });
    assert.equal(result, 'answer from chain/n');
    assert.deepEqual(called, ['chain/m', 'chain/n']);
    assert.deepEqual(await bd.reportsOf('chain/m'), ['server_error/counted_failure 1']);
    assert.deepEqual(await bd.reportsOf('chain/n'), ['success/counted_success 1']);
  });

  it('throws the breaker-open error when none is granted', async () => {
    await bd.admin('ForceOpen', 'chain/j');
    let called = false;
    const err = await remote.first(['chain/a', 'chain/j'], async () => { called = true; }).catch((e) => e);
    assert.ok(err instanceof BreakerOpenError, String(err));
    assert.equal(err.reason, 'REJECT_REASON_FORCED_OPEN');
    assert.equal(err.source, 'SIDECAR');
    assert.equal(called, false);
  });
});

// Gentle recovery: a breaker its probe closed admits a rising share of first
// attempts and no retry while it ramps; its refusal, REJECT_REASON_RAMP, is
// a refusal like any other.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { BreakerdClient, BreakerOpenError } from '../src/index';
import { Breakerd, httpError, waitFor } from './helpers';

describe('gentle recovery', () => {
  let bd: Breakerd;
  let client: BreakerdClient;

  before(async () => {
    bd = await Breakerd.start();
    client = new BreakerdClient({ target: bd.grpcAddr, decisionTimeoutMs: 2000, logger: null });
  });
  after(async () => {
    await client.close();
    await bd.dispose();
  });

  // Opens dep (a ramp/* breaker: 3 failures, 1 s cooldown) over gRPC and
  // closes it with a successful probe once its cooldown has passed.
  async function rampUp(dep: string): Promise<void> {
    for (let i = 0; i < 3; i++) {
      const granted = await bd.acquireRaw(dep);
      assert.ok(granted.allowed, `failure ${i + 1} allowed`);
      await bd.reportRaw(dep, granted.permit, 'OUTCOME_SERVER_ERROR');
    }
    assert.equal((await bd.getState(dep)).state, 'STATE_OPEN');
    let probed = false;
    await waitFor(`the probe of ${dep}`, async () => {
      if (probed) return true;
      const granted = await bd.acquireRaw(dep);
      if (!granted.probe) return false;
      await bd.reportRaw(dep, granted.permit, 'OUTCOME_SUCCESS');
      probed = true;
      return true;
    });
    const status = await bd.getState(dep);
    assert.equal(status.state, 'STATE_CLOSED');
    assert.ok(status.admit_share > 0 && status.admit_share < 1, `admit share ${status.admit_share}`);
  }

  // conformance: ramp
  it('hands on breakerd\'s RAMP refusal of a retry, and retry() stops at it', async () => {
    const dep = 'ramp/node';
    await rampUp(dep);

    const d = await client.acquire(dep, 1);
    assert.equal(d.allowed, false);
    assert.equal(Number(d.permit), 0);
    assert.equal(d.reason, 'REJECT_REASON_RAMP');
    assert.equal(d.source, 'SIDECAR');
    assert.equal(d.state, 'STATE_CLOSED');

    let calls = 0;
    const err = await client
      .retry(dep, async () => {
        calls++;
        throw httpError(503);
      }, { maxAttempts: 3, baseMs: 1, maxMs: 5 })
      .then(() => assert.fail('retry should reject'), (e) => e);
    assert.ok(err instanceof BreakerOpenError, String(err));
    assert.equal(err.reason, 'REJECT_REASON_RAMP');
    assert.equal(err.source, 'SIDECAR');
    assert.ok(calls <= 1, `${calls} calls: the first attempt at most`);
  });
});

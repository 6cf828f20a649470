// retry(): never retries while the breaker is open, nor an outcome not worth retrying.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { BreakerdClient, BreakerOpenError, Outcome } from '../src/index';
import { Breakerd, httpError } from './helpers';

describe('retry', () => {
  let bd: Breakerd;
  let client: BreakerdClient;
  const fast = { baseMs: 5, maxMs: 20 };

  before(async () => {
    bd = await Breakerd.start();
    client = new BreakerdClient({ target: bd.grpcAddr, decisionTimeoutMs: 2000, logger: null });
  });
  after(async () => {
    await client.close();
    await bd.dispose();
  });

  it('stops with the breaker-open error once the breaker opens (3 calls of 5 allowed)', async () => {
    const attempts: number[] = [];
    const err = await client
      .retry('retry/always-503', async (attempt) => {
        attempts.push(attempt);
        throw httpError(503);
      }, { maxAttempts: 5, ...fast })
      .then(() => assert.fail('retry should reject'), (e) => e);
    assert.ok(err instanceof BreakerOpenError, String(err));
    assert.equal(err.reason, 'REJECT_REASON_OPEN');
    assert.deepEqual(attempts, [0, 1, 2], 'no 4th call');
    assert.equal(await bd.reports('retry/always-503', 'server_error', 'counted_failure'), 3);
    assert.equal(await bd.metric('breakerd_acquire_total', { dependency: 'retry/always-503', decision: 'allowed' }), 3);
  });

  it('does not sleep before a retry the open breaker will refuse', async () => {
    const dep = 'retry/no-sleep';
    for (let i = 0; i < 2; i++) await assert.rejects(client.guard(dep, () => Promise.reject(httpError(503))));
    // This failure is the third in a row: the breaker opens, and a backoff of
    // up to 60 s would follow if the helper slept before being refused.
    let calls = 0;
    const started = Date.now();
    await assert.rejects(
      client.retry(dep, async () => { calls++; throw httpError(503); }, { maxAttempts: 5, baseMs: 60_000, maxMs: 60_000 }),
      BreakerOpenError,
    );
    assert.equal(calls, 1);
    assert.ok(Date.now() - started < 5000, `took ${Date.now() - started} ms`);
  });

  it('does not retry a bad request', async () => {
    let calls = 0;
    const bad = httpError(400);
    await assert.rejects(
      client.retry('retry/400', async () => { calls++; throw bad; }, { maxAttempts: 5, ...fast }),
      (e) => e === bad,
    );
    assert.equal(calls, 1);
    assert.equal(await bd.reports('retry/400', 'bad_request', 'neutral'), 1);
  });

  it('retries a failure until it succeeds, acquiring each attempt', async () => {
    const attempts: number[] = [];
    const result = await client.retry('retry/flaky', async (attempt) => {
      attempts.push(attempt);
      if (attempt < 2) throw Object.assign(new Error('reset'), { code: 'ECONNRESET' });
      return 'ok';
    }, fast);
    assert.equal(result, 'ok');
    assert.deepEqual(attempts, [0, 1, 2]);
    assert.equal(await bd.reports('retry/flaky', 'connection_error', 'counted_failure'), 2);
    assert.equal(await bd.reports('retry/flaky', 'success', 'counted_success'), 1);
  });

  it('rethrows the last error after maxAttempts', async () => {
    let calls = 0;
    await assert.rejects(
      client.retry('retry/exhausted', async () => { calls++; throw httpError(502); }, { maxAttempts: 2, ...fast }),
      /HTTP 502/,
    );
    assert.equal(calls, 2);
  });

  it('does not call at all when the breaker is already open', async () => {
    await bd.admin('ForceOpen', 'retry/forced');
    let calls = 0;
    await assert.rejects(
      client.retry('retry/forced', async () => { calls++; }, { maxAttempts: 5, ...fast }),
      (e) => e instanceof BreakerOpenError && e.reason === 'REJECT_REASON_FORCED_OPEN',
    );
    assert.equal(calls, 0);
  });

  // conformance: soft-failure
  it('does not retry a soft failure: one call, reported soft_failure, its result or error to the caller', async () => {
    const refusal = { refused: 'content filter' };
    let calls = 0;
    const result = await client.retry('retry/soft', async () => {
      calls++;
      return refusal;
    }, { maxAttempts: 3, ...fast, classify: () => Outcome.SOFT_FAILURE });
    assert.equal(result, refusal);
    assert.equal(calls, 1);
    // A success for the breaker: the upstream answered.
    assert.deepEqual(await bd.reportsOf('retry/soft'), ['soft_failure/counted_success 1']);

    const err = new Error('the model refused');
    calls = 0;
    await assert.rejects(
      client.retry('retry/soft-error', async () => {
        calls++;
        throw err;
      }, { maxAttempts: 3, ...fast, classify: () => Outcome.SOFT_FAILURE }),
      (e) => e === err,
    );
    assert.equal(calls, 1);
    assert.deepEqual(await bd.reportsOf('retry/soft-error'), ['soft_failure/counted_success 1']);
  });
});

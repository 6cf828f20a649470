// A caller giving up (AbortSignal): reported once as OUTCOME_CANCELLED, never as a failure,
// including while the Acquire is still out; a permit granted after the caller stopped
// waiting goes back to breakerd.
import assert from 'node:assert/strict';
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, describe, it } from 'node:test';
import { BreakerdClient, BreakerOpenError } from '../src/index';
import { Breakerd, httpError, waitFor } from './helpers';

describe('abort', () => {
  let bd: Breakerd;
  let client: BreakerdClient;
  /** A healthy upstream that is merely slow: it answers 200 after 10 s. */
  let upstream: http.Server;
  let url = '';

  before(async () => {
    bd = await Breakerd.start();
    // watch off: every decision comes from breakerd, and the generous
    // timeout keeps a loaded machine from failing open.
    client = new BreakerdClient({ target: bd.grpcAddr, decisionTimeoutMs: 2000, watch: false, logger: null });
    await client.ready();
    upstream = http.createServer((_req, res) => {
      const timer = setTimeout(() => res.end('ok'), 10_000);
      res.on('close', () => clearTimeout(timer));
    });
    await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}/`;
  });
  after(async () => {
    upstream.closeAllConnections();
    await new Promise<void>((resolve) => upstream.close(() => resolve()));
    await client.close();
    await bd.dispose();
  });

  const reportsOf = (dep: string): Promise<string[]> => bd.reportsOf(dep);

  async function assertStillClosed(dep: string): Promise<void> {
    const state = await bd.getState(dep);
    assert.equal(state.state, 'STATE_CLOSED');
    assert.equal(state.consecutive_failures, 0);
  }

  it('three fetches aborted by the caller leave the breaker closed, each reported once as cancelled', async () => {
    // The signal reaches fetch only, as an application passes it today:
    // fetch rejects with an AbortError, which is a cancellation, not a timeout.
    const dep = 'abort/fetch-only';
    for (let i = 0; i < 3; i++) {
      const controller = new AbortController();
      setTimeout(() => controller.abort(), 30);
      await assert.rejects(
        client.guard(dep, () => fetch(url, { signal: controller.signal })),
        (e) => (e as Error).name === 'AbortError',
      );
    }
    await assertStillClosed(dep);
    assert.deepEqual(await reportsOf(dep), ['cancelled/neutral 3']);
  });

  // conformance: cancel-call
  it('guard({ signal }) rejects at once with the reason, reports once, and ignores what the call does later', async () => {
    const dep = 'abort/guard-signal';
    // Five calls given up on, against a breaker that opens after three failures.
    const reasons = [
      undefined, new Error('user navigated away'), 'a string reason',
      new DOMException('the request was superseded', 'AbortError'), { code: 'APP_SHUTDOWN' },
    ];
    for (const reason of reasons) {
      const controller = new AbortController();
      let settledLate = false;
      // The caller gives up 30 ms into the call, which ignores the signal and
      // succeeds 300 ms later: too late, the caller is gone.
      let abortedAt = 0;
      const call = async () => {
        setTimeout(() => {
          abortedAt = performance.now();
          controller.abort(reason);
        }, 30);
        await sleep(300);
        settledLate = true;
        return 'late';
      };
      const err = await client.guard(dep, call, { signal: controller.signal }).then(
        () => assert.fail('guard should reject'),
        (e: unknown) => e,
      );
      assert.equal(err, controller.signal.reason, 'rejected with the signal reason');
      const tookMs = performance.now() - abortedAt;
      assert.ok(tookMs < 100, `rejected ${Math.round(tookMs)} ms after the abort`);
      assert.equal(settledLate, false);
    }
    await sleep(400); // the calls finish now: nothing more is reported
    await assertStillClosed(dep);
    assert.deepEqual(await reportsOf(dep), ['cancelled/neutral 5']);
  });

  it('AbortSignal.timeout() on a guard is the call timing out: a counted timeout', async () => {
    const dep = 'abort/signal-timeout';
    // Long enough that it ends during the call, not during the Acquire on a loaded
    // machine (an abort during the Acquire is a cancellation: the call never started).
    const signal = AbortSignal.timeout(200);
    await assert.rejects(
      client.guard(dep, () => fetch(url, { signal }), { signal }),
      (e) => (e as Error).name === 'TimeoutError',
    );
    assert.deepEqual(await reportsOf(dep), ['timeout/counted_failure 1']);
  });

  it('an already aborted signal makes no Acquire and does not call', async () => {
    const dep = 'abort/before';
    const controller = new AbortController();
    controller.abort();
    let ran = false;
    await assert.rejects(
      client.guard(dep, async () => { ran = true; }, { signal: controller.signal }),
      (e) => e === controller.signal.reason,
    );
    assert.equal(ran, false);
    assert.equal(await bd.acquires(dep), 0);
  });

  it('retry({ signal }): an attempt aborted mid-call is reported cancelled and not retried', async () => {
    const dep = 'abort/retry-mid-call';
    const controller = new AbortController();
    let calls = 0;
    await assert.rejects(
      client.retry(dep, () => {
        calls++;
        setTimeout(() => controller.abort(), 30);
        return fetch(url, { signal: controller.signal });
      }, {
        maxAttempts: 5, baseMs: 1, maxMs: 1, signal: controller.signal,
      }),
      (e) => e === controller.signal.reason,
    );
    assert.equal(calls, 1);
    assert.deepEqual(await reportsOf(dep), ['cancelled/neutral 1']);
  });

  it('retry({ signal }): an abort during the backoff sleep stops at once', async () => {
    const dep = 'abort/retry-sleep';
    const controller = new AbortController();
    let calls = 0;
    const random = Math.random;
    Math.random = () => 1; // the backoff sleeps its full 60 s
    const started = performance.now();
    try {
      await assert.rejects(
        client.retry(dep, async () => {
          calls++;
          setTimeout(() => controller.abort(), 50);
          throw httpError(503);
        }, { maxAttempts: 5, baseMs: 60_000, maxMs: 60_000, signal: controller.signal }),
        (e) => e === controller.signal.reason,
      );
    } finally {
      Math.random = random;
    }
    assert.ok(performance.now() - started < 5000, `took ${performance.now() - started} ms`);
    assert.equal(calls, 1);
    assert.deepEqual(await reportsOf(dep), ['server_error/counted_failure 1']);
  });

  it('first({ signal }): an abort stops the chain, the call it ended reported cancelled', async () => {
    const controller = new AbortController();
    const called: string[] = [];
    await assert.rejects(
      client.first(['abort/first-a', 'abort/first-b'], (dep) => {
        called.push(dep);
        setTimeout(() => controller.abort(), 30);
        return fetch(url, { signal: controller.signal });
      }, { signal: controller.signal }),
      (e) => e === controller.signal.reason,
    );
    assert.deepEqual(called, ['abort/first-a']);
    assert.deepEqual(await reportsOf('abort/first-a'), ['cancelled/neutral 1']);
    assert.equal(await bd.acquires('abort/first-b'), 0);
  });

  describe('while the Acquire is out (breakerd paused)', () => {
    // conformance: cancel-acquire
    it('rejects with the reason at once, and reports the permit breakerd grants later as cancelled', async () => {
      // The client's decision timeout is 2 s: the Acquire waits for breakerd.
      const dep = 'abort/during-acquire';
      const controller = new AbortController();
      let ran = false;
      await bd.pause(true);
      const started = performance.now();
      // breakerd continues 300 ms after the start, whatever happens meanwhile.
      const resumed = sleep(300).then(() => bd.pause(false));
      try {
        const guarded = client.guard(dep, async () => { ran = true; }, { signal: controller.signal });
        await sleep(50); // the Acquire is on the wire; breakerd cannot answer
        const aborted = performance.now();
        controller.abort();
        await assert.rejects(guarded, (e) => e === controller.signal.reason);
        const tookMs = performance.now() - aborted;
        assert.ok(tookMs < 100, `rejected ${Math.round(tookMs)} ms after the abort`);
        assert.ok(performance.now() - started < 300, 'rejected before breakerd continued');
      } finally {
        await resumed;
      }
      assert.equal(ran, false);
      // breakerd now answers the Acquire; its permit comes straight back.
      await waitFor('the late permit to be reported', async () => (await reportsOf(dep)).length > 0, 5000);
      await sleep(100); // a second report would come now
      assert.equal(await bd.metric('breakerd_acquire_total', { dependency: dep, decision: 'allowed' }), 1);
      assert.equal(await bd.acquires(dep), 1);
      assert.deepEqual(await reportsOf(dep), ['cancelled/neutral 1']);
      // An abort says nothing about breakerd: the next decision is its own.
      assert.equal((await client.acquire('abort/next')).source, 'SIDECAR');
      assert.equal(client.stats().failOpen, 0);
    });

    it('returns a permit that arrives after the decision timed out (failed open), as cancelled', async () => {
      const dep = 'abort/late-permit';
      const hurried = new BreakerdClient({ target: bd.grpcAddr, decisionTimeoutMs: 100, watch: false, logger: null });
      try {
        await hurried.ready();
        await bd.pause(true);
        let decision;
        try {
          decision = await hurried.acquire(dep);
        } finally {
          await bd.pause(false);
        }
        assert.equal(decision.source, 'FAIL_OPEN');
        assert.equal(decision.permit, '0');
        await waitFor('the late permit to be reported', async () => (await reportsOf(dep)).length > 0, 5000);
        assert.equal(await bd.metric('breakerd_acquire_total', { dependency: dep, decision: 'allowed' }), 1);
        assert.deepEqual(await reportsOf(dep), ['cancelled/neutral 1']);
      } finally {
        await hurried.close();
      }
    });
  });

  it('a refusal is still a BreakerOpenError with a signal given', async () => {
    const dep = 'abort/forced';
    await bd.admin('ForceOpen', dep);
    const controller = new AbortController();
    await assert.rejects(client.guard(dep, async () => 'no', { signal: controller.signal }), BreakerOpenError);
  });
});

// guard(): each outcome reaches breakerd with the right class, once; a refused guard does not call.
import assert from 'node:assert/strict';
import { performance } from 'node:perf_hooks';
import { after, before, describe, it } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import { BreakerdClient, BreakerOpenError, ClientClosedError, Outcome } from '../src/index';
import { Breakerd, httpError, waitFor } from './helpers';

describe('guard', () => {
  let bd: Breakerd;
  let client: BreakerdClient;

  before(async () => {
    bd = await Breakerd.start();
    // watch off: every decision in this file comes from breakerd itself.
    client = new BreakerdClient({ target: bd.grpcAddr, decisionTimeoutMs: 2000, watch: false, logger: null });
  });
  after(async () => {
    await client.close();
    await bd.dispose();
  });

  /** Guards `fn` on a fresh dependency and returns what breakerd counted for it. */
  async function outcomeOf(dep: string, fn: () => Promise<unknown>, classify?: Parameters<typeof client.guard>[2]) {
    await client.guard(dep, fn, classify).catch(() => undefined);
    const text = await bd.metrics();
    const lines = text.split('\n').filter((l) => l.startsWith(`breakerd_reports_total{dependency="${dep}",`));
    assert.equal(lines.length, 1, `exactly one report class for ${dep}: ${lines.join(' | ')}`);
    assert.match(lines[0]!, / 1$/, `reported once: ${lines[0]}`);
    return /class="(\w+)",effect="(\w+)"/.exec(lines[0]!)!.slice(1).join('/');
  }

  it('reports a success as counted_success, with the latency, and returns the result', async () => {
    const result = await client.guard('guard/ok', async () => {
      await new Promise((r) => setTimeout(r, 30));
      return 42;
    });
    assert.equal(result, 42);
    assert.equal(await bd.reports('guard/ok', 'success', 'counted_success'), 1);
    assert.equal(await bd.metric('breakerd_call_duration_seconds_count', { dependency: 'guard/ok' }), 1);
    assert.ok((await bd.metric('breakerd_call_duration_seconds_sum', { dependency: 'guard/ok' })) >= 0.025);
  });

  it('rethrows the error and reports HTTP 503 as a counted server error', async () => {
    const err = httpError(503);
    await assert.rejects(client.guard('guard/503', async () => Promise.reject(err)), (e) => e === err);
    assert.equal(await bd.reports('guard/503', 'server_error', 'counted_failure'), 1);
    assert.equal((await bd.getState('guard/503')).consecutive_failures, 1);
  });

  it('classifies outcomes like breakerd does', async () => {
    const timeoutError = new DOMException('The operation timed out.', 'TimeoutError');
    const cases: [string, () => Promise<unknown>, Parameters<typeof client.guard>[2]?][] = [
      // a resolved HTTP 404 through classify: neutral bad request
      ['bad_request/neutral', async () => ({ status: 404 }),
        { classify: (s) => (s.ok ? Outcome.fromHttpStatus((s.value as { status: number }).status) : undefined) }],
      ['timeout/counted_failure', async () => { throw timeoutError; }],
      ['timeout/counted_failure', async () => { throw Object.assign(new Error('socket'), { code: 'ETIMEDOUT' }); }],
      ['connection_error/counted_failure', async () => {
        throw new TypeError('fetch failed', { cause: Object.assign(new Error('connect'), { code: 'ECONNREFUSED' }) });
      }],
      ['server_error/counted_failure', async () => { throw new Error('anything else'); }],
      ['rate_limited/counted_failure', async () => { throw { code: grpc.status.RESOURCE_EXHAUSTED, details: '', metadata: new grpc.Metadata() }; }],
      ['auth_error/neutral', async () => ({}), { classify: () => Outcome.fromGrpcStatus(grpc.status.PERMISSION_DENIED) }],
      ['timeout/counted_failure', async () => ({}), { classify: () => Outcome.fromGrpcStatus(grpc.status.DEADLINE_EXCEEDED) }],
      ['success/counted_success', async () => ({}), { classify: () => Outcome.fromGrpcStatus(grpc.status.OK) }],
      ['soft_failure/counted_success', async () => ({}), { classify: () => Outcome.SOFT_FAILURE }],
    ];
    for (const [i, [want, fn, options]] of cases.entries()) {
      assert.equal(await outcomeOf(`guard/case-${i}`, fn, options), want, `case ${i}`);
    }
  });

  it('maps a real gRPC ServiceError by its code', async () => {
    // A genuine grpc-js error: breakerd refuses a bad dependency name with INVALID_ARGUMENT.
    const probe = new BreakerdClient({ target: bd.grpcAddr, decisionTimeoutMs: 2000, watch: false, logger: null });
    try {
      const err = await probe.acquire('not a valid name').then(() => assert.fail('acquire should reject'), (e) => e);
      assert.equal(err.code, grpc.status.INVALID_ARGUMENT);
      assert.equal(await outcomeOf('guard/grpc-invalid', () => Promise.reject(err)), 'bad_request/neutral');
    } finally {
      await probe.close();
    }
  });

  it('does not run the call when the breaker refuses', async () => {
    await bd.admin('ForceOpen', 'guard/forced');
    const before = await bd.acquires('guard/forced');
    let ran = false;
    await assert.rejects(
      client.guard('guard/forced', async () => { ran = true; }),
      (e) => e instanceof BreakerOpenError && e.reason === 'REJECT_REASON_FORCED_OPEN' && e.source === 'SIDECAR',
    );
    assert.equal(ran, false);
    assert.equal(await bd.acquires('guard/forced'), before + 1);
    assert.equal(await bd.metric('breakerd_reports_total', { dependency: 'guard/forced' }), 0);
  });

  it('opens after three failures and then refuses without calling', async () => {
    for (let i = 0; i < 3; i++) {
      await assert.rejects(client.guard('guard/trip', () => Promise.reject(httpError(500))));
    }
    let ran = false;
    const err = await client.guard('guard/trip', async () => { ran = true; }).catch((e) => e);
    assert.ok(err instanceof BreakerOpenError, String(err));
    assert.equal(err.reason, 'REJECT_REASON_OPEN');
    assert.ok(err.retryAfterMs > 20_000 && err.retryAfterMs <= 30_000, `retryAfterMs ${err.retryAfterMs}`);
    assert.equal(ran, false);
    assert.equal(await bd.reports('guard/trip', 'server_error', 'counted_failure'), 3);
  });

  it('sends a Retry-After with the report: the cooldown is at least that', async () => {
    for (let i = 0; i < 3; i++) {
      await client.guard('guard/retry-after', async () => ({}), { classify: () => Outcome.fromHttpStatus(503, '90') });
    }
    const state = await bd.getState('guard/retry-after');
    assert.equal(state.state, 'STATE_OPEN');
    assert.ok(Number(state.retry_after!.seconds) > 60, `retry_after ${state.retry_after!.seconds}s`);
  });

  it('reports the permit explicitly with report()', async () => {
    const d = await client.acquire('guard/manual');
    assert.equal(d.source, 'SIDECAR');
    assert.ok(d.allowed && d.permit !== '0');
    assert.deepEqual(await client.report('guard/manual', d.permit, Outcome.TIMEOUT, 12), {
      state: 'STATE_CLOSED',
      effect: 'EFFECT_COUNTED_FAILURE',
    });
    // A permit breakerd never issued is counted as a report error, never thrown.
    assert.equal(await client.report('guard/manual', '12345', Outcome.SUCCESS), undefined);
    assert.equal(client.stats().reportErrors, 1);
    // Permit "0" (fail-open) is not sent at all.
    assert.equal(await client.report('guard/manual', '0', Outcome.SUCCESS), undefined);
    assert.equal(client.stats().reportErrors, 1);
    assert.equal(await bd.metric('breakerd_reports_total', { dependency: 'guard/manual' }), 1);
  });

  // conformance: classifier-raises
  it('reports the permit once, as the default classifier would, when the classifier throws, and rejects with its error', async () => {
    const bug = new Error('classifier bug');
    const classify = (): never => {
      throw bug;
    };
    // A plain error from the call: the default classifies it as a server error.
    await assert.rejects(
      client.guard('guard/classifier-throws', async () => { throw new Error('upstream broke'); }, { classify }),
      (e) => e === bug,
    );
    assert.deepEqual(await bd.reportsOf('guard/classifier-throws'), ['server_error/counted_failure 1']);
    // A value: the default classifies it as a success.
    await assert.rejects(client.guard('guard/classifier-throws-ok', async () => 'fine', { classify }), (e) => e === bug);
    assert.deepEqual(await bd.reportsOf('guard/classifier-throws-ok'), ['success/counted_success 1']);
    // retry and first stop with it too: no further attempt, no fallback.
    let calls = 0;
    const failing = async (): Promise<never> => {
      calls++;
      throw new Error('upstream broke');
    };
    await assert.rejects(client.retry('guard/classifier-throws-retry', failing, { classify, baseMs: 1, maxMs: 1 }), (e) => e === bug);
    await assert.rejects(client.first(['guard/classifier-throws-first', 'guard/classifier-throws-next'], failing, { classify }), (e) => e === bug);
    assert.equal(calls, 2);
    assert.deepEqual(await bd.reportsOf('guard/classifier-throws-retry'), ['server_error/counted_failure 1']);
    assert.deepEqual(await bd.reportsOf('guard/classifier-throws-first'), ['server_error/counted_failure 1']);
    assert.equal(await bd.acquires('guard/classifier-throws-next'), 0);
    // Every permit breakerd granted was reported.
    for (const dep of ['guard/classifier-throws', 'guard/classifier-throws-ok', 'guard/classifier-throws-retry', 'guard/classifier-throws-first']) {
      assert.equal(await bd.metric('breakerd_reports_total', { dependency: dep }),
        await bd.metric('breakerd_acquire_total', { dependency: dep, decision: 'allowed' }), dep);
    }
  });

  // conformance: closed
  it('after close(), twice, every call fails at once with ClientClosedError, sends nothing and fails nothing open', async () => {
    const dep = 'guard/closed';
    const closing = new BreakerdClient({ target: bd.grpcAddr, logger: null }); // the defaults
    await closing.ready();
    await waitFor('a decision from breakerd', async () => {
      const d = await closing.acquire(dep);
      await closing.report(dep, d.permit, Outcome.SUCCESS);
      return d.source === 'SIDECAR';
    });
    const failOpenBefore = closing.stats().failOpen;
    await closing.close();
    await closing.close();
    const acquiresBefore = await bd.acquires(dep);

    let ran = 0;
    const fn = async (): Promise<string> => {
      ran++;
      return 'ran';
    };
    const uses: Record<string, () => Promise<unknown>> = {
      acquire: () => closing.acquire(dep),
      acquireFirst: () => closing.acquireFirst([dep, 'guard/closed-b']),
      guard: () => closing.guard(dep, fn),
      retry: () => closing.retry(dep, fn),
      first: () => closing.first([dep, 'guard/closed-b'], fn),
      ready: () => closing.ready(),
    };
    for (const [name, use] of Object.entries(uses)) {
      const started = performance.now();
      const err = await use().then(() => assert.fail(`${name}() resolved after close()`), (e: unknown) => e);
      const tookMs = performance.now() - started;
      assert.ok(err instanceof ClientClosedError, `${name}(): ${String(err)}`);
      assert.ok(err instanceof Error);
      assert.equal(err.name, 'ClientClosedError');
      assert.match(err.message, /breakerd client is closed/);
      assert.ok(tookMs < 50, `${name}() failed ${Math.round(tookMs)} ms after the call`);
    }
    assert.equal(ran, 0, 'no guarded function ran');
    // A report after close is dropped and counted, never raised.
    const reportErrorsBefore = closing.stats().reportErrors;
    assert.equal(await closing.report(dep, '12345', Outcome.SUCCESS), undefined);
    assert.equal(closing.stats().reportErrors, reportErrorsBefore + 1);
    assert.equal(closing.stats().failOpen, failOpenBefore);
    assert.equal(closing.stats().failClosed, 0);
    assert.equal(await bd.acquires(dep), acquiresBefore, 'no Acquire reached breakerd');
    assert.equal(await bd.acquires('guard/closed-b'), 0);
  });
});

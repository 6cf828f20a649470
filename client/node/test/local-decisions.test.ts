// Local decisions against the real breakerd (client/README.md, "Local
// decisions"): first attempts granted in the client while the Watch stream
// says CLOSED with local_decisions, their outcomes and the client's own
// decisions sent in ReportBatch requests, and everything else through breakerd.
// The conformance config's local/* and local-short/* allow local decisions
// (five failures in a row open them); every other policy does not.
import assert from 'node:assert/strict';
import { fork } from 'node:child_process';
import * as path from 'node:path';
import { performance } from 'node:perf_hooks';
import { setImmediate as turn } from 'node:timers/promises';
import { after, before, describe, it } from 'node:test';
import { BreakerdClient, BreakerOpenError, Outcome, type BreakerdClientOptions, type Decision } from '../src/index';
import type { ChildMessage } from './local-probe-child';
import { Breakerd, httpError, waitFor } from './helpers';

/** A call that succeeds at once. */
const ok = async (): Promise<string> => 'ok';
/** A call that fails with a server error. */
const failing = async (): Promise<never> => {
  throw httpError(500);
};

/** A client of `bd` (decisions given 2 s: the set-up is not what is measured). */
function clientOf(bd: Breakerd, options: BreakerdClientOptions = {}): BreakerdClient {
  return new BreakerdClient({ target: bd.grpcAddr, decisionTimeoutMs: 2000, logger: null, ...options });
}

/**
 * Turns the fast path on for `dep`: one guarded call decided by breakerd
 * creates its breaker, then two-step acquires (reported with the decision)
 * until one is granted LOCAL (the `created` event reached the cache; 2 s).
 * Returns how many grants were made locally.
 */
async function fastPathOn(client: BreakerdClient, dep: string): Promise<number> {
  await client.ready();
  await waitFor('the Watch stream', () => client.watching);
  await client.guard(dep, ok);
  let local = 0;
  await waitFor(`a local grant of ${dep}`, async () => {
    const d = await client.acquire(dep);
    await client.report(dep, d.permit, Outcome.SUCCESS, 1, d);
    if (d.source === 'LOCAL') local++;
    return d.source === 'LOCAL';
  }, 2000);
  return local;
}

/** breakerd_acquire_total of `dep` for one decision. */
function decisions(bd: Breakerd, dependency: string, decision: string): Promise<number> {
  return bd.metric('breakerd_acquire_total', { dependency, decision });
}

/** breakerd_grpc_server_handled_total of one method, summed over codes. */
function handled(bd: Breakerd, method: string): Promise<number> {
  return bd.metric('breakerd_grpc_server_handled_total', { method });
}

describe('local decisions', () => {
  let bd: Breakerd;

  before(async () => {
    bd = await Breakerd.start();
  });
  after(async () => {
    await bd.dispose();
  });

  // conformance: local-fast-path
  it('decides 10,000 guarded calls in the client, reported in batches', async () => {
    const dep = 'local/fast-node';
    const client = clientOf(bd);
    let closed = false;
    try {
      const localSoFar = await fastPathOn(client, dep);
      // The warm-up's batch has landed: the deltas below are the 10,000 calls'.
      await waitFor('the warm-up batch', async () => (await decisions(bd, dep, 'allowed_local')) === localSoFar, 3000);
      const before = {
        acquire: await handled(bd, 'Acquire'),
        report: await handled(bd, 'Report'),
        batch: await handled(bd, 'ReportBatch'),
        acquires: await bd.acquires(dep),
        local: await decisions(bd, dep, 'allowed_local'),
        success: await bd.metric('breakerd_reports_total', { dependency: dep, class: 'success' }),
        reports: await bd.metric('breakerd_reports_total', { dependency: dep }),
      };
      for (let i = 0; i < 10_000; i++) {
        assert.equal(await client.guard(dep, ok), 'ok');
        // An application's event loop turns between requests: the batches go out.
        if (i % 500 === 499) await turn();
      }
      await client.close();
      closed = true;
      assert.equal(client.stats().droppedOutcomes, 0);
      assert.equal(client.stats().failOpen, 0);
      assert.equal((await handled(bd, 'Acquire')) - before.acquire, 0, 'no Acquire RPC');
      assert.equal((await handled(bd, 'Report')) - before.report, 0, 'no Report RPC');
      assert.ok((await handled(bd, 'ReportBatch')) - before.batch >= 1, 'at least one ReportBatch');
      assert.equal((await decisions(bd, dep, 'allowed_local')) - before.local, 10_000);
      assert.equal((await bd.acquires(dep)) - before.acquires, 10_000, 'nothing but allowed_local');
      await waitFor('10,000 reports', async () =>
        (await bd.metric('breakerd_reports_total', { dependency: dep })) - before.reports >= 10_000, 3000);
      assert.equal((await bd.metric('breakerd_reports_total', { dependency: dep, class: 'success' })) - before.success, 10_000);
      assert.equal((await bd.metric('breakerd_reports_total', { dependency: dep })) - before.reports, 10_000);
    } finally {
      if (!closed) await client.close();
    }
  });

  // conformance: local-two-step
  it('grants a two-step acquire locally; report() with the decision puts its outcome in the batch', async () => {
    const dep = 'local/two-step-node';
    const client = clientOf(bd);
    try {
      await fastPathOn(client, dep);
      const reportRpcs = await handled(bd, 'Report');
      const errors = await bd.metric('breakerd_reports_total', { dependency: dep, class: 'server_error' });
      const d = await client.acquire(dep);
      assert.deepEqual(
        { allowed: d.allowed, source: d.source, permit: d.permit, state: d.state, probe: d.probe },
        { allowed: true, source: 'LOCAL', permit: '0', state: 'STATE_CLOSED', probe: false },
      );
      // It resolves at once: before the event loop's next turn (no I/O, no timer).
      const reported = client.report(dep, d.permit, Outcome.SERVER_ERROR, 12, d);
      const nextTurn = new Promise((resolve) => setImmediate(() => resolve('still pending at the next turn')));
      assert.equal(await Promise.race([reported, nextTurn]), undefined);
      await waitFor('the server error counted', async () =>
        (await bd.metric('breakerd_reports_total', { dependency: dep, class: 'server_error' })) === errors + 1, 3000);

      // Neither the same decision again, nor the raw permit 0, sends anything.
      assert.equal(await client.report(dep, d.permit, Outcome.SERVER_ERROR, 12, d), undefined);
      assert.equal(await client.report(dep, '0', Outcome.SERVER_ERROR), undefined);
      // A later outcome that lands tells that nothing more was sent before it.
      const successes = await bd.metric('breakerd_reports_total', { dependency: dep, class: 'success' });
      await client.guard(dep, ok);
      await waitFor('a later success', async () =>
        (await bd.metric('breakerd_reports_total', { dependency: dep, class: 'success' })) === successes + 1, 3000);
      assert.equal(await bd.metric('breakerd_reports_total', { dependency: dep, class: 'server_error' }), errors + 1);
      assert.equal(await handled(bd, 'Report'), reportRpcs, 'no Report RPC');
      assert.equal(client.stats().droppedOutcomes, 0);
    } finally {
      await client.close();
    }
  });

  // conformance: local-trip
  it('trips on outcomes decided locally and refuses locally once the Watch says OPEN', async (t) => {
    const dep = 'local/trip-node';
    const client = clientOf(bd);
    let closed = false;
    try {
      await fastPathOn(client, dep);
      const granted = await decisions(bd, dep, 'allowed');
      for (let i = 0; i < 5; i++) await assert.rejects(client.guard(dep, failing), /HTTP 500/);
      const fifth = performance.now();
      const refusalsBefore = client.stats().localRejections;
      let calls = 0;
      let ran = 0;
      let refusal: BreakerOpenError | undefined;
      while (refusal === undefined) {
        calls++;
        try {
          await client.guard(dep, async () => {
            ran++;
          });
        } catch (err) {
          if (!(err instanceof BreakerOpenError)) throw err;
          refusal = err;
        }
        assert.ok(performance.now() - fifth < 5000, `not refused within 5 s of the fifth failure (${ran} calls ran)`);
        await turn();
      }
      const tookMs = performance.now() - fifth;
      t.diagnostic(`refused ${tookMs.toFixed(1)} ms after the fifth failure; ${ran} calls ran meanwhile`);
      assert.equal(refusal.source, 'LOCAL');
      assert.equal(refusal.reason, 'REJECT_REASON_OPEN');
      assert.ok(tookMs <= 2000, `refused ${Math.round(tookMs)} ms after the fifth failure`);
      assert.equal(ran, calls - 1, 'every call before the refusal ran');
      assert.equal((await bd.getState(dep)).state, 'STATE_OPEN');
      assert.equal(
        await bd.metric('breakerd_transitions_total', { dependency: dep, to: 'open', reason: 'consecutive_failures' }), 1);
      assert.equal(await decisions(bd, dep, 'allowed'), granted, 'every call was granted locally');

      for (let i = 0; i < 20; i++) {
        await assert.rejects(client.guard(dep, ok), (e) => e instanceof BreakerOpenError && e.source === 'LOCAL');
      }
      const refusedHere = client.stats().localRejections - refusalsBefore;
      assert.equal(refusedHere, 21);
      await client.close();
      closed = true;
      const counted = await bd.metric('breakerd_client_decisions_total', { dependency: dep, decision: 'refused_local' });
      assert.ok(counted >= 21, `breakerd counted ${counted} local refusals`);
      assert.equal(counted, client.stats().localRejections, 'breakerd counts each of the client’s local refusals');
    } finally {
      if (!closed) await client.close();
    }
  });

  // conformance: local-probe
  it('lets exactly one of three processes probe a breaker they all hold open', async () => {
    const dep = 'local-short/probe-node';
    const client = clientOf(bd);
    const children: ReturnType<typeof fork>[] = [];
    try {
      const localGrants = await fastPathOn(client, dep);
      const probes = await decisions(bd, dep, 'probe');
      const results = [0, 1, 2].map(() => {
        const child = fork(path.join(__dirname, 'local-probe-child.js'), [bd.grpcAddr, dep], { stdio: 'inherit' });
        children.push(child);
        let ready!: () => void;
        const isReady = new Promise<void>((resolve) => (ready = resolve));
        const done = new Promise<ChildMessage>((resolve, reject) => {
          child.on('message', (m: ChildMessage) => (m.type === 'ready' ? ready() : resolve(m)));
          child.on('exit', (code) => reject(new Error(`a child exited (${code}) before it was done`)));
        });
        return { isReady, done };
      });
      await Promise.all(results.map((r) => r.isReady));
      for (let i = 0; i < 5; i++) await assert.rejects(client.guard(dep, failing), /HTTP 500/);
      const outcomes = await Promise.all(results.map((r) => r.done));
      for (const o of outcomes) assert.notEqual(o.type, 'error', JSON.stringify(o));
      const done = outcomes as Extract<ChildMessage, { type: 'done' }>[];
      assert.equal(done.filter((o) => o.ran).length, 1, JSON.stringify(done));
      for (const o of done.filter((x) => !x.ran)) {
        const expected = (o.source === 'SIDECAR' && o.reason === 'REJECT_REASON_PROBE_IN_FLIGHT') ||
          (o.source === 'LOCAL' && o.reason === 'REJECT_REASON_OPEN');
        assert.ok(expected, `refused as ${o.source} ${o.reason}`);
      }
      assert.deepEqual(done.map((o) => o.grantedLocally), [0, 0, 0]);
      assert.equal((await decisions(bd, dep, 'probe')) - probes, 1);
      await waitFor('the close by the probe', async () =>
        (await bd.metric('breakerd_transitions_total', { dependency: dep, to: 'closed', reason: 'probe_succeeded' })) === 1, 3000);
      // The children were granted nothing locally: every local grant is the test client's.
      assert.equal(await decisions(bd, dep, 'allowed_local'), localGrants + 5);
    } finally {
      for (const child of children) if (child.exitCode === null) child.kill();
      await client.close();
    }
  });

  // conformance: local-off
  it('sends every call through breakerd with the option off', async () => {
    const dep = 'local/off-node';
    const client = clientOf(bd, { localDecisions: false });
    try {
      await client.ready();
      await waitFor('the Watch stream', () => client.watching);
      await client.guard(dep, ok);
      await waitFor('the created event', () => client.cachedState(dep) !== undefined, 2000);
      const d = await client.acquire(dep);
      assert.equal(d.source, 'SIDECAR');
      await client.report(dep, d.permit, Outcome.SUCCESS, 1, d);
      const allowed = await decisions(bd, dep, 'allowed');
      const reportRpcs = await handled(bd, 'Report');
      for (let i = 0; i < 100; i++) await client.guard(dep, ok);
      assert.equal((await decisions(bd, dep, 'allowed')) - allowed, 100);
      assert.equal(await decisions(bd, dep, 'allowed_local'), 0);
      assert.equal((await handled(bd, 'Report')) - reportRpcs, 100);
    } finally {
      await client.close();
    }
  });

  it('grants the first candidate of a fallback chain locally, named or not, and counts a named one', async () => {
    const [p, s] = ['local/chain-node-p', 'local/chain-node-s'];
    const client = clientOf(bd);
    try {
      await fastPathOn(client, p);
      const acquireFirstRpcs = await handled(bd, 'AcquireFirst');
      assert.equal(await client.first([p, s], async (dep) => dep), p);
      assert.equal(await client.first([p, s], async (dep) => dep, { chain: 'local-chain-node' }), p);
      const d = await client.acquireFirst([p, s], 0, { chain: 'local-chain-node', firstTier: 2 });
      assert.deepEqual([d.source, d.dependency, d.chain, d.tier], ['LOCAL', p, 'local-chain-node', 2]);
      await client.report(d.dependency, d.permit, Outcome.RATE_LIMITED, 3, d);
      assert.equal(await handled(bd, 'AcquireFirst'), acquireFirstRpcs, 'no AcquireFirst RPC');
      await waitFor('the chain counted', async () =>
        (await bd.metric('breakerd_chain_outcomes_total', { chain: 'local-chain-node', tier: '2', class: 'rate_limited' })) === 1, 3000);
      assert.equal(await bd.metric('breakerd_chain_decisions_total', { chain: 'local-chain-node', tier: '0' }), 1);
      assert.equal(await bd.metric('breakerd_chain_decisions_total', { chain: 'local-chain-node', tier: '2' }), 1);
      assert.equal(await bd.metric('breakerd_chain_outcomes_total', { chain: 'local-chain-node', tier: '0', class: 'success' }), 1);
      // A retry (attempt 1) always asks breakerd.
      const retry = await client.acquire(p, 1);
      assert.equal(retry.source, 'SIDECAR');
      await client.report(p, retry.permit, Outcome.SUCCESS, 1, retry);
    } finally {
      await client.close();
    }
  });
});

describe('local decisions when breakerd goes away', () => {
  // conformance: local-stream-drop
  it('stops granting locally when the stream ends, and tells the new breakerd the decisions made meanwhile', async () => {
    const dep = 'local/drop-node';
    const bd = await Breakerd.start();
    const client = clientOf(bd, { decisionTimeoutMs: 500 });
    try {
      await fastPathOn(client, dep);
      await bd.kill();
      // The stream's end reaches the client through its worker thread.
      await waitFor('the Watch stream to end', () => !client.watching, 5000);
      const failOpen = client.stats().failOpen;
      for (let i = 0; i < 10; i++) assert.equal(await client.guard(dep, ok), 'ok');
      assert.equal(client.stats().failOpen - failOpen, 10, 'every call while it was down failed open: none granted locally');

      // The first decision that is not an away decision is the first call
      // after the client is back, made at once: breakerd creates a breaker
      // when it counts the client decisions, which go out a flush interval
      // after the client is back, and its created event would turn the fast
      // path on again.
      await bd.restart();
      let d: Decision;
      const deadline = performance.now() + 10_000;
      do {
        d = await client.acquire(dep);
        if (d.source === 'FAIL_OPEN') await turn();
      } while (d.source === 'FAIL_OPEN' && performance.now() < deadline);
      assert.equal(d.source, 'SIDECAR', 'the first call after the restart goes to breakerd');
      assert.equal(d.allowed, true);
      await client.report(dep, d.permit, Outcome.SUCCESS, 1, d);
      assert.equal(await decisions(bd, dep, 'allowed'), 1);
      // Not checked: allowed_local on the new breakerd. A batch of grants
      // made before the kill that the old breakerd never acknowledged is
      // sent again to the new one, which rightly counts those decisions.
      // The calls above, and the away decisions until the client was back.
      const failedOpen = client.stats().failOpen - failOpen;
      await waitFor('the fail-open decisions counted by the new breakerd', async () =>
        (await bd.metric('breakerd_client_decisions_total', { dependency: dep, decision: 'fail_open' })) === failedOpen, 3000);
    } finally {
      await client.close();
      await bd.dispose();
    }
  });
});

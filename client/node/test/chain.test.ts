// A named fallback chain: first() asks breakerd with the chain's name and first
// tier, also for candidates its Watch cache knows to be open, so that breakerd
// counts every decision ("none" too) and every outcome with its tier; without
// a name nothing is counted as a chain.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { BreakerdClient, BreakerOpenError, Outcome } from '../src/index';
import { Breakerd, httpError, waitFor } from './helpers';

describe('named fallback chain', () => {
  let bd: Breakerd;
  let client: BreakerdClient;

  before(async () => {
    bd = await Breakerd.start();
    client = new BreakerdClient({ target: bd.grpcAddr, decisionTimeoutMs: 2000, logger: null });
    await client.ready();
  });
  after(async () => {
    await client.close();
    await bd.dispose(); // SIGCONT first
  });

  /**
   * The nonzero samples of `family` for `chain`, keyed by their other labels'
   * values: the tier, or `tier/class`.
   */
  async function chainSamples(family: string, chain: string): Promise<Record<string, number>> {
    const out: Record<string, number> = {};
    for (const line of (await bd.metrics()).split('\n')) {
      const m = /^(\w+)\{(.*)\} (\S+)$/.exec(line);
      if (!m || m[1] !== family || Number(m[3]) === 0) continue;
      const labels = new Map([...m[2]!.matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)].map((l) => [l[1]!, l[2]!]));
      if (labels.get('chain') !== chain) continue;
      const key = labels.has('class') ? `${labels.get('tier')}/${labels.get('class')}` : labels.get('tier')!;
      out[key] = (out[key] ?? 0) + Number(m[3]);
    }
    return out;
  }

  /** The sum of every sample of `family`. */
  async function total(family: string): Promise<number> {
    return bd.metric(family, {});
  }

  /**
   * Opens `dep`'s breaker with guarded calls that fail with a server error
   * (as many as breakerd needs: three in a row open it) and waits until the
   * Watch cache holds it open: a plain acquire is refused LOCAL.
   */
  async function open(dep: string): Promise<void> {
    for (let i = 0; i < 3 && (await bd.getState(dep)).state !== 'STATE_OPEN'; i++) {
      await assert.rejects(client.guard(dep, () => Promise.reject(httpError(500))), /HTTP 500/);
    }
    assert.equal((await bd.getState(dep)).state, 'STATE_OPEN');
    await waitFor(`the Watch cache to hold ${dep} open`, () => client.cachedState(dep) === 'STATE_OPEN');
    assert.equal((await client.acquire(dep)).source, 'LOCAL');
  }

  // conformance: chain
  it('is counted by breakerd at every tier, and when none is granted', async () => {
    const chain = 'conf-chain-node';
    const [p, s, t] = ['chain-node/p', 'chain-node/s', 'chain-node/t'];
    const called: string[] = [];

    // 1. Every dependency closed: p runs.
    assert.equal(await client.first([p, s, t], async (dep) => { called.push(dep); return `from ${dep}`; }, { chain }), `from ${p}`);
    assert.deepEqual(called, [p]);

    // 2. p open, and the Watch cache knows it: breakerd is asked about p all
    // the same; s fails with a server error, then t succeeds.
    await open(p);
    const pAcquires = await bd.acquires(p);
    called.length = 0;
    const result = await client.first([p, s, t], async (dep) => {
      called.push(dep);
      if (dep === s) throw httpError(503);
      return `from ${dep}`;
    }, { chain });
    assert.equal(result, `from ${t}`);
    assert.deepEqual(called, [s, t]);
    assert.equal(await bd.acquires(p), pAcquires + 1, 'breakerd was not asked about p');

    // 3. All three open, and the cache knows: breakerd refuses the chain, no call runs.
    await open(s);
    await open(t);
    called.length = 0;
    const localBefore = client.stats().localRejections;
    const err = await client.first([p, s, t], async (dep) => { called.push(dep); }, { chain }).catch((e) => e);
    assert.ok(err instanceof BreakerOpenError, String(err));
    assert.equal(err.source, 'SIDECAR');
    assert.equal(err.reason, 'REJECT_REASON_OPEN');
    assert.deepEqual(called, []);
    assert.equal(client.stats().localRejections, localBefore);

    assert.deepEqual(await chainSamples('breakerd_chain_decisions_total', chain), { '0': 1, '1': 1, '2': 1, none: 1 });
    assert.deepEqual(await chainSamples('breakerd_chain_outcomes_total', chain), {
      '0/success': 1, '1/server_error': 1, '2/success': 1,
    });
  });

  it('refuses an invalid chain name, naming `chain`, before any RPC', async () => {
    const dep = 'chain-node/never-asked';
    const rpcsBefore = await bd.metric('breakerd_grpc_server_handled_total', { method: 'AcquireFirst' });
    let ran = false;
    for (const bad of ['', 'two words', 'x'.repeat(201), 'café', 42 as unknown as string]) {
      await assert.rejects(client.first([dep], async () => { ran = true; }, { chain: bad }), (e) =>
        e instanceof RangeError && e.message.startsWith('chain: '));
      await assert.rejects(client.acquireFirst([dep], 0, { chain: bad }), (e) =>
        e instanceof RangeError && e.message.startsWith('chain: '));
    }
    assert.equal(ran, false);
    assert.equal(await bd.metric('breakerd_grpc_server_handled_total', { method: 'AcquireFirst' }), rpcsBefore);
    assert.equal(await bd.acquires(dep), 0);
    // The longest valid name is taken.
    assert.equal(await client.first([dep], async (d) => d, { chain: 'c'.repeat(200) }), dep);
  });

  it('acquireFirst with a chain sends its first tier, and report() with the decision carries its tier', async () => {
    const chain = 'tier-node';
    const [x, y] = ['chain-node/tier-x', 'chain-node/tier-y'];
    await bd.admin('ForceOpen', x);
    await waitFor('the FORCED_OPEN event', () => client.cachedState(x) === 'STATE_FORCED_OPEN');
    // The caller's chain is [.., .., x, y]: x is refused by breakerd, y is tier 3.
    const d = await client.acquireFirst([x, y], 0, { chain, firstTier: 2 });
    assert.equal(d.allowed, true);
    assert.equal(d.dependency, y);
    assert.equal(d.source, 'SIDECAR');
    assert.equal(d.chain, chain);
    assert.equal(d.tier, 3);
    await client.report(d.dependency, d.permit, Outcome.RATE_LIMITED, 5, d);
    assert.deepEqual(await chainSamples('breakerd_chain_decisions_total', chain), { '3': 1 });
    assert.deepEqual(await chainSamples('breakerd_chain_outcomes_total', chain), { '3/rate_limited': 1 });
    await assert.rejects(client.acquireFirst([y], 0, { chain, firstTier: -1 }), RangeError);
    // A position breakerd would refuse is left out of the Report: the outcome still counts.
    for (const position of [{ chain: 'two words', tier: 0 }, { chain, tier: 64 }, { chain, tier: 1.5 }]) {
      const e = await client.acquireFirst([y]);
      const result = await client.report(e.dependency, e.permit, Outcome.SUCCESS, 1, position);
      assert.equal(result?.effect, 'EFFECT_COUNTED_SUCCESS', JSON.stringify(position));
    }
    assert.deepEqual(await chainSamples('breakerd_chain_outcomes_total', chain), { '3/rate_limited': 1 });
  });

  it('without a name, breakerd counts no chain', async () => {
    const decisions = await total('breakerd_chain_decisions_total');
    const outcomes = await total('breakerd_chain_outcomes_total');
    const [a, b] = ['chain-node/unnamed-a', 'chain-node/unnamed-b'];
    const result = await client.first([a, b], async (dep) => {
      if (dep === a) throw httpError(500);
      return dep;
    });
    assert.equal(result, b);
    const d = await client.acquireFirst([a, b]);
    assert.equal(d.chain, undefined);
    await client.report(d.dependency, d.permit, Outcome.SUCCESS, 1, d);
    assert.equal(await total('breakerd_chain_decisions_total'), decisions);
    assert.equal(await total('breakerd_chain_outcomes_total'), outcomes);
  });

  it('uses the Watch cache as without a name when breakerd does not answer', async () => {
    const [p, s] = ['chain-node/away-p', 'chain-node/away-s'];
    const c = new BreakerdClient({ target: bd.grpcAddr, decisionTimeoutMs: 300, logger: null });
    try {
      await c.ready();
      await bd.admin('ForceOpen', p);
      await waitFor('the FORCED_OPEN event', () => c.cachedState(p) === 'STATE_FORCED_OPEN');
      const called: string[] = [];
      await bd.pause(true);
      try {
        // The AcquireFirst times out: fail open on the first dependency the cache does not refuse.
        assert.equal(await c.first([p, s], async (dep) => { called.push(dep); return dep; }, { chain: 'away-node' }), s);
        const awayBefore = c.stats().awayDecisions;
        // Now away: no RPC, the same decision.
        assert.equal(await c.first([p, s], async (dep) => { called.push(dep); return dep; }, { chain: 'away-node' }), s);
        assert.equal(c.stats().awayDecisions, awayBefore + 1);
        assert.deepEqual(called, [s, s]);
        assert.equal(c.stats().failOpen, 2);
        // Every candidate refused by the cache: a LOCAL refusal, as without a name.
        const err = await c.first([p], async () => {}, { chain: 'away-node' }).catch((e) => e);
        assert.ok(err instanceof BreakerOpenError, String(err));
        assert.equal(err.source, 'LOCAL');
      } finally {
        await bd.pause(false);
      }
    } finally {
      await c.close();
    }
  });
});

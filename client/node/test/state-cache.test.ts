// The Watch cache on its own: generations, modes, open_until. No breakerd needed.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { StateName } from '../src/index';
import { Tally } from '../src/local-batch';
import { StateCache, type CachedChange } from '../src/state-cache';

const DEP = 'cache/dep';
const NOW = 1000;

/** A StateChange for DEP; an open one has a 30 s cooldown. */
function change(generation: number, state: StateName, mode: string, localDecisions = false, reason = ''): CachedChange {
  return {
    dependency: DEP, state, mode, generation: String(generation), retryAfterMs: state === 'STATE_OPEN' ? 30_000 : 0,
    localDecisions, reason,
  };
}

describe('StateCache', () => {
  it('ignores an event with a lower generation than the one it holds', () => {
    const cache = new StateCache();
    cache.apply(change(6, 'STATE_CLOSED', 'enforce'), NOW);
    cache.apply(change(5, 'STATE_OPEN', 'enforce'), NOW);
    assert.equal(cache.refusal(DEP, NOW), undefined);
    assert.equal(cache.state(DEP), 'STATE_CLOSED');
  });

  it('applies an event with a higher generation', () => {
    const cache = new StateCache();
    cache.apply(change(5, 'STATE_OPEN', 'enforce'), NOW);
    assert.equal(cache.refusal(DEP, NOW)?.reason, 'REJECT_REASON_OPEN');
    cache.apply(change(6, 'STATE_CLOSED', 'enforce'), NOW);
    assert.equal(cache.refusal(DEP, NOW), undefined);
  });

  it('applies a reload with an equal generation: a switch to shadow stops refusing', () => {
    const cache = new StateCache();
    cache.apply(change(6, 'STATE_OPEN', 'enforce'), NOW);
    assert.ok(cache.refusal(DEP, NOW));
    cache.apply(change(6, 'STATE_OPEN', 'shadow'), NOW);
    assert.equal(cache.refusal(DEP, NOW), undefined);
    cache.apply(change(6, 'STATE_OPEN', 'enforce'), NOW);
    assert.ok(cache.refusal(DEP, NOW), 'a reload back to enforce refuses again');
  });

  it('compares generations as uint64, not as strings or doubles', () => {
    const cache = new StateCache();
    cache.apply({ ...change(0, 'STATE_CLOSED', 'enforce'), generation: '18446744073709551615' }, NOW);
    cache.apply({ ...change(0, 'STATE_OPEN', 'enforce'), generation: '18446744073709551614' }, NOW);
    assert.equal(cache.state(DEP), 'STATE_CLOSED');
    cache.apply({ ...change(0, 'STATE_OPEN', 'enforce'), generation: '10' }, NOW);
    cache.clear();
    cache.apply({ ...change(0, 'STATE_CLOSED', 'enforce'), generation: '10' }, NOW);
    cache.apply({ ...change(0, 'STATE_OPEN', 'enforce'), generation: '9' }, NOW);
    assert.equal(cache.state(DEP), 'STATE_CLOSED', '"9" > "10" as strings, not as numbers');
  });

  it('never refuses a shadow breaker, open or forced open', () => {
    const cache = new StateCache();
    for (const state of ['STATE_OPEN', 'STATE_FORCED_OPEN'] as const) {
      cache.apply(change(1, state, 'shadow'), NOW);
      assert.equal(cache.refusal(DEP, NOW), undefined, state);
    }
  });

  it('treats an empty mode (an older breakerd) as enforce, until open_until', () => {
    const cache = new StateCache();
    cache.apply(change(1, 'STATE_OPEN', ''), NOW);
    assert.deepEqual(cache.refusal(DEP, NOW), { state: 'STATE_OPEN', reason: 'REJECT_REASON_OPEN', retryAfterMs: 30_000 });
    assert.equal(cache.refusal(DEP, NOW + 30_000), undefined);
    cache.apply(change(2, 'STATE_FORCED_OPEN', ''), NOW);
    assert.equal(cache.refusal(DEP, NOW)?.reason, 'REJECT_REASON_FORCED_OPEN');
  });

  it('forgets generations when cleared (a restarted breakerd starts again from low ones)', () => {
    const cache = new StateCache();
    cache.apply(change(9, 'STATE_CLOSED', 'enforce'), NOW);
    cache.clear();
    assert.equal(cache.state(DEP), undefined);
    cache.apply(change(1, 'STATE_FORCED_OPEN', 'enforce'), NOW);
    assert.ok(cache.refusal(DEP, NOW));
  });

  describe('local decisions: the notices that are not transitions', () => {
    it('adds a dependency on created, grantable while CLOSED with local_decisions', () => {
      const cache = new StateCache();
      cache.apply(change(0, 'STATE_CLOSED', 'enforce', false, 'initial'), NOW);
      assert.equal(cache.entry(DEP)?.grantable, false, 'no breaker yet');
      cache.apply(change(3, 'STATE_CLOSED', 'enforce', true, 'created'), NOW);
      assert.equal(cache.entry(DEP)?.grantable, true);
      assert.equal(cache.entry(DEP)?.generation, 3n);
    });

    it('applies an equal-generation reload and ramp_done, keeping the books of the generation', () => {
      const cache = new StateCache();
      cache.apply(change(4, 'STATE_CLOSED', 'enforce', true, 'created'), NOW);
      const tally = new Tally(DEP, '4');
      cache.entry(DEP)!.tally = tally;
      cache.apply(change(4, 'STATE_CLOSED', 'enforce', false, 'reload'), NOW);
      assert.equal(cache.entry(DEP)?.grantable, false, 'a reload turned local decisions off');
      assert.equal(cache.entry(DEP)?.tally, tally);
      cache.apply(change(4, 'STATE_CLOSED', 'enforce', true, 'ramp_done'), NOW);
      assert.equal(cache.entry(DEP)?.grantable, true, 'the ramp ended');
      assert.equal(cache.entry(DEP)?.tally, tally);
      cache.apply(change(5, 'STATE_OPEN', 'enforce', false, 'consecutive_failures'), NOW);
      assert.equal(cache.entry(DEP)?.grantable, false);
      assert.equal(cache.entry(DEP)?.tally, undefined, 'a new generation starts new books');
    });

    it('never grants a shadow breaker, an open one or one whose event says no', () => {
      const cache = new StateCache();
      cache.apply(change(1, 'STATE_CLOSED', 'shadow', true, 'reload'), NOW);
      assert.equal(cache.entry(DEP)?.grantable, false, 'shadow');
      cache.apply(change(2, 'STATE_OPEN', 'enforce', true, 'consecutive_failures'), NOW);
      assert.equal(cache.entry(DEP)?.grantable, false, 'open');
      cache.apply(change(3, 'STATE_FORCED_CLOSED', 'enforce', true, 'forced_closed'), NOW);
      assert.equal(cache.entry(DEP)?.grantable, false, 'forced closed');
      cache.apply(change(4, 'STATE_CLOSED', 'enforce', false, 'probe_succeeded'), NOW);
      assert.equal(cache.entry(DEP)?.grantable, false, 'ramping (local_decisions false)');
    });

    it('forgets a dependency on evicted, unless the notice is older than what it holds', () => {
      const cache = new StateCache();
      cache.apply(change(7, 'STATE_CLOSED', 'enforce', true, 'created'), NOW);
      cache.apply(change(6, 'STATE_CLOSED', 'enforce', false, 'evicted'), NOW);
      assert.equal(cache.entry(DEP)?.grantable, true, 'an older eviction is ignored');
      cache.apply(change(7, 'STATE_CLOSED', 'enforce', false, 'evicted'), NOW);
      assert.equal(cache.entry(DEP), undefined);
      assert.equal(cache.state(DEP), undefined);
      cache.apply(change(8, 'STATE_CLOSED', 'enforce', true, 'created'), NOW);
      assert.equal(cache.entry(DEP)?.grantable, true, 're-created above the evicted generation');
    });
  });
});

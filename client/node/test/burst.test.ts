// A burst of concurrent guards against a healthy breakerd: no decision fails
// open, and every permit breakerd grants comes back in a report.
import assert from 'node:assert/strict';
import { performance } from 'node:perf_hooks';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { after, before, describe, it } from 'node:test';
import { BreakerdClient, Outcome } from '../src/index';
import { Breakerd, waitFor } from './helpers';

describe('burst of concurrent guards', () => {
  let bd: Breakerd;
  let client: BreakerdClient;

  before(async () => {
    bd = await Breakerd.start();
    // The defaults, as an application runs them: 20 ms decision timeout, Watch on.
    client = new BreakerdClient({ target: bd.grpcAddr, logger: null });
    await client.ready();
    // Steady state: the Watch worker has started (it loads gRPC on the other core).
    await waitFor('the watch stream', () => client.watching);
  });
  after(async () => {
    await client.close();
    await bd.dispose();
  });

  /** Waits until breakerd itself decides again (a burst that failed open leaves the client away). */
  async function sidecarDecides(): Promise<void> {
    await waitFor('a decision from breakerd', async () => {
      const d = await client.acquire('burst/warm');
      await client.report('burst/warm', d.permit, Outcome.SUCCESS);
      return d.source === 'SIDECAR';
    });
  }

  for (const n of [200, 500, 1000]) {
    it(`decides ${n} concurrent guards with breakerd, and every permit is reported`, async (t) => {
      const dep = `burst/n${n}`;
      await sidecarDecides();
      const failOpenBefore = client.stats().failOpen;
      const started = performance.now();
      const results = await Promise.allSettled(
        Array.from({ length: n }, (_, i) =>
          client.guard(dep, async () => {
            await nextTurn(); // the upstream answers on the next turn of the event loop
            return i;
          }),
        ),
      );
      const elapsedMs = performance.now() - started;
      const failOpen = client.stats().failOpen - failOpenBefore;
      t.diagnostic(`${n} guards: ${failOpen} failed open (${((100 * failOpen) / n).toFixed(1)} %) in ${elapsedMs.toFixed(0)} ms`);

      assert.deepEqual(results.filter((r) => r.status === 'rejected'), [], 'every guarded call ran');
      assert.equal(failOpen, 0, `${failOpen} of ${n} decisions failed open`);
      // breakerd's own books: every permit it granted came back in a report.
      const allowed = await bd.metric('breakerd_acquire_total', { dependency: dep, decision: 'allowed' });
      assert.equal(allowed, n);
      const reported = await waitFor(
        'every granted permit to be reported',
        async () => {
          const r = await bd.metric('breakerd_reports_total', { dependency: dep });
          return r === allowed ? r : undefined;
        },
        3000,
      ).catch(async () => bd.metric('breakerd_reports_total', { dependency: dep }));
      assert.equal(reported, allowed, `breakerd granted ${allowed} permits and got ${reported} reports`);
    });
  }
});

// Reports made while breakerd is away are held, not dropped, and sent once it
// is back (client/README.md, "Sidecar away"): a probe permit reported while
// away closes its breaker when breakerd answers again, and the client holds
// at most MAX_HELD_REPORTS (the oldest dropped past that, counted).
import assert from 'node:assert/strict';
import { performance } from 'node:perf_hooks';
import { after, before, describe, it } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import { MAX_HELD_REPORTS } from '../src/client';
import type { BreakerHandlers } from '../src/generated/breakerd/v1/Breaker';
import { BreakerOpenError, BreakerdClient, Outcome } from '../src/index';
import { breakerdV1, healthV1 } from '../src/proto';
import { Breakerd, waitFor } from './helpers';

describe('reports held while breakerd is away (real breakerd)', () => {
  let bd: Breakerd;
  let client: BreakerdClient;

  before(async () => {
    bd = await Breakerd.start();
    // The defaults: 20 ms decisions, Watch on.
    client = new BreakerdClient({ target: bd.grpcAddr, logger: null });
    await client.ready();
  });
  after(async () => {
    await client.close();
    await bd.dispose(); // SIGCONT first
  });

  // conformance: report-while-away
  it("sends a probe's report made while away once breakerd is back: the breaker closes within 2 s of SIGCONT", async () => {
    const dep = 'short/held-probe'; // opens after 3 failures, cools down in 1 s
    const other = 'short/held-other'; // its Acquire marks breakerd away
    for (let i = 0; i < 3; i++) {
      const d = await client.acquire(dep);
      assert.equal(d.source, 'SIDECAR');
      await client.report(dep, d.permit, Outcome.SERVER_ERROR);
    }
    assert.equal((await bd.getState(dep)).state, 'STATE_OPEN');
    const errorsBefore = client.stats().reportErrors;

    // The first guard allowed after the 1 s cooldown holds the probe permit.
    let resumed = 0;
    let probeState = '';
    let whileAway = { source: '', awayDecisions: 0 };
    const body = async (): Promise<string> => {
      probeState = (await bd.getState(dep)).state;
      await bd.pause(true);
      try {
        // No answer within 20 ms of writing it, nothing else answered: away.
        await client.acquire(other);
        const was = client.stats().awayDecisions;
        const d = await client.acquire(other);
        whileAway = { source: d.source, awayDecisions: client.stats().awayDecisions - was };
      } finally {
        await bd.pause(false);
        resumed = performance.now();
      }
      // Returning now, the guard reports before any away probe can run: the Report is made while away.
      return 'ok';
    };
    await waitFor('the probe permit', async () => {
      try {
        return (await client.guard(dep, body)) === 'ok';
      } catch (err) {
        if (err instanceof BreakerOpenError) return false;
        throw err;
      }
    }, 5000);
    assert.equal(probeState, 'STATE_HALF_OPEN', 'the guarded call held the probe permit');
    assert.deepEqual(whileAway, { source: 'FAIL_OPEN', awayDecisions: 1 }, 'breakerd was marked away during the call');

    await waitFor('the breaker to close', async () => (await bd.getState(dep)).state === 'STATE_CLOSED', 2000);
    const closedMs = performance.now() - resumed;
    assert.ok(closedMs < 2000, `CLOSED ${Math.round(closedMs)} ms after SIGCONT`);
    // breakerd counted the probe's report (after the three failures).
    const reports = await bd.reportsOf(dep);
    assert.equal(reports.filter((r) => r.startsWith('server_error/')).join(), 'server_error/counted_failure 3');
    assert.deepEqual(reports.filter((r) => !r.startsWith('server_error/')).map((r) => r.split(' ')[0]!.split('/')[0] + ' ' + r.split(' ')[1]), ['success 1']);
    // No other caller is refused PROBE_IN_FLIGHT.
    const next = await client.acquire(dep);
    assert.equal(next.source, 'SIDECAR');
    assert.equal(next.allowed, true, `refused: ${next.reason}`);
    await client.report(dep, next.permit, Outcome.SUCCESS);
    assert.equal(client.stats().reportErrors, errorsBefore, 'a held report is not an error');
  });
});

/**
 * A stand-in breakerd on a real loopback socket: Acquire fails UNAVAILABLE
 * (the client marks it away), Health/Check answers NOT_SERVING until
 * serving = true, and every Report's permit is recorded.
 */
class StandIn {
  readonly permits: string[] = [];
  serving = false;

  private constructor(
    private readonly server: grpc.Server,
    readonly target: string,
  ) {}

  static async start(): Promise<StandIn> {
    const server = new grpc.Server();
    const port = await new Promise<number>((resolve, reject) =>
      server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))),
    );
    const standIn = new StandIn(server, `127.0.0.1:${port}`);
    const breaker: Pick<BreakerHandlers, 'Acquire' | 'Report' | 'GetState'> = {
      Acquire: (_call, callback) => callback({ code: grpc.status.UNAVAILABLE, details: 'stand-in: away' }),
      Report: (call, callback) => {
        standIn.permits.push(call.request.permit);
        callback(null, { state: 'STATE_CLOSED', effect: 'EFFECT_COUNTED_SUCCESS' });
      },
      GetState: (_call, callback) => callback({ code: grpc.status.NOT_FOUND, details: 'no breaker' }),
    };
    const health: grpc.UntypedServiceImplementation = {
      Check: (_call: grpc.ServerUnaryCall<unknown, unknown>, callback: grpc.sendUnaryData<unknown>) =>
        callback(null, { status: standIn.serving ? 'SERVING' : 'NOT_SERVING' }),
    };
    server.addService(breakerdV1().Breaker.service, breaker);
    server.addService(healthV1().Health.service, health);
    return standIn;
  }

  close(): void {
    this.server.forceShutdown();
  }
}

describe('reports held while away: the bound (a stand-in breakerd)', () => {
  let standIn: StandIn;

  before(async () => {
    standIn = await StandIn.start();
  });
  after(() => standIn.close());

  /** A client of the stand-in, marked away by one Acquire. */
  async function awayClient(maxHeldReports?: number): Promise<BreakerdClient> {
    const client = new BreakerdClient({ target: standIn.target, decisionTimeoutMs: 500, watch: false, logger: null, maxHeldReports });
    await client.ready();
    assert.equal((await client.acquire('held/dep')).source, 'FAIL_OPEN');
    const was = client.stats().awayDecisions;
    await client.acquire('held/dep');
    assert.equal(client.stats().awayDecisions, was + 1, 'marked away');
    return client;
  }

  it(`holds at most ${MAX_HELD_REPORTS} reports: past that the oldest is dropped, counted (the rest, at close())`, async () => {
    standIn.serving = false;
    standIn.permits.length = 0;
    const client = await awayClient();
    for (let i = 1; i <= MAX_HELD_REPORTS + 1; i++) {
      assert.equal(await client.report('held/dep', String(i), Outcome.SUCCESS), undefined);
    }
    assert.equal(client.stats().reportErrors, 1, 'only the one dropped is an error');
    await client.close();
    assert.equal(client.stats().reportErrors, 1 + MAX_HELD_REPORTS, `${MAX_HELD_REPORTS} were held`);
    assert.deepEqual(standIn.permits, [], 'nothing sent while away');
  });

  it('drops the oldest held report past the bound and sends the rest, in order, when breakerd is back', async () => {
    standIn.serving = false;
    standIn.permits.length = 0;
    const client = await awayClient(4);
    try {
      for (let i = 1; i <= 5; i++) assert.equal(await client.report('held/dep', String(i), Outcome.SUCCESS), undefined);
      assert.equal(client.stats().reportErrors, 1);
      assert.deepEqual(standIn.permits, [], 'nothing sent while away');
      standIn.serving = true; // the next away probe finds it back
      await waitFor('the held reports', () => standIn.permits.length === 4, 5000);
      assert.deepEqual(standIn.permits, ['2', '3', '4', '5'], 'the oldest was dropped');
      assert.equal(client.stats().reportErrors, 1);
    } finally {
      await client.close();
    }
  });
});

// A late answer is not an absent sidecar: an Acquire that times out while
// breakerd answers this client's other RPCs (a burst on a loaded machine)
// fails open alone and leaves the client present; one that times out with
// nothing answered after it was written marks breakerd away. breakerd cannot
// be made slow for one call, so a stand-in Breaker service on a real
// loopback socket holds back the answers for one dependency and answers the
// rest at once.
import assert from 'node:assert/strict';
import { performance } from 'node:perf_hooks';
import { after, before, describe, it } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import type { AcquireResponse } from '../src/generated/breakerd/v1/AcquireResponse';
import type { BreakerHandlers } from '../src/generated/breakerd/v1/Breaker';
import { BreakerdClient, Outcome, type Decision, type Logger } from '../src/index';
import { breakerdV1 } from '../src/proto';
import { waitFor } from './helpers';

/** The stand-in holds back the answer for this dependency (Acquire, or AcquireFirst naming it first). */
const HELD = 'late/held';
/** The stand-in refuses this one (a refusal is an answer too). */
const REFUSED = 'late/refused';
const DECISION_TIMEOUT_MS = 300;

/** A Breaker service that grants every Acquire (refuses REFUSED) at once, except HELD's, held until release(). */
class StandInBreaker {
  /** What it received, in order: `Acquire dep`, `AcquireFirst a,b`, `Report dep outcome`. */
  readonly received: string[] = [];
  private readonly heldAnswers: (() => void)[] = [];
  private nextPermit = 1;

  private constructor(
    private readonly server: grpc.Server,
    readonly target: string,
  ) {}

  static async start(): Promise<StandInBreaker> {
    const server = new grpc.Server();
    const port = await new Promise<number>((resolve, reject) =>
      server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))),
    );
    const standIn = new StandInBreaker(server, `127.0.0.1:${port}`);
    server.addService(breakerdV1().Breaker.service, standIn.handlers());
    return standIn;
  }

  /** Requests received and not answered yet. */
  get held(): number {
    return this.heldAnswers.length;
  }

  /** Answers every held request now. */
  release(): void {
    for (const answer of this.heldAnswers.splice(0)) answer();
  }

  close(): void {
    this.release();
    this.server.forceShutdown();
  }

  private decide(dependency: string): AcquireResponse {
    if (dependency === REFUSED) {
      return { allowed: false, permit: '0', state: 'STATE_OPEN', reason: 'REJECT_REASON_OPEN', retry_after: { seconds: 30 } };
    }
    return { allowed: true, permit: String(this.nextPermit++), state: 'STATE_CLOSED' };
  }

  private handlers(): Pick<BreakerHandlers, 'Acquire' | 'AcquireFirst' | 'Report' | 'GetState'> {
    return {
      Acquire: (call, callback) => {
        const { dependency } = call.request;
        this.received.push(`Acquire ${dependency}`);
        const answer = (): void => callback(null, this.decide(dependency));
        if (dependency === HELD) this.heldAnswers.push(answer);
        else answer();
      },
      AcquireFirst: (call, callback) => {
        const { dependencies } = call.request;
        this.received.push(`AcquireFirst ${dependencies.join(',')}`);
        const answer = (): void => callback(null, { ...this.decide(dependencies[0]!), dependency: dependencies[0]! });
        if (dependencies[0] === HELD) this.heldAnswers.push(answer);
        else answer();
      },
      Report: (call, callback) => {
        this.received.push(`Report ${call.request.dependency} ${call.request.outcome}`);
        callback(null, { state: 'STATE_CLOSED', effect: 'EFFECT_COUNTED_SUCCESS' });
      },
      GetState: (_call, callback) => callback({ code: grpc.status.NOT_FOUND, details: 'no breaker' }),
    };
  }
}

describe('late, not away (a stand-in breakerd holding one answer back)', () => {
  let standIn: StandInBreaker;

  before(async () => {
    standIn = await StandInBreaker.start();
  });
  after(() => standIn.close());

  /** A client of the stand-in (which has no Watch), and its log lines. */
  async function clientWithLog(): Promise<{ client: BreakerdClient; logs: string[] }> {
    const logs: string[] = [];
    const logger: Logger = { warn: (m) => logs.push(`warn ${m}`), info: (m) => logs.push(`info ${m}`) };
    const client = new BreakerdClient({ target: standIn.target, decisionTimeoutMs: DECISION_TIMEOUT_MS, watch: false, logger });
    await client.ready();
    return { client, logs };
  }

  /**
   * Starts the decision whose answer the stand-in holds back, and returns
   * once the stand-in has it (it was written); `settled` is the decision.
   */
  async function sendHeld(
    client: BreakerdClient,
    kind: 'Acquire' | 'AcquireFirst',
  ): Promise<{ settled: Promise<{ decision: Decision; ms: number }> }> {
    const started = performance.now();
    const settled = (kind === 'Acquire' ? client.acquire(HELD) : client.acquireFirst([HELD, 'late/fallback'])).then(
      (decision) => ({ decision, ms: performance.now() - started }),
    );
    await waitFor('the stand-in to receive the held request', () => standIn.held === 1);
    return { settled };
  }

  // What breakerd answers while the held one waits: any answer shows it is there.
  const others: { name: string; late: 'Acquire' | 'AcquireFirst'; other: (c: BreakerdClient) => Promise<unknown> }[] = [
    {
      name: 'an Acquire answered late while breakerd grants another',
      late: 'Acquire',
      other: async (c) => assert.equal((await c.acquire('late/other')).source, 'SIDECAR'),
    },
    {
      name: 'an Acquire answered late while breakerd refuses another',
      late: 'Acquire',
      other: async (c) => {
        const d = await c.acquire(REFUSED);
        assert.deepEqual([d.source, d.allowed], ['SIDECAR', false]);
      },
    },
    {
      name: 'an AcquireFirst answered late while breakerd answers a Report',
      late: 'AcquireFirst',
      other: async (c) => assert.notEqual(await c.report('late/other', '4242', Outcome.SUCCESS), undefined),
    },
  ];

  // conformance: late-not-away
  for (const { name, late, other } of others) {
    it(`${name} fails open alone; the next decision comes from breakerd`, async () => {
      const { client, logs } = await clientWithLog();
      try {
        const { settled } = await sendHeld(client, late);
        await other(client); // answered after the held request was written

        const { decision, ms } = await settled;
        assert.equal(decision.source, 'FAIL_OPEN');
        assert.equal(decision.allowed, true);
        assert.ok(ms >= DECISION_TIMEOUT_MS - 1, `the late decision failed open after ${Math.round(ms)} ms`);

        // Sent after the timeout, and decided by breakerd: the client is not away.
        const next = await client.acquire('late/after');
        assert.equal(next.source, 'SIDECAR');
        assert.equal(standIn.received.filter((r) => r === 'Acquire late/after').length, 1);
        const stats = client.stats();
        assert.equal(stats.failOpen, 1, 'that one decision alone failed open');
        assert.equal(stats.awayDecisions, 0);
        assert.equal(logs.filter((l) => l.includes('unreachable')).length, 0, logs.join(' | '));
        assert.equal(logs.filter((l) => l.includes('late with a decision')).length, 1, logs.join(' | '));

        // The permit granted late goes back, reported OUTCOME_CANCELLED (the call was never made).
        standIn.release();
        await waitFor('the late permit to be reported', () =>
          standIn.received.includes(`Report ${HELD} OUTCOME_CANCELLED`),
        );
      } finally {
        standIn.release();
        await client.close();
        standIn.received.length = 0;
      }
    });
  }

  it('an Acquire that times out with nothing answered after it was written marks breakerd away', async () => {
    const { client, logs } = await clientWithLog();
    try {
      // Answered before the held request was written: that does not count.
      assert.equal((await client.acquire('late/before')).source, 'SIDECAR');
      const { decision } = await (await sendHeld(client, 'Acquire')).settled;
      assert.equal(decision.source, 'FAIL_OPEN');

      const next = await client.acquire('late/after');
      assert.equal(next.source, 'FAIL_OPEN');
      assert.equal(client.stats().awayDecisions, 1, 'decided with no RPC: breakerd is away');
      assert.ok(!standIn.received.includes('Acquire late/after'), 'the stand-in was not asked');
      assert.equal(logs.filter((l) => l.includes('unreachable')).length, 1, logs.join(' | '));
    } finally {
      standIn.release();
      await client.close();
      standIn.received.length = 0;
    }
  });
});

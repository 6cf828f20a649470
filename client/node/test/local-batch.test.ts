// The books of local decisions on their own (LocalBatcher): what a request
// carries, the flush timer, the bound and dropped outcomes, resends, away.
// Time is a FakeTime; breakerd is a function whose answers the test gives.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { ReportBatchRequest__Output as ReportBatchRequest } from '../src/generated/breakerd/v1/ReportBatchRequest';
import { LocalBatcher, MAX_BATCH_OUTCOMES, MAX_SENDS, Tally } from '../src/local-batch';
import { Outcome } from '../src/index';
import { breakerdV1 } from '../src/proto';
import { FakeTime } from './helpers';

const INTERVAL = 5;

/** A request on the wire (as sent, and decoded by the proto's own decoder), answered by the test. */
interface Sent {
  bytes: Buffer;
  request: ReportBatchRequest;
  answer(ok: boolean): Promise<void>;
}

/** A batcher on fake time whose requests wait for the test's answer. */
function fixture(maxUnacked?: number) {
  const time = new FakeTime();
  const sent: Sent[] = [];
  const soon: (() => void)[] = [];
  const batcher = new LocalBatcher({
    clientId: 'node-1-0badcafe',
    flushIntervalMs: INTERVAL,
    timeoutMs: 200,
    maxUnacked,
    schedule: time.schedule,
    soon: (task) => soon.push(task),
    send: (bytes) =>
      new Promise((resolve, reject) => {
        sent.push({
          bytes,
          request: breakerdV1().Breaker.service.ReportBatch.requestDeserialize(bytes),
          answer: async (ok) => {
            if (ok) resolve({});
            else reject(new Error('UNAVAILABLE'));
            await settled();
          },
        });
      }),
  });
  /** Moves the fake clock by one flush interval. */
  const tick = (): void => time.advanceTo(time.now + INTERVAL);
  return { time, sent, soon, batcher, tick };
}

/** Lets promise callbacks run. */
function settled(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

/** Outcome classes and grants per dependency@generation of a request, e.g. `{ 'a@3': '2: OUTCOME_SUCCESS x1' }`. */
function summary(request: ReportBatchRequest): Record<string, string> {
  const out: Record<string, string> = {};
  for (const d of request.dependencies ?? []) {
    const classes = new Map<string, number>();
    for (const o of d.outcomes ?? []) classes.set(String(o.outcome), (classes.get(String(o.outcome)) ?? 0) + 1);
    out[`${d.dependency}@${d.generation}`] = `${d.grants}: ${[...classes].map(([c, n]) => `${c} x${n}`).join(', ')}`;
  }
  return out;
}

describe('LocalBatcher', () => {
  it('sends grants and outcomes per dependency and generation each interval, and no timer runs with nothing to send', async () => {
    const { time, sent, batcher, tick } = fixture();
    assert.equal(time.pending, 0, 'nothing to send: no timer');
    const a3 = new Tally('a', '3');
    const a4 = new Tally('a', '4');
    const b1 = new Tally('b', '1');
    batcher.grant(a3);
    batcher.grant(a3);
    batcher.grant(b1);
    assert.equal(time.pending, 1, 'one timer for everything');
    batcher.outcome(a3, Outcome.SUCCESS, 1.5, undefined);
    batcher.outcome(a3, Outcome.fromHttpStatus(503, '7'), 2, undefined);
    batcher.grant(a4); // the breaker moved on: a new generation, its own books
    batcher.outcome(a4, Outcome.fromGrpcStatus(14), NaN, { chain: 'llm', tier: 2 });
    assert.equal(sent.length, 0, 'nothing sent before the interval');
    tick();
    assert.equal(sent.length, 1);
    const r = sent[0]!.request;
    assert.equal(r.client_id, 'node-1-0badcafe');
    assert.equal(r.sequence, '1');
    assert.deepEqual(summary(r), {
      'a@3': '2: OUTCOME_SUCCESS x1, OUTCOME_UNSPECIFIED x1',
      'b@1': '1: ',
      'a@4': '1: OUTCOME_UNSPECIFIED x1',
    });
    const [ok, status] = r.dependencies![0]!.outcomes!;
    assert.deepEqual(ok!.latency, { seconds: '0', nanos: 1_500_000 });
    assert.equal(ok!.grpc_code, undefined);
    assert.equal(status!.http_status, 503);
    assert.deepEqual(status!.retry_after, { seconds: '7', nanos: 0 });
    const grpcOutcome = r.dependencies![2]!.outcomes![0]!;
    assert.equal(grpcOutcome.grpc_code, 14);
    assert.equal(grpcOutcome.latency, null);
    assert.equal(grpcOutcome.chain, 'llm');
    assert.equal(grpcOutcome.tier, 2);

    // One request in flight at a time: what comes meanwhile waits for its answer.
    batcher.grant(b1);
    tick();
    assert.equal(sent.length, 1);
    await sent[0]!.answer(true);
    tick();
    assert.equal(sent.length, 2);
    assert.equal(sent[1]!.request.sequence, '2');
    assert.deepEqual(summary(sent[1]!.request), { 'b@1': '1: ' });
    await sent[1]!.answer(true);
    assert.equal(time.pending, 0, 'all sent: the timer stops');
    assert.equal(batcher.dropped, 0);
  });

  it('holds at most maxUnacked outcomes not acknowledged: past that they are dropped and counted', async () => {
    const { sent, batcher, tick } = fixture(5);
    const t = new Tally('a', '1');
    for (let i = 0; i < 8; i++) {
      batcher.grant(t);
      batcher.outcome(t, Outcome.SUCCESS, 1, undefined);
    }
    assert.equal(batcher.dropped, 3);
    tick();
    assert.equal(sent[0]!.request.dependencies![0]!.outcomes!.length, 5);
    assert.equal(sent[0]!.request.dependencies![0]!.grants, 8, 'every grant is sent');
    // Sent but not acknowledged: still held.
    batcher.outcome(t, Outcome.SUCCESS, 1, undefined);
    assert.equal(batcher.dropped, 4);
    await sent[0]!.answer(true);
    batcher.outcome(t, Outcome.SUCCESS, 1, undefined);
    assert.equal(batcher.dropped, 4, 'room again once acknowledged');
  });

  it(`sends a failed request again unchanged at the next flush, ${MAX_SENDS} sends in all, then drops it, counting its outcomes`, async () => {
    const { time, sent, batcher, tick } = fixture();
    const t = new Tally('a', '1');
    batcher.grant(t);
    batcher.grant(t);
    batcher.outcome(t, Outcome.SERVER_ERROR, 1, undefined);
    batcher.outcome(t, Outcome.SUCCESS, 1, undefined);
    tick();
    await sent[0]!.answer(false);
    batcher.grant(t); // new work waits behind the failed request
    tick();
    assert.equal(sent.length, 2);
    assert.equal(sent[1]!.bytes, sent[0]!.bytes, 'the same request: same sequence, same content');
    await sent[1]!.answer(false);
    tick();
    assert.equal(sent[2]!.bytes, sent[0]!.bytes);
    assert.equal(batcher.dropped, 0);
    await sent[2]!.answer(false);
    assert.equal(batcher.dropped, 2, 'dropped after three sends, its outcomes counted');
    tick();
    assert.equal(sent.length, 4);
    assert.equal(sent[3]!.request.sequence, '2', 'the next request has the next sequence');
    assert.deepEqual(summary(sent[3]!.request), { 'a@1': '1: ' });
    await sent[3]!.answer(true);
    assert.equal(time.pending, 0);
  });

  it(`sends at once (off the caller's call) when ${MAX_BATCH_OUTCOMES} outcomes wait, split into requests of at most that many`, async () => {
    const { sent, soon, batcher, tick } = fixture();
    const a = new Tally('a', '1');
    const b = new Tally('b', '1');
    for (let i = 0; i < 2500; i++) {
      const t = i % 2 ? b : a;
      batcher.grant(t);
      batcher.outcome(t, Outcome.SUCCESS, 1, undefined);
    }
    assert.equal(sent.length, 0, 'never sent within the caller’s call');
    assert.equal(soon.length, 1);
    soon.shift()!();
    assert.equal(sent.length, 1);
    const count = (r: ReportBatchRequest): number => r.dependencies.reduce((n, d) => n + d.outcomes.length, 0);
    assert.equal(count(sent[0]!.request), MAX_BATCH_OUTCOMES);
    assert.equal(sent[0]!.request.dependencies!.reduce((n, d) => n + d.grants!, 0), 2500, 'all grants in the first');
    await sent[0]!.answer(true); // 1,500 still wait: the next goes at once
    assert.equal(sent.length, 2);
    assert.equal(count(sent[1]!.request), MAX_BATCH_OUTCOMES);
    await sent[1]!.answer(true); // 500 left: the next interval
    assert.equal(sent.length, 2);
    tick();
    assert.equal(count(sent[2]!.request), 500);
    assert.deepEqual(sent.map((s) => s.request.sequence), ['1', '2', '3']);
    await sent[2]!.answer(true);
    assert.equal(batcher.dropped, 0);
  });

  it('keeps the decisions made while breakerd is away and sends them in the first request after it answers', async () => {
    const { time, sent, batcher, tick } = fixture();
    const t = new Tally('a', '1');
    batcher.grant(t);
    batcher.pause();
    batcher.outcome(t, Outcome.SUCCESS, 1, undefined); // away: dropped
    assert.equal(batcher.dropped, 1);
    batcher.failed('a', true);
    batcher.failed('a', true);
    batcher.failed('b', false);
    batcher.refusedLocal('c');
    assert.equal(time.pending, 0, 'nothing is sent while away');
    tick();
    assert.equal(sent.length, 0);
    batcher.resume();
    tick();
    assert.equal(sent.length, 1);
    assert.deepEqual(sent[0]!.request.decisions, [
      { dependency: 'a', refused_local: 0, fail_open: 2, fail_closed: 0 },
      { dependency: 'b', refused_local: 0, fail_open: 0, fail_closed: 1 },
      { dependency: 'c', refused_local: 1, fail_open: 0, fail_closed: 0 },
    ]);
    assert.deepEqual(summary(sent[0]!.request), { 'a@1': '1: ' });
    await sent[0]!.answer(true);
  });

  it('counts chain grants by chain and tier', async () => {
    const { sent, batcher, tick } = fixture();
    batcher.chainGrant('llm', 0);
    batcher.chainGrant('llm', 0);
    batcher.chainGrant('llm', 1);
    tick();
    assert.deepEqual(sent[0]!.request.chains, [
      { chain: 'llm', none: false, tier: 0, count: 2 },
      { chain: 'llm', none: false, tier: 1, count: 1 },
    ]);
    await sent[0]!.answer(true);
  });

  it('close() sends what is left within its budget, then counts what was not acknowledged', async () => {
    const { time, sent, batcher } = fixture();
    const t = new Tally('a', '1');
    for (let i = 0; i < 3; i++) {
      batcher.grant(t);
      batcher.outcome(t, Outcome.SUCCESS, 1, undefined);
    }
    const closing = batcher.close(20);
    assert.equal(sent.length, 1, 'sent at once');
    await sent[0]!.answer(true);
    await closing;
    assert.equal(batcher.dropped, 0);
    batcher.outcome(t, Outcome.SUCCESS, 1, undefined);
    assert.equal(batcher.dropped, 1, 'after close: dropped');

    const second = fixture();
    const u = new Tally('a', '1');
    second.batcher.grant(u);
    second.batcher.outcome(u, Outcome.SUCCESS, 1, undefined);
    second.batcher.outcome(u, Outcome.SUCCESS, 1, undefined);
    const unanswered = second.batcher.close(20);
    assert.equal(second.sent.length, 1);
    second.time.advanceTo(second.time.now + 20); // breakerd never answers
    await unanswered;
    assert.equal(second.batcher.dropped, 2);
    await second.sent[0]!.answer(true); // a late answer changes nothing
    assert.equal(second.batcher.dropped, 2);
  });
});

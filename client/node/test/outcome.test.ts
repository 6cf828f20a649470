// Outcome helpers: pure mappings, no breakerd needed.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import { Outcome } from '../src/index';

const withCode = (code: string) => Object.assign(new Error(code), { code });

describe('Outcome', () => {
  it('fromHttpStatus sends the status and the seconds form of Retry-After', () => {
    assert.deepEqual(Outcome.fromHttpStatus(503), { httpStatus: 503 });
    assert.deepEqual(Outcome.fromHttpStatus(429, '7'), { httpStatus: 429, retryAfterMs: 7000 });
    assert.deepEqual(Outcome.fromHttpStatus(429, 3), { httpStatus: 429, retryAfterMs: 3000 });
    assert.deepEqual(Outcome.fromHttpStatus(503, 'Wed, 21 Oct 2015 07:28:00 GMT'), { httpStatus: 503 });
    assert.deepEqual(Outcome.fromHttpStatus(200, null), { httpStatus: 200 });
    assert.throws(() => Outcome.fromHttpStatus(99), RangeError);
    assert.throws(() => Outcome.fromHttpStatus(600), RangeError);
  });

  it('fromGrpcStatus sends the code', () => {
    assert.deepEqual(Outcome.fromGrpcStatus(grpc.status.UNAVAILABLE), { grpcCode: 14 });
    assert.deepEqual(Outcome.fromGrpcStatus(0), { grpcCode: 0 });
    assert.throws(() => Outcome.fromGrpcStatus(17), RangeError);
  });

  it('fromError maps timeouts, cancellations, connection errors, gRPC and HTTP errors', () => {
    const timedOut = new DOMException('timed out', 'TimeoutError');
    const cases: [unknown, object][] = [
      // controller.abort(): the caller gave up, neutral for the breaker
      [new DOMException('aborted', 'AbortError'), Outcome.CANCELLED],
      [Object.assign(new Error('aborted'), { name: 'AbortError', code: 'ABORT_ERR' }), Outcome.CANCELLED],
      [Object.assign(new Error('canceled'), { name: 'CanceledError', code: 'ERR_CANCELED' }), Outcome.CANCELLED],
      // AbortSignal.timeout(): the call ran out of time
      [timedOut, Outcome.TIMEOUT],
      [Object.assign(new Error('aborted'), { name: 'AbortError', code: 'ABORT_ERR', cause: timedOut }), Outcome.TIMEOUT],
      [withCode('ETIMEDOUT'), Outcome.TIMEOUT],
      [withCode('UND_ERR_HEADERS_TIMEOUT'), Outcome.TIMEOUT],
      [withCode('ECONNREFUSED'), Outcome.CONNECTION_ERROR],
      [withCode('ECONNRESET'), Outcome.CONNECTION_ERROR],
      [withCode('ENOTFOUND'), Outcome.CONNECTION_ERROR],
      [new TypeError('fetch failed', { cause: withCode('ECONNREFUSED') }), Outcome.CONNECTION_ERROR],
      [new AggregateError([withCode('ECONNREFUSED')], 'connect'), Outcome.CONNECTION_ERROR],
      [{ code: grpc.status.DEADLINE_EXCEEDED, details: 'late', metadata: new grpc.Metadata() }, { grpcCode: 4 }],
      [Object.assign(new Error('x'), { status: 502 }), { httpStatus: 502 }],
      [Object.assign(new Error('x'), { statusCode: 404 }), { httpStatus: 404 }],
      [Object.assign(new Error('x'), { response: { status: 429 } }), { httpStatus: 429 }],
      [new Error('boom'), Outcome.SERVER_ERROR],
      ['a string', Outcome.SERVER_ERROR],
      [undefined, Outcome.SERVER_ERROR],
    ];
    for (const [err, want] of cases) assert.deepEqual(Outcome.fromError(err), want, String(err));
  });

  it('classOf mirrors breakerd and isRetryable follows it', () => {
    const cases: [object, string, boolean][] = [
      [Outcome.fromHttpStatus(200), 'OUTCOME_SUCCESS', false],
      [Outcome.fromHttpStatus(304), 'OUTCOME_SUCCESS', false],
      [Outcome.fromHttpStatus(404), 'OUTCOME_BAD_REQUEST', false],
      [Outcome.fromHttpStatus(401), 'OUTCOME_AUTH_ERROR', false],
      [Outcome.fromHttpStatus(408), 'OUTCOME_TIMEOUT', true],
      [Outcome.fromHttpStatus(429), 'OUTCOME_RATE_LIMITED', true],
      [Outcome.fromHttpStatus(529), 'OUTCOME_SERVER_ERROR', true],
      [Outcome.fromGrpcStatus(grpc.status.UNAVAILABLE), 'OUTCOME_CONNECTION_ERROR', true],
      [Outcome.fromGrpcStatus(grpc.status.CANCELLED), 'OUTCOME_CANCELLED', false],
      [Outcome.fromGrpcStatus(grpc.status.NOT_FOUND), 'OUTCOME_BAD_REQUEST', false],
      [Outcome.fromGrpcStatus(grpc.status.DATA_LOSS), 'OUTCOME_SERVER_ERROR', true],
      [Outcome.SOFT_FAILURE, 'OUTCOME_SOFT_FAILURE', false],
      [{}, 'OUTCOME_UNSPECIFIED', false],
    ];
    for (const [report, cls, retryable] of cases) {
      assert.equal(Outcome.classOf(report), cls, JSON.stringify(report));
      assert.equal(Outcome.isRetryable(report), retryable, JSON.stringify(report));
    }
  });
});

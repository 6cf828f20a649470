// The hand-written ReportBatchRequest encoder against the proto's own
// (protobufjs through proto-loader, the path every other RPC takes): the
// same message decoded, for every field and edge. (The bytes may differ:
// protobufjs also writes a zero it was given; this encoder leaves zeros out,
// as proto3 does.)
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { encodeReportBatch, type BatchRequest } from '../src/batch-encoding';
import type { ReportBatchRequest } from '../src/generated/breakerd/v1/ReportBatchRequest';
import { Outcome } from '../src/index';
import { breakerdV1, msToDuration } from '../src/proto';

const method = () => breakerdV1().Breaker.service.ReportBatch;

/** The same request as proto-loader's object form. */
function objectForm(r: BatchRequest): ReportBatchRequest {
  return {
    client_id: r.clientId,
    sequence: String(r.sequence),
    dependencies: r.dependencies.map((d) => ({
      dependency: d.dependency,
      generation: d.generation,
      grants: d.grants,
      outcomes: d.reports.map((report, i) => {
        const latency = d.latencies[i]!;
        const position = d.positions[i];
        return {
          outcome: report.outcome ?? 'OUTCOME_UNSPECIFIED',
          http_status: report.httpStatus ?? 0,
          ...(report.grpcCode === undefined ? {} : { grpc_code: report.grpcCode }),
          latency: Number.isNaN(latency) ? null : msToDuration(latency),
          retry_after: report.retryAfterMs === undefined ? null : msToDuration(report.retryAfterMs),
          // A position breakerd would refuse is left out (here: not 'llm', or past tier 63).
          ...(position?.chain === 'llm' && position.tier! <= 63 ? { chain: position.chain, tier: position.tier } : {}),
        };
      }),
    })),
    chains: r.chains.map((c) => ({ chain: c.chain, none: false, tier: c.tier, count: c.count })),
    decisions: r.decisions.map((d) => ({ ...d })),
  };
}

function check(r: BatchRequest): void {
  const mine = encodeReportBatch(r);
  const theirs = method().requestSerialize(objectForm(r));
  assert.deepEqual(method().requestDeserialize(mine), method().requestDeserialize(theirs));
}

describe('encodeReportBatch', () => {
  it('writes every field as the proto does', () => {
    check({
      clientId: 'node-123-0badcafe',
      sequence: 7,
      dependencies: [
        {
          dependency: 'a/b',
          generation: '3',
          grants: 4,
          reports: [Outcome.SUCCESS, Outcome.fromHttpStatus(503, '7'), Outcome.fromGrpcStatus(0), Outcome.fromGrpcStatus(14), Outcome.CANCELLED],
          latencies: [1.5, 0, NaN, 2_500.25, -3],
          positions: [undefined, { chain: 'llm', tier: 0 }, { chain: 'llm', tier: 63 }, { chain: 'two words', tier: 1 }, { chain: 'llm', tier: 64 }],
        },
        { dependency: 'grants/only', generation: '0', grants: 1, reports: [], latencies: [], positions: [] },
      ],
      chains: [{ chain: 'llm', tier: 0, count: 2 }, { chain: 'llm', tier: 5, count: 1 }],
      decisions: [
        { dependency: 'a/b', refused_local: 3, fail_open: 0, fail_closed: 0 },
        { dependency: 'c', refused_local: 0, fail_open: 200, fail_closed: 70_000 },
      ],
    });
  });

  it('writes uint64 generations past 2^53 and lengths of several bytes', () => {
    const n = 20_000;
    check({
      clientId: 'node-1-00000000',
      sequence: 2 ** 40,
      dependencies: [{
        dependency: 'd'.repeat(200),
        generation: '18446744073709551615',
        grants: n,
        reports: new Array(n).fill(Outcome.SERVER_ERROR),
        latencies: Array.from({ length: n }, (_, i) => i * 1.25),
        positions: new Array(n).fill(undefined),
      }],
      chains: [],
      decisions: [],
    });
  });

  it('writes an empty request', () => {
    check({ clientId: 'x', sequence: 1, dependencies: [], chains: [], decisions: [] });
  });
});

// ReportBatchRequest in protobuf's wire format, written straight from the
// books of local decisions (local-batch.ts). The generic path (proto-loader:
// an object per outcome, protobufjs' fromObject, then encode) costs about
// half a microsecond per outcome, as much as a local grant itself; this one
// writes each outcome's few fields with no object per outcome. The field
// numbers are breakerd/v1/breaker.proto's (test/batch-encoding.test.ts
// decodes what this writes with the proto's own decoder).
import { isName, MAX_CHAIN_TIER } from './names';
import type { OutcomeReport } from './outcome';
import { breakerdV1 } from './proto';

/** A chain's name and a granted dependency's tier in it (as on a Decision). */
export interface Position {
  readonly chain?: string;
  readonly tier?: number;
}

/** One DependencyBatch: outcomes as parallel arrays (an entry each). */
export interface BatchDependency {
  readonly dependency: string;
  /** A uint64 in decimal. */
  readonly generation: string;
  readonly grants: number;
  readonly reports: readonly OutcomeReport[];
  /** ms; NaN: no latency. */
  readonly latencies: readonly number[];
  readonly positions: readonly (Position | undefined)[];
}

export interface BatchChain {
  readonly chain: string;
  readonly tier: number;
  readonly count: number;
}

export interface BatchDecisions {
  readonly dependency: string;
  readonly refused_local: number;
  readonly fail_open: number;
  readonly fail_closed: number;
}

/** A ReportBatchRequest (chain decisions made locally are never `none`). */
export interface BatchRequest {
  readonly clientId: string;
  readonly sequence: number;
  readonly dependencies: readonly BatchDependency[];
  readonly chains: readonly BatchChain[];
  readonly decisions: readonly BatchDecisions[];
}

/** Outcome enum values by name, from the proto. */
let outcomeNumbers: Map<string, number> | undefined;
function outcomeNumber(name: string | undefined): number {
  if (name === undefined) return 0;
  if (!outcomeNumbers) {
    const values = (breakerdV1().Outcome as unknown as { type: { value: { name: string; number: number }[] } }).type.value;
    outcomeNumbers = new Map(values.map((v) => [v.name, v.number]));
  }
  return outcomeNumbers.get(name) ?? 0;
}

function varintSize(n: number): number {
  let size = 1;
  while (n >= 128) {
    n = Math.floor(n / 128);
    size++;
  }
  return size;
}

/** A uint64 in decimal as a number or, past 2^53, a bigint. */
function uint64(decimal: string): number | bigint {
  return decimal.length <= 15 ? Number(decimal) : BigInt(decimal);
}

function uint64Size(n: number | bigint): number {
  if (typeof n === 'number') return varintSize(n);
  let size = 1;
  while (n >= 128n) {
    n >>= 7n;
    size++;
  }
  return size;
}

/** A Duration's two fields for `ms` (>= 0), as msToDuration gives them. */
function durationParts(ms: number): [number, number] {
  const whole = Math.max(0, ms);
  const seconds = Math.floor(whole / 1000);
  return [seconds, Math.min(999_999_999, Math.round((whole - seconds * 1000) * 1e6))];
}

function durationSize(ms: number): number {
  const [seconds, nanos] = durationParts(ms);
  return (seconds ? 1 + varintSize(seconds) : 0) + (nanos ? 1 + varintSize(nanos) : 0);
}

/** The chain and tier a LocalOutcome carries: left out when breakerd would refuse them (as in a Report). */
function chainOf(position: Position | undefined): Position | undefined {
  if (position === undefined) return undefined;
  const tier = position.tier ?? 0;
  return isName(position.chain) && Number.isInteger(tier) && tier >= 0 && tier <= MAX_CHAIN_TIER ? position : undefined;
}

function outcomeSize(report: OutcomeReport, latencyMs: number, position: Position | undefined): number {
  let size = 0;
  const outcome = outcomeNumber(report.outcome);
  if (outcome) size += 1 + varintSize(outcome);
  if (report.httpStatus) size += 1 + varintSize(report.httpStatus);
  if (report.grpcCode !== undefined) size += 1 + varintSize(report.grpcCode);
  if (!Number.isNaN(latencyMs)) {
    const d = durationSize(latencyMs);
    size += 1 + varintSize(d) + d;
  }
  if (report.retryAfterMs !== undefined) {
    const d = durationSize(report.retryAfterMs);
    size += 1 + varintSize(d) + d;
  }
  const chain = chainOf(position);
  if (chain) {
    const length = Buffer.byteLength(chain.chain!);
    size += 1 + varintSize(length) + length;
    if (chain.tier) size += 1 + varintSize(chain.tier);
  }
  return size;
}

/** Writes protobuf's wire format into a buffer of the exact size. */
class Writer {
  written = 0;
  readonly buf: Buffer;

  constructor(size: number) {
    this.buf = Buffer.allocUnsafe(size);
  }

  varint(n: number): void {
    while (n >= 128) {
      this.buf[this.written++] = (n % 128) | 128;
      n = Math.floor(n / 128);
    }
    this.buf[this.written++] = n;
  }

  /** A field's key (a one-byte tag: field numbers below 16). */
  tag(tag: number): void {
    this.buf[this.written++] = tag;
  }

  /** A varint field, left out when 0 (proto3). */
  field(tag: number, n: number): void {
    if (n === 0) return;
    this.tag(tag);
    this.varint(n);
  }

  /** A uint64 varint field, left out when 0. */
  uint64Field(tag: number, n: number | bigint): void {
    if (typeof n === 'number') return this.field(tag, n);
    if (n === 0n) return;
    this.tag(tag);
    while (n >= 128n) {
      this.buf[this.written++] = Number(n & 127n) | 128;
      n >>= 7n;
    }
    this.buf[this.written++] = Number(n);
  }

  /** A length-delimited field's key and length (a message follows). */
  message(tag: number, size: number): void {
    this.tag(tag);
    this.varint(size);
  }

  string(tag: number, s: string): void {
    const length = Buffer.byteLength(s);
    this.message(tag, length);
    this.written += this.buf.write(s, this.written, length, 'utf8');
  }

  duration(tag: number, ms: number): void {
    const [seconds, nanos] = durationParts(ms);
    this.message(tag, durationSize(ms));
    this.field(0x08, seconds); // seconds = 1
    this.field(0x10, nanos); // nanos = 2
  }
}

/** `request` as the bytes of a breakerd.v1.ReportBatchRequest. */
export function encodeReportBatch(request: BatchRequest): Buffer {
  // Sizes first (each nested message is length-prefixed), then one pass of writes.
  const generations = request.dependencies.map((d) => uint64(d.generation));
  const outcomeSizes: number[][] = [];
  const dependencySizes: number[] = [];
  const idLength = Buffer.byteLength(request.clientId);
  let total = (idLength ? 1 + varintSize(idLength) + idLength : 0) + (request.sequence ? 1 + varintSize(request.sequence) : 0);
  request.dependencies.forEach((d, i) => {
    const sizes = new Array<number>(d.reports.length);
    const nameLength = Buffer.byteLength(d.dependency);
    let size = 1 + varintSize(nameLength) + nameLength;
    const generation = generations[i]!;
    if (generation !== 0 && generation !== 0n) size += 1 + uint64Size(generation);
    if (d.grants) size += 1 + varintSize(d.grants);
    for (let j = 0; j < d.reports.length; j++) {
      sizes[j] = outcomeSize(d.reports[j]!, d.latencies[j]!, d.positions[j]);
      size += 1 + varintSize(sizes[j]!) + sizes[j]!;
    }
    outcomeSizes.push(sizes);
    dependencySizes.push(size);
    total += 1 + varintSize(size) + size;
  });
  const chainSizes = request.chains.map((c) => {
    const length = Buffer.byteLength(c.chain);
    return 1 + varintSize(length) + length + (c.tier ? 1 + varintSize(c.tier) : 0) + (c.count ? 1 + varintSize(c.count) : 0);
  });
  for (const size of chainSizes) total += 1 + varintSize(size) + size;
  const decisionSizes = request.decisions.map((d) => {
    const length = Buffer.byteLength(d.dependency);
    return 1 + varintSize(length) + length +
      (d.refused_local ? 1 + varintSize(d.refused_local) : 0) +
      (d.fail_open ? 1 + varintSize(d.fail_open) : 0) +
      (d.fail_closed ? 1 + varintSize(d.fail_closed) : 0);
  });
  for (const size of decisionSizes) total += 1 + varintSize(size) + size;

  const w = new Writer(total);
  if (idLength) w.string(0x0a, request.clientId); // client_id = 1
  w.field(0x10, request.sequence); // sequence = 2
  request.dependencies.forEach((d, i) => {
    w.message(0x1a, dependencySizes[i]!); // dependencies = 3
    w.string(0x0a, d.dependency); // dependency = 1
    w.uint64Field(0x10, generations[i]!); // generation = 2
    w.field(0x18, d.grants); // grants = 3
    const sizes = outcomeSizes[i]!;
    for (let j = 0; j < d.reports.length; j++) {
      const report = d.reports[j]!;
      w.message(0x22, sizes[j]!); // outcomes = 4
      w.field(0x08, outcomeNumber(report.outcome)); // outcome = 1
      w.field(0x10, report.httpStatus ?? 0); // http_status = 2
      if (report.grpcCode !== undefined) {
        w.tag(0x18); // grpc_code = 3: optional, so written when set, 0 too
        w.varint(report.grpcCode);
      }
      const latency = d.latencies[j]!;
      if (!Number.isNaN(latency)) w.duration(0x22, latency); // latency = 4
      if (report.retryAfterMs !== undefined) w.duration(0x2a, report.retryAfterMs); // retry_after = 5
      const chain = chainOf(d.positions[j]);
      if (chain) {
        w.string(0x32, chain.chain!); // chain = 6
        w.field(0x38, chain.tier ?? 0); // tier = 7
      }
    }
  });
  request.chains.forEach((c, i) => {
    w.message(0x22, chainSizes[i]!); // chains = 4
    w.string(0x0a, c.chain); // chain = 1
    w.field(0x18, c.tier); // tier = 3 (none = 2: never set locally)
    w.field(0x20, c.count); // count = 4
  });
  request.decisions.forEach((d, i) => {
    w.message(0x2a, decisionSizes[i]!); // decisions = 5
    w.string(0x0a, d.dependency); // dependency = 1
    w.field(0x10, d.refused_local); // refused_local = 2
    w.field(0x18, d.fail_open); // fail_open = 3
    w.field(0x20, d.fail_closed); // fail_closed = 4
  });
  if (w.written !== total) throw new Error(`encodeReportBatch: wrote ${w.written} of ${total} bytes`);
  return w.buf;
}

// Loads the wire contract (a copy of proto/breakerd/v1/breaker.proto shipped
// in this package), and gRPC's health protocol (the away probe), with the
// loader options the generated types describe.
import * as path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import type { ProtoGrpcType } from './generated/breaker';
import type { ProtoGrpcType as HealthProtoGrpcType } from './generated/health';
import type { Duration, Duration__Output } from './generated/google/protobuf/Duration';

/** Must match the flags in scripts/generate.js (the generated types assume them). */
const LOADER_OPTIONS: protoLoader.Options = {
  keepCase: true,
  longs: String,
  enums: String,
  defaults: true,
  oneofs: true,
  includeDirs: [path.join(__dirname, '..', '..', 'proto')],
};

let cached: ProtoGrpcType['breakerd']['v1'] | undefined;

/** The `breakerd.v1` package: service constructors (Breaker, Admin) and message types. */
export function breakerdV1(): ProtoGrpcType['breakerd']['v1'] {
  if (!cached) {
    const definition = protoLoader.loadSync('breakerd/v1/breaker.proto', LOADER_OPTIONS);
    cached = (grpc.loadPackageDefinition(definition) as unknown as ProtoGrpcType).breakerd.v1;
  }
  return cached;
}

let cachedHealth: HealthProtoGrpcType['grpc']['health']['v1'] | undefined;

/** The `grpc.health.v1` package: the Health service constructor and its messages. */
export function healthV1(): HealthProtoGrpcType['grpc']['health']['v1'] {
  if (!cachedHealth) {
    const definition = protoLoader.loadSync('grpc/health/v1/health.proto', LOADER_OPTIONS);
    cachedHealth = (grpc.loadPackageDefinition(definition) as unknown as HealthProtoGrpcType).grpc.health.v1;
  }
  return cachedHealth;
}

/** A protobuf Duration (null when unset) in milliseconds. */
export function durationToMs(d: Duration__Output | null | undefined): number {
  return d ? Number(d.seconds) * 1000 + d.nanos / 1e6 : 0;
}

/** Milliseconds (>= 0) as a protobuf Duration. */
export function msToDuration(ms: number): Duration {
  const whole = Math.max(0, ms);
  const seconds = Math.floor(whole / 1000);
  return { seconds, nanos: Math.min(999_999_999, Math.round((whole - seconds * 1000) * 1e6)) };
}

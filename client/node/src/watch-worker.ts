// Runs the Watch stream in a worker thread and posts what it sees to the
// client. gRPC keeps a process alive while any call is open, so a stream on
// the application's thread would keep the process alive forever; this
// worker is unref()ed instead, and the process exits when its own work is done.
import { parentPort, workerData } from 'node:worker_threads';
import * as grpc from '@grpc/grpc-js';
import { breakerdV1, durationToMs } from './proto';
import type { CachedChange } from './state-cache';
import type { StateChange__Output } from './generated/breakerd/v1/StateChange';

/** What the client passes to the worker. */
export interface WatchWorkerData {
  target: string;
  channelOptions: grpc.ChannelOptions;
  initialBackoffMs: number;
  maxBackoffMs: number;
}

/** What the worker posts back. */
export type WatchEvent =
  | { type: 'up' }
  | { type: 'change'; change: CachedChange }
  | { type: 'down'; details: string }
  | { type: 'reconnect' };

function run(data: WatchWorkerData, port: NonNullable<typeof parentPort>): void {
  const stub = new (breakerdV1().Breaker)(data.target, grpc.credentials.createInsecure(), data.channelOptions);
  const post = (event: WatchEvent) => port.postMessage(event);
  let backoffMs = data.initialBackoffMs;

  const open = (): void => {
    const call = stub.Watch({});
    call.on('metadata', () => {
      backoffMs = data.initialBackoffMs;
      post({ type: 'up' });
    });
    call.on('data', (c: StateChange__Output) =>
      post({
        type: 'change',
        change: {
          dependency: c.dependency, state: c.state, mode: c.mode, generation: c.generation,
          retryAfterMs: durationToMs(c.retry_after), localDecisions: c.local_decisions, reason: c.reason,
        },
      }),
    );
    call.on('error', () => {}); // 'status' below reports every end, errors included
    call.on('status', (status: grpc.StatusObject) => {
      post({ type: 'down', details: `${grpc.status[status.code]}: ${status.details}` });
      const delay = Math.random() * backoffMs; // full jitter
      backoffMs = Math.min(backoffMs * 2, data.maxBackoffMs);
      setTimeout(() => {
        post({ type: 'reconnect' });
        open();
      }, delay);
    });
  };

  open();
}

if (parentPort) run(workerData as WatchWorkerData, parentPort);

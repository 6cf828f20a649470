// One unary RPC as the client sends it: through the send window, its
// timeout measuring breakerd rather than this event loop, an answer that
// comes after the caller stopped waiting handed on instead of dropped, and
// every answer noted so that a late one can be told from an absent breakerd.
import { performance } from 'node:perf_hooks';
import * as grpc from '@grpc/grpc-js';
import type { SendJob, SendWindow } from './send-window';

/**
 * How long an RPC stays open after its caller stopped waiting for it
 * (timeout or abort): an Acquire answered meanwhile has its permit
 * returned, a Report still lands.
 */
export const LATE_ANSWER_MS = 1000;

/** Why a queued RPC was never sent: breakerd was marked away meanwhile (SendWindow.flush). */
export const NOT_SENT_AWAY = Symbol('breakerd away: not sent');

/**
 * When breakerd last answered one of the client's RPCs (client/README.md,
 * "Sidecar away"). An RPC that timed out although breakerd answered another
 * one after it was written was only late: breakerd is there. Times are
 * monotonic ms (performance.now by default).
 */
export class AnswerClock {
  private lastAnswerAt = -Infinity;

  constructor(readonly now: () => number = () => performance.now()) {}

  /** breakerd answered an RPC (a decision, a report's effect, or a refusal of the request). */
  answered(): void {
    this.lastAnswerAt = this.now();
  }

  /** Whether breakerd answered an RPC after `writtenAt` (a time of now()). */
  answeredSince(writtenAt: number): boolean {
    return this.lastAnswerAt > writtenAt;
  }
}

/** A DEADLINE_EXCEEDED as sendUnary rejects with it: when the request was written (AnswerClock time). */
export type DeadlineExceeded = grpc.ServiceError & { writtenAt: number };

/** The time the RPC behind `err` was written, if `err` is sendUnary's DEADLINE_EXCEEDED. */
export function writtenAtOf(err: unknown): number | undefined {
  const e = err as Partial<DeadlineExceeded> | undefined;
  return e?.code === grpc.status.DEADLINE_EXCEEDED && typeof e.writtenAt === 'number' ? e.writtenAt : undefined;
}

/**
 * Errors breakerd itself answers with (a bad request, max_breakers reached:
 * breakerd/v1/breaker.proto); anything else may be the transport's.
 */
const ANSWERED_CODES: ReadonlySet<number> = new Set([grpc.status.INVALID_ARGUMENT, grpc.status.RESOURCE_EXHAUSTED]);

/** Starts the RPC with these call options; `done` gets its answer. */
export type UnaryInvoke<Res> = (
  options: grpc.CallOptions,
  done: (err: grpc.ServiceError | null, res?: Res) => void,
) => void;

/** How one RPC is sent: its lane in the window, and what to do with an answer nobody waits for. */
export interface SendOptions<Res> {
  lane: SendJob['lane'];
  /** The caller gives up: the promise rejects with the signal's reason. */
  signal?: AbortSignal | undefined;
  /** Not flushed when breakerd is marked away (a late permit going back). */
  keep?: boolean;
  /** The answer arrived after the caller stopped waiting (timeout or abort). */
  onLate?: (res: Res) => void;
}

/**
 * Sends one unary RPC (never wait-for-ready) through `window`. The caller
 * waits at most `timeoutMs` from when the request is written (then the
 * promise rejects with DEADLINE_EXCEEDED), or until `signal` aborts (then
 * with its reason). The RPC itself stays open LATE_ANSWER_MS longer (its
 * gRPC deadline), and an answer in that time goes to `onLate`. Rejects with
 * NOT_SENT_AWAY when the window flushes it before it is sent. Each answer,
 * late or not, is noted on `answers`; a DEADLINE_EXCEEDED carries the time
 * the request was written (writtenAtOf).
 */
export function sendUnary<Res>(
  window: SendWindow,
  answers: AnswerClock,
  timeoutMs: number,
  invoke: UnaryInvoke<Res>,
  options: SendOptions<Res>,
): Promise<Res> {
  const { signal, onLate } = options;
  return new Promise<Res>((resolve, reject) => {
    let waiting = true;
    /** The caller stops waiting; true the first time only. */
    const stopWaiting = (): boolean => {
      if (!waiting) return false;
      waiting = false;
      signal?.removeEventListener('abort', aborted);
      return true;
    };
    const aborted = (): void => {
      if (!stopWaiting()) return;
      window.withdraw(job); // if still queued, it is never sent
      reject(signal!.reason);
    };
    const job: SendJob = {
      lane: options.lane,
      keep: options.keep ?? false,
      drop: () => {
        if (stopWaiting()) reject(NOT_SENT_AWAY);
      },
      start: () => {
        let answered = false;
        let placeHeld = true;
        const leave = (): void => {
          if (!placeHeld) return;
          placeHeld = false;
          window.done();
        };
        let timer: NodeJS.Timeout | undefined;
        // Until startTimeout runs: the RPC is being written.
        let writtenAt = answers.now();
        // The timeout measures breakerd, not this event loop: it starts when
        // the request is on the socket (http2 writes what this turn queued in
        // the check phase, before setImmediate callbacks), and when it fires,
        // setImmediate lets the poll phase first read the answers already on
        // the socket.
        const startTimeout = (): void => {
          if (answered) return;
          writtenAt = answers.now();
          timer = setTimeout(() => {
            setImmediate(() => {
              if (answered) return;
              leave();
              if (stopWaiting()) reject(deadlineExceeded(timeoutMs, writtenAt));
            });
          }, timeoutMs);
        };
        const done = (err: grpc.ServiceError | null, res?: Res): void => {
          answered = true;
          clearTimeout(timer);
          if (!err || ANSWERED_CODES.has(err.code)) answers.answered();
          leave();
          if (stopWaiting()) {
            if (err?.code === grpc.status.DEADLINE_EXCEEDED) reject(Object.assign(err, { writtenAt }));
            else if (err) reject(err);
            else resolve(res!);
          } else if (!err) {
            onLate?.(res!);
          }
        };
        try {
          invoke({ deadline: Date.now() + timeoutMs + LATE_ANSWER_MS }, done);
          setImmediate(startTimeout);
        } catch (err) {
          // e.g. the channel is closed: finish after the window's loop, not inside it.
          queueMicrotask(() => done(err as grpc.ServiceError, undefined));
        }
      },
    };
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    signal?.addEventListener('abort', aborted, { once: true });
    window.submit(job);
  });
}

/** What a caller gets when breakerd did not answer within the timeout of the request being written. */
function deadlineExceeded(timeoutMs: number, writtenAt: number): DeadlineExceeded {
  const details = `no answer within ${timeoutMs} ms of sending`;
  return Object.assign(new Error(`${grpc.status.DEADLINE_EXCEEDED} DEADLINE_EXCEEDED: ${details}`), {
    code: grpc.status.DEADLINE_EXCEEDED,
    details,
    metadata: new grpc.Metadata(),
    writtenAt,
  });
}

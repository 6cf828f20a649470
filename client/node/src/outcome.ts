// How a guarded call ended, in the terms of a Report.
import type { Outcome__Output } from './generated/breakerd/v1/Outcome';

/** An explicit outcome class, e.g. `'OUTCOME_TIMEOUT'`. */
export type OutcomeName = Outcome__Output;

/**
 * What a Report says about one call. Set `outcome` for an explicit class, or
 * `httpStatus` / `grpcCode` and let breakerd classify (so every language
 * gets the same rules). `retryAfterMs` is the upstream's Retry-After: an
 * opening cooldown lasts at least that long.
 */
export interface OutcomeReport {
  readonly outcome?: OutcomeName;
  readonly httpStatus?: number;
  readonly grpcCode?: number;
  readonly retryAfterMs?: number;
}

const explicit = (outcome: OutcomeName): OutcomeReport => Object.freeze({ outcome });

/** gRPC status codes (numbers, as on the wire). */
const GRPC = {
  OK: 0, CANCELLED: 1, UNKNOWN: 2, INVALID_ARGUMENT: 3, DEADLINE_EXCEEDED: 4, NOT_FOUND: 5,
  ALREADY_EXISTS: 6, PERMISSION_DENIED: 7, RESOURCE_EXHAUSTED: 8, FAILED_PRECONDITION: 9,
  ABORTED: 10, OUT_OF_RANGE: 11, UNIMPLEMENTED: 12, INTERNAL: 13, UNAVAILABLE: 14,
  DATA_LOSS: 15, UNAUTHENTICATED: 16,
} as const;

/** Node / undici error codes that mean the call timed out. */
const TIMEOUT_CODES = new Set([
  'ETIMEDOUT', 'ESOCKETTIMEDOUT', 'UND_ERR_CONNECT_TIMEOUT', 'UND_ERR_HEADERS_TIMEOUT',
  'UND_ERR_BODY_TIMEOUT',
]);
/** Error codes that mean the caller gave up: Node's AbortError, axios' CanceledError. */
const CANCELLED_CODES = new Set(['ABORT_ERR', 'ERR_CANCELED']);
/** Node / undici error codes that mean the upstream could not be reached. */
const CONNECTION_CODES = new Set([
  'ECONNREFUSED', 'ECONNRESET', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH',
  'EPIPE', 'UND_ERR_SOCKET',
]);

type ErrorLike = {
  name?: unknown; code?: unknown; details?: unknown; metadata?: unknown;
  status?: unknown; statusCode?: unknown; response?: { status?: unknown }; cause?: unknown;
  errors?: unknown;
};

const isHttpStatus = (v: unknown): v is number =>
  typeof v === 'number' && Number.isInteger(v) && v >= 100 && v <= 599;

/** The error, its `cause` chain and an AggregateError's members, breadth-first. */
function* errorChain(err: unknown): Generator<ErrorLike> {
  const queue: unknown[] = [err];
  const seen = new Set<unknown>();
  while (queue.length > 0) {
    const e = queue.shift();
    if (e === null || typeof e !== 'object' || seen.has(e)) continue;
    seen.add(e);
    const like = e as ErrorLike;
    yield like;
    queue.push(like.cause);
    if (Array.isArray(like.errors)) queue.push(...like.errors);
  }
}

function httpStatus(status: number, retryAfterHeader?: string | number | null): OutcomeReport {
  if (!isHttpStatus(status)) throw new RangeError(`HTTP status must be 100-599, got ${status}`);
  const retryAfterMs = parseRetryAfter(retryAfterHeader);
  return Object.freeze(retryAfterMs === undefined ? { httpStatus: status } : { httpStatus: status, retryAfterMs });
}

/** A Retry-After value in the seconds form ("120"), in ms; anything else is ignored. */
function parseRetryAfter(value: string | number | null | undefined): number | undefined {
  if (value === null || value === undefined) return undefined;
  const text = String(value).trim();
  return /^\d+$/.test(text) ? Number(text) * 1000 : undefined;
}

function grpcStatus(code: number): OutcomeReport {
  if (!Number.isInteger(code) || code < 0 || code > 16) {
    throw new RangeError(`gRPC status code must be 0-16, got ${code}`);
  }
  return Object.freeze({ grpcCode: code });
}

/**
 * Classifies what a guarded call threw:
 * - `TimeoutError` (e.g. `AbortSignal.timeout`) or a timeout code
 *   (`ETIMEDOUT`, undici timeouts) -> OUTCOME_TIMEOUT;
 * - `AbortError` (`controller.abort()`: the caller gave up), code `ABORT_ERR`
 *   or axios' `ERR_CANCELED` -> OUTCOME_CANCELLED (neutral);
 * - `ECONNREFUSED`, `ECONNRESET`, `ENOTFOUND` and similar -> OUTCOME_CONNECTION_ERROR
 *   (codes are also looked for in `cause` chains, as fetch reports them);
 * - a gRPC ServiceError -> its status code;
 * - an error with an HTTP `status`, `statusCode` or `response.status` -> that status;
 * - anything else -> OUTCOME_SERVER_ERROR.
 * An abort with a reason of the application's own (`controller.abort(reason)`)
 * throws that reason: give the guard the signal (`{ signal }`) so that it
 * reports OUTCOME_CANCELLED whatever the reason.
 */
function fromError(err: unknown): OutcomeReport {
  for (const e of errorChain(err)) {
    if (typeof e.code === 'number' && typeof e.details === 'string' && e.metadata !== undefined) {
      return grpcStatus(e.code);
    }
    const status = [e.status, e.statusCode, e.response?.status].find(isHttpStatus);
    if (status !== undefined) return httpStatus(status);
    if (e.name === 'TimeoutError') return Outcome.TIMEOUT;
    // Node's AbortError carries the signal's reason as its cause: a TimeoutError there is a timeout.
    if (e.name === 'AbortError') return (e.cause as ErrorLike | undefined)?.name === 'TimeoutError' ? Outcome.TIMEOUT : Outcome.CANCELLED;
    if (typeof e.code === 'string') {
      if (TIMEOUT_CODES.has(e.code)) return Outcome.TIMEOUT;
      if (CANCELLED_CODES.has(e.code)) return Outcome.CANCELLED;
      if (CONNECTION_CODES.has(e.code)) return Outcome.CONNECTION_ERROR;
    }
  }
  return Outcome.SERVER_ERROR;
}

/**
 * The class breakerd gives a report (its classification table, mirrored for
 * client-side decisions such as whether to retry).
 */
function classOf(report: OutcomeReport): OutcomeName {
  if (report.outcome && report.outcome !== 'OUTCOME_UNSPECIFIED') return report.outcome;
  if (report.grpcCode !== undefined) {
    switch (report.grpcCode) {
      case GRPC.OK: return 'OUTCOME_SUCCESS';
      case GRPC.DEADLINE_EXCEEDED: return 'OUTCOME_TIMEOUT';
      case GRPC.UNAVAILABLE: return 'OUTCOME_CONNECTION_ERROR';
      case GRPC.RESOURCE_EXHAUSTED: return 'OUTCOME_RATE_LIMITED';
      case GRPC.CANCELLED: return 'OUTCOME_CANCELLED';
      case GRPC.UNAUTHENTICATED: case GRPC.PERMISSION_DENIED: return 'OUTCOME_AUTH_ERROR';
      case GRPC.INVALID_ARGUMENT: case GRPC.NOT_FOUND: case GRPC.FAILED_PRECONDITION:
      case GRPC.OUT_OF_RANGE: case GRPC.ALREADY_EXISTS: case GRPC.UNIMPLEMENTED:
        return 'OUTCOME_BAD_REQUEST';
      default: return 'OUTCOME_SERVER_ERROR';
    }
  }
  const s = report.httpStatus;
  if (s === undefined) return 'OUTCOME_UNSPECIFIED';
  if (s < 400) return 'OUTCOME_SUCCESS';
  if (s === 408 || s === 504) return 'OUTCOME_TIMEOUT';
  if (s === 429) return 'OUTCOME_RATE_LIMITED';
  if (s === 401 || s === 403) return 'OUTCOME_AUTH_ERROR';
  return s < 500 ? 'OUTCOME_BAD_REQUEST' : 'OUTCOME_SERVER_ERROR';
}

const RETRYABLE: ReadonlySet<OutcomeName> = new Set<OutcomeName>([
  'OUTCOME_TIMEOUT', 'OUTCOME_CONNECTION_ERROR', 'OUTCOME_SERVER_ERROR', 'OUTCOME_RATE_LIMITED',
]);

/**
 * Outcome helpers. The constants are explicit outcomes
 * (`client.report(dep, permit, Outcome.SUCCESS)`); the functions map what a
 * call produced to a report. All are pure and safe to share.
 */
export const Outcome = {
  SUCCESS: explicit('OUTCOME_SUCCESS'),
  TIMEOUT: explicit('OUTCOME_TIMEOUT'),
  CONNECTION_ERROR: explicit('OUTCOME_CONNECTION_ERROR'),
  SERVER_ERROR: explicit('OUTCOME_SERVER_ERROR'),
  RATE_LIMITED: explicit('OUTCOME_RATE_LIMITED'),
  BAD_REQUEST: explicit('OUTCOME_BAD_REQUEST'),
  AUTH_ERROR: explicit('OUTCOME_AUTH_ERROR'),
  CANCELLED: explicit('OUTCOME_CANCELLED'),
  /** The upstream answered but the answer is unusable (model refusal, content filter). */
  SOFT_FAILURE: explicit('OUTCOME_SOFT_FAILURE'),
  /**
   * An HTTP response status (100-599), sent as `http_status` for breakerd to
   * classify, with the Retry-After header's seconds form if given.
   */
  fromHttpStatus: httpStatus,
  /** A gRPC status code (0-16), sent as `grpc_code` for breakerd to classify. */
  fromGrpcStatus: grpcStatus,
  fromError,
  classOf,
  /** Whether a call that ended so is worth retrying (a failure for the breaker). */
  isRetryable: (report: OutcomeReport): boolean => RETRYABLE.has(classOf(report)),
} as const;

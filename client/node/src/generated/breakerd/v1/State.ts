// Original file: proto/breakerd/v1/breaker.proto

/**
 * The state of one breaker. HALF_OPEN is derived by the server: an OPEN
 * breaker whose cooldown has elapsed.
 */
export const State = {
  STATE_UNSPECIFIED: 'STATE_UNSPECIFIED',
  STATE_CLOSED: 'STATE_CLOSED',
  STATE_OPEN: 'STATE_OPEN',
  STATE_HALF_OPEN: 'STATE_HALF_OPEN',
  STATE_FORCED_OPEN: 'STATE_FORCED_OPEN',
  STATE_FORCED_CLOSED: 'STATE_FORCED_CLOSED',
} as const;

/**
 * The state of one breaker. HALF_OPEN is derived by the server: an OPEN
 * breaker whose cooldown has elapsed.
 */
export type State =
  | 'STATE_UNSPECIFIED'
  | 0
  | 'STATE_CLOSED'
  | 1
  | 'STATE_OPEN'
  | 2
  | 'STATE_HALF_OPEN'
  | 3
  | 'STATE_FORCED_OPEN'
  | 4
  | 'STATE_FORCED_CLOSED'
  | 5

/**
 * The state of one breaker. HALF_OPEN is derived by the server: an OPEN
 * breaker whose cooldown has elapsed.
 */
export type State__Output = typeof State[keyof typeof State]

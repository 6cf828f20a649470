// Original file: proto/breakerd/v1/breaker.proto

/**
 * How the guarded call ended, as the application sees it.
 * OUTCOME_UNSPECIFIED: the server classifies http_status or grpc_code.
 */
export const Outcome = {
  OUTCOME_UNSPECIFIED: 'OUTCOME_UNSPECIFIED',
  OUTCOME_SUCCESS: 'OUTCOME_SUCCESS',
  OUTCOME_TIMEOUT: 'OUTCOME_TIMEOUT',
  OUTCOME_CONNECTION_ERROR: 'OUTCOME_CONNECTION_ERROR',
  OUTCOME_SERVER_ERROR: 'OUTCOME_SERVER_ERROR',
  OUTCOME_RATE_LIMITED: 'OUTCOME_RATE_LIMITED',
  OUTCOME_BAD_REQUEST: 'OUTCOME_BAD_REQUEST',
  OUTCOME_AUTH_ERROR: 'OUTCOME_AUTH_ERROR',
  OUTCOME_CANCELLED: 'OUTCOME_CANCELLED',
  /**
   * The upstream answered but the answer is unusable for the application
   * (model refusal, content filter): healthy for the breaker, counted apart.
   */
  OUTCOME_SOFT_FAILURE: 'OUTCOME_SOFT_FAILURE',
} as const;

/**
 * How the guarded call ended, as the application sees it.
 * OUTCOME_UNSPECIFIED: the server classifies http_status or grpc_code.
 */
export type Outcome =
  | 'OUTCOME_UNSPECIFIED'
  | 0
  | 'OUTCOME_SUCCESS'
  | 1
  | 'OUTCOME_TIMEOUT'
  | 2
  | 'OUTCOME_CONNECTION_ERROR'
  | 3
  | 'OUTCOME_SERVER_ERROR'
  | 4
  | 'OUTCOME_RATE_LIMITED'
  | 5
  | 'OUTCOME_BAD_REQUEST'
  | 6
  | 'OUTCOME_AUTH_ERROR'
  | 7
  | 'OUTCOME_CANCELLED'
  | 8
  /**
   * The upstream answered but the answer is unusable for the application
   * (model refusal, content filter): healthy for the breaker, counted apart.
   */
  | 'OUTCOME_SOFT_FAILURE'
  | 9

/**
 * How the guarded call ended, as the application sees it.
 * OUTCOME_UNSPECIFIED: the server classifies http_status or grpc_code.
 */
export type Outcome__Output = typeof Outcome[keyof typeof Outcome]

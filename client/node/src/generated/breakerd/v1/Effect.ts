// Original file: proto/breakerd/v1/breaker.proto

/**
 * What a Report did to the breaker.
 */
export const Effect = {
  EFFECT_UNSPECIFIED: 'EFFECT_UNSPECIFIED',
  /**
   * Counted as a success (a success resets the consecutive-failure count).
   */
  EFFECT_COUNTED_SUCCESS: 'EFFECT_COUNTED_SUCCESS',
  /**
   * Counted as a failure toward the trip rules.
   */
  EFFECT_COUNTED_FAILURE: 'EFFECT_COUNTED_FAILURE',
  /**
   * Neither: bad request, auth error, cancelled, ignored rate limit.
   */
  EFFECT_NEUTRAL: 'EFFECT_NEUTRAL',
  /**
   * The permit belongs to an earlier generation (the breaker has moved
   * since), or the breaker is open: counted in metrics, no state change.
   */
  EFFECT_LATE: 'EFFECT_LATE',
  /**
   * The permit was reported already: this repeated Report changes nothing.
   * Exact for permits younger than the permit horizon (inflight.hang_after,
   * or 60 s when that is off); wins over EFFECT_LATE.
   */
  EFFECT_DUPLICATE: 'EFFECT_DUPLICATE',
} as const;

/**
 * What a Report did to the breaker.
 */
export type Effect =
  | 'EFFECT_UNSPECIFIED'
  | 0
  /**
   * Counted as a success (a success resets the consecutive-failure count).
   */
  | 'EFFECT_COUNTED_SUCCESS'
  | 1
  /**
   * Counted as a failure toward the trip rules.
   */
  | 'EFFECT_COUNTED_FAILURE'
  | 2
  /**
   * Neither: bad request, auth error, cancelled, ignored rate limit.
   */
  | 'EFFECT_NEUTRAL'
  | 3
  /**
   * The permit belongs to an earlier generation (the breaker has moved
   * since), or the breaker is open: counted in metrics, no state change.
   */
  | 'EFFECT_LATE'
  | 4
  /**
   * The permit was reported already: this repeated Report changes nothing.
   * Exact for permits younger than the permit horizon (inflight.hang_after,
   * or 60 s when that is off); wins over EFFECT_LATE.
   */
  | 'EFFECT_DUPLICATE'
  | 5

/**
 * What a Report did to the breaker.
 */
export type Effect__Output = typeof Effect[keyof typeof Effect]

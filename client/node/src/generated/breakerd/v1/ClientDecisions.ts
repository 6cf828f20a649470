// Original file: proto/breakerd/v1/breaker.proto


/**
 * Decisions made without the sidecar since the last batch: refusals from
 * the Watch cache, and fail-open / fail-closed decisions while it was away.
 */
export interface ClientDecisions {
  'dependency'?: (string);
  'refused_local'?: (number);
  'fail_open'?: (number);
  'fail_closed'?: (number);
}

/**
 * Decisions made without the sidecar since the last batch: refusals from
 * the Watch cache, and fail-open / fail-closed decisions while it was away.
 */
export interface ClientDecisions__Output {
  'dependency': (string);
  'refused_local': (number);
  'fail_open': (number);
  'fail_closed': (number);
}

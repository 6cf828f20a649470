// Original file: proto/breakerd/v1/breaker.proto


/**
 * Chain decisions made in the client: `count` times the candidate at
 * `tier` was granted, or (none) every candidate was refused.
 */
export interface ChainDecision {
  'chain'?: (string);
  'none'?: (boolean);
  'tier'?: (number);
  'count'?: (number);
}

/**
 * Chain decisions made in the client: `count` times the candidate at
 * `tier` was granted, or (none) every candidate was refused.
 */
export interface ChainDecision__Output {
  'chain': (string);
  'none': (boolean);
  'tier': (number);
  'count': (number);
}

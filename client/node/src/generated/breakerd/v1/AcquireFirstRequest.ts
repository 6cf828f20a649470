// Original file: proto/breakerd/v1/breaker.proto


export interface AcquireFirstRequest {
  /**
   * Candidates in order of preference; the first allowed one is granted.
   */
  'dependencies'?: (string)[];
  'attempt'?: (number);
  /**
   * The fallback chain's name (named like a dependency; empty: not counted
   * as a chain) and the position of dependencies[0] in the caller's full
   * chain (0-based; nonzero for a client that moved on after a failed call
   * or skipped candidates). The decision is counted in
   * breakerd_chain_decisions_total{chain,tier}: the granted candidate's
   * tier, or "none" when every candidate was refused. Tiers are 0 to 63: a
   * request whose last candidate would be past 63 is refused whole (even if
   * an earlier candidate would be granted), and so is a first_tier without
   * a chain.
   */
  'chain'?: (string);
  'first_tier'?: (number);
}

export interface AcquireFirstRequest__Output {
  /**
   * Candidates in order of preference; the first allowed one is granted.
   */
  'dependencies': (string)[];
  'attempt': (number);
  /**
   * The fallback chain's name (named like a dependency; empty: not counted
   * as a chain) and the position of dependencies[0] in the caller's full
   * chain (0-based; nonzero for a client that moved on after a failed call
   * or skipped candidates). The decision is counted in
   * breakerd_chain_decisions_total{chain,tier}: the granted candidate's
   * tier, or "none" when every candidate was refused. Tiers are 0 to 63: a
   * request whose last candidate would be past 63 is refused whole (even if
   * an earlier candidate would be granted), and so is a first_tier without
   * a chain.
   */
  'chain': (string);
  'first_tier': (number);
}

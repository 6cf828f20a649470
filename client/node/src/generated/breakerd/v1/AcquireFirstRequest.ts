// Original file: proto/breakerd/v1/breaker.proto


export interface AcquireFirstRequest {
  /**
   * Candidates in order of preference; the first allowed one is granted.
   */
  'dependencies'?: (string)[];
  'attempt'?: (number);
}

export interface AcquireFirstRequest__Output {
  /**
   * Candidates in order of preference; the first allowed one is granted.
   */
  'dependencies': (string)[];
  'attempt': (number);
}

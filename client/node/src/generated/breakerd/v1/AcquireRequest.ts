// Original file: proto/breakerd/v1/breaker.proto


export interface AcquireRequest {
  /**
   * 1-200 bytes of [A-Za-z0-9._:/@-], e.g. "openai/key-prod-1".
   */
  'dependency'?: (string);
  /**
   * 0 for the first try; 1, 2, ... for retries (spends the retry budget).
   */
  'attempt'?: (number);
}

export interface AcquireRequest__Output {
  /**
   * 1-200 bytes of [A-Za-z0-9._:/@-], e.g. "openai/key-prod-1".
   */
  'dependency': (string);
  /**
   * 0 for the first try; 1, 2, ... for retries (spends the retry budget).
   */
  'attempt': (number);
}

// Original file: proto/breakerd/v1/breaker.proto


export interface WatchRequest {
  /**
   * Dependencies to follow; empty means every breaker, present and future.
   */
  'dependencies'?: (string)[];
}

export interface WatchRequest__Output {
  /**
   * Dependencies to follow; empty means every breaker, present and future.
   */
  'dependencies': (string)[];
}

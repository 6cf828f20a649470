// Original file: proto/breakerd/v1/breaker.proto


export interface ReportBatchResponse {
  /**
   * Outcomes applied; late (an older generation, or a breaker evicted);
   * refused (beyond the grants, or a generation the breaker never had:
   * changing nothing).
   */
  'counted'?: (number);
  'late'?: (number);
  'refused'?: (number);
  /**
   * This client id and sequence were applied already: nothing was.
   */
  'repeated_batch'?: (boolean);
}

export interface ReportBatchResponse__Output {
  /**
   * Outcomes applied; late (an older generation, or a breaker evicted);
   * refused (beyond the grants, or a generation the breaker never had:
   * changing nothing).
   */
  'counted': (number);
  'late': (number);
  'refused': (number);
  /**
   * This client id and sequence were applied already: nothing was.
   */
  'repeated_batch': (boolean);
}

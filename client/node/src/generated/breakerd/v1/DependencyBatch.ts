// Original file: proto/breakerd/v1/breaker.proto

import type { LocalOutcome as _breakerd_v1_LocalOutcome, LocalOutcome__Output as _breakerd_v1_LocalOutcome__Output } from '../../breakerd/v1/LocalOutcome';
import type { Long } from '@grpc/proto-loader';

export interface DependencyBatch {
  'dependency'?: (string);
  /**
   * The generation of the Watch event the client decided on.
   */
  'generation'?: (number | string | Long);
  /**
   * First attempts granted in the client since the last batch.
   */
  'grants'?: (number);
  /**
   * Outcomes of locally granted calls (of this or an earlier batch's
   * grants in the same generation).
   */
  'outcomes'?: (_breakerd_v1_LocalOutcome)[];
}

export interface DependencyBatch__Output {
  'dependency': (string);
  /**
   * The generation of the Watch event the client decided on.
   */
  'generation': (string);
  /**
   * First attempts granted in the client since the last batch.
   */
  'grants': (number);
  /**
   * Outcomes of locally granted calls (of this or an earlier batch's
   * grants in the same generation).
   */
  'outcomes': (_breakerd_v1_LocalOutcome__Output)[];
}

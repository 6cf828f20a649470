// Original file: proto/breakerd/v1/breaker.proto

import type { DependencyBatch as _breakerd_v1_DependencyBatch, DependencyBatch__Output as _breakerd_v1_DependencyBatch__Output } from '../../breakerd/v1/DependencyBatch';
import type { ChainDecision as _breakerd_v1_ChainDecision, ChainDecision__Output as _breakerd_v1_ChainDecision__Output } from '../../breakerd/v1/ChainDecision';
import type { ClientDecisions as _breakerd_v1_ClientDecisions, ClientDecisions__Output as _breakerd_v1_ClientDecisions__Output } from '../../breakerd/v1/ClientDecisions';
import type { Long } from '@grpc/proto-loader';

export interface ReportBatchRequest {
  /**
   * Names the client process (named like a dependency); with `sequence`,
   * recognizes a batch sent again after a timeout.
   */
  'client_id'?: (string);
  'sequence'?: (number | string | Long);
  'dependencies'?: (_breakerd_v1_DependencyBatch)[];
  'chains'?: (_breakerd_v1_ChainDecision)[];
  'decisions'?: (_breakerd_v1_ClientDecisions)[];
}

export interface ReportBatchRequest__Output {
  /**
   * Names the client process (named like a dependency); with `sequence`,
   * recognizes a batch sent again after a timeout.
   */
  'client_id': (string);
  'sequence': (string);
  'dependencies': (_breakerd_v1_DependencyBatch__Output)[];
  'chains': (_breakerd_v1_ChainDecision__Output)[];
  'decisions': (_breakerd_v1_ClientDecisions__Output)[];
}

// Original file: proto/breakerd/v1/breaker.proto

import type { State as _breakerd_v1_State, State__Output as _breakerd_v1_State__Output } from '../../breakerd/v1/State';
import type { RejectReason as _breakerd_v1_RejectReason, RejectReason__Output as _breakerd_v1_RejectReason__Output } from '../../breakerd/v1/RejectReason';
import type { Duration as _google_protobuf_Duration, Duration__Output as _google_protobuf_Duration__Output } from '../../google/protobuf/Duration';
import type { Long } from '@grpc/proto-loader';

export interface AcquireFirstResponse {
  /**
   * The dependency granted, empty if every candidate was rejected.
   */
  'dependency'?: (string);
  'allowed'?: (boolean);
  'permit'?: (number | string | Long);
  'probe'?: (boolean);
  /**
   * For the granted dependency, or for the last candidate when none was.
   */
  'state'?: (_breakerd_v1_State);
  'reason'?: (_breakerd_v1_RejectReason);
  /**
   * When none was granted: the shortest wait among the candidates.
   */
  'retry_after'?: (_google_protobuf_Duration | null);
}

export interface AcquireFirstResponse__Output {
  /**
   * The dependency granted, empty if every candidate was rejected.
   */
  'dependency': (string);
  'allowed': (boolean);
  'permit': (string);
  'probe': (boolean);
  /**
   * For the granted dependency, or for the last candidate when none was.
   */
  'state': (_breakerd_v1_State__Output);
  'reason': (_breakerd_v1_RejectReason__Output);
  /**
   * When none was granted: the shortest wait among the candidates.
   */
  'retry_after': (_google_protobuf_Duration__Output | null);
}

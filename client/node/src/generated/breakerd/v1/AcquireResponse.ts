// Original file: proto/breakerd/v1/breaker.proto

import type { State as _breakerd_v1_State, State__Output as _breakerd_v1_State__Output } from '../../breakerd/v1/State';
import type { RejectReason as _breakerd_v1_RejectReason, RejectReason__Output as _breakerd_v1_RejectReason__Output } from '../../breakerd/v1/RejectReason';
import type { Duration as _google_protobuf_Duration, Duration__Output as _google_protobuf_Duration__Output } from '../../google/protobuf/Duration';
import type { Long } from '@grpc/proto-loader';

export interface AcquireResponse {
  /**
   * True: make the call, then Report with `permit`. In shadow mode always
   * true; `reason` then says what enforce mode would have done.
   */
  'allowed'?: (boolean);
  /**
   * Opaque; pass it back in Report. Zero when not allowed.
   */
  'permit'?: (number | string | Long);
  /**
   * True when this call is the half-open probe: its result decides.
   */
  'probe'?: (boolean);
  'state'?: (_breakerd_v1_State);
  'reason'?: (_breakerd_v1_RejectReason);
  /**
   * When rejected: how long until trying again is useful.
   */
  'retry_after'?: (_google_protobuf_Duration | null);
}

export interface AcquireResponse__Output {
  /**
   * True: make the call, then Report with `permit`. In shadow mode always
   * true; `reason` then says what enforce mode would have done.
   */
  'allowed': (boolean);
  /**
   * Opaque; pass it back in Report. Zero when not allowed.
   */
  'permit': (string);
  /**
   * True when this call is the half-open probe: its result decides.
   */
  'probe': (boolean);
  'state': (_breakerd_v1_State__Output);
  'reason': (_breakerd_v1_RejectReason__Output);
  /**
   * When rejected: how long until trying again is useful.
   */
  'retry_after': (_google_protobuf_Duration__Output | null);
}

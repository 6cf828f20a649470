// Original file: proto/breakerd/v1/breaker.proto

import type { State as _breakerd_v1_State, State__Output as _breakerd_v1_State__Output } from '../../breakerd/v1/State';
import type { Effect as _breakerd_v1_Effect, Effect__Output as _breakerd_v1_Effect__Output } from '../../breakerd/v1/Effect';

export interface ReportResponse {
  /**
   * The breaker's state after the report.
   */
  'state'?: (_breakerd_v1_State);
  'effect'?: (_breakerd_v1_Effect);
}

export interface ReportResponse__Output {
  /**
   * The breaker's state after the report.
   */
  'state': (_breakerd_v1_State__Output);
  'effect': (_breakerd_v1_Effect__Output);
}

// Original file: proto/breakerd/v1/breaker.proto

import type { BreakerStatus as _breakerd_v1_BreakerStatus, BreakerStatus__Output as _breakerd_v1_BreakerStatus__Output } from '../../breakerd/v1/BreakerStatus';

export interface AdminResponse {
  'status'?: (_breakerd_v1_BreakerStatus | null);
}

export interface AdminResponse__Output {
  'status': (_breakerd_v1_BreakerStatus__Output | null);
}

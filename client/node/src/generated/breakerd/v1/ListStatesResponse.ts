// Original file: proto/breakerd/v1/breaker.proto

import type { BreakerStatus as _breakerd_v1_BreakerStatus, BreakerStatus__Output as _breakerd_v1_BreakerStatus__Output } from '../../breakerd/v1/BreakerStatus';

export interface ListStatesResponse {
  'breakers'?: (_breakerd_v1_BreakerStatus)[];
}

export interface ListStatesResponse__Output {
  'breakers': (_breakerd_v1_BreakerStatus__Output)[];
}

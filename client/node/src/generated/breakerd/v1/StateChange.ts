// Original file: proto/breakerd/v1/breaker.proto

import type { State as _breakerd_v1_State, State__Output as _breakerd_v1_State__Output } from '../../breakerd/v1/State';
import type { Duration as _google_protobuf_Duration, Duration__Output as _google_protobuf_Duration__Output } from '../../google/protobuf/Duration';
import type { Long } from '@grpc/proto-loader';

export interface StateChange {
  'dependency'?: (string);
  'state'?: (_breakerd_v1_State);
  'previous'?: (_breakerd_v1_State);
  /**
   * Why: "initial", "consecutive_failures", "failure_rate",
   * "slow_call_rate", "cooldown_elapsed", "probe_succeeded", "probe_failed",
   * "forced_open", "forced_closed", "reset", "reload", "fleet", "restored",
   * "fleet_failure_rate", "fleet_slow_call_rate", "ramp_failed" (a trip
   * while gentle recovery ramped), "hung_calls" (calls unreported past
   * inflight.hang_after tipped a rate rule). Events that are not state
   * changes (previous == state): "reload" (the mode or local_decisions
   * changed), "created" (the breaker was created, at this generation),
   * "evicted" (it was evicted: forget it; a new one starts above this
   * generation), "ramp_done" (its recovery ramp ended).
   */
  'reason'?: (string);
  'generation'?: (number | string | Long);
  /**
   * Time left in the cooldown when the state is open: refuse locally until
   * then, and no timer is needed on the server.
   */
  'retry_after'?: (_google_protobuf_Duration | null);
  /**
   * True when a client may decide first attempts itself after this event
   * (DESIGN.md "Local decisions"): closed, not forced, not in shadow mode,
   * not ramping, and the policy's local_decisions on. False in the first
   * event of a dependency with no breaker yet, and in "evicted".
   */
  'local_decisions'?: (boolean);
  /**
   * The breaker's policy mode: "enforce" or "shadow". A shadow breaker
   * computes and reports every transition but the sidecar always allows its
   * calls, so a client never refuses a shadow breaker locally.
   */
  'mode'?: (string);
}

export interface StateChange__Output {
  'dependency': (string);
  'state': (_breakerd_v1_State__Output);
  'previous': (_breakerd_v1_State__Output);
  /**
   * Why: "initial", "consecutive_failures", "failure_rate",
   * "slow_call_rate", "cooldown_elapsed", "probe_succeeded", "probe_failed",
   * "forced_open", "forced_closed", "reset", "reload", "fleet", "restored",
   * "fleet_failure_rate", "fleet_slow_call_rate", "ramp_failed" (a trip
   * while gentle recovery ramped), "hung_calls" (calls unreported past
   * inflight.hang_after tipped a rate rule). Events that are not state
   * changes (previous == state): "reload" (the mode or local_decisions
   * changed), "created" (the breaker was created, at this generation),
   * "evicted" (it was evicted: forget it; a new one starts above this
   * generation), "ramp_done" (its recovery ramp ended).
   */
  'reason': (string);
  'generation': (string);
  /**
   * Time left in the cooldown when the state is open: refuse locally until
   * then, and no timer is needed on the server.
   */
  'retry_after': (_google_protobuf_Duration__Output | null);
  /**
   * True when a client may decide first attempts itself after this event
   * (DESIGN.md "Local decisions"): closed, not forced, not in shadow mode,
   * not ramping, and the policy's local_decisions on. False in the first
   * event of a dependency with no breaker yet, and in "evicted".
   */
  'local_decisions': (boolean);
  /**
   * The breaker's policy mode: "enforce" or "shadow". A shadow breaker
   * computes and reports every transition but the sidecar always allows its
   * calls, so a client never refuses a shadow breaker locally.
   */
  'mode': (string);
}

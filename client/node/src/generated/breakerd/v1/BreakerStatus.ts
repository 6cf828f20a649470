// Original file: proto/breakerd/v1/breaker.proto

import type { State as _breakerd_v1_State, State__Output as _breakerd_v1_State__Output } from '../../breakerd/v1/State';
import type { Duration as _google_protobuf_Duration, Duration__Output as _google_protobuf_Duration__Output } from '../../google/protobuf/Duration';
import type { Long } from '@grpc/proto-loader';

export interface BreakerStatus {
  'dependency'?: (string);
  'state'?: (_breakerd_v1_State);
  /**
   * Bumped at every transition; permits carry it.
   */
  'generation'?: (number | string | Long);
  /**
   * Time left in the cooldown when open; zero otherwise.
   */
  'retry_after'?: (_google_protobuf_Duration | null);
  /**
   * Counted outcomes in the sliding window.
   */
  'window_calls'?: (number | string | Long);
  'window_failures'?: (number | string | Long);
  'window_slow_calls'?: (number | string | Long);
  'failure_rate'?: (number | string);
  'consecutive_failures'?: (number);
  /**
   * Number of failed probes since the breaker last closed (cooldown doubles
   * with each).
   */
  'escalation_level'?: (number);
  /**
   * The `match` of the policy in force; "defaults" when none matched.
   */
  'policy'?: (string);
  /**
   * "enforce" or "shadow".
   */
  'mode'?: (string);
  /**
   * True while a half-open probe is out and its lease has not lapsed.
   */
  'probe_in_flight'?: (boolean);
  /**
   * Gentle recovery: the share of first attempts admitted now, rising to 1
   * over recovery.ramp after a probe closes the breaker; 1 when not
   * ramping.
   */
  'admit_share'?: (number | string);
  /**
   * Permits out within the permit horizon: acquired, not reported and not
   * (yet) counted as hung.
   */
  'inflight'?: (number | string | Long);
  /**
   * Fleet mode (fleet.share_window): the fleet's counted calls and
   * failures over this breaker's window, as last read from the fleet (every
   * --fleet-sync-interval while it has traffic); zero once that read is
   * older than the window, and without a fleet.
   */
  'fleet_window_calls'?: (number | string | Long);
  'fleet_window_failures'?: (number | string | Long);
}

export interface BreakerStatus__Output {
  'dependency': (string);
  'state': (_breakerd_v1_State__Output);
  /**
   * Bumped at every transition; permits carry it.
   */
  'generation': (string);
  /**
   * Time left in the cooldown when open; zero otherwise.
   */
  'retry_after': (_google_protobuf_Duration__Output | null);
  /**
   * Counted outcomes in the sliding window.
   */
  'window_calls': (string);
  'window_failures': (string);
  'window_slow_calls': (string);
  'failure_rate': (number);
  'consecutive_failures': (number);
  /**
   * Number of failed probes since the breaker last closed (cooldown doubles
   * with each).
   */
  'escalation_level': (number);
  /**
   * The `match` of the policy in force; "defaults" when none matched.
   */
  'policy': (string);
  /**
   * "enforce" or "shadow".
   */
  'mode': (string);
  /**
   * True while a half-open probe is out and its lease has not lapsed.
   */
  'probe_in_flight': (boolean);
  /**
   * Gentle recovery: the share of first attempts admitted now, rising to 1
   * over recovery.ramp after a probe closes the breaker; 1 when not
   * ramping.
   */
  'admit_share': (number);
  /**
   * Permits out within the permit horizon: acquired, not reported and not
   * (yet) counted as hung.
   */
  'inflight': (string);
  /**
   * Fleet mode (fleet.share_window): the fleet's counted calls and
   * failures over this breaker's window, as last read from the fleet (every
   * --fleet-sync-interval while it has traffic); zero once that read is
   * older than the window, and without a fleet.
   */
  'fleet_window_calls': (string);
  'fleet_window_failures': (string);
}

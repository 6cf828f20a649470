// Original file: proto/breakerd/v1/breaker.proto

import type { Outcome as _breakerd_v1_Outcome, Outcome__Output as _breakerd_v1_Outcome__Output } from '../../breakerd/v1/Outcome';
import type { Duration as _google_protobuf_Duration, Duration__Output as _google_protobuf_Duration__Output } from '../../google/protobuf/Duration';
import type { Long } from '@grpc/proto-loader';

export interface ReportRequest {
  'dependency'?: (string);
  /**
   * The permit from the Acquire that allowed this call.
   */
  'permit'?: (number | string | Long);
  /**
   * Explicit class; if UNSPECIFIED, http_status or grpc_code is classified.
   */
  'outcome'?: (_breakerd_v1_Outcome);
  /**
   * HTTP status of the upstream response (100-599), 0 if none.
   */
  'http_status'?: (number);
  /**
   * gRPC status code of the upstream call (0-16), when it was a gRPC call.
   */
  'grpc_code'?: (number);
  /**
   * How long the guarded call took; feeds the slow-call rule and histogram.
   */
  'latency'?: (_google_protobuf_Duration | null);
  /**
   * The upstream's Retry-After, if any: an opening cooldown is at least this.
   */
  'retry_after'?: (_google_protobuf_Duration | null);
  /**
   * For a call granted through a fallback chain: the chain's name (named
   * like a dependency; empty: not part of a chain) and the granted
   * dependency's position in the caller's full chain (0-based). Counted in
   * breakerd_chain_outcomes_total{chain,tier,class}. Tiers are 0 to 63; a
   * tier without a chain is refused.
   */
  'chain'?: (string);
  'tier'?: (number);
  '_grpc_code'?: "grpc_code";
}

export interface ReportRequest__Output {
  'dependency': (string);
  /**
   * The permit from the Acquire that allowed this call.
   */
  'permit': (string);
  /**
   * Explicit class; if UNSPECIFIED, http_status or grpc_code is classified.
   */
  'outcome': (_breakerd_v1_Outcome__Output);
  /**
   * HTTP status of the upstream response (100-599), 0 if none.
   */
  'http_status': (number);
  /**
   * gRPC status code of the upstream call (0-16), when it was a gRPC call.
   */
  'grpc_code'?: (number);
  /**
   * How long the guarded call took; feeds the slow-call rule and histogram.
   */
  'latency': (_google_protobuf_Duration__Output | null);
  /**
   * The upstream's Retry-After, if any: an opening cooldown is at least this.
   */
  'retry_after': (_google_protobuf_Duration__Output | null);
  /**
   * For a call granted through a fallback chain: the chain's name (named
   * like a dependency; empty: not part of a chain) and the granted
   * dependency's position in the caller's full chain (0-based). Counted in
   * breakerd_chain_outcomes_total{chain,tier,class}. Tiers are 0 to 63; a
   * tier without a chain is refused.
   */
  'chain': (string);
  'tier': (number);
  '_grpc_code'?: "grpc_code";
}

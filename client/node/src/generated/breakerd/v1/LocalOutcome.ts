// Original file: proto/breakerd/v1/breaker.proto

import type { Outcome as _breakerd_v1_Outcome, Outcome__Output as _breakerd_v1_Outcome__Output } from '../../breakerd/v1/Outcome';
import type { Duration as _google_protobuf_Duration, Duration__Output as _google_protobuf_Duration__Output } from '../../google/protobuf/Duration';

/**
 * Local decisions (ReportBatch): what a Watch client decided and saw
 * without the sidecar since its last batch.
 */
export interface LocalOutcome {
  /**
   * As in ReportRequest.
   */
  'outcome'?: (_breakerd_v1_Outcome);
  'http_status'?: (number);
  'grpc_code'?: (number);
  'latency'?: (_google_protobuf_Duration | null);
  'retry_after'?: (_google_protobuf_Duration | null);
  /**
   * A call granted through a named fallback chain: as ReportRequest's.
   */
  'chain'?: (string);
  'tier'?: (number);
  '_grpc_code'?: "grpc_code";
}

/**
 * Local decisions (ReportBatch): what a Watch client decided and saw
 * without the sidecar since its last batch.
 */
export interface LocalOutcome__Output {
  /**
   * As in ReportRequest.
   */
  'outcome': (_breakerd_v1_Outcome__Output);
  'http_status': (number);
  'grpc_code'?: (number);
  'latency': (_google_protobuf_Duration__Output | null);
  'retry_after': (_google_protobuf_Duration__Output | null);
  /**
   * A call granted through a named fallback chain: as ReportRequest's.
   */
  'chain': (string);
  'tier': (number);
  '_grpc_code'?: "grpc_code";
}

import type * as grpc from '@grpc/grpc-js';
import type { EnumTypeDefinition, MessageTypeDefinition } from '@grpc/proto-loader';

import type { AcquireFirstRequest as _breakerd_v1_AcquireFirstRequest, AcquireFirstRequest__Output as _breakerd_v1_AcquireFirstRequest__Output } from './breakerd/v1/AcquireFirstRequest';
import type { AcquireFirstResponse as _breakerd_v1_AcquireFirstResponse, AcquireFirstResponse__Output as _breakerd_v1_AcquireFirstResponse__Output } from './breakerd/v1/AcquireFirstResponse';
import type { AcquireRequest as _breakerd_v1_AcquireRequest, AcquireRequest__Output as _breakerd_v1_AcquireRequest__Output } from './breakerd/v1/AcquireRequest';
import type { AcquireResponse as _breakerd_v1_AcquireResponse, AcquireResponse__Output as _breakerd_v1_AcquireResponse__Output } from './breakerd/v1/AcquireResponse';
import type { AdminClient as _breakerd_v1_AdminClient, AdminDefinition as _breakerd_v1_AdminDefinition } from './breakerd/v1/Admin';
import type { AdminResponse as _breakerd_v1_AdminResponse, AdminResponse__Output as _breakerd_v1_AdminResponse__Output } from './breakerd/v1/AdminResponse';
import type { BreakerClient as _breakerd_v1_BreakerClient, BreakerDefinition as _breakerd_v1_BreakerDefinition } from './breakerd/v1/Breaker';
import type { BreakerStatus as _breakerd_v1_BreakerStatus, BreakerStatus__Output as _breakerd_v1_BreakerStatus__Output } from './breakerd/v1/BreakerStatus';
import type { ChainDecision as _breakerd_v1_ChainDecision, ChainDecision__Output as _breakerd_v1_ChainDecision__Output } from './breakerd/v1/ChainDecision';
import type { ClientDecisions as _breakerd_v1_ClientDecisions, ClientDecisions__Output as _breakerd_v1_ClientDecisions__Output } from './breakerd/v1/ClientDecisions';
import type { DependencyBatch as _breakerd_v1_DependencyBatch, DependencyBatch__Output as _breakerd_v1_DependencyBatch__Output } from './breakerd/v1/DependencyBatch';
import type { ForceCloseRequest as _breakerd_v1_ForceCloseRequest, ForceCloseRequest__Output as _breakerd_v1_ForceCloseRequest__Output } from './breakerd/v1/ForceCloseRequest';
import type { ForceOpenRequest as _breakerd_v1_ForceOpenRequest, ForceOpenRequest__Output as _breakerd_v1_ForceOpenRequest__Output } from './breakerd/v1/ForceOpenRequest';
import type { GetStateRequest as _breakerd_v1_GetStateRequest, GetStateRequest__Output as _breakerd_v1_GetStateRequest__Output } from './breakerd/v1/GetStateRequest';
import type { ListStatesRequest as _breakerd_v1_ListStatesRequest, ListStatesRequest__Output as _breakerd_v1_ListStatesRequest__Output } from './breakerd/v1/ListStatesRequest';
import type { ListStatesResponse as _breakerd_v1_ListStatesResponse, ListStatesResponse__Output as _breakerd_v1_ListStatesResponse__Output } from './breakerd/v1/ListStatesResponse';
import type { LocalOutcome as _breakerd_v1_LocalOutcome, LocalOutcome__Output as _breakerd_v1_LocalOutcome__Output } from './breakerd/v1/LocalOutcome';
import type { ReportBatchRequest as _breakerd_v1_ReportBatchRequest, ReportBatchRequest__Output as _breakerd_v1_ReportBatchRequest__Output } from './breakerd/v1/ReportBatchRequest';
import type { ReportBatchResponse as _breakerd_v1_ReportBatchResponse, ReportBatchResponse__Output as _breakerd_v1_ReportBatchResponse__Output } from './breakerd/v1/ReportBatchResponse';
import type { ReportRequest as _breakerd_v1_ReportRequest, ReportRequest__Output as _breakerd_v1_ReportRequest__Output } from './breakerd/v1/ReportRequest';
import type { ReportResponse as _breakerd_v1_ReportResponse, ReportResponse__Output as _breakerd_v1_ReportResponse__Output } from './breakerd/v1/ReportResponse';
import type { ResetRequest as _breakerd_v1_ResetRequest, ResetRequest__Output as _breakerd_v1_ResetRequest__Output } from './breakerd/v1/ResetRequest';
import type { StateChange as _breakerd_v1_StateChange, StateChange__Output as _breakerd_v1_StateChange__Output } from './breakerd/v1/StateChange';
import type { WatchRequest as _breakerd_v1_WatchRequest, WatchRequest__Output as _breakerd_v1_WatchRequest__Output } from './breakerd/v1/WatchRequest';
import type { Duration as _google_protobuf_Duration, Duration__Output as _google_protobuf_Duration__Output } from './google/protobuf/Duration';

type SubtypeConstructor<Constructor extends new (...args: any) => any, Subtype> = {
  new(...args: ConstructorParameters<Constructor>): Subtype;
};

export interface ProtoGrpcType {
  breakerd: {
    v1: {
      AcquireFirstRequest: MessageTypeDefinition<_breakerd_v1_AcquireFirstRequest, _breakerd_v1_AcquireFirstRequest__Output>
      AcquireFirstResponse: MessageTypeDefinition<_breakerd_v1_AcquireFirstResponse, _breakerd_v1_AcquireFirstResponse__Output>
      AcquireRequest: MessageTypeDefinition<_breakerd_v1_AcquireRequest, _breakerd_v1_AcquireRequest__Output>
      AcquireResponse: MessageTypeDefinition<_breakerd_v1_AcquireResponse, _breakerd_v1_AcquireResponse__Output>
      /**
       * Operator overrides. Every call needs `authorization: Bearer <token>`
       * metadata; without a configured token (--admin-token-file) every call is
       * refused. UNAUTHENTICATED for a missing, malformed or wrong token, or when
       * admin is disabled (do not retry); INVALID_ARGUMENT for a bad name;
       * RESOURCE_EXHAUSTED when max_breakers is reached.
       */
      Admin: SubtypeConstructor<typeof grpc.Client, _breakerd_v1_AdminClient> & { service: _breakerd_v1_AdminDefinition }
      AdminResponse: MessageTypeDefinition<_breakerd_v1_AdminResponse, _breakerd_v1_AdminResponse__Output>
      /**
       * The per-call API. All methods are cheap and safe to call on every request.
       */
      Breaker: SubtypeConstructor<typeof grpc.Client, _breakerd_v1_BreakerClient> & { service: _breakerd_v1_BreakerDefinition }
      BreakerStatus: MessageTypeDefinition<_breakerd_v1_BreakerStatus, _breakerd_v1_BreakerStatus__Output>
      ChainDecision: MessageTypeDefinition<_breakerd_v1_ChainDecision, _breakerd_v1_ChainDecision__Output>
      ClientDecisions: MessageTypeDefinition<_breakerd_v1_ClientDecisions, _breakerd_v1_ClientDecisions__Output>
      DependencyBatch: MessageTypeDefinition<_breakerd_v1_DependencyBatch, _breakerd_v1_DependencyBatch__Output>
      Effect: EnumTypeDefinition
      ForceCloseRequest: MessageTypeDefinition<_breakerd_v1_ForceCloseRequest, _breakerd_v1_ForceCloseRequest__Output>
      ForceOpenRequest: MessageTypeDefinition<_breakerd_v1_ForceOpenRequest, _breakerd_v1_ForceOpenRequest__Output>
      GetStateRequest: MessageTypeDefinition<_breakerd_v1_GetStateRequest, _breakerd_v1_GetStateRequest__Output>
      ListStatesRequest: MessageTypeDefinition<_breakerd_v1_ListStatesRequest, _breakerd_v1_ListStatesRequest__Output>
      ListStatesResponse: MessageTypeDefinition<_breakerd_v1_ListStatesResponse, _breakerd_v1_ListStatesResponse__Output>
      LocalOutcome: MessageTypeDefinition<_breakerd_v1_LocalOutcome, _breakerd_v1_LocalOutcome__Output>
      Outcome: EnumTypeDefinition
      RejectReason: EnumTypeDefinition
      ReportBatchRequest: MessageTypeDefinition<_breakerd_v1_ReportBatchRequest, _breakerd_v1_ReportBatchRequest__Output>
      ReportBatchResponse: MessageTypeDefinition<_breakerd_v1_ReportBatchResponse, _breakerd_v1_ReportBatchResponse__Output>
      ReportRequest: MessageTypeDefinition<_breakerd_v1_ReportRequest, _breakerd_v1_ReportRequest__Output>
      ReportResponse: MessageTypeDefinition<_breakerd_v1_ReportResponse, _breakerd_v1_ReportResponse__Output>
      ResetRequest: MessageTypeDefinition<_breakerd_v1_ResetRequest, _breakerd_v1_ResetRequest__Output>
      State: EnumTypeDefinition
      StateChange: MessageTypeDefinition<_breakerd_v1_StateChange, _breakerd_v1_StateChange__Output>
      WatchRequest: MessageTypeDefinition<_breakerd_v1_WatchRequest, _breakerd_v1_WatchRequest__Output>
    }
  }
  google: {
    protobuf: {
      Duration: MessageTypeDefinition<_google_protobuf_Duration, _google_protobuf_Duration__Output>
    }
  }
}


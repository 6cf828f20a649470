// Original file: proto/breakerd/v1/breaker.proto

import type * as grpc from '@grpc/grpc-js'
import type { MethodDefinition } from '@grpc/proto-loader'
import type { AdminResponse as _breakerd_v1_AdminResponse, AdminResponse__Output as _breakerd_v1_AdminResponse__Output } from '../../breakerd/v1/AdminResponse';
import type { ForceCloseRequest as _breakerd_v1_ForceCloseRequest, ForceCloseRequest__Output as _breakerd_v1_ForceCloseRequest__Output } from '../../breakerd/v1/ForceCloseRequest';
import type { ForceOpenRequest as _breakerd_v1_ForceOpenRequest, ForceOpenRequest__Output as _breakerd_v1_ForceOpenRequest__Output } from '../../breakerd/v1/ForceOpenRequest';
import type { ResetRequest as _breakerd_v1_ResetRequest, ResetRequest__Output as _breakerd_v1_ResetRequest__Output } from '../../breakerd/v1/ResetRequest';

/**
 * Operator overrides. Every call needs `authorization: Bearer <token>`
 * metadata; without a configured token (--admin-token-file) every call is
 * refused. UNAUTHENTICATED for a missing, malformed or wrong token, or when
 * admin is disabled (do not retry); INVALID_ARGUMENT for a bad name;
 * RESOURCE_EXHAUSTED when max_breakers is reached.
 */
export interface AdminClient extends grpc.Client {
  /**
   * Allow every Acquire (outcomes still recorded) until ForceOpen or Reset.
   */
  ForceClose(argument: _breakerd_v1_ForceCloseRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_breakerd_v1_AdminResponse__Output>): grpc.ClientUnaryCall;
  ForceClose(argument: _breakerd_v1_ForceCloseRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_breakerd_v1_AdminResponse__Output>): grpc.ClientUnaryCall;
  ForceClose(argument: _breakerd_v1_ForceCloseRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_breakerd_v1_AdminResponse__Output>): grpc.ClientUnaryCall;
  ForceClose(argument: _breakerd_v1_ForceCloseRequest, callback: grpc.requestCallback<_breakerd_v1_AdminResponse__Output>): grpc.ClientUnaryCall;
  /**
   * Allow every Acquire (outcomes still recorded) until ForceOpen or Reset.
   */
  forceClose(argument: _breakerd_v1_ForceCloseRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_breakerd_v1_AdminResponse__Output>): grpc.ClientUnaryCall;
  forceClose(argument: _breakerd_v1_ForceCloseRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_breakerd_v1_AdminResponse__Output>): grpc.ClientUnaryCall;
  forceClose(argument: _breakerd_v1_ForceCloseRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_breakerd_v1_AdminResponse__Output>): grpc.ClientUnaryCall;
  forceClose(argument: _breakerd_v1_ForceCloseRequest, callback: grpc.requestCallback<_breakerd_v1_AdminResponse__Output>): grpc.ClientUnaryCall;
  
  /**
   * Reject every Acquire until ForceClose or Reset.
   */
  ForceOpen(argument: _breakerd_v1_ForceOpenRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_breakerd_v1_AdminResponse__Output>): grpc.ClientUnaryCall;
  ForceOpen(argument: _breakerd_v1_ForceOpenRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_breakerd_v1_AdminResponse__Output>): grpc.ClientUnaryCall;
  ForceOpen(argument: _breakerd_v1_ForceOpenRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_breakerd_v1_AdminResponse__Output>): grpc.ClientUnaryCall;
  ForceOpen(argument: _breakerd_v1_ForceOpenRequest, callback: grpc.requestCallback<_breakerd_v1_AdminResponse__Output>): grpc.ClientUnaryCall;
  /**
   * Reject every Acquire until ForceClose or Reset.
   */
  forceOpen(argument: _breakerd_v1_ForceOpenRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_breakerd_v1_AdminResponse__Output>): grpc.ClientUnaryCall;
  forceOpen(argument: _breakerd_v1_ForceOpenRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_breakerd_v1_AdminResponse__Output>): grpc.ClientUnaryCall;
  forceOpen(argument: _breakerd_v1_ForceOpenRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_breakerd_v1_AdminResponse__Output>): grpc.ClientUnaryCall;
  forceOpen(argument: _breakerd_v1_ForceOpenRequest, callback: grpc.requestCallback<_breakerd_v1_AdminResponse__Output>): grpc.ClientUnaryCall;
  
  /**
   * Back to plain closed: override, counters and escalation cleared.
   * NOT_FOUND if no breaker exists for the name.
   */
  Reset(argument: _breakerd_v1_ResetRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_breakerd_v1_AdminResponse__Output>): grpc.ClientUnaryCall;
  Reset(argument: _breakerd_v1_ResetRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_breakerd_v1_AdminResponse__Output>): grpc.ClientUnaryCall;
  Reset(argument: _breakerd_v1_ResetRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_breakerd_v1_AdminResponse__Output>): grpc.ClientUnaryCall;
  Reset(argument: _breakerd_v1_ResetRequest, callback: grpc.requestCallback<_breakerd_v1_AdminResponse__Output>): grpc.ClientUnaryCall;
  /**
   * Back to plain closed: override, counters and escalation cleared.
   * NOT_FOUND if no breaker exists for the name.
   */
  reset(argument: _breakerd_v1_ResetRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_breakerd_v1_AdminResponse__Output>): grpc.ClientUnaryCall;
  reset(argument: _breakerd_v1_ResetRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_breakerd_v1_AdminResponse__Output>): grpc.ClientUnaryCall;
  reset(argument: _breakerd_v1_ResetRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_breakerd_v1_AdminResponse__Output>): grpc.ClientUnaryCall;
  reset(argument: _breakerd_v1_ResetRequest, callback: grpc.requestCallback<_breakerd_v1_AdminResponse__Output>): grpc.ClientUnaryCall;
  
}

/**
 * Operator overrides. Every call needs `authorization: Bearer <token>`
 * metadata; without a configured token (--admin-token-file) every call is
 * refused. UNAUTHENTICATED for a missing, malformed or wrong token, or when
 * admin is disabled (do not retry); INVALID_ARGUMENT for a bad name;
 * RESOURCE_EXHAUSTED when max_breakers is reached.
 */
export interface AdminHandlers extends grpc.UntypedServiceImplementation {
  /**
   * Allow every Acquire (outcomes still recorded) until ForceOpen or Reset.
   */
  ForceClose: grpc.handleUnaryCall<_breakerd_v1_ForceCloseRequest__Output, _breakerd_v1_AdminResponse>;
  
  /**
   * Reject every Acquire until ForceClose or Reset.
   */
  ForceOpen: grpc.handleUnaryCall<_breakerd_v1_ForceOpenRequest__Output, _breakerd_v1_AdminResponse>;
  
  /**
   * Back to plain closed: override, counters and escalation cleared.
   * NOT_FOUND if no breaker exists for the name.
   */
  Reset: grpc.handleUnaryCall<_breakerd_v1_ResetRequest__Output, _breakerd_v1_AdminResponse>;
  
}

export interface AdminDefinition extends grpc.ServiceDefinition {
  ForceClose: MethodDefinition<_breakerd_v1_ForceCloseRequest, _breakerd_v1_AdminResponse, _breakerd_v1_ForceCloseRequest__Output, _breakerd_v1_AdminResponse__Output>
  ForceOpen: MethodDefinition<_breakerd_v1_ForceOpenRequest, _breakerd_v1_AdminResponse, _breakerd_v1_ForceOpenRequest__Output, _breakerd_v1_AdminResponse__Output>
  Reset: MethodDefinition<_breakerd_v1_ResetRequest, _breakerd_v1_AdminResponse, _breakerd_v1_ResetRequest__Output, _breakerd_v1_AdminResponse__Output>
}

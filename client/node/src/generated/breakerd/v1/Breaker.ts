// Original file: proto/breakerd/v1/breaker.proto

import type * as grpc from '@grpc/grpc-js'
import type { MethodDefinition } from '@grpc/proto-loader'
import type { AcquireFirstRequest as _breakerd_v1_AcquireFirstRequest, AcquireFirstRequest__Output as _breakerd_v1_AcquireFirstRequest__Output } from '../../breakerd/v1/AcquireFirstRequest';
import type { AcquireFirstResponse as _breakerd_v1_AcquireFirstResponse, AcquireFirstResponse__Output as _breakerd_v1_AcquireFirstResponse__Output } from '../../breakerd/v1/AcquireFirstResponse';
import type { AcquireRequest as _breakerd_v1_AcquireRequest, AcquireRequest__Output as _breakerd_v1_AcquireRequest__Output } from '../../breakerd/v1/AcquireRequest';
import type { AcquireResponse as _breakerd_v1_AcquireResponse, AcquireResponse__Output as _breakerd_v1_AcquireResponse__Output } from '../../breakerd/v1/AcquireResponse';
import type { BreakerStatus as _breakerd_v1_BreakerStatus, BreakerStatus__Output as _breakerd_v1_BreakerStatus__Output } from '../../breakerd/v1/BreakerStatus';
import type { GetStateRequest as _breakerd_v1_GetStateRequest, GetStateRequest__Output as _breakerd_v1_GetStateRequest__Output } from '../../breakerd/v1/GetStateRequest';
import type { ListStatesRequest as _breakerd_v1_ListStatesRequest, ListStatesRequest__Output as _breakerd_v1_ListStatesRequest__Output } from '../../breakerd/v1/ListStatesRequest';
import type { ListStatesResponse as _breakerd_v1_ListStatesResponse, ListStatesResponse__Output as _breakerd_v1_ListStatesResponse__Output } from '../../breakerd/v1/ListStatesResponse';
import type { ReportBatchRequest as _breakerd_v1_ReportBatchRequest, ReportBatchRequest__Output as _breakerd_v1_ReportBatchRequest__Output } from '../../breakerd/v1/ReportBatchRequest';
import type { ReportBatchResponse as _breakerd_v1_ReportBatchResponse, ReportBatchResponse__Output as _breakerd_v1_ReportBatchResponse__Output } from '../../breakerd/v1/ReportBatchResponse';
import type { ReportRequest as _breakerd_v1_ReportRequest, ReportRequest__Output as _breakerd_v1_ReportRequest__Output } from '../../breakerd/v1/ReportRequest';
import type { ReportResponse as _breakerd_v1_ReportResponse, ReportResponse__Output as _breakerd_v1_ReportResponse__Output } from '../../breakerd/v1/ReportResponse';
import type { StateChange as _breakerd_v1_StateChange, StateChange__Output as _breakerd_v1_StateChange__Output } from '../../breakerd/v1/StateChange';
import type { WatchRequest as _breakerd_v1_WatchRequest, WatchRequest__Output as _breakerd_v1_WatchRequest__Output } from '../../breakerd/v1/WatchRequest';

/**
 * The per-call API. All methods are cheap and safe to call on every request.
 */
export interface BreakerClient extends grpc.Client {
  /**
   * May I call `dependency` now? OK with allowed=true and a permit, or OK with
   * allowed=false and a reason. INVALID_ARGUMENT for a bad name (do not
   * retry); RESOURCE_EXHAUSTED when max_breakers is reached (a new name
   * cannot be tracked; fail open or closed by policy).
   */
  Acquire(argument: _breakerd_v1_AcquireRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_breakerd_v1_AcquireResponse__Output>): grpc.ClientUnaryCall;
  Acquire(argument: _breakerd_v1_AcquireRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_breakerd_v1_AcquireResponse__Output>): grpc.ClientUnaryCall;
  Acquire(argument: _breakerd_v1_AcquireRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_breakerd_v1_AcquireResponse__Output>): grpc.ClientUnaryCall;
  Acquire(argument: _breakerd_v1_AcquireRequest, callback: grpc.requestCallback<_breakerd_v1_AcquireResponse__Output>): grpc.ClientUnaryCall;
  /**
   * May I call `dependency` now? OK with allowed=true and a permit, or OK with
   * allowed=false and a reason. INVALID_ARGUMENT for a bad name (do not
   * retry); RESOURCE_EXHAUSTED when max_breakers is reached (a new name
   * cannot be tracked; fail open or closed by policy).
   */
  acquire(argument: _breakerd_v1_AcquireRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_breakerd_v1_AcquireResponse__Output>): grpc.ClientUnaryCall;
  acquire(argument: _breakerd_v1_AcquireRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_breakerd_v1_AcquireResponse__Output>): grpc.ClientUnaryCall;
  acquire(argument: _breakerd_v1_AcquireRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_breakerd_v1_AcquireResponse__Output>): grpc.ClientUnaryCall;
  acquire(argument: _breakerd_v1_AcquireRequest, callback: grpc.requestCallback<_breakerd_v1_AcquireResponse__Output>): grpc.ClientUnaryCall;
  
  /**
   * Acquire over a fallback chain in one round trip. Same codes as Acquire;
   * INVALID_ARGUMENT also for an empty list or more than the limit.
   */
  AcquireFirst(argument: _breakerd_v1_AcquireFirstRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_breakerd_v1_AcquireFirstResponse__Output>): grpc.ClientUnaryCall;
  AcquireFirst(argument: _breakerd_v1_AcquireFirstRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_breakerd_v1_AcquireFirstResponse__Output>): grpc.ClientUnaryCall;
  AcquireFirst(argument: _breakerd_v1_AcquireFirstRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_breakerd_v1_AcquireFirstResponse__Output>): grpc.ClientUnaryCall;
  AcquireFirst(argument: _breakerd_v1_AcquireFirstRequest, callback: grpc.requestCallback<_breakerd_v1_AcquireFirstResponse__Output>): grpc.ClientUnaryCall;
  /**
   * Acquire over a fallback chain in one round trip. Same codes as Acquire;
   * INVALID_ARGUMENT also for an empty list or more than the limit.
   */
  acquireFirst(argument: _breakerd_v1_AcquireFirstRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_breakerd_v1_AcquireFirstResponse__Output>): grpc.ClientUnaryCall;
  acquireFirst(argument: _breakerd_v1_AcquireFirstRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_breakerd_v1_AcquireFirstResponse__Output>): grpc.ClientUnaryCall;
  acquireFirst(argument: _breakerd_v1_AcquireFirstRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_breakerd_v1_AcquireFirstResponse__Output>): grpc.ClientUnaryCall;
  acquireFirst(argument: _breakerd_v1_AcquireFirstRequest, callback: grpc.requestCallback<_breakerd_v1_AcquireFirstResponse__Output>): grpc.ClientUnaryCall;
  
  /**
   * One breaker's status. NOT_FOUND if no breaker exists for the name yet
   * (breakers are created on first Acquire); INVALID_ARGUMENT for a bad name.
   */
  GetState(argument: _breakerd_v1_GetStateRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_breakerd_v1_BreakerStatus__Output>): grpc.ClientUnaryCall;
  GetState(argument: _breakerd_v1_GetStateRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_breakerd_v1_BreakerStatus__Output>): grpc.ClientUnaryCall;
  GetState(argument: _breakerd_v1_GetStateRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_breakerd_v1_BreakerStatus__Output>): grpc.ClientUnaryCall;
  GetState(argument: _breakerd_v1_GetStateRequest, callback: grpc.requestCallback<_breakerd_v1_BreakerStatus__Output>): grpc.ClientUnaryCall;
  /**
   * One breaker's status. NOT_FOUND if no breaker exists for the name yet
   * (breakers are created on first Acquire); INVALID_ARGUMENT for a bad name.
   */
  getState(argument: _breakerd_v1_GetStateRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_breakerd_v1_BreakerStatus__Output>): grpc.ClientUnaryCall;
  getState(argument: _breakerd_v1_GetStateRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_breakerd_v1_BreakerStatus__Output>): grpc.ClientUnaryCall;
  getState(argument: _breakerd_v1_GetStateRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_breakerd_v1_BreakerStatus__Output>): grpc.ClientUnaryCall;
  getState(argument: _breakerd_v1_GetStateRequest, callback: grpc.requestCallback<_breakerd_v1_BreakerStatus__Output>): grpc.ClientUnaryCall;
  
  /**
   * Every breaker's status. Always OK.
   */
  ListStates(argument: _breakerd_v1_ListStatesRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_breakerd_v1_ListStatesResponse__Output>): grpc.ClientUnaryCall;
  ListStates(argument: _breakerd_v1_ListStatesRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_breakerd_v1_ListStatesResponse__Output>): grpc.ClientUnaryCall;
  ListStates(argument: _breakerd_v1_ListStatesRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_breakerd_v1_ListStatesResponse__Output>): grpc.ClientUnaryCall;
  ListStates(argument: _breakerd_v1_ListStatesRequest, callback: grpc.requestCallback<_breakerd_v1_ListStatesResponse__Output>): grpc.ClientUnaryCall;
  /**
   * Every breaker's status. Always OK.
   */
  listStates(argument: _breakerd_v1_ListStatesRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_breakerd_v1_ListStatesResponse__Output>): grpc.ClientUnaryCall;
  listStates(argument: _breakerd_v1_ListStatesRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_breakerd_v1_ListStatesResponse__Output>): grpc.ClientUnaryCall;
  listStates(argument: _breakerd_v1_ListStatesRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_breakerd_v1_ListStatesResponse__Output>): grpc.ClientUnaryCall;
  listStates(argument: _breakerd_v1_ListStatesRequest, callback: grpc.requestCallback<_breakerd_v1_ListStatesResponse__Output>): grpc.ClientUnaryCall;
  
  /**
   * How did the call go? OK with the effect. INVALID_ARGUMENT for a bad
   * name, a missing outcome, an out-of-range status, or a permit this process
   * never issued (garbage, or from before a restart): nothing changes, do not
   * retry.
   */
  Report(argument: _breakerd_v1_ReportRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_breakerd_v1_ReportResponse__Output>): grpc.ClientUnaryCall;
  Report(argument: _breakerd_v1_ReportRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_breakerd_v1_ReportResponse__Output>): grpc.ClientUnaryCall;
  Report(argument: _breakerd_v1_ReportRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_breakerd_v1_ReportResponse__Output>): grpc.ClientUnaryCall;
  Report(argument: _breakerd_v1_ReportRequest, callback: grpc.requestCallback<_breakerd_v1_ReportResponse__Output>): grpc.ClientUnaryCall;
  /**
   * How did the call go? OK with the effect. INVALID_ARGUMENT for a bad
   * name, a missing outcome, an out-of-range status, or a permit this process
   * never issued (garbage, or from before a restart): nothing changes, do not
   * retry.
   */
  report(argument: _breakerd_v1_ReportRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_breakerd_v1_ReportResponse__Output>): grpc.ClientUnaryCall;
  report(argument: _breakerd_v1_ReportRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_breakerd_v1_ReportResponse__Output>): grpc.ClientUnaryCall;
  report(argument: _breakerd_v1_ReportRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_breakerd_v1_ReportResponse__Output>): grpc.ClientUnaryCall;
  report(argument: _breakerd_v1_ReportRequest, callback: grpc.requestCallback<_breakerd_v1_ReportResponse__Output>): grpc.ClientUnaryCall;
  
  /**
   * A Watch client's local decisions, in one batch. OK with the counts;
   * INVALID_ARGUMENT naming the field (nothing applied); RESOURCE_EXHAUSTED
   * past 1,000 outcomes (split the batch).
   */
  ReportBatch(argument: _breakerd_v1_ReportBatchRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_breakerd_v1_ReportBatchResponse__Output>): grpc.ClientUnaryCall;
  ReportBatch(argument: _breakerd_v1_ReportBatchRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_breakerd_v1_ReportBatchResponse__Output>): grpc.ClientUnaryCall;
  ReportBatch(argument: _breakerd_v1_ReportBatchRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_breakerd_v1_ReportBatchResponse__Output>): grpc.ClientUnaryCall;
  ReportBatch(argument: _breakerd_v1_ReportBatchRequest, callback: grpc.requestCallback<_breakerd_v1_ReportBatchResponse__Output>): grpc.ClientUnaryCall;
  /**
   * A Watch client's local decisions, in one batch. OK with the counts;
   * INVALID_ARGUMENT naming the field (nothing applied); RESOURCE_EXHAUSTED
   * past 1,000 outcomes (split the batch).
   */
  reportBatch(argument: _breakerd_v1_ReportBatchRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_breakerd_v1_ReportBatchResponse__Output>): grpc.ClientUnaryCall;
  reportBatch(argument: _breakerd_v1_ReportBatchRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_breakerd_v1_ReportBatchResponse__Output>): grpc.ClientUnaryCall;
  reportBatch(argument: _breakerd_v1_ReportBatchRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_breakerd_v1_ReportBatchResponse__Output>): grpc.ClientUnaryCall;
  reportBatch(argument: _breakerd_v1_ReportBatchRequest, callback: grpc.requestCallback<_breakerd_v1_ReportBatchResponse__Output>): grpc.ClientUnaryCall;
  
  /**
   * The current state of each named dependency (all, if none named), then
   * every transition as it happens. The response headers, with
   * `breakerd-watch-subscribed: 1`, are sent as soon as the stream is
   * subscribed, so a client can tell its stream is live before any state
   * arrives. INVALID_ARGUMENT for a bad name;
   * RESOURCE_EXHAUSTED when too many streams are open or the client reads
   * too slowly (reconnect); CANCELLED/UNAVAILABLE at shutdown (reconnect
   * with backoff).
   */
  Watch(argument: _breakerd_v1_WatchRequest, metadata: grpc.Metadata, options?: grpc.CallOptions): grpc.ClientReadableStream<_breakerd_v1_StateChange__Output>;
  Watch(argument: _breakerd_v1_WatchRequest, options?: grpc.CallOptions): grpc.ClientReadableStream<_breakerd_v1_StateChange__Output>;
  /**
   * The current state of each named dependency (all, if none named), then
   * every transition as it happens. The response headers, with
   * `breakerd-watch-subscribed: 1`, are sent as soon as the stream is
   * subscribed, so a client can tell its stream is live before any state
   * arrives. INVALID_ARGUMENT for a bad name;
   * RESOURCE_EXHAUSTED when too many streams are open or the client reads
   * too slowly (reconnect); CANCELLED/UNAVAILABLE at shutdown (reconnect
   * with backoff).
   */
  watch(argument: _breakerd_v1_WatchRequest, metadata: grpc.Metadata, options?: grpc.CallOptions): grpc.ClientReadableStream<_breakerd_v1_StateChange__Output>;
  watch(argument: _breakerd_v1_WatchRequest, options?: grpc.CallOptions): grpc.ClientReadableStream<_breakerd_v1_StateChange__Output>;
  
}

/**
 * The per-call API. All methods are cheap and safe to call on every request.
 */
export interface BreakerHandlers extends grpc.UntypedServiceImplementation {
  /**
   * May I call `dependency` now? OK with allowed=true and a permit, or OK with
   * allowed=false and a reason. INVALID_ARGUMENT for a bad name (do not
   * retry); RESOURCE_EXHAUSTED when max_breakers is reached (a new name
   * cannot be tracked; fail open or closed by policy).
   */
  Acquire: grpc.handleUnaryCall<_breakerd_v1_AcquireRequest__Output, _breakerd_v1_AcquireResponse>;
  
  /**
   * Acquire over a fallback chain in one round trip. Same codes as Acquire;
   * INVALID_ARGUMENT also for an empty list or more than the limit.
   */
  AcquireFirst: grpc.handleUnaryCall<_breakerd_v1_AcquireFirstRequest__Output, _breakerd_v1_AcquireFirstResponse>;
  
  /**
   * One breaker's status. NOT_FOUND if no breaker exists for the name yet
   * (breakers are created on first Acquire); INVALID_ARGUMENT for a bad name.
   */
  GetState: grpc.handleUnaryCall<_breakerd_v1_GetStateRequest__Output, _breakerd_v1_BreakerStatus>;
  
  /**
   * Every breaker's status. Always OK.
   */
  ListStates: grpc.handleUnaryCall<_breakerd_v1_ListStatesRequest__Output, _breakerd_v1_ListStatesResponse>;
  
  /**
   * How did the call go? OK with the effect. INVALID_ARGUMENT for a bad
   * name, a missing outcome, an out-of-range status, or a permit this process
   * never issued (garbage, or from before a restart): nothing changes, do not
   * retry.
   */
  Report: grpc.handleUnaryCall<_breakerd_v1_ReportRequest__Output, _breakerd_v1_ReportResponse>;
  
  /**
   * A Watch client's local decisions, in one batch. OK with the counts;
   * INVALID_ARGUMENT naming the field (nothing applied); RESOURCE_EXHAUSTED
   * past 1,000 outcomes (split the batch).
   */
  ReportBatch: grpc.handleUnaryCall<_breakerd_v1_ReportBatchRequest__Output, _breakerd_v1_ReportBatchResponse>;
  
  /**
   * The current state of each named dependency (all, if none named), then
   * every transition as it happens. The response headers, with
   * `breakerd-watch-subscribed: 1`, are sent as soon as the stream is
   * subscribed, so a client can tell its stream is live before any state
   * arrives. INVALID_ARGUMENT for a bad name;
   * RESOURCE_EXHAUSTED when too many streams are open or the client reads
   * too slowly (reconnect); CANCELLED/UNAVAILABLE at shutdown (reconnect
   * with backoff).
   */
  Watch: grpc.handleServerStreamingCall<_breakerd_v1_WatchRequest__Output, _breakerd_v1_StateChange>;
  
}

export interface BreakerDefinition extends grpc.ServiceDefinition {
  Acquire: MethodDefinition<_breakerd_v1_AcquireRequest, _breakerd_v1_AcquireResponse, _breakerd_v1_AcquireRequest__Output, _breakerd_v1_AcquireResponse__Output>
  AcquireFirst: MethodDefinition<_breakerd_v1_AcquireFirstRequest, _breakerd_v1_AcquireFirstResponse, _breakerd_v1_AcquireFirstRequest__Output, _breakerd_v1_AcquireFirstResponse__Output>
  GetState: MethodDefinition<_breakerd_v1_GetStateRequest, _breakerd_v1_BreakerStatus, _breakerd_v1_GetStateRequest__Output, _breakerd_v1_BreakerStatus__Output>
  ListStates: MethodDefinition<_breakerd_v1_ListStatesRequest, _breakerd_v1_ListStatesResponse, _breakerd_v1_ListStatesRequest__Output, _breakerd_v1_ListStatesResponse__Output>
  Report: MethodDefinition<_breakerd_v1_ReportRequest, _breakerd_v1_ReportResponse, _breakerd_v1_ReportRequest__Output, _breakerd_v1_ReportResponse__Output>
  ReportBatch: MethodDefinition<_breakerd_v1_ReportBatchRequest, _breakerd_v1_ReportBatchResponse, _breakerd_v1_ReportBatchRequest__Output, _breakerd_v1_ReportBatchResponse__Output>
  Watch: MethodDefinition<_breakerd_v1_WatchRequest, _breakerd_v1_StateChange, _breakerd_v1_WatchRequest__Output, _breakerd_v1_StateChange__Output>
}

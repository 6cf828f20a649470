// @breakerd/client: the Node.js client of breakerd, the circuit-breaker sidecar.
import { Effect as EffectValues, type Effect__Output } from './generated/breakerd/v1/Effect';
import { RejectReason as RejectReasonValues, type RejectReason__Output } from './generated/breakerd/v1/RejectReason';
import { State as StateValues, type State__Output } from './generated/breakerd/v1/State';

export {
  BreakerdClient,
  type AcquireFirstOptions,
  type AcquireOptions,
  type BreakerdClientOptions,
  type ChainPosition,
  type Classifier,
  type ClientStats,
  type FirstOptions,
  type GuardOptions,
  type Logger,
  type ReportResult,
  type RetryOptions,
  type Settled,
} from './client';
export { BreakerOpenError, ClientClosedError, DecisionSource, type Decision, type RejectReasonName, type StateName } from './decision';
export { Outcome, type OutcomeName, type OutcomeReport } from './outcome';

/** Breaker states, e.g. `State.STATE_OPEN === 'STATE_OPEN'`. */
export const State = StateValues;
export type State = State__Output;
/** Why an Acquire was refused. */
export const RejectReason = RejectReasonValues;
export type RejectReason = RejectReason__Output;
/** What a Report did to the breaker. */
export const Effect = EffectValues;
export type Effect = Effect__Output;

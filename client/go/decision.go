package breakerd

import (
	"errors"
	"fmt"
	"time"

	pb "github.com/breakerd/breakerd/client/go/breakerdv1"
)

// State is a breaker's state as breakerd reports it (closed, open,
// half-open, forced open, forced closed).
type State = pb.State

// Reason says why an Acquire was refused.
type Reason = pb.RejectReason

// Breaker states.
const (
	StateUnspecified  = pb.State_STATE_UNSPECIFIED
	StateClosed       = pb.State_STATE_CLOSED
	StateOpen         = pb.State_STATE_OPEN
	StateHalfOpen     = pb.State_STATE_HALF_OPEN
	StateForcedOpen   = pb.State_STATE_FORCED_OPEN
	StateForcedClosed = pb.State_STATE_FORCED_CLOSED
)

// Refusal reasons.
const (
	ReasonNone          = pb.RejectReason_REJECT_REASON_UNSPECIFIED
	ReasonOpen          = pb.RejectReason_REJECT_REASON_OPEN
	ReasonProbeInFlight = pb.RejectReason_REJECT_REASON_PROBE_IN_FLIGHT
	ReasonRetryBudget   = pb.RejectReason_REJECT_REASON_RETRY_BUDGET
	ReasonForcedOpen    = pb.RejectReason_REJECT_REASON_FORCED_OPEN
	// ReasonRamp: the breaker closed recently and is recovering gently: it
	// admits a rising share of first attempts and no retry (RetryAfter may
	// be zero).
	ReasonRamp = pb.RejectReason_REJECT_REASON_RAMP
)

// Source says who made a Decision.
type Source int

const (
	// SourceSidecar: breakerd answered.
	SourceSidecar Source = iota
	// SourceLocal: decided in the client from the Watch cache, no RPC was
	// made: a refusal (the breaker open or forced open), or, with local
	// decisions, a grant of a first attempt on a closed breaker (Allowed,
	// Permit 0: report it with ReportDecision, which puts its outcome in the
	// next ReportBatch).
	SourceLocal
	// SourceFailOpen: breakerd was unreachable or slower than the decision
	// timeout; the call is allowed without a permit.
	SourceFailOpen
	// SourceFailClosed: same trouble with FailClosed; the call is refused.
	SourceFailClosed
)

func (s Source) String() string {
	switch s {
	case SourceSidecar:
		return "SIDECAR"
	case SourceLocal:
		return "LOCAL"
	case SourceFailOpen:
		return "FAIL_OPEN"
	case SourceFailClosed:
		return "FAIL_CLOSED"
	}
	return fmt.Sprintf("Source(%d)", int(s))
}

// Decision is the answer to Acquire or AcquireFirst.
type Decision struct {
	// Allowed: make the call, then Report with Permit.
	Allowed bool
	// Permit ties the Report to this Acquire; 0 when refused, on fail-open
	// (a Report with permit 0 is not sent) and for a local grant (its
	// outcome goes in a ReportBatch: report it with ReportDecision).
	Permit uint64
	// Probe is true when this call is the half-open probe.
	Probe bool
	// State of the breaker (for AcquireFirst: of the granted dependency, or
	// of the last candidate when none was granted).
	State State
	// Reason is why the call was refused (ReasonNone when allowed).
	Reason Reason
	// RetryAfter is how long until trying again is useful, when refused.
	RetryAfter time.Duration
	// Dependency the decision is for (for AcquireFirst: the one granted, or
	// "" when none was).
	Dependency string
	// Source says who decided.
	Source Source
	// Chain and Tier: for a grant of AcquireFirst with WithChain, the
	// chain's name and the granted dependency's position in it (0-based);
	// ReportDecision sends them with the outcome. Else "" and 0.
	Chain string
	Tier  uint32

	// generation is the Watch event's generation a local grant was made
	// on; its outcome is batched under it, in slot when that is still
	// pending.
	generation uint64
	slot       *depBatch
}

// localGrant: d was granted in the client (local decisions).
func (d Decision) localGrant() bool { return d.Allowed && d.Source == SourceLocal }

// ErrBreakerOpen is matched (errors.Is) by every *OpenError: the call was
// refused and not made.
var ErrBreakerOpen = errors.New("breakerd: breaker open")

// OpenError is returned by Do, Guard, Retry and First when the call was
// refused (by breakerd, the local cache, or fail-closed) and so not made.
type OpenError struct {
	Dependency string
	Reason     Reason
	State      State
	RetryAfter time.Duration
	Source     Source
}

func (e *OpenError) Error() string {
	dep := e.Dependency
	if dep == "" {
		dep = "(none granted)"
	}
	return fmt.Sprintf("breakerd: call to %s refused (%s, reason %s, retry after %s)",
		dep, e.Source, e.Reason, e.RetryAfter)
}

// Is makes errors.Is(err, ErrBreakerOpen) true.
func (e *OpenError) Is(target error) bool { return target == ErrBreakerOpen }

func openError(d Decision) *OpenError {
	return &OpenError{Dependency: d.Dependency, Reason: d.Reason, State: d.State,
		RetryAfter: d.RetryAfter, Source: d.Source}
}

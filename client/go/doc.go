// Package breakerd is the Go client of breakerd, the circuit-breaker
// sidecar.
//
// Ask before each call to an upstream dependency, tell how it went:
//
//	c, err := breakerd.New(breakerd.WithTarget("127.0.0.1:50051"))
//	if err != nil { ... }
//	defer c.Close()
//	err = c.Do(ctx, "openai/key-prod-1", func(ctx context.Context) error {
//		return callUpstream(ctx)
//	})
//	if errors.Is(err, breakerd.ErrBreakerOpen) { ... use a fallback ... }
//
// Do (and Guard, Retry, First) Acquire a permit, run the call only when
// allowed, classify its error with FromError (or WithClassifier) and Report
// the outcome with the measured latency. The two-step API is Acquire then
// Report with the Decision's permit. First and AcquireFirst take
// WithChain(name): breakerd then counts the fallback chain's decisions and
// outcomes per tier.
//
// A Client keeps one Watch stream and refuses locally, with no RPC, while a
// dependency's breaker is open (cooldown still running) or forced open, and
// its policy enforces (a shadow breaker is never refused locally). With
// local decisions (WithLocalDecisions, on by default) it also grants first
// attempts locally while the breaker is closed and breakerd's policy allows
// it (Decision.Source SourceLocal, Permit 0), and sends the grants, their
// outcomes and the decisions it made without breakerd in batches
// (ReportBatch, every 5 ms while there is something to send; see
// WithFlushInterval). A two-step local grant is reported with
// ReportDecision.
// When breakerd is unreachable or slower than the decision timeout (20 ms,
// from when the RPC is sent; at most 32 RPCs are on the wire, the rest wait
// their turn) decisions fail open (or closed, WithFailMode(FailClosed)).
// After UNAVAILABLE, or a timeout with nothing answered by breakerd since
// that RPC was sent, the sidecar is away: decisions fail open (or closed) at
// once with no RPC and Reports are held (up to 1,024) and sent once it is
// back: when a background health check (every 100 ms,
// WithAwayProbeInterval) or the Watch stream hears from it. A timeout while breakerd answers other RPCs fails that decision alone.
// Report errors never reach the caller. The availability log is rate
// limited (one line per 10 s per kind, with the count of changes held
// back). Stats returns the client's counters; after Close every call
// returns ErrClosed.
//
// The generated gRPC stubs are in the breakerdv1 subpackage.
package breakerd

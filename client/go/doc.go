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
// Report with the Decision's permit.
//
// A Client keeps one Watch stream and refuses locally, with no RPC, while a
// dependency's breaker is open (cooldown still running) or forced open, and
// its policy enforces (a shadow breaker is never refused locally).
// When breakerd is unreachable or slower than the decision timeout (20 ms)
// decisions fail open (or closed, WithFailMode(FailClosed)). After such a
// timeout or UNAVAILABLE the sidecar is away: decisions fail open (or
// closed) at once with no RPC and Reports are not sent, until a background
// health check (every 100 ms, WithAwayProbeInterval) or the Watch stream
// hears from it. Report errors never reach the caller. Stats returns the
// client's counters.
//
// The generated gRPC stubs are in the breakerdv1 subpackage.
package breakerd

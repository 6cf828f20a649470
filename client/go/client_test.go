package breakerd_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/breakerd/breakerd/client/go"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

type testLog struct{ t *testing.T }

func (w testLog) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// newClient connects to s with a generous decision timeout (the suite may
// run on a loaded machine next to other suites), logging to t.
func newClient(t *testing.T, target string, opts ...breakerd.Option) *breakerd.Client {
	t.Helper()
	base := []breakerd.Option{
		breakerd.WithTarget(target),
		breakerd.WithDecisionTimeout(2 * time.Second),
		breakerd.WithLogger(slog.New(slog.NewTextHandler(testLog{t}, nil))),
	}
	c, err := breakerd.New(append(base, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// newDefaultClient connects to s with the client's defaults (the 20 ms
// decision timeout: what the conformance scenarios run with), logging to t.
func newDefaultClient(t *testing.T, target string, opts ...breakerd.Option) *breakerd.Client {
	t.Helper()
	base := []breakerd.Option{
		breakerd.WithTarget(target),
		breakerd.WithLogger(slog.New(slog.NewTextHandler(testLog{t}, nil))),
	}
	c, err := breakerd.New(append(base, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

var errBoom = errors.New("boom")

// 1. The guard reports each class as breakerd counts it, returns the call's
// error unchanged, and does not run a refused call.
func TestGuardReportsOutcomeClasses(t *testing.T) {
	s := startSidecar(t)
	c := newClient(t, s.addr, breakerd.WithWatch(false))
	ctx := context.Background()

	cases := []struct {
		dep, class, effect string
		err                error
	}{
		{"guard/success", "success", "counted_success", nil},
		{"guard/http503", "server_error", "counted_failure", &breakerd.HTTPError{StatusCode: 503}},
		{"guard/http404", "bad_request", "neutral", &breakerd.HTTPError{StatusCode: 404}},
		{"guard/http401", "auth_error", "neutral", &breakerd.HTTPError{StatusCode: 401}},
		{"guard/http429", "rate_limited", "counted_failure", &breakerd.HTTPError{StatusCode: 429, RetryAfter: 2 * time.Second}},
		{"guard/timeout", "timeout", "counted_failure", fmt.Errorf("upstream: %w", context.DeadlineExceeded)},
		{"guard/cancelled", "cancelled", "neutral", context.Canceled},
		{"guard/conn", "connection_error", "counted_failure", &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}},
		{"guard/grpc-unavailable", "connection_error", "counted_failure", status.Error(codes.Unavailable, "down")},
		{"guard/grpc-deadline", "timeout", "counted_failure", status.Error(codes.DeadlineExceeded, "slow")},
		{"guard/grpc-notfound", "bad_request", "neutral", status.Error(codes.NotFound, "nope")},
		{"guard/grpc-internal", "server_error", "counted_failure", fmt.Errorf("wrapped: %w", status.Error(codes.Internal, "bug"))},
		{"guard/grpc-exhausted", "rate_limited", "counted_failure", status.Error(codes.ResourceExhausted, "quota")},
		{"guard/other", "server_error", "counted_failure", errBoom},
		{"guard/soft", "soft_failure", "counted_success", breakerd.Classified(errBoom, breakerd.Explicit(breakerd.ClassSoftFailure))},
	}
	for _, tc := range cases {
		calls := 0
		err := c.Do(ctx, tc.dep, func(context.Context) error { calls++; return tc.err })
		if calls != 1 || err != tc.err {
			t.Errorf("%s: calls=%d err=%v, want 1 call returning %v", tc.dep, calls, err, tc.err)
		}
		if got := s.reports(tc.dep, tc.class, tc.effect); got != 1 {
			t.Errorf("%s: breakerd_reports_total{class=%q,effect=%q} = %v, want 1", tc.dep, tc.class, tc.effect, got)
		}
	}
	if st := s.state("guard/http503"); st.ConsecutiveFailures != 1 || st.WindowFailures != 1 {
		t.Errorf("guard/http503 status %+v: want 1 consecutive failure", st)
	}

	// Guard returns the call's value.
	v, err := breakerd.Guard(ctx, c, "guard/value", func(context.Context) (int, error) { return 42, nil })
	if v != 42 || err != nil {
		t.Errorf("Guard = %d, %v", v, err)
	}

	// Two-step API with a gRPC code outcome.
	d, err := c.Acquire(ctx, "guard/two-step", 0)
	if err != nil || !d.Allowed || d.Permit == 0 || d.Source != breakerd.SourceSidecar {
		t.Fatalf("Acquire = %+v, %v", d, err)
	}
	c.Report(ctx, "guard/two-step", d.Permit, breakerd.GRPCCode(codes.OK).WithLatency(time.Millisecond))
	if got := s.reports("guard/two-step", "success", "counted_success"); got != 1 {
		t.Errorf("two-step grpc OK report counted %v times", got)
	}

	// A panicking call reports its permit as cancelled, and the panic goes on.
	func() {
		defer func() {
			if recover() == nil {
				t.Error("panic was swallowed")
			}
		}()
		_ = c.Do(ctx, "guard/panic", func(context.Context) error { panic("bug") })
	}()
	if got := s.reports("guard/panic", "cancelled", "neutral"); got != 1 {
		t.Errorf("panicking guard: cancelled reports = %v, want 1", got)
	}

	// A refused guard does not run the call and reports nothing.
	s.forceOpen("guard/forced")
	ran := false
	err = c.Do(ctx, "guard/forced", func(context.Context) error { ran = true; return nil })
	var oe *breakerd.OpenError
	if ran || !errors.Is(err, breakerd.ErrBreakerOpen) || !errors.As(err, &oe) {
		t.Fatalf("forced open: ran=%v err=%v", ran, err)
	}
	if oe.Reason != breakerd.ReasonForcedOpen || oe.Source != breakerd.SourceSidecar || oe.Dependency != "guard/forced" {
		t.Errorf("OpenError = %+v", oe)
	}
	if got := s.metric("breakerd_reports_total", map[string]string{"dependency": "guard/forced"}); got != 0 {
		t.Errorf("refused guard sent %v reports", got)
	}

	// BREAKERD_ADDR replaces the default target.
	t.Setenv("BREAKERD_ADDR", s.addr)
	envClient, err := breakerd.New(breakerd.WithDecisionTimeout(2*time.Second), breakerd.WithWatch(false))
	if err != nil {
		t.Fatal(err)
	}
	defer envClient.Close()
	if d, err := envClient.Acquire(ctx, "guard/env", 0); err != nil || d.Source != breakerd.SourceSidecar {
		t.Errorf("client on $BREAKERD_ADDR: %+v, %v", d, err)
	}

	// A bad name is an INVALID_ARGUMENT error, not a decision.
	if _, err := c.Acquire(ctx, "bad name!", 0); status.Code(err) != codes.InvalidArgument {
		t.Errorf("Acquire(bad name) err = %v, want InvalidArgument", err)
	}
}

// 2. A breaker opened through one client is refused locally by another,
// with no Acquire reaching breakerd.
func TestLocalRefusalFromAnotherClient(t *testing.T) {
	s := startSidecar(t)
	ctx := context.Background()
	tripper := newClient(t, s.addr, breakerd.WithWatch(false))
	watcher := newClient(t, s.addr)
	const dep = "refusal/upstream"

	for i := 0; i < 3; i++ {
		_ = tripper.Do(ctx, dep, func(context.Context) error { return &breakerd.HTTPError{StatusCode: 503} })
	}
	if st := s.state(dep); st.State != breakerd.StateOpen {
		t.Fatalf("after 3 failures the breaker is %v, want open", st.State)
	}
	eventually(t, "the watcher's cache to see OPEN", func() bool {
		st, ok := watcher.CachedState(dep)
		return ok && st == breakerd.StateOpen
	})

	before := s.acquires(dep)
	d, err := watcher.Acquire(ctx, dep, 0)
	if err != nil || d.Allowed || d.Source != breakerd.SourceLocal || d.Reason != breakerd.ReasonOpen {
		t.Fatalf("watcher Acquire = %+v, %v; want refused LOCAL OPEN", d, err)
	}
	if d.RetryAfter <= 0 || d.RetryAfter > 30*time.Second {
		t.Errorf("local RetryAfter = %v, want within the 30 s cooldown", d.RetryAfter)
	}
	ran := false
	err = watcher.Do(ctx, dep, func(context.Context) error { ran = true; return nil })
	var oe *breakerd.OpenError
	if ran || !errors.As(err, &oe) || oe.Source != breakerd.SourceLocal {
		t.Errorf("watcher Do: ran=%v err=%v", ran, err)
	}
	if d, _ := watcher.AcquireFirst(ctx, []string{dep}, 0); d.Allowed || d.Source != breakerd.SourceLocal {
		t.Errorf("watcher AcquireFirst = %+v, want LOCAL refusal", d)
	}
	if after := s.acquires(dep); after != before {
		t.Errorf("breakerd_acquire_total for %s went %v -> %v: the local refusal made an RPC", dep, before, after)
	}
	if got := watcher.Stats().LocalRejections; got != 3 {
		t.Errorf("LocalRejections = %d, want 3", got)
	}
	// A dependency the cache does not refuse still goes to breakerd.
	if d, err := watcher.Acquire(ctx, "refusal/other", 0); err != nil || !d.Allowed || d.Source != breakerd.SourceSidecar {
		t.Errorf("Acquire(refusal/other) = %+v, %v", d, err)
	}
}

// conformance: shadow
//
// 2b. A shadow breaker (payments/* in testConfig) is never refused locally:
// its OPEN reaches the cache (mode shadow), yet 20 guarded calls all run,
// each decided and allowed by breakerd (SIDECAR, never LOCAL). An enforcing
// breaker tripped the same way is refused LOCAL.
func TestShadowBreakerNotRefusedLocally(t *testing.T) {
	s := startSidecar(t)
	ctx := context.Background()
	tripper := newClient(t, s.addr, breakerd.WithWatch(false))
	watcher := newClient(t, s.addr)
	const shadow, enforced = "payments/psp", "enforced/psp"

	for _, dep := range []string{shadow, enforced} {
		for i := 0; i < 3; i++ {
			_ = tripper.Do(ctx, dep, func(context.Context) error { return &breakerd.HTTPError{StatusCode: 503} })
		}
		if st := s.state(dep); st.State != breakerd.StateOpen {
			t.Fatalf("%s after 3 failures: %v, want open", dep, st.State)
		}
		eventually(t, "the watcher's cache to see "+dep+" OPEN", func() bool {
			st, ok := watcher.CachedState(dep)
			return ok && st == breakerd.StateOpen
		})
	}
	if mode := s.state(shadow).Mode; mode != "shadow" {
		t.Fatalf("%s mode %q, want shadow (testConfig)", shadow, mode)
	}

	rejections := watcher.Stats().LocalRejections
	acquires := s.acquires(shadow)
	d, err := watcher.Acquire(ctx, shadow, 0)
	if err != nil || !d.Allowed || d.Source != breakerd.SourceSidecar {
		t.Fatalf("Acquire(%s) = %+v, %v; want allowed by SIDECAR", shadow, d, err)
	}
	watcher.Report(ctx, shadow, d.Permit, breakerd.Explicit(breakerd.ClassCancelled))
	if d, err := watcher.AcquireFirst(ctx, []string{shadow}, 0); err != nil || !d.Allowed || d.Source != breakerd.SourceSidecar {
		t.Errorf("AcquireFirst([%s]) = %+v, %v; want allowed by SIDECAR", shadow, d, err)
	} else {
		watcher.Report(ctx, shadow, d.Permit, breakerd.Explicit(breakerd.ClassCancelled))
	}
	if got := watcher.Stats().LocalRejections; got != rejections {
		t.Errorf("LocalRejections %d -> %d for a shadow breaker", rejections, got)
	}
	if got := s.acquires(shadow); got != acquires+2 {
		t.Errorf("breakerd_acquire_total for %s went %v -> %v, want +2", shadow, acquires, got)
	}

	// 20 guarded calls: all run, every decision breakerd's (it counts them
	// shadow_rejected_open: would have been refused, was allowed).
	decided := s.acquires(shadow)
	failOpen := watcher.Stats().FailOpen
	ran := 0
	for i := range 20 {
		if err := watcher.Do(ctx, shadow, func(context.Context) error { ran++; return nil }); err != nil {
			t.Errorf("guarded call %d of the shadow breaker: %v", i, err)
		}
	}
	if ran != 20 {
		t.Errorf("%d of 20 guarded calls ran", ran)
	}
	if got := s.acquires(shadow); got != decided+20 {
		t.Errorf("breakerd decided %v of the 20 guarded calls; want all 20", got-decided)
	}
	if st := watcher.Stats(); st.LocalRejections != rejections || st.FailOpen != failOpen {
		t.Errorf("stats %+v: want no LOCAL refusal and no fail-open (LocalRejections %d, FailOpen %d before)",
			st, rejections, failOpen)
	}
	if st, ok := watcher.CachedState(shadow); !ok || st != breakerd.StateOpen {
		t.Errorf("cache says %v (%v) for %s after the calls; want still OPEN", st, ok, shadow)
	}

	// The control: the enforcing breaker is refused locally.
	d, err = watcher.Acquire(ctx, enforced, 0)
	if err != nil || d.Allowed || d.Source != breakerd.SourceLocal || d.Reason != breakerd.ReasonOpen {
		t.Errorf("Acquire(%s) = %+v, %v; want refused LOCAL OPEN", enforced, d, err)
	}
	if got := watcher.Stats().LocalRejections; got != rejections+1 {
		t.Errorf("LocalRejections %d -> %d, want +1 for the enforcing breaker", rejections, got)
	}
}

// 3. With breakerd gone: fail open promptly (or closed), the guarded call
// runs, and the Watch cache is cleared.
func TestFailOpenWhenSidecarStopped(t *testing.T) {
	s := startSidecar(t)
	ctx := context.Background()
	c := newClient(t, s.addr)
	const forced, dep = "failopen/forced", "failopen/dep"

	s.forceOpen(forced)
	eventually(t, "the cache to see FORCED_OPEN", func() bool {
		st, ok := c.CachedState(forced)
		return ok && st == breakerd.StateForcedOpen
	})
	if d, _ := c.Acquire(ctx, forced, 0); d.Source != breakerd.SourceLocal {
		t.Fatalf("before the stop: %+v, want LOCAL", d)
	}
	if d, err := c.Acquire(ctx, dep, 0); err != nil || d.Source != breakerd.SourceSidecar || !d.Allowed {
		t.Fatalf("before the stop: %+v, %v", d, err)
	}

	s.kill()
	// The stream drops, the cache is cleared: no more LOCAL refusals.
	eventually(t, "the cache to be cleared", func() bool {
		_, known := c.CachedState(forced)
		return !known
	})
	d, err := c.Acquire(ctx, forced, 0)
	if err != nil || !d.Allowed || d.Source != breakerd.SourceFailOpen {
		t.Errorf("after the stop, Acquire(%s) = %+v, %v; want FAIL_OPEN", forced, d, err)
	}

	// Prompt even though the decision timeout is 2 s: no wait_for_ready.
	failOpenBefore := c.Stats().FailOpen
	start := time.Now()
	d, err = c.Acquire(ctx, dep, 0)
	if elapsed := time.Since(start); elapsed > time.Second {
		t.Errorf("fail-open took %v", elapsed)
	}
	if err != nil || !d.Allowed || d.Permit != 0 || d.Source != breakerd.SourceFailOpen || d.Dependency != dep {
		t.Errorf("Acquire = %+v, %v; want allowed FAIL_OPEN without permit", d, err)
	}
	ran := false
	if err := c.Do(ctx, dep, func(context.Context) error { ran = true; return nil }); err != nil || !ran {
		t.Errorf("guard while fail-open: ran=%v err=%v", ran, err)
	}
	if got := c.Stats().FailOpen; got < failOpenBefore+2 {
		t.Errorf("FailOpen counter %d -> %d, want +2", failOpenBefore, got)
	}
	d, err = c.AcquireFirst(ctx, []string{forced, dep}, 0)
	if err != nil || !d.Allowed || d.Source != breakerd.SourceFailOpen || d.Dependency != forced {
		t.Errorf("AcquireFirst = %+v, %v; want FAIL_OPEN granting the first", d, err)
	}

	// The sidecar is away (UNAVAILABLE): a Report is held, not an error;
	// Close drops it, counted, never returned.
	reportErrors := c.Stats().ReportErrors
	c.Report(ctx, dep, 12345, breakerd.Success())
	if got := c.Stats().ReportErrors; got != reportErrors {
		t.Errorf("ReportErrors %d -> %d on a Report while away; want it held, not counted", reportErrors, got)
	}
	_ = c.Close()
	if got := c.Stats().ReportErrors; got != reportErrors+1 {
		t.Errorf("ReportErrors %d -> %d after Close; want the held Report dropped and counted", reportErrors, got)
	}

	// With the default 20 ms decision timeout, a fresh client is prompt too.
	quick := newClient(t, s.addr, breakerd.WithDecisionTimeout(20*time.Millisecond))
	start = time.Now()
	if d, _ := quick.Acquire(ctx, dep, 0); d.Source != breakerd.SourceFailOpen || time.Since(start) > time.Second {
		t.Errorf("default-timeout client: %+v after %v", d, time.Since(start))
	}

	// Fail closed: refused, the call does not run.
	closed := newClient(t, s.addr, breakerd.WithFailMode(breakerd.FailClosed))
	d, err = closed.Acquire(ctx, dep, 0)
	if err != nil || d.Allowed || d.Source != breakerd.SourceFailClosed {
		t.Errorf("fail-closed Acquire = %+v, %v", d, err)
	}
	ran = false
	err = closed.Do(ctx, dep, func(context.Context) error { ran = true; return nil })
	var oe *breakerd.OpenError
	if ran || !errors.As(err, &oe) || oe.Source != breakerd.SourceFailClosed || oe.Dependency != dep {
		t.Errorf("fail-closed Do: ran=%v err=%v", ran, err)
	}
	if st := closed.Stats(); st.FailClosed != 2 || st.FailOpen != 0 {
		t.Errorf("fail-closed stats %+v", st)
	}
}

// 4. The retry helper never retries while open, and not a bad request.
func TestRetryNeverRetriesWhileOpen(t *testing.T) {
	s := startSidecar(t)
	ctx := context.Background()
	c := newClient(t, s.addr, breakerd.WithWatch(false)) // every attempt asks breakerd
	opts := breakerd.RetryOptions{MaxAttempts: 5, Base: time.Millisecond, Max: 5 * time.Millisecond}

	calls := 0
	err := c.Retry(ctx, "retry/down", opts, func(context.Context) error {
		calls++
		return &breakerd.HTTPError{StatusCode: 503}
	})
	var oe *breakerd.OpenError
	if calls != 3 || !errors.As(err, &oe) || oe.Reason != breakerd.ReasonOpen {
		t.Errorf("always failing: %d calls, err %v; want 3 calls then the breaker-open error", calls, err)
	}
	if st := s.state("retry/down"); st.State != breakerd.StateOpen {
		t.Errorf("breaker %v, want open", st.State)
	}
	if n := s.acquires("retry/down"); n != 4 {
		t.Errorf("breakerd saw %v Acquires for retry/down, want 3 allowed + 1 refused", n)
	}

	calls = 0
	bad := &breakerd.HTTPError{StatusCode: 400}
	err = c.Retry(ctx, "retry/bad", opts, func(context.Context) error { calls++; return bad })
	if calls != 1 || err != bad {
		t.Errorf("bad request: %d calls, err %v; want 1 call", calls, err)
	}

	calls = 0
	err = c.Retry(ctx, "retry/flaky", opts, func(context.Context) error {
		calls++
		if calls == 1 {
			return context.DeadlineExceeded
		}
		return nil
	})
	if calls != 2 || err != nil {
		t.Errorf("flaky: %d calls, err %v; want success on the 2nd", calls, err)
	}
	if got := s.metric("breakerd_acquire_total", map[string]string{"dependency": "retry/flaky", "decision": "allowed"}); got != 2 {
		t.Errorf("retry/flaky allowed acquires = %v, want 2", got)
	}
}

// 5. The fallback chain skips an open dependency and moves on after a
// failed call.
func TestFirstSkipsOpenDependency(t *testing.T) {
	s := startSidecar(t)
	ctx := context.Background()
	const a, b = "chain/a", "chain/b"
	s.forceOpen(a)

	var mu sync.Mutex
	var called []string
	record := func(fail ...string) func(context.Context, string) error {
		return func(_ context.Context, dep string) error {
			mu.Lock()
			called = append(called, dep)
			mu.Unlock()
			if slices.Contains(fail, dep) {
				return &breakerd.HTTPError{StatusCode: 503}
			}
			return nil
		}
	}

	// breakerd skips A (watch off: no local filtering).
	sidecarOnly := newClient(t, s.addr, breakerd.WithWatch(false))
	if err := sidecarOnly.First(ctx, []string{a, b}, record()); err != nil || !slices.Equal(called, []string{b}) {
		t.Errorf("First([A,B]) err=%v called=%v, want B only", err, called)
	}

	// The watching client drops A itself: breakerd sees no Acquire for it.
	watcher := newClient(t, s.addr)
	eventually(t, "the cache to see A forced open", func() bool {
		st, ok := watcher.CachedState(a)
		return ok && st == breakerd.StateForcedOpen
	})
	before := s.acquires(a)
	called = nil
	if err := watcher.First(ctx, []string{a, b}, record()); err != nil || !slices.Equal(called, []string{b}) {
		t.Errorf("watcher First([A,B]) err=%v called=%v, want B only", err, called)
	}
	if after := s.acquires(a); after != before {
		t.Errorf("acquire_total for A went %v -> %v", before, after)
	}

	// A failed call moves on to the next dependency.
	called = nil
	const c1, c2, c3 = "chain/c1", "chain/c2", "chain/c3"
	if err := sidecarOnly.First(ctx, []string{c1, c2, c3}, record(c1)); err != nil || !slices.Equal(called, []string{c1, c2}) {
		t.Errorf("First([c1,c2,c3]) with c1 failing: err=%v called=%v", err, called)
	}
	if s.reports(c1, "server_error", "counted_failure") != 1 || s.reports(c2, "success", "counted_success") != 1 {
		t.Error("chain reports not counted as server_error for c1 and success for c2")
	}

	// Every call fails: the last failure comes back.
	called = nil
	var he *breakerd.HTTPError
	err := sidecarOnly.First(ctx, []string{"chain/d1", "chain/d2"}, record("chain/d1", "chain/d2"))
	if !errors.As(err, &he) || !slices.Equal(called, []string{"chain/d1", "chain/d2"}) {
		t.Errorf("all failing: err=%v called=%v", err, called)
	}

	// Nothing granted: the breaker-open error, no call.
	called = nil
	err = sidecarOnly.First(ctx, []string{a}, record())
	var oe *breakerd.OpenError
	if !errors.As(err, &oe) || oe.Reason != breakerd.ReasonForcedOpen || len(called) != 0 {
		t.Errorf("only A: err=%v called=%v", err, called)
	}
}

// 6. The cache learns transitions without any Acquire, and re-learns them
// after breakerd restarts.
func TestWatchReconnect(t *testing.T) {
	s := startSidecar(t)
	ctx := context.Background()
	c := newClient(t, s.addr, breakerd.WithWatchBackoff(20*time.Millisecond, 200*time.Millisecond))

	s.forceOpen("watch/a")
	eventually(t, "the cache to learn watch/a", func() bool {
		st, ok := c.CachedState("watch/a")
		return ok && st == breakerd.StateForcedOpen
	})
	if n := s.acquires("watch/a"); n != 0 {
		t.Errorf("breakerd saw %v Acquires for watch/a", n)
	}

	s.kill()
	eventually(t, "the cache to be cleared", func() bool { _, ok := c.CachedState("watch/a"); return !ok })

	s2 := s.restart()
	s2.forceOpen("watch/b")
	eventually(t, "the reconnected cache to learn watch/b", func() bool {
		st, ok := c.CachedState("watch/b")
		return ok && st == breakerd.StateForcedOpen
	})
	if d, err := c.Acquire(ctx, "watch/b", 0); err != nil || d.Source != breakerd.SourceLocal || d.Reason != breakerd.ReasonForcedOpen {
		t.Errorf("Acquire(watch/b) = %+v, %v; want LOCAL FORCED_OPEN", d, err)
	}
	// The restarted breakerd never heard of watch/a: the cache forgot it.
	if _, ok := c.CachedState("watch/a"); ok {
		t.Error("watch/a survived the restart in the cache")
	}
	if c.Stats().WatchReconnects == 0 {
		t.Error("WatchReconnects did not rise")
	}
	// And the sidecar path works again.
	if d, err := c.Acquire(ctx, "watch/c", 0); err != nil || d.Source != breakerd.SourceSidecar {
		t.Errorf("Acquire(watch/c) after restart = %+v, %v", d, err)
	}
}

// One Client shared by many goroutines (run with -race).
func TestConcurrentUse(t *testing.T) {
	s := startSidecar(t)
	c := newClient(t, s.addr)
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 25; i++ {
				if err := c.Do(context.Background(), "concurrent/dep", func(context.Context) error { return nil }); err != nil {
					t.Error(err)
					return
				}
				_ = c.Stats()
				_, _ = c.CachedState("concurrent/dep")
			}
		}()
	}
	wg.Wait()
	if got := s.reports("concurrent/dep", "success", "counted_success"); got != 200 {
		t.Errorf("reports = %v, want 200", got)
	}
}

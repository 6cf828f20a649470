package breakerd_test

// Conformance scenarios (client/conformance/SCENARIOS.md) not covered by a
// test elsewhere: use after close, a panicking classifier, soft failures
// under the retry helper, the fallback chain after a non-retryable failure,
// cancellation during the call and during the Acquire, and WaitReady.

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/breakerd/breakerd/client/go"
)

// conformance: closed
//
// After Close (twice is fine) every entry point fails at once with
// ErrClosed, sends no RPC and counts no fail-open; a Report is dropped and
// counted in ReportErrors, never raised.
func TestClosedClientFailsAtOnce(t *testing.T) {
	s := startSidecar(t)
	ctx := context.Background()
	c := newDefaultClient(t, s.addr)
	const dep = "closed/dep"
	if err := c.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	before := c.Stats()

	ran := false
	fn := func(context.Context) error { ran = true; return nil }
	start := time.Now()
	calls := map[string]error{}
	_, calls["Acquire"] = c.Acquire(ctx, dep, 0)
	_, calls["AcquireFirst"] = c.AcquireFirst(ctx, []string{dep, "closed/other"}, 0)
	calls["Do"] = c.Do(ctx, dep, fn)
	_, calls["Guard"] = breakerd.Guard(ctx, c, dep, func(context.Context) (int, error) { ran = true; return 1, nil })
	calls["Retry"] = c.Retry(ctx, dep, breakerd.RetryOptions{}, fn)
	calls["First"] = c.First(ctx, []string{dep}, func(context.Context, string) error { ran = true; return nil })
	calls["WaitReady"] = c.WaitReady(ctx)
	if took := time.Since(start); took > time.Second {
		t.Errorf("the calls after Close took %v; want at once", took)
	}
	for name, err := range calls {
		if !errors.Is(err, breakerd.ErrClosed) || !strings.Contains(err.Error(), "breakerd client is closed") {
			t.Errorf("%s after Close = %v; want ErrClosed (\"breakerd client is closed\")", name, err)
		}
	}
	if ran {
		t.Error("a guarded function ran after Close")
	}

	c.Report(ctx, dep, 12345, breakerd.Success()) // dropped, counted, not raised
	after := c.Stats()
	if after.FailOpen != before.FailOpen || after.FailClosed != before.FailClosed || after.AwayDecisions != before.AwayDecisions {
		t.Errorf("stats %+v -> %+v: a call after Close counted as a fail-open", before, after)
	}
	if after.ReportErrors != before.ReportErrors+1 {
		t.Errorf("ReportErrors %d -> %d; want the Report after Close counted", before.ReportErrors, after.ReportErrors)
	}
	if n := s.acquires(dep); n != 0 {
		t.Errorf("breakerd counted %v Acquires for %s after Close; want no RPC", n, dep)
	}
	if n := s.metric("breakerd_reports_total", map[string]string{"dependency": dep}); n != 0 {
		t.Errorf("breakerd counted %v Reports for %s after Close", n, dep)
	}
}

// conformance: classifier-raises
//
// A classifier that panics while classifying the call's error: the panic
// reaches the caller, and the permit is reported exactly once, as the
// default classifier classifies that error (a plain error: server_error).
func TestPanickingClassifierStillReportsOnce(t *testing.T) {
	s := startSidecar(t)
	ctx := context.Background()
	type classifierBug struct{ msg string }
	bug := &classifierBug{"classifier bug"}
	c := newDefaultClient(t, s.addr, breakerd.WithWatch(false),
		breakerd.WithClassifier(func(error) breakerd.Outcome { panic(bug) }))
	const dep = "classifier/panics"
	calls := 0
	func() {
		defer func() {
			if r := recover(); r != bug {
				t.Errorf("recovered %v; want the classifier's panic", r)
			}
		}()
		_ = c.Do(ctx, dep, func(context.Context) error { calls++; return errBoom })
		t.Error("Do returned: the classifier's panic was swallowed")
	}()
	if calls != 1 {
		t.Errorf("the call ran %d times, want 1", calls)
	}
	everyPermitReported(t, s, dep)
	if n := s.reports(dep, "server_error", "counted_failure"); n != 1 {
		t.Errorf("server_error reports %v, want 1 (the default classification of a plain error)", n)
	}
	if n := s.metric("breakerd_reports_total", map[string]string{"dependency": dep}); n != 1 {
		t.Errorf("%v reports, want exactly 1", n)
	}
}

// conformance: soft-failure
//
// The retry helper (max_attempts 3) over a soft failure: one call, not
// retried, reported soft_failure, its error returned.
func TestRetryDoesNotRetrySoftFailure(t *testing.T) {
	s := startSidecar(t)
	ctx := context.Background()
	c := newDefaultClient(t, s.addr, breakerd.WithWatch(false))
	ready(t, c) // a fresh connection can take longer than 20 ms: no fail-open here
	const dep = "soft/refusal"
	errRefused := errors.New("the model refused")
	calls := 0
	err := c.Retry(ctx, dep, breakerd.RetryOptions{MaxAttempts: 3, Base: time.Millisecond},
		func(context.Context) error {
			calls++
			return breakerd.Classified(errRefused, breakerd.Explicit(breakerd.ClassSoftFailure))
		})
	if calls != 1 || !errors.Is(err, errRefused) {
		t.Errorf("soft failure: %d calls, err %v; want 1 call returning its error", calls, err)
	}
	everyPermitReported(t, s, dep)
	// The Report may still be on its way (its caller waits 20 ms at most).
	n := s.reports(dep, "soft_failure", "counted_success")
	for deadline := time.Now().Add(3 * time.Second); n == 0 && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
		n = s.reports(dep, "soft_failure", "counted_success")
	}
	if n != 1 {
		t.Errorf("soft_failure reports %v, want 1", n)
	}
	if n := s.metric("breakerd_acquire_total", map[string]string{"dependency": dep}); n != 1 {
		t.Errorf("%v Acquires, want 1 (no retry)", n)
	}
}

// conformance: first-non-retryable
//
// first([a, b]): after a's call fails with a bad request the chain stops
// (b is not called, a's error comes back); after a server error it goes on
// to b, whose result is returned. Without a chain name breakerd counts no
// chain.
func TestFirstStopsAfterNonRetryableFailure(t *testing.T) {
	s := startSidecar(t)
	ctx := context.Background()
	c := newDefaultClient(t, s.addr, breakerd.WithWatch(false))
	ready(t, c) // a fresh connection can take longer than 20 ms: no fail-open here
	badRequest := &breakerd.HTTPError{StatusCode: 400}
	serverError := &breakerd.HTTPError{StatusCode: 503}

	for _, tc := range []struct {
		name    string
		aErr    error
		wantB   bool
		aReport string
	}{
		{"bad-request", badRequest, false, "bad_request"},
		{"server-error", serverError, true, "server_error"},
	} {
		a, b := "first/"+tc.name+"/a", "first/"+tc.name+"/b"
		var called []string
		var result string
		err := c.First(ctx, []string{a, b}, func(_ context.Context, dep string) error {
			called = append(called, dep)
			if dep == a {
				return tc.aErr
			}
			result = "from " + dep
			return nil
		})
		if tc.wantB {
			if err != nil || !slices.Equal(called, []string{a, b}) || result != "from "+b {
				t.Errorf("%s: err=%v called=%v result=%q; want b called and its result", tc.name, err, called, result)
			}
		} else if err != tc.aErr || !slices.Equal(called, []string{a}) {
			t.Errorf("%s: err=%v called=%v; want a's error and b not called", tc.name, err, called)
		}
		if n := s.metric("breakerd_reports_total", map[string]string{"dependency": a, "class": tc.aReport}); n != 1 {
			t.Errorf("%s: a reported %s %v times, want 1", tc.name, tc.aReport, n)
		}
		if n, want := s.acquires(b), map[bool]float64{false: 0, true: 1}[tc.wantB]; n != want {
			t.Errorf("%s: breakerd counted %v Acquires for b, want %v", tc.name, n, want)
		}
	}
	// Without a chain name breakerd counts no chain.
	for _, name := range []string{"breakerd_chain_decisions_total", "breakerd_chain_outcomes_total"} {
		if n := s.metric(name, nil); n != 0 {
			t.Errorf("%s = %v; want 0 (First without a chain name)", name, n)
		}
	}
}

// conformance: cancel-call
//
// Five guarded calls each given up on (ctx cancelled) while the upstream
// call runs: each permit is reported once, OUTCOME_CANCELLED, the breaker
// (consecutive_failures 3) stays closed, the caller sees context.Canceled.
func TestCallCancelledByCallerIsReportedCancelled(t *testing.T) {
	s := startSidecar(t)
	// A generous decision timeout: a decision failing open on the loaded
	// machine (no permit) would leave nothing to report cancelled.
	c := newClient(t, s.addr, breakerd.WithWatch(false))
	ready(t, c)
	const dep = "cancel/call"

	// giveUp runs fn as a guarded call whose caller cancels once it runs.
	giveUp := func(dep string, fn func(context.Context) error) error {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		return c.Do(ctx, dep, func(ctx context.Context) error {
			go cancel() // the caller gives up while the upstream call runs
			return fn(ctx)
		})
	}
	for i := range 5 {
		err := giveUp(dep, func(ctx context.Context) error {
			<-ctx.Done()
			return ctx.Err()
		})
		if !errors.Is(err, context.Canceled) {
			t.Errorf("call %d: err %v, want context.Canceled", i, err)
		}
	}
	everyPermitReported(t, s, dep)
	if n := s.reports(dep, "cancelled", "neutral"); n != 5 {
		t.Errorf("cancelled reports %v, want 5", n)
	}
	if n := s.metric("breakerd_reports_total", map[string]string{"dependency": dep}); n != 5 {
		t.Errorf("%v reports in all, want 5 (all cancelled)", n)
	}
	if st := s.state(dep); st.State != breakerd.StateClosed {
		t.Errorf("breaker %v after 5 cancelled calls, want closed", st.State)
	}

	// Whatever error the upstream call makes of the caller giving up (here an
	// upstream 503 arriving after the cancel), it is reported cancelled: the
	// caller gave up, the upstream did not fail.
	const dep503 = "cancel/call-503"
	for range 3 {
		_ = giveUp(dep503, func(ctx context.Context) error {
			<-ctx.Done()
			return &breakerd.HTTPError{StatusCode: 503}
		})
	}
	everyPermitReported(t, s, dep503)
	if n := s.reports(dep503, "cancelled", "neutral"); n != 3 {
		t.Errorf("%s: cancelled reports %v, want 3", dep503, n)
	}
	if st := s.state(dep503); st.State != breakerd.StateClosed {
		t.Errorf("%s: breaker %v, want closed", dep503, st.State)
	}
}

// conformance: cancel-acquire
//
// With a 2 s decision timeout and breakerd stopped, a guarded call is given
// up on 50 ms after it starts, while its Acquire is in flight; breakerd
// continues 300 ms after the start and grants the Acquire it received. The
// caller gets its cancellation at once, the call never runs, and the permit
// is reported exactly once, OUTCOME_CANCELLED (cancelling the RPC with the
// caller would lose it).
func TestAcquireCancelledByCallerReturnsPermit(t *testing.T) {
	s := startSidecar(t)
	c := newDefaultClient(t, s.addr, breakerd.WithWatch(false), breakerd.WithDecisionTimeout(2*time.Second))
	const dep = "cancel/acquire"
	ready, cancelReady := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancelReady()
	if err := c.WaitReady(ready); err != nil {
		t.Fatal(err)
	}

	s.pause()
	ctx, cancel := context.WithCancel(context.Background())
	start := time.Now()
	time.AfterFunc(50*time.Millisecond, cancel)
	ran := false
	err := c.Do(ctx, dep, func(context.Context) error { ran = true; return nil })
	took := time.Since(start)
	if !errors.Is(err, context.Canceled) || ran {
		t.Fatalf("Do = %v (ran %v); want context.Canceled without running", err, ran)
	}
	if took > time.Second {
		t.Errorf("the cancelled caller returned after %v; want at once, not after the 2 s decision timeout", took)
	}
	time.Sleep(time.Until(start.Add(300 * time.Millisecond)))
	s.resume()

	eventually(t, "breakerd to grant the Acquire it received", func() bool {
		return s.metric("breakerd_acquire_total", map[string]string{"dependency": dep}) == 1
	})
	everyPermitReported(t, s, dep)
	if n := s.reports(dep, "cancelled", "neutral"); n != 1 {
		t.Errorf("cancelled reports %v, want 1", n)
	}
	if n := s.metric("breakerd_reports_total", map[string]string{"dependency": dep}); n != 1 {
		t.Errorf("%v reports, want exactly 1", n)
	}
}

// conformance: wait-ready
//
// WaitReady called before breakerd listens returns once it starts (300 ms
// later) and the next Acquire is breakerd's; with nothing listening it
// fails when its 500 ms timeout ends, not later.
func TestWaitReady(t *testing.T) {
	addr := freeAddr(t)
	c := newDefaultClient(t, addr)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ready := make(chan error, 1)
	go func() { ready <- c.WaitReady(ctx) }()
	time.Sleep(300 * time.Millisecond)
	select {
	case err := <-ready:
		t.Fatalf("WaitReady returned %v before breakerd started", err)
	default:
	}
	startSidecarAt(t, addr)
	if err := <-ready; err != nil {
		t.Fatalf("WaitReady after breakerd started: %v", err)
	}
	d, err := c.Acquire(ctx, "ready/dep", 0)
	if err != nil || d.Source != breakerd.SourceSidecar {
		t.Errorf("Acquire after WaitReady = %+v, %v; want SIDECAR", d, err)
	} else {
		c.Report(ctx, "ready/dep", d.Permit, breakerd.Success())
	}

	nobody := newDefaultClient(t, freeAddr(t))
	short, cancelShort := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancelShort()
	start := time.Now()
	err = nobody.WaitReady(short)
	took := time.Since(start)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("WaitReady with nothing listening = %v; want context.DeadlineExceeded", err)
	}
	if took < 500*time.Millisecond || took > time.Second {
		t.Errorf("WaitReady with nothing listening returned after %v; want when its 500 ms timeout ends", took)
	}
}

// ready waits up to 5 s for c's channel to connect.
func ready(t *testing.T, c *breakerd.Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.WaitReady(ctx); err != nil {
		t.Fatalf("WaitReady: %v", err)
	}
}

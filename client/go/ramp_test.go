package breakerd_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/breakerd/breakerd/client/go"
	pb "github.com/breakerd/breakerd/client/go/breakerdv1"
)

// rampUp opens dep (a ramp/* breaker: 3 failures, 1 s cooldown) over gRPC
// and, once its cooldown has passed, closes it with a successful probe: it
// is then recovering gently, admitting a share of first attempts and no
// retry.
func rampUp(t *testing.T, s *sidecar, dep string) {
	t.Helper()
	ctx := context.Background()
	for i := 0; i < 3; i++ {
		a, err := s.breaker.Acquire(ctx, &pb.AcquireRequest{Dependency: dep})
		if err != nil || !a.Allowed {
			t.Fatalf("Acquire(%s) %d = %v, %v", dep, i, a, err)
		}
		if _, err := s.breaker.Report(ctx, &pb.ReportRequest{Dependency: dep, Permit: a.Permit,
			Outcome: pb.Outcome_OUTCOME_SERVER_ERROR}); err != nil {
			t.Fatal(err)
		}
	}
	if st := s.state(dep).State; st != pb.State_STATE_OPEN {
		t.Fatalf("%s is %v after 3 failures, want open", dep, st)
	}
	eventually(t, "the probe of "+dep, func() bool {
		a, err := s.breaker.Acquire(ctx, &pb.AcquireRequest{Dependency: dep})
		if err != nil || !a.Probe {
			return false
		}
		_, err = s.breaker.Report(ctx, &pb.ReportRequest{Dependency: dep, Permit: a.Permit,
			Outcome: pb.Outcome_OUTCOME_SUCCESS})
		return err == nil
	})
	if st := s.state(dep); st.State != pb.State_STATE_CLOSED || st.AdmitShare >= 1 {
		t.Fatalf("%s after its probe: %v, admit share %v; want closed and ramping", dep, st.State, st.AdmitShare)
	}
}

// conformance: ramp
//
// A breaker recovering gently after its probe refuses every retry with
// REJECT_REASON_RAMP: the client hands breakerd's refusal on as it is
// (source SIDECAR, state CLOSED, so the Watch cache never refuses it), and
// the retry helper stops at it like at any refusal.
func TestRampRefusalIsARefusalFromTheSidecar(t *testing.T) {
	s := startSidecar(t)
	c := newClient(t, s.addr)
	ctx := context.Background()
	const dep = "ramp/go"
	rampUp(t, s, dep)

	d, err := c.Acquire(ctx, dep, 1)
	if err != nil || d.Allowed || d.Permit != 0 || d.Reason != breakerd.ReasonRamp ||
		d.Source != breakerd.SourceSidecar || d.State != breakerd.StateClosed {
		t.Fatalf("Acquire(%s, attempt 1) = %+v, %v; want refused by breakerd with ReasonRamp, closed", dep, d, err)
	}

	calls := 0
	opts := breakerd.RetryOptions{MaxAttempts: 3, Base: time.Millisecond, Max: 5 * time.Millisecond}
	err = c.Retry(ctx, dep, opts, func(context.Context) error {
		calls++
		return &breakerd.HTTPError{StatusCode: 503}
	})
	var oe *breakerd.OpenError
	if calls > 1 || !errors.As(err, &oe) || oe.Reason != breakerd.ReasonRamp || oe.Source != breakerd.SourceSidecar {
		t.Errorf("Retry while ramping: %d calls, err %v; want at most the first attempt, then the breaker-open error with ReasonRamp", calls, err)
	}
}

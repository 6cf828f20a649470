package breakerd_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/breakerd/breakerd/client/go"
)

// syncBuffer collects a client's log lines (written from several goroutines).
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// count is the number of log lines containing substr.
func (b *syncBuffer) count(substr string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.Count(b.buf.String(), substr)
}

// A hung breakerd (SIGSTOP): the first Acquire times out and marks it away;
// from then on decisions come from the fail mode with no RPC (away_decisions
// grows by exactly their number, Reports are not sent) until the background
// health check finds it again after SIGCONT.
func TestSidecarAwayDecidesWithoutRPC(t *testing.T) {
	s := startSidecar(t)
	ctx := context.Background()
	var logs syncBuffer
	// The decision timeout is what the first call after the stop waits;
	// generous enough for a loaded machine before the stop.
	timeout := breakerd.WithDecisionTimeout(500 * time.Millisecond)
	open := newClient(t, s.addr, timeout, breakerd.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	closed := newClient(t, s.addr, timeout, breakerd.WithWatch(false), breakerd.WithFailMode(breakerd.FailClosed))
	const dep = "away/dep"

	for _, c := range []*breakerd.Client{open, closed} {
		eventually(t, "a decision from breakerd", func() bool {
			d, err := c.Acquire(ctx, dep, 0)
			if err == nil && d.Permit != 0 {
				c.Report(ctx, dep, d.Permit, breakerd.Success())
			}
			return err == nil && d.Source == breakerd.SourceSidecar
		})
	}

	s.pause()
	// The first decision pays the RPC's timeout and marks breakerd away.
	if d, err := open.Acquire(ctx, dep, 0); err != nil || !d.Allowed || d.Source != breakerd.SourceFailOpen {
		t.Fatalf("first Acquire while stopped = %+v, %v; want FAIL_OPEN", d, err)
	}
	if d, err := closed.Acquire(ctx, dep, 0); err != nil || d.Allowed || d.Source != breakerd.SourceFailClosed {
		t.Fatalf("first Acquire (fail closed) while stopped = %+v, %v; want FAIL_CLOSED", d, err)
	}

	// Away: no RPC, so each of these is an away decision.
	before, closedBefore := open.Stats(), closed.Stats()
	const n = 5
	for i := 0; i < n; i++ {
		if d, err := open.Acquire(ctx, dep, 0); err != nil || !d.Allowed || d.Permit != 0 || d.Source != breakerd.SourceFailOpen {
			t.Fatalf("away Acquire %d = %+v, %v; want FAIL_OPEN without permit", i, d, err)
		}
		if d, err := closed.Acquire(ctx, dep, 0); err != nil || d.Allowed || d.Source != breakerd.SourceFailClosed {
			t.Fatalf("away Acquire %d (fail closed) = %+v, %v; want FAIL_CLOSED", i, d, err)
		}
	}
	d, err := open.AcquireFirst(ctx, []string{"away/a", "away/b"}, 0)
	if err != nil || !d.Allowed || d.Source != breakerd.SourceFailOpen || d.Dependency != "away/a" {
		t.Fatalf("away AcquireFirst = %+v, %v; want FAIL_OPEN granting away/a", d, err)
	}
	open.Report(ctx, dep, 12345, breakerd.Success()) // not sent: counted

	after, closedAfter := open.Stats(), closed.Stats()
	if got := after.AwayDecisions - before.AwayDecisions; got != n+1 {
		t.Errorf("AwayDecisions grew by %d, want %d (every decision while away made no RPC)", got, n+1)
	}
	if got := after.FailOpen - before.FailOpen; got != n+1 {
		t.Errorf("FailOpen grew by %d, want %d", got, n+1)
	}
	if got := after.ReportErrors - before.ReportErrors; got != 1 {
		t.Errorf("ReportErrors grew by %d, want 1 (the Report not sent while away)", got)
	}
	if got := closedAfter.AwayDecisions - closedBefore.AwayDecisions; got != n {
		t.Errorf("fail-closed AwayDecisions grew by %d, want %d", got, n)
	}
	if got := closedAfter.FailClosed - closedBefore.FailClosed; got != n || closedAfter.FailOpen != 0 {
		t.Errorf("fail-closed stats %+v -> %+v, want FailClosed +%d", closedBefore, closedAfter, n)
	}

	s.resume()
	for _, c := range []*breakerd.Client{open, closed} {
		deadline := time.Now().Add(3 * time.Second)
		for {
			d, err := c.Acquire(ctx, dep, 0)
			if err == nil && d.Source == breakerd.SourceSidecar {
				c.Report(ctx, dep, d.Permit, breakerd.Success())
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("3 s after SIGCONT Acquire still gives %+v, %v; want SIDECAR", d, err)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	if away, back := logs.count("sidecar away"), logs.count("sidecar back"); away != 1 || back != 1 {
		t.Errorf("logged away %d and back %d times, want once each", away, back)
	}
}

// After an outage long enough for gRPC's default reconnect backoff (1 s,
// x1.6 per attempt, up to 120 s) to grow past 2 s, the client decides with
// breakerd again within about a second of its restart (issue 14: Go failed
// open for 10 s after a 60 s outage, force-opens ignored meanwhile). The
// stand-in holding the port sees each connection attempt and breakerd
// restarts just after the first one past minOutage, so the test measures
// the client's whole wait for its next attempt.
func TestBackWithinASecondOfSidecarRestart(t *testing.T) {
	s := startSidecar(t)
	c := newClient(t, s.addr)
	ctx := context.Background()
	const dep = "restart/dep"
	eventually(t, "a decision from breakerd", func() bool {
		d, err := c.Acquire(ctx, dep, 0)
		return err == nil && d.Source == breakerd.SourceSidecar
	})

	// With gRPC's default backoff the attempts come about 0, 1 and 2.6 s
	// into the outage (each wait +-20%) and the next one 2.56 s (+-20%)
	// after that: past 2 s of outage, an uncapped client is at least 2 s
	// away from its next attempt.
	const minOutage = 2 * time.Second
	holder := s.crash()
	crashed := time.Now()
	for lastAttempt := crashed; lastAttempt.Sub(crashed) < minOutage; {
		if d, err := c.Acquire(ctx, dep, 0); err != nil || d.Source != breakerd.SourceFailOpen {
			t.Fatalf("Acquire during the outage = %+v, %v; want FAIL_OPEN", d, err)
		}
		select {
		case lastAttempt = <-holder.attempts:
		case <-time.After(20 * time.Millisecond):
			if time.Since(crashed) > 15*time.Second {
				t.Fatalf("no connection attempt from the client in the %v after the first %v of outage",
					15*time.Second-minOutage, minOutage)
			}
		}
	}
	holder.release()
	s2 := s.restart()
	restarted := time.Now()
	s2.forceOpen(dep)

	// Measured past the limit too, so a failure says how long it took.
	var d breakerd.Decision
	for d.Source = breakerd.SourceFailOpen; d.Source == breakerd.SourceFailOpen && time.Since(restarted) < 20*time.Second; {
		time.Sleep(10 * time.Millisecond)
		var err error
		if d, err = c.Acquire(ctx, dep, 0); err != nil {
			t.Fatal(err)
		}
	}
	took, outage := time.Since(restarted).Round(time.Millisecond), restarted.Sub(crashed).Round(time.Millisecond)
	const limit = 1500 * time.Millisecond
	if d.Source == breakerd.SourceFailOpen {
		t.Fatalf("still failing open %v after the restart (outage %v); want decisions from breakerd within %v", took, outage, limit)
	}
	// From breakerd, or LOCAL once the Watch stream has learnt it too.
	if d.Allowed || d.Reason != breakerd.ReasonForcedOpen {
		t.Errorf("first decision after the restart = %+v; want the force-open's refusal", d)
	}
	if took > limit {
		t.Errorf("decisions came from breakerd again %v after its restart (outage %v); want within %v", took, outage, limit)
	}
	t.Logf("back %v after the restart, outage %v", took, outage)
}

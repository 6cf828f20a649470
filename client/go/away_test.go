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

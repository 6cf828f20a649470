package breakerd

import (
	"context"
	"testing"
	"time"
)

// Reports made while away are held, not counted, up to maxHeldReports: the
// 1,025th drops the oldest (counted in ReportErrors). Close drops the rest,
// counted, and a Report after Close is dropped, counted.
func TestHeldReportsAreBounded(t *testing.T) {
	// Nothing listens at the target and nothing probes: away stays on.
	c, err := New(WithTarget("127.0.0.1:1"), WithWatch(false), WithAwayProbeInterval(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.away.Store(true)
	ctx := context.Background()
	for permit := uint64(1); permit <= maxHeldReports; permit++ {
		c.Report(ctx, "held/dep", permit, Success())
	}
	c.Report(ctx, "held/dep", 0, Success()) // fail-open: nothing to hold
	if got := c.Stats().ReportErrors; got != 0 {
		t.Fatalf("ReportErrors = %d after %d held Reports; want 0 (held is not an error)", got, maxHeldReports)
	}
	c.Report(ctx, "held/dep", maxHeldReports+1, Success())
	c.held.mu.Lock()
	n, oldest, newest := len(c.held.reports), c.held.reports[0].req.GetPermit(), c.held.reports[len(c.held.reports)-1].req.GetPermit()
	c.held.mu.Unlock()
	if n != maxHeldReports || oldest != 2 || newest != maxHeldReports+1 {
		t.Errorf("held %d reports, permits %d..%d; want %d, 2..%d (the oldest dropped)", n, oldest, newest, maxHeldReports, maxHeldReports+1)
	}
	if got := c.Stats().ReportErrors; got != 1 {
		t.Errorf("ReportErrors = %d; want 1 (the oldest held report dropped)", got)
	}
	_ = c.Close()
	if got := c.Stats().ReportErrors; got != 1+maxHeldReports {
		t.Errorf("ReportErrors = %d after Close; want %d (every held report dropped)", got, 1+maxHeldReports)
	}
	c.Report(ctx, "held/dep", 7, Success())
	if got := c.Stats().ReportErrors; got != 2+maxHeldReports {
		t.Errorf("ReportErrors = %d after a Report after Close; want %d", got, 2+maxHeldReports)
	}
}

package breakerd

import (
	"context"
	"log/slog"
	"sync"
	"time"

	pb "github.com/breakerd/breakerd/client/go/breakerdv1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// The sidecar is "away" after an Acquire or AcquireFirst RPC failed with
// UNAVAILABLE, or with DEADLINE_EXCEEDED while breakerd answered nothing
// after it was sent (hung, CPU-throttled or gone; a timeout while it answers
// others is only late: answers.go). While away,
// decisions are made at once from the fail mode with no RPC, Reports are
// held (heldReports) and sent once it is back, and probeLoop runs
// grpc.health.v1.Health/Check every awayProbeInterval; the sidecar is back
// when a probe answers SERVING or the Watch stream receives something.
// Nothing runs while it is present.

// marksAway says whether an Acquire/AcquireFirst error means breakerd is not
// answering in time (as opposed to answering with an error); unreachable
// first sets apart the late answers.
func marksAway(err error) bool {
	code := status.Code(err)
	return code == codes.DeadlineExceeded || code == codes.Unavailable
}

// markAway enters an away spell (logged, rate limited), answers the
// decisions waiting in the send window from the fail mode, and wakes the
// probe.
func (c *Client) markAway(err error) {
	if !c.away.CompareAndSwap(false, true) {
		return
	}
	c.window.flush()
	c.sidecarLog.wrong(slog.LevelWarn, "breakerd: sidecar away, failing "+c.failWord()+" with no RPC until it answers a health check",
		"target", c.cfg.target, "error", err)
	select {
	case c.probeWake <- struct{}{}:
	default: // a wake is already pending
	}
}

// markBack ends an away spell (logged, rate limited); via says what
// answered.
func (c *Client) markBack(via string) {
	if !c.away.CompareAndSwap(true, false) {
		return
	}
	c.sidecarLog.right(slog.LevelInfo, "breakerd: sidecar back", "target", c.cfg.target, "via", via)
	c.sendHeld()
	if c.batch != nil {
		signal(c.batch.wake) // the client decisions counted while away
	}
}

// maxHeldReports is how many Reports the client holds while away; past that
// the oldest held one is dropped (counted in report_errors).
const maxHeldReports = 1024

// heldReport is a Report made while away, kept until breakerd is back.
type heldReport struct {
	dependency string
	req        *pb.ReportRequest
}

// heldReports are the Reports made while the sidecar is away (a permit
// never reported keeps its breaker from closing, and a probe's refuses the
// dependency PROBE_IN_FLIGHT for its whole lease). Safe for concurrent use.
type heldReports struct {
	mu      sync.Mutex
	reports []heldReport // guarded by mu; oldest first
}

// hold keeps a Report made while away, then sends it at once if breakerd
// came back meanwhile (markBack's sendHeld may have run before it was kept).
// After Close it is dropped and counted.
func (c *Client) hold(dependency string, req *pb.ReportRequest) {
	h := &c.held
	h.mu.Lock()
	if c.closed.Load() { // Close takes the held reports after setting closed
		h.mu.Unlock()
		c.reportErrors.Add(1)
		return
	}
	h.reports = append(h.reports, heldReport{dependency, req})
	if len(h.reports) > maxHeldReports {
		h.reports[0] = heldReport{}
		h.reports = h.reports[1:]
		c.reportErrors.Add(1)
	}
	h.mu.Unlock()
	if !c.away.Load() {
		c.sendHeld()
	}
}

// takeHeld empties the held Reports and returns them.
func (c *Client) takeHeld() []heldReport {
	c.held.mu.Lock()
	defer c.held.mu.Unlock()
	out := c.held.reports
	c.held.reports = nil
	return out
}

// sendHeld sends the held Reports through the window's report lane, each
// from its own goroutine (not from the caller that found breakerd back). A
// Report that finds breakerd away again is held again; one whose RPC fails
// is counted in report_errors.
func (c *Client) sendHeld() {
	for _, r := range c.takeHeld() {
		go c.sendReport(context.Background(), r.dependency, r.req, false)
	}
}

// dropHeld drops the held Reports (Close), counted in report_errors.
func (c *Client) dropHeld() {
	c.reportErrors.Add(uint64(len(c.takeHeld())))
}

// awayDecision is the fail-mode decision made with no RPC while away.
func (c *Client) awayDecision(dependency string) Decision {
	c.awayDecisions.Add(1)
	return c.failDecision(dependency)
}

// probeLoop sleeps until an away spell starts, then probes until it ends;
// it returns when ctx ends (Close).
func (c *Client) probeLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.probeWake:
		}
		c.probeWhileAway(ctx)
	}
}

func (c *Client) probeWhileAway(ctx context.Context) {
	timer := time.NewTimer(c.cfg.awayProbeInterval)
	defer timer.Stop()
	for c.away.Load() {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		if c.probe(ctx) {
			c.markBack("health check")
			return
		}
		timer.Reset(c.cfg.awayProbeInterval)
	}
}

// probe is one Health/Check of the server as a whole (service ""), with the
// decision timeout as its deadline, and a connection attempt when the
// channel has none under way: an RPC on an IDLE channel starts one, but on
// a channel in TRANSIENT_FAILURE it fails at once until the reconnect
// backoff ends, so the backoff is reset first. A sidecar restarted after a
// long outage is then found by the next probe, not the next backoff.
func (c *Client) probe(ctx context.Context) bool {
	if c.conn.GetState() == connectivity.TransientFailure {
		c.conn.ResetConnectBackoff()
	}
	pctx, cancel := context.WithTimeout(ctx, c.cfg.decisionTimeout)
	defer cancel()
	resp, err := c.health.Check(pctx, &healthpb.HealthCheckRequest{})
	return err == nil && resp.GetStatus() == healthpb.HealthCheckResponse_SERVING
}

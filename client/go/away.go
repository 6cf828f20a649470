package breakerd

import (
	"context"
	"log/slog"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// The sidecar is "away" after an Acquire or AcquireFirst RPC failed with
// UNAVAILABLE, or with DEADLINE_EXCEEDED while breakerd answered nothing
// after it was sent (hung, CPU-throttled or gone; a timeout while it answers
// others is only late: answers.go). While away,
// decisions are made at once from the fail mode with no RPC, Reports are not
// sent, and probeLoop runs grpc.health.v1.Health/Check every
// awayProbeInterval; the sidecar is back when a probe answers SERVING or the
// Watch stream receives something. Nothing runs while it is present.

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

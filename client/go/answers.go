package breakerd

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"
)

// Telling a late answer from an absent breakerd (client/README.md, "Sidecar
// away"). A decision whose RPC breakerd does not answer within the decision
// timeout fails open; but on a loaded machine breakerd, or this process,
// is delayed by tens of milliseconds now and then, and marking the sidecar
// away for that would fail open every caller of a burst. So an RPC that
// timed out while breakerd answered another RPC of this client after it was
// sent is only late: that decision alone fails open. One that timed out with
// nothing answered after it was sent marks the sidecar away.

// answerClock is when breakerd last answered one of the client's RPCs
// (response headers or trailers of any RPC: a decision, a Report, a
// refusal of the request). Times are monotonic, since the clock's epoch.
type answerClock struct {
	epoch time.Time    // constant; carries a monotonic reading
	last  atomic.Int64 // time of the last answer + 1; 0: none yet
}

func newAnswerClock() *answerClock { return &answerClock{epoch: time.Now()} }

// now is the clock's time.
func (a *answerClock) now() time.Duration { return time.Since(a.epoch) }

// answered notes an answer from breakerd now.
func (a *answerClock) answered() { a.answeredAt(a.now()) }

// answeredAt notes an answer at t (a time of now()).
func (a *answerClock) answeredAt(t time.Duration) { a.last.Store(int64(t) + 1) }

// answeredSince says whether breakerd answered an RPC after sentAt (a time
// of now()).
func (a *answerClock) answeredSince(sentAt time.Duration) bool {
	last := a.last.Load()
	return last != 0 && time.Duration(last-1) > sentAt
}

// lateError is what send returns when breakerd did not answer within the
// decision timeout of the RPC being sent: a DEADLINE_EXCEEDED status
// (status.Code), with when the RPC was sent (answerClock time).
type lateError struct {
	timeout time.Duration
	sentAt  time.Duration
}

func (e *lateError) Error() string {
	return fmt.Sprintf("rpc error: code = DeadlineExceeded desc = breakerd: no answer within the decision timeout (%v) of sending", e.timeout)
}

// GRPCStatus makes status.Code(err) DEADLINE_EXCEEDED.
func (e *lateError) GRPCStatus() *status.Status {
	return status.New(codes.DeadlineExceeded, fmt.Sprintf("breakerd: no answer within the decision timeout (%v) of sending", e.timeout))
}

// rpcProgress is what the transport saw of one RPC sent by send.
type rpcProgress struct {
	answered atomic.Bool // breakerd's response headers (or trailers) arrived
}

type rpcProgressKey struct{}

// progressHandler is the channel's stats handler: when breakerd's response
// to an RPC arrives (the transport's reader goroutine reports it before the
// RPC's own goroutine gets the message) it notes the answer on the
// answerClock and marks the RPC's rpcProgress, so a caller whose timeout
// ends just then takes the answer that is already in.
type progressHandler struct{ answers *answerClock }

func (progressHandler) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context { return ctx }
func (progressHandler) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context {
	return ctx
}
func (progressHandler) HandleConn(context.Context, stats.ConnStats) {}

func (h progressHandler) HandleRPC(ctx context.Context, s stats.RPCStats) {
	switch s.(type) {
	case *stats.InHeader, *stats.InTrailer:
		h.answers.answered()
		if p, ok := ctx.Value(rpcProgressKey{}).(*rpcProgress); ok {
			p.answered.Store(true)
		}
	}
}

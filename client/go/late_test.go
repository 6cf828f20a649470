package breakerd_test

// A late answer is not an absent sidecar: an Acquire that times out while
// breakerd answers this client's other RPCs fails open alone and leaves the
// client present; one that times out with nothing answered after it was sent
// marks breakerd away. breakerd cannot be made slow for one call, so a
// stand-in Breaker service on a real loopback socket holds back the answers
// for one dependency and answers the rest at once.

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/breakerd/breakerd/client/go"
	pb "github.com/breakerd/breakerd/client/go/breakerdv1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/durationpb"
)

const (
	heldDep     = "late/held"    // the stand-in holds back its answers
	refusedDep  = "late/refused" // the stand-in refuses it (a refusal is an answer too)
	lateTimeout = 300 * time.Millisecond
)

// standInBreaker grants every Acquire at once (refuses refusedDep), except
// heldDep's (Acquire, or AcquireFirst naming it first), held until release.
type standInBreaker struct {
	pb.UnimplementedBreakerServer
	addr string

	mu       sync.Mutex
	received []string      // "Acquire dep", "AcquireFirst a,b", "Report dep OUTCOME"
	held     int           // requests held back now
	release  chan struct{} // closed by releaseHeld
	permit   uint64
}

func startStandIn(t *testing.T) *standInBreaker {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &standInBreaker{addr: ln.Addr().String(), release: make(chan struct{})}
	srv := grpc.NewServer()
	pb.RegisterBreakerServer(srv, s)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() {
		s.releaseHeld()
		srv.Stop()
	})
	return s
}

func (s *standInBreaker) note(what string) {
	s.mu.Lock()
	s.received = append(s.received, what)
	s.mu.Unlock()
}

func (s *standInBreaker) got(what string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, r := range s.received {
		if r == what {
			n++
		}
	}
	return n
}

func (s *standInBreaker) heldNow() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.held
}

// releaseHeld answers every held request (idempotent).
func (s *standInBreaker) releaseHeld() {
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-s.release:
	default:
		close(s.release)
	}
}

// decide answers for dep, holding it back first if it is heldDep.
func (s *standInBreaker) decide(ctx context.Context, dep string) (*pb.AcquireResponse, error) {
	if dep == heldDep {
		s.mu.Lock()
		s.held++
		release := s.release
		s.mu.Unlock()
		select {
		case <-release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		s.mu.Lock()
		s.held--
		s.mu.Unlock()
	}
	if dep == refusedDep {
		return &pb.AcquireResponse{State: pb.State_STATE_OPEN, Reason: pb.RejectReason_REJECT_REASON_OPEN,
			RetryAfter: durationpb.New(30 * time.Second)}, nil
	}
	s.mu.Lock()
	s.permit++
	permit := s.permit
	s.mu.Unlock()
	return &pb.AcquireResponse{Allowed: true, Permit: permit, State: pb.State_STATE_CLOSED}, nil
}

func (s *standInBreaker) Acquire(ctx context.Context, req *pb.AcquireRequest) (*pb.AcquireResponse, error) {
	s.note("Acquire " + req.Dependency)
	return s.decide(ctx, req.Dependency)
}

func (s *standInBreaker) AcquireFirst(ctx context.Context, req *pb.AcquireFirstRequest) (*pb.AcquireFirstResponse, error) {
	s.note(fmt.Sprint("AcquireFirst ", req.Dependencies))
	d, err := s.decide(ctx, req.Dependencies[0])
	if err != nil {
		return nil, err
	}
	return &pb.AcquireFirstResponse{Allowed: d.Allowed, Permit: d.Permit, State: d.State, Reason: d.Reason,
		RetryAfter: d.RetryAfter, Dependency: req.Dependencies[0]}, nil
}

func (s *standInBreaker) Report(_ context.Context, req *pb.ReportRequest) (*pb.ReportResponse, error) {
	s.note("Report " + req.Dependency + " " + req.Outcome.String())
	return &pb.ReportResponse{State: pb.State_STATE_CLOSED, Effect: pb.Effect_EFFECT_COUNTED_SUCCESS}, nil
}

// lateClient is a client of the stand-in (which has no Watch) with a 300 ms
// decision timeout, logging into logs.
func lateClient(t *testing.T, s *standInBreaker, logs *syncBuffer) *breakerd.Client {
	t.Helper()
	c := newDefaultClient(t, s.addr, breakerd.WithWatch(false), breakerd.WithDecisionTimeout(lateTimeout),
		breakerd.WithLogger(slog.New(slog.NewTextHandler(logs, nil))))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	return c
}

type lateResult struct {
	d    breakerd.Decision
	err  error
	took time.Duration
}

// sendHeld starts the decision whose answer the stand-in holds back and
// returns once the stand-in has it (it was sent).
func sendHeld(t *testing.T, c *breakerd.Client, s *standInBreaker, first bool) <-chan lateResult {
	t.Helper()
	out := make(chan lateResult, 1)
	go func() {
		start := time.Now()
		var r lateResult
		if first {
			r.d, r.err = c.AcquireFirst(context.Background(), []string{heldDep, "late/fallback"}, 0)
		} else {
			r.d, r.err = c.Acquire(context.Background(), heldDep, 0)
		}
		r.took = time.Since(start)
		out <- r
	}()
	eventually(t, "the stand-in to receive the held request", func() bool { return s.heldNow() == 1 })
	return out
}

// conformance: late-not-away
//
// One decision breakerd answers late while it answers others fails open
// alone; a decision sent after its timeout is breakerd's (SIDECAR, no away
// decision), and the late permit is reported OUTCOME_CANCELLED once it
// arrives. With nothing answered after the late one was sent, the client is
// marked away.
func TestLateAnswerIsNotAnAbsentSidecar(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name  string
		first bool // the held decision is an AcquireFirst
		other func(t *testing.T, c *breakerd.Client)
	}{
		{"acquire late while breakerd grants another", false, func(t *testing.T, c *breakerd.Client) {
			if d, err := c.Acquire(ctx, "late/other", 0); err != nil || d.Source != breakerd.SourceSidecar {
				t.Errorf("other Acquire = %+v, %v; want SIDECAR", d, err)
			}
		}},
		{"acquire late while breakerd refuses another", false, func(t *testing.T, c *breakerd.Client) {
			if d, err := c.Acquire(ctx, refusedDep, 0); err != nil || d.Source != breakerd.SourceSidecar || d.Allowed {
				t.Errorf("other Acquire = %+v, %v; want refused by SIDECAR", d, err)
			}
		}},
		{"acquire-first late while breakerd answers a report", true, func(t *testing.T, c *breakerd.Client) {
			c.Report(ctx, "late/other", 4242, breakerd.Success())
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := startStandIn(t)
			var logs syncBuffer
			c := lateClient(t, s, &logs)
			held := sendHeld(t, c, s, tc.first)
			tc.other(t, c) // answered after the held request was sent

			r := <-held
			if r.err != nil || !r.d.Allowed || r.d.Source != breakerd.SourceFailOpen {
				t.Fatalf("the late decision = %+v, %v; want FAIL_OPEN", r.d, r.err)
			}
			if r.took < lateTimeout {
				t.Errorf("the late decision failed open after %v, before its %v timeout", r.took, lateTimeout)
			}
			// Sent after the timeout, and decided by breakerd: not away.
			if d, err := c.Acquire(ctx, "late/after", 0); err != nil || d.Source != breakerd.SourceSidecar {
				t.Errorf("Acquire after the late one = %+v, %v; want SIDECAR", d, err)
			}
			if n := s.got("Acquire late/after"); n != 1 {
				t.Errorf("the stand-in received %d Acquires of late/after, want 1", n)
			}
			if st := c.Stats(); st.FailOpen != 1 || st.AwayDecisions != 0 {
				t.Errorf("stats %+v; want that one decision alone failed open, no away decision", st)
			}
			if away, late := logs.count("sidecar away"), logs.count("late with a decision"); away != 0 || late != 1 {
				t.Errorf("logged away %d and late %d times, want 0 and 1", away, late)
			}

			// The permit granted late goes back, reported OUTCOME_CANCELLED.
			s.releaseHeld()
			eventually(t, "the late permit to be reported", func() bool {
				return s.got("Report "+heldDep+" OUTCOME_CANCELLED") == 1
			})
		})
	}

	t.Run("nothing answered after it was sent: away", func(t *testing.T) {
		s := startStandIn(t)
		var logs syncBuffer
		c := lateClient(t, s, &logs)
		// Answered before the held request was sent: that does not count.
		if d, err := c.Acquire(ctx, "late/before", 0); err != nil || d.Source != breakerd.SourceSidecar {
			t.Fatalf("Acquire before = %+v, %v", d, err)
		}
		r := <-sendHeld(t, c, s, false)
		if r.err != nil || r.d.Source != breakerd.SourceFailOpen {
			t.Fatalf("the late decision = %+v, %v; want FAIL_OPEN", r.d, r.err)
		}
		d, err := c.Acquire(ctx, "late/after", 0)
		if err != nil || d.Source != breakerd.SourceFailOpen || c.Stats().AwayDecisions != 1 {
			t.Errorf("Acquire after = %+v, %v, stats %+v; want an away decision", d, err, c.Stats())
		}
		if n := s.got("Acquire late/after"); n != 0 {
			t.Errorf("the stand-in was asked %d times while away", n)
		}
		if away := logs.count("sidecar away"); away != 1 {
			t.Errorf("logged away %d times, want 1", away)
		}
	})
}

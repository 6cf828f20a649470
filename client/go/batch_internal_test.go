package breakerd

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	pb "github.com/breakerd/breakerd/client/go/breakerdv1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
)

// fakeBatchRPC is a Breaker client whose ReportBatch records each request
// (unless forget) and fails the next `fail` of them (INTERNAL: not a sign
// of an absent sidecar). Other methods are not expected.
type fakeBatchRPC struct {
	pb.BreakerClient
	forget bool
	mu     sync.Mutex
	reqs   []*pb.ReportBatchRequest
	fail   int
}

func (f *fakeBatchRPC) ReportBatch(_ context.Context, req *pb.ReportBatchRequest, _ ...grpc.CallOption) (*pb.ReportBatchResponse, error) {
	if f.forget {
		_, err := proto.Marshal(req) // what gRPC would do
		return &pb.ReportBatchResponse{}, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reqs = append(f.reqs, req)
	if f.fail > 0 {
		f.fail--
		return nil, status.Error(codes.Internal, "test: failed")
	}
	return &pb.ReportBatchResponse{}, nil
}

func (f *fakeBatchRPC) sent() []*pb.ReportBatchRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*pb.ReportBatchRequest(nil), f.reqs...)
}

// batchClient is a Client whose flusher never runs by itself (a flush
// interval of an hour: the test calls flush) and whose Watch loop and away
// probe are stopped (the test fills the cache). Nothing listens at its
// target; its ReportBatch RPCs go to rpc when given.
func batchClient(t *testing.T, rpc *fakeBatchRPC, opts ...Option) *Client {
	t.Helper()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	c, err := New(append([]Option{WithTarget("127.0.0.1:1"), WithFlushInterval(time.Hour), WithLogger(quiet)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	c.stopBackground()
	c.background.Wait() // the Watch loop clears the cache as it ends
	if rpc != nil {
		c.rpc = rpc
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func outcomeCount(req *pb.ReportBatchRequest) int {
	n := 0
	for _, d := range req.Dependencies {
		n += len(d.Outcomes)
	}
	return n
}

// At most 10,000 outcomes are held unacknowledged, pending or sent: past
// that one is dropped and counted, and room comes back only with an
// acknowledgement.
func TestBatchHoldsAtMostTenThousandOutcomes(t *testing.T) {
	b := newBatcher("go-1-00000000")
	for range maxUnackedOutcomes {
		b.outcome(nil, "bound/dep", 1, localOutcome{outcome: Success()})
	}
	if got := b.dropped.Load(); got != 0 {
		t.Fatalf("dropped %d of %d outcomes, want 0", got, maxUnackedOutcomes)
	}
	b.outcome(nil, "bound/dep", 1, localOutcome{outcome: Success()})
	if got := b.dropped.Load(); got != 1 {
		t.Fatalf("the 10,001st outcome: dropped %d, want 1", got)
	}
	o := b.take() // sent, not yet acknowledged: still held
	if o == nil || o.outcomes != maxBatchOutcomes || outcomeCount(o.req) != maxBatchOutcomes {
		t.Fatalf("take: %+v; want %d outcomes", o, maxBatchOutcomes)
	}
	b.outcome(nil, "bound/dep", 1, localOutcome{outcome: Success()})
	if got := b.dropped.Load(); got != 2 {
		t.Errorf("an outcome while 10,000 are sent or pending: dropped %d, want 2", got)
	}
	b.acked(o)
	b.outcome(nil, "bound/dep", 1, localOutcome{outcome: Success()})
	if got := b.dropped.Load(); got != 2 {
		t.Errorf("an outcome after an acknowledgement: dropped %d, want still 2", got)
	}
}

// A request carries at most 1,000 outcomes; the grants go with the first
// request of their dependency, so breakerd never sees an outcome before its
// grant; each new request takes the next sequence number.
func TestBatchSplitsAtAThousandOutcomesGrantsFirst(t *testing.T) {
	b := newBatcher("go-1-00000000")
	for range 1500 {
		b.grant(nil, "split/dep", 7)
		b.outcome(nil, "split/dep", 7, localOutcome{outcome: HTTPStatus(503).WithLatency(time.Millisecond), chain: "c", tier: 2})
	}
	if !b.isFull() {
		t.Error("1,500 outcomes pending: not full")
	}
	first, second := b.take(), b.take()
	if first == nil || second == nil {
		t.Fatalf("take: %v, %v", first, second)
	}
	if b.take() != nil {
		t.Error("a third request from 1,500 outcomes")
	}
	d1, d2 := first.req.Dependencies[0], second.req.Dependencies[0]
	if first.req.Sequence != 1 || d1.Grants != 1500 || len(d1.Outcomes) != 1000 || d1.Generation != 7 {
		t.Errorf("first request: sequence %d, grants %d, %d outcomes, generation %d; want 1, 1500, 1000, 7",
			first.req.Sequence, d1.Grants, len(d1.Outcomes), d1.Generation)
	}
	if second.req.Sequence != 2 || d2.Grants != 0 || len(d2.Outcomes) != 500 {
		t.Errorf("second request: sequence %d, grants %d, %d outcomes; want 2, 0, 500",
			second.req.Sequence, d2.Grants, len(d2.Outcomes))
	}
	lo := d1.Outcomes[0]
	if lo.HttpStatus != 503 || lo.Outcome != ClassUnspecified || lo.Latency.AsDuration() != time.Millisecond ||
		lo.Chain != "c" || lo.Tier != 2 {
		t.Errorf("an outcome on the wire: %v; want http_status 503, latency 1ms, chain c tier 2", lo)
	}
}

// The outcome fields are those of a Report of the same outcome.
func TestBatchOutcomeClassifiedAsAReport(t *testing.T) {
	for _, o := range []Outcome{Success(), Explicit(ClassSoftFailure), HTTPStatus(429).WithRetryAfter(3 * time.Second),
		GRPCCode(codes.Unavailable), GRPCCode(codes.OK), {}} {
		o = o.WithLatency(2 * time.Millisecond)
		var got pb.LocalOutcome
		localOutcome{outcome: o}.fill(&got, make([]durationpb.Duration, 2))
		want := o.request("d", 1)
		if got.Outcome != want.Outcome || got.HttpStatus != want.HttpStatus || (got.GrpcCode == nil) != (want.GrpcCode == nil) ||
			(got.GrpcCode != nil && *got.GrpcCode != *want.GrpcCode) || !proto.Equal(got.Latency, want.Latency) ||
			!proto.Equal(got.RetryAfter, want.RetryAfter) {
			t.Errorf("%v: batched %v, reported %v", o, &got, want)
		}
	}
}

// A request that fails is sent again unchanged (same sequence) at the next
// flush; after three sends it is dropped, its outcomes counted, and the
// next request takes the next sequence number.
func TestBatchResendKeepsItsSequence(t *testing.T) {
	rpc := &fakeBatchRPC{fail: 2}
	c := batchClient(t, rpc)
	ctx := context.Background()
	c.batch.grant(nil, "resend/dep", 1)
	c.batch.outcome(nil, "resend/dep", 1, localOutcome{outcome: Success()})
	c.flush(ctx) // fails
	c.flush(ctx) // fails
	c.batch.grant(nil, "resend/dep", 1)
	c.batch.outcome(nil, "resend/dep", 1, localOutcome{outcome: Success()})
	c.flush(ctx) // the first request, then the new one
	reqs := rpc.sent()
	if len(reqs) != 4 {
		t.Fatalf("%d requests, want 4", len(reqs))
	}
	for i, want := range []uint64{1, 1, 1, 2} {
		if reqs[i].Sequence != want || reqs[i].ClientId != c.batch.clientID {
			t.Errorf("request %d: client %q sequence %d; want %q, %d", i, reqs[i].ClientId, reqs[i].Sequence, c.batch.clientID, want)
		}
	}
	if !proto.Equal(reqs[0], reqs[2]) {
		t.Errorf("resent request changed:\n%v\n%v", reqs[0], reqs[2])
	}
	if got := c.Stats().DroppedOutcomes; got != 0 {
		t.Errorf("DroppedOutcomes = %d, want 0", got)
	}

	rpc.mu.Lock()
	rpc.fail = 3
	rpc.mu.Unlock()
	for range 5 {
		c.batch.outcome(nil, "resend/dep", 1, localOutcome{outcome: Success()})
	}
	for range 3 {
		c.flush(ctx)
	}
	if got := c.Stats().DroppedOutcomes; got != 5 {
		t.Errorf("DroppedOutcomes = %d after three failed sends of 5 outcomes, want 5", got)
	}
	c.batch.decided("resend/dep", decidedFailOpen)
	c.flush(ctx)
	reqs = rpc.sent()
	if last := reqs[len(reqs)-1]; len(reqs) != 8 || last.Sequence != 4 || len(last.Decisions) != 1 {
		t.Errorf("after the dropped request (sequence 3): %d requests, the last %v; want 8, sequence 4", len(reqs), last)
	}
}

// While the sidecar is away nothing is sent and an outcome is dropped
// (counted), but the decisions made without breakerd are kept and sent in
// the first request once it is back.
func TestBatchClientDecisionsSentAfterAway(t *testing.T) {
	rpc := &fakeBatchRPC{}
	c := batchClient(t, rpc)
	ctx := context.Background()
	c.away.Store(true)
	for range 3 {
		c.awayDecision("away/a")
	}
	c.refusedLocally("away/b")
	c.reportLocal(Decision{Allowed: true, Source: SourceLocal, Dependency: "away/a", generation: 1}, Success())
	c.flush(ctx)
	if n := len(rpc.sent()); n != 0 {
		t.Fatalf("%d requests sent while away, want 0", n)
	}
	if got := c.Stats().DroppedOutcomes; got != 1 {
		t.Errorf("DroppedOutcomes = %d, want 1 (the outcome made while away)", got)
	}
	c.markBack("test")
	c.flush(ctx)
	reqs := rpc.sent()
	if len(reqs) != 1 {
		t.Fatalf("%d requests after back, want 1", len(reqs))
	}
	got := map[string]*pb.ClientDecisions{}
	for _, d := range reqs[0].Decisions {
		got[d.Dependency] = d
	}
	if a := got["away/a"]; a == nil || a.FailOpen != 3 || a.RefusedLocal != 0 || a.FailClosed != 0 {
		t.Errorf("away/a: %v; want fail_open 3", a)
	}
	if b := got["away/b"]; b == nil || b.RefusedLocal != 1 || b.FailOpen != 0 {
		t.Errorf("away/b: %v; want refused_local 1", b)
	}
	if len(reqs[0].Dependencies) != 0 {
		t.Errorf("dependencies %v; want none (the outcome was dropped)", reqs[0].Dependencies)
	}
}

// A first attempt is granted in the client only while the cache holds the
// breaker CLOSED with local_decisions on, not in shadow mode, with the
// option on and the sidecar present; the grant carries the generation, and
// its outcome is batched under it. Nothing listens at the target: any
// decision not made locally fails open.
func TestLocalGrantConditions(t *testing.T) {
	c := batchClient(t, nil)
	ctx := context.Background()
	const dep = "grant/dep"
	event := func(state State, mode string, local bool) {
		c.cache.clear()
		c.cache.apply(&pb.StateChange{Dependency: dep, State: state, Mode: mode, LocalDecisions: local, Generation: 4}, time.Now())
	}
	acquire := func(attempt uint32) Decision {
		t.Helper()
		d, err := c.Acquire(ctx, dep, attempt)
		if err != nil {
			t.Fatal(err)
		}
		c.away.Store(false) // a decision sent to nobody marks the sidecar away
		return d
	}

	event(StateClosed, "enforce", true)
	d := acquire(0)
	if !d.Allowed || d.Source != SourceLocal || d.Permit != 0 || d.State != StateClosed || d.Probe || d.generation != 4 {
		t.Fatalf("CLOSED with local decisions: %+v; want a local grant at generation 4", d)
	}
	c.ReportDecision(ctx, d, Success())
	o := c.batch.take()
	if o == nil || len(o.req.Dependencies) != 1 || o.req.Dependencies[0].Generation != 4 ||
		o.req.Dependencies[0].Grants != 1 || len(o.req.Dependencies[0].Outcomes) != 1 {
		t.Errorf("the batch after a grant and its report: %v; want 1 grant and 1 outcome at generation 4", o)
	}

	for name, tc := range map[string]struct {
		state   State
		mode    string
		local   bool
		attempt uint32
		away    bool
	}{
		"a retry":                    {StateClosed, "enforce", true, 1, false},
		"local_decisions false":      {StateClosed, "enforce", false, 0, false},
		"shadow":                     {StateClosed, "shadow", true, 0, false},
		"forced closed":              {StateForcedClosed, "enforce", true, 0, false},
		"half-open":                  {StateHalfOpen, "enforce", true, 0, false},
		"sidecar away":               {StateClosed, "enforce", true, 0, true},
		"open past its open_until":   {StateOpen, "enforce", false, 0, false},
		"the cache does not hold it": {StateUnspecified, "", false, 0, false},
	} {
		event(tc.state, tc.mode, tc.local)
		if tc.state == StateUnspecified {
			c.cache.clear()
		}
		c.away.Store(tc.away)
		if d := acquire(tc.attempt); d.Source == SourceLocal {
			t.Errorf("%s: %+v; want no local decision", name, d)
		}
	}

	off := batchClient(t, nil, WithLocalDecisions(false))
	off.cache.apply(&pb.StateChange{Dependency: dep, State: StateClosed, LocalDecisions: true}, time.Now())
	if d, _ := off.Acquire(ctx, dep, 0); d.Source == SourceLocal {
		t.Errorf("option off: %+v; want no local grant", d)
	}
}

// Grants counted in a slot with no lock, outcomes, and takes racing with
// them (run under -race): every grant and outcome is in exactly one
// request, and a slot that a take removed while idle is not counted in
// (its grant goes through the map).
func TestBatchGrantsRacingWithTakesAreCountedOnce(t *testing.T) {
	b := newBatcher("go-1-00000000")
	const goroutines, perGoroutine = 4, 5000
	deps := []string{"race/a", "race/b"}
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			dep := deps[g%len(deps)]
			var slot *depBatch
			for i := range perGoroutine {
				slot = b.grant(slot, dep, 1)
				if i%2 == 0 {
					b.outcome(slot, dep, 1, localOutcome{outcome: Success()})
				}
			}
		})
	}
	var grants, outcomes int
	collect := func() bool {
		o := b.take()
		if o == nil {
			return false
		}
		for _, d := range o.req.Dependencies {
			grants += int(d.Grants)
			outcomes += len(d.Outcomes)
		}
		b.acked(o)
		return true
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	for running := true; running; {
		select {
		case <-done:
			running = false
		default:
			collect()
		}
	}
	for collect() {
	}
	if grants != goroutines*perGoroutine || outcomes != goroutines*perGoroutine/2 {
		t.Errorf("took %d grants and %d outcomes; want %d and %d", grants, outcomes, goroutines*perGoroutine, goroutines*perGoroutine/2)
	}
	if n := b.dropped.Load(); n != 0 {
		t.Errorf("dropped %d", n)
	}
	// Idle for a whole take: the slot is removed, and a grant on it goes
	// through the map into a live one.
	slot := b.grant(nil, "idle/dep", 1)
	if o := b.take(); o == nil || o.req.Dependencies[0].Grants != 1 {
		t.Fatalf("take: %v; want the grant", o)
	}
	b.nonEmpty.Store(true)
	b.take() // nothing since: removed
	if slot.live() {
		t.Fatal("an idle slot is still live after a take")
	}
	again := b.grant(slot, "idle/dep", 1)
	if again == slot || !again.live() {
		t.Error("a grant on a removed slot did not go to a live one")
	}
	if o := b.take(); o == nil || len(o.req.Dependencies) != 1 || o.req.Dependencies[0].Grants != 1 {
		t.Errorf("take after the grant on a removed slot: %v; want its grant", o)
	}
}

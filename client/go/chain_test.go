package breakerd_test

// Named fallback chains: First and AcquireFirst with WithChain ask breakerd
// for every decision, with the remaining candidates and the tier of the
// first, and report each granted call with its chain and tier; breakerd
// counts them (breakerd_chain_decisions_total, breakerd_chain_outcomes_total).

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/breakerd/breakerd/client/go"
	pb "github.com/breakerd/breakerd/client/go/breakerdv1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// chainCounts is what breakerd counted for chain: decisions by tier
// ("0", "1", ..., "none") and outcomes by "tier/class".
func chainCounts(s *sidecar, chain string) (decisions, outcomes map[string]float64) {
	decisions, outcomes = map[string]float64{}, map[string]float64{}
	for _, tier := range []string{"0", "1", "2", "3", "none"} {
		if n := s.metric("breakerd_chain_decisions_total", map[string]string{"chain": chain, "tier": tier}); n != 0 {
			decisions[tier] = n
		}
		for _, class := range []string{"success", "server_error", "rate_limited", "bad_request", "cancelled"} {
			if n := s.metric("breakerd_chain_outcomes_total",
				map[string]string{"chain": chain, "tier": tier, "class": class}); n != 0 {
				outcomes[tier+"/"+class] = n
			}
		}
	}
	return decisions, outcomes
}

// wantChainCounts waits up to 3 s for breakerd's counts of chain (a Report
// may still be on its way) and fails the test if they differ.
func wantChainCounts(t *testing.T, s *sidecar, chain string, decisions, outcomes map[string]float64) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for {
		d, o := chainCounts(s, chain)
		if fmt.Sprint(d, o) == fmt.Sprint(decisions, outcomes) {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("breakerd counted for chain %s decisions %v, outcomes %v; want decisions %v, outcomes %v",
				chain, d, o, decisions, outcomes)
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// openThroughGuard fails guarded calls of dep with a server error until
// breakerd refuses it (three in a row open a breaker), then waits until c's
// Watch cache holds it open (a plain Acquire refused LOCAL).
func openThroughGuard(t *testing.T, c *breakerd.Client, dep string) {
	t.Helper()
	ctx := context.Background()
	for i := 0; ; i++ {
		err := c.Do(ctx, dep, func(context.Context) error { return &breakerd.HTTPError{StatusCode: 503} })
		if errors.Is(err, breakerd.ErrBreakerOpen) {
			break
		}
		if i == 5 {
			t.Fatalf("%s still not refused after %d failed calls", dep, i+1)
		}
	}
	eventually(t, "the Watch cache to hold "+dep+" open", func() bool {
		d, err := c.Acquire(ctx, dep, 0)
		return err == nil && !d.Allowed && d.Source == breakerd.SourceLocal
	})
}

// conformance: chain
//
// The chain conf-chain-go over [p, s, t]: p runs; with p open (and held
// open by the Watch cache) s runs, fails with a server error, and t runs;
// with all three open no call runs and the caller gets the breaker-open
// error, yet breakerd is asked and counts the ultimate fallback: decisions
// tier 0, 1, 2 and none once each, outcomes 0/success, 1/server_error,
// 2/success.
func TestChainCountedPerTier(t *testing.T) {
	s := startSidecar(t)
	ctx := context.Background()
	c := newClient(t, s.addr) // the Watch cache on: the chain must not skip what it holds open
	ready(t, c)
	const chain, p, sd, td = "conf-chain-go", "chain-go/p", "chain-go/s", "chain-go/t"
	deps := []string{p, sd, td}
	named := breakerd.WithChain(chain)

	var called []string
	call := func(fail ...string) func(context.Context, string) error {
		called = nil
		return func(_ context.Context, dep string) error {
			called = append(called, dep)
			if slices.Contains(fail, dep) {
				return &breakerd.HTTPError{StatusCode: 503}
			}
			return nil
		}
	}

	if err := c.First(ctx, deps, call(), named); err != nil || !slices.Equal(called, []string{p}) {
		t.Fatalf("step 1: err=%v called=%v; want p alone, succeeding", err, called)
	}

	openThroughGuard(t, c, p)
	if err := c.First(ctx, deps, call(sd), named); err != nil || !slices.Equal(called, []string{sd, td}) {
		t.Fatalf("step 2: err=%v called=%v; want s (failing), then t", err, called)
	}

	openThroughGuard(t, c, sd)
	openThroughGuard(t, c, td)
	err := c.First(ctx, deps, call(), named)
	var open *breakerd.OpenError
	if !errors.As(err, &open) || len(called) != 0 {
		t.Fatalf("step 3: err=%v called=%v; want the breaker-open error and no call", err, called)
	}
	if open.Source != breakerd.SourceSidecar {
		t.Errorf("step 3: refused by %v; want SIDECAR (a named chain asks breakerd even when the cache knows)", open.Source)
	}

	wantChainCounts(t, s, chain,
		map[string]float64{"0": 1, "1": 1, "2": 1, "none": 1},
		map[string]float64{"0/success": 1, "1/server_error": 1, "2/success": 1})
}

// The two-step form: AcquireFirst with a chain and the tier of its first
// candidate grants with Decision.Chain and Tier, and ReportDecision sends
// them with the outcome.
func TestAcquireFirstWithChainAndFirstTier(t *testing.T) {
	s := startSidecar(t)
	ctx := context.Background()
	c := newClient(t, s.addr, breakerd.WithWatch(false))
	const chain, x, y = "go-two-step", "chain-two-step/x", "chain-two-step/y"
	s.forceOpen(x)

	d, err := c.AcquireFirst(ctx, []string{x, y}, 0, breakerd.WithChain(chain), breakerd.WithFirstTier(1))
	if err != nil || !d.Allowed || d.Dependency != y || d.Source != breakerd.SourceSidecar {
		t.Fatalf("AcquireFirst = %+v, %v; want y granted by breakerd", d, err)
	}
	if d.Chain != chain || d.Tier != 2 {
		t.Errorf("Decision chain %q tier %d; want %q, 2 (y is second after first tier 1)", d.Chain, d.Tier, chain)
	}
	c.ReportDecision(ctx, d, breakerd.HTTPStatus(429))

	// Without a chain: no chain counted, and the decision carries none.
	plain, err := c.AcquireFirst(ctx, []string{x, y}, 0)
	if err != nil || !plain.Allowed || plain.Chain != "" || plain.Tier != 0 {
		t.Fatalf("AcquireFirst without a chain = %+v, %v", plain, err)
	}
	c.ReportDecision(ctx, plain, breakerd.Success())

	wantChainCounts(t, s, chain, map[string]float64{"2": 1}, map[string]float64{"2/rate_limited": 1})
	if n := s.metric("breakerd_chain_decisions_total", nil); n != 1 {
		t.Errorf("breakerd counted %v chain decisions in all; want 1 (none without a chain name)", n)
	}
	everyPermitReported(t, s, y)
}

// An invalid chain name (or a chain longer than the 64 tiers breakerd
// counts) is refused with INVALID_ARGUMENT naming chain, before any RPC:
// no call runs, breakerd sees no Acquire, nothing fails open.
func TestInvalidChainRefusedBeforeAnyRPC(t *testing.T) {
	s := startSidecar(t)
	ctx := context.Background()
	c := newClient(t, s.addr, breakerd.WithWatch(false))
	const dep = "chain-invalid/a"
	long := make([]string, 65)
	for i := range long {
		long[i] = fmt.Sprintf("chain-invalid/d%d", i)
	}
	for _, tc := range []struct {
		name string
		deps []string
		opts []breakerd.FirstOption
	}{
		{"empty", []string{dep}, []breakerd.FirstOption{breakerd.WithChain("")}},
		{"space", []string{dep}, []breakerd.FirstOption{breakerd.WithChain("my chain")}},
		{"too long", []string{dep}, []breakerd.FirstOption{breakerd.WithChain(strings.Repeat("c", 201))}},
		{"65 tiers", long, []breakerd.FirstOption{breakerd.WithChain("ok-name")}},
		{"past tier 63", []string{dep, "chain-invalid/b"}, []breakerd.FirstOption{
			breakerd.WithChain("ok-name"), breakerd.WithFirstTier(63)}},
	} {
		before := c.Stats()
		ran := false
		errs := map[string]error{
			"First": c.First(ctx, tc.deps, func(context.Context, string) error { ran = true; return nil }, tc.opts...),
		}
		_, errs["AcquireFirst"] = c.AcquireFirst(ctx, tc.deps, 0, tc.opts...)
		for entry, err := range errs {
			if status.Code(err) != codes.InvalidArgument || !strings.HasPrefix(status.Convert(err).Message(), "chain") {
				t.Errorf("%s: %s = %v; want INVALID_ARGUMENT naming chain", tc.name, entry, err)
			}
		}
		if ran {
			t.Errorf("%s: the call ran", tc.name)
		}
		if after := c.Stats(); after != before {
			t.Errorf("%s: stats %+v -> %+v; want nothing counted", tc.name, before, after)
		}
		for _, d := range tc.deps {
			if n := s.acquires(d); n != 0 {
				t.Errorf("%s: breakerd counted %v Acquires for %s; want no RPC", tc.name, n, d)
			}
		}
	}
}

// recordingBreaker is a stand-in Breaker that grants the first candidate
// not in refuse and keeps every AcquireFirst and Report it receives.
type recordingBreaker struct {
	pb.UnimplementedBreakerServer
	refuse map[string]bool

	mu       sync.Mutex
	acquires []*pb.AcquireFirstRequest
	reports  []*pb.ReportRequest
	permit   uint64
}

func (r *recordingBreaker) AcquireFirst(_ context.Context, req *pb.AcquireFirstRequest) (*pb.AcquireFirstResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.acquires = append(r.acquires, proto.Clone(req).(*pb.AcquireFirstRequest))
	for _, dep := range req.Dependencies {
		if !r.refuse[dep] {
			r.permit++
			return &pb.AcquireFirstResponse{Allowed: true, Permit: r.permit, Dependency: dep,
				State: pb.State_STATE_CLOSED}, nil
		}
	}
	return &pb.AcquireFirstResponse{State: pb.State_STATE_OPEN, Reason: pb.RejectReason_REJECT_REASON_OPEN}, nil
}

func (r *recordingBreaker) Report(_ context.Context, req *pb.ReportRequest) (*pb.ReportResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reports = append(r.reports, proto.Clone(req).(*pb.ReportRequest))
	return &pb.ReportResponse{State: pb.State_STATE_CLOSED, Effect: pb.Effect_EFFECT_COUNTED_SUCCESS}, nil
}

// The wire form of a chain, whatever the sidecar counts: each AcquireFirst
// carries the remaining candidates, the chain and the tier of the first
// (after a failed call, the tier after the granted one); each Report the
// chain and the granted tier. Without a name, neither.
func TestChainFieldsOnTheWire(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	stand := &recordingBreaker{refuse: map[string]bool{"w/a": true}}
	srv := grpc.NewServer()
	pb.RegisterBreakerServer(srv, stand)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	c := newClient(t, ln.Addr().String(), breakerd.WithWatch(false))
	ctx := context.Background()

	deps := []string{"w/a", "w/b", "w/c", "w/d"}
	var called []string
	err = c.First(ctx, deps, func(_ context.Context, dep string) error {
		called = append(called, dep)
		if dep == "w/b" {
			return &breakerd.HTTPError{StatusCode: 503}
		}
		return nil
	}, breakerd.WithChain("wire"), breakerd.WithFirstTier(1))
	if err != nil || !slices.Equal(called, []string{"w/b", "w/c"}) {
		t.Fatalf("First: err=%v called=%v; want w/b (failing), then w/c", err, called)
	}
	if err := c.First(ctx, deps, func(context.Context, string) error { return nil }); err != nil {
		t.Fatalf("First without a chain: %v", err)
	}

	stand.mu.Lock()
	defer stand.mu.Unlock()
	var gotAcquires, gotReports []string
	for _, a := range stand.acquires {
		gotAcquires = append(gotAcquires, fmt.Sprintf("%v chain=%q first_tier=%d", a.Dependencies, a.Chain, a.FirstTier))
	}
	for _, r := range stand.reports {
		gotReports = append(gotReports, fmt.Sprintf("%s %s chain=%q tier=%d", r.Dependency, r.Outcome, r.Chain, r.Tier))
	}
	wantAcquires := []string{
		`[w/a w/b w/c w/d] chain="wire" first_tier=1`,
		`[w/c w/d] chain="wire" first_tier=3`,
		`[w/a w/b w/c w/d] chain="" first_tier=0`,
	}
	wantReports := []string{
		`w/b OUTCOME_UNSPECIFIED chain="wire" tier=2`, // http_status 503
		`w/c OUTCOME_SUCCESS chain="wire" tier=3`,
		`w/b OUTCOME_SUCCESS chain="" tier=0`,
	}
	if !slices.Equal(gotAcquires, wantAcquires) {
		t.Errorf("AcquireFirst requests:\n  %s\nwant\n  %s", strings.Join(gotAcquires, "\n  "), strings.Join(wantAcquires, "\n  "))
	}
	if !slices.Equal(gotReports, wantReports) {
		t.Errorf("Reports:\n  %s\nwant\n  %s", strings.Join(gotReports, "\n  "), strings.Join(wantReports, "\n  "))
	}
}

// While the sidecar is away a named chain decides as without a name: the
// fail-open grant goes to the first candidate the Watch cache does not hold
// open (with its tier), and with every candidate held open the refusal is
// local.
func TestChainWhileAwayDecidesAsWithoutName(t *testing.T) {
	s := startSidecar(t)
	ctx := context.Background()
	c := newDefaultClient(t, s.addr)
	ready(t, c)
	const chain, p, q = "go-away-chain", "chain-away/p", "chain-away/q"
	s.forceOpen(p)
	eventually(t, "the Watch cache to hold p forced open", func() bool {
		st, ok := c.CachedState(p)
		return ok && st == breakerd.StateForcedOpen
	})

	s.pause()
	before := c.Stats()
	for i := range 2 { // the first times out and marks breakerd away, the second makes no RPC
		d, err := c.AcquireFirst(ctx, []string{p, q}, 0, breakerd.WithChain(chain))
		if err != nil || !d.Allowed || d.Source != breakerd.SourceFailOpen || d.Dependency != q ||
			d.Chain != chain || d.Tier != 1 {
			t.Fatalf("AcquireFirst %d while stopped = %+v, %v; want q granted FAIL_OPEN, tier 1", i, d, err)
		}
	}
	d, err := c.AcquireFirst(ctx, []string{p}, 0, breakerd.WithChain(chain))
	if err != nil || d.Allowed || d.Source != breakerd.SourceLocal {
		t.Errorf("AcquireFirst([p]) while away = %+v, %v; want refused LOCAL", d, err)
	}
	after := c.Stats()
	if after.FailOpen != before.FailOpen+2 || after.AwayDecisions != before.AwayDecisions+1 ||
		after.LocalRejections != before.LocalRejections+1 {
		t.Errorf("stats %+v -> %+v; want 2 fail-open (1 away) and 1 local rejection", before, after)
	}
}

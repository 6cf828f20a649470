package breakerd_test

// Local decisions (client README "Local decisions"): first attempts granted
// in the client while the Watch cache holds a breaker closed with
// local_decisions on, their outcomes and the client's own decisions sent in
// ReportBatch. The conformance config allows local decisions for local/*
// and local-short/* only.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/breakerd/breakerd/client/go"
)

// fastPathOn makes one guarded call of dep that succeeds (breakerd creates
// its breaker), then two-step Acquires, each reported with its decision,
// until one is granted LOCAL (the created event reached the cache); 2 s
// at most.
func fastPathOn(t *testing.T, c *breakerd.Client, dep string) {
	t.Helper()
	ctx := context.Background()
	if err := c.Do(ctx, dep, func(context.Context) error { return nil }); err != nil {
		t.Fatalf("the first guarded call of %s: %v", dep, err)
	}
	deadline := time.Now().Add(2 * time.Second)
	for {
		d, err := c.Acquire(ctx, dep, 0)
		if err != nil {
			t.Fatalf("Acquire(%s): %v", dep, err)
		}
		if d.Allowed {
			c.ReportDecision(ctx, d, breakerd.Success())
		}
		if d.Allowed && d.Source == breakerd.SourceLocal {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: no local grant within 2 s (last %+v)", dep, d)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// everyGrantReported waits up to 3 s until breakerd has counted the local
// grant fastPathOn ended with and an outcome for every grant of dep (its
// own permits and those granted in clients), so that what follows counts
// from a settled state.
func everyGrantReported(t *testing.T, s *sidecar, dep string) {
	t.Helper()
	var local, granted, reported float64
	deadline := time.Now().Add(3 * time.Second)
	for {
		local = s.decisions(dep, "allowed_local")
		granted = s.granted(dep)
		reported = s.metric("breakerd_reports_total", map[string]string{"dependency": dep})
		if local >= 1 && granted == reported || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if local < 1 || granted != reported {
		t.Fatalf("%s: breakerd counted %v grants (%v local) and %v outcomes; want the local grant and every grant reported",
			dep, granted, local, reported)
	}
}

// granted is breakerd's count of dep's grants: allowed, probe and
// allowed_local.
func (s *sidecar) granted(dep string) float64 {
	var n float64
	for _, decision := range []string{"allowed", "probe", "allowed_local"} {
		n += s.decisions(dep, decision)
	}
	return n
}

// decisions is breakerd_acquire_total for dep and decision.
func (s *sidecar) decisions(dep, decision string) float64 {
	return s.metric("breakerd_acquire_total", map[string]string{"dependency": dep, "decision": decision})
}

// handled is breakerd_grpc_server_handled_total for method, every code.
func (s *sidecar) handled(method string) float64 {
	return s.metric("breakerd_grpc_server_handled_total", map[string]string{"method": method})
}

// clientDecisions is breakerd_client_decisions_total for dep and decision.
func (s *sidecar) clientDecisions(dep, decision string) float64 {
	return s.metric("breakerd_client_decisions_total", map[string]string{"dependency": dep, "decision": decision})
}

// within polls cond every 10 ms for up to d; it says whether cond held.
func within(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
	return true
}

func noop(context.Context) error { return nil }

// conformance: local-fast-path
//
// With the fast path on, 10,000 guarded calls that succeed make no Acquire
// and no Report RPC: breakerd counts 10,000 allowed_local grants (and no
// other decision) and 10,000 success outcomes, through at least one
// ReportBatch; none is dropped.
func TestLocalFastPathSendsNoRPCPerCall(t *testing.T) {
	s := startSidecar(t)
	c := newDefaultClient(t, s.addr)
	ready(t, c)
	const dep, calls = "local/fast-go", 10000
	fastPathOn(t, c, dep)
	everyGrantReported(t, s, dep)

	acquireRPCs, reportRPCs, batches := s.handled("Acquire"), s.handled("Report"), s.handled("ReportBatch")
	local, all := s.decisions(dep, "allowed_local"), s.acquires(dep)
	successes, outcomes := s.reports(dep, "success", "counted_success"),
		s.metric("breakerd_reports_total", map[string]string{"dependency": dep})
	ctx := context.Background()
	for i := range calls {
		if err := c.Do(ctx, dep, noop); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	if raceDetector {
		// The race detector slows this process 5-10x: the batches lag the
		// calls by more than Close's flush may take (the decision timeout).
		within(3*time.Second, func() bool { return s.reports(dep, "success", "counted_success")-successes >= calls })
	}
	if err := c.Close(); err != nil { // flushes
		t.Fatal(err)
	}
	within(3*time.Second, func() bool { return s.decisions(dep, "allowed_local")-local >= calls })
	within(3*time.Second, func() bool { return s.reports(dep, "success", "counted_success")-successes >= calls })

	if n := s.handled("Acquire") - acquireRPCs; n != 0 {
		t.Errorf("%v Acquire RPCs during the calls, want 0", n)
	}
	if n := s.handled("Report") - reportRPCs; n != 0 {
		t.Errorf("%v Report RPCs during the calls, want 0", n)
	}
	if n := s.handled("ReportBatch") - batches; n < 1 {
		t.Errorf("%v ReportBatch RPCs, want at least 1", n)
	}
	if n := s.decisions(dep, "allowed_local") - local; n != calls {
		t.Errorf("allowed_local grants %v, want %d", n, calls)
	}
	if n := s.acquires(dep) - all; n != calls {
		t.Errorf("%v decisions in all, want %d (allowed_local only)", n, calls)
	}
	if n := s.reports(dep, "success", "counted_success") - successes; n != calls {
		t.Errorf("success outcomes %v, want %d", n, calls)
	}
	if n := s.metric("breakerd_reports_total", map[string]string{"dependency": dep}) - outcomes; n != calls {
		t.Errorf("%v outcomes in all, want %d", n, calls)
	}
	if n := c.Stats().DroppedOutcomes; n != 0 {
		t.Errorf("DroppedOutcomes = %d, want 0", n)
	}
}

// conformance: local-two-step
//
// A two-step Acquire on the fast path is a local grant (permit 0, CLOSED);
// ReportDecision with a server error returns at once with no Report RPC,
// and breakerd counts the outcome from the batch within 3 s. The raw
// permit 0 sends nothing.
func TestLocalTwoStepReportGoesInTheBatch(t *testing.T) {
	s := startSidecar(t)
	c := newDefaultClient(t, s.addr)
	ready(t, c)
	ctx := context.Background()
	const dep = "local/two-step-go"
	fastPathOn(t, c, dep)
	everyGrantReported(t, s, dep)
	reportRPCs := s.handled("Report")
	serverErrors, successes := s.reports(dep, "server_error", "counted_failure"), s.reports(dep, "success", "counted_success")

	d, err := c.Acquire(ctx, dep, 0)
	if err != nil || !d.Allowed || d.Source != breakerd.SourceLocal || d.Permit != 0 || d.State != breakerd.StateClosed || d.Probe {
		t.Fatalf("Acquire = %+v, %v; want allowed LOCAL, permit 0, CLOSED", d, err)
	}
	start := time.Now()
	c.ReportDecision(ctx, d, breakerd.HTTPStatus(503))
	if took := time.Since(start); took > 100*time.Millisecond {
		t.Errorf("ReportDecision of a local grant took %v; want at once", took)
	}
	c.Report(ctx, dep, d.Permit, breakerd.Success()) // the raw permit 0: nothing
	if !within(3*time.Second, func() bool { return s.reports(dep, "server_error", "counted_failure")-serverErrors == 1 }) {
		t.Errorf("server_error outcomes +%v within 3 s, want +1", s.reports(dep, "server_error", "counted_failure")-serverErrors)
	}
	if n := s.handled("Report") - reportRPCs; n != 0 {
		t.Errorf("%v Report RPCs, want 0", n)
	}
	if n := s.reports(dep, "success", "counted_success") - successes; n != 0 {
		t.Errorf("success outcomes +%v; the raw permit 0 must send nothing", n)
	}
}

// conformance: local-trip
//
// Five locally granted calls that fail trip the breaker on breakerd
// (consecutive_failures); the client's own calls go on running until its
// Watch cache holds the breaker open, then are refused LOCAL (reason OPEN)
// within 2 s of the fifth failure; breakerd counts each local refusal as a
// client decision.
func TestLocalTripRefusesLocally(t *testing.T) {
	s := startSidecar(t)
	c := newDefaultClient(t, s.addr)
	ready(t, c)
	ctx := context.Background()
	const dep = "local/trip-go"
	fastPathOn(t, c, dep)
	everyGrantReported(t, s, dep)
	sidecarGrants, rejections := s.decisions(dep, "allowed"), c.Stats().LocalRejections

	for i := range 5 {
		if err := c.Do(ctx, dep, func(context.Context) error { return &breakerd.HTTPError{StatusCode: 500} }); err == nil ||
			errors.Is(err, breakerd.ErrBreakerOpen) {
			t.Fatalf("failing call %d: err %v; want the call's own error", i, err)
		}
	}
	fifth := time.Now()
	var refusal *breakerd.OpenError
	ran := 0
	for refusal == nil {
		err := c.Do(ctx, dep, func(context.Context) error { ran++; return nil })
		switch {
		case errors.As(err, &refusal):
		case err != nil:
			t.Fatalf("a call after the fifth failure: %v", err)
		case time.Since(fifth) > 2*time.Second:
			t.Fatalf("not refused within 2 s of the fifth failure (%d calls ran)", ran)
		}
	}
	t.Logf("refused %v after the fifth failure; %d calls ran meanwhile", time.Since(fifth), ran)
	if refusal.Source != breakerd.SourceLocal || refusal.Reason != breakerd.ReasonOpen {
		t.Errorf("the refusal: %+v; want LOCAL, OPEN", refusal)
	}
	if st := s.state(dep); st.State != breakerd.StateOpen {
		t.Errorf("breakerd holds %s %v, want OPEN", dep, st.State)
	}
	if n := s.metric("breakerd_transitions_total",
		map[string]string{"dependency": dep, "to": "open", "reason": "consecutive_failures"}); n != 1 {
		t.Errorf("transitions to open by consecutive_failures: %v, want 1", n)
	}
	if n := s.decisions(dep, "allowed") - sidecarGrants; n != 0 {
		t.Errorf("breakerd granted %v of the calls itself; want every one granted locally", n)
	}
	for i := range 20 {
		err := c.Do(ctx, dep, func(context.Context) error { t.Errorf("call %d ran while open", i); return nil })
		if !errors.As(err, &refusal) || refusal.Source != breakerd.SourceLocal {
			t.Errorf("call %d while open: %v; want refused LOCAL", i, err)
		}
	}
	refused := c.Stats().LocalRejections - rejections
	if err := c.Close(); err != nil { // flushes
		t.Fatal(err)
	}
	within(3*time.Second, func() bool { return s.clientDecisions(dep, "refused_local") >= float64(refused) })
	if n := s.clientDecisions(dep, "refused_local"); n < 21 || n != float64(refused) {
		t.Errorf("breakerd counted %v local refusals, the client %d; want at least 21, equal", n, refused)
	}
}

// Environment of the local-probe scenario's child processes (this test
// binary run again for TestLocalProbeChild).
const (
	probeChildAddr = "BREAKERD_GO_PROBE_CHILD_ADDR"
	probeChildDep  = "BREAKERD_GO_PROBE_CHILD_DEP"
)

// probeResult is what a child process prints of its one call.
type probeResult struct {
	Allowed bool   `json:"allowed"`
	Probe   bool   `json:"probe"`
	Source  string `json:"source"`
	Reason  string `json:"reason"`
	Error   string `json:"error,omitempty"`
}

// conformance: local-probe
//
// local-short/probe-go (five failures open it for 1 s) is opened by this
// test's client with five locally granted failing calls. Three child
// processes, each with its own client (default options), wait until their
// cache holds it open (a LOCAL refusal), sleep out its retry_after and make
// one guarded call of 300 ms: exactly one runs, as breakerd's probe, and
// closes the breaker; the other two are refused (by breakerd,
// PROBE_IN_FLIGHT, or locally); none is granted locally.
func TestLocalProbeOnlyOneOfThreeProcesses(t *testing.T) {
	s := startSidecar(t)
	c := newDefaultClient(t, s.addr)
	ready(t, c)
	ctx := context.Background()
	const dep = "local-short/probe-go"
	fastPathOn(t, c, dep)
	everyGrantReported(t, s, dep)
	probes := s.decisions(dep, "probe")

	type child struct {
		cmd    *exec.Cmd
		lines  chan string
		stderr strings.Builder
	}
	children := make([]*child, 3)
	for i := range children {
		ch := &child{lines: make(chan string, 16)}
		ch.cmd = exec.Command(os.Args[0], "-test.run=^TestLocalProbeChild$", "-test.v", "-test.count=1")
		ch.cmd.Env = append(os.Environ(), probeChildAddr+"="+s.addr, probeChildDep+"="+dep)
		ch.cmd.Stderr = &ch.stderr
		out, err := ch.cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := ch.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() {
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				if line := sc.Text(); strings.HasPrefix(line, "PROBE-CHILD ") {
					ch.lines <- strings.TrimPrefix(line, "PROBE-CHILD ")
				}
			}
			_, _ = io.Copy(io.Discard, out)
			close(ch.lines)
		}()
		t.Cleanup(func() { _ = ch.cmd.Process.Kill(); _ = ch.cmd.Wait() })
		children[i] = ch
	}
	next := func(ch *child, what string) string {
		select {
		case line, ok := <-ch.lines:
			if !ok {
				t.Fatalf("a child ended before %s; its stderr:\n%s", what, ch.stderr.String())
			}
			return line
		case <-time.After(20 * time.Second):
			t.Fatalf("no %s from a child within 20 s", what)
		}
		return ""
	}
	for _, ch := range children {
		if line := next(ch, "READY"); line != "READY" {
			t.Fatalf("a child said %q, want READY", line)
		}
	}

	for range 5 {
		_ = c.Do(ctx, dep, func(context.Context) error { return &breakerd.HTTPError{StatusCode: 500} })
	}
	var ran, refused int
	for _, ch := range children {
		var r probeResult
		if err := json.Unmarshal([]byte(next(ch, "its result")), &r); err != nil || r.Error != "" {
			t.Fatalf("a child's result: %+v, %v", r, err)
		}
		t.Logf("child: %+v", r)
		switch {
		case r.Allowed && r.Source == "LOCAL":
			t.Errorf("a child was granted locally while the breaker was not closed: %+v", r)
		case r.Allowed:
			ran++
			if !r.Probe || r.Source != "SIDECAR" {
				t.Errorf("the call that ran: %+v; want breakerd's probe", r)
			}
		case r.Source == "SIDECAR" && r.Reason == breakerd.ReasonProbeInFlight.String(),
			r.Source == "LOCAL" && r.Reason == breakerd.ReasonOpen.String():
			refused++
		default:
			t.Errorf("a child's call: %+v; want run as the probe or refused (PROBE_IN_FLIGHT, or LOCAL OPEN)", r)
		}
	}
	if ran != 1 || refused != 2 {
		t.Errorf("%d calls ran and %d were refused; want 1 and 2", ran, refused)
	}
	if n := s.decisions(dep, "probe") - probes; n != 1 {
		t.Errorf("breakerd granted %v probes, want 1", n)
	}
	if !within(3*time.Second, func() bool {
		return s.metric("breakerd_transitions_total",
			map[string]string{"dependency": dep, "to": "closed", "reason": "probe_succeeded"}) == 1
	}) {
		t.Error("breakerd_transitions_total shows no close by the probe")
	}
}

// TestLocalProbeChild is one child process of the local-probe scenario
// (skipped unless run as one): it says READY once its Watch cache holds the
// dependency, waits until the cache holds it open (a LOCAL refusal),
// sleeps out the refusal's retry_after, makes one guarded call of 300 ms
// (Acquire, then ReportDecision, to tell how it was decided) and prints the
// decision.
func TestLocalProbeChild(t *testing.T) {
	addr, dep := os.Getenv(probeChildAddr), os.Getenv(probeChildDep)
	if addr == "" {
		t.Skip("run by TestLocalProbeOnlyOneOfThreeProcesses only")
	}
	say := func(line string) { fmt.Println("PROBE-CHILD " + line) }
	fail := func(err error) {
		b, _ := json.Marshal(probeResult{Error: err.Error()})
		say(string(b))
	}
	c, err := breakerd.New(breakerd.WithTarget(addr))
	if err != nil {
		fail(err)
		return
	}
	defer c.Close()
	ctx := context.Background()
	if !within(15*time.Second, func() bool { _, ok := c.CachedState(dep); return ok }) {
		fail(errors.New("the cache never held " + dep))
		return
	}
	say("READY")
	var refusal breakerd.Decision
	if !within(15*time.Second, func() bool {
		if st, _ := c.CachedState(dep); st != breakerd.StateOpen {
			return false
		}
		d, err := c.Acquire(ctx, dep, 0)
		if err == nil && d.Allowed {
			c.ReportDecision(ctx, d, breakerd.Explicit(breakerd.ClassCancelled)) // not the call
		}
		refusal = d
		return err == nil && !d.Allowed && d.Source == breakerd.SourceLocal
	}) {
		fail(fmt.Errorf("no LOCAL refusal of %s (last %+v)", dep, refusal))
		return
	}
	time.Sleep(refusal.RetryAfter + time.Millisecond)
	d, err := c.Acquire(ctx, dep, 0)
	if err != nil {
		fail(err)
		return
	}
	if d.Allowed {
		time.Sleep(300 * time.Millisecond)
		c.ReportDecision(ctx, d, breakerd.Success())
	}
	b, _ := json.Marshal(probeResult{Allowed: d.Allowed, Probe: d.Probe, Source: d.Source.String(), Reason: d.Reason.String()})
	say(string(b))
}

// conformance: local-stream-drop
//
// breakerd stopped: the Watch stream ends and the cache is cleared, so no
// call is granted locally: they fail open. Restarted on the same address,
// the first call is breakerd's (SIDECAR, counted allowed), and the
// fail-open decisions made meanwhile reach the new breakerd as client
// decisions within 3 s of its return.
func TestLocalStreamDropEndsTheFastPath(t *testing.T) {
	s := startSidecar(t)
	c := newDefaultClient(t, s.addr)
	ready(t, c)
	ctx := context.Background()
	const dep = "local/drop-go"
	fastPathOn(t, c, dep)
	everyGrantReported(t, s, dep)

	s.kill()
	eventually(t, "the stream to end and the cache to be cleared", func() bool { _, ok := c.CachedState(dep); return !ok })
	before := c.Stats()
	const down = 20
	for i := range down {
		if err := c.Do(ctx, dep, noop); err != nil {
			t.Fatalf("call %d while breakerd is down: %v", i, err)
		}
	}
	after := c.Stats()
	if n := after.FailOpen - before.FailOpen; n != down {
		t.Errorf("%d of the %d calls failed open; want all (none granted locally)", n, down)
	}

	// The first decision that is not an away decision is the first call
	// after the client is back. It is made at once: breakerd creates a
	// breaker when it counts the client decisions, which the client sends
	// a flush interval after it is back, and its created event would turn
	// the fast path on again.
	s2 := s.restart()
	var d breakerd.Decision
	deadline := time.Now().Add(10 * time.Second)
	for {
		var err error
		if d, err = c.Acquire(ctx, dep, 0); err != nil {
			t.Fatal(err)
		}
		if d.Source != breakerd.SourceFailOpen || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Microsecond)
	}
	back := time.Now()
	if !d.Allowed || d.Source != breakerd.SourceSidecar {
		t.Errorf("the first call after the restart: %+v; want allowed by SIDECAR", d)
	} else {
		c.ReportDecision(ctx, d, breakerd.Success())
	}
	if n := s2.decisions(dep, "allowed"); n != 1 {
		t.Errorf("the new breakerd counted %v allowed decisions, want 1", n)
	}
	failOpen := c.Stats().FailOpen - before.FailOpen // the calls above, and the away decisions until back
	if !within(3*time.Second, func() bool { return s2.clientDecisions(dep, "fail_open") == float64(failOpen) }) {
		t.Errorf("the new breakerd counted %v fail-open client decisions within 3 s, want %d",
			s2.clientDecisions(dep, "fail_open"), failOpen)
	}
	t.Logf("client decisions arrived %v after the client was back", time.Since(back))
}

// conformance: local-off
//
// The option off, on a dependency whose policy allows local decisions:
// every call goes to breakerd (100 allowed, no allowed_local, 100 Report
// RPCs).
func TestLocalDecisionsOffSendsEveryCall(t *testing.T) {
	s := startSidecar(t)
	c := newClient(t, s.addr, breakerd.WithLocalDecisions(false))
	ready(t, c)
	ctx := context.Background()
	const dep = "local/off-go"
	if err := c.Do(ctx, dep, noop); err != nil {
		t.Fatal(err)
	}
	if !within(200*time.Millisecond, func() bool { _, ok := c.CachedState(dep); return ok }) {
		t.Fatal("the created event did not reach the cache within 200 ms")
	}
	if d, err := c.Acquire(ctx, dep, 0); err != nil || d.Source != breakerd.SourceSidecar {
		t.Fatalf("Acquire after the created event: %+v, %v; want SIDECAR", d, err)
	} else {
		c.ReportDecision(ctx, d, breakerd.Success())
	}
	allowed, reportRPCs := s.decisions(dep, "allowed"), s.handled("Report")
	for i := range 100 {
		if err := c.Do(ctx, dep, noop); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	within(3*time.Second, func() bool { return s.handled("Report")-reportRPCs >= 100 })
	if n := s.decisions(dep, "allowed") - allowed; n != 100 {
		t.Errorf("breakerd allowed %v, want 100", n)
	}
	if n := s.decisions(dep, "allowed_local"); n != 0 {
		t.Errorf("allowed_local %v, want 0", n)
	}
	if n := s.handled("Report") - reportRPCs; n != 100 {
		t.Errorf("%v Report RPCs, want 100", n)
	}
}

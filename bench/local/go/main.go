// Command bench measures local decisions in the Go client (bench/local):
// a guarded no-op call with local decisions on, the same through the
// sidecar (local decisions off), gobreaker's Execute around the same no-op,
// breakerd's CPU per call on both client paths, and the trip reaction: from
// the failing call that trips a breaker to local refusal in two clients of
// the process. Each call is timed on its own (monotonic clock) after a
// warm-up. run.sh starts breakerd (bench/local/lib.sh) and passes its
// address, /metrics address and pid.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"math"
	"net/http"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/breakerd/breakerd/client/go"
	"github.com/sony/gobreaker/v2"
)

var (
	addr     = flag.String("addr", os.Getenv("BREAKERD_ADDR"), "breakerd's gRPC address")
	metrics  = flag.String("metrics", os.Getenv("BREAKERD_METRICS"), "breakerd's /metrics address (host:port)")
	pid      = flag.Int("pid", 0, "breakerd's pid (for its CPU time)")
	clkTck   = flag.Float64("clk-tck", 100, "clock ticks per second of /proc/PID/stat (getconf CLK_TCK)")
	smoke    = flag.Bool("smoke", false, "a short run that only checks the bench works")
	out      = flag.String("out", "", "where to write the JSON result")
	tripWait = flag.Duration("trip-call-gap", 100*time.Microsecond,
		"the pause between two guarded calls of a client waiting for its local refusal (the trip reaction)")
)

type summary struct {
	Median int64 `json:"median"`
	P99    int64 `json:"p99"`
	Calls  int   `json:"calls"`
}

type tripSummary struct {
	P50     float64 `json:"p50"`
	P99     float64 `json:"p99"`
	Max     float64 `json:"max"`
	Samples int     `json:"samples"`
}

type result struct {
	Language      string             `json:"language"`
	Peer          string             `json:"peer"`
	Runtime       string             `json:"runtime"`
	GuardedCallNs map[string]summary `json:"guarded_call_ns"`
	SidecarCPU    map[string]float64 `json:"sidecar_cpu_ns_per_call"`
	TripReaction  tripSummary        `json:"trip_reaction_ms"`
}

func noop(context.Context) error { return nil }

var errServer = &breakerd.HTTPError{StatusCode: 500}

func main() {
	flag.Parse()
	if *addr == "" || *metrics == "" || *pid == 0 || *out == "" {
		log.Fatal("bench: -addr, -metrics, -pid and -out are required (run.sh passes them)")
	}
	calls, rpcCalls, warm, rpcWarm, samples := 200_000, 20_000, 20_000, 2_000, 100
	if *smoke {
		calls, rpcCalls, warm, rpcWarm, samples = 2_000, 500, 500, 100, 5
	}
	res := result{Language: "go", Peer: "gobreaker " + moduleVersion("github.com/sony/gobreaker/v2"),
		Runtime: runtime.Version(), GuardedCallNs: map[string]summary{}, SidecarCPU: map[string]float64{}}

	// peer: gobreaker's Execute around the no-op, breakerd's defaults where
	// gobreaker has them (as bench/peers/gobreaker).
	cb := gobreaker.NewCircuitBreaker[any](peerSettings("bench/peer"))
	execute := func() error {
		_, err := cb.Execute(func() (any, error) { return nil, nil })
		return err
	}
	timeCalls(execute, warm) // warm-up
	res.GuardedCallNs["peer"] = summarize(timeCalls(execute, calls))

	// local: the guard with local decisions on.
	ctx := context.Background()
	c := newClient()
	const localDep = "bench/local"
	fastPathOn(c, localDep)
	guard := func() error { return c.Do(ctx, localDep, noop) }
	timeCalls(guard, warm)
	granted := settle(localDep, "allowed_local", float64(warm+1))
	cpu := sidecarTicks()
	local := timeCalls(guard, calls)
	settle(localDep, "allowed_local", granted+float64(calls))
	res.SidecarCPU["local"] = cpuPerCall(sidecarTicks()-cpu, calls)
	res.GuardedCallNs["local"] = summarize(local)
	if n := c.Stats().DroppedOutcomes; n > 0 {
		fmt.Fprintf(os.Stderr, "bench: local phase: %d outcomes dropped (more than 10,000 held unacknowledged)\n", n)
	}

	// trip reaction: c (fast path on) trips trip/<n>, an observer watches.
	res.TripReaction = tripReaction(c, samples)
	_ = c.Close()

	// rpc: the guard with local decisions off, with a decision timeout of
	// a second: on a loaded machine one answer later than the default 20 ms
	// would mark the sidecar away and time fail-open decisions instead.
	r := newClient(breakerd.WithLocalDecisions(false), breakerd.WithDecisionTimeout(time.Second))
	const rpcDep = "bench/rpc"
	rpcGuard := func() error { return r.Do(ctx, rpcDep, noop) }
	timeCalls(rpcGuard, rpcWarm)
	cpu = sidecarTicks()
	rpc := timeCalls(rpcGuard, rpcCalls)
	res.SidecarCPU["rpc"] = cpuPerCall(sidecarTicks()-cpu, rpcCalls)
	res.GuardedCallNs["rpc"] = summarize(rpc)
	if st := r.Stats(); st.FailOpen > 0 {
		fmt.Fprintf(os.Stderr, "bench: rpc phase: %d decisions failed open\n", st.FailOpen)
	}
	_ = r.Close()

	b, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile(*out, append(b, '\n'), 0o644); err != nil {
		log.Fatal(err)
	}
}

// newClient is a client of breakerd with the given options, connected.
func newClient(opts ...breakerd.Option) *breakerd.Client {
	quiet := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	c, err := breakerd.New(append([]breakerd.Option{breakerd.WithTarget(*addr), breakerd.WithLogger(quiet)}, opts...)...)
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.WaitReady(ctx); err != nil {
		log.Fatalf("bench: breakerd not ready: %v", err)
	}
	return c
}

// fastPathOn makes one guarded call of dep (breakerd creates its breaker),
// then waits until c grants dep in the client.
func fastPathOn(c *breakerd.Client, dep string) {
	if err := c.Do(context.Background(), dep, noop); err != nil {
		log.Fatalf("bench: first call of %s: %v", dep, err)
	}
	waitLocalGrant(c, dep)
}

// timeCalls makes n calls of f, each timed on its own; a call that fails
// stops the bench.
func timeCalls(f func() error, n int) []int64 {
	ns := make([]int64, n)
	for i := range ns {
		start := time.Now()
		err := f()
		ns[i] = int64(time.Since(start))
		if err != nil {
			log.Fatalf("bench: call %d: %v", i, err)
		}
	}
	return ns
}

func summarize(ns []int64) summary {
	s := slices.Clone(ns)
	slices.Sort(s)
	return summary{Median: s[len(s)/2], P99: s[min(len(s)-1, len(s)*99/100)], Calls: len(s)}
}

// settle waits (at most 5 s) until breakerd counts at least want decisions
// of dep (the batches have landed), and returns its count.
func settle(dep, decision string, want float64) float64 {
	deadline := time.Now().Add(5 * time.Second)
	for {
		n := metric("breakerd_acquire_total", map[string]string{"dependency": dep, "decision": decision})
		if n >= want || time.Now().After(deadline) {
			if n < want {
				fmt.Fprintf(os.Stderr, "bench: %s %s: breakerd counts %v, want %v\n", dep, decision, n, want)
			}
			return n
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// metric sums the samples of name whose labels include want.
func metric(name string, want map[string]string) float64 {
	resp, err := http.Get("http://" + *metrics + "/metrics")
	if err != nil {
		log.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		log.Fatal(err)
	}
	var sum float64
	for _, line := range strings.Split(string(body), "\n") {
		if !strings.HasPrefix(line, name+"{") {
			continue
		}
		end := strings.LastIndex(line, "}")
		match := true
		for k, v := range want {
			if !strings.Contains(line[:end], k+`="`+v+`"`) {
				match = false
			}
		}
		if v, err := strconv.ParseFloat(strings.TrimSpace(line[end+1:]), 64); match && err == nil {
			sum += v
		}
	}
	return sum
}

// sidecarTicks is breakerd's utime + stime (/proc/PID/stat fields 14, 15).
func sidecarTicks() float64 {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", *pid))
	if err != nil {
		log.Fatal(err)
	}
	fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+2:]))
	utime, _ := strconv.ParseFloat(fields[11], 64)
	stime, _ := strconv.ParseFloat(fields[12], 64)
	return utime + stime
}

func cpuPerCall(ticks float64, calls int) float64 {
	return math.Round(ticks/(*clkTck)*1e9/float64(calls)*10) / 10
}

// tripReaction takes samples of the trip reaction, each on a fresh
// dependency trip/<n>: c's fast path on, an observer client's too; five
// guarded calls of c that fail; t0 when the fifth returns; each client
// then makes guarded no-op calls (one each -trip-call-gap) until one is
// refused LOCAL; the sample is the later refusal minus t0.
func tripReaction(c *breakerd.Client, samples int) tripSummary {
	ctx := context.Background()
	var ms []float64
	for n := range samples {
		dep := fmt.Sprintf("trip/%d", n)
		fastPathOn(c, dep)
		observer := newClient()
		waitLocalGrant(observer, dep)
		for range 5 {
			if err := c.Do(ctx, dep, func(context.Context) error { return errServer }); !errors.Is(err, errServer) {
				log.Fatalf("bench: %s: a failing call returned %v", dep, err)
			}
		}
		t0 := time.Now()
		refused := make([]time.Time, 2)
		var wg sync.WaitGroup
		for i, client := range []*breakerd.Client{c, observer} {
			wg.Go(func() {
				deadline := t0.Add(10 * time.Second)
				for {
					err := client.Do(ctx, dep, noop)
					var open *breakerd.OpenError
					if errors.As(err, &open) && open.Source == breakerd.SourceLocal {
						refused[i] = time.Now()
						return
					}
					if time.Now().After(deadline) {
						log.Fatalf("bench: %s: client %d not refused locally within 10 s (last %v)", dep, i, err)
					}
					time.Sleep(*tripWait)
				}
			})
		}
		wg.Wait()
		later := refused[0]
		if refused[1].After(later) {
			later = refused[1]
		}
		ms = append(ms, float64(later.Sub(t0))/float64(time.Millisecond))
		_ = observer.Close()
	}
	slices.Sort(ms)
	round := func(v float64) float64 { return math.Round(v*100) / 100 }
	return tripSummary{P50: round(ms[len(ms)/2]), P99: round(ms[min(len(ms)-1, len(ms)*99/100)]),
		Max: round(ms[len(ms)-1]), Samples: len(ms)}
}

// waitLocalGrant waits until c grants dep locally (its Watch cache holds
// the breaker), reporting every grant.
func waitLocalGrant(c *breakerd.Client, dep string) {
	ctx := context.Background()
	deadline := time.Now().Add(5 * time.Second)
	for {
		d, err := c.Acquire(ctx, dep, 0)
		if err != nil {
			log.Fatal(err)
		}
		if d.Allowed {
			c.ReportDecision(ctx, d, breakerd.Success())
			if d.Source == breakerd.SourceLocal {
				return
			}
		}
		if time.Now().After(deadline) {
			log.Fatalf("bench: no local grant of %s within 5 s", dep)
		}
		time.Sleep(time.Millisecond)
	}
}

// peerSettings mirrors breakerd's defaults where gobreaker has an
// equivalent (as bench/peers/gobreaker/peer_test.go).
func peerSettings(name string) gobreaker.Settings {
	return gobreaker.Settings{
		Name:         name,
		MaxRequests:  1,
		Interval:     30 * time.Second,
		BucketPeriod: 3 * time.Second,
		Timeout:      30 * time.Second,
		ReadyToTrip: func(c gobreaker.Counts) bool {
			if c.ConsecutiveFailures >= 5 {
				return true
			}
			return c.Requests >= 20 && float64(c.TotalFailures) >= 0.5*float64(c.Requests)
		},
	}
}

func moduleVersion(path string) string {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, m := range info.Deps {
			if m.Path == path {
				return m.Version
			}
		}
	}
	return "unknown"
}

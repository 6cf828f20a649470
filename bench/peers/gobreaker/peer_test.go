// Peer benchmark: sony/gobreaker v2 doing the same work as breakerd's engine
// benchmark (bench/engine_bench.cc): one "pair" = registry lookup by
// dependency name + Allow() + done(nil) on a CLOSED breaker.
//
// Benchmark-only: this module is never linked into breakerd.
package peer

import (
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sony/gobreaker/v2"
)

type breaker = gobreaker.TwoStepCircuitBreaker[any]

// settings mirrors breakerd's defaults where gobreaker has an equivalent:
//   - consecutive_failures 5      -> ReadyToTrip: ConsecutiveFailures >= 5
//   - failure_rate 0.5, min 20    -> ReadyToTrip: Requests >= 20 && failures/requests >= 0.5
//   - window 30 s, 10 buckets     -> Interval 30 s, BucketPeriod 3 s (rolling window)
//   - cooldown base 30 s          -> Timeout 30 s (no doubling/jitter in gobreaker)
//   - required_successes 1        -> MaxRequests 1 (one probe when half-open)
func settings(name string) gobreaker.Settings {
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

// rwRegistry: map behind a sync.RWMutex (read lock on the hot path, write lock
// only to create a breaker on first use), like breakerd's shard map.
type rwRegistry struct {
	mu sync.RWMutex
	m  map[string]*breaker
}

func newRWRegistry() *rwRegistry { return &rwRegistry{m: make(map[string]*breaker)} }

func (r *rwRegistry) get(name string) *breaker {
	r.mu.RLock()
	cb := r.m[name]
	r.mu.RUnlock()
	if cb != nil {
		return cb
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if cb = r.m[name]; cb == nil {
		cb = gobreaker.NewTwoStepCircuitBreaker[any](settings(name))
		r.m[name] = cb
	}
	return cb
}

// syncMapRegistry: lock-free reads (sync.Map), the closest Go analogue of
// resilience4j's ConcurrentHashMap-backed registry. Used for an extra row.
type syncMapRegistry struct{ m sync.Map }

func (r *syncMapRegistry) get(name string) *breaker {
	if v, ok := r.m.Load(name); ok {
		return v.(*breaker)
	}
	v, _ := r.m.LoadOrStore(name, gobreaker.NewTwoStepCircuitBreaker[any](settings(name)))
	return v.(*breaker)
}

type registry interface{ get(name string) *breaker }

// pair: lookup + Allow + done(nil) (success).
func pair(r registry, name string) error {
	done, err := r.get(name).Allow()
	if err != nil {
		return err
	}
	done(nil)
	return nil
}

// One registry shared by all benchmarks of a run, as in engine_bench.cc.
var (
	sharedRW      = newRWRegistry()
	sharedSyncMap = &syncMapRegistry{}
	sink          error
)

func BenchmarkPair(b *testing.B) {
	b.ReportAllocs()
	const name = "bench/key-0"
	var err error
	for i := 0; i < b.N; i++ {
		err = pair(sharedRW, name)
	}
	if err != nil {
		b.Fatal(err)
	}
	sink = err
}

func runParallel(b *testing.B, r registry, sameKey bool) {
	b.ReportAllocs()
	var next atomic.Int64 // per benchmark invocation: keys key-0, key-1, ...
	b.RunParallel(func(pb *testing.PB) {
		name := "bench/shared"
		if !sameKey {
			name = "bench/key-" + strconv.FormatInt(next.Add(1)-1, 10)
		}
		var err error
		for pb.Next() {
			if e := pair(r, name); e != nil {
				err = e
			}
		}
		if err != nil {
			b.Error(err)
		}
	})
}

// Run with -cpu 2: RunParallel starts GOMAXPROCS goroutines that share b.N,
// so ns/op = wall / (ops of both goroutines); per-goroutine time = 2 x ns/op.
func BenchmarkPairParallel(b *testing.B) {
	b.Run("distinct_keys", func(b *testing.B) { runParallel(b, sharedRW, false) })
	b.Run("same_key", func(b *testing.B) { runParallel(b, sharedRW, true) })
	b.Run("distinct_keys_syncmap", func(b *testing.B) { runParallel(b, sharedSyncMap, false) })
}

// Reject while open: lookup + Allow() refused with ErrOpenState. gobreaker
// has no force-open, so the breaker is tripped with 5 failures (Timeout 30 s
// keeps it open far longer than one benchmark run).
func BenchmarkRejectOpen(b *testing.B) {
	b.ReportAllocs()
	r := newRWRegistry()
	const name = "bench/open"
	for i := 0; i < 5; i++ {
		done, err := r.get(name).Allow()
		if err != nil {
			b.Fatal(err)
		}
		done(errors.New("boom"))
	}
	if s := r.get(name).State(); s != gobreaker.StateOpen {
		b.Fatalf("state %v, want open", s)
	}
	b.ResetTimer()
	var err error
	for i := 0; i < b.N; i++ {
		err = pair(r, name)
	}
	b.StopTimer()
	if !errors.Is(err, gobreaker.ErrOpenState) {
		b.Fatalf("got %v, want ErrOpenState", err)
	}
	sink = err
}

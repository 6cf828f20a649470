package breakerd

import (
	"context"
	"testing"
	"time"

	pb "github.com/breakerd/breakerd/client/go/breakerdv1"
)

// The guarded no-op call on the local fast path, with no sidecar: the
// cache is filled by hand and ReportBatch goes to a fake that accepts
// every request. go test -run xxx -bench LocalGuard -benchmem
func BenchmarkLocalGuard(b *testing.B) {
	rpc := &fakeBatchRPC{forget: true}
	c, err := New(WithTarget("127.0.0.1:1"), WithWatchBackoff(time.Hour, time.Hour), WithAwayProbeInterval(time.Hour))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	c.stopBackground()
	c.background.Wait()
	c.rpc = rpc
	const dep = "bench/local"
	c.cache.apply(&pb.StateChange{Dependency: dep, State: StateClosed, LocalDecisions: true, Generation: 1}, time.Now())
	ctx := context.Background()
	noop := func(context.Context) error { return nil }
	value := func(context.Context) (int, error) { return 1, nil }
	b.Run("Do", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := c.Do(ctx, dep, noop); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Guard", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := Guard(ctx, c, dep, value); err != nil {
				b.Fatal(err)
			}
		}
	})
}

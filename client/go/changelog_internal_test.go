package breakerd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"
)

// fakeClock is a logClock that moves only when the test says so.
type fakeClock struct {
	mu      sync.Mutex
	now     time.Time
	pending []*fakeTask
}

type fakeTask struct {
	due     time.Time
	f       func()
	stopped bool
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Unix(1_000_000, 0)} }

func (c *fakeClock) logClock() logClock {
	return logClock{
		now: func() time.Time {
			c.mu.Lock()
			defer c.mu.Unlock()
			return c.now
		},
		afterFunc: func(d time.Duration, f func()) func() {
			c.mu.Lock()
			defer c.mu.Unlock()
			task := &fakeTask{due: c.now.Add(d), f: f}
			c.pending = append(c.pending, task)
			return func() {
				c.mu.Lock()
				task.stopped = true
				c.mu.Unlock()
			}
		},
	}
}

// advance moves the clock by d, running the tasks that fall due on the way,
// in order, each at its due time.
func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	end := c.now.Add(d)
	for {
		var next *fakeTask
		for _, task := range c.pending {
			if !task.stopped && !task.due.After(end) && (next == nil || task.due.Before(next.due)) {
				next = task
			}
		}
		if next == nil {
			break
		}
		c.pending = slices.DeleteFunc(c.pending, func(t *fakeTask) bool { return t == next })
		c.now = next.due
		c.mu.Unlock()
		next.f()
		c.mu.Lock()
	}
	c.now = end
	c.mu.Unlock()
}

// scheduled is the number of tasks still pending.
func (c *fakeClock) scheduled() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, task := range c.pending {
		if !task.stopped {
			n++
		}
	}
	return n
}

// logLine is one record a capturingHandler saw.
type logLine struct {
	at    time.Time // the fake clock's time when it was written
	level slog.Level
	msg   string
	attrs map[string]any
}

// capturingHandler keeps every record (with the fake time) for the test.
type capturingHandler struct {
	clock *fakeClock
	mu    sync.Mutex
	lines []logLine
}

func (h *capturingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *capturingHandler) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *capturingHandler) WithGroup(string) slog.Handler            { return h }
func (h *capturingHandler) Handle(_ context.Context, r slog.Record) error {
	line := logLine{at: h.clock.logClock().now(), level: r.Level, msg: r.Message, attrs: map[string]any{}}
	r.Attrs(func(a slog.Attr) bool {
		line.attrs[a.Key] = a.Value.Any()
		return true
	})
	h.mu.Lock()
	h.lines = append(h.lines, line)
	h.mu.Unlock()
	return nil
}

func (h *capturingHandler) snapshot() []logLine {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.lines)
}

func messages(lines []logLine) []string {
	var out []string
	for _, l := range lines {
		out = append(out, l.msg)
	}
	return out
}

// withLogClock replaces the change logs' clock (tests only).
func withLogClock(lc logClock) Option { return func(c *config) { c.logClock = lc } }

// conformance: log-flap
//
// The client's availability log with its clock injected: the sidecar flips
// away and back 100 times within 1 s. The first change of each kind is
// logged at once, the other flips of the 10 s that follow are counted, not
// logged, and when the 10 s are up one line gives the state they ended in
// and the number of changes (issue 14: "once per change" became once per
// flip under CPU load).
func TestAvailabilityLogFlapIsRateLimited(t *testing.T) {
	clock := newFakeClock()
	logs := &capturingHandler{clock: clock}
	// Nothing listens at the target: the client only logs here.
	c, err := New(WithTarget("127.0.0.1:1"), WithWatch(false), WithLogger(slog.New(logs)),
		WithAwayProbeInterval(time.Hour), withLogClock(clock.logClock()))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := clock.logClock().now()

	timeout := errors.New("rpc error: code = DeadlineExceeded")
	const flips = 100
	for i := range flips {
		c.markAway(timeout)
		if i == 0 {
			if got := messages(logs.snapshot()); len(got) != 1 {
				t.Fatalf("after the first change the log holds %q; want the away line at once", got)
			}
		}
		clock.advance(5 * time.Millisecond)
		c.markBack("health check")
		clock.advance(5 * time.Millisecond)
	}
	if d := clock.logClock().now().Sub(start); d > time.Second {
		t.Fatalf("the flips took %v of fake time, want within 1 s", d)
	}
	lines := logs.snapshot()
	if len(lines) != 2 || lines[0].level != slog.LevelWarn || lines[1].level != slog.LevelInfo {
		t.Fatalf("during the flapping the log holds %q; want one away and one back line", messages(lines))
	}
	if lines[0].at != start || lines[1].at != start.Add(5*time.Millisecond) {
		t.Errorf("first lines written at %v and %v; want at once (%v and +5ms)", lines[0].at, lines[1].at, start)
	}
	if c.sidecarLog.isWrong() || c.away.Load() {
		t.Fatalf("the flips ended back, yet away=%v", c.away.Load())
	}

	// Up to 10 s after the first lines nothing more is written...
	clock.advance(10*time.Second - time.Second - 6*time.Millisecond)
	if got := len(logs.snapshot()); got != 2 {
		t.Fatalf("before the 10 s are up the log holds %d lines, want 2: %q", got, messages(logs.snapshot()))
	}
	// ...then one line with the state they ended in and the count.
	clock.advance(time.Second)
	lines = logs.snapshot()
	if len(lines) != 3 {
		t.Fatalf("after 10 s the log holds %q; want one more line", messages(lines))
	}
	const held = 2*flips - 2 // every change but the two logged at once
	last := lines[2]
	wantMsg := fmt.Sprintf("breakerd: sidecar back (%d changes not logged since the previous line)", held)
	if last.level != slog.LevelInfo || last.msg != wantMsg || last.attrs["changes_not_logged"] != int64(held) {
		t.Errorf("last line %v %q %v; want INFO %q with changes_not_logged=%d", last.level, last.msg, last.attrs, wantMsg, held)
	}
	if want := start.Add(5*time.Millisecond + 10*time.Second); last.at != want {
		t.Errorf("last line written at %v, want %v (10 s after the previous back line)", last.at, want)
	}

	// Then it is quiet: nothing scheduled, nothing more written.
	clock.advance(time.Minute)
	if got := len(logs.snapshot()); got != 3 || clock.scheduled() != 0 {
		t.Errorf("a minute later: %d lines, %d tasks scheduled; want 3 and none", got, clock.scheduled())
	}
	// A later outage is logged at once again.
	c.markAway(timeout)
	if lines := logs.snapshot(); len(lines) != 4 || lines[3].msg == "" || lines[3].level != slog.LevelWarn {
		t.Errorf("a change after a quiet minute: %q; want its away line at once", messages(lines))
	}
}

// A flapping condition that ends wrong is logged wrong, with the latest
// message of that kind, when its own interval is up.
func TestChangeLogHeldBackStateIsTheLatest(t *testing.T) {
	clock := newFakeClock()
	logs := &capturingHandler{clock: clock}
	l := newChangeLog(slog.New(logs), clock.logClock())

	if l.right(slog.LevelInfo, "back") {
		t.Error("right() on a log that starts right reported a change")
	}
	l.wrong(slog.LevelWarn, "unreachable 1")
	if l.wrong(slog.LevelWarn, "unreachable again") {
		t.Error("wrong() while wrong reported a change")
	}
	clock.advance(time.Second)
	l.right(slog.LevelInfo, "back")
	clock.advance(time.Second)
	l.wrong(slog.LevelWarn, "unreachable 2") // 2 s after the first wrong line: held
	clock.advance(7 * time.Second)
	if got := messages(logs.snapshot()); !slices.Equal(got, []string{"unreachable 1", "back"}) {
		t.Fatalf("log %q; want no second wrong line within 10 s of the first", got)
	}
	clock.advance(time.Second) // 10 s after the first wrong line
	want := []string{"unreachable 1", "back", "unreachable 2 (1 change not logged since the previous line)"}
	if got := messages(logs.snapshot()); !slices.Equal(got, want) {
		t.Errorf("log %q, want %q", got, want)
	}
}

// Lines of one kind are at least 10 s apart however the condition flaps,
// and the log still says something while it flaps.
func TestChangeLogLinesOfAKindAreTenSecondsApart(t *testing.T) {
	clock := newFakeClock()
	logs := &capturingHandler{clock: clock}
	l := newChangeLog(slog.New(logs), clock.logClock())
	for range 100 { // flip every 300 ms for 60 s
		l.wrong(slog.LevelWarn, "unreachable")
		clock.advance(300 * time.Millisecond)
		l.right(slog.LevelInfo, "back")
		clock.advance(300 * time.Millisecond)
	}
	clock.advance(20 * time.Second)
	last := map[slog.Level]time.Time{}
	lines := logs.snapshot()
	for _, line := range lines {
		if prev, ok := last[line.level]; ok && line.at.Sub(prev) < changeLogInterval {
			t.Errorf("two %v lines %v apart", line.level, line.at.Sub(prev))
		}
		last[line.level] = line.at
	}
	if len(lines) < 6 || len(lines) > 2*(80/10+1) {
		t.Errorf("%d lines for 200 changes in 60 s", len(lines))
	}
	if final := lines[len(lines)-1]; final.level != slog.LevelInfo {
		t.Errorf("last line %q; the flapping ended back", final.msg)
	}
}

// Close drops a held-back line.
func TestChangeLogCloseDropsTheHeldBackLine(t *testing.T) {
	clock := newFakeClock()
	logs := &capturingHandler{clock: clock}
	l := newChangeLog(slog.New(logs), clock.logClock())
	l.wrong(slog.LevelWarn, "unreachable")
	l.right(slog.LevelInfo, "back")
	l.wrong(slog.LevelWarn, "unreachable") // held
	l.close()
	clock.advance(time.Minute)
	if got := len(logs.snapshot()); got != 2 || clock.scheduled() != 0 {
		t.Errorf("after close: %d lines, %d tasks; want 2 and none", got, clock.scheduled())
	}
}

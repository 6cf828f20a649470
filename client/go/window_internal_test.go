package breakerd

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

const ms = time.Millisecond

// An answer counts for a late RPC only if it came after that RPC was sent.
func TestAnswerClockTellsLateFromAbsent(t *testing.T) {
	a := newAnswerClock()
	sent := a.now()
	if a.answeredSince(sent) {
		t.Fatal("answeredSince with no answer yet")
	}
	a.answeredAt(sent - ms)
	if a.answeredSince(sent) {
		t.Error("an answer from before the send counted")
	}
	a.answeredAt(sent + 5*ms)
	if !a.answeredSince(sent) {
		t.Error("an answer 5 ms after the send did not count")
	}
	later := a.now()
	a.answered()
	if !a.answeredSince(later - ms) {
		t.Error("answered() now does not count for an RPC sent a millisecond ago")
	}
}

// At its timeout a caller takes an answer already in, lets the transport
// catch up once when its timer fired late, and otherwise gives up.
func TestOnTimeout(t *testing.T) {
	const catchUp = 5 * ms
	for _, tc := range []struct {
		answered, caughtUp bool
		overdue            time.Duration
		want               timeoutVerdict
	}{
		{false, false, ms, giveUp},            // on time, nothing in
		{true, false, ms, waitForAnswer},      // the answer is in
		{true, true, 50 * ms, waitForAnswer},  // in, after catching up
		{false, false, 30 * ms, catchUpFirst}, // fired 30 ms late: read first
		{false, true, 30 * ms, giveUp},        // caught up already
		{false, false, catchUp, giveUp},       // just within the slack
	} {
		if got := onTimeout(tc.answered, tc.caughtUp, tc.overdue, catchUp); got != tc.want {
			t.Errorf("onTimeout(answered %v, caughtUp %v, overdue %v) = %v, want %v",
				tc.answered, tc.caughtUp, tc.overdue, got, tc.want)
		}
	}
}

// The late error is a DEADLINE_EXCEEDED status, as breakerd's own timeouts.
func TestLateErrorIsDeadlineExceeded(t *testing.T) {
	err := error(&lateError{timeout: 20 * ms})
	if got := status.Code(err); got != codes.DeadlineExceeded || !marksAway(err) {
		t.Errorf("status.Code = %v, marksAway %v; want DeadlineExceeded, true", got, marksAway(err))
	}
}

// The window lets limit RPCs out, queues the rest, lets Reports in before
// decisions, and drops the queue when flushed (except keep) or closed.
func TestSendWindow(t *testing.T) {
	ctx := context.Background()
	w := newSendWindow(2)
	for range 2 {
		if err := w.enter(ctx, laneDecision, false); err != nil {
			t.Fatal(err)
		}
	}

	var mu sync.Mutex
	var order []string
	var wg sync.WaitGroup
	enter := func(name string, l lane, keep bool) <-chan error {
		got := make(chan error, 1)
		wg.Go(func() {
			err := w.enter(ctx, l, keep)
			if err == nil {
				mu.Lock()
				order = append(order, name)
				mu.Unlock()
			}
			got <- err
		})
		return got
	}
	waitQueued := func(n int) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for {
			w.mu.Lock()
			q := w.lanes[0].Len() + w.lanes[1].Len()
			w.mu.Unlock()
			if q == n {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d queued, want %d", q, n)
			}
			time.Sleep(ms)
		}
	}
	d1 := enter("decision 1", laneDecision, false)
	waitQueued(1)
	r1 := enter("report 1", laneReport, false)
	waitQueued(2)
	w.leave()
	if err := <-r1; err != nil {
		t.Fatalf("report: %v", err)
	}
	w.leave()
	if err := <-d1; err != nil {
		t.Fatalf("decision: %v", err)
	}
	if !slices.Equal(order, []string{"report 1", "decision 1"}) {
		t.Errorf("order %q: the queued report goes first", order)
	}

	// Full again (report 1 and decision 1 hold the places): flush drops the
	// queued decision, not the kept report.
	d2 := enter("decision 2", laneDecision, false)
	waitQueued(1)
	k := enter("late permit", laneReport, true)
	waitQueued(2)
	w.flush()
	if err := <-d2; !errors.Is(err, errNotSent) {
		t.Errorf("flushed decision: %v, want errNotSent", err)
	}
	waitQueued(1)

	// A caller that gives up while queued leaves the queue.
	cctx, cancel := context.WithCancel(ctx)
	gaveUp := make(chan error, 1)
	go func() { gaveUp <- w.enter(cctx, laneDecision, false) }()
	waitQueued(2)
	cancel()
	if err := <-gaveUp; !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled while queued: %v", err)
	}
	waitQueued(1)

	w.close()
	if err := <-k; !errors.Is(err, errNotSent) {
		t.Errorf("kept report on close: %v, want errNotSent", err)
	}
	if err := w.enter(ctx, laneReport, true); !errors.Is(err, errNotSent) {
		t.Errorf("enter after close: %v", err)
	}
	wg.Wait()
}

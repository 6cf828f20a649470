package breakerd

import (
	"container/list"
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// How many Acquire, AcquireFirst and Report RPCs the client has on the wire
// at once, and who waits.
//
// breakerd takes at most 256 streams per connection, and a loaded machine
// starts a burst of goroutines faster than it writes their RPCs: of a
// thousand Acquires started together, each timed from when it was issued,
// many expire waiting for a stream or for the CPU before they are written,
// and fail open (issue 14). The window lets sendWindowLimit RPCs out at a
// time; the others wait their turn, Reports before decisions (they end work
// already begun and return permits), and each RPC's decision timeout starts
// when it is sent, so the timeout measures breakerd, not the application's
// own burst. While the sidecar is away the queue is answered at once from
// the fail mode (flush). The same numbers and semantics as the Node
// client's send-window.ts.

// sendWindowLimit is the number of RPCs let out at once.
const sendWindowLimit = 32

// lateAnswer is how much longer than the decision timeout an RPC sent by
// send may stay open (its gRPC deadline). A caller that stops waiting (its
// ctx ended, or the decision timeout passed) leaves it running, so a permit
// breakerd grants meanwhile is reported OUTCOME_CANCELLED instead of leaked
// (a leaked probe permit would refuse the dependency PROBE_IN_FLIGHT for the
// whole lease), and a Report still lands.
const lateAnswer = time.Second

type lane int

const (
	laneReport lane = iota
	laneDecision
)

// errNotSent: the RPC waited in the window and was dropped from it, because
// the sidecar was marked away or the client closed.
var errNotSent = errors.New("breakerd: not sent (sidecar away or client closed)")

// sendWindow bounds the RPCs in flight, with a FIFO queue per lane. Safe
// for concurrent use.
type sendWindow struct {
	limit int // constant after newSendWindow

	mu       sync.Mutex
	inFlight int          // guarded by mu
	lanes    [2]list.List // guarded by mu; of *windowTicket, per lane
	closed   bool         // guarded by mu
}

// windowTicket is one caller waiting for a place.
type windowTicket struct {
	lane  lane
	keep  bool          // not dropped by flush (a late permit going back)
	ready chan struct{} // closed when granted or dropped
	// Guarded by sendWindow.mu.
	elem    *list.Element // nil once it left the queue
	granted bool
}

func newSendWindow(limit int) *sendWindow { return &sendWindow{limit: limit} }

// enter takes a place, waiting in l's queue while the window is full. It
// returns ctx's error if ctx ends first (the place is not taken) and
// errNotSent if the queue was flushed meanwhile. On nil the caller must call
// leave exactly once.
func (w *sendWindow) enter(ctx context.Context, l lane, keep bool) error {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return errNotSent
	}
	if w.inFlight < w.limit { // the queues are empty whenever there is room
		w.inFlight++
		w.mu.Unlock()
		return nil
	}
	t := &windowTicket{lane: l, keep: keep, ready: make(chan struct{})}
	t.elem = w.lanes[l].PushBack(t)
	w.mu.Unlock()

	select {
	case <-t.ready:
	case <-ctx.Done():
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case t.elem != nil: // ctx ended while queued
		w.lanes[l].Remove(t.elem)
		t.elem = nil
		return ctx.Err()
	case !t.granted:
		return errNotSent
	case ctx.Err() != nil: // granted as ctx ended: send nothing
		w.leaveLocked()
		return ctx.Err()
	}
	return nil
}

// leave gives a place back and lets the next waiter in (Reports first).
func (w *sendWindow) leave() {
	w.mu.Lock()
	w.leaveLocked()
	w.mu.Unlock()
}

func (w *sendWindow) leaveLocked() {
	w.inFlight--
	for w.inFlight < w.limit {
		front := w.lanes[laneReport].Front()
		if front == nil {
			front = w.lanes[laneDecision].Front()
		}
		if front == nil {
			return
		}
		t := front.Value.(*windowTicket)
		w.lanes[t.lane].Remove(front)
		t.elem, t.granted = nil, true
		w.inFlight++
		close(t.ready)
	}
}

// flush drops every queued caller not marked keep (the sidecar is away:
// nothing should wait for it); they get errNotSent.
func (w *sendWindow) flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.dropLocked(false)
}

// close drops every queued caller and refuses new ones (the client closed).
func (w *sendWindow) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closed = true
	w.dropLocked(true)
}

func (w *sendWindow) dropLocked(all bool) {
	for i := range w.lanes {
		for e := w.lanes[i].Front(); e != nil; {
			next := e.Next()
			if t := e.Value.(*windowTicket); all || !t.keep {
				w.lanes[i].Remove(e)
				t.elem = nil
				close(t.ready)
			}
			e = next
		}
	}
}

// maxCatchUp is how long a caller whose timer fired late (this process was
// held up: a GC pause, a busy CPU) waits before it gives up, so that the
// transport first reads the answers that came meanwhile: the timers of a
// process that resumes run before its network reader. A quarter of the
// decision timeout when that is less.
const maxCatchUp = 5 * time.Millisecond

// send runs one unary RPC (invoke) through the window on its own goroutine,
// so the caller can stop waiting without cancelling it. The caller waits
// until the RPC ends, until ctx ends (then ctx's error), or for the decision
// timeout from when the RPC is sent (then a *lateError) — unless breakerd's
// answer has reached the transport by then, which it takes, or the timer
// fired late, when it first lets the transport catch up (maxCatchUp). The RPC itself
// is not cancelled with ctx: its own deadline is the decision timeout plus
// lateAnswer. finish, if not nil, gets the RPC's result on its goroutine
// once it ends, with late true when the caller had stopped waiting.
// errNotSent when the queue was flushed before the RPC got a place.
func send[Res any](c *Client, ctx context.Context, l lane, keep bool,
	invoke func(context.Context) (Res, error), finish func(res Res, err error, late bool)) (Res, error) {
	var zero Res
	if err := c.window.enter(ctx, l, keep); err != nil {
		return zero, err
	}
	type answer struct {
		res Res
		err error
	}
	const (
		waiting int32 = iota
		answered
		abandoned
	)
	var state atomic.Int32
	answers := make(chan answer, 1)
	sent := make(chan time.Duration, 1)
	progress := &rpcProgress{}
	go func() {
		rctx, cancel := context.WithTimeout(context.WithValue(context.WithoutCancel(ctx), rpcProgressKey{}, progress),
			c.cfg.decisionTimeout+lateAnswer)
		sent <- c.answers.now()
		res, err := invoke(rctx)
		cancel()
		late := !state.CompareAndSwap(waiting, answered)
		if !late {
			c.window.leave()
			answers <- answer{res, err}
		}
		if finish != nil {
			finish(res, err, late)
		}
	}()

	var timer *time.Timer
	var timeout <-chan time.Time
	var sentAt time.Duration
	catchUp, caughtUp := min(maxCatchUp, c.cfg.decisionTimeout/4), false
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
wait:
	for {
		select {
		case a := <-answers:
			return a.res, a.err
		case <-ctx.Done():
			break wait
		case sentAt = <-sent:
			sent = nil
			timer = time.NewTimer(c.cfg.decisionTimeout)
			timeout = timer.C
		case <-timeout:
			overdue := c.answers.now() - sentAt - c.cfg.decisionTimeout
			switch onTimeout(progress.answered.Load(), caughtUp, overdue, catchUp) {
			case waitForAnswer:
				timeout = nil
			case catchUpFirst:
				caughtUp = true
				timer.Reset(catchUp)
			case giveUp:
				break wait
			}
		}
	}
	if !state.CompareAndSwap(waiting, abandoned) {
		a := <-answers // it answered just now: take it
		return a.res, a.err
	}
	c.window.leave()
	if err := ctx.Err(); err != nil {
		return zero, err
	}
	return zero, &lateError{timeout: c.cfg.decisionTimeout, sentAt: sentAt}
}

// timeoutVerdict is what a caller does when its decision timeout is up.
type timeoutVerdict int

const (
	giveUp        timeoutVerdict = iota
	waitForAnswer                // the answer is in, on its way to the RPC's goroutine
	catchUpFirst                 // wait catchUp, then judge again
)

// onTimeout: answered says breakerd's answer reached the transport, overdue
// how late the timer fired. A timer more than catchUp late means this
// process was held up and answers may wait unread in the socket: they are
// read first (once).
func onTimeout(answered, caughtUp bool, overdue, catchUp time.Duration) timeoutVerdict {
	switch {
	case answered:
		return waitForAnswer
	case !caughtUp && overdue > catchUp:
		return catchUpFirst
	}
	return giveUp
}

// decide is send for an Acquire or AcquireFirst: a permit that arrives after
// the caller stopped waiting goes to onLate.
func decide[Res any](c *Client, ctx context.Context, invoke func(context.Context) (Res, error), onLate func(Res)) (Res, error) {
	return send(c, ctx, laneDecision, false, invoke, func(res Res, err error, late bool) {
		if late && err == nil {
			onLate(res)
		}
	})
}

package breakerd

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"time"

	pb "github.com/breakerd/breakerd/client/go/breakerdv1"
	"google.golang.org/protobuf/types/known/durationpb"
)

// What the client decided without breakerd goes to it in batches
// (ReportBatch; client README "Local decisions"): per dependency and
// generation the first attempts granted in the client and the outcomes of
// those calls, the chain decisions made in the client, and per dependency
// the decisions made without breakerd (local refusals, fail-open and
// fail-closed). The callers only append to the pending batch under a mutex
// (no I/O, no timer, no RPC); one goroutine, flushLoop, sends it: every
// flush interval while something is pending, at once when 1,000 outcomes
// are, and at Close. One request is on the wire at a time, outside the send
// window; a failed one is sent again unchanged (same sequence: breakerd
// applies it once) at the next flush, at most maxBatchSends times.

const (
	// maxBatchOutcomes is breakerd's limit of outcomes in one ReportBatch;
	// the pending batch is flushed at once when it holds that many.
	maxBatchOutcomes = 1000
	// maxUnackedOutcomes bounds the outcomes held (pending and sent, not
	// yet acknowledged); past it an outcome is dropped (DroppedOutcomes).
	maxUnackedOutcomes = 10000
	// maxBatchSends is how often one request is sent before it is dropped.
	maxBatchSends = 3
	// maxDecisionDependencies bounds the dependencies whose client
	// decisions are counted between two flushes (a long away spell over
	// many one-off names must not grow the map without end).
	maxDecisionDependencies = 10000
	// maxChainDecisionKeys bounds the (chain, tier) counters likewise.
	maxChainDecisionKeys = 1024
	// batchTimeoutFactor x the decision timeout is a ReportBatch's deadline.
	batchTimeoutFactor = 10
)

// localOutcome is the outcome of a locally granted call, as recorded by the
// caller (converted to a pb.LocalOutcome by the flusher).
type localOutcome struct {
	outcome Outcome
	chain   string
	tier    uint32
}

// depBatch is what is pending for one dependency and generation: its
// slot. Kept across flushes while it is used, so steady traffic allocates
// nothing. The Watch cache's entry points to it, so that a grant is one
// atomic add (no lock, no lookup), and so does a local grant's Decision, so
// that its outcome needs no lookup.
type depBatch struct {
	dependency string // constant
	generation uint64 // constant
	// state is the grants since the last take, plus slotDead once the slot
	// was taken out of batcher.deps (set under batcher.mu): a grant that
	// finds it dead goes through the map.
	state atomic.Uint64
	// Guarded by batcher.mu.
	outcomes []localOutcome
	next     *depBatch // another generation of the same dependency
}

// slotDead marks a depBatch no longer in batcher.deps.
const slotDead = 1 << 63

// live: the slot is in batcher.deps. REQUIRES: batcher.mu (dead is set
// under it).
func (db *depBatch) live() bool { return db.state.Load()&slotDead == 0 }

type chainKey struct {
	chain string
	tier  uint32
	none  bool
}

// decisionKind is which ClientDecisions counter a decision adds to.
type decisionKind int

const (
	decidedRefusedLocal decisionKind = iota
	decidedFailOpen
	decidedFailClosed
)

type clientCounts struct{ refusedLocal, failOpen, failClosed uint32 }

// outgoing is one ReportBatch request, sent until acknowledged or dropped.
type outgoing struct {
	req      *pb.ReportBatchRequest
	outcomes int
	sends    int
	bufs     protoBufs // what req is made of; reused once it is acknowledged or dropped
}

// protoBufs hold the messages of one request, so that the next request
// reuses them (one request is sent at a time; gRPC is done with a request
// when its call returns).
type protoBufs struct {
	outs      []pb.LocalOutcome
	outPtrs   []*pb.LocalOutcome
	durations []durationpb.Duration
	deps      []pb.DependencyBatch
	depPtrs   []*pb.DependencyBatch
}

// takenDep is one dependency's share of a request being built: its grants
// and the outcomes scratch[from:to].
type takenDep struct {
	dependency string
	generation uint64
	grants     uint32
	from, to   int
}

// batcher holds the pending batch. Its recording methods are safe for
// concurrent use and never block on I/O; take, acked and drop are called by
// the one flushing goroutine only.
type batcher struct {
	// Constant after newBatcher.
	clientID string
	wake     chan struct{} // capacity 1: something to send (the first item, a retry due, back from away)
	full     chan struct{} // capacity 1: maxBatchOutcomes pending: flush at once

	dropped atomic.Uint64 // outcomes dropped (DroppedOutcomes)

	// nonEmpty: something was added since the last take began (the first
	// addition wakes the flusher).
	nonEmpty atomic.Bool

	mu        sync.Mutex
	deps      map[string]*depBatch     // guarded by mu; per dependency, its generations linked by next
	chains    map[chainKey]uint32      // guarded by mu
	decisions map[string]*clientCounts // guarded by mu
	pending   int                      // guarded by mu; outcomes in deps
	unacked   int                      // guarded by mu; pending + those in the request not yet acknowledged
	closed    bool                     // guarded by mu; after the final flush: drop

	// Owned by the flushing goroutine.
	sequence uint64
	resend   *outgoing // a request that failed, sent again first
	scratch  []localOutcome
	taken    []takenDep
	spare    protoBufs // of the last request acknowledged or dropped
}

func newBatcher(clientID string) *batcher {
	return &batcher{clientID: clientID, wake: make(chan struct{}, 1), full: make(chan struct{}, 1),
		deps: make(map[string]*depBatch), chains: make(map[chainKey]uint32),
		decisions: make(map[string]*clientCounts)}
}

// newClientID names this process's client: go-<pid>-<8 random hex digits>
// (a valid dependency name, as breakerd requires).
func newClientID() string { return fmt.Sprintf("go-%d-%08x", os.Getpid(), rand.Uint32()) }

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default: // a signal is pending already
	}
}

// touched notes that something was added, and wakes the flusher when it
// is the first thing since the last take began.
func (b *batcher) touched() {
	if !b.nonEmpty.Load() && b.nonEmpty.CompareAndSwap(false, true) {
		signal(b.wake)
	}
}

// depLocked is the live slot of dep at generation gen, added if need be;
// slot, when live, is it already (a local grant's).
func (b *batcher) depLocked(slot *depBatch, dep string, gen uint64) *depBatch {
	if slot != nil && slot.live() {
		return slot
	}
	head := b.deps[dep]
	for db := head; db != nil; db = db.next {
		if db.generation == gen {
			return db
		}
	}
	db := &depBatch{dependency: dep, generation: gen, next: head}
	b.deps[dep] = db
	return db
}

// grant counts a first attempt granted in the client on dep's breaker at
// generation gen, in slot when that is live (what an earlier grant of the
// same entry returned, or nil); it returns the slot used, nil after the
// final flush.
func (b *batcher) grant(slot *depBatch, dep string, gen uint64) *depBatch {
	if slot == nil || slot.state.Add(1)&slotDead != 0 { // a dead slot's count is never read
		b.mu.Lock()
		if b.closed {
			b.mu.Unlock()
			return nil
		}
		slot = b.depLocked(nil, dep, gen)
		slot.state.Add(1)
		b.mu.Unlock()
	}
	b.touched()
	return slot
}

// outcome queues the outcome of a call granted in the client (slot: what
// its grant returned, or nil); past maxUnackedOutcomes (or after the final
// flush) it is dropped, counted.
func (b *batcher) outcome(slot *depBatch, dep string, gen uint64, o localOutcome) {
	b.mu.Lock()
	if b.closed || b.unacked >= maxUnackedOutcomes {
		b.mu.Unlock()
		b.dropped.Add(1)
		return
	}
	db := b.depLocked(slot, dep, gen)
	db.outcomes = append(db.outcomes, o)
	b.pending++
	b.unacked++
	full := b.pending == maxBatchOutcomes
	b.mu.Unlock()
	b.touched()
	if full {
		signal(b.full)
	}
}

// decided counts a decision made without breakerd for dep.
func (b *batcher) decided(dep string, kind decisionKind) {
	b.mu.Lock()
	cc := b.decisions[dep]
	if cc == nil {
		if b.closed || len(b.decisions) >= maxDecisionDependencies {
			b.mu.Unlock()
			return
		}
		cc = &clientCounts{}
		b.decisions[dep] = cc
	}
	switch kind {
	case decidedRefusedLocal:
		cc.refusedLocal++
	case decidedFailOpen:
		cc.failOpen++
	case decidedFailClosed:
		cc.failClosed++
	}
	b.mu.Unlock()
	b.touched()
}

// chainDecided counts a chain decision made in the client: a grant of the
// candidate at tier, or (none) every candidate refused.
func (b *batcher) chainDecided(chain string, tier uint32, none bool) {
	key := chainKey{chain, tier, none}
	if none {
		key.tier = 0
	}
	b.mu.Lock()
	if _, ok := b.chains[key]; b.closed || (!ok && len(b.chains) >= maxChainDecisionKeys) {
		b.mu.Unlock()
		return
	}
	b.chains[key]++
	b.mu.Unlock()
	b.touched()
}

// isFull: maxBatchOutcomes outcomes are pending.
func (b *batcher) isFull() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.pending >= maxBatchOutcomes
}

// next is the request to send: the one that failed, else a new one taken
// from the pending batch; nil when there is nothing to send.
func (b *batcher) next() *outgoing {
	if b.resend != nil {
		return b.resend
	}
	return b.take()
}

// take moves every pending grant, chain decision and client decision, and
// up to maxBatchOutcomes outcomes, into a new request with the next
// sequence number; nil when nothing is pending. The outcomes stay counted
// as unacknowledged until acked or drop.
func (b *batcher) take() *outgoing {
	// Reset first: whatever is added after this wakes the flusher again
	// (a grant counted in a slot after the slot was read below).
	if !b.nonEmpty.Swap(false) {
		return nil
	}
	b.mu.Lock()
	b.scratch, b.taken = b.scratch[:0], b.taken[:0]
	room := maxBatchOutcomes
	for dep, head := range b.deps {
		var kept *depBatch
		for db := head; db != nil; {
			next := db.next
			// A slot with nothing since the last take is removed (dead: a
			// grant racing with this goes through the map); else its grants
			// are taken.
			grants := uint64(0)
			if len(db.outcomes) > 0 || !db.state.CompareAndSwap(0, slotDead) {
				grants = db.state.Swap(0)
			}
			if grants == 0 && len(db.outcomes) == 0 {
				db.next = nil
				db = next
				continue
			}
			if n := min(room, len(db.outcomes)); grants > 0 || n > 0 {
				from := len(b.scratch)
				b.scratch = append(b.scratch, db.outcomes[:n]...)
				b.taken = append(b.taken, takenDep{dependency: db.dependency, generation: db.generation,
					grants: uint32(grants), from: from, to: len(b.scratch)})
				left := copy(db.outcomes, db.outcomes[n:])
				clear(db.outcomes[left:]) // let go of the chain names
				db.outcomes = db.outcomes[:left]
				room -= n
			} // else its outcomes wait for the next request
			db.next, kept = kept, db
			db = next
		}
		if kept == nil {
			delete(b.deps, dep)
		} else {
			b.deps[dep] = kept
		}
	}
	taken := maxBatchOutcomes - room
	b.pending -= taken
	if b.pending > 0 {
		b.nonEmpty.Store(true) // the rest goes in the next request
	}
	if len(b.taken) == 0 && len(b.chains) == 0 && len(b.decisions) == 0 {
		b.mu.Unlock()
		return nil // what woke the flusher went in the previous request
	}
	b.sequence++
	req := &pb.ReportBatchRequest{ClientId: b.clientID, Sequence: b.sequence}
	for key, n := range b.chains {
		req.Chains = append(req.Chains, &pb.ChainDecision{Chain: key.chain, None: key.none, Tier: key.tier, Count: n})
	}
	clear(b.chains)
	for dep, cc := range b.decisions {
		req.Decisions = append(req.Decisions, &pb.ClientDecisions{Dependency: dep,
			RefusedLocal: cc.refusedLocal, FailOpen: cc.failOpen, FailClosed: cc.failClosed})
	}
	clear(b.decisions)
	b.mu.Unlock()

	// The outcomes, converted outside the lock (the callers go on
	// meanwhile), into the messages of the last request acknowledged.
	bufs := b.spare
	b.spare = protoBufs{}
	bufs.outs = grown(bufs.outs, taken)
	bufs.outPtrs = grown(bufs.outPtrs, taken)
	bufs.deps = grown(bufs.deps, len(b.taken))
	bufs.depPtrs = grown(bufs.depPtrs, len(b.taken))
	nDurations := 0
	for _, o := range b.scratch {
		nDurations += o.durations()
	}
	bufs.durations = grown(bufs.durations, nDurations)
	used := 0
	for i := range b.scratch {
		lo := &bufs.outs[i]
		used += b.scratch[i].fill(lo, bufs.durations[used:])
		bufs.outPtrs[i] = lo
	}
	for i, t := range b.taken {
		db := &bufs.deps[i]
		db.Dependency, db.Generation, db.Grants = t.dependency, t.generation, t.grants
		db.Outcomes = bufs.outPtrs[t.from:t.to:t.to]
		if t.from == t.to {
			db.Outcomes = nil
		}
		bufs.depPtrs[i] = db
	}
	req.Dependencies = bufs.depPtrs
	clear(b.scratch) // let go of the chain names
	return &outgoing{req: req, outcomes: taken, bufs: bufs}
}

// grown is s with length n, reusing its array when large enough.
func grown[T any](s []T, n int) []T {
	if cap(s) >= n {
		return s[:n]
	}
	return make([]T, n, n+n/4)
}

// recycle keeps o's messages for the next request (o is done with).
func (b *batcher) recycle(o *outgoing) {
	clear(o.bufs.depPtrs) // the messages keep what they point to until overwritten; these go
	b.spare = o.bufs
	o.bufs = protoBufs{}
}

// durations is how many Durations o's message needs.
func (o localOutcome) durations() int {
	n := 0
	if o.outcome.latency > 0 {
		n++
	}
	if o.outcome.retryAfter > 0 {
		n++
	}
	return n
}

// fill sets every field of out (a message reused from an earlier request)
// from o, classified exactly as a Report would be, with its Durations in
// durations (at least o.durations() of them); it returns how many it used.
func (o localOutcome) fill(out *pb.LocalOutcome, durations []durationpb.Duration) int {
	oc := o.outcome
	out.Outcome, out.HttpStatus, out.GrpcCode = oc.class, 0, nil
	switch {
	case oc.class != ClassUnspecified:
	case oc.httpStatus != 0:
		out.HttpStatus = uint32(oc.httpStatus)
	case oc.hasGRPC:
		code := int32(oc.grpcCode)
		out.GrpcCode = &code
	default:
		out.Outcome = ClassServerError
	}
	used := 0
	duration := func(d time.Duration) *durationpb.Duration {
		p := &durations[used]
		used++
		p.Seconds, p.Nanos = int64(d/time.Second), int32(d%time.Second)
		return p
	}
	out.Latency, out.RetryAfter = nil, nil
	if oc.latency > 0 {
		out.Latency = duration(oc.latency)
	}
	if oc.retryAfter > 0 {
		out.RetryAfter = duration(oc.retryAfter)
	}
	out.Chain, out.Tier = o.chain, o.tier
	return used
}

// acked: breakerd answered o.
func (b *batcher) acked(o *outgoing) {
	b.resend = nil
	b.recycle(o)
	b.mu.Lock()
	b.unacked -= o.outcomes
	b.mu.Unlock()
}

// failed: o's send failed; it is sent again at the next flush, or dropped
// (its outcomes counted) after maxBatchSends.
func (b *batcher) failed(o *outgoing) {
	if o.sends < maxBatchSends {
		b.resend = o
		return
	}
	b.drop(o)
}

// drop gives o up: its outcomes are counted in DroppedOutcomes.
func (b *batcher) drop(o *outgoing) {
	if b.resend == o {
		b.resend = nil
	}
	b.recycle(o)
	b.mu.Lock()
	b.unacked -= o.outcomes
	b.mu.Unlock()
	b.dropped.Add(uint64(o.outcomes))
}

// close drops what is left after the final flush (outcomes counted) and
// every outcome recorded afterwards.
func (b *batcher) close() {
	if b.resend != nil {
		b.drop(b.resend)
	}
	b.mu.Lock()
	b.closed = true
	pending := b.pending
	for _, head := range b.deps {
		for db := head; db != nil; db = db.next {
			db.state.Store(slotDead) // a grant racing with Close goes to the map, then nowhere
		}
	}
	clear(b.deps)
	clear(b.chains)
	clear(b.decisions)
	b.pending, b.unacked = 0, 0
	b.nonEmpty.Store(false)
	b.mu.Unlock()
	b.dropped.Add(uint64(pending))
}

// flushLoop sends the batches until stop is closed, then makes the final
// flush (bounded by ctx, which Close ends a decision timeout after it
// starts) and returns.
func (c *Client) flushLoop(ctx context.Context, stop <-chan struct{}) {
	b := c.batch
	defer c.finalFlush(ctx)
	for {
		select {
		case <-stop:
			return
		case <-b.wake:
		}
		if !b.isFull() {
			timer := time.NewTimer(c.cfg.flushInterval)
			select {
			case <-stop:
				timer.Stop()
				return
			case <-timer.C:
			case <-b.full:
				timer.Stop()
			}
		}
		c.flush(ctx)
	}
}

// flush sends requests until nothing is pending, one fails (it is sent
// again at the next flush), or the sidecar is away (then the batch waits:
// markBack wakes the flusher).
func (c *Client) flush(ctx context.Context) {
	b := c.batch
	for !c.away.Load() {
		o := b.next()
		if o == nil {
			return
		}
		if !c.sendBatch(ctx, o, batchTimeoutFactor*c.cfg.decisionTimeout) {
			signal(b.wake) // the next flush sends it again
			return
		}
	}
}

// finalFlush sends what is pending at Close, within ctx, unless the
// sidecar is away; what is left is dropped (outcomes counted).
func (c *Client) finalFlush(ctx context.Context) {
	b := c.batch
	for ctx.Err() == nil && !c.away.Load() {
		o := b.next()
		if o == nil || !c.sendBatch(ctx, o, batchTimeoutFactor*c.cfg.decisionTimeout) {
			break
		}
	}
	b.close()
}

// sendBatch sends o once; true when breakerd acknowledged it. A failure
// with UNAVAILABLE, or a timeout with nothing answered by breakerd since it
// was sent, marks the sidecar away, as for an Acquire.
func (c *Client) sendBatch(ctx context.Context, o *outgoing, timeout time.Duration) bool {
	b := c.batch
	o.sends++
	rctx, cancel := context.WithTimeout(ctx, timeout)
	sentAt := c.answers.now()
	_, err := c.rpc.ReportBatch(rctx, o.req)
	cancel()
	if err == nil {
		b.acked(o)
		if c.reportLog.isWrong() {
			c.reportLog.right(slog.LevelInfo, "breakerd: Reports accepted again", "target", c.cfg.target)
		}
		return true
	}
	b.failed(o)
	if c.closed.Load() {
		return false
	}
	if marksAway(err) && !c.answers.answeredSince(sentAt) {
		c.markAway(err)
	}
	c.reportLog.wrong(slog.LevelWarn, "breakerd: ReportBatch failing, sending it again (at most 3 times, then dropping its outcomes)",
		"target", c.cfg.target, "sequence", o.req.Sequence, "sends", o.sends, "error", err)
	return false
}

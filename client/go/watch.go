package breakerd

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	pb "github.com/breakerd/breakerd/client/go/breakerdv1"
)

// cache is the Watch stream's view: dependency -> state, mode, generation,
// whether the client may decide first attempts itself (local decisions)
// and, when open, the monotonic time the cooldown ends. It holds entries
// only while the stream is live: it is cleared when the stream ends.
type cache struct {
	mu      sync.RWMutex
	entries map[string]*cacheEntry // each immutable once applied, but for its slot
}

// modeShadow is StateChange.mode of a breaker whose policy only watches: the
// sidecar allows every call, so the cache never refuses it. Any other value
// ("enforce", or "" from a sidecar older than the field) enforces.
const modeShadow = "shadow"

// reasonEvicted is StateChange.reason of the notice that a breaker was
// evicted: forget it.
const reasonEvicted = "evicted"

type cacheEntry struct {
	state      State
	shadow     bool
	local      bool // StateChange.local_decisions of the latest event
	generation uint64
	openUntil  time.Time // carries a monotonic reading (time.Now().Add)
	// slot is where the local grants made on this entry are counted (the
	// batch's slot of this dependency and generation), once one was.
	slot atomic.Pointer[depBatch]
}

// grantable: a first attempt may be granted in the client (closed, local
// decisions on, not shadow; breakerd sends local_decisions false for shadow
// breakers too, the check is kept for an older or odd sidecar).
func (e *cacheEntry) grantable() bool {
	return e.local && e.state == StateClosed && !e.shadow
}

// refusal reports a local refusal of dep while e says FORCED_OPEN, or OPEN
// with the cooldown still running (read from now() only then), for an
// enforcing breaker; everything else (shadow breakers included) is not
// refused.
func (e *cacheEntry) refusal(dep string, now func() time.Time) (Decision, bool) {
	switch {
	case e.shadow:
		return Decision{}, false
	case e.state == StateForcedOpen:
		return Decision{State: e.state, Reason: ReasonForcedOpen, Dependency: dep, Source: SourceLocal}, true
	case e.state == StateOpen:
		if t := now(); t.Before(e.openUntil) {
			return Decision{State: e.state, Reason: ReasonOpen, RetryAfter: e.openUntil.Sub(t),
				Dependency: dep, Source: SourceLocal}, true
		}
	}
	return Decision{}, false
}

// apply records ch unless the cache holds a later generation of the same
// dependency. An equal generation is applied: the notices that are not
// transitions (a reload changing the mode or local_decisions, ramp_done)
// carry the current generation. An evicted notice removes the entry.
func (c *cache) apply(ch *pb.StateChange, now time.Time) {
	e := &cacheEntry{state: ch.State, shadow: ch.Mode == modeShadow, local: ch.LocalDecisions,
		generation: ch.Generation}
	if ch.State == StateOpen {
		e.openUntil = now.Add(ch.RetryAfter.AsDuration())
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.entries[ch.Dependency]; ok && ch.Generation < old.generation {
		return
	}
	if ch.Reason == reasonEvicted {
		delete(c.entries, ch.Dependency)
		return
	}
	c.entries[ch.Dependency] = e
}

func (c *cache) clear() {
	c.mu.Lock()
	clear(c.entries)
	c.mu.Unlock()
}

// get is the entry for dep, if the cache holds one.
func (c *cache) get(dep string) (*cacheEntry, bool) {
	c.mu.RLock()
	e, ok := c.entries[dep]
	c.mu.RUnlock()
	return e, ok
}

func (c *cache) state(dep string) (State, bool) {
	if e, ok := c.get(dep); ok {
		return e.state, true
	}
	return StateUnspecified, false
}

// refuse is the local refusal of dep at now, if the cache holds one (see
// cacheEntry.refusal).
func (c *cache) refuse(dep string, now time.Time) (Decision, bool) {
	e, ok := c.get(dep)
	if !ok {
		return Decision{}, false
	}
	return e.refusal(dep, func() time.Time { return now })
}

// watchLoop keeps one Watch stream over every dependency until ctx ends.
// When a stream ends the cache is cleared at once, then the stream is
// reopened after a full-jitter backoff (base doubling to max; back to base
// after a stream that was live).
func (c *Client) watchLoop(ctx context.Context) {
	backoff := c.cfg.backoffBase
	for first := true; ; first = false {
		if !first {
			c.watchReconnects.Add(1)
		}
		live, err := c.watchOnce(ctx)
		c.cache.clear()
		if ctx.Err() != nil {
			return
		}
		if live {
			c.watchLog.wrong(slog.LevelInfo, "breakerd: Watch stream lost, local cache cleared until it is back",
				"target", c.cfg.target, "error", err)
			backoff = c.cfg.backoffBase
		}
		timer := time.NewTimer(rand.N(backoff + 1))
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-timer.C:
		}
		backoff = min(2*backoff, c.cfg.backoffMax)
	}
}

// watchSubscribedHeader is the response header breakerd sends as soon as a
// Watch stream is subscribed.
const watchSubscribedHeader = "breakerd-watch-subscribed"

// watchOnce runs one stream until it fails; live says whether breakerd
// subscribed it (its header came, or a StateChange did). Either is breakerd
// answering, so it also ends an away spell.
func (c *Client) watchOnce(ctx context.Context) (live bool, err error) {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := c.rpc.Watch(sctx, &pb.WatchRequest{})
	if err != nil {
		return false, err
	}
	if md, err := stream.Header(); err == nil && len(md.Get(watchSubscribedHeader)) > 0 {
		c.watchLive(&live)
	}
	for {
		ch, err := stream.Recv()
		if err != nil {
			return live, err
		}
		c.cache.apply(ch, time.Now())
		c.watchLive(&live)
	}
}

// watchLive: breakerd subscribed the stream or sent on it.
func (c *Client) watchLive(live *bool) {
	if !*live {
		*live = true
		if c.watchLog.isWrong() {
			c.watchLog.right(slog.LevelInfo, "breakerd: Watch stream back", "target", c.cfg.target)
		}
	}
	c.markBack("watch stream")
}

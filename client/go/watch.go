package breakerd

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	pb "github.com/breakerd/breakerd/client/go/breakerdv1"
)

// cache is the Watch stream's view: dependency -> state, mode, generation
// and, when open, the monotonic time the cooldown ends.
type cache struct {
	mu      sync.RWMutex
	entries map[string]cacheEntry
}

// modeShadow is StateChange.mode of a breaker whose policy only watches: the
// sidecar allows every call, so the cache never refuses it. Any other value
// ("enforce", or "" from a sidecar older than the field) enforces.
const modeShadow = "shadow"

type cacheEntry struct {
	state      State
	shadow     bool
	generation uint64
	openUntil  time.Time // carries a monotonic reading (time.Now().Add)
}

// apply records ch unless the cache holds a later generation of the same
// dependency. An equal generation is applied: a reload event carries the
// current generation and changes only the mode.
func (c *cache) apply(ch *pb.StateChange, now time.Time) {
	e := cacheEntry{state: ch.State, shadow: ch.Mode == modeShadow, generation: ch.Generation}
	if ch.State == StateOpen {
		e.openUntil = now.Add(ch.RetryAfter.AsDuration())
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.entries[ch.Dependency]; ok && ch.Generation < old.generation {
		return
	}
	c.entries[ch.Dependency] = e
}

func (c *cache) clear() {
	c.mu.Lock()
	clear(c.entries)
	c.mu.Unlock()
}

func (c *cache) state(dep string) (State, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	e, ok := c.entries[dep]
	return e.state, ok
}

// refuse reports a local refusal while the cache says FORCED_OPEN, or OPEN
// with the cooldown still running, for an enforcing breaker; everything
// else (shadow breakers included) goes to breakerd.
func (c *cache) refuse(dep string, now time.Time) (Decision, bool) {
	c.mu.RLock()
	e, ok := c.entries[dep]
	c.mu.RUnlock()
	switch {
	case !ok || e.shadow:
		return Decision{}, false
	case e.state == StateForcedOpen:
		return Decision{State: e.state, Reason: ReasonForcedOpen, Dependency: dep, Source: SourceLocal}, true
	case e.state == StateOpen && now.Before(e.openUntil):
		return Decision{State: e.state, Reason: ReasonOpen, RetryAfter: e.openUntil.Sub(now),
			Dependency: dep, Source: SourceLocal}, true
	}
	return Decision{}, false
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

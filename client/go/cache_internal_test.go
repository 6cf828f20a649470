package breakerd

import (
	"testing"
	"time"

	pb "github.com/breakerd/breakerd/client/go/breakerdv1"
	"google.golang.org/protobuf/types/known/durationpb"
)

const cacheDep = "cache/dep"

func newTestCache() *cache { return &cache{entries: make(map[string]*cacheEntry)} }

// change is a StateChange for cacheDep; an open one has a 30 s cooldown.
func change(gen uint64, state State, mode string) *pb.StateChange {
	ch := &pb.StateChange{Dependency: cacheDep, State: state, Generation: gen, Mode: mode}
	if state == StateOpen {
		ch.RetryAfter = durationpb.New(30 * time.Second)
	}
	return ch
}

func TestCacheIgnoresEventWithLowerGeneration(t *testing.T) {
	c, now := newTestCache(), time.Now()
	c.apply(change(6, StateClosed, "enforce"), now)
	c.apply(change(5, StateOpen, "enforce"), now)
	if d, refused := c.refuse(cacheDep, now); refused {
		t.Errorf("gen 6 CLOSED then gen 5 OPEN: refused %+v; the older event must be ignored", d)
	}
	if st, _ := c.state(cacheDep); st != StateClosed {
		t.Errorf("cached state %v, want CLOSED", st)
	}
}

func TestCacheAppliesEventWithHigherGeneration(t *testing.T) {
	c, now := newTestCache(), time.Now()
	c.apply(change(5, StateOpen, "enforce"), now)
	if _, refused := c.refuse(cacheDep, now); !refused {
		t.Fatal("gen 5 OPEN (enforce) not refused")
	}
	c.apply(change(6, StateClosed, "enforce"), now)
	if d, refused := c.refuse(cacheDep, now); refused {
		t.Errorf("gen 5 OPEN then gen 6 CLOSED: refused %+v", d)
	}
}

// A reload event keeps the generation and changes the mode: equal
// generations are applied.
func TestCacheAppliesReloadWithEqualGeneration(t *testing.T) {
	c, now := newTestCache(), time.Now()
	c.apply(change(6, StateOpen, "enforce"), now)
	if _, refused := c.refuse(cacheDep, now); !refused {
		t.Fatal("gen 6 OPEN (enforce) not refused")
	}
	c.apply(change(6, StateOpen, "shadow"), now)
	if d, refused := c.refuse(cacheDep, now); refused {
		t.Errorf("gen 6 OPEN then gen 6 reload to shadow: refused %+v", d)
	}
	// And back to enforce by another reload.
	c.apply(change(6, StateOpen, "enforce"), now)
	if _, refused := c.refuse(cacheDep, now); !refused {
		t.Error("gen 6 reload back to enforce: not refused")
	}
}

func TestCacheNeverRefusesShadowBreaker(t *testing.T) {
	c, now := newTestCache(), time.Now()
	for _, state := range []State{StateOpen, StateForcedOpen} {
		c.apply(change(1, state, "shadow"), now)
		if d, refused := c.refuse(cacheDep, now); refused {
			t.Errorf("shadow %v: refused %+v", state, d)
		}
	}
}

// A sidecar older than StateChange.mode sends it empty: enforce.
func TestCacheEmptyModeEnforces(t *testing.T) {
	c, now := newTestCache(), time.Now()
	c.apply(change(1, StateOpen, ""), now)
	d, refused := c.refuse(cacheDep, now)
	if !refused || d.Reason != ReasonOpen || d.Source != SourceLocal || d.RetryAfter != 30*time.Second {
		t.Errorf("OPEN with empty mode: %+v, %v; want LOCAL OPEN for 30 s", d, refused)
	}
	if _, refused := c.refuse(cacheDep, now.Add(31*time.Second)); refused {
		t.Error("still refused past open_until")
	}
	c.apply(change(2, StateForcedOpen, ""), now)
	if d, refused := c.refuse(cacheDep, now); !refused || d.Reason != ReasonForcedOpen {
		t.Errorf("FORCED_OPEN with empty mode: %+v, %v", d, refused)
	}
}

// After the stream ends the cache is cleared, and the new stream's snapshot
// may start again from a lower generation (a restarted breakerd).
func TestCacheClearForgetsGenerations(t *testing.T) {
	c, now := newTestCache(), time.Now()
	c.apply(change(9, StateClosed, "enforce"), now)
	c.clear()
	c.apply(change(1, StateForcedOpen, "enforce"), now)
	if _, refused := c.refuse(cacheDep, now); !refused {
		t.Error("after clear, gen 1 FORCED_OPEN was ignored")
	}
}

// notice is a StateChange for cacheDep that is not a transition.
func notice(gen uint64, reason string, state State, local bool) *pb.StateChange {
	return &pb.StateChange{Dependency: cacheDep, State: state, Previous: state, Reason: reason, Generation: gen,
		Mode: "enforce", LocalDecisions: local}
}

// The notices that are not transitions: created adds the entry, an
// equal-generation ramp_done or reload replaces it (local_decisions on or
// off), a lower generation is ignored, evicted removes it.
func TestCacheAppliesNotices(t *testing.T) {
	c, now := newTestCache(), time.Now()
	grantable := func() bool {
		e, ok := c.get(cacheDep)
		return ok && e.grantable()
	}
	c.apply(notice(3, "created", StateClosed, true), now)
	if !grantable() {
		t.Fatal("created (local_decisions on): not grantable")
	}
	c.apply(notice(3, "reload", StateClosed, false), now)
	if grantable() {
		t.Error("an equal-generation reload turning local_decisions off was not applied")
	}
	c.apply(notice(3, "ramp_done", StateClosed, true), now)
	if !grantable() {
		t.Error("an equal-generation ramp_done was not applied")
	}
	c.apply(notice(2, "reload", StateClosed, false), now)
	if !grantable() {
		t.Error("a lower-generation reload was applied")
	}
	c.apply(notice(2, reasonEvicted, StateClosed, false), now)
	if _, ok := c.get(cacheDep); !ok {
		t.Error("a lower-generation evicted notice removed the entry")
	}
	c.apply(notice(3, reasonEvicted, StateClosed, false), now)
	if _, ok := c.get(cacheDep); ok {
		t.Error("evicted: the entry is still held")
	}
	// A re-created breaker continues above the evicted one's generation.
	c.apply(notice(4, "created", StateClosed, true), now)
	if !grantable() {
		t.Error("re-created after eviction: not grantable")
	}
	// Shadow or a transition to open: not grantable.
	c.apply(&pb.StateChange{Dependency: cacheDep, State: StateClosed, Generation: 4, Mode: modeShadow, LocalDecisions: true}, now)
	if grantable() {
		t.Error("a shadow breaker is grantable")
	}
	c.apply(change(5, StateOpen, "enforce"), now)
	if grantable() {
		t.Error("an open breaker is grantable")
	}
}

package breakerd

// Local decisions (client README "Local decisions"): with a live Watch
// stream, a first attempt on a breaker the cache holds CLOSED, with
// local_decisions on and not in shadow mode, is granted in the client with
// no RPC, unless the sidecar is away. The grant, the call's outcome and the
// decisions made without breakerd are batched (batch.go).

// grantLocally grants a first attempt on dep in the client when local
// decisions are on, e (dep's cache entry) allows it and the sidecar is not
// away; the grant is counted in the batch under e's generation.
func (c *Client) grantLocally(dep string, e *cacheEntry) (Decision, bool) {
	if c.batch == nil || !e.grantable() || c.away.Load() {
		return Decision{}, false
	}
	known := e.slot.Load()
	slot := c.batch.grant(known, dep, e.generation)
	if slot != known {
		e.slot.Store(slot)
	}
	return Decision{Allowed: true, State: StateClosed, Dependency: dep, Source: SourceLocal,
		generation: e.generation, slot: slot}, true
}

// reportLocal queues the outcome of a local grant for the next batch, or
// drops it (counted) while the sidecar is away or after Close.
func (c *Client) reportLocal(d Decision, o Outcome) {
	b := c.batch
	if b == nil {
		return // not granted by this client (local decisions are off)
	}
	if c.closed.Load() || c.away.Load() {
		b.dropped.Add(1)
		return
	}
	b.outcome(d.slot, d.Dependency, d.generation, localOutcome{outcome: o, chain: d.Chain, tier: d.Tier})
}

// refusedLocally counts a refusal of dep from the Watch cache.
func (c *Client) refusedLocally(dep string) {
	c.localRejections.Add(1)
	c.decidedWithoutSidecar(dep, decidedRefusedLocal)
}

// refusedChainLocally counts a chain refused from the Watch cache (every
// candidate held open): one local refusal, of the list's first dependency,
// and for a named chain its decision "none".
func (c *Client) refusedChainLocally(dependencies []string, o firstOptions) {
	c.refusedLocally(dependencies[0])
	if o.named && c.batch != nil {
		c.batch.chainDecided(o.chain, 0, true)
	}
}

// decidedWithoutSidecar counts a decision made without breakerd for the
// next batch (ClientDecisions), with local decisions on.
func (c *Client) decidedWithoutSidecar(dep string, kind decisionKind) {
	if c.batch != nil {
		c.batch.decided(dep, kind)
	}
}

func (c *Client) droppedOutcomes() uint64 {
	if c.batch == nil {
		return 0
	}
	return c.batch.dropped.Load()
}

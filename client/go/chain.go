package breakerd

import (
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// maxChainTier is the last position breakerd counts in a chain
// (breakerd_chain_decisions_total's tier label: "0" to "63", or "none").
const maxChainTier = 63

// FirstOption configures First and AcquireFirst: WithChain, WithFirstTier.
type FirstOption func(*firstOptions)

type firstOptions struct {
	chain     string
	named     bool // WithChain was given (an empty name is refused)
	firstTier uint32
}

// WithChain names the fallback chain (named like a dependency: 1-200 bytes
// of [A-Za-z0-9._:/@-]), so that breakerd counts its decisions per tier in
// breakerd_chain_decisions_total{chain,tier} (tier "none" when every
// candidate was refused) and the outcomes of the calls it grants in
// breakerd_chain_outcomes_total{chain,tier,class}. The tier is a
// dependency's position in the list (0-based; at most 63).
//
// With a chain name the candidates the Watch cache holds open are not left
// out: every decision is asked of breakerd (with all remaining candidates
// and the tier of the first), so that it counts the ultimate fallback too.
// While the sidecar is away, decisions are made as without a name.
func WithChain(name string) FirstOption {
	return func(o *firstOptions) { o.chain, o.named = name, true }
}

// WithFirstTier gives the position in the caller's full chain of the first
// dependency passed (default 0), for a caller that moves along its chain
// itself with AcquireFirst: after a failed call on the dependency of tier
// n, the next AcquireFirst passes the dependencies after it and
// WithFirstTier(n+1). Counted only with WithChain.
func WithFirstTier(tier uint32) FirstOption {
	return func(o *firstOptions) { o.firstTier = tier }
}

func firstOptionsOf(opts []FirstOption) firstOptions {
	var o firstOptions
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// validate checks the chain's name and that each of n candidates has a
// tier breakerd counts (INVALID_ARGUMENT naming the field chain).
func (o firstOptions) validate(n int) error {
	if !o.named {
		return nil
	}
	if err := validateName("chain", o.chain); err != nil {
		return err
	}
	if last := uint64(o.firstTier) + uint64(n) - 1; n > 0 && last > maxChainTier {
		return status.Errorf(codes.InvalidArgument,
			"chain %q: tiers %d to %d: a chain's tiers are 0 to %d (at most %d dependencies)",
			o.chain, o.firstTier, last, maxChainTier, maxChainTier+1)
	}
	return nil
}

// tierOf is the tier of dependency among candidates sent with first tier
// first (its first occurrence).
func tierOf(candidates []string, dependency string, first uint32) uint32 {
	return first + uint32(indexOf(candidates, dependency))
}

func indexOf(list []string, s string) int {
	for i, v := range list {
		if v == s {
			return i
		}
	}
	return 0
}

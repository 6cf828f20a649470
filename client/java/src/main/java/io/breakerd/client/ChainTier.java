package io.breakerd.client;

/**
 * Where a permit granted through a named fallback chain sits in it: its
 * Report carries both, and breakerd counts the outcome in
 * {@code breakerd_chain_outcomes_total{chain,tier,class}}. Immutable.
 *
 * @param chain the chain's name (checked by {@link Names#check})
 * @param tier the granted dependency's position in the caller's full chain, 0-based
 */
record ChainTier(String chain, int tier) {}

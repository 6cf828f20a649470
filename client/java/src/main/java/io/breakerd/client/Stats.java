package io.breakerd.client;

/**
 * A snapshot of a client's counters, e.g. to export as metrics. All counts are
 * totals since the client was built. Immutable.
 *
 * @param failOpen decisions allowed because breakerd could not answer
 * @param failClosed decisions refused because breakerd could not answer (fail mode closed)
 * @param localRejections decisions refused from the Watch cache without an RPC
 * @param reportErrors Reports that breakerd did not accept or did not answer in time
 * @param watchReconnects times the Watch stream ended and was started again
 */
public record Stats(
    long failOpen,
    long failClosed,
    long localRejections,
    long reportErrors,
    long watchReconnects) {}

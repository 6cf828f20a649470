package io.breakerd.client;

/**
 * A snapshot of a client's counters, e.g. to export as metrics. All counts are
 * totals since the client was built. Immutable.
 *
 * @param failOpen decisions allowed because breakerd could not answer (or was away)
 * @param failClosed decisions refused because breakerd could not answer (or was away;
 *     fail mode closed)
 * @param localRejections decisions refused from the Watch cache without an RPC
 * @param reportErrors Reports that breakerd did not accept or did not answer in time,
 *     or that were not sent: made after close, held while breakerd was away when the
 *     client closed, or the oldest held past 1,024 (a Report held while breakerd is
 *     away is not an error: it is sent once breakerd is back)
 * @param watchReconnects times the Watch stream ended and was started again
 * @param awayDecisions fail-open or fail-closed decisions made without an RPC because
 *     breakerd was away (also counted in {@code failOpen} or {@code failClosed})
 * @param droppedOutcomes outcomes of calls granted locally that never reached breakerd:
 *     recorded while 10,000 were waiting for breakerd's acknowledgement, while breakerd
 *     was away or after close, or in a batch breakerd did not take after three sends
 */
public record Stats(
    long failOpen,
    long failClosed,
    long localRejections,
    long reportErrors,
    long watchReconnects,
    long awayDecisions,
    long droppedOutcomes) {}

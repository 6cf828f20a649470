package io.breakerd.client;

/** What the client decides when breakerd cannot answer within the decision timeout. */
public enum FailMode {
  /** Allow the call (decision source {@link Decision.Source#FAIL_OPEN}). The default. */
  OPEN,
  /** Refuse the call (decision source {@link Decision.Source#FAIL_CLOSED}). */
  CLOSED
}

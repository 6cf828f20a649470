package io.breakerd.client;

/**
 * The {@link BreakerdClient} was closed: acquire, acquireFirst, the guards
 * ({@code call}, {@code retry}, {@code first}) and {@code awaitReady} throw it
 * at once, with no RPC and nothing counted as fail-open. The message says
 * {@value #MESSAGE}. A Report after close is not sent and not thrown: it is
 * counted in {@link Stats#reportErrors()}.
 */
public final class ClientClosedException extends IllegalStateException {
  private static final long serialVersionUID = 1L;

  /** The message, the same in every breakerd client. */
  public static final String MESSAGE = "breakerd client is closed";

  /** For the client of {@code target}. */
  public ClientClosedException(String target) {
    super(MESSAGE + " (target " + target + ")");
  }
}

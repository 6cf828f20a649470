package io.breakerd.client;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.function.Consumer;
import org.junit.jupiter.api.extension.AfterAllCallback;
import org.junit.jupiter.api.extension.AfterEachCallback;
import org.junit.jupiter.api.extension.BeforeAllCallback;
import org.junit.jupiter.api.extension.BeforeEachCallback;
import org.junit.jupiter.api.extension.ExtensionContext;

/**
 * A real breakerd ({@link BreakerdServer}) and a client of it, ready
 * ({@link BreakerdClient#awaitReady}), for a test class: registered on a
 * static field they live for the whole class, on an instance field for each
 * test.
 *
 * <pre>{@code
 * @RegisterExtension static final BreakerdExtension breakerd = new BreakerdExtension();
 * ... breakerd.client().call(...); breakerd.server().reports(...);
 * }</pre>
 */
final class BreakerdExtension
    implements BeforeAllCallback, AfterAllCallback, BeforeEachCallback, AfterEachCallback {
  private static final Duration READY = Duration.ofSeconds(10);

  private final String config;
  private boolean perClass;
  private BreakerdServer server;
  private BreakerdClient client;
  private final List<BreakerdClient> more = new ArrayList<>();

  /** breakerd with {@link BreakerdServer#CONFIG}. */
  BreakerdExtension() {
    this(BreakerdServer.CONFIG);
  }

  /** breakerd with {@code config} (YAML). */
  BreakerdExtension(String config) {
    this.config = config;
  }

  /** The running breakerd. */
  BreakerdServer server() {
    return server;
  }

  /** The client made with {@link BreakerdServer#client()} (2 s decision timeout). */
  BreakerdClient client() {
    return client;
  }

  /** Another client of the server, ready, closed with the fixture. */
  BreakerdClient newClient(Consumer<BreakerdClient.Builder> options) {
    BreakerdClient c = server.client(options);
    more.add(c);
    if (!c.awaitReady(READY)) {
      throw new IllegalStateException("breakerd at " + server.address() + " is not ready");
    }
    return c;
  }

  @Override
  public void beforeAll(ExtensionContext context) throws Exception {
    perClass = true;
    start();
  }

  @Override
  public void afterAll(ExtensionContext context) {
    stop();
  }

  @Override
  public void beforeEach(ExtensionContext context) throws Exception {
    if (!perClass) {
      start();
    }
  }

  @Override
  public void afterEach(ExtensionContext context) {
    if (!perClass) {
      stop();
    }
  }

  private void start() throws Exception {
    server = BreakerdServer.startWithConfig(config);
    client = server.client();
    if (!client.awaitReady(READY)) {
      throw new IllegalStateException("breakerd at " + server.address() + " is not ready");
    }
  }

  private void stop() {
    for (BreakerdClient c : more) {
      c.close();
    }
    more.clear();
    if (client != null) {
      client.close();
      client = null;
    }
    if (server != null) {
      server.close();
      server = null;
    }
  }
}

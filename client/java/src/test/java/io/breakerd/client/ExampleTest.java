package io.breakerd.client;

import static org.junit.jupiter.api.Assertions.assertEquals;

import io.breakerd.client.example.GuardExample;
import java.net.URI;
import java.time.Duration;
import org.junit.jupiter.api.Test;

/** The example runs against a real breakerd, guarding a real HTTP call (breakerd's /metrics). */
class ExampleTest {

  @Test
  void exampleGuardsAnHttpCall() throws Exception {
    try (BreakerdServer server = BreakerdServer.start()) {
      URI upstream = URI.create("http://" + server.metricsAddress() + "/metrics");
      assertEquals(200, GuardExample.run(server.address(), upstream, Duration.ofSeconds(2)));
      assertEquals(1, server.reports("example/upstream", "success", "counted_success"));

      URI missing = URI.create("http://" + server.metricsAddress() + "/no-such-page");
      assertEquals(404, GuardExample.run(server.address(), missing, Duration.ofSeconds(2)));
      assertEquals(1, server.reports("example/upstream", "bad_request", "neutral"));

      server.forceOpen("example/upstream");
      assertEquals(-1, GuardExample.run(server.address(), upstream, Duration.ofSeconds(2)));
    }
  }
}

package io.breakerd.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import java.io.IOException;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** Required test 5: the fallback chain skips open dependencies and moves on after a failure. */
class FallbackTest {
  private static BreakerdServer server;
  private static BreakerdClient client;

  @BeforeAll
  static void start() throws Exception {
    server = BreakerdServer.start();
    client = server.client();
  }

  @AfterAll
  static void stop() throws Exception {
    if (client != null) {
      client.close();
    }
    if (server != null) {
      server.close();
    }
  }

  @Test
  void skipsAnOpenDependency() throws Exception {
    String a = "chain/a";
    String b = "chain/b";
    server.forceOpen(a);
    List<String> seen = new CopyOnWriteArrayList<>();
    String result = client.first(List.of(a, b), dep -> {
      seen.add(dep);
      return "from " + dep;
    });
    assertEquals("from chain/b", result);
    assertEquals(List.of(b), seen);
    assertEquals(1, server.reports(b, "success", "counted_success"));
  }

  @Test
  void movesOnWhenTheGrantedCallFails() throws Exception {
    String c = "chain/c";
    String d = "chain/d";
    List<String> seen = new CopyOnWriteArrayList<>();
    String result = client.first(List.of(c, d), dep -> {
      seen.add(dep);
      if (dep.equals(c)) {
        throw new IOException(dep + " is down");
      }
      return "from " + dep;
    });
    assertEquals("from chain/d", result);
    assertEquals(List.of(c, d), seen);
    assertEquals(1, server.reports(c, "server_error", "counted_failure"));
    assertEquals(1, server.reports(d, "success", "counted_success"));
  }

  @Test
  void everyDependencyOpenRefusesWithoutCalling() throws Exception {
    String e = "chain/e";
    String f = "chain/f";
    server.forceOpen(e);
    server.forceOpen(f);
    List<String> seen = new CopyOnWriteArrayList<>();
    BreakerOpenException refused = assertThrows(BreakerOpenException.class,
        () -> client.first(List.of(e, f), dep -> seen.add(dep)));
    assertEquals(RejectReason.FORCED_OPEN, refused.reason());
    assertTrue(seen.isEmpty());
  }

  @Test
  void badRequestEndsTheChain() throws Exception {
    String g = "chain/g";
    String h = "chain/h";
    List<String> seen = new CopyOnWriteArrayList<>();
    assertThrows(StatusRuntimeException.class, () -> client.first(List.of(g, h), dep -> {
      seen.add(dep);
      throw Status.INVALID_ARGUMENT.asRuntimeException();
    }));
    assertEquals(List.of(g), seen);
  }

  @Test
  void lastFailureIsThrownWhenTheListRunsOut() throws Exception {
    List<String> seen = new CopyOnWriteArrayList<>();
    IOException thrown = assertThrows(IOException.class,
        () -> client.first(List.of("chain/i", "chain/j"), dep -> {
          seen.add(dep);
          throw new IOException(dep);
        }));
    assertEquals("chain/j", thrown.getMessage());
    assertEquals(List.of("chain/i", "chain/j"), seen);
  }
}

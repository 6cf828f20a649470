package io.breakerd.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import java.io.IOException;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * Required test 5: the fallback chain skips open dependencies, moves on after
 * a failure worth retrying and stops after one that is not.
 */
class FallbackTest {
  @RegisterExtension static final BreakerdExtension breakerd = new BreakerdExtension();

  private final BreakerdServer server = breakerd.server();
  private final BreakerdClient client = breakerd.client();

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

  // conformance: first-non-retryable
  @Test
  void nonRetryableFailureEndsTheChainARetryableOneMovesOn() throws Exception {
    // a fails with a bad request: b is not called, the caller gets a's error.
    String a = "chain/bad-a";
    String b = "chain/bad-b";
    List<String> seen = new CopyOnWriteArrayList<>();
    StatusRuntimeException bad = Status.INVALID_ARGUMENT.asRuntimeException();
    assertSame(bad, assertThrows(StatusRuntimeException.class, () -> client.first(List.of(a, b),
        dep -> {
          seen.add(dep);
          throw bad;
        })));
    assertEquals(List.of(a), seen);
    assertEquals(1, server.reports(a, "bad_request", "neutral"));
    assertEquals(0, server.acquires(b));

    // a fails with a server error: b is called and its result returned.
    String c = "chain/down-a";
    String d = "chain/down-b";
    seen.clear();
    String result = client.first(List.of(c, d), dep -> {
      seen.add(dep);
      if (dep.equals(c)) {
        throw new IOException(dep + " is down");
      }
      return "from " + dep;
    });
    assertEquals("from chain/down-b", result);
    assertEquals(List.of(c, d), seen);
    assertEquals(1, server.reports(c, "server_error", "counted_failure"));
    assertEquals(1, server.reports(d, "success", "counted_success"));
  }

  @Test
  void authErrorCancellationAndSoftFailureEndTheChainToo() throws Exception {
    int i = 0;
    for (Classifier<Object> classifier : List.of(
        Classifier.standard().withErrors(e -> Outcome.fromHttpStatus(403)),
        Classifier.standard().withErrors(e -> Outcome.cancelled()),
        Classifier.standard().withErrors(e -> Outcome.of(Outcome.Kind.SOFT_FAILURE)))) {
      List<String> chain = List.of("chain/stop-" + i + "-a", "chain/stop-" + i + "-b");
      i++;
      List<String> seen = new CopyOnWriteArrayList<>();
      assertThrows(IOException.class, () -> client.first(chain, dep -> {
        seen.add(dep);
        throw new IOException(dep + " refused");
      }, classifier));
      assertEquals(chain.subList(0, 1), seen, "after " + classifier.onError(null).kind());
    }
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

package io.breakerd.client.example;

import io.breakerd.client.BreakerOpenException;
import io.breakerd.client.BreakerdClient;
import io.breakerd.client.Classifier;
import io.breakerd.client.Outcome;
import io.breakerd.client.RetryPolicy;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;

/**
 * Guards an HTTP GET with breakerd: the request is made only if breakerd allows
 * it, retried (outside the breaker, with backoff) on 5xx / timeouts while the
 * breaker stays closed, and its status is reported so breakerd can trip.
 *
 * <p>Usage: {@code GuardExample [breakerd-address [url]]}, defaults
 * {@code 127.0.0.1:50051} and {@code http://127.0.0.1:8080/}. Exit code 0 when
 * the upstream answered, 2 when the breaker refused (a fallback would go here).
 */
public final class GuardExample {
  private GuardExample() {}

  public static void main(String[] args) throws Exception {
    String target = args.length > 0 ? args[0] : BreakerdClient.DEFAULT_TARGET;
    URI url = URI.create(args.length > 1 ? args[1] : "http://127.0.0.1:8080/");
    System.exit(run(target, url, BreakerdClient.DEFAULT_DECISION_TIMEOUT) >= 0 ? 0 : 2);
  }

  /**
   * GETs {@code url} guarded by the breakerd at {@code target}.
   *
   * @return the upstream's HTTP status, or -1 when the breaker refused the call
   */
  public static int run(String target, URI url, Duration decisionTimeout) throws Exception {
    HttpClient http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(2)).build();
    HttpRequest request = HttpRequest.newBuilder(url).timeout(Duration.ofSeconds(5)).GET().build();
    Classifier<HttpResponse<String>> byStatus = Classifier.ofResult(response ->
        Outcome.fromHttpStatus(response.statusCode(),
            response.headers().firstValue("Retry-After").orElse(null)));

    try (BreakerdClient breakerd = BreakerdClient.builder()
        .target(target)
        .decisionTimeout(decisionTimeout)
        .build()) {
      if (!breakerd.awaitReady(Duration.ofSeconds(1))) {
        System.out.println("breakerd is not answering yet: calls fail open meanwhile");
      }
      try {
        HttpResponse<String> response = breakerd.retry("example/upstream",
            RetryPolicy.defaults(), () -> http.send(request, HttpResponse.BodyHandlers.ofString()),
            byStatus);
        System.out.printf("upstream answered %d (%d bytes)%n",
            response.statusCode(), response.body().length());
        return response.statusCode();
      } catch (BreakerOpenException e) {
        System.out.printf("breaker refused the call: %s, retry in %d ms (decided by %s)%n",
            e.reason(), e.retryAfter().toMillis(), e.source());
        return -1;
      } finally {
        System.out.println("client counters: " + breakerd.stats());
      }
    }
  }
}

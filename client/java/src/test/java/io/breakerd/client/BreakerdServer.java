package io.breakerd.client;

import io.breakerd.v1.AdminGrpc;
import io.breakerd.v1.BreakerGrpc;
import io.breakerd.v1.BreakerStatus;
import io.breakerd.v1.ForceOpenRequest;
import io.breakerd.v1.GetStateRequest;
import io.grpc.Grpc;
import io.grpc.InsecureChannelCredentials;
import io.grpc.ManagedChannel;
import io.grpc.Metadata;
import io.grpc.stub.MetadataUtils;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.UncheckedIOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The real breakerd binary ({@code BREAKERD_BIN}) as a child process on free
 * loopback ports, with helpers to read its /metrics and call its Admin service.
 */
final class BreakerdServer implements AutoCloseable {
  /**
   * The config every client's suite starts breakerd with
   * (client/conformance/breakerd.yaml; Maven runs the tests in client/java).
   */
  static final String CONFIG = readConfig();
  static final String TOKEN = "java-test-token";
  private static final Pattern GRPC = Pattern.compile("\"grpc\":\"([^\"]+)\"");
  private static final Pattern METRICS = Pattern.compile("\"metrics\":\"([^\"]+)\"");

  private final Path dir;
  private final List<String> stderr = new ArrayList<>(); // guarded by itself
  private Process process;
  private boolean frozen; // SIGSTOP sent, SIGCONT not yet
  private String grpcAddress;
  private String metricsAddress;
  private ManagedChannel channel;
  private final HttpClient http = HttpClient.newBuilder()
      .connectTimeout(Duration.ofSeconds(2)).build();

  private BreakerdServer(Path dir) {
    this.dir = dir;
  }

  private static String readConfig() {
    Path path = Path.of("..", "conformance", "breakerd.yaml");
    try {
      return Files.readString(path);
    } catch (IOException e) {
      throw new UncheckedIOException("the shared test config " + path.toAbsolutePath(), e);
    }
  }

  /** Starts breakerd on free ports with {@link #CONFIG}. */
  static BreakerdServer start() throws Exception {
    return start(null);
  }

  /** Like {@link #start()}, with one more listen address (e.g. {@code unix:/path}). */
  static BreakerdServer start(String extraListen) throws Exception {
    return start(CONFIG, extraListen);
  }

  /** Starts breakerd on free ports with {@code config} (YAML, deploy/config/breakerd.yaml). */
  static BreakerdServer startWithConfig(String config) throws Exception {
    return start(config, null);
  }

  /** Starts breakerd with {@link #CONFIG} listening on {@code listen} (e.g. 127.0.0.1:PORT). */
  static BreakerdServer startOn(String listen) throws Exception {
    BreakerdServer s = new BreakerdServer(configDir(CONFIG));
    s.launch(listen, "127.0.0.1:0");
    return s;
  }

  private static BreakerdServer start(String config, String extraListen) throws Exception {
    BreakerdServer s = new BreakerdServer(configDir(config));
    s.launch(extraListen == null ? "127.0.0.1:0" : "127.0.0.1:0," + extraListen, "127.0.0.1:0");
    return s;
  }

  private static Path configDir(String config) throws IOException {
    Path dir = Files.createTempDirectory("bd-java-test-");
    Files.writeString(dir.resolve("config.yaml"), config);
    Files.writeString(dir.resolve("token"), TOKEN + "\n");
    return dir;
  }

  /** A loopback port nothing listens on (bound, then released). */
  static int freePort() throws IOException {
    try (ServerSocket s = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
      return s.getLocalPort();
    }
  }

  static String binary() {
    String bin = System.getProperty("breakerd.bin");
    if (bin == null || bin.isBlank() || bin.startsWith("${")) {
      bin = System.getenv("BREAKERD_BIN");
    }
    if (bin == null || bin.isBlank() || !Files.isExecutable(Path.of(bin))) {
      throw new IllegalStateException("BREAKERD_BIN must name the breakerd binary, got " + bin);
    }
    return bin;
  }

  private void launch(String listen, String metricsListen) throws Exception {
    ProcessBuilder pb = new ProcessBuilder(
        binary(),
        "--listen=" + listen,
        "--metrics-listen=" + metricsListen,
        "--config=" + dir.resolve("config.yaml"),
        "--admin-token-file=" + dir.resolve("token"));
    pb.redirectOutput(ProcessBuilder.Redirect.DISCARD);
    process = pb.start();
    BlockingQueue<String> serving = new LinkedBlockingQueue<>();
    Process p = process;
    Thread reader = new Thread(() -> {
      try (BufferedReader r = new BufferedReader(
          new InputStreamReader(p.getErrorStream(), StandardCharsets.UTF_8))) {
        for (String line; (line = r.readLine()) != null; ) {
          synchronized (stderr) {
            stderr.add(line);
          }
          if (line.contains("\"event\":\"serving\"")) {
            serving.add(line);
          }
        }
      } catch (IOException ignored) {
        // the process ended
      }
    }, "breakerd-stderr");
    reader.setDaemon(true);
    reader.start();
    String line = null;
    long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
    while (line == null && System.nanoTime() < end) {
      line = serving.poll(100, TimeUnit.MILLISECONDS);
      if (line == null && !p.isAlive()) {
        reader.join(1000);
        line = serving.poll();
        break;
      }
    }
    if (line == null) {
      p.destroyForcibly();
      throw new IllegalStateException("breakerd did not log \"serving\" within 10 s; stderr:\n"
          + String.join("\n", log()));
    }
    grpcAddress = field(GRPC, line).split(",")[0];
    metricsAddress = field(METRICS, line);
    channel = Grpc.newChannelBuilder(grpcAddress, InsecureChannelCredentials.create()).build();
  }

  private static String field(Pattern p, String line) {
    Matcher m = p.matcher(line);
    if (!m.find()) {
      throw new IllegalStateException("no " + p + " in " + line);
    }
    return m.group(1);
  }

  List<String> log() {
    synchronized (stderr) {
      return List.copyOf(stderr);
    }
  }

  /** The gRPC address, host:port. */
  String address() {
    return grpcAddress;
  }

  /** The metrics address, host:port. */
  String metricsAddress() {
    return metricsAddress;
  }

  /** The process id of the running breakerd. */
  long pid() {
    return process.pid();
  }

  /**
   * Freezes the process (SIGSTOP) and waits until every thread of it is stopped:
   * connections stay up, nothing answers. Undo with {@link #thaw()} (also done by
   * {@link #stop()}).
   */
  void freeze() throws Exception {
    signal("STOP");
    frozen = true;
    if (!eventually(Duration.ofSeconds(10), this::allThreadsStopped)) {
      throw new IllegalStateException("breakerd did not stop after SIGSTOP");
    }
  }

  /** Lets a frozen process run again (SIGCONT); nothing when it is not frozen. */
  void thaw() throws Exception {
    if (frozen && process.isAlive()) {
      signal("CONT");
    }
    frozen = false;
  }

  private void signal(String sig) throws Exception {
    Process kill = new ProcessBuilder("kill", "-" + sig, Long.toString(pid()))
        .inheritIO().start();
    if (kill.waitFor() != 0) {
      throw new IllegalStateException("kill -" + sig + " " + pid() + " failed");
    }
  }

  /** Whether every thread of breakerd is stopped (state T in /proc/PID/task/TID/stat). */
  private boolean allThreadsStopped() {
    try (java.util.stream.Stream<Path> tasks =
        Files.list(Path.of("/proc", Long.toString(pid()), "task"))) {
      return tasks.allMatch(task -> {
        try {
          String stat = Files.readString(task.resolve("stat"));
          return stat.substring(stat.lastIndexOf(')') + 2).startsWith("T");
        } catch (IOException gone) {
          return true;
        }
      });
    } catch (IOException e) {
      return false;
    }
  }

  /** Stops the process (thawing it first if frozen): SIGTERM, then SIGKILL after 5 s. */
  void stop() throws InterruptedException {
    try {
      thaw();
    } catch (InterruptedException e) {
      throw e;
    } catch (Exception e) {
      // SIGKILL below still ends a stopped process
    }
    if (channel != null) {
      channel.shutdownNow();
      channel = null;
    }
    if (process != null && process.isAlive()) {
      process.destroy();
      if (!process.waitFor(5, TimeUnit.SECONDS)) {
        process.destroyForcibly();
        process.waitFor(5, TimeUnit.SECONDS);
      }
    }
  }

  /** Kills the process at once (SIGKILL), as a crash would. */
  void kill() throws InterruptedException {
    process.destroyForcibly();
    process.waitFor(5, TimeUnit.SECONDS);
  }

  /**
   * Kills breakerd (SIGKILL) and holds its gRPC port (see {@link PortHolder})
   * until the holder is closed; then {@link #restart()}.
   */
  PortHolder crash() throws Exception {
    kill();
    if (channel != null) { // this helper's own channel must not add connection attempts
      channel.shutdownNow();
      channel = null;
    }
    int colon = grpcAddress.lastIndexOf(':');
    InetSocketAddress address = new InetSocketAddress(
        grpcAddress.substring(0, colon), Integer.parseInt(grpcAddress.substring(colon + 1)));
    ServerSocket[] bound = new ServerSocket[1];
    if (!eventually(Duration.ofSeconds(10), () -> {
      ServerSocket socket = new ServerSocket();
      socket.setReuseAddress(true);
      try {
        socket.bind(address);
      } catch (IOException busy) {
        socket.close();
        return false;
      }
      bound[0] = socket;
      return true;
    })) {
      throw new IllegalStateException("the crashed breakerd's port " + address + " stayed busy");
    }
    return new PortHolder(bound[0]);
  }

  /**
   * Stands in for a crashed breakerd on its port, so nothing else takes it
   * before the restart: accepts each connection and closes it at once (to a
   * gRPC client, a failed connection attempt), noting when, so that a test
   * can restart breakerd right after one of the client's attempts (the
   * technique of client/go's TestBackWithinASecondOfSidecarRestart).
   */
  static final class PortHolder implements AutoCloseable {
    private final ServerSocket socket;
    private final BlockingQueue<Long> attempts = new LinkedBlockingQueue<>();
    private final Thread acceptor;

    private PortHolder(ServerSocket socket) {
      this.socket = socket;
      this.acceptor = new Thread(() -> {
        while (true) {
          try (Socket connection = socket.accept()) {
            attempts.add(System.nanoTime());
          } catch (IOException closed) {
            return;
          }
        }
      }, "port-holder");
      acceptor.setDaemon(true);
      acceptor.start();
    }

    /** When the next connection attempt came (System.nanoTime), or null after {@code wait}. */
    Long nextAttempt(Duration wait) throws InterruptedException {
      return attempts.poll(wait.toNanos(), TimeUnit.NANOSECONDS);
    }

    /** Frees the port (idempotent). */
    @Override
    public void close() throws InterruptedException {
      try {
        socket.close();
      } catch (IOException ignored) {
        // closed already
      }
      acceptor.join(5000);
    }
  }

  /** Starts breakerd again on the same gRPC port (new metrics port), with a fresh state. */
  void restart() throws Exception {
    stop();
    Exception last = null;
    long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
    while (System.nanoTime() < end) { // the port may linger briefly
      try {
        launch(grpcAddress, "127.0.0.1:0");
        return;
      } catch (IllegalStateException e) {
        last = e;
        Thread.sleep(200);
      }
    }
    throw last;
  }

  /** Stops breakerd and deletes its temporary directory. */
  @Override
  public void close() {
    try {
      stop();
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
    deleteTree(dir);
  }

  /** Deletes {@code root} and everything under it, ignoring what is already gone. */
  static void deleteTree(Path root) {
    try (java.util.stream.Stream<Path> paths = Files.walk(root)) {
      paths.sorted(java.util.Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
    } catch (IOException ignored) {
      // best effort
    }
  }

  /**
   * A client of this server with a generous decision timeout, so that a loaded
   * test machine does not turn answers into fail-open decisions.
   */
  BreakerdClient client() {
    return client(b -> {});
  }

  /** Like {@link #client()}, with more options. */
  BreakerdClient client(java.util.function.Consumer<BreakerdClient.Builder> options) {
    BreakerdClient.Builder b = BreakerdClient.builder()
        .target(grpcAddress)
        .decisionTimeout(Duration.ofSeconds(2));
    options.accept(b);
    return b.build();
  }

  // --- inspection ---

  BreakerGrpc.BreakerBlockingStub breaker() {
    return BreakerGrpc.newBlockingStub(channel).withDeadlineAfter(5, TimeUnit.SECONDS);
  }

  BreakerStatus status(String dependency) {
    return breaker().getState(GetStateRequest.newBuilder().setDependency(dependency).build());
  }

  AdminGrpc.AdminBlockingStub admin() {
    Metadata md = new Metadata();
    md.put(Metadata.Key.of("authorization", Metadata.ASCII_STRING_MARSHALLER), "Bearer " + TOKEN);
    return AdminGrpc.newBlockingStub(channel)
        .withInterceptors(MetadataUtils.newAttachHeadersInterceptor(md))
        .withDeadlineAfter(5, TimeUnit.SECONDS);
  }

  void forceOpen(String dependency) {
    admin().forceOpen(ForceOpenRequest.newBuilder().setDependency(dependency).build());
  }

  /** The /metrics text. */
  String scrape() throws Exception {
    HttpResponse<String> r = http.send(
        HttpRequest.newBuilder(URI.create("http://" + metricsAddress + "/metrics"))
            .timeout(Duration.ofSeconds(5)).build(),
        HttpResponse.BodyHandlers.ofString());
    if (r.statusCode() != 200) {
      throw new IllegalStateException("/metrics answered " + r.statusCode());
    }
    return r.body();
  }

  /** The value of the sample {@code name} whose labels include {@code labels}; 0 if absent. */
  double metric(String name, Map<String, String> labels) throws Exception {
    double sum = 0;
    for (String line : scrape().split("\n")) {
      if (!line.startsWith(name + "{")) {
        continue;
      }
      int close = line.lastIndexOf('}');
      String labelText = line.substring(name.length() + 1, close);
      boolean all = labels.entrySet().stream()
          .allMatch(e -> labelText.contains(e.getKey() + "=\"" + e.getValue() + "\""));
      if (all) {
        sum += Double.parseDouble(line.substring(close + 1).trim().split(" ")[0]);
      }
    }
    return sum;
  }

  /** breakerd_reports_total for one dependency, class and effect. */
  double reports(String dependency, String cls, String effect) throws Exception {
    return metric("breakerd_reports_total",
        Map.of("dependency", dependency, "class", cls, "effect", effect));
  }

  /** breakerd_acquire_total for one dependency, every decision. */
  double acquires(String dependency) throws Exception {
    return metric("breakerd_acquire_total", Map.of("dependency", dependency));
  }

  /** The /metrics samples of one dependency, for failure messages. */
  String samples(String dependency) throws Exception {
    StringBuilder b = new StringBuilder();
    for (String line : scrape().split("\n")) {
      if (line.contains("dependency=\"" + dependency + "\"")) {
        b.append(line).append('\n');
      }
    }
    return b.toString();
  }

  /**
   * Waits up to 5 s until breakerd counted {@code expected} reports of
   * {@code dependency} with class {@code cls}, and fails with its samples
   * otherwise.
   */
  void assertReports(String dependency, String cls, double expected) throws Exception {
    if (!eventually(Duration.ofSeconds(5), () -> reports(dependency, cls) == expected)) {
      throw new AssertionError(dependency + ": expected " + expected + " reports of class "
          + cls + ", metrics:\n" + samples(dependency));
    }
  }

  /** Like {@link #assertReports(String, String, double)}, of one effect too. */
  void assertReports(String dependency, String cls, String effect, double expected)
      throws Exception {
    if (!eventually(Duration.ofSeconds(5),
        () -> reports(dependency, cls, effect) == expected)) {
      throw new AssertionError(dependency + ": expected " + expected + " reports " + cls + "/"
          + effect + ", metrics:\n" + samples(dependency));
    }
  }

  /**
   * Opens {@code dependency}'s breaker through {@code client}: three guarded
   * calls that fail ({@link #CONFIG}'s consecutive_failures), then checks
   * breakerd says OPEN.
   */
  void trip(BreakerdClient client, String dependency) throws Exception {
    for (int i = 0; i < 3; i++) {
      try {
        client.call(dependency, () -> {
          throw new IOException("upstream down");
        });
        throw new AssertionError("the failing call did not throw");
      } catch (IOException expected) {
        // reported as a server error
      }
    }
    BreakerStatus s = status(dependency);
    if (s.getState() != io.breakerd.v1.State.STATE_OPEN) {
      throw new AssertionError(dependency + " is not open after 3 failures: " + s);
    }
  }

  /** breakerd_reports_total for one dependency and class, every effect. */
  double reports(String dependency, String cls) throws Exception {
    return metric("breakerd_reports_total", Map.of("dependency", dependency, "class", cls));
  }

  /** breakerd_reports_total for one dependency, every class. */
  double reports(String dependency) throws Exception {
    return metric("breakerd_reports_total", Map.of("dependency", dependency));
  }

  /** Permits breakerd granted for one dependency: acquires decided allowed or probe. */
  double permitsGranted(String dependency) throws Exception {
    return metric("breakerd_acquire_total", Map.of("dependency", dependency, "decision", "allowed"))
        + metric("breakerd_acquire_total", Map.of("dependency", dependency, "decision", "probe"));
  }

  /**
   * Asserts that every permit granted for {@code dependency} was reported
   * (SCENARIOS.md: the two sums are equal once the calls are done, allowing
   * up to 3 s for reports still on their way).
   */
  void assertEveryPermitReported(String dependency) throws Exception {
    boolean equal = eventually(Duration.ofSeconds(3),
        () -> permitsGranted(dependency) == reports(dependency));
    if (!equal) {
      throw new AssertionError(dependency + ": breakerd granted " + permitsGranted(dependency)
          + " permits and got " + reports(dependency) + " reports");
    }
  }

  /** Milliseconds since {@code startNanos} (a System.nanoTime()). */
  static long millisSince(long startNanos) {
    return TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - startNanos);
  }

  /** One decision of {@code client} for {@code dep}: allowed (reported a success) or refused. */
  static Decision decision(BreakerdClient client, String dep) {
    try (Permit p = client.acquire(dep)) {
      p.success();
      return p.decision();
    } catch (BreakerOpenException refused) {
      return refused.decision();
    }
  }

  /** Decides {@code dep} until breakerd itself answers, at most {@code within}; the last decision. */
  static Decision untilSidecar(BreakerdClient client, String dep, Duration within)
      throws Exception {
    Decision[] last = new Decision[1];
    eventually(within, () -> {
      last[0] = decision(client, dep);
      return last[0].source() == Decision.Source.SIDECAR;
    });
    return last[0];
  }

  /** A condition polled by {@link #eventually}; it may throw (e.g. a failed scrape). */
  @FunctionalInterface
  interface Check {
    boolean holds() throws Exception;
  }

  /** Polls {@code condition} every 20 ms until it holds or {@code timeout} passes. */
  static boolean eventually(Duration timeout, Check condition) throws Exception {
    long end = System.nanoTime() + timeout.toNanos();
    while (true) {
      if (condition.holds()) {
        return true;
      }
      if (System.nanoTime() > end) {
        return false;
      }
      Thread.sleep(20);
    }
  }
}

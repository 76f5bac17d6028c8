package dev.holdfast.example.stock;

import dev.holdfast.testing.Await;
import dev.holdfast.testing.LoopbackPorts;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.wildfly.core.launcher.Launcher;
import org.wildfly.core.launcher.StandaloneCommandBuilder;

/**
 * One WildFly server process running the example WAR, owned by the test that started it.
 *
 * <p>Every server runs the WildFly unpacked by the build (system property {@code wildfly.home})
 * with {@code standalone-microprofile.xml}, in a base directory of its own
 * ({@code <wildfly.instances>/<name>}: configuration copied from the distribution, data, logs,
 * and the WAR in {@code deployments/}, deployed while the server boots). Public and management
 * interfaces bind 127.0.0.1 only, on free ports, so any number of servers can run side by side.
 * The base directory is kept after the server stops, for its logs.
 *
 * <p>Readiness is polled, within {@value #BOOT_TIMEOUT_SECONDS} s: the deployment scanner's
 * {@code .deployed} marker and then {@code /health/ready} on the management port (UP once the
 * server runs and every deployment is up). A server that exits, fails its deployment or boots
 * with errors fails the start at once, with the tail of its console log.
 *
 * <p>{@link #close()} asks for a graceful shutdown (SIGTERM) and kills the process if it is not
 * gone within {@value #STOP_TIMEOUT_SECONDS} s. A JVM shutdown hook kills every server not closed
 * by then; a test JVM killed with SIGKILL cannot run it (leftovers are recognisable by their
 * {@code -Djboss.server.base.dir=…/wildfly-instances/…}).
 *
 * <p>{@link #pause()} and {@link #resume()} freeze and thaw the server's JVM (SIGSTOP, SIGCONT),
 * as a long GC pause or a suspended VM would.
 *
 * <p>Thread-safe: {@link #close()} is synchronised and idempotent.
 */
final class WildFlyServer implements AutoCloseable {

  static final String HOST = "127.0.0.1";
  static final String CONTEXT_ROOT = "holdfast-example";

  private static final long BOOT_TIMEOUT_SECONDS = 180;
  private static final long STOP_TIMEOUT_SECONDS = 30;
  private static final int LOG_TAIL_LINES = 40;
  /** "started (with errors)": a port was taken, a subsystem or a deployment failed. */
  private static final String BOOT_WITH_ERRORS = "WFLYSRV0026";

  private static final Set<Process> LIVE_PROCESSES = ConcurrentHashMap.newKeySet();
  private static final HttpClient PROBE = HttpClient.newBuilder()
      .version(HttpClient.Version.HTTP_1_1)
      .connectTimeout(Duration.ofSeconds(1))
      .build();

  static {
    Runtime.getRuntime()
        .addShutdownHook(new Thread(WildFlyServer::killAllOnExit, "holdfast-wildfly-reaper"));
  }

  private final String name;
  private final Path baseDir;
  private final Path consoleLog;
  private final String warName;
  private final int httpPort;
  private final int managementPort;
  private final List<Integer> ports;

  private Process process;
  private boolean closed;
  private boolean paused;

  private WildFlyServer(String name, Path baseDir, String warName, List<Integer> ports) {
    this.name = name;
    this.baseDir = baseDir;
    this.consoleLog = baseDir.resolve("console.log");
    this.warName = warName;
    this.ports = List.copyOf(ports);
    this.httpPort = ports.get(0);
    this.managementPort = ports.get(2);
  }

  /**
   * Starts a server named {@code name} with the example deployed, and waits until it is ready.
   *
   * @param name             the instance's name: its directory, {@code jboss.node.name} and
   *                         transaction node id
   * @param systemProperties passed to the server JVM as {@code -Dkey=value}, e.g. the
   *                         application's MicroProfile Config
   * @return the running server; close it
   * @throws IllegalStateException if {@code wildfly.home}, {@code example.war} or
   *                               {@code wildfly.instances} is not set (run it with Maven:
   *                               {@code ./mvnw verify})
   * @throws AssertionError        if the server does not become ready; the message carries the
   *                               tail of its console log
   */
  static WildFlyServer start(String name, Map<String, String> systemProperties) {
    Path home = requiredPath("wildfly.home");
    Path war = requiredPath("example.war");
    Path baseDir = requiredPath("wildfly.instances").resolve(name);
    List<Integer> ports = new ArrayList<>();
    for (int i = 0; i < 4; i++) {
      ports.add(LoopbackPorts.reserve());
    }
    WildFlyServer server = new WildFlyServer(name, baseDir, war.getFileName().toString(), ports);
    try {
      server.prepareBaseDir(home, war);
      server.launch(home, systemProperties);
      server.awaitReady();
      return server;
    } catch (RuntimeException | Error e) {
      server.close();
      throw e;
    }
  }

  /** {@code http://127.0.0.1:<port>/holdfast-example/}: the example's root. */
  URI baseUri() {
    return URI.create("http://" + HOST + ":" + httpPort + "/" + CONTEXT_ROOT + "/");
  }

  String name() {
    return name;
  }

  /** {@return what the server has written to its console so far} */
  String consoleLogText() {
    return read(consoleLog);
  }

  /**
   * Freezes the server's JVM with SIGSTOP: none of its threads runs, and its connections stay
   * open, until {@link #resume()}.
   */
  synchronized void pause() {
    signal("STOP");
    paused = true;
  }

  /** Lets a {@linkplain #pause() paused} server run on (SIGCONT); harmless if it runs. */
  synchronized void resume() {
    if (process != null && process.isAlive()) {
      signal("CONT");
    }
    paused = false;
  }

  /**
   * Stops the server gracefully, or kills it after {@value #STOP_TIMEOUT_SECONDS} s, and
   * releases its ports; a paused server is resumed first. Idempotent.
   */
  @Override
  public synchronized void close() {
    if (closed) {
      return;
    }
    closed = true;
    try {
      if (process != null) {
        if (paused) {
          resume();
        }
        stop(process);
      }
    } finally {
      ports.forEach(LoopbackPorts::release);
    }
  }

  @Override
  public String toString() {
    return "WildFly " + name + " (http " + httpPort + ", management " + managementPort + ")";
  }

  private void prepareBaseDir(Path home, Path war) {
    try {
      deleteRecursively(baseDir);
      copyRecursively(home.resolve("standalone/configuration"), baseDir.resolve("configuration"));
      Files.createDirectories(baseDir.resolve("deployments"));
      Files.copy(war, baseDir.resolve("deployments").resolve(warName));
    } catch (IOException e) {
      throw new UncheckedIOException("Cannot prepare " + baseDir, e);
    }
  }

  private synchronized void launch(Path home, Map<String, String> systemProperties) {
    StandaloneCommandBuilder command = StandaloneCommandBuilder.of(home)
        .setJavaHome(System.getProperty("java.home"))
        .setBaseDirectory(baseDir)
        .setServerConfiguration("standalone-microprofile.xml")
        // C1 only: boots a 2-core machine in about a third of the time; enough for a test load.
        .addJavaOption("-XX:TieredStopAtLevel=1")
        .addJavaOption("-Djboss.http.port=" + ports.get(0))
        .addJavaOption("-Djboss.https.port=" + ports.get(1))
        .addJavaOption("-Djboss.management.http.port=" + ports.get(2))
        .addJavaOption("-Djboss.management.https.port=" + ports.get(3))
        .addJavaOption("-Djboss.node.name=" + name)
        .addJavaOption("-Djboss.tx.node.id=" + name);
    systemProperties.forEach((key, value) -> command.addJavaOption("-D" + key + "=" + value));
    command.setBindAddressHint(HOST);
    command.setBindAddressHint("management", HOST);
    try {
      process = Launcher.of(command)
          .setDirectory(baseDir)
          .setRedirectErrorStream(true)
          .redirectOutput(consoleLog)
          .launch();
    } catch (IOException e) {
      throw new UncheckedIOException("Cannot launch " + this, e);
    }
    LIVE_PROCESSES.add(process);
  }

  private void signal(String name) {
    if (process == null) {
      throw new IllegalStateException(this + " was not launched");
    }
    String pid = Long.toString(process.pid());
    try {
      Process kill = new ProcessBuilder("kill", "-" + name, pid).redirectErrorStream(true).start();
      if (!kill.waitFor(STOP_TIMEOUT_SECONDS, TimeUnit.SECONDS) || kill.exitValue() != 0) {
        kill.destroyForcibly();
        throw new IllegalStateException("kill -" + name + " " + pid + " failed: "
            + new String(kill.getInputStream().readAllBytes(), StandardCharsets.UTF_8));
      }
    } catch (IOException e) {
      throw new UncheckedIOException("kill -" + name + " " + pid, e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException("Interrupted: kill -" + name + " " + pid, e);
    }
  }

  private void awaitReady() {
    try {
      Await.until(Duration.ofSeconds(BOOT_TIMEOUT_SECONDS), this::isReady,
          this + " has booted with " + warName + " deployed");
    } catch (AssertionError e) {
      throw new AssertionError(e.getMessage() + logTail(), e.getCause());
    }
  }

  /** Polled by {@link #awaitReady}; throws an {@link AssertionError} when waiting is pointless. */
  private boolean isReady() {
    Process running;
    synchronized (this) {
      running = process;
    }
    if (!running.isAlive()) {
      throw new AssertionError(this + " exited with code " + running.exitValue() + logTail());
    }
    Path deployments = baseDir.resolve("deployments");
    Path failed = deployments.resolve(warName + ".failed");
    if (Files.exists(failed)) {
      throw new AssertionError(this + " failed to deploy " + warName + ": " + read(failed)
          + logTail());
    }
    if (!Files.exists(deployments.resolve(warName + ".deployed"))) {
      return false;
    }
    if (isHealthReady()) {
      return true;
    }
    if (read(consoleLog).contains(BOOT_WITH_ERRORS)) {
      throw new AssertionError(this + " started with errors" + logTail());
    }
    return false;
  }

  private boolean isHealthReady() {
    HttpRequest request = HttpRequest.newBuilder(
            URI.create("http://" + HOST + ":" + managementPort + "/health/ready"))
        .timeout(Duration.ofSeconds(2))
        .build();
    try {
      return PROBE.send(request, HttpResponse.BodyHandlers.discarding()).statusCode() == 200;
    } catch (IOException e) {
      return false;
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new AssertionError("Interrupted while probing " + this, e);
    }
  }

  private void stop(Process running) {
    try {
      running.destroy(); // SIGTERM: WildFly undeploys and shuts down gracefully
      if (!running.waitFor(STOP_TIMEOUT_SECONDS, TimeUnit.SECONDS)) {
        running.destroyForcibly();
        running.waitFor(STOP_TIMEOUT_SECONDS, TimeUnit.SECONDS);
      }
    } catch (InterruptedException e) {
      running.destroyForcibly();
      Thread.currentThread().interrupt();
    } finally {
      if (!running.isAlive()) {
        LIVE_PROCESSES.remove(running); // else the shutdown hook tries again
      }
    }
  }

  private String logTail() {
    List<String> lines = read(consoleLog).lines().toList();
    List<String> tail = lines.subList(Math.max(0, lines.size() - LOG_TAIL_LINES), lines.size());
    return "\n--- last " + tail.size() + " lines of " + consoleLog + " ---\n"
        + String.join("\n", tail);
  }

  private static String read(Path file) {
    try {
      return Files.readString(file, StandardCharsets.UTF_8);
    } catch (IOException e) {
      return "(" + file + " not readable: " + e.getMessage() + ")";
    }
  }

  private static Path requiredPath(String property) {
    String value = System.getProperty(property);
    if (value == null || value.isBlank()) {
      throw new IllegalStateException("System property " + property + " is not set; run the "
          + "integration tests with Maven (./mvnw verify), which unpacks WildFly and sets it");
    }
    return Path.of(value).toAbsolutePath();
  }

  private static void copyRecursively(Path from, Path to) throws IOException {
    try (Stream<Path> files = Files.walk(from)) {
      for (Path source : (Iterable<Path>) files::iterator) {
        Path target = to.resolve(from.relativize(source).toString());
        if (Files.isDirectory(source)) {
          Files.createDirectories(target);
        } else {
          Files.copy(source, target, StandardCopyOption.REPLACE_EXISTING);
        }
      }
    }
  }

  private static void deleteRecursively(Path dir) throws IOException {
    if (!Files.exists(dir)) {
      return;
    }
    try (Stream<Path> files = Files.walk(dir)) {
      for (Path path : files.sorted(Comparator.reverseOrder()).toList()) {
        Files.delete(path);
      }
    }
  }

  private static void killAllOnExit() {
    for (Process process : LIVE_PROCESSES) {
      process.destroyForcibly();
    }
    for (Process process : LIVE_PROCESSES) {
      try {
        process.waitFor(5, TimeUnit.SECONDS);
      } catch (InterruptedException e) {
        return;
      }
    }
  }
}

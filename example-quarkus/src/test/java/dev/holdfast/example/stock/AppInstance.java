package dev.holdfast.example.stock;

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
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;

/**
 * One packaged instance of the example ({@code java -jar target/quarkus-app/quarkus-run.jar}) on
 * a free port of 127.0.0.1, for the two-instance test and the demo.
 *
 * <p>The Redis address goes to the process in {@code HOLDFAST_REDIS_ADDRESS}, not on its command
 * line, where {@code ps} would show a password. Output goes to a log file. Every process is
 * stopped by {@link #close()}, and, should the JVM exit first (a failure, Ctrl-C), by a shutdown
 * hook. {@link #pause()} and {@link #resume()} freeze and thaw the process, as a long GC pause
 * or a suspended VM would.
 */
final class AppInstance implements AutoCloseable {
  private static final Duration STOP_TIMEOUT = Duration.ofSeconds(10);
  private static final int LAUNCH_ATTEMPTS = 3;
  private static final Set<Process> LIVE = ConcurrentHashMap.newKeySet();
  private static final HttpClient PROBE = HttpClient.newBuilder()
      .version(HttpClient.Version.HTTP_1_1)
      .connectTimeout(Duration.ofSeconds(1))
      .build();

  static {
    Runtime.getRuntime().addShutdownHook(new Thread(AppInstance::stopAllOnExit,
        "holdfast-example-reaper"));
  }

  private final Path jar;
  private final String redisAddress;
  private final Path log;
  private final List<String> systemProperties;
  private int port;
  private Process process;
  private boolean paused;

  private AppInstance(Path jar, String redisAddress, Path log, List<String> systemProperties) {
    this.jar = jar;
    this.redisAddress = redisAddress;
    this.log = log;
    this.systemProperties = List.copyOf(systemProperties);
  }

  /**
   * Starts {@code count} instances side by side and waits until each answers HTTP.
   *
   * @param systemProperties extra {@code -Dkey=value} arguments for every instance
   * @throws IllegalStateException if one does not come up within {@code timeout} (all are
   *                               stopped; the message has the tail of its log)
   */
  static List<AppInstance> startAll(int count, Path jar, String redisAddress, Path logDir,
      Duration timeout, String... systemProperties) {
    if (!Files.isRegularFile(jar)) {
      throw new IllegalStateException(jar + " does not exist: package the module first");
    }
    List<AppInstance> instances = new ArrayList<>();
    try {
      Files.createDirectories(logDir);
      for (int i = 1; i <= count; i++) {
        Path log = logDir.resolve("instance-" + i + ".log");
        Files.deleteIfExists(log);
        AppInstance instance = new AppInstance(jar, redisAddress, log, List.of(systemProperties));
        instances.add(instance);
        instance.launch(); // all boot in parallel; readiness is awaited below
      }
      long deadline = System.nanoTime() + timeout.toNanos();
      for (AppInstance instance : instances) {
        instance.awaitReady(deadline);
      }
      return instances;
    } catch (IOException e) {
      closeAll(instances);
      throw new UncheckedIOException(e);
    } catch (RuntimeException | Error e) {
      closeAll(instances);
      throw e;
    }
  }

  /** Stops every instance, also when one fails to stop. */
  static void closeAll(List<AppInstance> instances) {
    for (AppInstance instance : instances) {
      instance.close();
    }
  }

  /** {@code http://127.0.0.1:<port>}. */
  URI uri() {
    return URI.create("http://127.0.0.1:" + port);
  }

  Path log() {
    return log;
  }

  /**
   * Freezes the instance's JVM with SIGSTOP: no thread of it runs, and its connections stay open,
   * until {@link #resume()}.
   */
  synchronized void pause() {
    signal("STOP");
    paused = true;
  }

  /** Lets a {@linkplain #pause() paused} instance run on (SIGCONT); harmless if it runs. */
  synchronized void resume() {
    if (process != null && process.isAlive()) {
      signal("CONT");
    }
    paused = false;
  }

  /**
   * SIGTERM (Quarkus shuts down gracefully, closing its lock client), then SIGKILL; a paused
   * instance is resumed first. Idempotent.
   */
  @Override
  public synchronized void close() {
    if (process == null) {
      return;
    }
    if (paused) {
      resume();
    }
    stop(process);
    LIVE.remove(process);
    process = null;
    LoopbackPorts.release(port);
  }

  @Override
  public String toString() {
    return "example instance " + uri();
  }

  private synchronized void launch() throws IOException {
    port = LoopbackPorts.reserve();
    List<String> command = new ArrayList<>();
    command.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
    command.add("-Xmx256m");
    command.add("-Dquarkus.http.host=127.0.0.1");
    command.add("-Dquarkus.http.port=" + port);
    systemProperties.forEach(p -> command.add("-D" + p));
    command.add("-jar");
    command.add(jar.toString());
    ProcessBuilder builder = new ProcessBuilder(command)
        .redirectErrorStream(true)
        .redirectOutput(ProcessBuilder.Redirect.appendTo(log.toFile()));
    builder.environment().put("HOLDFAST_REDIS_ADDRESS", redisAddress);
    process = builder.start();
    LIVE.add(process);
  }

  /** Polls until the instance answers; relaunches on another port if its port was taken. */
  private void awaitReady(long deadlineNanos) throws IOException {
    for (int attempt = 1; ; attempt++) {
      while (process.isAlive() && System.nanoTime() < deadlineNanos) {
        if (answers()) {
          return;
        }
        pause(Duration.ofMillis(100));
      }
      boolean portTaken = !process.isAlive() && logText().contains("in use");
      if (!portTaken || attempt == LAUNCH_ATTEMPTS) {
        String why = process.isAlive() ? "did not answer in time" : "exited with "
            + process.exitValue();
        throw new IllegalStateException(this + " " + why + "; last lines of " + log + ":\n"
            + tail(logText(), 30));
      }
      close();
      launch();
    }
  }

  private void signal(String name) {
    if (process == null) {
      throw new IllegalStateException(this + " is not running");
    }
    String pid = Long.toString(process.pid());
    try {
      Process kill = new ProcessBuilder("kill", "-" + name, pid).redirectErrorStream(true).start();
      if (!kill.waitFor(STOP_TIMEOUT.toMillis(), TimeUnit.MILLISECONDS) || kill.exitValue() != 0) {
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

  private boolean answers() {
    HttpRequest probe = HttpRequest.newBuilder(uri().resolve("/stock/readiness-probe"))
        .timeout(Duration.ofSeconds(2)).GET().build();
    try {
      // 404 "No stock for readiness-probe" comes from the application: it is serving.
      int status = PROBE.send(probe, HttpResponse.BodyHandlers.discarding()).statusCode();
      return status == 200 || status == 404;
    } catch (IOException e) {
      return false; // not listening yet
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException("Interrupted while waiting for " + this, e);
    }
  }

  private String logText() {
    try {
      return Files.readString(log, StandardCharsets.UTF_8);
    } catch (IOException e) {
      return "(cannot read " + log + ": " + e + ")";
    }
  }

  private static String tail(String text, int lines) {
    String[] all = text.split("\n");
    return String.join("\n", List.of(all).subList(Math.max(0, all.length - lines), all.length));
  }

  private static void pause(Duration duration) {
    try {
      Thread.sleep(duration.toMillis());
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException("Interrupted", e);
    }
  }

  private static void stop(Process process) {
    process.destroy();
    try {
      if (!process.waitFor(STOP_TIMEOUT.toMillis(), TimeUnit.MILLISECONDS)) {
        process.destroyForcibly().waitFor(STOP_TIMEOUT.toMillis(), TimeUnit.MILLISECONDS);
      }
    } catch (InterruptedException e) {
      process.destroyForcibly();
      Thread.currentThread().interrupt();
    }
  }

  private static void stopAllOnExit() {
    for (Process process : LIVE) {
      process.destroy(); // all at once, then wait: shutdown hooks should be quick
    }
    for (Process process : LIVE) {
      stop(process);
    }
  }
}

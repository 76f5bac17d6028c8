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
import java.util.Locale;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.regex.Pattern;

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
  private static final String READINESS_PATH = "/stock/readiness-probe";
  /** What Quarkus logs when the application fails to start, just before the process exits. */
  private static final List<String> STARTUP_FAILURE_MARKERS =
      List.of("Error running Quarkus", "Failed to start application");
  /** Exceptions that only wrap the cause. */
  private static final Pattern WRAPPER = Pattern.compile(
      "java\\.lang\\.(RuntimeException: Failed to start quarkus|ExceptionInInitializerError).*");
  /** The start of an ERROR entry, up to its message: {@code <time> ERROR [<logger>] (<thread>) }. */
  private static final Pattern ERROR_ENTRY =
      Pattern.compile("\\S[^\\t]*?\\sERROR\\s+\\[[^\\]]*\\]\\s+(?:\\([^)]*\\)\\s+)?");
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
  private long launchedNanos;
  private long logSizeSeen = -1;

  private AppInstance(Path jar, String redisAddress, Path log, List<String> systemProperties) {
    this.jar = jar;
    this.redisAddress = redisAddress;
    this.log = log;
    this.systemProperties = List.copyOf(systemProperties);
  }

  /**
   * Starts {@code count} instances side by side and waits until each answers HTTP.
   *
   * <p>Fails as soon as one cannot come up, not at the timeout: when its process exits, when it
   * logs that the application failed to start, or when it answers the readiness probe with a
   * server error (it started but cannot serve, e.g. Redis is unreachable).
   *
   * @param systemProperties extra {@code -Dkey=value} arguments for every instance
   * @throws IllegalStateException if one does not come up (all are stopped); the message names
   *                               the cause found in its log (the exception that stopped it),
   *                               and the log file
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
    launchedNanos = System.nanoTime();
    logSizeSeen = -1;
    LIVE.add(process);
  }

  /**
   * Polls until the instance answers; relaunches on another port if its port was taken. Gives up
   * at once when the instance cannot come up (see {@link #startAll}).
   */
  private void awaitReady(long deadlineNanos) throws IOException {
    for (int attempt = 1; ; attempt++) {
      while (process.isAlive() && System.nanoTime() < deadlineNanos) {
        int status = probe();
        // 404 "No stock for readiness-probe" comes from the application: it is serving.
        if (status == 200 || status == 404) {
          return;
        }
        if (status >= 500) {
          pause(Duration.ofMillis(200)); // let it log the failure it answered with
          throw failure("started but answered " + status + " to GET " + READINESS_PATH);
        }
        if (loggedStartupFailure()) {
          waitForExit(Duration.ofSeconds(5));
          break;
        }
        pause(Duration.ofMillis(100));
      }
      boolean portTaken = !process.isAlive() && logText().contains("in use");
      if (!portTaken || attempt == LAUNCH_ATTEMPTS) {
        String why = process.isAlive()
            ? (loggedStartupFailure() ? "failed to start" : "did not answer in time")
            : "did not start: it exited with code " + process.exitValue() + " after "
                + String.format(Locale.ROOT, "%.1f s", (System.nanoTime() - launchedNanos) / 1e9);
        throw failure(why);
      }
      close();
      launch();
    }
  }

  /**
   * The failure of this instance: the cause its log names, else (nothing was thrown, e.g. it is
   * still booting) the log's last lines.
   */
  private IllegalStateException failure(String why) {
    String text = logText();
    String cause = startupCause(text);
    return new IllegalStateException(this + " " + why + ".\n"
        + (cause != null ? "  Cause: " + cause + "\n  Log: " + log
            : "  Last lines of " + log + ":\n" + tail(text, 30)));
  }

  /**
   * The exception that stopped the application, from its log: of the first error logged, the
   * outermost cause that is not a mere wrapper (Quarkus wraps a failed start in
   * {@code RuntimeException: Failed to start quarkus}), else the error's own line, with the
   * exception it suppressed if any (Jedis puts the refused connection there).
   *
   * @return one or two lines, or {@code null} if the log has no error
   */
  static String startupCause(String logText) {
    List<String> lines = logText.lines().toList();
    int error = -1;
    for (int i = 0; i < lines.size() && error < 0; i++) {
      if (ERROR_ENTRY.matcher(lines.get(i)).lookingAt()) {
        error = i;
      }
    }
    if (error < 0) {
      return null;
    }
    String headline = ERROR_ENTRY.matcher(lines.get(error)).replaceFirst("").trim();
    String suppressed = null;
    for (int i = error + 1; i < lines.size(); i++) {
      String raw = lines.get(i);
      String line = raw.trim();
      boolean sameEntry = line.startsWith("Caused by: ")
          || !raw.isEmpty() && Character.isWhitespace(raw.charAt(0));
      if (!sameEntry) {
        break; // the next log entry
      }
      if (line.startsWith("Caused by: ")) {
        String cause = line.substring("Caused by: ".length());
        if (!WRAPPER.matcher(cause).matches()) {
          return cause;
        }
      } else if (line.startsWith("Suppressed: ") && suppressed == null) {
        suppressed = line.substring("Suppressed: ".length());
      }
    }
    return suppressed == null ? headline : headline + "\n         " + suppressed;
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

  /** The readiness probe's status code, or -1 if the instance does not answer yet. */
  private int probe() {
    HttpRequest probe = HttpRequest.newBuilder(uri().resolve(READINESS_PATH))
        .timeout(Duration.ofSeconds(2)).GET().build();
    try {
      return PROBE.send(probe, HttpResponse.BodyHandlers.discarding()).statusCode();
    } catch (IOException e) {
      return -1; // not listening yet
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException("Interrupted while waiting for " + this, e);
    }
  }

  /** Whether the log says that the application failed to start; reads it only when it grew. */
  private boolean loggedStartupFailure() {
    long size;
    try {
      size = Files.size(log);
    } catch (IOException e) {
      return false;
    }
    if (size == logSizeSeen) {
      return false;
    }
    logSizeSeen = size;
    String text = logText();
    return STARTUP_FAILURE_MARKERS.stream().anyMatch(text::contains);
  }

  private void waitForExit(Duration atMost) {
    try {
      process.waitFor(atMost.toMillis(), TimeUnit.MILLISECONDS);
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

  /**
   * Stops every instance this JVM started and has not stopped yet, e.g. from a shutdown hook;
   * returns once they are gone. Safe to call concurrently with {@link #close()}.
   */
  static void stopAll() {
    stopAllOnExit();
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

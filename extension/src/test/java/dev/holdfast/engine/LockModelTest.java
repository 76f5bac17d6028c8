package dev.holdfast.engine;

import static org.junit.jupiter.api.Assertions.fail;

import dev.holdfast.testing.FaultProxy;
import dev.holdfast.testing.RedisServer;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.io.UncheckedIOException;
import java.io.Writer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.SecureRandom;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Collectors;
import org.junit.jupiter.api.Test;
import redis.clients.jedis.Jedis;

/**
 * Randomized, fault-injecting, model-checked test of the lock (issue 7): several clients — two
 * in this JVM, one in a separate {@link ModelWorker} JVM — with three actor threads each run
 * random operations (lock, lock(lease), tryLock, tryLock(wait[, lease]), lockInterruptibly with
 * and without an interrupt, re-entry, unlock, forceUnlock, getHoldCount, client close and
 * re-creation) on three lock names. Each client talks to Redis through its own
 * {@link FaultProxy}, and a seeded schedule drops replies, adds latency, black-holes and resets
 * connections, and kills the lock server with SIGKILL (it runs with {@code appendfsync always})
 * and restarts it. Every call, hold, probe window and {@code LockLost} is recorded, and
 * {@link ModelJudge} checks the history: exclusion (judged by a probe on a separate, never
 * faulted Redis, not by the library's answers), hold counts, loss reports, calls on lost holds,
 * time bounds, and that nothing is left behind in Redis or in the clients.
 *
 * <p>Properties:
 * <ul>
 *   <li>{@code -Dholdfast.model.seed=N} replays seed N: the fault schedule, the settings (timeout
 *       300-500 ms, watchdog 1.5-3 s) and every actor's sequence of random choices. Threads make
 *       an exact replay impossible (which choices are possible depends on who holds what when),
 *       so a replay is alike, not identical. Without it, a fresh seed is drawn and printed.</li>
 *   <li>{@code -Dholdfast.model.soak=10m} ({@code ms}, {@code s}, {@code m}, {@code h} or ISO-8601)
 *       runs the faulted phase that long instead of {@value #CI_RUN_SECONDS} s.</li>
 * </ul>
 * It prints the seed first and a table of figures at the end (surefire's
 * {@code target/surefire-reports/dev.holdfast.engine.LockModelTest-output.txt}), and writes
 * {@code target/holdfast-model/}: {@code figures-<seed>.md}, {@code history-<seed>.tsv} (one
 * {@link ModelEvent} per line), {@code report-<seed>.txt} on failure and the worker's log.
 */
class LockModelTest {
  static final String SEED_PROPERTY = "holdfast.model.seed";
  static final String SOAK_PROPERTY = "holdfast.model.soak";
  static final int CI_RUN_SECONDS = 40;
  private static final Path OUT = Path.of("target", "holdfast-model");
  private static final Duration ACTORS_TIMEOUT = Duration.ofSeconds(40);
  private static final Duration CLEANUP_TIMEOUT = Duration.ofSeconds(15);
  private static final String MARKER = "holdfast_unlock_marker";
  /** Violations shown in full in the assertion message; the report file has all of them. */
  private static final int SHOWN = 12;

  @Test
  void randomOperationsUnderFaults_matchTheModel() throws Exception {
    long seed = seed();
    Duration run = runDuration();
    System.out.println("LockModelTest seed " + seed + " (replay: -D" + SEED_PROPERTY + "=" + seed
        + "), faulted run " + run.toSeconds() + " s");
    Files.createDirectories(OUT);
    List<ModelEvent> events;
    ModelSettings settings;
    Map<ModelFaults.Kind, Integer> injected;
    long runMicros;
    long connections;
    try (RedisServer redis = RedisServer.start("--appendonly", "yes", "--appendfsync", "always");
        RedisServer probe = RedisServer.start()) {
      settings = ModelSettings.forSeed(seed, probe.port());
      System.out.println("settings: " + settings);
      List<FaultProxy> proxies = new ArrayList<>();
      ModelHistory history = new ModelHistory("p0", null);
      try {
        for (int i = 0; i < 3; i++) {
          proxies.add(new FaultProxy(redis.port()));
        }
        try (Worker worker = Worker.start(settings, "p1", proxies.get(2).port(), history, seed);
            ModelProcess local = new ModelProcess(settings,
                List.of(proxies.get(0).port(), proxies.get(1).port()), history)) {
          worker.awaitReady();
          local.start();
          ModelFaults faults = new ModelFaults(ModelFaults.schedule(seed, run.toMillis(),
              proxies.size(), settings.watchdogMillis()), proxies, redis, history);
          long runStart = ModelEvent.now();
          faults.start();
          worker.sleepWhileAlive(run);
          faults.stopAndHeal();
          runMicros = ModelEvent.now() - runStart;
          injected = faults.injected();
          local.stop();
          worker.stop();
          if (local.awaitActors(ACTORS_TIMEOUT)) {
            local.awaitNoWaitedChannels(Duration.ofSeconds(10));
          }
          worker.awaitIdle();
          checkServerIsClean(redis, history);
          worker.exit();
        }
        checkProbeIsBalanced(probe, history);
        for (int i = 0; i < proxies.size(); i++) {
          FaultProxy proxy = proxies.get(i);
          if (proxy.refusedConnections() > 0) {
            history.violation("harness", "", "proxy" + i + " refused "
                + proxy.refusedConnections() + " connections over its limit");
          }
        }
        connections = proxies.stream().mapToLong(FaultProxy::acceptedConnections).sum();
        events = history.snapshot();
      } finally {
        proxies.forEach(FaultProxy::close);
      }
    }
    ModelJudge judge = new ModelJudge(settings, events);
    List<ModelJudge.Violation> violations = judge.judge();
    Map<String, String> figures = judge.figures(runMicros, injected, connections);
    String table = table(figures);
    System.out.println(table);
    Files.writeString(OUT.resolve("figures-" + seed + ".md"), table, StandardCharsets.UTF_8);
    Path historyFile = OUT.resolve("history-" + seed + ".tsv");
    Files.write(historyFile, events.stream().map(ModelEvent::toLine).toList(),
        StandardCharsets.UTF_8);
    if (!violations.isEmpty()) {
      Path reportFile = OUT.resolve("report-" + seed + ".txt");
      Files.writeString(reportFile, report(seed, violations, Integer.MAX_VALUE),
          StandardCharsets.UTF_8);
      String shown = report(seed, violations, SHOWN);
      System.out.println(shown);
      fail(shown + "\nfull report: " + reportFile.toAbsolutePath() + "\nhistory: "
          + historyFile.toAbsolutePath());
    }
  }

  /**
   * After every actor ended: no lock key left (release markers excepted: they expire on their
   * own, so they must have a TTL), no channel subscribed.
   */
  private static void checkServerIsClean(RedisServer redis, ModelHistory history)
      throws InterruptedException {
    long deadline = System.nanoTime() + CLEANUP_TIMEOUT.toNanos();
    List<String> locks;
    while (true) {
      try (Jedis jedis = redis.admin()) {
        locks = jedis.keys("*").stream().filter(k -> !k.contains(MARKER)).sorted().toList();
        if (locks.isEmpty() || System.nanoTime() > deadline) {
          List<String> described = new ArrayList<>();
          for (String key : locks) {
            described.add(key + " " + jedis.hgetAll(key) + " pttl " + jedis.pttl(key));
          }
          if (!described.isEmpty()) {
            history.violation("cleanup", "", "lock keys left " + CLEANUP_TIMEOUT.toSeconds()
                + " s after every actor ended: " + described);
          }
          List<String> eternal = jedis.keys("*" + MARKER + "*").stream()
              .filter(k -> jedis.pttl(k) == -1).toList(); // -2: expired meanwhile
          if (!eternal.isEmpty()) {
            history.violation("cleanup", "", "release markers without expiry: " + eternal);
          }
          break;
        }
      }
      Thread.sleep(100);
    }
    while (true) {
      List<String> channels;
      try (Jedis jedis = redis.admin()) {
        channels = new ArrayList<>(jedis.pubsubChannels());
        jedis.pubsubShardChannels().forEach(c -> channels.add("shard:" + c));
      }
      if (channels.isEmpty()) {
        return;
      }
      if (System.nanoTime() > deadline) {
        history.violation("cleanup", "", "channels still subscribed after every actor ended: "
            + channels);
        return;
      }
      Thread.sleep(100);
    }
  }

  /** Every window left the probe: anything else is a bug of this test, not of the library. */
  private static void checkProbeIsBalanced(RedisServer probe, ModelHistory history) {
    try (Jedis jedis = probe.admin()) {
      Map<String, String> left = new TreeMap<>();
      for (String key : jedis.keys("probe*")) {
        String value = key.startsWith("probe-in:") ? jedis.smembers(key).toString()
            : jedis.get(key);
        if (!value.equals("0") && !value.equals("[]")) {
          left.put(key, value);
        }
      }
      if (!left.isEmpty()) {
        history.violation("probe", "", "probe not balanced at the end: " + left);
      }
    }
  }

  private static long seed() {
    String value = System.getProperty(SEED_PROPERTY, "").trim();
    return value.isEmpty() ? new SecureRandom().nextLong() : Long.parseLong(value);
  }

  private static Duration runDuration() {
    String value = System.getProperty(SOAK_PROPERTY, "").trim();
    return value.isEmpty() ? Duration.ofSeconds(CI_RUN_SECONDS) : parseDuration(value);
  }

  /** {@code 500ms}, {@code 90s}, {@code 10m}, {@code 1h}, or ISO-8601 ({@code PT10M}). */
  static Duration parseDuration(String text) {
    Matcher m = Pattern.compile("(\\d+)(ms|s|m|h)").matcher(text.toLowerCase(Locale.ROOT));
    if (m.matches()) {
      long n = Long.parseLong(m.group(1));
      return switch (m.group(2)) {
        case "ms" -> Duration.ofMillis(n);
        case "s" -> Duration.ofSeconds(n);
        case "m" -> Duration.ofMinutes(n);
        default -> Duration.ofHours(n);
      };
    }
    try {
      return Duration.parse(text);
    } catch (RuntimeException e) {
      throw new IllegalArgumentException("-D" + SOAK_PROPERTY + "=" + text
          + " is not a duration (e.g. 10m, 90s, PT1H)", e);
    }
  }

  static String table(Map<String, String> figures) {
    StringBuilder s = new StringBuilder("| figure | value |\n|---|---|\n");
    figures.forEach((k, v) -> s.append("| ").append(k).append(" | ").append(v).append(" |\n"));
    return s.toString();
  }

  private static String report(long seed, List<ModelJudge.Violation> violations, int limit) {
    StringBuilder s = new StringBuilder();
    Map<String, Long> byCheck = violations.stream().collect(Collectors.groupingBy(
        ModelJudge.Violation::check, TreeMap::new, Collectors.counting()));
    s.append("Lock model violated, seed ").append(seed).append(" (replay: -D")
        .append(SEED_PROPERTY).append('=').append(seed).append("): ").append(violations.size())
        .append(" violations ").append(byCheck).append('\n');
    int shown = 0;
    Set<String> checksShown = new HashSet<>();
    // First one of each check, then the rest in time order, up to the limit.
    List<ModelJudge.Violation> ordered = new ArrayList<>();
    for (ModelJudge.Violation v : violations) {
      if (checksShown.add(v.check())) {
        ordered.add(v);
      }
    }
    Set<ModelJudge.Violation> first = new HashSet<>(ordered);
    violations.stream().filter(v -> !first.contains(v)).forEach(ordered::add);
    for (ModelJudge.Violation v : ordered) {
      if (shown++ >= limit) {
        s.append("... ").append(violations.size() - limit).append(" more\n");
        break;
      }
      s.append("\n[").append(v.check()).append("] ").append(ModelEvent.time(v.at())).append(' ')
          .append(v.summary()).append('\n');
      v.evidence().stream().distinct().limit(limit == Integer.MAX_VALUE ? 100 : 8)
          .forEach(e -> s.append("    ").append(e.describe()).append('\n'));
    }
    return s.toString();
  }

  /** The worker JVM, seen from the test: its protocol and its life. */
  static final class Worker implements AutoCloseable {
    private final Process process;
    private final Writer commands;
    private final CountDownLatch ready = new CountDownLatch(1);
    private final CountDownLatch idle = new CountDownLatch(1);
    private final CountDownLatch done = new CountDownLatch(1);
    private final ModelHistory history;
    private final String proc;

    private Worker(Process process, ModelHistory history, String proc) {
      this.process = process;
      this.history = history;
      this.proc = proc;
      this.commands = new OutputStreamWriter(process.getOutputStream(), StandardCharsets.UTF_8);
      Thread reader = new Thread(this::read, "model-worker-reader");
      reader.setDaemon(true);
      reader.start();
    }

    static Worker start(ModelSettings settings, String proc, int proxyPort, ModelHistory history,
        long seed) throws IOException {
      List<String> command = new ArrayList<>();
      command.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
      command.addAll(List.of("-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"));
      String logging = System.getProperty("java.util.logging.config.file");
      if (logging != null) {
        command.add("-Djava.util.logging.config.file=" + logging);
      }
      command.addAll(List.of("-cp", System.getProperty("java.class.path"),
          ModelWorker.class.getName()));
      command.addAll(settings.toArgs());
      command.add("proc=" + proc);
      command.add("proxies=" + proxyPort);
      Path log = OUT.resolve("worker-" + seed + ".log");
      Process process = new ProcessBuilder(command)
          .redirectError(ProcessBuilder.Redirect.to(log.toFile()))
          .start();
      return new Worker(process, history, proc);
    }

    private void read() {
      try (BufferedReader in = new BufferedReader(
          new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8))) {
        String line;
        while ((line = in.readLine()) != null) {
          if (line.startsWith("E\t")) {
            history.add(ModelEvent.parse(line.substring(2)));
          } else if (line.equals("READY")) {
            ready.countDown();
          } else if (line.equals("IDLE")) {
            idle.countDown();
          } else if (line.equals("DONE")) {
            done.countDown();
          }
        }
      } catch (IOException | RuntimeException e) {
        history.violation("worker", proc, "cannot read the worker: " + e);
      } finally {
        ready.countDown();
        idle.countDown();
        done.countDown();
      }
    }

    void awaitReady() throws InterruptedException {
      if (!ready.await(60, TimeUnit.SECONDS) || !process.isAlive()) {
        throw new IllegalStateException("the worker JVM did not start (see its log in " + OUT
            + ")");
      }
    }

    /** Sleeps for {@code run}, recording a violation if the worker dies meanwhile. */
    void sleepWhileAlive(Duration run) throws InterruptedException {
      if (process.waitFor(run.toMillis(), TimeUnit.MILLISECONDS)) {
        history.violation("worker", proc, "the worker JVM exited during the run with status "
            + process.exitValue());
      }
    }

    void stop() {
      send("stop");
    }

    void awaitIdle() throws InterruptedException {
      long seconds = ModelWorker.ACTORS_TIMEOUT.toSeconds()
          + ModelWorker.CHANNELS_TIMEOUT.toSeconds() + 15;
      if (!idle.await(seconds, TimeUnit.SECONDS)) {
        history.violation("liveness", proc, "the worker did not become idle within " + seconds
            + " s of the stop");
      }
    }

    void exit() throws InterruptedException {
      send("exit");
      if (!done.await(20, TimeUnit.SECONDS) || !process.waitFor(10, TimeUnit.SECONDS)) {
        history.violation("worker", proc, "the worker did not exit when told to");
      }
    }

    private void send(String command) {
      try {
        commands.write(command + "\n");
        commands.flush();
      } catch (IOException e) {
        if (process.isAlive()) {
          throw new UncheckedIOException(e);
        }
      }
    }

    /** Kills the worker if it is still running. */
    @Override
    public void close() throws InterruptedException {
      if (process.isAlive()) {
        process.destroyForcibly();
        process.waitFor(10, TimeUnit.SECONDS);
      }
    }
  }
}

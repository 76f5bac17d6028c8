package dev.holdfast.engine;

import static org.junit.jupiter.api.Assertions.fail;

import dev.holdfast.LockClientConfig;
import dev.holdfast.testing.FaultProxy;
import dev.holdfast.testing.RedisClusterSetup;
import dev.holdfast.testing.RedisSentinelSetup;
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
import java.util.LinkedHashMap;
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
 * Randomized, fault-injecting, model-checked test of the lock family (issues 7 and 15): several
 * clients — two in this JVM, one in a separate {@link ModelWorker} JVM — with three actor threads
 * each run random operations (lock, lock(lease), tryLock, tryLock(wait[, lease]),
 * lockInterruptibly with and without an interrupt, re-entry, unlock, {@code unlockAfter}
 * (holdAtLeast), forceUnlock, getHoldCount, client close and re-creation) on every kind of lock
 * ({@link ModelLocks}): exclusive, fair, fenced, both sides of a read-write lock (with the
 * write-then-read downgrade) and a multi-lock over two names (whose failed unlock is retried
 * directly, after taking a member alone, or by re-acquiring the multi-lock, which finishes it
 * first). A third of new acquisitions go for
 * two hot exclusive names that share one unlock channel ({@code m0} and <code>{m0}</code>), so
 * that threads of one client wait for each other and the lock is handed off locally (TRANSFER),
 * and a handoff must pick a waiter of the lock released, not of its channel. Every call, hold, probe window and {@code LockLost} is recorded,
 * and {@link ModelJudge} checks the history.
 *
 * <p>One test method per topology, each runnable alone
 * ({@code -Dtest='LockModelTest#cluster*'}):
 * <ul>
 *   <li><b>standalone</b> ({@link #randomOperationsUnderFaults_matchTheModel}): each client
 *       talks to the server through its own {@link FaultProxy}; a seeded {@link ModelFaults}
 *       schedule drops replies, adds latency, black-holes and resets connections, and kills the
 *       server with SIGKILL (it runs with {@code appendfsync always}, so nothing acknowledged is
 *       lost) and restarts it, or makes it refuse every write (out of memory) a while.</li>
 *   <li><b>cluster</b> ({@link #cluster_liveSlotMigrations_matchTheModel}): three masters without
 *       replicas; {@link ModelMigrations} moves the locks' slots between masters while the actors
 *       run ({@code SETSLOT MIGRATING/IMPORTING}, {@code MIGRATE}, {@code SETSLOT NODE}), with
 *       the slot left split for a while (ASK), then moved (MOVED).</li>
 *   <li><b>replica</b> ({@link #replicaAuto_restartsAndFailover_matchTheModel}): a master and a
 *       replica under three sentinels, clients with {@code sync-replicas=auto}; {@link
 *       ModelFailovers} restarts the replica (full resync with the default 5 s sync delay), then
 *       kills the master for a Sentinel failover.</li>
 * </ul>
 *
 * <p>Guarantees checked, in every topology (see {@link ModelJudge} for the rules): exclusion
 * (judged by a probe on a separate, never faulted Redis, not by the library's answers; readers
 * of a read-write lock may share it, nobody shares it with a writer), unless the older holder's
 * loss was reported before the newer acquisition returned or a forceUnlock may have run; fencing
 * tokens unique and increasing in real-time order per lock across all clients, and stable
 * across re-entries; no acquisition during the time an {@code unlockAfter} keeps a lock held;
 * hold counts in quiet periods; loss reports (one per hold, before the thread learns of it any
 * other way); calls on lost holds refused; time bounds; no unexpected exception; every hold
 * ended; nothing left behind in Redis or in the clients; and at least one local handoff.
 * The exclusion and fencing checks hold across the replica topology's failover because every
 * grant is acknowledged by the replica ({@code sync-replicas=auto}): the contract says such a
 * grant survives the promotion of that replica, so a second holder after the failover, without
 * a loss reported to the first, is a violation there too. (With {@code sync-replicas=none} two
 * holders may legitimately coexist after a failover; that configuration is not run here.) The
 * cluster runs have no replicas and no process faults: a migration must lose no hold at all.
 *
 * <p>Properties:
 * <ul>
 *   <li>{@code -Dholdfast.model.seed=N} replays seed N: the fault schedule, the settings (timeout
 *       300-500 ms, watchdog 1.5-3 s) and every actor's sequence of random choices. Threads make
 *       an exact replay impossible (which choices are possible depends on who holds what when),
 *       so a replay is alike, not identical. Without it, a fresh seed is drawn and printed.</li>
 *   <li>{@code -Dholdfast.model.soak=10m} ({@code ms}, {@code s}, {@code m}, {@code h} or ISO-8601)
 *       runs the faulted phase that long instead of {@value #CI_RUN_SECONDS} s, in whichever
 *       topology methods run.</li>
 * </ul>
 * Each method prints its topology and seed first and a table of figures at the end (surefire's
 * {@code target/surefire-reports/dev.holdfast.engine.LockModelTest-output.txt}), and writes
 * {@code target/holdfast-model/}: {@code figures-<topology>-<seed>.md},
 * {@code history-<topology>-<seed>.tsv} (one {@link ModelEvent} per line),
 * {@code report-<topology>-<seed>.txt} on failure and the worker's log.
 */
class LockModelTest {
  static final String SEED_PROPERTY = "holdfast.model.seed";
  static final String SOAK_PROPERTY = "holdfast.model.soak";
  static final int CI_RUN_SECONDS = 40;
  private static final Path OUT = Path.of("target", "holdfast-model");
  private static final Duration ACTORS_TIMEOUT = Duration.ofSeconds(40);
  private static final Duration CLEANUP_TIMEOUT = Duration.ofSeconds(15);
  private static final String MARKER = "holdfast_unlock_marker";
  private static final String FENCE_PREFIX = "holdfast_fence:";
  /** The sentinels' own channels on the master they watch. */
  private static final String SENTINEL_CHANNELS = "__sentinel__:";
  /** Violations shown in full in the assertion message; the report file has all of them. */
  private static final int SHOWN = 12;

  /** The standalone topology: one server behind three fault proxies, killed and restarted. */
  @Test
  void randomOperationsUnderFaults_matchTheModel() throws Exception {
    run("standalone", CI_RUN_SECONDS, (seed, run) -> new Standalone());
  }

  /** Three masters, no replicas, with live slot migrations of the locks' slots. */
  @Test
  void cluster_liveSlotMigrations_matchTheModel() throws Exception {
    run("cluster", CI_RUN_SECONDS, (seed, run) -> new Cluster());
  }

  /**
   * A master and one replica under three sentinels, clients with {@code sync-replicas=auto}:
   * replica restarts (full resync with the default 5 s sync delay), then a failover.
   */
  @Test
  void replicaAuto_restartsAndFailover_matchTheModel() throws Exception {
    run("replica", CI_RUN_SECONDS, (seed, run) -> new Replicated());
  }

  /** Starts a topology for a run. */
  private interface TopologyFactory {
    Topology start(long seed, Duration run) throws Exception;
  }

  /**
   * Where the clients' locks live and what disturbs them: the client properties of each of the
   * three client positions (two in this JVM, one in the worker), the fault driver, and the
   * servers whose keys and channels must be clean at the end.
   */
  private abstract static class Topology implements AutoCloseable {
    abstract List<Map<String, String>> clients(ModelSettings settings);

    abstract ModelFaultDriver faults(long seed, Duration run, ModelHistory history);

    abstract List<RedisServer> lockServers();

    /** The run's settings in this topology. */
    ModelSettings settings(ModelSettings settings) {
      return settings;
    }

    /** Findings of the topology itself, after the run. */
    void check(ModelHistory history) {
    }

    long connections() {
      return 0;
    }

    static Map<String, String> common(ModelSettings settings) {
      Map<String, String> p = new LinkedHashMap<>();
      p.put(LockClientConfig.TIMEOUT, settings.timeoutMillis() + "ms");
      p.put(LockClientConfig.WATCHDOG_TIMEOUT, settings.watchdogMillis() + "ms");
      return p;
    }
  }

  private static final class Standalone extends Topology {
    private final RedisServer redis =
        RedisServer.start("--appendonly", "yes", "--appendfsync", "always");
    private final List<FaultProxy> proxies = new ArrayList<>();

    Standalone() throws IOException {
      for (int i = 0; i < 3; i++) {
        proxies.add(new FaultProxy(redis.port()));
      }
    }

    @Override
    List<Map<String, String>> clients(ModelSettings settings) {
      return proxies.stream().map(p -> settings.clientProperties(p.port())).toList();
    }

    @Override
    ModelFaultDriver faults(long seed, Duration run, ModelHistory history) {
      return new ModelFaults(ModelFaults.schedule(seed, run.toMillis(), proxies.size(),
          ModelSettings.forSeed(seed, 0).watchdogMillis()), proxies, redis, history);
    }

    @Override
    List<RedisServer> lockServers() {
      return List.of(redis);
    }

    @Override
    void check(ModelHistory history) {
      for (int i = 0; i < proxies.size(); i++) {
        FaultProxy proxy = proxies.get(i);
        if (proxy.refusedConnections() > 0) {
          history.violation("harness", "", "proxy" + i + " refused "
              + proxy.refusedConnections() + " connections over its limit");
        }
      }
    }

    @Override
    long connections() {
      return proxies.stream().mapToLong(FaultProxy::acceptedConnections).sum();
    }

    @Override
    public void close() {
      proxies.forEach(FaultProxy::close);
      redis.close();
    }
  }

  private static final class Cluster extends Topology {
    private final RedisClusterSetup cluster = RedisClusterSetup.start(3, 0);

    @Override
    List<Map<String, String>> clients(ModelSettings settings) {
      Map<String, String> p = common(settings);
      p.put(LockClientConfig.MODE, "cluster");
      p.put(LockClientConfig.NODES, cluster.seedNodes());
      return List.of(p, p, p);
    }

    @Override
    ModelFaultDriver faults(long seed, Duration run, ModelHistory history) {
      return new ModelMigrations(cluster, seed, run.toMillis(), history);
    }

    @Override
    List<RedisServer> lockServers() {
      return cluster.servers();
    }

    @Override
    public void close() {
      cluster.close();
    }
  }

  private static final class Replicated extends Topology {
    /** The default {@code holdfast.redis.sync-timeout}, set explicitly for the time bounds. */
    private static final int SYNC_TIMEOUT_MILLIS = 1_000;

    private final RedisSentinelSetup sentinels = RedisSentinelSetup.start("model");

    Replicated() {
      ModelFailovers.defaultSyncDelay(List.of(sentinels.master(), sentinels.replica()));
    }

    @Override
    ModelSettings settings(ModelSettings settings) {
      return settings.withSyncTimeout(SYNC_TIMEOUT_MILLIS);
    }

    @Override
    List<Map<String, String>> clients(ModelSettings settings) {
      Map<String, String> p = common(settings);
      p.put(LockClientConfig.MODE, "sentinel");
      p.put(LockClientConfig.NODES, sentinels.sentinelNodes());
      p.put(LockClientConfig.SENTINEL_MASTER, sentinels.masterName());
      p.put(LockClientConfig.SYNC_REPLICAS, "auto");
      p.put(LockClientConfig.SYNC_TIMEOUT, settings.syncTimeoutMillis() + "ms");
      return List.of(p, p, p);
    }

    @Override
    ModelFaultDriver faults(long seed, Duration run, ModelHistory history) {
      return new ModelFailovers(sentinels, seed, run.toMillis(), history);
    }

    @Override
    List<RedisServer> lockServers() {
      return List.of(sentinels.master());
    }

    @Override
    public void close() {
      sentinels.close();
    }
  }

  private void run(String topologyName, int ciSeconds, TopologyFactory factory)
      throws Exception {
    long seed = seed();
    Duration run = runDuration(ciSeconds);
    System.out.println("LockModelTest " + topologyName + " seed " + seed + " (replay: -D"
        + SEED_PROPERTY + "=" + seed + "), faulted run " + run.toSeconds() + " s");
    Files.createDirectories(OUT);
    String tag = topologyName + "-" + seed;
    List<ModelEvent> events;
    ModelSettings settings;
    Map<String, Integer> injected;
    long runMicros;
    long connections;
    try (Topology topology = factory.start(seed, run);
        RedisServer probe = RedisServer.start()) {
      settings = topology.settings(ModelSettings.forSeed(seed, probe.port()));
      System.out.println("settings: " + settings);
      ModelHistory history = new ModelHistory("p0", null);
      List<Map<String, String>> clients = topology.clients(settings);
      try (Worker worker = Worker.start(settings, "p1", clients.subList(2, 3), history, tag);
          ModelProcess local = new ModelProcess(settings, clients.subList(0, 2), history)) {
        worker.awaitReady();
        local.start();
        ModelFaultDriver faults = topology.faults(seed, run, history);
        long runStart = ModelEvent.now();
        faults.start();
        worker.sleepWhileAlive(run);
        faults.stopAndHeal();
        runMicros = ModelEvent.now() - runStart;
        injected = faults.injectedCounts();
        local.stop();
        worker.stop();
        if (local.awaitActors(ACTORS_TIMEOUT)) {
          local.awaitNoWaitedChannels(Duration.ofSeconds(10));
        }
        worker.awaitIdle();
        checkServerIsClean(topology.lockServers(), history);
        worker.exit();
      }
      checkProbeIsBalanced(probe, history);
      topology.check(history);
      connections = topology.connections();
      events = history.snapshot();
    }
    ModelJudge judge = new ModelJudge(settings, events);
    List<ModelJudge.Violation> violations = judge.judge();
    if (judge.handoffs() == 0) {
      // Threads of one client wait for the hot name; a run without a handoff proves nothing
      // about the handoff path.
      violations.add(new ModelJudge.Violation("handoff", runMicros, "no local handoff "
          + "(TRANSFER) in the whole run although threads of one client compete for '"
          + ModelLocks.HOT + "'", List.of()));
    }
    Map<String, String> figures = judge.figures(runMicros, injected, connections);
    String table = table(figures);
    System.out.println(table);
    Files.writeString(OUT.resolve("figures-" + tag + ".md"), table, StandardCharsets.UTF_8);
    Path historyFile = OUT.resolve("history-" + tag + ".tsv");
    Files.write(historyFile, events.stream().map(ModelEvent::toLine).toList(),
        StandardCharsets.UTF_8);
    if (!violations.isEmpty()) {
      Path reportFile = OUT.resolve("report-" + tag + ".txt");
      Files.writeString(reportFile, report(seed, violations, Integer.MAX_VALUE),
          StandardCharsets.UTF_8);
      String shown = report(seed, violations, SHOWN);
      System.out.println(shown);
      fail(shown + "\nfull report: " + reportFile.toAbsolutePath() + "\nhistory: "
          + historyFile.toAbsolutePath());
    }
  }

  /**
   * After every actor ended: no lock key left on any of {@code servers} (release markers and
   * fencing-token keys excepted: they expire on their own, so they must have a TTL), no channel
   * subscribed.
   */
  /**
   * Whether {@code key} is a fair lock's queue or waiter scores holding only waiters whose
   * deadline (their score, by the server's clock) has passed.
   */
  private static boolean onlyDeadFairWaiters(Jedis jedis, String key) {
    String base;
    if (key.startsWith(FairKind.QUEUE_PREFIX)) {
      base = key.substring(FairKind.QUEUE_PREFIX.length());
    } else if (key.startsWith(FairKind.TIMEOUT_PREFIX)) {
      base = key.substring(FairKind.TIMEOUT_PREFIX.length());
    } else {
      return false;
    }
    List<String> time = jedis.time();
    long nowMillis = Long.parseLong(time.get(0)) * 1_000 + Long.parseLong(time.get(1)) / 1_000;
    String scores = FairKind.TIMEOUT_PREFIX + base;
    return jedis.zcount(scores, Double.NEGATIVE_INFINITY, Double.POSITIVE_INFINITY)
        == jedis.zcount(scores, Double.NEGATIVE_INFINITY, nowMillis)
        && jedis.lrange(FairKind.QUEUE_PREFIX + base, 0, -1).stream()
            .allMatch(w -> jedis.zscore(scores, w) != null);
  }

  private static void checkServerIsClean(List<RedisServer> servers, ModelHistory history)
      throws InterruptedException {
    long deadline = System.nanoTime() + CLEANUP_TIMEOUT.toNanos();
    while (true) {
      List<String> described = new ArrayList<>();
      List<String> eternal = new ArrayList<>();
      for (RedisServer server : servers) {
        try (Jedis jedis = server.admin()) {
          for (String key : jedis.keys("*")) {
            if (key.contains(MARKER) || key.startsWith(FENCE_PREFIX)) {
              if (jedis.pttl(key) == -1) { // -2: expired meanwhile
                eternal.add(key);
              }
            } else if (onlyDeadFairWaiters(jedis, key)) {
              // A waiter whose leave failed (a failover) stays until the next fair script on
              // that lock drops it, its deadline passed (FairKind): garbage, not a holder.
              continue;
            } else {
              described.add(describeKey(jedis, key));
            }
          }
        }
      }
      if (described.isEmpty() || System.nanoTime() > deadline) {
        if (!described.isEmpty()) {
          history.violation("cleanup", "", "lock keys left " + CLEANUP_TIMEOUT.toSeconds()
              + " s after every actor ended: " + described);
        }
        if (!eternal.isEmpty()) {
          history.violation("cleanup", "", "markers or token keys without expiry: " + eternal);
        }
        break;
      }
      Thread.sleep(100);
    }
    while (true) {
      List<String> channels = new ArrayList<>();
      for (RedisServer server : servers) {
        try (Jedis jedis = server.admin()) {
          channels.addAll(jedis.pubsubChannels());
          jedis.pubsubShardChannels().forEach(c -> channels.add("shard:" + c));
        }
      }
      channels.removeIf(c -> c.startsWith(SENTINEL_CHANNELS));
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

  private static String describeKey(Jedis jedis, String key) {
    String type = jedis.type(key);
    Object value = switch (type) {
      case "hash" -> jedis.hgetAll(key);
      case "list" -> jedis.lrange(key, 0, -1);
      case "zset" -> jedis.zrangeWithScores(key, 0, -1);
      case "string" -> jedis.get(key);
      default -> type;
    };
    return key + " " + value + " pttl " + jedis.pttl(key);
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

  private static Duration runDuration(int ciSeconds) {
    String value = System.getProperty(SOAK_PROPERTY, "").trim();
    return value.isEmpty() ? Duration.ofSeconds(ciSeconds) : parseDuration(value);
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

    static Worker start(ModelSettings settings, String proc, List<Map<String, String>> clients,
        ModelHistory history, String tag) throws IOException {
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
      command.addAll(ModelWorker.clientArgs(clients));
      Path log = OUT.resolve("worker-" + tag + ".log");
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

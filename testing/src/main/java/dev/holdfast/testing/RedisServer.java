package dev.holdfast.testing;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.lang.System.Logger.Level;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Locale;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Function;
import java.util.stream.Stream;

import redis.clients.jedis.DefaultJedisClientConfig;
import redis.clients.jedis.HostAndPort;
import redis.clients.jedis.Jedis;
import redis.clients.jedis.JedisClientConfig;
import redis.clients.jedis.args.ClientPauseMode;

import dev.holdfast.testing.RedisLauncher.RedisProcess;

/**
 * One real {@code redis-server} process (or sentinel) on a free port of 127.0.0.1, owned by the
 * test that started it: a child process or a container, depending on its {@link RedisBackend}
 * (see {@link #backend()}); everything below holds for both.
 *
 * <p>Every server runs with {@code --bind 127.0.0.1 --port <port> --protected-mode no --save ""
 * --appendonly no --dir <fresh temp dir> --repl-diskless-sync-delay 0} followed by the caller's
 * extra arguments, which win over these defaults; unless they turn persistence on (e.g.
 * {@code --appendonly yes --appendfsync always}), nothing is persisted, so a restart starts empty.
 * With {@code --appendonly yes} the temp dir keeps the AOF across {@link #kill()} and
 * {@link #restart()}, so a restart reloads what was written. (The diskless-sync delay is 0
 * so a replica's first sync does not wait the default 5 s.) Its stdout, i.e. the Redis log, goes
 * to {@link #logFile()} in the temp dir; the temp dir is deleted on {@link #close()}.
 *
 * <p>Faults: {@link #kill()} (SIGKILL), {@link #stop()} (SIGTERM), {@link #pause()} /
 * {@link #resume()} (the whole process frozen, connections open), {@link #clientPause(Duration)}
 * (Redis's own {@code CLIENT PAUSE}), {@link #restart()}; connection-level faults with a
 * {@link FaultProxy} in front of {@link #port()}.
 *
 * <p>The process is killed with SIGKILL by {@link #kill()}, {@link #close()}, and, as a safety
 * net, by a JVM shutdown hook for every server not closed by then. A JVM killed with SIGKILL
 * cannot run the hook; such leftovers are recognisable by their {@code holdfast-redis-} dir.
 *
 * <p>Thread-safe: lifecycle methods are serialised on the instance.
 */
public final class RedisServer implements AutoCloseable {

  static final String HOST = "127.0.0.1";

  private static final System.Logger LOG = System.getLogger(RedisServer.class.getName());
  private static final Duration START_TIMEOUT = Duration.ofSeconds(10);
  private static final Duration KILL_TIMEOUT = Duration.ofSeconds(10);
  private static final int START_ATTEMPTS = 5;
  private static final int LOG_TAIL_LINES = 40;
  /** Arguments the harness owns: overriding them would break port handling or loopback-only. */
  private static final Set<String> RESERVED_ARGS =
      Set.of("--port", "--dir", "--bind", "--sentinel");
  /** Arguments whose value is never shown in messages. */
  private static final Set<String> SECRET_ARGS = Set.of("--requirepass", "--masterauth");

  /*
   * What the shutdown hook cleans up. Kept apart from the instances so the hook never waits for
   * an instance lock held by a test thread that is stuck in a start.
   */
  private static final Set<RedisProcess> LIVE_PROCESSES = ConcurrentHashMap.newKeySet();
  private static final Set<Path> OPEN_DIRS = ConcurrentHashMap.newKeySet();

  static {
    Runtime.getRuntime()
        .addShutdownHook(new Thread(RedisServer::closeAllOnExit, "holdfast-redis-reaper"));
  }

  private final RedisLauncher launcher;
  private final List<String> extraArgs;
  private final Path sentinelConfig;
  private final boolean clusterEnabled;
  private final String password;
  private final int port;
  private final Path dir;
  private final Path logFile;

  private RedisProcess process;
  private boolean paused;
  private boolean closed;

  private RedisServer(RedisLauncher launcher, List<String> extraArgs, String sentinelDirectives,
      int port) throws IOException {
    this.launcher = launcher;
    this.extraArgs = List.copyOf(extraArgs);
    this.clusterEnabled = isClusterEnabled(extraArgs);
    this.password = lastValueOf(extraArgs, "--requirepass");
    this.port = port;
    this.dir = Files.createTempDirectory("holdfast-redis-" + port + "-");
    this.logFile = dir.resolve("redis.log");
    OPEN_DIRS.add(dir);
    if (sentinelDirectives != null) {
      // Sentinel rewrites its config file, so it must be a writable file of its own.
      this.sentinelConfig = dir.resolve("sentinel.conf");
      Files.writeString(sentinelConfig, sentinelDirectives + "\n", StandardCharsets.UTF_8);
    } else {
      this.sentinelConfig = null;
    }
  }

  /**
   * Starts a redis-server on a free loopback port and waits until it answers as itself.
   *
   * <p>Waits (at most 10 s per attempt) until {@code INFO server} on the port reports this
   * process's pid, so a foreign server that grabbed the port is never mistaken for ours. If the
   * port was taken between picking and binding, retries on another port (5 attempts).
   *
   * @param extraArgs appended to the command line, e.g. {@code "--cluster-enabled", "yes"};
   *                  relative file names resolve in the server's temp dir. {@code --port},
   *                  {@code --dir}, {@code --bind} and {@code --sentinel} are owned by the
   *                  harness. With {@code --requirepass}, {@link #admin()} authenticates.
   * @return the running server; close it
   * @throws IllegalArgumentException if {@code extraArgs} contains a harness-owned argument
   * @throws IllegalStateException    if the server does not come up; the message carries the
   *                                  tail of its log
   */
  public static RedisServer start(String... extraArgs) {
    return start(RedisBackend.selected(), extraArgs);
  }

  /**
   * Like {@link #start(String...)}, on {@code backend} instead of {@link RedisBackend#selected()};
   * replicas started from it use the same backend.
   */
  public static RedisServer start(RedisBackend backend, String... extraArgs) {
    return startOnFreePort(backend.launcher(), checkedArgs(extraArgs), null);
  }

  /**
   * Like {@link #start(String...)}, with a specific redis-server executable (e.g. an older Redis
   * from {@link RedisBinary#extract(String)}) run as a local process whatever the selected
   * backend; restarts and replicas use it too.
   */
  public static RedisServer start(Path binary, String... extraArgs) {
    return startOnFreePort(new RedisLauncher.Local(binary, RedisBackend.LOCAL),
        checkedArgs(extraArgs), null);
  }

  /** Validates {@link #start} arguments; shared with {@link RedisExtension#standalone}. */
  static List<String> checkedArgs(String... extraArgs) {
    List<String> args = List.of(extraArgs);
    for (String arg : args) {
      if (RESERVED_ARGS.contains(arg.toLowerCase(Locale.ROOT))) {
        throw new IllegalArgumentException("Invalid redis-server argument " + arg
            + ": it is set by the harness");
      }
    }
    return args;
  }

  /**
   * Starts a sentinel ({@code redis-server <dir>/sentinel.conf --sentinel}) whose config file
   * holds {@code directives}.
   */
  static RedisServer startSentinel(RedisLauncher launcher, String directives) {
    return startOnFreePort(launcher, List.of(), directives);
  }

  /** Starts a server with {@code launcher} (a backend, or a specific binary). */
  static RedisServer start(RedisLauncher launcher, String... extraArgs) {
    return startOnFreePort(launcher, checkedArgs(extraArgs), null);
  }

  /** How this server was started; for setups that start more servers the same way. */
  RedisLauncher launcher() {
    return launcher;
  }

  private static RedisServer startOnFreePort(RedisLauncher launcher, List<String> args,
      String sentinelDirectives) {
    PortTakenException lastCollision = null;
    for (int attempt = 0; attempt < START_ATTEMPTS; attempt++) {
      RedisServer server;
      try {
        server = new RedisServer(launcher, args, sentinelDirectives,
            LoopbackPorts.reserve(isClusterEnabled(args)));
      } catch (IOException e) {
        throw new UncheckedIOException("Cannot create a temp dir for redis-server", e);
      }
      try {
        synchronized (server) {
          server.launch();
        }
        return server;
      } catch (PortTakenException e) {
        lastCollision = e;
        server.close();
      } catch (RuntimeException | Error e) {
        server.close();
        throw e;
      }
    }
    throw new IllegalStateException("redis-server could not bind a free port in " + START_ATTEMPTS
        + " attempts", lastCollision);
  }

  /** Where this server runs. */
  public RedisBackend backend() {
    return launcher.backend();
  }

  /** {@value #HOST}: servers listen on loopback only. */
  public String host() {
    return HOST;
  }

  /** The port; stays the same across {@link #restart()}. */
  public int port() {
    return port;
  }

  /** {@code redis://127.0.0.1:<port>}, without credentials even if {@code --requirepass} is set. */
  public String uri() {
    return "redis://" + HOST + ":" + port;
  }

  /** {@code 127.0.0.1:<port>} for Jedis. */
  public HostAndPort hostAndPort() {
    return new HostAndPort(HOST, port);
  }

  /** The file receiving the server's stdout (its log), kept until {@link #close()}. */
  public Path logFile() {
    return logFile;
  }

  /**
   * Whether the process is alive (false after {@link #kill()} or {@link #stop()} until
   * {@link #restart()}; true while paused).
   */
  public synchronized boolean isRunning() {
    return process != null && process.isAlive();
  }

  /** Whether it is frozen by {@link #pause()}. */
  public synchronized boolean isPaused() {
    return paused;
  }

  /**
   * The pid of the running process (it changes on {@link #restart()}).
   *
   * @throws IllegalStateException if the server is not running
   */
  public synchronized long pid() {
    if (!isRunning()) {
      throw new IllegalStateException("redis-server on port " + port + " is not running");
    }
    return process.pid();
  }

  /**
   * Opens a new connection to this server (connect timeout 1 s, read timeout 5 s, RESP2,
   * authenticated if the server was started with {@code --requirepass}). The caller closes it.
   */
  public Jedis admin() {
    return connect(1_000, 5_000);
  }

  /**
   * Runs {@code action} on a fresh {@link #admin()} connection and closes it.
   *
   * @return what {@code action} returns
   */
  public <T> T withAdmin(Function<Jedis, T> action) {
    try (Jedis jedis = admin()) {
      return action.apply(jedis);
    }
  }

  /**
   * Kills the process with SIGKILL and waits until it is gone; its port then refuses
   * connections. No-op if it is not running. The temp dir and port reservation are kept for
   * {@link #restart()}.
   *
   * @throws IllegalStateException if the process survives SIGKILL for 10 s
   */
  public synchronized void kill() {
    if (process == null) {
      return;
    }
    RedisProcess dying = process;
    process = null;
    paused = false;
    if (!killAndWait(dying, KILL_TIMEOUT)) {
      throw new IllegalStateException(this + " pid " + dying.pid() + " survived SIGKILL for "
          + KILL_TIMEOUT.toSeconds() + " s");
    }
  }

  /**
   * Stops the server the polite way (SIGTERM; {@code docker stop} for a container; resumed first
   * if paused): Redis closes its clients and, if persistence is on, writes it out; SIGKILL after
   * 10 s. No-op if it is not running. Like {@link #kill()}, {@link #restart()} starts it again.
   */
  public synchronized void stop() {
    if (process == null) {
      return;
    }
    if (paused) {
      resume();
    }
    RedisProcess stopping = process;
    process = null;
    if (!stopping.terminate(KILL_TIMEOUT)) {
      throw new IllegalStateException(this + " pid " + stopping.pid() + " did not stop");
    }
    LIVE_PROCESSES.remove(stopping);
  }

  /**
   * Freezes the whole server (SIGSTOP for a process, the cgroup freezer — {@code docker pause}
   * — for a container): it keeps its connections and port but answers nothing, like a server in
   * a long GC or a stopped VM; clients time out. No-op if already paused.
   *
   * @throws IllegalStateException if it is not running
   */
  public synchronized void pause() {
    if (paused) {
      return;
    }
    pid(); // throws if not running
    process.pause();
    paused = true;
  }

  /** Undoes {@link #pause()}: queued commands then run. No-op if not paused. */
  public synchronized void resume() {
    if (!paused) {
      return;
    }
    process.resume();
    paused = false;
  }

  /**
   * {@code CLIENT PAUSE <millis> ALL}: Redis itself holds every client's commands (including
   * replication to replicas) for {@code duration}, then runs them. Unlike {@link #pause()} it
   * accepts connections meanwhile. Returns at once.
   *
   * @throws IllegalArgumentException if {@code duration} is not positive
   */
  public void clientPause(Duration duration) {
    if (duration == null || duration.isNegative() || duration.isZero()) {
      throw new IllegalArgumentException("Invalid CLIENT PAUSE duration: " + duration);
    }
    withAdmin(jedis -> jedis.clientPause(duration.toMillis(), ClientPauseMode.ALL));
  }

  /**
   * Kills the server (if running) and starts it again on the same port with the same
   * arguments, waiting until it answers as for {@link #start}. The script cache is lost, and so
   * is the data unless the extra arguments turned persistence on (then the AOF in the temp dir
   * is reloaded, e.g. after a {@link #kill()}); a cluster node keeps its node id and cluster config
   * ({@code nodes.conf} survives), a sentinel keeps its rewritten config.
   *
   * @throws IllegalStateException if closed, or if the server does not come back
   */
  public synchronized void restart() {
    if (closed) {
      throw new IllegalStateException("redis-server on port " + port + " is closed");
    }
    kill();
    launch();
  }

  /**
   * Like {@link #restart()}, but the server comes back without its data files: the RDB and AOF
   * files in its temp dir are deleted while it is down, as on a fresh machine ({@code nodes.conf}
   * and a sentinel's config stay). A replica restarted so cannot resume its replication stream
   * and needs a full sync — after a plain {@link #restart()} a Redis 7 replica usually resumes
   * with a partial one, from the RDB its last full sync left on disk.
   *
   * @throws IllegalStateException if closed, or if the server does not come back
   */
  public synchronized void restartEmpty() {
    if (closed) {
      throw new IllegalStateException("redis-server on port " + port + " is closed");
    }
    kill();
    try (Stream<Path> files = Files.list(dir)) {
      for (Path file : files.toList()) {
        String name = file.getFileName().toString();
        if (name.endsWith(".rdb") || name.endsWith(".aof") || name.equals("appendonlydir")) {
          deleteRecursively(file);
        }
      }
    } catch (IOException e) {
      throw new UncheckedIOException("Cannot delete the data files in " + dir, e);
    }
    launch();
  }

  /**
   * Starts a new server that replicates this one ({@code --replicaof 127.0.0.1 <port>}, plus
   * this server's extra arguments and {@code --masterauth} if it has a password), and waits (at
   * most 10 s) until the replica reports {@code master_link_status:up} and this server counts it
   * {@code online}.
   *
   * @return the replica; the caller closes it
   * @throws IllegalStateException if this is a sentinel or cluster node, or the link does not
   *                               come up
   */
  public RedisServer startReplica() {
    return startReplica(hostAndPort());
  }

  /**
   * Like {@link #startReplica()}, but the replica connects to {@code link} instead of to this
   * server directly: a proxy in front of this server, so that a test can hold replication back
   * while this server still counts the replica as connected. The replica announces its own port,
   * so this server (and sentinels monitoring it) still see it at {@code 127.0.0.1:<its port>}.
   *
   * @param link where the replica connects to reach this server
   * @return the replica; the caller closes it
   * @throws IllegalStateException as for {@link #startReplica()}
   */
  public RedisServer startReplica(HostAndPort link) {
    if (sentinelConfig != null || clusterEnabled) {
      throw new IllegalStateException("startReplica() is for plain servers; cluster replicas use "
          + "CLUSTER REPLICATE (see RedisClusterSetup)");
    }
    List<String> args = new ArrayList<>(extraArgs);
    args.addAll(List.of("--replicaof", link.getHost(), Integer.toString(link.getPort())));
    if (password != null) {
      args.addAll(List.of("--masterauth", password));
    }
    RedisServer replica = startOnFreePort(launcher, args, null);
    try {
      Await.until(START_TIMEOUT,
          () -> "up".equals(replica.info("replication", "master_link_status")),
          replica + " is linked to its master " + this);
      // The replica's link is up before its master counts it online, and once online it may
      // still take a moment to acknowledge: a test that counts on WAIT starts after both.
      Await.until(START_TIMEOUT, () -> countsOnline(replica.port()) && acknowledgesWrites(),
          this + " counts its replica " + replica + " online, acknowledging");
      return replica;
    } catch (RuntimeException | Error e) {
      replica.close();
      throw e;
    }
  }

  /** Whether this server's {@code INFO replication} lists the replica on {@code port} online. */
  private boolean countsOnline(int port) {
    try (Jedis jedis = connect(500, 2_000)) {
      return jedis.info("replication").lines()
          .anyMatch(line -> line.startsWith("slave") && line.contains(",port=" + port + ",")
              && line.contains("state=online"));
    }
  }

  /**
   * Whether a write of this server (a PUBLISH, which replicates without touching the keyspace)
   * is acknowledged by at least one replica within 200 ms.
   */
  private boolean acknowledgesWrites() {
    try (Jedis jedis = connect(500, 2_000)) {
      jedis.publish("holdfast-testing:replica-ready", "");
      return jedis.waitReplicas(1, 200) >= 1;
    }
  }

  /**
   * Kills the server (SIGKILL, waited for), deletes its temp dir and releases its port.
   * Idempotent; never throws for a server that is already gone.
   */
  @Override
  public synchronized void close() {
    if (closed) {
      return;
    }
    closed = true;
    try {
      kill();
    } finally {
      deleteRecursively(dir);
      OPEN_DIRS.remove(dir);
      LoopbackPorts.release(port);
      if (clusterEnabled) {
        LoopbackPorts.release(port + LoopbackPorts.CLUSTER_BUS_OFFSET);
      }
    }
  }

  /**
   * Closes every server, continuing past failures; the first failure is thrown at the end with
   * the others suppressed.
   */
  static void closeAll(List<RedisServer> servers) {
    RuntimeException failure = null;
    for (RedisServer server : servers) {
      try {
        server.close();
      } catch (RuntimeException e) {
        if (failure == null) {
          failure = e;
        } else {
          failure.addSuppressed(e);
        }
      }
    }
    if (failure != null) {
      throw failure;
    }
  }

  @Override
  public String toString() {
    return (sentinelConfig != null ? "redis-sentinel " : "redis-server ") + HOST + ":" + port
        + (launcher.backend() == RedisBackend.TESTCONTAINERS ? " (container)" : "");
  }

  /** Returns the value of {@code name} in INFO output, or {@code null} if absent. */
  static String infoField(String info, String name) {
    String prefix = name + ":";
    for (String line : info.split("\r?\n")) {
      if (line.startsWith(prefix)) {
        return line.substring(prefix.length()).trim();
      }
    }
    return null;
  }

  /**
   * One field of {@code INFO <section>} (e.g. {@code "replication", "role"}), read over a new
   * short-timeout connection; {@code null} if absent.
   */
  String info(String section, String field) {
    try (Jedis jedis = connect(500, 2_000)) {
      return infoField(jedis.info(section), field);
    }
  }

  /** A connection with the given timeouts, for polling. */
  Jedis connect(int connectTimeoutMillis, int readTimeoutMillis) {
    JedisClientConfig config = DefaultJedisClientConfig.builder()
        .connectionTimeoutMillis(connectTimeoutMillis)
        .socketTimeoutMillis(readTimeoutMillis)
        .password(password)
        .autoNegotiateProtocol(false) // no RESP3 negotiation warning in applications' logs
        .build();
    return new Jedis(hostAndPort(), config);
  }

  /** Starts the process and waits until it answers; caller holds the lock. */
  private void launch() {
    List<String> command = new ArrayList<>();
    if (sentinelConfig != null) {
      command.add(sentinelConfig.toString());
      command.add("--sentinel");
    }
    command.addAll(List.of(
        "--bind", HOST,
        "--port", Integer.toString(port),
        "--protected-mode", "no",
        "--save", "",
        "--appendonly", "no",
        "--dir", dir.toString(),
        "--repl-diskless-sync-delay", "0"));
    command.addAll(extraArgs);
    try {
      process = launcher.launch(command, dir, logFile);
    } catch (RuntimeException e) {
      throw new IllegalStateException("Cannot run " + launcher + " " + describe(command), e);
    }
    paused = false;
    LIVE_PROCESSES.add(process);
    LOG.log(Level.DEBUG, "Started {0} (pid {1})", this, String.valueOf(process.pid()));
    RedisProcess starting = process;
    String expectedPid = Long.toString(starting.pid());
    try {
      Await.until(START_TIMEOUT, () -> !starting.isAlive() || answersWithPid(expectedPid),
          this + " answers");
    } catch (AssertionError e) {
      kill();
      throw new IllegalStateException(this + " did not answer within " + START_TIMEOUT.toSeconds()
          + " s; " + describe(command) + "\n" + logTail(), e);
    }
    if (!starting.isAlive()) {
      String status = starting.exitStatus();
      process = null;
      killAndWait(starting, KILL_TIMEOUT); // a container is removed
      String log = logTail();
      if (log.contains("Address already in use")) {
        throw new PortTakenException(this + ": port taken by another process\n" + log);
      }
      throw new IllegalStateException(this + " exited (" + status + "); " + launcher + " "
          + describe(command) + "\n" + log);
    }
  }

  private boolean answersWithPid(String expectedPid) {
    try (Jedis jedis = connect(200, 1_000)) {
      return expectedPid.equals(infoField(jedis.info("server"), "process_id"));
    }
  }

  private String logTail() {
    try {
      List<String> lines = Files.readAllLines(logFile, StandardCharsets.UTF_8);
      List<String> tail = lines.subList(Math.max(0, lines.size() - LOG_TAIL_LINES), lines.size());
      String text = String.join("\n", tail);
      // A config error echoes the offending line, which may hold a password.
      for (int i = 0; i + 1 < extraArgs.size(); i++) {
        if (SECRET_ARGS.contains(extraArgs.get(i).toLowerCase(Locale.ROOT))
            && !extraArgs.get(i + 1).isEmpty()) {
          text = text.replace(extraArgs.get(i + 1), "****");
        }
      }
      return "--- last lines of " + logFile + " ---\n" + text;
    } catch (IOException e) {
      return "(no log: " + e + ")";
    }
  }

  /** The command line for messages, with secret values masked. */
  private static String describe(List<String> command) {
    List<String> shown = new ArrayList<>(command);
    for (int i = 0; i < shown.size(); i++) {
      if (shown.get(i).isEmpty()) {
        shown.set(i, "\"\"");
      } else if (i + 1 < shown.size()
          && SECRET_ARGS.contains(shown.get(i).toLowerCase(Locale.ROOT))) {
        shown.set(i + 1, "****");
        i++;
      }
    }
    return "command: " + String.join(" ", shown);
  }

  private static boolean isClusterEnabled(List<String> args) {
    return "yes".equalsIgnoreCase(lastValueOf(args, "--cluster-enabled"));
  }

  private static String lastValueOf(List<String> args, String name) {
    String value = null;
    for (int i = 0; i + 1 < args.size(); i++) {
      if (args.get(i).equalsIgnoreCase(name)) {
        value = args.get(i + 1);
      }
    }
    return value;
  }

  private static void deleteRecursively(Path root) {
    if (!Files.exists(root)) {
      return;
    }
    try (Stream<Path> paths = Files.walk(root)) {
      paths.sorted(Comparator.reverseOrder()).forEach(path -> path.toFile().delete());
    } catch (IOException e) {
      LOG.log(Level.WARNING, "Cannot delete " + root, e);
    }
  }

  /** SIGKILLs {@code process} and waits for it; true if it is gone. Interrupts are kept. */
  private static boolean killAndWait(RedisProcess process, Duration timeout) {
    boolean gone = process.kill(timeout);
    if (gone) {
      LIVE_PROCESSES.remove(process);
    }
    return gone;
  }

  private static void closeAllOnExit() {
    for (RedisProcess process : LIVE_PROCESSES) {
      try {
        process.kill(Duration.ofSeconds(2));
      } catch (RuntimeException e) {
        // best effort at exit
      }
    }
    for (Path dir : OPEN_DIRS) {
      deleteRecursively(dir);
    }
  }

  /** The chosen port was bound by someone else before the server could; try another. */
  private static final class PortTakenException extends IllegalStateException {
    PortTakenException(String message) {
      super(message);
    }
  }
}

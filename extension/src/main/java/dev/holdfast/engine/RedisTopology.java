package dev.holdfast.engine;

import dev.holdfast.LockClientConfig;
import dev.holdfast.LockException;
import java.net.ConnectException;
import java.net.SocketTimeoutException;
import java.net.URI;
import java.net.UnknownHostException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.NoSuchElementException;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executor;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.function.Function;
import java.util.function.Supplier;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import redis.clients.jedis.CommandArguments;
import redis.clients.jedis.CommandObject;
import redis.clients.jedis.CommandObjects;
import redis.clients.jedis.Connection;
import redis.clients.jedis.ConnectionPoolConfig;
import redis.clients.jedis.DefaultJedisClientConfig;
import redis.clients.jedis.HostAndPort;
import redis.clients.jedis.JedisClientConfig;
import redis.clients.jedis.Pipeline;
import redis.clients.jedis.Protocol;
import redis.clients.jedis.RedisClient;
import redis.clients.jedis.RedisClusterClient;
import redis.clients.jedis.RedisProtocol;
import redis.clients.jedis.RedisSentinelClient;
import redis.clients.jedis.Response;
import redis.clients.jedis.UnifiedJedis;
import redis.clients.jedis.exceptions.JedisAccessControlException;
import redis.clients.jedis.exceptions.JedisAskDataException;
import redis.clients.jedis.exceptions.JedisConnectionException;
import redis.clients.jedis.exceptions.JedisDataException;
import redis.clients.jedis.exceptions.JedisMovedDataException;
import redis.clients.jedis.exceptions.JedisException;
import redis.clients.jedis.exceptions.JedisNoScriptException;
import redis.clients.jedis.exceptions.JedisRedirectionException;
import redis.clients.jedis.providers.ClusterConnectionProvider;
import redis.clients.jedis.providers.PooledConnectionProvider;
import redis.clients.jedis.providers.SentineledConnectionProvider;
import redis.clients.jedis.util.JedisClusterCRC16;

/**
 * How Holdfast talks to one Redis deployment: which Jedis client runs commands, which node a
 * waiter subscribes to for a channel, and whether unlocks use sharded pub/sub.
 *
 * <p>Thread-safe: the Jedis clients pool their connections.
 */
abstract class RedisTopology implements AutoCloseable {
  private static final System.Logger LOG = System.getLogger(RedisTopology.class.getName());

  /** Attempts for one script call; replays are safe because the scripts are idempotent. */
  static final int ATTEMPTS = 3;

  /** Attempts for one read-only query in a cluster, redirections included. */
  private static final int QUERY_ATTEMPTS = 5;

  private static final Pattern VERSION = Pattern.compile("redis_version:(\\d+)\\.");

  /** How long a node's reported replica count is trusted before a script reports it again. */
  static final long REPLICAS_KNOWN_NANOS = Duration.ofSeconds(1).toNanos();
  private static final CommandObjects RESP3_COMMANDS = new CommandObjects(RedisProtocol.RESP3);
  private static final CommandObjects RESP2_COMMANDS = new CommandObjects(RedisProtocol.RESP2);

  final JedisClientConfig clientConfig;
  final Duration timeout;
  private final JedisClientConfig subscriberConfig;
  /** {@link LockClientConfig#syncReplicas()}. */
  private final int syncReplicas;
  private final int syncTimeoutMillis;
  /** {@code auto}: the online replicas of each node, as last reported by a script. */
  private final Map<HostAndPort, KnownReplicas> knownReplicas = new ConcurrentHashMap<>();
  private volatile LockObserver observer = LockObserver.NONE;
  /**
   * The command connections acquisitions may use at once: the pool less {@link #reserve}, taken
   * in arrival order. Acquiring threads are the one population of callers whose number has no
   * bound (every waiting thread of every lock), and so are queries (any number of threads may
   * poll {@code isLocked()}): both take a permit. Releases, handoffs, renewals and settling are
   * bounded by the holds and never wait for a permit, so they always find at least the reserve
   * free of acquisitions and queries and never starve behind a burst of them.
   */
  private final Semaphore acquisitions;
  /** Set by {@link #close()}: a borrower waiting for a connection gives up. */
  volatile boolean closed;

  private RedisTopology(JedisClientConfig clientConfig, LockClientConfig config) {
    this.clientConfig = clientConfig;
    this.timeout = config.timeout();
    this.acquisitions = new Semaphore(config.poolMaxSize() - reserve(config.poolMaxSize()), true);
    this.syncReplicas = config.syncReplicas();
    this.syncTimeoutMillis = Math.toIntExact(config.syncTimeout().toMillis());
    // RESP2 so that pub/sub pushes arrive as plain arrays on the subscriber's own connection.
    this.subscriberConfig = DefaultJedisClientConfig.builder().from(clientConfig)
        .protocol(RedisProtocol.RESP2).build();
  }

  /**
   * Builds the topology. Sentinel and cluster modes discover the master or the slots here, which
   * needs a sentinel or seed that answers. With {@link LockClientConfig#connectAtStartup()},
   * the node that takes the commands (standalone server, master, a cluster primary) must then
   * answer {@code PING} on a new, authenticated connection; otherwise standalone mode does no
   * I/O here.
   *
   * @throws LockException naming the mode, the address (password redacted) and the cause; every
   *     resource taken so far is released
   */
  static RedisTopology connect(LockClientConfig config, String clientName) {
    JedisClientConfig data = clientConfig(config, clientName, true);
    JedisClientConfig sentinels = clientConfig(config, clientName, false);
    SentinelMasterCheck masterCheck = null;
    if (config.mode() == LockClientConfig.Mode.SENTINEL) {
      // Never onto a node the sentinels no longer name master (a former master restarted empty).
      masterCheck = new SentinelMasterCheck(config.sentinelMaster().orElseThrow(),
          config.nodes().stream().map(RedisTopology::hostAndPort).toList(), sentinels);
      data = DefaultJedisClientConfig.builder().from(data).hostAndPortMapper(masterCheck).build();
    }
    ConnectionPoolConfig pool = new ConnectionPoolConfig();
    pool.setMaxTotal(config.poolMaxSize());
    pool.setMaxIdle(config.poolMaxSize());
    pool.setMinIdle(0);
    pool.setBlockWhenExhausted(true);
    // A pool is a queue, not an error: a caller waits for a connection within its own bound
    // (see borrow), in slices of BORROW_SLICE_MILLIS: a waiter in commons-pool is not woken
    // when a connection it was to get fails to be created (an outage), so it asks again after
    // each slice and notices a recovered server; a finite wait also makes commons-pool park rather
    // than spin while other connections are being made. A real outage still fails at once,
    // when the pool cannot create a connection.
    pool.setMaxWait(Duration.ofMillis(Math.min(BORROW_SLICE_MILLIS,
        Math.max(1, config.timeout().toMillis()))));
    RedisTopology topology;
    try {
      topology = switch (config.mode()) {
        case STANDALONE -> new Standalone(config, data, pool);
        case SENTINEL -> new Sentinel(config, data, sentinels, pool, masterCheck);
        case CLUSTER -> new Cluster(config, data, pool);
      };
    } catch (JedisException e) {
      throw cannotConnect(config, e, false);
    }
    if (config.connectAtStartup()) {
      try {
        ping(topology.primary(), data);
      } catch (JedisException e) {
        topology.close();
        throw cannotConnect(config, e, config.mode() != LockClientConfig.Mode.CLUSTER);
      } catch (RuntimeException | Error e) {
        topology.close();
        throw e;
      }
    }
    return topology;
  }

  /**
   * The connections of a pool of {@code poolMaxSize} kept free of acquisitions for releases,
   * handoffs, renewals and settling: a quarter, at least one (none for a pool of one, which
   * then serves everything in turn).
   */
  static int reserve(int poolMaxSize) {
    return poolMaxSize < 2 ? 0 : Math.max(1, poolMaxSize / 4);
  }

  /**
   * Waits for one of the connections acquisitions may use (see {@link #acquisitions}), in
   * arrival order; pair a {@code true} answer with {@link #leaveAcquisition()}.
   *
   * @param waitNanos {@link #UNBOUNDED} to wait as long as it takes, else at most this long
   * @param interruptible whether an interrupt ends the wait (it returns false with the flag
   *     set); else the flag is restored once a permit is had
   * @return whether a permit was had; false if {@code waitNanos} passed first or the thread
   *     was interrupted (interruptible only)
   */
  boolean enterAcquisition(long waitNanos, boolean interruptible) {
    if (acquisitions.tryAcquire()) {
      return true;
    }
    if (waitNanos == UNBOUNDED && !interruptible) {
      acquisitions.acquireUninterruptibly();
      return true;
    }
    long end = System.nanoTime() + Math.max(0, waitNanos);
    boolean interrupted = false;
    try {
      while (true) {
        try {
          if (waitNanos == UNBOUNDED) {
            acquisitions.acquire();
            return true;
          }
          return acquisitions.tryAcquire(end - System.nanoTime(), TimeUnit.NANOSECONDS);
        } catch (InterruptedException e) {
          interrupted = true;
          if (interruptible) {
            return false;
          }
        }
      }
    } finally {
      if (interrupted) {
        Thread.currentThread().interrupt();
      }
    }
  }

  /** The longest one wait of a borrower in the pool, before it asks again (see borrow). */
  static final long BORROW_SLICE_MILLIS = 250;

  /**
   * Whether {@code e} says the pool had no connection free within one slice: "pool exhausted",
   * not "cannot connect" (a failed create throws its own connection failure) nor "pool closed".
   */
  static boolean exhausted(Throwable e) {
    return e instanceof JedisException && e.getCause() instanceof NoSuchElementException n
        && n.getCause() == null;
  }

  /**
   * Takes a connection from the pool, waiting slice after slice while the pool is exhausted,
   * until {@code untilNanos} ({@link #UNBOUNDED}: until the client is closed).
   *
   * @throws JedisException the pool's failure: exhausted past the bound ({@link #exhausted}),
   *     closed, or a connection that could not be made
   */
  final Connection borrow(Supplier<Connection> pool, long untilNanos) {
    return whileExhausted(pool, untilNanos);
  }

  /**
   * Runs {@code attempt} again while it fails because the pool was exhausted for one slice,
   * until {@code untilNanos} ({@link #UNBOUNDED}: until the client is closed). Only for attempts
   * that fail before anything is sent, as a borrow does.
   */
  private <T> T whileExhausted(Supplier<T> attempt, long untilNanos) {
    while (true) {
      try {
        return attempt.get();
      } catch (JedisException e) {
        if (!exhausted(e) || closed
            || (untilNanos != UNBOUNDED && System.nanoTime() - untilNanos > 0)) {
          throw e;
        }
      }
    }
  }

  /**
   * Runs a read-only query (through {@link #commands()}) as acquisitions run: with a permit
   * (waiting at most about one command timeout for it, then failing), re-asking the pool while
   * it is exhausted within that bound. A query's borrow fails before anything is sent, so
   * asking again is safe.
   *
   * @throws JedisException when no permit or connection came free in time, or Redis failed
   */
  final <T> T query(Supplier<T> command) {
    long until = System.nanoTime() + timeout.toNanos();
    if (!enterAcquisition(timeout.toNanos(), false)) {
      throw new JedisException("no connection of the pool came free within "
          + LockClientConfig.TIMEOUT + "=" + timeout.toMillis() + "ms");
    }
    try {
      return whileExhausted(command, until);
    } finally {
      leaveAcquisition();
    }
  }

  /** Returns the permit of {@link #enterAcquisition}. */
  void leaveAcquisition() {
    acquisitions.release();
  }

  /** Acquisitions waiting for a connection now, for tests. */
  int acquisitionsQueued() {
    return acquisitions.getQueueLength();
  }

  /** Connects to {@code node} as the command connections do (auth, database) and sends PING. */
  private static void ping(HostAndPort node, JedisClientConfig config) {
    try (Connection c = new Connection(node, config)) {
      c.executeCommand(new CommandArguments(Protocol.Command.PING));
    }
  }

  /**
   * The failure to reach Redis at start, naming the deployment, the cause, and the keys to check.
   *
   * @param optOutHelps whether {@code connect-at-startup=false} would have let the client start
   */
  static LockException cannotConnect(LockClientConfig config, JedisException e,
      boolean optOutHelps) {
    String keys = switch (config.mode()) {
      case STANDALONE -> LockClientConfig.ADDRESS;
      case SENTINEL -> LockClientConfig.NODES + " and " + LockClientConfig.SENTINEL_MASTER;
      case CLUSTER -> LockClientConfig.NODES;
    };
    return new LockException("Cannot connect to Redis (" + describe(config) + "): "
        + cause(config, e) + ". Check " + keys
        + (optOutHelps ? ", or set " + LockClientConfig.CONNECT_AT_STARTUP
            + "=false to create the client while Redis is down" : ""), e);
  }

  /** What went wrong, in words, from Jedis' exception and its causes. */
  private static String cause(LockClientConfig config, JedisException e) {
    List<Throwable> chain = new ArrayList<>();
    collect(e, chain);
    for (Throwable t : chain) {
      String message = String.valueOf(t.getMessage());
      if (message.startsWith("NOAUTH")) {
        return "the server requires a password (" + message.trim() + "); set "
            + LockClientConfig.PASSWORD + " or put it in the address";
      }
      if (message.startsWith("WRONGPASS") || t instanceof JedisAccessControlException) {
        return "authentication failed (" + message.trim() + "); check "
            + LockClientConfig.USERNAME + " and " + LockClientConfig.PASSWORD
            + " or the user and password in the address";
      }
    }
    for (Throwable t : chain) {
      if (t instanceof SocketTimeoutException) {
        return "no answer within " + LockClientConfig.TIMEOUT + "=" + config.timeout().toMillis()
            + "ms (" + t.getMessage() + ")";
      }
      if (t instanceof ConnectException) {
        return "connection refused (" + t.getMessage() + ")";
      }
      if (t instanceof UnknownHostException) {
        return "unknown host (" + t.getMessage() + ")";
      }
    }
    StringBuilder text = new StringBuilder(String.valueOf(e.getMessage()));
    for (Throwable t = e.getCause(); t != null && t != t.getCause(); t = t.getCause()) {
      text.append(": ").append(t.getMessage());
    }
    return text.toString();
  }

  /** {@code t}, its causes and their suppressed exceptions (Jedis tries every seed/address). */
  private static void collect(Throwable t, List<Throwable> into) {
    if (t == null || into.contains(t) || into.size() > 32) {
      return;
    }
    into.add(t);
    collect(t.getCause(), into);
    for (Throwable s : t.getSuppressed()) {
      collect(s, into);
    }
  }

  /**
   * Connection settings; {@code forData} adds what only data nodes take (credentials, database),
   * not sentinels. Built from scratch each time: Jedis' {@code from(config)} copies a credentials
   * provider that would override credentials set afterwards.
   */
  private static JedisClientConfig clientConfig(LockClientConfig config, String clientName,
      boolean forData) {
    int timeoutMs = Math.toIntExact(config.timeout().toMillis());
    DefaultJedisClientConfig.Builder b = DefaultJedisClientConfig.builder()
        .connectionTimeoutMillis(timeoutMs)
        .socketTimeoutMillis(timeoutMs)
        .clientName(clientName)
        .ssl(config.tls());
    config.sslSocketFactory().ifPresent(b::sslSocketFactory);
    if (forData) {
      // Said, not negotiated: Jedis' clients otherwise open a connection when they are built
      // just to learn it (and ignore its failure), which doubles the time a start takes to
      // report a silent server. Every Redis Holdfast supports (6.2+) speaks RESP3.
      b.protocol(RedisProtocol.RESP3);
      b.database(config.database());
      config.username().ifPresent(b::user);
      config.password().ifPresent(b::password);
    }
    return b.build();
  }

  static String describe(LockClientConfig config) {
    return switch (config.mode()) {
      case STANDALONE -> "standalone " + ConfigValues.redact(config.address());
      case SENTINEL -> "sentinel master '" + config.sentinelMaster().orElseThrow() + "' via "
          + config.nodes().stream().map(ConfigValues::redact).toList();
      case CLUSTER -> "cluster via " + config.nodes().stream().map(ConfigValues::redact).toList();
    };
  }

  @Override
  public abstract void close();

  /** Where failed calls are counted. */
  void observe(LockObserver observer) {
    this.observer = observer;
  }

  /** The node serving {@code key}, for messages and events ({@code host:port} where known). */
  String nodeName(String key) {
    return String.valueOf(renewalNode(key));
  }

  /** {@link LockEngine#ping()}. */
  abstract List<NodeStatus> ping();

  /** Sends {@code PING} on a connection of the pool, retrying once on a broken one. */
  static NodeStatus ping(String role, HostAndPort node, Function<HostAndPort, Connection> pool) {
    JedisException failure = null;
    for (int attempt = 0; attempt < 2; attempt++) {
      long start = System.nanoTime();
      try (Connection c = pool.apply(node)) {
        c.executeCommand(new CommandArguments(Protocol.Command.PING));
        return new NodeStatus(node.toString(), role, true, (System.nanoTime() - start) / 1e6,
            null);
      } catch (JedisConnectionException e) {
        failure = e; // maybe an idle connection that broke: a second one answers for the node
      } catch (JedisException e) {
        failure = e;
        break;
      }
    }
    return new NodeStatus(node.toString(), role, false, 0, explain(failure.getMessage()));
  }

  /** The node that takes commands: the server, the current master, or a cluster primary. */
  abstract HostAndPort primary();

  /**
   * The client that runs read-only queries (HGET, PTTL, EXISTS); never a script, which runs on
   * a connection of its own so that its retries stay sealed.
   */
  abstract UnifiedJedis commands();

  /** A pooled connection to the node that serves {@code key}; close it to return it. */
  abstract Connection connection(String key);

  /** The node a waiter for {@code channel} subscribes to, from cached topology (no I/O). */
  abstract HostAndPort subscriberNode(String channel);

  /** Refreshes cached topology after a subscriber connection failed or was moved. */
  void refreshTopology() {
  }

  /**
   * Whether this deployment redirects commands ({@code MOVED}, {@code ASK}, {@code TRYAGAIN}):
   * a cluster. Elsewhere such a reply is an error like any other.
   */
  boolean followsRedirections() {
    return false;
  }

  /** A pooled connection to {@code node}, the target of a redirection (cluster only). */
  Connection connectionTo(HostAndPort node) {
    throw new UnsupportedOperationException("no redirections in " + getClass().getSimpleName());
  }

  /**
   * After a call got no answer: refreshes cached topology where a node may have gone (a
   * cluster's slot map, as Jedis' own cluster retries do); never throws.
   */
  void refreshAfterFailure() {
  }

  /** Whether unlocks are published with {@code SPUBLISH} and awaited with {@code SSUBSCRIBE}. */
  boolean sharded() {
    return false;
  }

  /**
   * Whether the node that takes the commands can change while connections to the former one stay
   * open (Sentinel: a demoted master keeps its subscribers, and hears no unlock once it stops
   * replicating), so that subscribers must follow {@link #subscriberNode} on their own.
   */
  boolean switchesMaster() {
    return false;
  }

  /**
   * Before an interruptible or timed acquisition borrows: waits, at most {@code waitNanos} and
   * heeding an interrupt, for a check of the master that another thread is renewing and the
   * borrow would wait for ({@link SentinelMasterCheck#awaitAsk}). Nothing to wait for elsewhere.
   *
   * @return false if the thread was interrupted (the flag is set again) or the wait elapsed
   */
  boolean awaitMasterCheck(long waitNanos) {
    return true;
  }

  /**
   * Called every {@link SentinelMasterCheck#REFRESH_TICK_MILLIS} where {@link #switchesMaster}:
   * renews on {@code executor} what the check of the master needs, off the callers' path.
   */
  void refreshMasterCheck(Executor executor) {
  }

  /**
   * Whether {@code channel} (in the slot of {@code key}) has subscribers besides {@code own} of
   * this client's: waiters in other processes, Holdfast's or Redisson's. True when that cannot be
   * known: a Redis 6.2 cluster broadcasts unlock messages, so subscribers may be on any node, and
   * an error answers true too (the caller then errs towards letting others in).
   */
  boolean othersSubscribed(String key, String channel, int own) {
    try (Connection c = borrow(() -> connection(key), System.nanoTime() + timeout.toNanos())) {
      Object reply = c.executeCommand(new CommandArguments(Protocol.Command.PUBSUB)
          .add(sharded() ? "SHARDNUMSUB" : "NUMSUB").add(channel));
      List<?> counts = (List<?>) reply;
      return counts.size() < 2 || ((Number) counts.get(1)).longValue() > own;
    } catch (RuntimeException e) {
      return true;
    }
  }

  final String publishCommand() {
    return sharded() ? "spublish" : "publish";
  }

  /** Holds whose keys share a group may be renewed by one {@link #renewal()} call. */
  Object renewalGroup(String key) {
    return "all";
  }

  /** The script that renews a group of holds. */
  LockScript renewal() {
    return LockScripts.RENEW;
  }

  /** The node serving {@code key}, from cached topology (no I/O): renewals run per node. */
  Object renewalNode(String key) {
    return "all";
  }

  /** Configuration for a subscriber's dedicated connection (RESP2, not from the pool). */
  final JedisClientConfig subscriberConfig() {
    return subscriberConfig;
  }

  /** Runs a call that is never re-sent with different arguments (renewals, force-unlock). */
  final Object eval(LockScript script, List<String> keys, List<String> args) {
    return eval(script, keys, sealed -> args, false);
  }

  /**
   * Runs a script with {@code EVALSHA}, loading it with {@code EVAL} when the server does not
   * know it (restart, failover, {@code SCRIPT FLUSH}). Connection failures are retried, and in
   * a cluster redirections are followed and {@code TRYAGAIN} waited out (see
   * {@link #call}); every attempt after one that got no answer is <em>sealed</em>
   * ({@code args.apply(true)}), so that the script records its outcome and a delayed copy of an
   * earlier attempt cannot apply twice (an attempt refused before it ran leaves no such copy).
   *
   * @param sealFirst whether the first attempt is sealed too (the request was sent before)
   * @throws RedisUnavailableException when no attempt ran: {@link
   *     RedisUnavailableException#mayHaveRun()} says whether one may have (no answer) or none
   *     did (every one redirected or refused until the call's time was up)
   * @throws LockException when Redis answered with an error
   */
  final Object eval(LockScript script, List<String> keys, Function<Boolean, List<String>> args,
      boolean sealFirst) {
    return eval(script, keys, args, sealFirst, ATTEMPTS);
  }

  /** Like {@link #eval(LockScript, List, Function, boolean)}, with at most {@code attempts}. */
  final Object eval(LockScript script, List<String> keys, Function<Boolean, List<String>> args,
      boolean sealFirst, int attempts) {
    return call(script, keys, args, sealFirst, attempts, UNBOUNDED,
        (c, arguments, asking) -> evalOn(c, script, keys, arguments, asking));
  }

  /**
   * No bound on re-sending refused calls besides the call's own time,
   * {@code timeout * (attempts + 1)}.
   */
  static final long UNBOUNDED = Long.MAX_VALUE;

  /** One exchange of a call on a connection: the script, and what goes with it. */
  @FunctionalInterface
  private interface Exchange<T> {
    /**
     * @param asking whether {@code c} is to the target of an {@code ASK} redirection: the
     *     script must then be preceded by {@code ASKING} in the same exchange
     */
    T run(Connection c, List<String> arguments, boolean asking);
  }

  /**
   * Runs {@code exchange} on a connection to the node serving {@code keys.get(0)}, with the
   * retry rules of {@link #eval(LockScript, List, Function, boolean)}:
   * <ul>
   *   <li>no answer (connection failure): the call may have run; re-sent, sealed, at most
   *       {@code attempts} times in all (a cluster refreshes its slot map first);</li>
   *   <li>{@code MOVED}: not run; the slot map is refreshed and the call re-sent to the node
   *       the {@code MOVED} names — the first one of a call at once, whatever time is left — so
   *       that one slot move never fails a call (even one that may not wait refusals out, or
   *       one refused until its time was up while the slot was split), also when the refresh
   *       was answered by a node that has not heard of the move yet;</li>
   *   <li>{@code ASK} (the slot is migrating and a key already left): not run; followed at once
   *       by {@code ASKING} and the script on the target's connection, in one exchange;</li>
   *   <li>{@code TRYAGAIN} (a migration holds some of the call's keys on each side): not run;
   *       re-sent after a short pause, growing up to {@link #NOT_RUN_MAX_PAUSE_MILLIS}.</li>
   * </ul>
   * In a cluster, {@code READONLY} (and a {@code WAIT} refused by a replica) is a refusal too:
   * the node was demoted by a failover the cached slot map does not know of yet (a call that
   * declares no keys is never redirected); nothing was written, the slot map is refreshed and
   * the call re-sent.
   *
   * <p>Refused calls are re-sent until the call's time ({@code timeout * (attempts + 1)}) is
   * up, or its {@code refusalNanos} if that is shorter (the caller's remaining wait; 0 for a
   * call that must not wait refusals out) — a first refusal is always re-sent once, as a stale
   * slot map is the usual cause. The exception then says whether any attempt may have run.
   * Attempts are sealed from the first one after a send that may have run (or from the first,
   * with {@code sealFirst}).
   */
  private <T> T call(LockScript script, List<String> keys, Function<Boolean, List<String>> args,
      boolean sealFirst, int attempts, long refusalNanos, Exchange<T> exchange) {
    JedisException last = null;
    boolean mayHaveRun = false;
    int unanswered = 0;
    int refused = 0;
    // The node the next send goes to instead of the slot map's (a redirection's target), and
    // whether that is an ASK (the script then follows ASKING in the same exchange).
    HostAndPort redirectTo = null;
    boolean asking = false;
    boolean followedMoved = false;
    long start = System.nanoTime();
    long deadline = start + timeout.toNanos() * (attempts + 1);
    long refusedUntil = start + Math.min(refusalNanos, timeout.toNanos() * (attempts + 1));
    // How long a send waits for a connection of an exhausted pool: the caller's wait (for ever
    // when it has no bound, until the client is closed), about one command at least.
    long borrowUntil = refusalNanos == UNBOUNDED ? UNBOUNDED
        : start + Math.max(timeout.toNanos(), Math.min(refusalNanos,
            timeout.toNanos() * (attempts + 1)));
    while (true) {
      // Sealed once an earlier send may have run; a refused send leaves no copy to guard against.
      List<String> arguments = args.apply(sealFirst || mayHaveRun);
      HostAndPort target = redirectTo;
      boolean asked = asking;
      redirectTo = null;
      asking = false;
      long pauseMillis = 0;
      try (Connection c = borrow(() -> target == null ? connection(keys.get(0))
          : connectionTo(target), borrowUntil)) {
        return exchange.run(c, arguments, asked);
      } catch (JedisRedirectionException e) {
        if (!followsRedirections()) {
          throw failed(script, keys, e, mayHaveRun);
        }
        last = e;
        if (e instanceof JedisAskDataException && !asked) {
          redirectTo = e.getTargetNode();
          asking = true;
          continue; // follow it at once: the script did not run
        }
        refreshTopology();
        // A MOVED names the node that serves the slot now: the next send goes there, whatever
        // the refreshed map says — the node that answered the refresh may not have heard of the
        // move yet (the masters learn it one after the other), and a stale map would send the
        // call back to the node that just refused it. The first MOVED of a call is followed at
        // once, whatever time is left: a migration ends with it (the slot has settled), so one
        // slot move never fails a call, not even one refused until the end of its time.
        if (e instanceof JedisMovedDataException) {
          redirectTo = e.getTargetNode();
          if (!followedMoved) {
            followedMoved = true;
            refused++;
            continue;
          }
        }
        pauseMillis = pauseAfterRefusal(++refused, false);
      } catch (SentinelMasterCheck.NotConfirmedException e) {
        last = e; // refused before anything was sent
        if (++unanswered >= attempts) {
          break;
        }
      } catch (JedisConnectionException e) {
        last = e;
        mayHaveRun = true;
        refreshAfterFailure();
        if (++unanswered >= attempts) {
          break;
        }
      } catch (JedisException e) {
        if (tryAgain(e) && followsRedirections()) {
          last = e;
          pauseMillis = pauseAfterRefusal(++refused, true);
        } else if (demoted(e) && followsRedirections()) {
          last = e;
          refreshTopology();
          pauseMillis = pauseAfterRefusal(++refused, false);
        } else if (unanswered(e)) {
          last = e;
          mayHaveRun = true;
          if (++unanswered >= attempts) {
            break;
          }
        } else if (exhausted(e)) {
          last = e; // no connection came free within the caller's bound: this send never went
          break;
        } else {
          throw failed(script, keys, e, mayHaveRun);
        }
      }
      long now = System.nanoTime();
      if (now - deadline > 0 || (refused > 1 && now + millisToNanos(pauseMillis)
          - refusedUntil > 0) || !pause(pauseMillis)) {
        break;
      }
    }
    observer.redisError(script.name(), true);
    throw new RedisUnavailableException((mayHaveRun ? "Redis did not answer the "
        : "Redis did not run the ") + script.name() + " script on key " + keys.get(0) + ": "
        + explain(last.getMessage()), last, mayHaveRun);
  }

  /** First pause before re-sending a call that was refused more than once (not run). */
  static final long NOT_RUN_FIRST_PAUSE_MILLIS = 5;
  /** Longest pause between re-sends of a refused call: a slot migration ends in milliseconds. */
  static final long NOT_RUN_MAX_PAUSE_MILLIS = 100;

  /**
   * The pause before re-sending a call refused for the {@code refused}th time: none after a
   * first {@code MOVED} (the refreshed slot map is likely right), else 5 ms doubling up to the
   * maximum.
   */
  static long pauseAfterRefusal(int refused, boolean tryAgain) {
    int step = tryAgain ? refused - 1 : refused - 2;
    if (step < 0) {
      return 0;
    }
    return Math.min(NOT_RUN_MAX_PAUSE_MILLIS, NOT_RUN_FIRST_PAUSE_MILLIS << Math.min(step, 5));
  }

  /** Sleeps; false if the thread was interrupted (its flag is kept), which ends the call. */
  private static boolean pause(long millis) {
    if (millis <= 0) {
      return true;
    }
    try {
      Thread.sleep(millis);
      return true;
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return false;
    }
  }

  /**
   * A call that ended on an error that is not "no answer". Once an earlier send of the call may
   * have run, the call stays in doubt whatever the later error (a script error on a re-send, a
   * pool closed by {@code close()}): a {@link RedisUnavailableException} that may have run, so
   * that the caller settles it rather than believe it did not run.
   */
  private LockException failed(LockScript script, List<String> keys, JedisException e,
      boolean mayHaveRun) {
    if (mayHaveRun) {
      observer.redisError(script.name(), true);
      return new RedisUnavailableException("Redis did not answer the " + script.name()
          + " script on key " + keys.get(0) + ", then: " + explain(e.getMessage()), e, true);
    }
    observer.redisError(script.name(), false);
    return new LockException("Redis " + script.name() + " script failed on key " + keys.get(0)
        + ": " + explain(e.getMessage()), e);
  }

  /** {@code -TRYAGAIN}: a multi-key call met a slot whose keys are partly migrated; not run. */
  private static boolean tryAgain(JedisException e) {
    return e instanceof JedisDataException && e.getMessage() != null
        && e.getMessage().startsWith("TRYAGAIN");
  }

  /**
   * {@code READONLY}, or {@code WAIT} refused: the node is a replica now (a failover the slot
   * map does not show yet). A replica writes nothing, so whatever the call did there changed
   * nothing.
   */
  static boolean demoted(JedisException e) {
    String message = e.getMessage();
    return e instanceof JedisDataException && message != null
        && (message.startsWith("READONLY") || message.contains("You can't write against a read")
            || message.contains("WAIT cannot be used with replica"));
  }

  private static long millisToNanos(long millis) {
    return millis * 1_000_000L;
  }

  /**
   * Failures that say nothing about whether the command ran (cluster retries exhausted, a node
   * demoted after the script ran).
   */
  private static boolean unanswered(JedisException e) {
    if (e instanceof DemotedAfterScript) {
      return true;
    }
    for (Throwable t = e; t != null; t = t.getCause()) {
      if (t instanceof JedisConnectionException) {
        return true;
      }
    }
    return e.getClass().getSimpleName().startsWith("JedisCluster");
  }

  private static String explain(String message) {
    if (message != null && (message.contains("NOPERM")
        || message.contains("can't publish") || message.contains("No permissions"))) {
      return message + " (the Redis ACL user needs the lock keys and the unlock channels: "
          + "'~<holdfast.key-prefix>*' (or '~*') and '&redisson_lock__channel:*')";
    }
    return message;
  }

  /**
   * A script's reply, and whether the replicas acknowledged what it wrote as
   * {@link LockClientConfig#syncReplicas()} asks.
   *
   * @param replicas the replicas the call waited for (0: none were online, or none asked)
   * @param required how many acknowledgements make the write confirmed: N for a fixed number,
   *     1 for {@code auto} with replicas online, 0 otherwise
   * @param acknowledged how many acknowledged within the sync timeout
   */
  record Replicated(Object reply, long replicas, long required, long acknowledged) {
    static Replicated unreplicated(Object reply) {
      return new Replicated(reply, 0, 0, 0);
    }

    /** Whether the write is as safe as the configuration asks. */
    boolean confirmed() {
      return acknowledged >= required;
    }
  }

  /**
   * Like {@link #eval(LockScript, List, Function, boolean)} for a call that changes a lock's
   * state, followed on the same connection by {@code WAIT} as configured: {@code none} sends no
   * {@code WAIT}; a number {@code N} pipelines {@code WAIT N} with the script (one round trip);
   * {@code auto} sends {@code WAIT <online replicas>} after the script only when some are
   * online (a replica still in its initial sync acknowledges nothing and is not counted) — so
   * with no replica, no round trip is added. The count is what a script reported
   * (INFO replication, run inside the script, no extra round trip) less than a second ago, and is
   * asked again after a {@code WAIT} that fell short.
   *
   * @throws RedisUnavailableException as for {@link #eval(LockScript, List, Function, boolean)}
   * @throws LockException when Redis answered with an error
   */
  final Replicated evalReplicated(LockScript script, List<String> keys,
      Function<Boolean, List<String>> args, boolean sealFirst) {
    return evalReplicated(script, keys, args, sealFirst, UNBOUNDED);
  }

  /**
   * Like {@link #evalReplicated(LockScript, List, Function, boolean)}, re-sending a refused
   * call ({@code TRYAGAIN}, a redirection, a demoted node) for at most {@code refusalNanos}
   * from the call's start, a first refusal being re-sent once in any case. Contract 13: a call
   * waits no longer than its caller's wait, plus about one Redis timeout; a renewal never waits
   * refusals out.
   */
  final Replicated evalReplicated(LockScript script, List<String> keys,
      Function<Boolean, List<String>> args, boolean sealFirst, long refusalNanos) {
    if (syncReplicas == LockClientConfig.SYNC_REPLICAS_NONE) {
      return call(script, keys, args, sealFirst, ATTEMPTS, refusalNanos,
          (c, arguments, asking) -> Replicated.unreplicated(
              evalOn(c, script, keys, arguments, asking)));
    }
    return call(script, keys, args, sealFirst, ATTEMPTS, refusalNanos,
        (c, arguments, asking) -> runReplicated(c, script, keys, arguments, asking));
  }

  private Replicated runReplicated(Connection c, LockScript script, List<String> keys,
      List<String> args, boolean asking) {
    if (syncReplicas > 0) {
      // A fixed number: the WAIT goes in the same round trip as the script.
      Pipeline pipeline = new Pipeline(c);
      if (asking) {
        pipeline.sendCommand(new CommandArguments(Protocol.Command.ASKING));
      }
      Response<Object> reply = pipeline.evalsha(script.sha1(), script.sentKeys(keys),
          script.sentArgs(keys, args));
      Response<Long> waited = pipeline.waitReplicas(syncReplicas, syncTimeoutMillis);
      c.setSoTimeout(c.getSoTimeout() + syncTimeoutMillis);
      try {
        pipeline.sync();
      } finally {
        c.rollbackTimeout();
      }
      Object result;
      try {
        result = reply.get();
      } catch (JedisNoScriptException e) {
        result = send(c, asking, commands(c).eval(script.source(), script.sentKeys(keys),
            script.sentArgs(keys, args)));
        return new Replicated(result, syncReplicas, syncReplicas,
            acknowledgements(() -> waitFor(c, syncReplicas)));
      }
      return new Replicated(result, syncReplicas, syncReplicas, acknowledgements(waited::get));
    }
    // auto: the replicas of this node that can acknowledge, as the script itself reports them
    // when what we know is older than REPLICAS_KNOWN_NANOS (INFO inside a script costs Redis
    // ~8 µs, too much for every call).
    HostAndPort node = c.getHostAndPort();
    KnownReplicas known = knownReplicas.get(node);
    boolean ask = known == null || System.nanoTime() - known.at() > REPLICAS_KNOWN_NANOS;
    List<String> arguments = new ArrayList<>(args.size() + 1);
    arguments.addAll(args);
    arguments.add(ask ? "auto" : "-");
    Object reply = evalOn(c, script, keys, arguments, asking);
    Object result = reply;
    long online;
    if (ask) {
      List<?> withReplicas = (List<?>) reply;
      result = withReplicas.get(0);
      online = ((Number) withReplicas.get(1)).longValue();
      knownReplicas.put(node, new KnownReplicas(online, System.nanoTime()));
    } else {
      online = known.count();
    }
    if (online == 0) {
      return Replicated.unreplicated(result);
    }
    long waitedFor = online;
    long acknowledged = acknowledgements(() -> waitFor(c, waitedFor));
    if (acknowledged < online && !ask) {
      // Counted up to a second ago: one may have gone, or fallen back into a full sync, since.
      // Count again (only on this path); one that cannot acknowledge now is not waited for.
      List<?> now = acknowledgements(() -> (List<?>) evalOn(c, LockScripts.ONLINE_REPLICAS,
          List.of(), List.of("auto"), false), null);
      if (now == null) {
        return new Replicated(result, online, 1, acknowledged);
      }
      online = ((Number) now.get(1)).longValue();
      knownReplicas.put(node, new KnownReplicas(online, System.nanoTime()));
      if (online == 0) {
        return Replicated.unreplicated(result);
      }
    } else if (acknowledged < online) {
      knownReplicas.remove(node); // ask again next time
    }
    return new Replicated(result, online, 1, acknowledged);
  }

  /**
   * The acknowledgements reported by a {@code WAIT} sent after a script whose reply was read,
   * as {@link #acknowledgements(Supplier, Object)} with none acknowledged on an error.
   */
  private static long acknowledgements(Supplier<Long> wait) {
    return acknowledgements(wait, 0L);
  }

  /**
   * What {@code afterScript} returns, a command sent after a script whose reply was read; or
   * {@code whenRefused} if Redis answers it with an error (a node busy with another script, a
   * client unblocked). The script ran, so its call must end as ran but unconfirmed, never as
   * refused: a final release taken as refused would be believed again. Nor when the node
   * refuses it as a replica: see {@link DemotedAfterScript}.
   */
  private static <T> T acknowledgements(Supplier<T> afterScript, T whenRefused) {
    try {
      return afterScript.get();
    } catch (JedisDataException e) {
      if (demoted(e)) {
        throw new DemotedAfterScript(e);
      }
      LOG.log(System.Logger.Level.DEBUG, () -> "Replica acknowledgement not confirmed: "
          + e.getMessage());
      return whenRefused;
    }
  }

  /**
   * The node answered a script, then refused what followed because it is a replica now: it was
   * demoted after the script ran (one that wrote ran on a master: a replica refuses writes), or
   * answered it from a replica's data. Its effect may be kept or lost with the demotion: the
   * call is in doubt, as one whose reply was lost — re-sent sealed, or settled — never refused.
   */
  static final class DemotedAfterScript extends JedisException {
    private static final long serialVersionUID = 1L;

    DemotedAfterScript(JedisDataException refusal) {
      super("the node became a replica after the script ran: " + refusal.getMessage(),
          refusal);
    }
  }

  /**
   * Runs a script on one connection, loading it when the server does not know it; after
   * {@code ASKING} when following an {@code ASK} redirection.
   */
  private static Object evalOn(Connection c, LockScript script, List<String> keys,
      List<String> args, boolean asking) {
    try {
      return send(c, asking, commands(c).evalsha(script.sha1(), script.sentKeys(keys),
          script.sentArgs(keys, args)));
    } catch (JedisNoScriptException e) {
      return send(c, asking, commands(c).eval(script.source(), script.sentKeys(keys),
          script.sentArgs(keys, args)));
    }
  }

  /**
   * Sends one command on {@code c}; with {@code asking}, preceded by {@code ASKING} in the same
   * round trip: the target of an {@code ASK} serves the migrating slot to the next command only.
   */
  private static <T> T send(Connection c, boolean asking, CommandObject<T> command) {
    if (!asking) {
      return c.executeCommand(command);
    }
    Pipeline pipeline = new Pipeline(c);
    pipeline.sendCommand(new CommandArguments(Protocol.Command.ASKING));
    Response<T> reply = pipeline.appendCommand(command);
    pipeline.sync();
    return reply.get();
  }

  /** How many replicas of a node could acknowledge, and when that was learned (nanoTime). */
  private record KnownReplicas(long count, long at) {
  }

  private static CommandObjects commands(Connection c) {
    return c.getRedisProtocol() == RedisProtocol.RESP2 ? RESP2_COMMANDS : RESP3_COMMANDS;
  }

  /** Sends {@code WAIT} on {@code c}: how many replicas acknowledged its writes in time. */
  private long waitFor(Connection c, long replicas) {
    c.setSoTimeout(c.getSoTimeout() + syncTimeoutMillis);
    try {
      Object acknowledged = c.executeCommand(new CommandArguments(Protocol.Command.WAIT)
          .add(replicas).add(syncTimeoutMillis));
      return ((Number) acknowledged).longValue();
    } finally {
      c.rollbackTimeout();
    }
  }

  /** Reads the major version of the server behind {@code node}. */
  static int majorVersion(HostAndPort node, JedisClientConfig config) {
    try (Connection c = new Connection(node, config)) {
      Object info = c.executeCommand(new CommandArguments(Protocol.Command.INFO).add("server"));
      String text = info instanceof byte[] bytes ? new String(bytes, StandardCharsets.UTF_8)
          : String.valueOf(info);
      Matcher m = VERSION.matcher(text);
      return m.find() ? Integer.parseInt(m.group(1)) : 0;
    }
  }

  static HostAndPort hostAndPort(URI uri) {
    return new HostAndPort(uri.getHost(), uri.getPort());
  }

  private static final class Standalone extends RedisTopology {
    private final RedisClient client;
    private final HostAndPort node;

    private final PooledConnectionProvider provider;

    Standalone(LockClientConfig config, JedisClientConfig clientConfig, ConnectionPoolConfig pool) {
      super(clientConfig, config);
      this.node = hostAndPort(config.address());
      this.provider = new PooledConnectionProvider(node, clientConfig, pool);
      this.client = RedisClient.builder().hostAndPort(node).clientConfig(clientConfig)
          .connectionProvider(provider).build();
    }

    @Override
    UnifiedJedis commands() {
      return client;
    }

    @Override
    Connection connection(String key) {
      return provider.getConnection();
    }

    @Override
    HostAndPort primary() {
      return node;
    }

    @Override
    HostAndPort subscriberNode(String channel) {
      return node;
    }

    @Override
    String nodeName(String key) {
      return node.toString();
    }

    @Override
    List<NodeStatus> ping() {
      return List.of(ping("standalone", node, n -> borrow(provider::getConnection,
          System.nanoTime() + timeout.toNanos())));
    }

    @Override
    public void close() {
      closed = true;
      client.close();
    }
  }

  private static final class Sentinel extends RedisTopology {
    private final RedisSentinelClient client;
    private final SentineledConnectionProvider provider;
    private final String masterName;
    private final SentinelMasterCheck masterCheck;

    Sentinel(LockClientConfig config, JedisClientConfig masterConfig,
        JedisClientConfig sentinelConfig, ConnectionPoolConfig pool,
        SentinelMasterCheck masterCheck) {
      super(masterConfig, config);
      this.masterCheck = masterCheck;
      Set<HostAndPort> sentinels = new LinkedHashSet<>();
      config.nodes().forEach(n -> sentinels.add(hostAndPort(n)));
      String master = config.sentinelMaster().orElseThrow();
      this.masterName = master;
      this.provider = new CheckedProvider(master, masterConfig, pool, sentinels, sentinelConfig,
          masterCheck);
      this.client = RedisSentinelClient.builder()
          .masterName(master)
          .sentinels(sentinels)
          .clientConfig(masterConfig)
          .sentinelClientConfig(sentinelConfig)
          .connectionProvider(provider)
          .build();
    }

    @Override
    UnifiedJedis commands() {
      return client;
    }

    @Override
    Connection connection(String key) {
      return provider.getConnection();
    }

    @Override
    HostAndPort primary() {
      return provider.getCurrentMaster();
    }

    @Override
    HostAndPort subscriberNode(String channel) {
      // Jedis follows +switch-master from the sentinels and keeps this current.
      return provider.getCurrentMaster();
    }

    @Override
    boolean switchesMaster() {
      return true;
    }

    @Override
    void refreshMasterCheck(Executor executor) {
      masterCheck.refreshDue(executor);
    }

    @Override
    boolean awaitMasterCheck(long waitNanos) {
      HostAndPort master = provider.getCurrentMaster();
      return master == null || masterCheck.awaitAsk(master, waitNanos);
    }

    @Override
    String nodeName(String key) {
      return String.valueOf(provider.getCurrentMaster());
    }

    @Override
    List<NodeStatus> ping() {
      HostAndPort master = provider.getCurrentMaster();
      if (master == null) {
        return List.of(new NodeStatus("master '" + masterName + "'", "master", false, 0,
            "the sentinels have named no master"));
      }
      return List.of(ping("master", master, n -> borrow(provider::getConnection,
          System.nanoTime() + timeout.toNanos())));
    }

    @Override
    public void close() {
      closed = true;
      masterCheck.close();
      client.close();
    }
  }

  /**
   * Jedis' Sentinel pool with the borrow check of {@link SentinelMasterCheck}: every connection it
   * hands out — to lock scripts, reads ({@code isLocked}, {@code getHoldCount}) and the health
   * ping alike — is refused once a sentinel names another master, since a pooled connection may
   * have been opened while the sentinels still named its node.
   */
  private static final class CheckedProvider extends SentineledConnectionProvider {
    private final SentinelMasterCheck masterCheck;

    CheckedProvider(String masterName, JedisClientConfig masterConfig, ConnectionPoolConfig pool,
        Set<HostAndPort> sentinels, JedisClientConfig sentinelConfig,
        SentinelMasterCheck masterCheck) {
      super(masterName, masterConfig, pool, sentinels, sentinelConfig);
      this.masterCheck = masterCheck;
    }

    @Override
    public Connection getConnection() {
      return checked(super.getConnection());
    }

    @Override
    public Connection getConnection(CommandArguments args) {
      return checked(super.getConnection(args));
    }

    private Connection checked(Connection c) {
      try {
        masterCheck.refuseIfNamedOther(c.getHostAndPort());
      } catch (RuntimeException e) {
        c.setBroken(); // not pooled again
        try {
          c.close();
        } catch (RuntimeException closing) {
          e.addSuppressed(closing); // the refusal is what the caller must see
        }
        throw e;
      }
      return c;
    }
  }

  private static final class Cluster extends RedisTopology {
    private final ClusterConnectionProvider provider;
    private final RedisClusterClient client;
    private final Set<HostAndPort> seeds;
    private final boolean sharded;

    Cluster(LockClientConfig config, JedisClientConfig clientConfig, ConnectionPoolConfig pool) {
      super(clientConfig, config);
      this.seeds = new LinkedHashSet<>();
      config.nodes().forEach(n -> seeds.add(hostAndPort(n)));
      this.provider = new ClusterConnectionProvider(seeds, clientConfig, pool);
      this.client = RedisClusterClient.builder()
          .nodes(seeds)
          .clientConfig(clientConfig)
          .connectionProvider(provider)
          // Only reads (queries) go through this client: Jedis may retry them, follow MOVED
          // (refreshing the slot cache) and ASK (with ASKING). Scripts never do — they run on
          // connections taken from the provider, with our own sealed retries (see call()).
          .maxAttempts(QUERY_ATTEMPTS)
          .maxTotalRetriesDuration(config.timeout().multipliedBy(2))
          .build();
      // Sharded pub/sub (Redis 7+) keeps unlock messages on the key's shard instead of
      // broadcasting them over the cluster bus to every node.
      try {
        this.sharded = majorVersion(primary(), clientConfig) >= 7;
      } catch (RuntimeException e) {
        client.close();
        throw e;
      }
    }

    @Override
    HostAndPort primary() {
      HostAndPort any = provider.getNode(0);
      return any == null ? seeds.iterator().next() : any;
    }

    @Override
    UnifiedJedis commands() {
      return client;
    }

    @Override
    Connection connection(String key) {
      return provider.getConnectionFromSlot(JedisClusterCRC16.getSlot(key));
    }

    @Override
    HostAndPort subscriberNode(String channel) {
      HostAndPort node = provider.getNode(JedisClusterCRC16.getSlot(channel));
      if (node == null) {
        provider.renewSlotCache();
        node = provider.getNode(JedisClusterCRC16.getSlot(channel));
      }
      if (node == null) {
        throw new LockException("No cluster node serves the slot of channel " + channel);
      }
      return node;
    }

    @Override
    void refreshTopology() {
      provider.renewSlotCache();
    }

    @Override
    boolean followsRedirections() {
      return true;
    }

    @Override
    Connection connectionTo(HostAndPort node) {
      return provider.getConnection(node);
    }

    @Override
    void refreshAfterFailure() {
      try {
        provider.renewSlotCache();
      } catch (RuntimeException e) {
        // no node answers: the next attempt fails the same way, and is reported
      }
    }

    /** Every primary of the cached slot map, each once; slots no primary serves are DOWN. */
    @Override
    List<NodeStatus> ping() {
      Set<HostAndPort> primaries = new TreeSet<>(
          Comparator.comparing(HostAndPort::getHost).thenComparingInt(HostAndPort::getPort));
      int unserved = 0;
      for (int slot = 0; slot < Protocol.CLUSTER_HASHSLOTS; slot++) {
        HostAndPort node = provider.getNode(slot);
        if (node == null) {
          unserved++;
        } else {
          primaries.add(node);
        }
      }
      List<NodeStatus> statuses = new ArrayList<>();
      for (HostAndPort node : primaries) {
        statuses.add(ping("primary", node, n -> borrow(() -> provider.getConnection(n),
            System.nanoTime() + timeout.toNanos())));
      }
      if (unserved > 0) {
        statuses.add(new NodeStatus("cluster slots", "primary", false, 0, unserved
            + " of " + Protocol.CLUSTER_HASHSLOTS + " hash slots have no known primary"));
        try {
          provider.renewSlotCache(); // for the next check
        } catch (RuntimeException e) {
          // reported above
        }
      }
      return statuses;
    }

    @Override
    boolean sharded() {
      return sharded;
    }

    @Override
    Object renewalGroup(String key) {
      // Redis 7+ renews a whole node in one call; 6.2 needs one call per slot.
      return sharded ? renewalNode(key) : JedisClusterCRC16.getSlot(key);
    }

    @Override
    LockScript renewal() {
      return sharded ? LockScripts.RENEW_ACROSS_SLOTS : LockScripts.RENEW;
    }

    @Override
    boolean othersSubscribed(String key, String channel, int own) {
      // Redis 6.2 broadcasts unlock messages: their subscribers may be on any node.
      return !sharded || super.othersSubscribed(key, channel, own);
    }

    @Override
    Object renewalNode(String key) {
      HostAndPort node = provider.getNode(JedisClusterCRC16.getSlot(key));
      return node == null ? "unknown" : node;
    }

    @Override
    public void close() {
      closed = true;
      client.close();
    }
  }
}

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
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Function;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import redis.clients.jedis.CommandArguments;
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
import redis.clients.jedis.exceptions.JedisConnectionException;
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

  /** Attempts for one script call; replays are safe because the scripts are idempotent. */
  static final int ATTEMPTS = 3;

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
  /** {@code auto}: the replicas connected to each node, as last reported by a script. */
  private final Map<HostAndPort, KnownReplicas> knownReplicas = new ConcurrentHashMap<>();
  private volatile LockObserver observer = LockObserver.NONE;

  private RedisTopology(JedisClientConfig clientConfig, LockClientConfig config) {
    this.clientConfig = clientConfig;
    this.timeout = config.timeout();
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
    ConnectionPoolConfig pool = new ConnectionPoolConfig();
    pool.setMaxTotal(config.poolMaxSize());
    pool.setMaxIdle(config.poolMaxSize());
    pool.setMinIdle(0);
    pool.setBlockWhenExhausted(true);
    pool.setMaxWait(config.timeout());
    RedisTopology topology;
    try {
      topology = switch (config.mode()) {
        case STANDALONE -> new Standalone(config, data, pool);
        case SENTINEL -> new Sentinel(config, data, sentinels, pool);
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

  /** The client that runs commands (scripts, HGET, PTTL). */
  abstract UnifiedJedis commands();

  /** A pooled connection to the node that serves {@code key}; close it to return it. */
  abstract Connection connection(String key);

  /** The node a waiter for {@code channel} subscribes to, from cached topology (no I/O). */
  abstract HostAndPort subscriberNode(String channel);

  /** Refreshes cached topology after a subscriber connection failed or was moved. */
  void refreshTopology() {
  }

  /** Whether unlocks are published with {@code SPUBLISH} and awaited with {@code SSUBSCRIBE}. */
  boolean sharded() {
    return false;
  }

  /**
   * Whether {@code channel} (in the slot of {@code key}) has subscribers besides {@code own} of
   * this client's: waiters in other processes, Holdfast's or Redisson's. True when that cannot be
   * known: a Redis 6.2 cluster broadcasts unlock messages, so subscribers may be on any node, and
   * an error answers true too (the caller then errs towards letting others in).
   */
  boolean othersSubscribed(String key, String channel, int own) {
    try (Connection c = connection(key)) {
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
   * know it (restart, failover, {@code SCRIPT FLUSH}). Connection failures are retried; every
   * attempt after the first is <em>sealed</em> ({@code args.apply(true)}), so that the script
   * records its outcome and a delayed copy of an earlier attempt cannot apply twice.
   *
   * @param sealFirst whether the first attempt is sealed too (the request was sent before)
   * @throws RedisUnavailableException when no attempt got an answer: the call may have run
   * @throws LockException when Redis answered with an error
   */
  final Object eval(LockScript script, List<String> keys, Function<Boolean, List<String>> args,
      boolean sealFirst) {
    return eval(script, keys, args, sealFirst, ATTEMPTS);
  }

  /** Like {@link #eval(LockScript, List, Function, boolean)}, with at most {@code attempts}. */
  final Object eval(LockScript script, List<String> keys, Function<Boolean, List<String>> args,
      boolean sealFirst, int attempts) {
    JedisException last = null;
    long deadline = System.nanoTime() + timeout.toNanos() * (attempts + 1);
    for (int attempt = 1; attempt <= attempts; attempt++) {
      List<String> arguments = args.apply(sealFirst || attempt > 1);
      try {
        if (script.crossSlot()) {
          try (Connection c = connection(keys.get(0))) {
            return evalOn(c, script, keys, arguments);
          }
        }
        try {
          return commands().evalsha(script.sha1(), keys, arguments);
        } catch (JedisNoScriptException e) {
          return commands().eval(script.source(), keys, arguments);
        }
      } catch (JedisConnectionException e) {
        last = e;
        if (System.nanoTime() - deadline > 0) {
          break;
        }
      } catch (JedisException e) {
        if (unanswered(e)) {
          last = e;
          if (System.nanoTime() - deadline > 0) {
            break;
          }
          continue;
        }
        observer.redisError(script.name(), false);
        throw new LockException("Redis " + script.name() + " script failed on key " + keys.get(0)
            + ": " + explain(e.getMessage()), e);
      }
    }
    observer.redisError(script.name(), true);
    throw new RedisUnavailableException("Redis did not answer the " + script.name()
        + " script on key " + keys.get(0) + ": " + explain(last.getMessage()), last);
  }

  /** Failures that say nothing about whether the command ran (cluster retries exhausted). */
  private static boolean unanswered(JedisException e) {
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
   * @param replicas the replicas the call waited for (0: none were connected, or none asked)
   * @param required how many acknowledgements make the write confirmed: N for a fixed number,
   *     1 for {@code auto} with replicas connected, 0 otherwise
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
   * {@code auto} sends {@code WAIT <connected replicas>} after the script only when some are
   * connected — so with no replica, no round trip is added. The count is what a script reported
   * (INFO replication, run inside the script, no extra round trip) less than a second ago, and is
   * asked again after a {@code WAIT} that fell short.
   *
   * @throws RedisUnavailableException when no attempt got an answer: the call may have run
   * @throws LockException when Redis answered with an error
   */
  final Replicated evalReplicated(LockScript script, List<String> keys,
      Function<Boolean, List<String>> args, boolean sealFirst) {
    if (syncReplicas == LockClientConfig.SYNC_REPLICAS_NONE) {
      return Replicated.unreplicated(eval(script, keys, args, sealFirst));
    }
    JedisException last = null;
    long deadline = System.nanoTime() + timeout.toNanos() * (ATTEMPTS + 1);
    for (int attempt = 1; attempt <= ATTEMPTS; attempt++) {
      List<String> arguments = args.apply(sealFirst || attempt > 1);
      try (Connection c = connection(keys.get(0))) {
        return runReplicated(c, script, keys, arguments);
      } catch (JedisRedirectionException e) {
        last = e; // not run here: the slot moved
        refreshTopology();
      } catch (JedisConnectionException e) {
        last = e;
        if (System.nanoTime() - deadline > 0) {
          break;
        }
      } catch (JedisException e) {
        if (!unanswered(e)) {
          observer.redisError(script.name(), false);
          throw new LockException("Redis " + script.name() + " script failed on key "
              + keys.get(0) + ": " + explain(e.getMessage()), e);
        }
        last = e;
        if (System.nanoTime() - deadline > 0) {
          break;
        }
      }
    }
    observer.redisError(script.name(), true);
    throw new RedisUnavailableException("Redis did not answer the " + script.name()
        + " script on key " + keys.get(0) + ": " + explain(last.getMessage()), last);
  }

  private Replicated runReplicated(Connection c, LockScript script, List<String> keys,
      List<String> args) {
    if (syncReplicas > 0) {
      // A fixed number: the WAIT goes in the same round trip as the script.
      Pipeline pipeline = new Pipeline(c);
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
        result = c.executeCommand(commands(c).eval(script.source(), script.sentKeys(keys),
            script.sentArgs(keys, args)));
        return new Replicated(result, syncReplicas, syncReplicas, waitFor(c, syncReplicas));
      }
      return new Replicated(result, syncReplicas, syncReplicas, waited.get());
    }
    // auto: the replicas connected to this node, as the script itself reports them when what we
    // know is older than REPLICAS_KNOWN_NANOS (INFO inside a script costs Redis ~8 µs, too much
    // for every call).
    HostAndPort node = c.getHostAndPort();
    KnownReplicas known = knownReplicas.get(node);
    boolean ask = known == null || System.nanoTime() - known.at() > REPLICAS_KNOWN_NANOS;
    List<String> arguments = new ArrayList<>(args.size() + 1);
    arguments.addAll(args);
    arguments.add(ask ? "auto" : "-");
    Object reply;
    try {
      reply = c.executeCommand(commands(c).evalsha(script.sha1(), script.sentKeys(keys),
          script.sentArgs(keys, arguments)));
    } catch (JedisNoScriptException e) {
      reply = c.executeCommand(commands(c).eval(script.source(), script.sentKeys(keys),
          script.sentArgs(keys, arguments)));
    }
    Object result = reply;
    long connected;
    if (ask) {
      List<?> withReplicas = (List<?>) reply;
      result = withReplicas.get(0);
      connected = ((Number) withReplicas.get(1)).longValue();
      knownReplicas.put(node, new KnownReplicas(connected, System.nanoTime()));
    } else {
      connected = known.count();
    }
    if (connected == 0) {
      return Replicated.unreplicated(result);
    }
    long acknowledged = waitFor(c, connected);
    if (acknowledged < connected) {
      knownReplicas.remove(node); // one may have gone: ask again next time
    }
    return new Replicated(result, connected, 1, acknowledged);
  }

  /** Runs a script on one connection, loading it when the server does not know it. */
  private static Object evalOn(Connection c, LockScript script, List<String> keys,
      List<String> args) {
    try {
      return c.executeCommand(commands(c).evalsha(script.sha1(), script.sentKeys(keys),
          script.sentArgs(keys, args)));
    } catch (JedisNoScriptException e) {
      return c.executeCommand(commands(c).eval(script.source(), script.sentKeys(keys),
          script.sentArgs(keys, args)));
    }
  }

  /** How many replicas were connected to a node, and when that was learned (nanoTime). */
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
      return List.of(ping("standalone", node, n -> provider.getConnection()));
    }

    @Override
    public void close() {
      client.close();
    }
  }

  private static final class Sentinel extends RedisTopology {
    private final RedisSentinelClient client;
    private final SentineledConnectionProvider provider;
    private final String masterName;

    Sentinel(LockClientConfig config, JedisClientConfig masterConfig,
        JedisClientConfig sentinelConfig, ConnectionPoolConfig pool) {
      super(masterConfig, config);
      Set<HostAndPort> sentinels = new LinkedHashSet<>();
      config.nodes().forEach(n -> sentinels.add(hostAndPort(n)));
      String master = config.sentinelMaster().orElseThrow();
      this.masterName = master;
      this.provider = new SentineledConnectionProvider(master, masterConfig, pool, sentinels,
          sentinelConfig);
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
      return List.of(ping("master", master, n -> provider.getConnection()));
    }

    @Override
    public void close() {
      client.close();
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
          // One attempt per call: our own retries are sealed (see eval), Jedis' would not be.
          // A MOVED or a broken connection still refreshes the slot cache before it throws.
          .maxAttempts(1)
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
        statuses.add(ping("primary", node, provider::getConnection));
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
      client.close();
    }
  }
}

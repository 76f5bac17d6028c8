package dev.holdfast.testing;

import java.util.List;
import java.util.Locale;
import java.util.Map;

import org.junit.jupiter.api.extension.AfterAllCallback;
import org.junit.jupiter.api.extension.AfterEachCallback;
import org.junit.jupiter.api.extension.BeforeAllCallback;
import org.junit.jupiter.api.extension.BeforeEachCallback;
import org.junit.jupiter.api.extension.ExtensionContext;
import org.junit.jupiter.api.extension.ParameterContext;
import org.junit.jupiter.api.extension.ParameterResolver;

import redis.clients.jedis.Jedis;

/**
 * JUnit 5 extension owning one real Redis topology for a test class:
 *
 * <pre>{@code
 * @RegisterExtension
 * static final RedisExtension redis = RedisExtension.standalone();   // or replicated(n), sentinel(), cluster()
 *
 * @BeforeEach
 * void clean() { redis.flushAll(); }
 *
 * @Test
 * void survivesRestart(Map<String, String> config, RedisServer server) {  // injected
 *   ... LockClient.create(config) ...; server.kill(); server.restart(); ...
 * }
 * }</pre>
 *
 * <p>Test and lifecycle methods can declare parameters of type {@code Map<String, String>} (the
 * {@link #config()} map), {@link RedisServer} (the master of standalone and replicated setups),
 * {@link RedisSentinelSetup}, {@link RedisClusterSetup} or {@code RedisExtension}.
 *
 * <p>It runs on {@link RedisBackend#selected()} unless {@link #withBackend} names one.
 * {@link #sharedBySuite()} makes it start once per test run and be shared by every class that
 * registers an equal extension (same topology, arguments and backend); it is closed when the run
 * ends.
 *
 * <p>On a {@code static} field the topology starts in {@code beforeAll} and is killed in
 * {@code afterAll} — which JUnit runs even when tests or other callbacks failed — so it is shared
 * by the class's tests (and by its {@code @Nested} classes; it is started once and closed after
 * the outermost class). On an instance field it starts before and is killed after each test. If
 * the JVM exits without either, the {@link RedisServer} shutdown hook kills the processes.
 *
 * <p>Accessors: {@link #server()}, {@link #sentinelSetup()}, {@link #clusterSetup()} (named apart
 * from the {@link #sentinel()} and {@link #cluster()} factories, which Java would not allow to
 * share a signature with them).
 *
 * <p>Not meant for concurrent use by parallel test classes: give each class its own instance.
 */
public final class RedisExtension implements BeforeAllCallback, AfterAllCallback,
    BeforeEachCallback, AfterEachCallback, ParameterResolver {

  private enum Topology { STANDALONE, REPLICATED, SENTINEL, CLUSTER }

  private static final ExtensionContext.Namespace SUITE =
      ExtensionContext.Namespace.create(RedisExtension.class);

  /** The master name {@link #sentinel()} uses. */
  public static final String DEFAULT_MASTER_NAME = "mymaster";

  private final Topology topology;
  private final List<String> serverArgs;
  private final String masterName;
  private final int masters;
  private final int replicasPerMaster;
  private final RedisBackend backend;
  private final boolean suiteScoped;

  private AutoCloseable setup;
  /** Class contexts (outer plus nested) currently using {@link #setup}. */
  private int classScopes;
  /** Whether {@link #setup} was started for a single test (instance-field registration). */
  private boolean startedForTest;

  private RedisExtension(Topology topology, List<String> serverArgs, String masterName, int masters,
      int replicasPerMaster) {
    this(topology, serverArgs, masterName, masters, replicasPerMaster, null, false);
  }

  private RedisExtension(Topology topology, List<String> serverArgs, String masterName, int masters,
      int replicasPerMaster, RedisBackend backend, boolean suiteScoped) {
    this.topology = topology;
    this.serverArgs = serverArgs;
    this.masterName = masterName;
    this.masters = masters;
    this.replicasPerMaster = replicasPerMaster;
    this.backend = backend;
    this.suiteScoped = suiteScoped;
  }

  /**
   * A master with {@code replicas} replicas ({@link RedisServer#startReplica()}), each linked
   * before tests run; {@link #server()} is the master, {@link #replicas()} the replicas.
   *
   * @param extraArgs passed to every server, as for {@link #standalone(String...)}
   * @throws IllegalArgumentException if {@code replicas} is not 1–16, or for a harness-owned
   *                                  argument
   */
  public static RedisExtension replicated(int replicas, String... extraArgs) {
    if (replicas < 1 || replicas > 16) {
      throw new IllegalArgumentException("Invalid replica count: " + replicas + " (1–16)");
    }
    return new RedisExtension(Topology.REPLICATED, RedisServer.checkedArgs(extraArgs), null, 0,
        replicas);
  }

  /** A copy of this extension on {@code backend} instead of {@link RedisBackend#selected()}. */
  public RedisExtension withBackend(RedisBackend backend) {
    if (backend == null) {
      throw new IllegalArgumentException("Invalid backend: null");
    }
    return new RedisExtension(topology, serverArgs, masterName, masters, replicasPerMaster,
        backend, suiteScoped);
  }

  /**
   * A copy of this extension started once per test run and shared by equal extensions (see the
   * class comment); faults a test injects are seen by later classes: undo them.
   */
  public RedisExtension sharedBySuite() {
    return new RedisExtension(topology, serverArgs, masterName, masters, replicasPerMaster,
        backend, true);
  }

  /** The backend servers run on. */
  public RedisBackend backend() {
    return backend != null ? backend : RedisBackend.selected();
  }

  /**
   * One redis-server.
   *
   * @param extraArgs passed to {@link RedisServer#start(String...)}
   * @throws IllegalArgumentException if they contain an argument the harness owns
   */
  public static RedisExtension standalone(String... extraArgs) {
    return new RedisExtension(Topology.STANDALONE, RedisServer.checkedArgs(extraArgs), null, 0, 0);
  }

  /**
   * Master, replica and three sentinels monitoring {@value #DEFAULT_MASTER_NAME}; see
   * {@link RedisSentinelSetup}.
   */
  public static RedisExtension sentinel() {
    return sentinel(DEFAULT_MASTER_NAME);
  }

  /**
   * Master, replica and three sentinels monitoring {@code masterName}; see
   * {@link RedisSentinelSetup}.
   *
   * @throws IllegalArgumentException if {@code masterName} is empty or contains whitespace
   */
  public static RedisExtension sentinel(String masterName) {
    RedisSentinelSetup.checkMasterName(masterName);
    return new RedisExtension(Topology.SENTINEL, List.of(), masterName, 0, 0);
  }

  /** Three masters with one replica each; see {@link RedisClusterSetup}. */
  public static RedisExtension cluster() {
    return cluster(3, 1);
  }

  /**
   * {@code masters} masters with {@code replicasPerMaster} replicas each; see
   * {@link RedisClusterSetup}.
   *
   * @throws IllegalArgumentException for a count out of range
   */
  public static RedisExtension cluster(int masters, int replicasPerMaster) {
    RedisClusterSetup.checkCounts(masters, replicasPerMaster);
    return new RedisExtension(Topology.CLUSTER, List.of(), null, masters, replicasPerMaster);
  }

  @Override
  public synchronized void beforeAll(ExtensionContext context) {
    if (suiteScoped) {
      if (setup == null) {
        setup = context.getRoot().getStore(SUITE)
            .getOrComputeIfAbsent(suiteKey(), key -> startSetup(), AutoCloseable.class);
      }
      return;
    }
    if (classScopes == 0 && setup == null) {
      setup = startSetup();
    }
    classScopes++;
  }

  @Override
  public synchronized void afterAll(ExtensionContext context) throws Exception {
    if (suiteScoped) {
      return; // closed by JUnit with the root context's store
    }
    if (classScopes > 0 && --classScopes == 0) {
      closeSetup();
    }
  }

  @Override
  public synchronized void beforeEach(ExtensionContext context) {
    if (setup == null) {
      setup = startSetup();
      startedForTest = true;
    }
  }

  @Override
  public synchronized void afterEach(ExtensionContext context) throws Exception {
    if (startedForTest) {
      closeSetup();
    }
  }

  /**
   * The server of {@link #standalone}, or the master of {@link #replicated}.
   *
   * @throws IllegalStateException if this is another topology or it is not started
   */
  public synchronized RedisServer server() {
    if (topology == Topology.REPLICATED) {
      return started(Topology.REPLICATED, RedisReplicaSet.class).master();
    }
    return started(Topology.STANDALONE, RedisServer.class);
  }

  /**
   * The replicas of {@link #replicated}.
   *
   * @throws IllegalStateException if this is another topology or it is not started
   */
  public synchronized List<RedisServer> replicas() {
    return started(Topology.REPLICATED, RedisReplicaSet.class).replicas();
  }



  /**
   * The setup of {@link #sentinel}.
   *
   * @throws IllegalStateException if this is another topology or it is not started
   */
  public synchronized RedisSentinelSetup sentinelSetup() {
    return started(Topology.SENTINEL, RedisSentinelSetup.class);
  }

  /**
   * The setup of {@link #cluster}.
   *
   * @throws IllegalStateException if this is another topology or it is not started
   */
  public synchronized RedisClusterSetup clusterSetup() {
    return started(Topology.CLUSTER, RedisClusterSetup.class);
  }

  /**
   * Holdfast configuration for this topology: {@code holdfast.redis.address} (standalone and
   * replicated: the master), or {@code holdfast.redis.mode} with {@code holdfast.redis.nodes}
   * (and {@code holdfast.redis.sentinel.master}) for Sentinel and Cluster. Plain strings, so
   * that it can be passed to {@code LockClient.create(Map)} or returned from a Quarkus test
   * resource.
   *
   * @throws IllegalStateException if not started
   */
  public synchronized Map<String, String> config() {
    if (setup == null) {
      throw notStarted();
    }
    return RedisParameters.config(this, name(topology));
  }

  @Override
  public boolean supportsParameter(ParameterContext parameter, ExtensionContext context) {
    return RedisParameters.supports(parameter.getParameter(), name(topology));
  }

  @Override
  public Object resolveParameter(ParameterContext parameter, ExtensionContext context) {
    return RedisParameters.resolve(parameter.getParameter(), this);
  }

  /**
   * {@code FLUSHALL} on every running master (the server, the sentinels' current master, or
   * each cluster master); replicas follow by replication. Blocks until each master answers.
   *
   * @throws IllegalStateException if not started
   */
  public synchronized void flushAll() {
    if (setup == null) {
      throw notStarted();
    }
    switch (topology) {
      case STANDALONE, REPLICATED -> server().withAdmin(Jedis::flushAll);
      case SENTINEL -> sentinelSetup().master().withAdmin(Jedis::flushAll);
      case CLUSTER -> {
        for (RedisServer node : clusterSetup().servers()) {
          if (node.isRunning()
              && "master".equals(node.info("replication", "role"))) {
            node.withAdmin(Jedis::flushAll);
          }
        }
      }
    }
  }

  private AutoCloseable startSetup() {
    RedisBackend on = backend();
    return switch (topology) {
      case STANDALONE -> RedisServer.start(on, serverArgs.toArray(String[]::new));
      case REPLICATED -> RedisReplicaSet.start(on, serverArgs, replicasPerMaster);
      case SENTINEL -> RedisSentinelSetup.start(on, masterName);
      case CLUSTER -> RedisClusterSetup.start(on, masters, replicasPerMaster);
    };
  }

  /** Starts the topology outside JUnit (for {@link QuarkusRedisTestResource}). */
  synchronized void startDetached() {
    setup = setup == null ? startSetup() : setup;
  }

  /** Closes what {@link #startDetached()} started; idempotent. */
  synchronized void closeDetached() throws Exception {
    closeSetup();
  }

  private String suiteKey() {
    return topology + " " + serverArgs + " " + masterName + " " + masters + " "
        + replicasPerMaster + " " + backend();
  }



  private void closeSetup() throws Exception {
    AutoCloseable closing = setup;
    setup = null;
    startedForTest = false;
    if (closing != null) {
      closing.close();
    }
  }

  private <T> T started(Topology wanted, Class<T> type) {
    if (topology != wanted) {
      throw new IllegalStateException("This RedisExtension is " + name(topology) + ", not "
          + name(wanted));
    }
    if (setup == null) {
      throw notStarted();
    }
    return type.cast(setup);
  }

  private static String name(Topology topology) {
    return topology.name().toLowerCase(Locale.ROOT);
  }

  private static IllegalStateException notStarted() {
    return new IllegalStateException("Redis is not running: register the RedisExtension with "
        + "@RegisterExtension and use it from a test or a lifecycle method");
  }
}

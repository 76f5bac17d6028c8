package dev.holdfast.testing;

import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.function.UnaryOperator;
import java.util.stream.Collectors;

import redis.clients.jedis.HostAndPort;
import redis.clients.jedis.Jedis;

/**
 * A Redis Sentinel deployment on loopback: one master, one replica and three sentinels
 * (quorum 2, {@code down-after-milliseconds 1000}, {@code failover-timeout 5000}), all real
 * processes owned by this object.
 *
 * <p>{@link #start} returns only when every sentinel sees the master, the connected replica and
 * the two other sentinels, so {@link #failover()} works right away.
 *
 * <p>Thread-safe for the queries; {@link #failover()} and {@link #close()} should not race each
 * other.
 */
public final class RedisSentinelSetup implements AutoCloseable {

  private static final int QUORUM = 2;
  private static final int SENTINELS = 3;
  private static final Duration TOPOLOGY_TIMEOUT = Duration.ofSeconds(20);
  private static final Duration FAILOVER_TIMEOUT = Duration.ofSeconds(30);
  private static final String PROBE_KEY = "holdfast:harness:failover-probe";

  private final String masterName;
  /** The two data nodes, in start order; which one is master is asked from the sentinels. */
  private final List<RedisServer> dataNodes = new ArrayList<>();
  private final List<RedisServer> sentinelServers = new ArrayList<>();

  private RedisSentinelSetup(String masterName) {
    this.masterName = masterName;
  }

  /**
   * Starts the master, its replica (waits for {@code master_link_status:up}) and three
   * sentinels monitoring it, and waits (at most 20 s) until every sentinel reports the master,
   * the replica as connected with link status ok, and both other sentinels. On failure
   * everything started so far is killed.
   *
   * @param masterName the name sentinels monitor the master under; non-blank, no whitespace
   * @throws IllegalArgumentException for a bad name
   * @throws IllegalStateException or {@link AssertionError} if the setup does not come up
   */
  public static RedisSentinelSetup start(String masterName) {
    return start(masterName, UnaryOperator.identity());
  }

  /**
   * Like {@link #start(String)}, but the replica replicates through {@code replicationLink}:
   * given the master's address, it returns the address the replica connects to instead (e.g. a
   * proxy in front of the master, to hold replication back while the master still counts the
   * replica as connected). Sentinels still talk to both data nodes directly, so the replica stays
   * promotable.
   *
   * @param masterName the name sentinels monitor the master under; non-blank, no whitespace
   * @param replicationLink maps the master's address to the one the replica connects to; called
   *                        once, after the master is up
   * @throws IllegalArgumentException for a bad name
   * @throws IllegalStateException or {@link AssertionError} if the setup does not come up
   */
  public static RedisSentinelSetup start(String masterName,
      UnaryOperator<HostAndPort> replicationLink) {
    return start(RedisBackend.selected(), masterName, replicationLink);
  }

  /**
   * Like {@link #start(String)}, on {@code backend} instead of {@link RedisBackend#selected()}.
   *
   * @throws IllegalArgumentException for a bad name
   * @throws IllegalStateException or {@link AssertionError} if the setup does not come up
   */
  public static RedisSentinelSetup start(RedisBackend backend, String masterName) {
    return start(backend, masterName, UnaryOperator.identity());
  }

  /**
   * Like {@link #start(String, UnaryOperator)}, on {@code backend}.
   *
   * @throws IllegalArgumentException for a bad name
   * @throws IllegalStateException or {@link AssertionError} if the setup does not come up
   */
  public static RedisSentinelSetup start(RedisBackend backend, String masterName,
      UnaryOperator<HostAndPort> replicationLink) {
    checkMasterName(masterName);
    RedisSentinelSetup setup = new RedisSentinelSetup(masterName);
    try {
      RedisServer master = RedisServer.start(backend);
      setup.dataNodes.add(master);
      setup.dataNodes.add(master.startReplica(replicationLink.apply(master.hostAndPort())));
      String directives = String.join("\n",
          "sentinel resolve-hostnames no",
          "sentinel monitor " + masterName + " " + master.host() + " " + master.port() + " "
              + QUORUM,
          "sentinel down-after-milliseconds " + masterName + " 1000",
          "sentinel failover-timeout " + masterName + " 5000",
          "sentinel parallel-syncs " + masterName + " 1");
      for (int i = 0; i < SENTINELS; i++) {
        setup.sentinelServers.add(RedisServer.startSentinel(master.launcher(), directives));
      }
      setup.awaitSentinelsReady(master, setup.dataNodes.get(1));
      return setup;
    } catch (RuntimeException | Error e) {
      setup.close();
      throw e;
    }
  }

  /** Validates {@link #start}'s argument; shared with {@link RedisExtension#sentinel(String)}. */
  static void checkMasterName(String masterName) {
    if (masterName == null || masterName.isEmpty()
        || masterName.chars().anyMatch(Character::isWhitespace)) {
      throw new IllegalArgumentException("Invalid sentinel master name: '" + masterName + "'");
    }
  }

  /** The name the sentinels monitor the master under, for the client's configuration. */
  public String masterName() {
    return masterName;
  }

  /** The sentinels as {@code "127.0.0.1:p1,127.0.0.1:p2,127.0.0.1:p3"}. */
  public String sentinelNodes() {
    return sentinels().stream().map(HostAndPort::toString).collect(Collectors.joining(","));
  }

  /** The sentinels' addresses, in start order. */
  public Set<HostAndPort> sentinels() {
    Set<HostAndPort> result = new LinkedHashSet<>();
    sentinelServers.forEach(sentinel -> result.add(sentinel.hostAndPort()));
    return result;
  }

  /** The sentinel processes themselves (e.g. to kill one). */
  public List<RedisServer> sentinelServers() {
    return List.copyOf(sentinelServers);
  }

  /**
   * The master address according to the first sentinel that answers
   * {@code SENTINEL GET-MASTER-ADDR-BY-NAME}.
   *
   * @throws IllegalStateException if no sentinel answers
   */
  public HostAndPort currentMaster() {
    RuntimeException failure = null;
    for (RedisServer sentinel : sentinelServers) {
      if (!sentinel.isRunning()) {
        continue;
      }
      try {
        HostAndPort master = masterAccordingTo(sentinel);
        if (master != null) {
          return master;
        }
      } catch (RuntimeException e) {
        failure = e;
      }
    }
    throw new IllegalStateException("No sentinel knows the master of " + masterName, failure);
  }

  /** The data node the sentinels currently report as master (see {@link #currentMaster()}). */
  public RedisServer master() {
    return dataNodeAt(currentMaster());
  }

  /**
   * The other data node: the replica, or after {@link #failover()} the killed former master
   * (not running until its {@link RedisServer#restart()}; restarted, it comes back empty as a
   * master and the sentinels turn it into a replica of the new master about 10 s later, after
   * which another {@link #failover()} is possible).
   */
  public RedisServer replica() {
    RedisServer master = master();
    return dataNodes.get(0) == master ? dataNodes.get(1) : dataNodes.get(0);
  }

  /**
   * Kills the current master (SIGKILL) and waits, at most 30 s, until every running sentinel
   * reports the replica as master, the replica answers {@code role:master}, and it accepts a
   * write (a probe key, set and deleted). Takes about 2–4 s: 1 s until the master is
   * considered down, then agreement, election and promotion.
   *
   * @return the address of the new master
   * @throws IllegalStateException if the replica is not running (e.g. a second failover without
   *                               restarting the old master)
   * @throws AssertionError        if the failover does not complete in time
   */
  public HostAndPort failover() {
    RedisServer oldMaster = master();
    RedisServer promoted = dataNodes.get(0) == oldMaster ? dataNodes.get(1) : dataNodes.get(0);
    if (!promoted.isRunning()) {
      throw new IllegalStateException("No running replica to promote: " + promoted + " is down");
    }
    oldMaster.kill();
    HostAndPort expected = promoted.hostAndPort();
    Await.until(FAILOVER_TIMEOUT,
        () -> allSentinelsReport(expected) && isWritableMaster(promoted),
        "sentinels promote " + expected + " after killing " + oldMaster);
    return expected;
  }

  /** Kills the sentinels, then the data nodes, and deletes their temp dirs. Idempotent. */
  @Override
  public void close() {
    List<RedisServer> all = new ArrayList<>(sentinelServers);
    all.addAll(dataNodes);
    RedisServer.closeAll(all);
  }

  private RedisServer dataNodeAt(HostAndPort address) {
    for (RedisServer node : dataNodes) {
      if (node.hostAndPort().equals(address)) {
        return node;
      }
    }
    throw new IllegalStateException(
        "Sentinels report master " + address + ", which is not part of this setup");
  }

  private void awaitSentinelsReady(RedisServer master, RedisServer replica) {
    for (RedisServer sentinel : sentinelServers) {
      // Sentinels find each other through hello messages published every 2 s on the master.
      Await.until(TOPOLOGY_TIMEOUT, () -> {
        try (Jedis jedis = sentinel.connect(500, 2_000)) {
          Map<String, String> masterState = jedis.sentinelMaster(masterName);
          List<Map<String, String>> replicas = jedis.sentinelReplicas(masterName);
          List<Map<String, String>> peers = jedis.sentinelSentinels(masterName);
          return "master".equals(masterState.get("flags"))
              && Integer.toString(master.port()).equals(masterState.get("port"))
              && replicas.size() == 1
              && Integer.toString(replica.port()).equals(replicas.get(0).get("port"))
              && "slave".equals(replicas.get(0).get("flags"))
              && "ok".equals(replicas.get(0).get("master-link-status"))
              && peers.size() == SENTINELS - 1
              && peers.stream().allMatch(peer -> "sentinel".equals(peer.get("flags")));
        }
      }, sentinel + " knows master " + master + ", replica " + replica + " and 2 other sentinels");
    }
  }

  private boolean allSentinelsReport(HostAndPort expected) {
    for (RedisServer sentinel : sentinelServers) {
      if (sentinel.isRunning() && !expected.equals(masterAccordingTo(sentinel))) {
        return false;
      }
    }
    return true;
  }

  /** The master address one sentinel reports, or {@code null} if it does not know one. */
  private HostAndPort masterAccordingTo(RedisServer sentinel) {
    try (Jedis jedis = sentinel.connect(500, 2_000)) {
      List<String> address = jedis.sentinelGetMasterAddrByName(masterName);
      return address == null || address.size() != 2
          ? null
          : new HostAndPort(address.get(0), Integer.parseInt(address.get(1)));
    }
  }

  private static boolean isWritableMaster(RedisServer server) {
    if (!"master".equals(server.info("replication", "role"))) {
      return false;
    }
    try (Jedis jedis = server.connect(500, 2_000)) {
      jedis.set(PROBE_KEY, "1");
      jedis.del(PROBE_KEY);
      return true;
    }
  }
}

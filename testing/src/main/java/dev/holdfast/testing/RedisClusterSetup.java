package dev.holdfast.testing;

import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.BitSet;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.stream.Collectors;

import redis.clients.jedis.HostAndPort;
import redis.clients.jedis.Jedis;
import redis.clients.jedis.args.ClusterFailoverOption;
import redis.clients.jedis.util.JedisClusterCRC16;

/**
 * A Redis Cluster on loopback, built with plain cluster commands (no {@code redis-cli}): every
 * node runs with {@code --cluster-enabled yes --cluster-config-file nodes.conf
 * --cluster-node-timeout 2000} in its own temp dir, and also listens on {@code port + 10000}
 * (the cluster bus).
 *
 * <p>Formation: the 16384 slots are split into contiguous, nearly equal ranges over the masters
 * ({@code CLUSTER ADDSLOTS}); every node gets a distinct config epoch (so no epoch-collision
 * round is needed); every pair of nodes is introduced with {@code CLUSTER MEET}; once each replica
 * knows its master it runs {@code CLUSTER REPLICATE}. {@link #start} returns when every node
 * reports {@code cluster_state:ok}, sees all nodes connected with the intended roles and the same
 * slot map, and every replica's link to its master is up. Redis keeps a fresh master out of
 * {@code ok} for 2 s after boot, so forming takes about 2–3 s.
 *
 * <p>Topology queries ({@link #masterForSlot}, {@link #replicaOf}, {@link #seedNodes}) ask a
 * running node ({@code CLUSTER NODES}), so they stay right after failovers.
 *
 * <p>Thread-safe for the queries; {@link #failoverMasterOf} and {@link #close()} should not race
 * each other.
 */
public final class RedisClusterSetup implements AutoCloseable {

  static final int SLOTS = 16_384;

  private static final Duration FORM_TIMEOUT = Duration.ofSeconds(20);
  private static final Duration FAILOVER_TIMEOUT = Duration.ofSeconds(30);
  private static final Set<String> UNHEALTHY_FLAGS = Set.of("handshake", "noaddr", "fail", "fail?");

  /** Masters first, then the replicas of master 0, of master 1, and so on. */
  private final List<RedisServer> servers = new ArrayList<>();
  private final Map<String, RedisServer> serversById = new HashMap<>();
  private final Map<RedisServer, String> idsByServer = new HashMap<>();

  private RedisClusterSetup() {
  }

  /**
   * Starts and forms a cluster of {@code masters} masters with {@code replicasPerMaster}
   * replicas each, waiting (at most 20 s) until it is fully formed as described in the class
   * comment. On failure every node started so far is killed.
   *
   * @param masters           1–16384
   * @param replicasPerMaster 0 or more
   * @throws IllegalArgumentException for bad counts
   * @throws IllegalStateException or {@link AssertionError} if the cluster does not form
   */
  public static RedisClusterSetup start(int masters, int replicasPerMaster) {
    return start(RedisBackend.selected(), masters, replicasPerMaster);
  }

  /**
   * Like {@link #start(int, int)}, on {@code backend} instead of {@link RedisBackend#selected()}.
   *
   * @throws IllegalArgumentException for bad counts
   * @throws IllegalStateException or {@link AssertionError} if the cluster does not form
   */
  public static RedisClusterSetup start(RedisBackend backend, int masters,
      int replicasPerMaster) {
    checkCounts(masters, replicasPerMaster);
    return start(backend.launcher(), masters, replicasPerMaster);
  }

  /**
   * Like {@link #start(int, int)}, with a specific redis-server executable for every node, run as
   * local processes.
   */
  public static RedisClusterSetup start(Path binary, int masters, int replicasPerMaster) {
    return start(new RedisLauncher.Local(binary, RedisBackend.LOCAL), masters, replicasPerMaster);
  }

  private static RedisClusterSetup start(RedisLauncher launcher, int masters,
      int replicasPerMaster) {
    checkCounts(masters, replicasPerMaster);
    RedisClusterSetup setup = new RedisClusterSetup();
    try {
      setup.form(launcher, masters, replicasPerMaster);
      return setup;
    } catch (RuntimeException | Error e) {
      setup.close();
      throw e;
    }
  }

  /** Validates {@link #start}'s arguments; shared with {@link RedisExtension#cluster(int, int)}. */
  static void checkCounts(int masters, int replicasPerMaster) {
    if (masters < 1 || masters > SLOTS) {
      throw new IllegalArgumentException(
          "Invalid masters: " + masters + " (must be 1.." + SLOTS + ")");
    }
    if (replicasPerMaster < 0) {
      throw new IllegalArgumentException(
          "Invalid replicasPerMaster: " + replicasPerMaster + " (must be >= 0)");
    }
  }

  /** All nodes (masters and replicas), in start order. */
  public Set<HostAndPort> nodes() {
    Set<HostAndPort> result = new LinkedHashSet<>();
    servers.forEach(server -> result.add(server.hostAndPort()));
    return result;
  }

  /**
   * The masters serving slots now, as {@code "127.0.0.1:p1,127.0.0.1:p2,..."} (sorted), as seen
   * by a running node. Any node works as a seed for a cluster client; these avoid a redirect.
   */
  public String seedNodes() {
    return view().values().stream()
        .filter(node -> node.isMaster() && !node.slots().isEmpty())
        .map(node -> serversById.get(node.id()).hostAndPort().toString())
        .sorted()
        .collect(Collectors.joining(","));
  }

  /** All node processes: masters first (as started), then replicas. Roles change on failover. */
  public List<RedisServer> servers() {
    return List.copyOf(servers);
  }

  /**
   * The node currently serving {@code slot}, according to a running node's view.
   *
   * @throws IllegalArgumentException if {@code slot} is not 0..16383
   * @throws IllegalStateException    if no node owns it (or no node answers)
   */
  public RedisServer masterForSlot(int slot) {
    if (slot < 0 || slot >= SLOTS) {
      throw new IllegalArgumentException("slot must be 0.." + (SLOTS - 1) + ": " + slot);
    }
    return view().values().stream()
        .filter(node -> node.isMaster() && node.slots().get(slot))
        .map(node -> serversById.get(node.id()))
        .findFirst()
        .orElseThrow(() -> new IllegalStateException("No master owns slot " + slot));
  }

  /** The node currently serving {@code key}'s slot ({@link JedisClusterCRC16#getSlot}). */
  public RedisServer masterForKey(String key) {
    return masterForSlot(JedisClusterCRC16.getSlot(key));
  }

  /**
   * A running replica of {@code master}, according to a running node's view.
   *
   * @throws IllegalStateException if {@code master} has no running replica
   */
  public RedisServer replicaOf(RedisServer master) {
    String masterId = idOf(master);
    return view().values().stream()
        .filter(node -> node.isReplica() && masterId.equals(node.masterId()))
        .map(node -> serversById.get(node.id()))
        .filter(RedisServer::isRunning)
        .findFirst()
        .orElseThrow(() -> new IllegalStateException(master + " has no running replica"));
  }

  /**
   * Promotes a replica of the master that serves {@code key}: runs {@code CLUSTER FAILOVER} on
   * the replica ({@code FORCE} if the master is not running), then waits (at most 30 s) until
   * the replica reports {@code role:master}, every running node sees it owning the slot and
   * reports {@code cluster_state:ok}, and — if the old master is running — the old master is
   * linked to it as a replica. A manual failover with both alive loses no acknowledged write.
   *
   * @return the new master of {@code key}'s slot
   * @throws IllegalStateException if the master has no running replica
   * @throws AssertionError        if the failover does not complete in time
   */
  public RedisServer failoverMasterOf(String key) {
    int slot = JedisClusterCRC16.getSlot(key);
    RedisServer oldMaster = masterForSlot(slot);
    RedisServer promoted = replicaOf(oldMaster);
    boolean oldMasterAlive = oldMaster.isRunning();
    promoted.withAdmin(jedis -> oldMasterAlive
        ? jedis.clusterFailover()
        : jedis.clusterFailover(ClusterFailoverOption.FORCE));
    String promotedId = idOf(promoted);
    Await.until(FAILOVER_TIMEOUT, () -> {
      if (!"master".equals(promoted.info("replication", "role"))) {
        return false;
      }
      for (RedisServer server : runningServers()) {
        try (Jedis jedis = server.connect(500, 2_000)) {
          if (!"ok".equals(RedisServer.infoField(jedis.clusterInfo(), "cluster_state"))) {
            return false;
          }
          NodeLine owner = ownerOf(parseNodes(jedis.clusterNodes()), slot);
          if (owner == null || !owner.id().equals(promotedId)) {
            return false;
          }
        }
      }
      return !oldMaster.isRunning() || follows(oldMaster, promoted);
    }, "slot " + slot + " (key '" + key + "') moves from " + oldMaster + " to " + promoted);
    return promoted;
  }

  /**
   * Opens the move of {@code slot} from its current master to another master (the first one,
   * in start order, that does not own it); see {@link SlotMigration} for the steps and what
   * clients see meanwhile.
   *
   * @throws IllegalStateException if there is no other master, or no node answers
   */
  public SlotMigration startSlotMigration(int slot) {
    RedisServer source = masterForSlot(slot);
    RedisServer target = masters().stream().filter(m -> m != source).findFirst()
        .orElseThrow(() -> new IllegalStateException("No other master to move slot " + slot
            + " to"));
    return startSlotMigration(slot, target);
  }

  /**
   * Opens the move of {@code slot} from its current master to {@code target}.
   *
   * @throws IllegalArgumentException if {@code target} already owns the slot or is not a master
   */
  public SlotMigration startSlotMigration(int slot, RedisServer target) {
    RedisServer source = masterForSlot(slot);
    if (source == target || !masters().contains(target)) {
      throw new IllegalArgumentException(target + " is not another master than " + source);
    }
    SlotMigration migration = new SlotMigration(this, slot, source, target);
    migration.open();
    return migration;
  }

  /**
   * Moves {@code slot} to another master at once (open, move every key, finish).
   *
   * @return the master that owns it now
   */
  public RedisServer migrateSlot(int slot) {
    try (SlotMigration migration = startSlotMigration(slot)) {
      migration.finish();
      return migration.target();
    }
  }

  /** The running masters, as a running node sees them now (start order). */
  List<RedisServer> masters() {
    Set<String> masterIds = view().values().stream().filter(NodeLine::isMaster)
        .map(NodeLine::id).collect(Collectors.toSet());
    return runningServers().stream().filter(s -> masterIds.contains(idsByServer.get(s)))
        .collect(Collectors.toList());
  }

  /** Waits until every running node is {@code ok} and sees {@code owner} serving {@code slot}. */
  void awaitOwner(int slot, RedisServer owner, Duration timeout) {
    String ownerId = idOf(owner);
    Await.until(timeout, () -> {
      for (RedisServer server : runningServers()) {
        try (Jedis jedis = server.connect(500, 2_000)) {
          if (!"ok".equals(RedisServer.infoField(jedis.clusterInfo(), "cluster_state"))) {
            return false;
          }
          NodeLine line = ownerOf(parseNodes(jedis.clusterNodes()), slot);
          if (line == null || !line.id().equals(ownerId)) {
            return false;
          }
        }
      }
      return true;
    }, "every node sees slot " + slot + " served by " + owner);
  }

  /** Kills every node and deletes their temp dirs. Idempotent. */
  @Override
  public void close() {
    RedisServer.closeAll(servers);
  }

  private void form(RedisLauncher launcher, int masters, int replicasPerMaster) {
    int total = masters * (1 + replicasPerMaster);
    for (int i = 0; i < total; i++) {
      RedisServer server = RedisServer.start(launcher,
          "--cluster-enabled", "yes",
          "--cluster-config-file", "nodes.conf", // relative to the node's --dir
          "--cluster-node-timeout", "2000");
      servers.add(server);
      String id = server.withAdmin(Jedis::clusterMyId);
      serversById.put(id, server);
      idsByServer.put(server, id);
    }

    Map<String, BitSet> slotsByMaster = new LinkedHashMap<>();
    Map<String, String> masterByReplica = new LinkedHashMap<>();
    for (int m = 0; m < masters; m++) {
      int from = (int) ((long) m * SLOTS / masters);
      int to = (int) ((long) (m + 1) * SLOTS / masters) - 1;
      RedisServer master = servers.get(m);
      // ADDSLOTS rather than ADDSLOTSRANGE (7.0+), so Redis 6.2 clusters form too.
      int[] range = java.util.stream.IntStream.rangeClosed(from, to).toArray();
      master.withAdmin(jedis -> jedis.clusterAddSlots(range));
      BitSet slots = new BitSet(SLOTS);
      slots.set(from, to + 1);
      slotsByMaster.put(idOf(master), slots);
      for (int r = 0; r < replicasPerMaster; r++) {
        masterByReplica.put(idOf(servers.get(masters + m * replicasPerMaster + r)), idOf(master));
      }
    }

    // Distinct epochs up front, as redis-cli does, so slot ownership never needs a collision round.
    for (int i = 0; i < total; i++) {
      long epoch = i + 1;
      servers.get(i).withAdmin(jedis -> jedis.clusterSetConfigEpoch(epoch));
    }
    // Introduce every pair directly rather than waiting for gossip to spread the node list.
    for (int i = 0; i < total; i++) {
      RedisServer from = servers.get(i);
      List<RedisServer> later = servers.subList(i + 1, total);
      from.withAdmin(jedis -> {
        later.forEach(to -> jedis.clusterMeet(RedisServer.HOST, to.port()));
        return null;
      });
    }
    Await.until(FORM_TIMEOUT, () -> servers.stream().allMatch(server -> knowsAll(server, total)),
        "all " + total + " cluster nodes know each other");

    masterByReplica.forEach((replicaId, masterId) ->
        serversById.get(replicaId).withAdmin(jedis -> jedis.clusterReplicate(masterId)));
    Await.until(FORM_TIMEOUT, () -> isFormed(slotsByMaster, masterByReplica),
        "cluster of " + masters + " masters x " + replicasPerMaster
            + " replicas is ok on every node with the same slot map");
  }

  /** Whether {@code replica} reports {@code role:slave} of {@code master} with the link up. */
  private static boolean follows(RedisServer replica, RedisServer master) {
    try (Jedis jedis = replica.connect(500, 2_000)) {
      String replication = jedis.info("replication");
      return "slave".equals(RedisServer.infoField(replication, "role"))
          && String.valueOf(master.port()).equals(RedisServer.infoField(replication, "master_port"))
          && "up".equals(RedisServer.infoField(replication, "master_link_status"));
    }
  }

  private boolean knowsAll(RedisServer server, int total) {
    try (Jedis jedis = server.connect(500, 2_000)) {
      Map<String, NodeLine> nodes = parseNodes(jedis.clusterNodes());
      return nodes.size() == total && nodes.values().stream().allMatch(NodeLine::healthy);
    }
  }

  /**
   * Whether every node is {@code ok}, sees all nodes healthy, each master with exactly its
   * expected slots and each replica following its expected master, and every replica's link is up.
   */
  private boolean isFormed(Map<String, BitSet> slotsByMaster, Map<String, String> masterByReplica) {
    for (RedisServer server : servers) {
      try (Jedis jedis = server.connect(500, 2_000)) {
        if (!"ok".equals(RedisServer.infoField(jedis.clusterInfo(), "cluster_state"))) {
          return false;
        }
        Map<String, NodeLine> nodes = parseNodes(jedis.clusterNodes());
        if (nodes.size() != servers.size()
            || !nodes.values().stream().allMatch(NodeLine::healthy)) {
          return false;
        }
        for (Map.Entry<String, BitSet> master : slotsByMaster.entrySet()) {
          NodeLine node = nodes.get(master.getKey());
          if (node == null || !node.isMaster() || !node.slots().equals(master.getValue())) {
            return false;
          }
        }
        for (Map.Entry<String, String> replica : masterByReplica.entrySet()) {
          NodeLine node = nodes.get(replica.getKey());
          if (node == null || !node.isReplica() || !replica.getValue().equals(node.masterId())) {
            return false;
          }
        }
      }
    }
    return masterByReplica.keySet().stream()
        .map(serversById::get)
        .allMatch(replica -> "up".equals(replica.info("replication", "master_link_status")));
  }

  String idOf(RedisServer server) {
    String id = idsByServer.get(Objects.requireNonNull(server, "server"));
    if (id == null) {
      throw new IllegalArgumentException(server + " is not a node of this cluster");
    }
    return id;
  }

  private List<RedisServer> runningServers() {
    return servers.stream().filter(RedisServer::isRunning).collect(Collectors.toList());
  }

  /**
   * The node table as seen by the first running node that answers, without entries of nodes
   * outside this setup (e.g. a handshake in progress).
   */
  private Map<String, NodeLine> view() {
    RuntimeException failure = null;
    for (RedisServer server : runningServers()) {
      try (Jedis jedis = server.connect(500, 2_000)) {
        Map<String, NodeLine> nodes = parseNodes(jedis.clusterNodes());
        nodes.keySet().retainAll(serversById.keySet());
        return nodes;
      } catch (RuntimeException e) {
        failure = e;
      }
    }
    throw new IllegalStateException("No cluster node answers CLUSTER NODES", failure);
  }

  private static NodeLine ownerOf(Map<String, NodeLine> nodes, int slot) {
    return nodes.values().stream()
        .filter(node -> node.isMaster() && node.slots().get(slot))
        .findFirst()
        .orElse(null);
  }

  /**
   * Parses {@code CLUSTER NODES}: one line per node,
   * {@code <id> <ip:port@cport[,hostname]> <flags> <master-id|-> <ping-sent> <pong-recv>
   * <config-epoch> <link-state> <slot>...}, a slot being {@code n} or {@code a-b}; {@code [...]}
   * entries (slots being migrated) are ignored.
   */
  static Map<String, NodeLine> parseNodes(String clusterNodes) {
    Map<String, NodeLine> nodes = new LinkedHashMap<>();
    for (String line : clusterNodes.split("\r?\n")) {
      if (line.isBlank()) {
        continue;
      }
      String[] fields = line.trim().split(" ");
      BitSet slots = new BitSet(SLOTS);
      for (int i = 8; i < fields.length; i++) {
        String range = fields[i];
        if (range.startsWith("[")) {
          continue;
        }
        int dash = range.indexOf('-');
        if (dash < 0) {
          slots.set(Integer.parseInt(range));
        } else {
          int first = Integer.parseInt(range.substring(0, dash));
          int last = Integer.parseInt(range.substring(dash + 1));
          slots.set(first, last + 1);
        }
      }
      nodes.put(fields[0], new NodeLine(fields[0], Set.of(fields[2].split(",")),
          fields[3].equals("-") ? null : fields[3], fields[7], slots));
    }
    return nodes;
  }

  /** One line of {@code CLUSTER NODES}. */
  record NodeLine(String id, Set<String> flags, String masterId, String linkState, BitSet slots) {

    boolean isMaster() {
      return flags.contains("master");
    }

    boolean isReplica() {
      return flags.contains("slave");
    }

    /** Known by address, not failing, and its link connected. */
    boolean healthy() {
      return "connected".equals(linkState) && flags.stream().noneMatch(UNHEALTHY_FLAGS::contains);
    }
  }
}

package dev.holdfast.engine;

import dev.holdfast.testing.RedisClusterSetup;
import dev.holdfast.testing.RedisServer;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import redis.clients.jedis.Jedis;
import redis.clients.jedis.Protocol;
import redis.clients.jedis.util.JedisClusterCRC16;

/**
 * The faults of the cluster topology of {@link LockModelTest}: live slot migrations of the lock
 * names' slots between the masters of a Cluster without replicas, while the actors run.
 *
 * <p>One migration, as {@code redis-cli --cluster reshard} does it: {@code CLUSTER SETSLOT
 * <slot> IMPORTING} on the target, {@code MIGRATING} on the source; {@code MIGRATE} about half
 * of the slot's keys; the slot then stays split (some keys here, some there: commands on moved
 * or new keys get {@code -ASK}) for 0.2-2 s; then {@code MIGRATE} the rest until the source has
 * none, and {@code CLUSTER SETSLOT <slot> NODE <target>} on the target, the source and the other
 * masters (commands then get {@code -MOVED}). Migrations follow each other with gaps of 1-4 s,
 * each of a lock name's slot (the names are in different slots) to another master, chosen by the
 * seed. {@code MIGRATE} keeps a key's TTL, and each key moves atomically, so no hold is lost by
 * the move itself.
 */
final class ModelMigrations implements ModelFaultDriver {
  /**
   * The Redis names of every lock of {@link ModelLocks#KEYS} (the multi-lock's and the
   * RedLock's members).
   */
  static final List<String> NAMES =
      List.of("f0", "m0", "n0", "n1", "q0", "q1", "q2", "r0", "x0");

  private final RedisClusterSetup cluster;
  private final ModelHistory history;
  private final Random random;
  private final long runMillis;
  private final Thread driver;
  private volatile boolean stopped;
  private int migrations;

  ModelMigrations(RedisClusterSetup cluster, long seed, long runMillis, ModelHistory history) {
    this.cluster = cluster;
    this.history = history;
    this.random = new Random(seed ^ 0x2545F4914F6CDD1DL);
    this.runMillis = runMillis;
    this.driver = new Thread(this::play, "model-migrations");
    this.driver.setDaemon(true);
  }

  @Override
  public void start() {
    driver.start();
  }

  @Override
  public void stopAndHeal() throws InterruptedException {
    stopped = true;
    driver.join(60_000); // a migration in progress always completes
  }

  @Override
  public synchronized Map<String, Integer> injectedCounts() {
    Map<String, Integer> counts = new LinkedHashMap<>();
    counts.put("MIGRATE", migrations);
    return counts;
  }

  private void play() {
    long origin = System.nanoTime();
    long at = 1_000 + random.nextInt(2_000);
    try {
      while (!stopped && at < runMillis - 2_000) {
        while (!stopped && elapsed(origin) < at) {
          Thread.sleep(Math.min(50, at - elapsed(origin)));
        }
        if (stopped) {
          return;
        }
        String name = NAMES.get(random.nextInt(NAMES.size()));
        migrate(name, 200 + random.nextInt(1_801));
        at = elapsed(origin) + 1_000 + random.nextInt(3_001);
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    } catch (RuntimeException e) {
      history.violation("harness", "migrations", "slot migration failed: " + e);
    }
  }

  private static long elapsed(long origin) {
    return (System.nanoTime() - origin) / 1_000_000;
  }

  /** Moves {@code name}'s slot to another master, leaving it split for {@code splitMillis}. */
  private void migrate(String name, long splitMillis) throws InterruptedException {
    int slot = JedisClusterCRC16.getSlot(name);
    RedisServer source = cluster.masterForSlot(slot);
    List<RedisServer> others = new ArrayList<>();
    for (RedisServer server : cluster.servers()) {
      if (server != source && "master".equals(role(server))) {
        others.add(server);
      }
    }
    RedisServer target = others.get(random.nextInt(others.size()));
    String sourceId = source.withAdmin(Jedis::clusterMyId);
    String targetId = target.withAdmin(Jedis::clusterMyId);
    long start = ModelEvent.now();
    int moved = 0;
    try (Jedis from = source.admin(); Jedis to = target.admin()) {
      to.clusterSetSlotImporting(slot, sourceId);
      from.clusterSetSlotMigrating(slot, targetId);
      List<String> keys = from.clusterGetKeysInSlot(slot, 1_000);
      for (int i = 0; i < keys.size() / 2 + keys.size() % 2 * random.nextInt(2); i++) {
        moved += move(from, target, List.of(keys.get(i)));
      }
      Thread.sleep(splitMillis);
      for (int round = 0; ; round++) {
        keys = from.clusterGetKeysInSlot(slot, 1_000);
        if (keys.isEmpty()) {
          break;
        }
        if (round > 100) {
          throw new IllegalStateException("slot " + slot + " keeps keys on " + source + ": "
              + keys);
        }
        moved += move(from, target, keys);
      }
      // The target first, so that it serves the slot before the source redirects there.
      to.clusterSetSlotNode(slot, targetId);
      from.clusterSetSlotNode(slot, targetId);
    }
    for (RedisServer server : others) {
      if (server != target) {
        server.withAdmin(jedis -> jedis.clusterSetSlotNode(slot, targetId));
      }
    }
    synchronized (this) {
      migrations++;
    }
    history.add(ModelEvent.Kind.FAULT, "", "faults", 0, "slot " + slot, "", "MIGRATE", "",
        start, ModelEvent.now(), 0, 0, 0, "", "'" + name + "' " + source.port() + "->"
            + target.port() + ", split " + splitMillis + "ms, " + moved + " keys");
  }

  /** MIGRATEs {@code keys} (of the migrating slot) to {@code target}; how many moved. */
  private static int move(Jedis from, RedisServer target, List<String> keys) {
    List<String> args = new ArrayList<>(List.of(target.host(), Integer.toString(target.port()),
        "", "0", "5000", "KEYS"));
    args.addAll(keys);
    Object reply = from.sendCommand(Protocol.Command.MIGRATE, args.toArray(String[]::new));
    // NOKEY: they expired or were deleted meanwhile; nothing moved
    return reply instanceof byte[] b && new String(b).equals("NOKEY") ? 0 : keys.size();
  }

  private static String role(RedisServer server) {
    return server.withAdmin(jedis -> jedis.info("replication").lines()
        .filter(l -> l.startsWith("role:")).findFirst().orElse("role:?").substring(5).trim());
  }
}

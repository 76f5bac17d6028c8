package dev.holdfast.testing;

import java.time.Duration;
import java.util.List;
import redis.clients.jedis.Jedis;
import redis.clients.jedis.params.MigrateParams;

/**
 * One hash slot being moved from one master of a {@link RedisClusterSetup} to another, step by
 * step as a resharding tool does it, so that a test can act in between:
 * <ol>
 *   <li>{@link RedisClusterSetup#startSlotMigration} — {@code CLUSTER SETSLOT <slot> IMPORTING}
 *       on the target, then {@code MIGRATING} on the source. The source still owns the slot; it
 *       answers a command whose keys it no longer has with {@code -ASK <slot> <target>}, and
 *       one with some keys present and some gone with {@code -TRYAGAIN}. The target serves the
 *       slot only to a client that sent {@code ASKING} just before.</li>
 *   <li>{@link #moveKeys} — {@code MIGRATE} of chosen keys (atomic per call: a key is on one
 *       node or the other, never both).</li>
 *   <li>{@link #finish()} — moves every key left, then {@code CLUSTER SETSLOT <slot> NODE
 *       <target>} on the target, the source and every other master; returns when every running
 *       node sees the target owning the slot. From then on the source answers {@code -MOVED}.</li>
 * </ol>
 *
 * <p>Not thread-safe: one thread drives a migration (other threads may use the cluster).
 */
public final class SlotMigration implements AutoCloseable {

  private static final Duration SETTLE_TIMEOUT = Duration.ofSeconds(20);
  private static final int MIGRATE_TIMEOUT_MS = 5_000;
  private static final int KEYS_PER_MIGRATE = 100;

  private final RedisClusterSetup cluster;
  private final int slot;
  private final RedisServer source;
  private final RedisServer target;
  private boolean finished;

  SlotMigration(RedisClusterSetup cluster, int slot, RedisServer source, RedisServer target) {
    this.cluster = cluster;
    this.slot = slot;
    this.source = source;
    this.target = target;
  }

  /** Sends the two {@code SETSLOT}s that open the migration (target first, as Redis advises). */
  void open() {
    String sourceId = cluster.idOf(source);
    String targetId = cluster.idOf(target);
    target.withAdmin(jedis -> jedis.clusterSetSlotImporting(slot, sourceId));
    source.withAdmin(jedis -> jedis.clusterSetSlotMigrating(slot, targetId));
  }

  /** The slot being moved. */
  public int slot() {
    return slot;
  }

  /** The master that owned the slot when the migration started. */
  public RedisServer source() {
    return source;
  }

  /** The master the slot moves to. */
  public RedisServer target() {
    return target;
  }

  /**
   * Moves {@code keys} (all in this slot) from the source to the target with one
   * {@code MIGRATE ... KEYS}; keys the source does not have are skipped.
   *
   * @return how many keys moved
   * @throws IllegalStateException if the migration is finished
   */
  public int moveKeys(String... keys) {
    if (finished) {
      throw new IllegalStateException("slot " + slot + " has finished moving");
    }
    int moved = 0;
    try (Jedis jedis = source.admin()) {
      for (String key : keys) {
        if (jedis.exists(key)) {
          jedis.migrate(RedisServer.HOST, target.port(), 0, MIGRATE_TIMEOUT_MS,
              new MigrateParams(), key);
          moved++;
        }
      }
    }
    return moved;
  }

  /**
   * Whether the target has {@code key} now ({@code ASKING} then {@code EXISTS}: while the slot
   * is importing, the target answers other clients with a redirection to the source).
   */
  public boolean targetHas(String key) {
    try (Jedis jedis = target.admin()) {
      if (!finished) {
        jedis.asking();
      }
      return jedis.exists(key);
    }
  }

  /**
   * Moves every key the source still has in the slot.
   *
   * @return how many keys moved
   */
  public int moveAllKeys() {
    int moved = 0;
    try (Jedis jedis = source.admin()) {
      for (List<String> keys = jedis.clusterGetKeysInSlot(slot, KEYS_PER_MIGRATE);
          !keys.isEmpty(); keys = jedis.clusterGetKeysInSlot(slot, KEYS_PER_MIGRATE)) {
        jedis.migrate(RedisServer.HOST, target.port(), 0, MIGRATE_TIMEOUT_MS,
            new MigrateParams(), keys.toArray(String[]::new));
        moved += keys.size();
      }
    }
    return moved;
  }

  /**
   * Moves the keys left and gives the slot to the target on every master, then waits (at most
   * 20 s) until every running node sees the target owning it. Idempotent.
   *
   * @throws AssertionError if the nodes do not agree in time
   */
  public void finish() {
    if (finished) {
      return;
    }
    moveAllKeys();
    String targetId = cluster.idOf(target);
    target.withAdmin(jedis -> jedis.clusterSetSlotNode(slot, targetId));
    source.withAdmin(jedis -> jedis.clusterSetSlotNode(slot, targetId));
    for (RedisServer master : cluster.masters()) {
      if (master != target && master != source) {
        master.withAdmin(jedis -> jedis.clusterSetSlotNode(slot, targetId));
      }
    }
    finished = true;
    cluster.awaitOwner(slot, target, SETTLE_TIMEOUT);
  }

  /** {@link #finish()}, so that a test never leaves a slot half moved. */
  @Override
  public void close() {
    finish();
  }

  @Override
  public String toString() {
    return "slot " + slot + " moving from " + source + " to " + target;
  }
}

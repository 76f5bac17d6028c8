package dev.holdfast.engine;

import dev.holdfast.testing.RedisSentinelSetup;
import dev.holdfast.testing.RedisServer;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;

/**
 * The faults of the replica topology of {@link LockModelTest}: a master with one replica,
 * watched by three sentinels, whose clients run with {@code sync-replicas=auto}.
 *
 * <ul>
 *   <li>REPLICA_RESTART: the replica is killed and restarted without the RDB file of its last
 *       sync, so it needs a full resync; the fault lasts until the master reports it
 *       {@code online} again;</li>
 *   <li>REPLICA_STALL: a slow script keeps the replica from reading the replication stream for
 *       0.3-0.8 s, so the master's {@code WAIT}s block; each one blocked meanwhile is unblocked
 *       with an error ({@code CLIENT UNBLOCK … ERROR}): the call it follows ran, unconfirmed;</li>
 *   <li>FAILOVER: the master is killed (SIGKILL) and the sentinels promote the replica; the
 *       fault lasts until the promoted node takes writes. In a CI-length run it happens once,
 *       after two thirds of the run, and the old master stays down: it is the last fault. In a
 *       soak (a run over {@value #SOAK_MILLIS} ms) it happens every minute, and the old master is
 *       then restarted empty — for seconds an empty master at the address a client that missed
 *       the switch still uses, until the sentinels make it a replica of the new master (it is
 *       restarted like a replica, so the next failover has a replica to promote); the fault lasts
 *       until it is {@code online}. (Not in CI-length runs: on a loaded machine the sentinels
 *       have been seen to go back to the restarted, empty node, which loses every key — Sentinel's
 *       failure, not the client's; {@code SentinelFormerMasterTest} covers the client's part.)</li>
 * </ul>
 * Every data node runs with Redis's default {@code repl-diskless-sync-delay} of 5 s (the
 * harness sets 0; it is set back after every start), so every full resync leaves the replica
 * connected but not {@code online} for at least 5 s. Faults follow each other with gaps of
 * 2-5 s.
 */
final class ModelFailovers implements ModelFaultDriver {
  /** Redis's default, which the test harness lowers to 0. */
  private static final String SYNC_DELAY = "5";
  /** Runs longer than this fail over every {@value #FAILOVER_EVERY_MILLIS} ms. */
  static final long SOAK_MILLIS = 120_000;
  private static final long FAILOVER_EVERY_MILLIS = 60_000;

  private final RedisSentinelSetup sentinels;
  private final ModelHistory history;
  private final Random random;
  private final long runMillis;
  private final Thread driver;
  private final Map<String, Integer> injected = new LinkedHashMap<>();
  private volatile boolean stopped;

  ModelFailovers(RedisSentinelSetup sentinels, long seed, long runMillis, ModelHistory history) {
    this.sentinels = sentinels;
    this.history = history;
    this.random = new Random(seed ^ 0x9E3779B97F4A7C15L);
    this.runMillis = runMillis;
    this.driver = new Thread(this::play, "model-failovers");
    this.driver.setDaemon(true);
  }

  /** Sets the default diskless-sync delay on the running data nodes. */
  static void defaultSyncDelay(List<RedisServer> nodes) {
    for (RedisServer node : nodes) {
      if (node.isRunning()) {
        node.withAdmin(jedis -> jedis.configSet("repl-diskless-sync-delay", SYNC_DELAY));
      }
    }
  }

  @Override
  public void start() {
    driver.start();
  }

  @Override
  public void stopAndHeal() throws InterruptedException {
    stopped = true;
    driver.join(90_000); // a fault in progress completes: the replica online, or promoted
  }

  @Override
  public synchronized Map<String, Integer> injectedCounts() {
    return new LinkedHashMap<>(injected);
  }

  private void play() {
    long origin = System.nanoTime();
    long at = 2_000 + random.nextInt(2_000);
    boolean soak = runMillis > SOAK_MILLIS;
    long nextFailover = soak ? FAILOVER_EVERY_MILLIS : runMillis * 2 / 3;
    try {
      while (!stopped && at < runMillis - 3_000) {
        while (!stopped && elapsed(origin) < at) {
          Thread.sleep(Math.min(50, at - elapsed(origin)));
        }
        if (stopped) {
          return;
        }
        if (at > nextFailover) {
          failover(soak);
          if (!soak) {
            return;
          }
          nextFailover += FAILOVER_EVERY_MILLIS;
        } else if (random.nextBoolean()) {
          stallReplica();
        } else {
          restartReplica();
        }
        at = elapsed(origin) + 2_000 + random.nextInt(3_001);
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    } catch (RuntimeException | AssertionError e) {
      history.violation("harness", "failovers", "replica fault failed: " + e);
    }
  }

  private static long elapsed(long origin) {
    return (System.nanoTime() - origin) / 1_000_000;
  }

  private void restartReplica() {
    RedisServer master = sentinels.master();
    RedisServer replica = sentinels.replica();
    long fullSyncs = fullSyncs(master);
    long start = ModelEvent.now();
    restartEmpty(replica);
    awaitOnline(master, replica);
    record("REPLICA_RESTART", replica, start, (fullSyncs(master) - fullSyncs) + " full sync");
  }

  /** See REPLICA_STALL in the class comment. */
  private void stallReplica() throws InterruptedException {
    RedisServer master = sentinels.master();
    RedisServer replica = sentinels.replica();
    long millis = 300 + random.nextInt(501);
    long start = ModelEvent.now();
    Thread slow = new Thread(() -> {
      try {
        replica.withAdmin(j -> j.eval("local t = redis.call('TIME') "
            + "local from = t[1] * 1000000 + t[2] repeat t = redis.call('TIME') "
            + "until t[1] * 1000000 + t[2] - from >= tonumber(ARGV[1]) return 1", 0,
            Long.toString(millis * 1_000)));
      } catch (RuntimeException e) {
        // the replica went away: the stall is over
      }
    }, "model-replica-stall");
    slow.setDaemon(true);
    slow.start();
    int unblocked = 0;
    while (slow.isAlive()) {
      for (String id : master.withAdmin(j -> j.clientList()).lines()
          .filter(l -> l.contains(" cmd=wait "))
          .map(l -> l.substring(3, l.indexOf(' '))).toList()) {
        unblocked += master.withAdmin(j -> j.clientUnblock(Long.parseLong(id),
            redis.clients.jedis.args.UnblockType.ERROR));
      }
      Thread.sleep(5);
    }
    record("REPLICA_STALL", replica, start, millis + "ms, " + unblocked
        + " WAITs unblocked with an error");
  }

  /**
   * Kills {@code node} and starts it again without the RDB file of its last sync, so that it
   * cannot ask for a partial resync, with the default sync delay.
   */
  private static void restartEmpty(RedisServer node) {
    node.kill();
    try {
      Files.deleteIfExists(node.logFile().resolveSibling("dump.rdb"));
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    node.restart();
    defaultSyncDelay(List.of(node));
  }

  private static long fullSyncs(RedisServer master) {
    return master.withAdmin(jedis -> jedis.info("stats")).lines()
        .filter(l -> l.startsWith("sync_full:")).mapToLong(l -> Long.parseLong(l.substring(10)
            .trim())).findFirst().orElse(-1);
  }

  /** Fails over; with {@code rejoin}, the old master then comes back empty, as a replica. */
  private void failover(boolean rejoin) {
    RedisServer old = sentinels.master();
    long start = ModelEvent.now();
    sentinels.failover();
    RedisServer promoted = sentinels.master();
    String text = "promoted " + promoted.port() + " after " + (ModelEvent.now() - start) / 1_000
        + "ms";
    if (rejoin) {
      restartEmpty(old);
      awaitOnline(promoted, old);
      text += ", old master online as its replica";
    }
    record("FAILOVER", old, start, text);
  }

  /** Waits (at most 120 s) until {@code master} reports {@code replica} online. */
  private static void awaitOnline(RedisServer master, RedisServer replica) {
    // Demotion (~10 s), the 5 s sync delay, then the full sync: slow on a loaded machine.
    long deadline = System.nanoTime() + 120_000_000_000L;
    String needle = "port=" + replica.port() + ",state=online";
    while (true) {
      try {
        String info = master.withAdmin(jedis -> jedis.info("replication"));
        if (info.contains(needle)) {
          return;
        }
      } catch (RuntimeException e) {
        // not answering yet
      }
      if (System.nanoTime() > deadline) {
        throw new IllegalStateException(replica + " did not come online under " + master);
      }
      try {
        Thread.sleep(100);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        return;
      }
    }
  }

  private void record(String kind, RedisServer target, long start, String text) {
    synchronized (this) {
      injected.merge(kind, 1, Integer::sum);
    }
    history.add(ModelEvent.Kind.FAULT, "", "faults", 0, "redis:" + target.port(), "", kind, "",
        start, ModelEvent.now(), 0, 0, 0, "", text);
  }
}

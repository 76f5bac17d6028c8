package dev.holdfast.engine;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.holdfast.DistributedLock;
import dev.holdfast.LockClient;
import dev.holdfast.LockException;
import dev.holdfast.testing.Await;
import dev.holdfast.testing.RedisExtension;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;
import redis.clients.jedis.HostAndPort;
import redis.clients.jedis.Jedis;

/**
 * Attack round 22 on unlock subscribers following a Sentinel switch ({@link
 * UnlockSubscriptions#followTopology}): the master switches twice in quick succession (manual
 * failovers, the demoted node staying up), with many waiters on many locks and timed waiters
 * whose deadlines fall during the switches.
 */
class SubscriberFollowAttackTest {

  @RegisterExtension
  final RedisExtension redis = RedisExtension.sentinel(); // fresh per test: failover is one-way

  @RegisterExtension
  final Clients clients = new Clients();

  private final ExecutorService threads = Executors.newCachedThreadPool();

  @AfterEach
  void stopThreads() {
    threads.shutdownNow();
  }

  private Map<String, String> config() {
    return Map.of("holdfast.redis.mode", "sentinel",
        "holdfast.redis.nodes", redis.sentinelSetup().sentinelNodes(),
        "holdfast.redis.sentinel.master", redis.sentinelSetup().masterName(),
        "holdfast.redis.timeout", "500ms");
  }

  /**
   * 20 locks held by {@code a} (watchdog lease, renewed: a waiter whose unlock message is lost
   * parks up to ~30 s); 200 waiters of {@code b} on them, and 10 timed waiters (tryLock 2 s).
   * Two manual failovers in a row (the master flaps back). Then each lock is released: every
   * waiter must get its lock within 15 s (woken by the message, not the lease), the timed
   * waiters must have given up close to their deadline, and {@code b} must not be left with
   * more than one subscriber connection per node, nor more than one reader thread per node.
   */
  @Test
  void flappingMaster_manyWaiters_allWake_deadlinesKept_noLeak() throws Exception {
    LockClient a = clients.create(config());
    LockClient b = clients.create(config());
    int locks = 20;
    List<DistributedLock> held = new ArrayList<>();
    for (int i = 0; i < locks; i++) {
      DistributedLock lock = a.getLock("flap-" + i);
      lock.lock();
      held.add(lock);
    }
    HostAndPort first = redis.sentinelSetup().currentMaster();
    try (Jedis master = new Jedis(first)) {
      assertEquals(1, master.waitReplicas(1, 5_000));
    }
    List<Future<Long>> waiters = new ArrayList<>();
    for (int i = 0; i < 200; i++) {
      waiters.add(Waiters.acquireAndRelease(threads, b.getLock("flap-" + (i % locks))));
    }
    Await.until(Duration.ofSeconds(20), () -> channels(first) >= locks, "waiters subscribed");
    List<Future<Long>> timed = timedWaiters(b, "flap");

    HostAndPort second = switchMaster(first);
    HostAndPort third = switchMaster(second);

    assertAnsweredNearDeadline(timed);
    long released = System.nanoTime();
    held.forEach(SubscriberFollowAttackTest::unlockOnNewMaster);
    assertWokenByUnlock(waiters, released);
    String name = clientName(b);
    for (HostAndPort node : List.of(first, second, third)) {
      Await.until(Duration.ofSeconds(20), () -> pubsubConnections(node, name) <= 1,
          "at most one subscriber connection of b on " + node);
    }
    Await.until(Duration.ofSeconds(20), () -> readerThreads(name) <= 2,
        "at most one subscriber reader thread of b per node");
  }

  /**
   * The unlock is published on the new master in the window between the switch and the
   * follow, while the former master (alive, its subscriber connection open) cannot be demoted
   * nor have its clients killed by the sentinels (refused by ACL, as for a partitioned node):
   * no copy of the message reaches it. (Without this the sentinels' CLIENT KILL of the demoted
   * node's clients moves the subscribers anyway, follow or not.) The waiter must still get the lock within a few seconds (the follow moves it and
   * it re-polls), not after the holder's 30 s lease.
   */
  @Test
  void unlockInTheWindow_demotedNodeHearsNothing_waiterStillWakes() throws Exception {
    LockClient a = clients.create(config());
    LockClient b = clients.create(config());
    DistributedLock lock = a.getLock("window-lock");
    lock.lock();
    HostAndPort before = redis.sentinelSetup().currentMaster();
    try (Jedis master = new Jedis(before)) {
      assertEquals(1, master.waitReplicas(1, 5_000));
    }
    Future<Long> waiter = Waiters.acquireAndRelease(threads, b.getLock("window-lock"));
    Await.until(Duration.ofSeconds(20), () -> channels(before) > 0, "waiter subscribed");
    cutOffFromSentinels(before);
    switchMaster(before);
    long released = System.nanoTime();
    unlockOnNewMaster(lock);
    long latency = TimeUnit.NANOSECONDS.toMillis(waiter.get(60, TimeUnit.SECONDS) - released);
    assertTrue(latency < 8_000, "woken after " + latency + " ms (the lease is 30 s)");
  }

  /**
   * The former master cannot be demoted (as {@link
   * #unlockInTheWindow_demotedNodeHearsNothing_waiterStillWakes}), with 200 waiters of {@code b}
   * on 20 locks and 10 timed waiters (tryLock 2 s) across the switch. Every waiter must get its
   * lock within 15 s of the unlocks (the lease is 30 s), the timed ones must answer close to
   * their deadline, and {@code b} must keep no subscriber connection nor reader thread on the
   * former master, and at most one of each on the new one.
   */
  @Test
  void partitionedFormerMaster_manyWaiters_allWake_deadlinesKept_noLeak() throws Exception {
    LockClient a = clients.create(config());
    LockClient b = clients.create(config());
    int locks = 20;
    List<DistributedLock> held = new ArrayList<>();
    for (int i = 0; i < locks; i++) {
      DistributedLock lock = a.getLock("part-" + i);
      lock.lock();
      held.add(lock);
    }
    HostAndPort before = redis.sentinelSetup().currentMaster();
    try (Jedis master = new Jedis(before)) {
      assertEquals(1, master.waitReplicas(1, 5_000));
    }
    List<Future<Long>> waiters = new ArrayList<>();
    for (int i = 0; i < 200; i++) {
      waiters.add(Waiters.acquireAndRelease(threads, b.getLock("part-" + (i % locks))));
    }
    Await.until(Duration.ofSeconds(20), () -> channels(before) >= locks, "waiters subscribed");
    cutOffFromSentinels(before);
    List<Future<Long>> timed = timedWaiters(b, "part");
    HostAndPort after = switchMaster(before);
    assertAnsweredNearDeadline(timed);
    long released = System.nanoTime();
    held.forEach(SubscriberFollowAttackTest::unlockOnNewMaster);
    assertWokenByUnlock(waiters, released);
    String name = clientName(b);
    Await.until(Duration.ofSeconds(20), () -> pubsubConnections(before, name) == 0,
        "no subscriber connection of b left on the former master");
    Await.until(Duration.ofSeconds(20), () -> readerThreads(name, before) == 0,
        "no reader thread of b left for the former master");
    assertTrue(pubsubConnections(after, name) <= 1, "one subscriber connection at most");
    assertTrue(readerThreads(name, after) <= 1, "one reader thread at most");
  }

  /**
   * Churn: once the waiters have followed to the new master (the former one partitioned as
   * above, still up and still calling itself master), the follow must settle — no reconnection
   * every 500 ms on either node while the waiters stay parked (the holder keeps the lock).
   */
  @Test
  void partitionedFormerMaster_parkedWaiters_followSettles_noReconnectChurn() throws Exception {
    LockClient a = clients.create(config());
    LockClient b = clients.create(config());
    DistributedLock lock = a.getLock("churn-lock");
    lock.lock();
    HostAndPort before = redis.sentinelSetup().currentMaster();
    try (Jedis master = new Jedis(before)) {
      assertEquals(1, master.waitReplicas(1, 5_000));
    }
    List<Future<Long>> waiters = new ArrayList<>();
    for (int i = 0; i < 10; i++) {
      waiters.add(Waiters.acquireAndRelease(threads, b.getLock("churn-lock")));
    }
    Await.until(Duration.ofSeconds(20), () -> channels(before) > 0, "waiters subscribed");
    cutOffFromSentinels(before);
    HostAndPort after = switchMaster(before);
    Await.until(Duration.ofSeconds(20), () -> channels(after) > 0 && channels(before) == 0,
        "waiters followed to the new master");
    long oldBefore = connectionsReceived(before);
    long newBefore = connectionsReceived(after);
    long start = System.nanoTime();
    Await.until(Duration.ofSeconds(30),
        () -> System.nanoTime() - start > TimeUnit.SECONDS.toNanos(4), "4 s observed");
    long onOld = connectionsReceived(before) - oldBefore - 1; // less this probe's own
    long onNew = connectionsReceived(after) - newBefore - 1;
    assertTrue(onOld <= 3, "connections opened on the former master in 4 s: " + onOld);
    assertTrue(onNew <= 6, "connections opened on the new master in 4 s: " + onNew);
    assertTrue(channels(after) > 0, "still subscribed on the new master");
    for (Future<Long> w : waiters) {
      assertFalse(w.isDone(), "the lock is a's all along");
    }
    lock.unlock();
    for (Future<Long> w : waiters) {
      w.get(60, TimeUnit.SECONDS);
    }
  }

  private static long connectionsReceived(HostAndPort node) {
    try (Jedis jedis = new Jedis(node)) {
      return jedis.info("stats").lines().filter(l -> l.startsWith("total_connections_received:"))
          .mapToLong(l -> Long.parseLong(l.substring(l.indexOf(':') + 1).trim())).findFirst()
          .orElseThrow();
    }
  }

  private static long readerThreads(String clientName, HostAndPort node) {
    return Thread.getAllStackTraces().keySet().stream().filter(t -> t.isAlive()
        && t.getName().equals(clientName + "-subscriber-" + node)).count();
  }

  /** Ten threads of {@code b} trying {@code prefix-0..9} for 2 s each; their answers' time. */
  private List<Future<Long>> timedWaiters(LockClient b, String prefix) {
    List<Future<Long>> timed = new ArrayList<>();
    for (int i = 0; i < 10; i++) {
      DistributedLock lock = b.getLock(prefix + "-" + i);
      timed.add(threads.submit(() -> {
        long start = System.nanoTime();
        try {
          assertFalse(lock.tryLock(2, TimeUnit.SECONDS), "held by a all along");
        } catch (LockException e) {
          // a switch refused the attempt: an answer, within the deadline all the same
        }
        return TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
      }));
    }
    return timed;
  }

  private static void assertAnsweredNearDeadline(List<Future<Long>> timed) throws Exception {
    for (Future<Long> t : timed) {
      long took = t.get(30, TimeUnit.SECONDS);
      assertTrue(took < 12_000, "tryLock(2 s) answered after " + took + " ms");
    }
  }

  /** Unlocks {@code lock}, retrying while the client has not yet noticed the switch. */
  private static void unlockOnNewMaster(DistributedLock lock) {
    Await.until(Duration.ofSeconds(20), () -> {
      try {
        lock.unlock();
        return true;
      } catch (LockException e) {
        return false;
      }
    }, "unlock on the new master");
  }

  /** Every waiter got its lock within 15 s of {@code released}: the lease (30 s) did not. */
  private static void assertWokenByUnlock(List<Future<Long>> waiters, long released)
      throws Exception {
    for (Future<Long> w : waiters) {
      long latency = TimeUnit.NANOSECONDS.toMillis(w.get(60, TimeUnit.SECONDS) - released);
      assertTrue(latency < 15_000, "a waiter was woken by the lease, not the unlock: "
          + latency + " ms");
    }
  }

  /**
   * As if the sentinels could not reach {@code node} (partitioned): they cannot demote it nor
   * kill its clients, so it stays master, keeps its subscribers and hears no publish of the new
   * master.
   */
  private static void cutOffFromSentinels(HostAndPort node) {
    try (Jedis old = new Jedis(node)) {
      old.aclSetUser("default", "-replicaof", "-slaveof", "-client|kill");
    }
  }

  private HostAndPort switchMaster(HostAndPort before) {
    HostAndPort sentinel = redis.sentinelSetup().sentinels().iterator().next();
    Await.until(Duration.ofSeconds(30), () -> {
      try (Jedis jedis = new Jedis(sentinel)) {
        jedis.sentinelFailover(redis.sentinelSetup().masterName());
        return true;
      } catch (RuntimeException e) {
        return false; // INPROG / NOGOODSLAVE while the last switch settles
      }
    }, "a failover accepted");
    Await.until(Duration.ofSeconds(30), () -> !redis.sentinelSetup().currentMaster().equals(before)
        && isMaster(redis.sentinelSetup().currentMaster()), "sentinels promoted the replica");
    return redis.sentinelSetup().currentMaster();
  }

  private static String clientName(LockClient client) {
    return "holdfast-" + Clients.engine(client).clientId().substring(0, 8);
  }

  private static long readerThreads(String clientName) {
    return Thread.getAllStackTraces().keySet().stream()
        .filter(t -> t.isAlive() && t.getName().startsWith(clientName + "-subscriber-")).count();
  }

  private static long pubsubConnections(HostAndPort node, String clientName) {
    try (Jedis jedis = new Jedis(node)) {
      return jedis.clientList().lines()
          .filter(l -> l.contains("name=" + clientName) && l.contains(" sub=") && !l.contains(
              " sub=0 ")).count();
    }
  }

  private static boolean isMaster(HostAndPort node) {
    try (Jedis jedis = new Jedis(node)) {
      return jedis.role().get(0).equals("master");
    } catch (RuntimeException e) {
      return false;
    }
  }

  private static long channels(HostAndPort node) {
    try (Jedis jedis = new Jedis(node)) {
      return jedis.pubsubChannels("redisson_lock__channel:*").size();
    } catch (RuntimeException e) {
      return 0;
    }
  }
}

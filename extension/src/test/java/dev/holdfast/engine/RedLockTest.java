package dev.holdfast.engine;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.holdfast.DistributedLock;
import dev.holdfast.LockClient;
import dev.holdfast.LockException;
import dev.holdfast.testing.Await;
import dev.holdfast.testing.ExclusionProbe;
import dev.holdfast.testing.RedisExtension;
import dev.holdfast.testing.RedisServer;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;
import redis.clients.jedis.Jedis;

/** The Redlock algorithm over three independent redis-servers, fresh for each test. */
class RedLockTest {

  @RegisterExtension
  final RedisExtension redis1 = RedisExtension.standalone();
  @RegisterExtension
  final RedisExtension redis2 = RedisExtension.standalone();
  @RegisterExtension
  final RedisExtension redis3 = RedisExtension.standalone();

  @RegisterExtension
  final Clients clients = new Clients();

  private final ExecutorService threads = Executors.newCachedThreadPool();

  @AfterEach
  void stopThreads() {
    threads.shutdownNow();
  }

  private List<RedisServer> servers() {
    return List.of(redis1.server(), redis2.server(), redis3.server());
  }

  /** One "process": a client per server, short timeouts so a dead server costs little. */
  private List<LockClient> process() {
    List<LockClient> process = new ArrayList<>();
    for (RedisServer server : servers()) {
      process.add(clients.create(java.util.Map.of("holdfast.redis.address", server.uri(),
          "holdfast.redis.timeout", "300ms")));
    }
    return process;
  }

  private static DistributedLock redLock(List<LockClient> process, String name) {
    return process.get(0).getRedLock(process.stream().map(c -> c.getLock(name))
        .toArray(DistributedLock[]::new));
  }

  private boolean keyOn(RedisServer server, String key) {
    try (Jedis jedis = server.admin()) {
      return jedis.exists(key);
    }
  }

  /**
   * The {@code DistributedLock#unlock} contract: the IllegalMonitorStateException says whether
   * the lock was lost rather than never held — also when the first server is one whose vote the
   * RedLock never won. Found while making {@code LockModelTest} drive a RedLock (its judge's
   * {@code loss-report} rule): {@code RedLock#unlock} quoted the first member's failure only, and
   * a member never held answers "is not held"; it now quotes a member's loss first.
   */
  @Test
  void unlock_majorityForceUnlocked_firstVoteNeverWon_saysLost() throws Exception {
    List<LockClient> rival = process();
    DistributedLock first = rival.get(0).getLock("res");
    first.lock();
    DistributedLock lock = redLock(process(), "res");
    assertTrue(lock.tryLock(), "servers 2 and 3: a majority");
    rival.get(1).getLock("res").forceUnlock();
    rival.get(2).getLock("res").forceUnlock();

    IllegalMonitorStateException e = assertThrows(IllegalMonitorStateException.class,
        lock::unlock);
    assertTrue(ModelActor.mentionsLost(e.getMessage()), "says lost: " + e.getMessage());
    first.unlock();
  }

  /**
   * As above, with the first server down at unlock(): its error is quoted (LockModelTest seed
   * -7797125210153282437: "was held … on 0 of 3 servers …, fewer than a majority (2) …: Redis
   * did not answer"), not the losses that make the IllegalMonitorStateException.
   */
  @Test
  void unlock_majorityForceUnlocked_firstServerDown_saysLost() {
    List<LockClient> rival = process();
    DistributedLock lock = redLock(process(), "res");
    lock.lock();
    rival.get(1).getLock("res").forceUnlock();
    rival.get(2).getLock("res").forceUnlock();
    redis1.server().kill();

    IllegalMonitorStateException e = assertThrows(IllegalMonitorStateException.class,
        lock::unlock);
    assertTrue(ModelActor.mentionsLost(e.getMessage()), "says lost: " + e.getMessage());
  }

  @Test
  void lock_takesEveryServer_andUnlockReleasesEverywhere() {
    List<LockClient> process = process();
    DistributedLock lock = redLock(process, "res");
    assertEquals("res", lock.getName());
    lock.lock();
    for (RedisServer server : servers()) {
      assertTrue(keyOn(server, "res"), server + " has the lock");
    }
    assertTrue(lock.isLocked());
    assertTrue(lock.isHeldByCurrentThread());
    assertEquals(1, lock.getHoldCount());
    long ttl = lock.remainTimeToLive();
    assertTrue(ttl > 20_000 && ttl <= 30_000, "watchdog lease " + ttl);
    lock.unlock();
    for (RedisServer server : servers()) {
      assertFalse(keyOn(server, "res"), server + " released");
    }
    assertFalse(lock.isLocked());
  }

  @Test
  void oneServerKilled_aMajorityStillAcquires_quickly() throws Exception {
    List<LockClient> process = process();
    DistributedLock lock = redLock(process, "res");
    redis3.server().kill();
    long start = System.nanoTime();
    assertTrue(lock.tryLock(5, 30, TimeUnit.SECONDS));
    long took = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
    assertTrue(took < 2_000, "a refused connection is a fast failed vote: " + took + "ms");
    assertTrue(keyOn(redis1.server(), "res"));
    assertTrue(keyOn(redis2.server(), "res"));
    assertTrue(lock.isHeldByCurrentThread(), "held while a majority is");
    assertTrue(lock.isLocked());
    lock.unlock(); // released on the two that answer: a majority
    assertFalse(keyOn(redis1.server(), "res"));
    assertFalse(keyOn(redis2.server(), "res"));
  }

  @Test
  void majorityOfServersDown_failsAndHoldsNothing() {
    List<LockClient> process = process();
    DistributedLock lock = redLock(process, "res");
    redis2.server().kill();
    redis3.server().kill();
    LockException e = assertThrows(LockException.class,
        () -> lock.tryLock(300, TimeUnit.MILLISECONDS));
    assertTrue(e.getMessage().contains("cannot reach a majority (2 of 3)"), e.getMessage());
    assertFalse(keyOn(redis1.server(), "res"), "the one vote won was given back");
  }

  @Test
  void majorityHeldByAnother_fails_minorityHeldByAnother_succeeds() throws Exception {
    List<LockClient> process = process();
    List<LockClient> rival = process();
    DistributedLock lock = redLock(process, "res");
    DistributedLock on1 = rival.get(0).getLock("res");
    DistributedLock on2 = rival.get(1).getLock("res");
    on1.lock();
    on2.lock();
    assertFalse(lock.tryLock(300, TimeUnit.MILLISECONDS));
    assertFalse(keyOn(redis3.server(), "res"), "the vote won on server 3 was given back");
    on2.unlock();
    assertTrue(lock.tryLock(2, TimeUnit.SECONDS), "servers 2 and 3 are a majority");
    assertTrue(lock.isHeldByCurrentThread());
    lock.unlock(); // server 1 is not ours: skipped
    assertTrue(on1.isHeldByCurrentThread(), "the rival's lock on server 1 is untouched");
    assertFalse(keyOn(redis2.server(), "res"));
    assertFalse(keyOn(redis3.server(), "res"));
    on1.unlock();
  }

  @Test
  void validity_slowRoundThatOutlastsTheLease_fails_andReleasesEverything() throws Exception {
    List<LockClient> process = process();
    List<LockClient> slowFirst = List.of(
        clients.create(java.util.Map.of("holdfast.redis.address", redis3.server().uri())),
        process.get(0), process.get(1));
    DistributedLock lock = redLock(slowFirst, "res");
    // Server 3 answers only after 1.2 s: every vote is won, but a 1 s lease is then over.
    redis3.server().clientPause(Duration.ofMillis(1_200));
    assertFalse(lock.tryLock(0, 1_000, TimeUnit.MILLISECONDS));
    assertFalse(keyOn(redis1.server(), "res"), "released at once, not left to expire");
    assertFalse(keyOn(redis2.server(), "res"), "released at once, not left to expire");
    // Server 3's own client counts that lease from when it sent the vote, so it believes it
    // over already and sends no release: Redis lets it expire.
    Await.until(Duration.ofSeconds(5), () -> !keyOn(redis3.server(), "res"), "server 3 expiry");
    // The same slow round with a lease that outlasts it holds.
    redis3.server().clientPause(Duration.ofMillis(1_200));
    assertTrue(lock.tryLock(0, 10_000, TimeUnit.MILLISECONDS));
    lock.unlock();
    assertEquals(102, RedLock.driftMillis(10_000));
    assertEquals(10_000 - 1 - 102, RedLock.validityMillis(10_000, 0));
    assertEquals(30_000 - 501 - 302, RedLock.validityMillis(30_000,
        TimeUnit.MILLISECONDS.toNanos(500)));
  }

  @Test
  void twoRedLocks_excludeEachOther_andBothMakeProgress() throws Exception {
    DistributedLock mine = redLock(process(), "res");
    DistributedLock theirs = redLock(process(), "res");
    mine.lock();
    assertFalse(theirs.tryLock());
    Future<Boolean> waiter = threads.submit(() -> {
      boolean got = theirs.tryLock(10, TimeUnit.SECONDS);
      theirs.unlock();
      return got;
    });
    mine.unlock();
    assertTrue(waiter.get(15, TimeUnit.SECONDS));

    ExclusionProbe probe = new ExclusionProbe();
    AtomicInteger done = new AtomicInteger();
    CountDownLatch start = new CountDownLatch(1);
    List<Future<?>> workers = new ArrayList<>();
    for (DistributedLock lock : List.of(mine, theirs, redLock(process(), "res"))) {
      workers.add(threads.submit(() -> {
        start.await();
        for (int r = 0; r < 10; r++) {
          lock.lock();
          try {
            probe.enter();
            Thread.yield();
            done.incrementAndGet();
            probe.exit();
          } finally {
            lock.unlock();
          }
        }
        return null;
      }));
    }
    start.countDown();
    for (Future<?> w : workers) {
      w.get(60, TimeUnit.SECONDS);
    }
    assertEquals(0, probe.overlaps());
    assertEquals(30, done.get());
  }

  @Test
  void reentrant_andQueriesCountAMajority() throws Exception {
    List<LockClient> process = process();
    DistributedLock lock = redLock(process, "res");
    lock.lock(5, TimeUnit.SECONDS);
    assertTrue(lock.tryLock(0, 5, TimeUnit.SECONDS));
    assertEquals(2, lock.getHoldCount());
    redis3.server().kill(); // a minority gone: the hold stands
    assertTrue(lock.isHeldByCurrentThread());
    assertEquals(2, lock.getHoldCount());
    long ttl = lock.remainTimeToLive();
    assertTrue(ttl > 3_000 && ttl <= 5_000, "ttl " + ttl);
    lock.unlock();
    assertTrue(lock.isLocked());
    lock.unlock();
    assertFalse(lock.isLocked());
    assertThrows(IllegalMonitorStateException.class, lock::unlock);
  }

  @Test
  void getRedLock_rejectsDuplicatesAndForeignLocks() {
    List<LockClient> process = process();
    LockClient c = process.get(0);
    IllegalArgumentException twice = assertThrows(IllegalArgumentException.class,
        () -> c.getRedLock(c.getLock("res"), process.get(1).getLock("res"), c.getLock("res")));
    assertTrue(twice.getMessage().contains("two votes"), twice.getMessage());
    IllegalArgumentException foreign = assertThrows(IllegalArgumentException.class,
        () -> c.getRedLock(c.getMultiLock(c.getLock("a"))));
    assertTrue(foreign.getMessage().contains("lock 0"), foreign.getMessage());
    assertThrows(IllegalArgumentException.class, () -> c.getRedLock());
  }
}

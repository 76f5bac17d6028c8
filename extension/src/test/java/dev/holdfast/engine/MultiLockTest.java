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
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Function;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;
import redis.clients.jedis.Jedis;

/**
 * What only a multi-lock promises: all or nothing, no deadlock in any order, members from
 * different clients and Redis servers. (The contract every lock keeps is in
 * {@link LockContractTest}.)
 */
class MultiLockTest {

  @RegisterExtension
  static final RedisExtension redis = RedisExtension.standalone();

  /** A second, independent Redis deployment. */
  @RegisterExtension
  static final RedisExtension redis2 = RedisExtension.standalone();

  @RegisterExtension
  final Clients clients = new Clients();

  private final ExecutorService threads = Executors.newCachedThreadPool();
  private LockClient client;
  private LockClient other;

  @BeforeEach
  void setUp() {
    redis.flushAll();
    redis2.flushAll();
    client = clients.create(redis.config());
    other = clients.create(redis.config());
  }

  @AfterEach
  void stopThreads() {
    threads.shutdownNow();
  }

  @Test
  void getMultiLock_rejectsNoLocksNullsAndTheSameLockTwice() {
    IllegalArgumentException empty =
        assertThrows(IllegalArgumentException.class, () -> client.getMultiLock());
    assertTrue(empty.getMessage().contains("at least one lock"), empty.getMessage());
    assertThrows(IllegalArgumentException.class,
        () -> client.getMultiLock((DistributedLock[]) null));
    IllegalArgumentException nul = assertThrows(IllegalArgumentException.class,
        () -> client.getMultiLock(client.getLock("a"), null));
    assertTrue(nul.getMessage().contains("lock 1 of 2 is null"), nul.getMessage());
    DistributedLock a = client.getLock("a");
    IllegalArgumentException twice = assertThrows(IllegalArgumentException.class,
        () -> client.getMultiLock(a, client.getLock("b"), a));
    assertTrue(twice.getMessage().contains("'a' is lock 0 and lock 2"), twice.getMessage());
    assertThrows(IllegalArgumentException.class,
        () -> client.getMultiLock(client.getLock("a"), client.getFencedLock("a")),
        "two handles of one client for one name are the same lock");
    // The same name through another client is another holder (maybe another deployment).
    assertEquals("multi[a, a]", client.getMultiLock(a, other.getLock("a")).getName());
  }

  @Test
  void tryLock_memberHeldByAnotherClient_failsAndHoldsNone() throws Exception {
    DistributedLock b = other.getLock("b");
    b.lock();
    DistributedLock multi = client.getMultiLock(client.getLock("a"), client.getLock("b"),
        client.getLock("c"));
    assertFalse(multi.tryLock());
    assertFalse(multi.tryLock(300, TimeUnit.MILLISECONDS));
    assertFalse(multi.tryLock(100, 5_000, TimeUnit.MILLISECONDS));
    try (Jedis jedis = redis.server().admin()) {
      assertFalse(jedis.exists("a"), "a given back");
      assertFalse(jedis.exists("c"), "c given back");
    }
    assertTrue(Clients.engine(client).holds().isEmpty());
    b.unlock();
    assertTrue(multi.tryLock());
    try (Jedis jedis = redis.server().admin()) {
      assertEquals(3, jedis.exists("a", "b", "c"));
    }
    assertTrue(multi.isHeldByCurrentThread());
    multi.unlock();
    try (Jedis jedis = redis.server().admin()) {
      assertEquals(0, jedis.exists("a", "b", "c"));
    }
  }

  @Test
  void waiter_getsAllOnceTheBusyMemberIsFree() throws Exception {
    DistributedLock b = other.getLock("b");
    b.lock();
    DistributedLock multi = client.getMultiLock(client.getLock("a"), client.getLock("b"));
    Future<Boolean> waiter = threads.submit(() -> {
      if (!multi.tryLock(20, TimeUnit.SECONDS)) {
        return false;
      }
      boolean all = multi.isHeldByCurrentThread();
      multi.unlock();
      return all;
    });
    dev.holdfast.testing.Await.until(java.time.Duration.ofSeconds(5),
        () -> Clients.engine(client).waitedChannels().contains("redisson_lock__channel:{b}"),
        "waiting for b");
    // While it waits for b it holds nothing, so a stays free for others.
    DistributedLock a = other.getLock("a");
    assertTrue(a.tryLock(5, TimeUnit.SECONDS), "a is not kept while b is busy");
    a.unlock();
    b.unlock();
    assertTrue(waiter.get(10, TimeUnit.SECONDS));
  }

  @Test
  void leases_arePassedToEveryMember_andTheWatchdogKeepsEachOtherwise() {
    DistributedLock multi = client.getMultiLock(client.getLock("a"), client.getLock("b"));
    multi.lock(2, TimeUnit.SECONDS);
    for (String name : List.of("a", "b")) {
      long ttl = client.getLock(name).remainTimeToLive();
      assertTrue(ttl > 1_000 && ttl <= 2_000, name + " ttl " + ttl);
    }
    assertTrue(multi.remainTimeToLive() <= 2_000);
    multi.unlock();
    multi.lock();
    for (String name : List.of("a", "b")) {
      long ttl = client.getLock(name).remainTimeToLive();
      assertTrue(ttl > 20_000 && ttl <= 30_000, name + " watchdog ttl " + ttl);
    }
    multi.unlock();
    assertFalse(multi.isLocked());
  }

  @Test
  void unlock_withOneMemberLost_releasesTheOthers_andSaysWhich() {
    DistributedLock multi = client.getMultiLock(client.getLock("a"), client.getLock("b"),
        client.getLock("c"));
    multi.lock();
    try (Jedis jedis = redis.server().admin()) {
      jedis.del("b"); // as if Redis lost it
    }
    IllegalMonitorStateException e =
        assertThrows(IllegalMonitorStateException.class, multi::unlock);
    assertTrue(e.getMessage().contains("[b]") && e.getMessage().contains("2 of 3 released")
        && e.getMessage().contains("lost"), e.getMessage());
    assertEquals(1, e.getSuppressed().length);
    assertFalse(multi.isLocked(), "a and c released although b failed");
  }

  /**
   * A retried unlock() finishes the failed one and releases no member twice (found by the
   * cluster model test: a release refused by a migration, then the retry released the other
   * member a second time and reported it "not held", with no loss at all).
   */
  @Test
  void unlock_retriedAfterOneMemberWasRefused_releasesOnlyThatMember() {
    LockClient onServer2 = clients.create(redis2.config());
    DistributedLock a = client.getLock("a");
    DistributedLock b = onServer2.getLock("b");
    DistributedLock multi = client.getMultiLock(a, b);
    multi.lock();
    multi.lock();
    try (Jedis two = redis2.server().admin()) {
      two.configSet("min-replicas-to-write", "1"); // every write refused: b's release never runs
      LockException e = assertThrows(LockException.class, multi::unlock);
      assertTrue(e.getMessage().contains("1 of 2 released"), e.getMessage());
      two.configSet("min-replicas-to-write", "0");
    }
    // The same release again, through a new handle as applications do: only b is owed one.
    client.getMultiLock(a, b).unlock();
    assertEquals(1, a.getHoldCount(), "a released once per unlock()");
    assertEquals(1, b.getHoldCount());
    assertEquals(1, multi.getHoldCount());
    multi.unlock();
    assertFalse(multi.isLocked());
    assertThrows(IllegalMonitorStateException.class, multi::unlock);
  }

  /** A member lost while another's release failed: the retry reports the loss once done. */
  @Test
  void unlock_retriedAfterAFailure_reportsTheMemberLostBefore() {
    LockClient onServer2 = clients.create(redis2.config());
    DistributedLock multi = client.getMultiLock(client.getLock("a"), onServer2.getLock("b"));
    multi.lock();
    try (Jedis one = redis.server().admin(); Jedis two = redis2.server().admin()) {
      one.del("a"); // as if Redis lost it
      two.configSet("min-replicas-to-write", "1");
      assertThrows(LockException.class, multi::unlock);
      two.configSet("min-replicas-to-write", "0");
    }
    IllegalMonitorStateException e =
        assertThrows(IllegalMonitorStateException.class, multi::unlock);
    assertTrue(e.getMessage().contains("lost") && e.getMessage().contains("[a]"),
        e.getMessage());
    assertFalse(multi.isLocked());
  }

  /**
   * A member whose inner release ran but ended its hold (the outer section's fixed lease was
   * over) while another member's release failed: the thread knows the multi-lock is lost, so
   * the retry that finishes the inner unlock says so, naming that member, after releasing the
   * other (found by the model test: the retry returned normally although the loss was reported
   * before it).
   */
  @Test
  void unlock_retriedAfterAFailure_memberLostAtItsInnerRelease_reportsTheLoss()
      throws Exception {
    LockClient onServer2 = clients.create(redis2.config());
    LossRecorder lost = LossRecorder.on(client);
    LossRecorder lost2 = LossRecorder.on(onServer2);
    DistributedLock multi = client.getMultiLock(client.getLock("a"), onServer2.getLock("b"));
    long start = System.nanoTime();
    multi.lock(300, TimeUnit.MILLISECONDS);
    multi.lock(30, TimeUnit.SECONDS);
    long outerOver = start + TimeUnit.MILLISECONDS.toNanos(600);
    Await.until(Duration.ofSeconds(5), () -> System.nanoTime() - outerOver > 0,
        "the outer section's lease is over");
    try (Jedis two = redis2.server().admin()) {
      two.configSet("min-replicas-to-write", "1"); // b's release is refused: it stays owed
      assertThrows(LockException.class, multi::unlock);
      two.configSet("min-replicas-to-write", "0");
    }
    // a's inner release ran and released the lock: its outer section had no lease left.
    lost.awaitFirst(Duration.ofSeconds(5), "a released at its inner unlock()");
    try (Jedis one = redis.server().admin()) {
      assertFalse(one.exists("a"), "a released at the inner unlock()");
    }

    IllegalMonitorStateException e =
        assertThrows(IllegalMonitorStateException.class, multi::unlock);
    assertTrue(e.getMessage().contains("lost") && e.getMessage().contains("[a]"),
        e.getMessage());
    assertFalse(multi.isLocked(), "b released by the retry all the same");
    // LockLost reaches listeners on the event thread: await b's before counting.
    lost2.awaitFirst(Duration.ofSeconds(10), "b's loss (its outer section is lost too)");
    assertEquals(1, lost.count(), "a reported once: " + lost);
    assertEquals(1, lost2.count(), "b reported once (its outer section is lost too): " + lost2);
    // The outer sections: lost, each says so once; then nothing is held.
    IllegalMonitorStateException outer =
        assertThrows(IllegalMonitorStateException.class, multi::unlock);
    assertTrue(outer.getMessage().contains("lost"), outer.getMessage());
    IllegalMonitorStateException none =
        assertThrows(IllegalMonitorStateException.class, multi::unlock);
    assertTrue(none.getMessage().contains("is not held"), none.getMessage());
    assertEquals(1, lost.count(), lost.toString());
    assertEquals(1, lost2.count(), lost2.toString());
  }

  @Test
  void unlock_notHeld_throwsNamingTheMultiLock() {
    DistributedLock multi = client.getMultiLock(client.getLock("a"), client.getLock("b"));
    IllegalMonitorStateException e =
        assertThrows(IllegalMonitorStateException.class, multi::unlock);
    assertTrue(e.getMessage().startsWith("Multi-lock multi[a, b] is not held by"),
        e.getMessage());
    assertEquals(2, e.getSuppressed().length);
  }

  @Test
  void oppositeOrders_inTwoThreadsOfTwoClients_allFinishWithoutOverlap() throws Exception {
    LockClient second = clients.create(redis.config());
    List<Function<LockClient, DistributedLock>> orders = List.of(
        c -> c.getMultiLock(c.getLock("left"), c.getLock("right")),
        c -> c.getMultiLock(c.getLock("right"), c.getLock("left")));
    List<DistributedLock> locks = new ArrayList<>();
    for (LockClient c : List.of(client, second)) {
      for (Function<LockClient, DistributedLock> order : orders) {
        locks.add(order.apply(c));
      }
    }
    assertEquals(80, contend(locks, 20));
  }

  /**
   * The members' names tie (one name on two deployments), so sorting cannot line the two orders
   * up: only the back-off keeps them from deadlocking.
   */
  @Test
  void sameNameOnTwoServers_inOppositeOrders_backOffLetsBothFinish() throws Exception {
    LockClient p1Server1 = client;
    LockClient p1Server2 = clients.create(redis2.config());
    LockClient p2Server1 = other;
    LockClient p2Server2 = clients.create(redis2.config());
    DistributedLock forwards = p1Server1.getMultiLock(p1Server1.getLock("job"),
        p1Server2.getLock("job"));
    DistributedLock backwards = p2Server2.getMultiLock(p2Server2.getLock("job"),
        p2Server1.getLock("job"));
    assertEquals(40, contend(List.of(forwards, backwards), 20));
  }

  @Test
  void membersOnTwoServers_allOrNothing() throws Exception {
    LockClient onServer2 = clients.create(redis2.config());
    DistributedLock there = clients.create(redis2.config()).getLock("b");
    there.lock();
    DistributedLock multi = client.getMultiLock(client.getLock("a"), onServer2.getLock("b"));
    assertFalse(multi.tryLock(200, TimeUnit.MILLISECONDS));
    assertFalse(client.getLock("a").isLocked(), "nothing kept on server 1");
    there.unlock();
    multi.lock();
    try (Jedis one = redis.server().admin(); Jedis two = redis2.server().admin()) {
      assertTrue(one.exists("a"));
      assertTrue(two.exists("b"));
      assertFalse(one.exists("b"));
    }
    multi.unlock();
    assertFalse(multi.isLocked());
  }

  /**
   * Soak cluster 509590143631627962 {@code [loss-report]}: a {@code LockLost} for member
   * {@code n0} of a thread that did not hold the multi-lock. A round of an acquisition took
   * {@code n0}; while it tried the next member (busy), another client force-unlocked {@code n0};
   * the round gave up and gave {@code n0} back, found it gone, and reported it lost — a hold the
   * application never had. A member an acquisition takes and gives back is not the
   * application's: finding it gone is no loss, and the call simply did not acquire. Here the
   * busy member is a gate the test opens once {@code n0} is gone, so the order is certain.
   */
  @Test
  void memberTakenThenForceUnlockedWhileTheRoundGivesUp_isNotReportedLost() throws Exception {
    LossRecorder lost = LossRecorder.on(client);
    CountDownLatch tried = new CountDownLatch(1);
    CountDownLatch open = new CountDownLatch(1);
    DistributedLock gate = busyGate(tried, open); // named "zz-gate": tried after "n0"
    DistributedLock multi = client.getMultiLock(client.getLock("n0"), gate);
    Future<Boolean> acquired = threads.submit(() -> multi.tryLock());
    assertTrue(tried.await(10, TimeUnit.SECONDS), "the round took n0 and tries the gate");
    assertTrue(client.getLock("n0").isLocked());
    assertTrue(other.getLock("n0").forceUnlock(), "another client force-unlocks n0");
    open.countDown();
    assertFalse(acquired.get(10, TimeUnit.SECONDS), "not acquired: the gate stayed busy");
    assertEquals(0, lost.count(), "a member the application never held reported lost: " + lost);
    // The thread holds nothing: n0 can be taken again at once, by anyone.
    DistributedLock n0 = other.getLock("n0");
    assertTrue(n0.tryLock());
    n0.unlock();
  }

  /**
   * A re-entry round of a multi-lock re-entered {@code n0}, the next member failed, and the
   * give-back of the extra {@code n0} section was refused by Redis (it did not run): the thread
   * believes it holds the multi-lock once, so its one unlock() must leave {@code n0} free — the
   * refused give-back is finished first, not left for the thread's end (CI replay of standalone
   * -4693406884787565169, the variant where the give-back did not run).
   */
  @Test
  void reentryRoundFails_giveBackRefused_oneUnlockReleasesTheMember() {
    DistributedLock n0 = client.getLock("n0");
    try (Jedis admin = redis.server().admin()) {
      DistributedLock n1 = failingMember("n1", 1,
          () -> admin.configSet("min-replicas-to-write", "1"), "connection reset");
      DistributedLock multi = client.getMultiLock(n0, n1);
      multi.lock();
      try {
        assertThrows(LockException.class, multi::lock, "n1's re-entry failed");
      } finally {
        admin.configSet("min-replicas-to-write", "0");
      }
      multi.unlock();
      assertFalse(admin.exists("n0"), "n0 left held after the thread's only unlock");
      assertFalse(n0.isHeldByCurrentThread());
      assertThrows(IllegalMonitorStateException.class, multi::unlock);
    }
  }

  /**
   * The same refused give-back, then the thread acquires the multi-lock again: the acquisition
   * finishes the give-back before it re-enters, so two unlocks leave every member free (not
   * three, one of them never to come).
   */
  @Test
  void reentryRoundFails_giveBackRefused_nextAcquisitionFinishesItFirst() {
    DistributedLock n0 = client.getLock("n0");
    try (Jedis admin = redis.server().admin()) {
      DistributedLock n1 = failingMember("n1", 1,
          () -> admin.configSet("min-replicas-to-write", "1"), "connection reset");
      DistributedLock multi = client.getMultiLock(n0, n1);
      multi.lock();
      try {
        assertThrows(LockException.class, multi::lock, "n1's re-entry failed");
      } finally {
        admin.configSet("min-replicas-to-write", "0");
      }
      String field = RedisProbe.fieldOf(client);
      assertEquals("2", admin.hget("n0", field), "the give-back did not run");
      multi.lock();
      assertEquals("2", admin.hget("n0", field), "given back, then re-entered");
      multi.unlock();
      multi.unlock();
      assertFalse(admin.exists("n0"), "n0 left held after the thread's last unlock");
      assertThrows(IllegalMonitorStateException.class, multi::unlock);
    }
  }

  /**
   * A refused give-back, then the member is force-unlocked by another client: the thread's one
   * unlock() reports the loss once (the give-back's section closes silently), and the thread
   * holds nothing of {@code n0} afterwards — it can take the multi-lock afresh at once.
   */
  @Test
  void reentryRoundFails_giveBackRefused_memberThenForceUnlocked_lossReportedOnce() {
    LossRecorder lost = LossRecorder.on(client);
    DistributedLock n0 = client.getLock("n0");
    try (Jedis admin = redis.server().admin()) {
      DistributedLock n1 = failingMember("n1", 1,
          () -> admin.configSet("min-replicas-to-write", "1"), "connection reset");
      DistributedLock multi = client.getMultiLock(n0, n1);
      multi.lock();
      try {
        assertThrows(LockException.class, multi::lock, "n1's re-entry failed");
      } finally {
        admin.configSet("min-replicas-to-write", "0");
      }
      assertTrue(other.getLock("n0").forceUnlock());
      IllegalMonitorStateException e =
          assertThrows(IllegalMonitorStateException.class, multi::unlock);
      assertTrue(e.getMessage().contains("[n0]") && e.getMessage().contains("lost"),
          e.getMessage());
      assertEquals("n0", lost.awaitFirst(java.time.Duration.ofSeconds(10), "n0 force-unlocked")
          .event().lockName());
      assertFalse(n0.isHeldByCurrentThread());
      assertTrue(multi.tryLock(), "taken afresh: no open section of the lost hold is left");
      multi.unlock();
      assertFalse(admin.exists("n0"));
      assertThrows(IllegalMonitorStateException.class, n0::unlock, "nothing left open");
      assertEquals(1, lost.count(), "n0's loss reported once, nothing else: " + lost);
    }
  }

  /**
   * A member of another library (not a lock of this engine) named {@code name}: its first
   * {@code successes} acquisitions succeed; the next runs {@code onFailure} (to arm a fault for
   * what the multi-lock does next) and throws a {@link LockException} saying {@code failure};
   * later ones succeed again. Its unlocks succeed.
   */
  static DistributedLock failingMember(String name, int successes, Runnable onFailure,
      String failure) {
    AtomicInteger calls = new AtomicInteger();
    return (DistributedLock) java.lang.reflect.Proxy.newProxyInstance(
        DistributedLock.class.getClassLoader(), new Class<?>[] {DistributedLock.class},
        (proxy, method, args) -> switch (method.getName()) {
          case "getName", "toString" -> name;
          case "hashCode" -> System.identityHashCode(proxy);
          case "equals" -> proxy == args[0];
          case "lock", "lockInterruptibly", "tryLock" -> {
            if (calls.incrementAndGet() == successes + 1) {
              onFailure.run();
              throw new LockException(failure);
            }
            yield method.getReturnType() == boolean.class ? Boolean.TRUE : null;
          }
          case "unlock" -> null;
          case "isHeldByCurrentThread" -> Boolean.TRUE;
          case "getHoldCount" -> Integer.MAX_VALUE;
          default -> throw new UnsupportedOperationException(method.getName());
        });
  }

  /**
   * A member that is always busy: its {@code tryLock()} signals {@code tried}, waits until
   * {@code open} and answers false.
   */
  private static DistributedLock busyGate(CountDownLatch tried, CountDownLatch open) {
    return (DistributedLock) java.lang.reflect.Proxy.newProxyInstance(
        DistributedLock.class.getClassLoader(), new Class<?>[] {DistributedLock.class},
        (proxy, method, args) -> switch (method.getName()) {
          case "getName", "toString" -> "zz-gate";
          case "hashCode" -> System.identityHashCode(proxy);
          case "equals" -> proxy == args[0];
          case "tryLock" -> {
            tried.countDown();
            if (!open.await(10, TimeUnit.SECONDS)) {
              throw new IllegalStateException("the test never opened the gate");
            }
            yield false;
          }
          default -> throw new UnsupportedOperationException(method.getName());
        });
  }

  /**
   * Runs one thread per lock, each taking it {@code rounds} times; all must finish.
   *
   * @return how many sections ran
   */
  private int contend(List<DistributedLock> locks, int rounds) throws Exception {
    ExclusionProbe probe = new ExclusionProbe();
    AtomicInteger done = new AtomicInteger();
    CountDownLatch start = new CountDownLatch(1);
    List<Future<?>> workers = new ArrayList<>();
    for (DistributedLock lock : locks) {
      workers.add(threads.submit(() -> {
        start.await();
        for (int r = 0; r < rounds; r++) {
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
    return done.get();
  }
}

package dev.holdfast.engine;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.holdfast.DistributedLock;
import dev.holdfast.LockClient;
import dev.holdfast.LockException;
import dev.holdfast.LockHold;
import dev.holdfast.testing.Await;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * Attack round 24 on bf9b77e's {@code forceUnlock()} re-check: after the call returns (or
 * throws) every hold of this client on the key is asked about in Redis, and an acquisition
 * answered after the call whose first send was before it checks itself. Invariant: a hold this
 * client still believes is in Redis, and a loss it reports really happened.
 */
class ForceUnlockRecheckAttackTest extends ProxiedClientFixture {

  /**
   * Once every request held by the proxy reached Redis: {@code hold} (taken after the call) is
   * not believed while a rival takes the lock. A late copy of the forceUnlock's request does
   * nothing once the request ran (a retry answered: {@code mayDelete} false, the hold must still
   * be in Redis); a copy of an unanswered call may run until the request is sealed — a hold it
   * deleted is then reported lost when the seal lands.
   */
  private void assertNoTwoHoldersOnceDelivered(String key, LockHold hold, LossRecorder losses,
      boolean mayDelete) {
    Await.until(Duration.ofSeconds(60), () -> proxy.pendingRequestBytes() == 0,
        "the forceUnlock's held sends delivered");
    if (!mayDelete) {
      assertTrue(redisState.exists(key), "a late send of a forceUnlock answered by its retry "
          + "deleted the hold taken after the call");
    }
    Await.until(Duration.ofSeconds(20), () -> redisState.exists(key) || !hold.isHeld(),
        "the hold is in Redis, or no longer believed");
    assertNoTwoHolders(key, hold, "taken after forceUnlock() met its late sends", losses);
  }

  /** {@code hold}, whose field is gone ({@code how}), is not believed while a rival takes it. */
  private void assertNoTwoHolders(String key, LockHold hold, String how, LossRecorder losses) {
    boolean believes = hold.isHeld();
    DistributedLock rivals = rival.getLock(key);
    boolean rivalTakes = rivals.tryLock();
    try {
      assertFalse(believes && rivalTakes, "two holders: the hold " + how + " and is still "
          + "believed; losses " + losses);
    } finally {
      if (rivalTakes) {
        rivals.unlock();
      }
    }
  }

  /**
   * forceUnlock() gets no answer (every send held 20 s on the way to Redis, the client's timeout
   * 1 s): it throws, and its record says "answered" at that moment. Another thread of this client
   * then takes the lock (sent after the record: no self-check, and the scan is over). The held
   * copies of the forceUnlock reached Redis afterwards and deleted that new hold: the thread
   * still believed it, nothing reported it lost, and a rival took the lock — two holders. The
   * call's request is now sealed in the background: a copy that ran first is found then, and
   * the holds it deleted are reported lost.
   */
  @Test
  void forceUnlockUnanswered_lateCopyDeletesHoldTakenAfterTheThrow() throws Exception {
    LockClient b = viaProxy("1s", "30s");
    DistributedLock lock = b.getLock("late-copy");
    LossRecorder losses = LossRecorder.on(b);
    b.getLock("warm-force").forceUnlock(); // its script loaded
    proxy.delay(Duration.ofSeconds(20));
    assertThrows(LockException.class, lock::forceUnlock, "no answer within the timeout");
    assertTrue(proxy.pendingRequestBytes() > 0, "its copies are still on the way to Redis");
    proxy.delay(Duration.ZERO);
    LockHold hold = take(lock, "takes-after-the-throw").get(60, TimeUnit.SECONDS);
    assertTrue(redisState.exists("late-copy"), "taken in Redis");
    assertNoTwoHoldersOnceDelivered("late-copy", hold, losses, true);
  }
  /**
   * Every reply of forceUnlock() is lost (its three attempts dropped): the first deleted the
   * key, the call throws. Its record is written, but the holds this client had on the key are
   * not asked about (the scan runs only when the call returns): the thread that held the lock
   * still believes it, nothing reports it lost, and a rival takes the lock — two holders.
   */
  @Test
  void forceUnlockThrowsAfterDeleting_existingHoldNotChecked() throws Exception {
    LockClient b = viaProxy("1s", "30s");
    DistributedLock lock = b.getLock("thrown");
    LossRecorder losses = LossRecorder.on(b);
    b.getLock("warm-force").forceUnlock(); // its script loaded: the dropped replies are the call's
    LockHold hold = take(lock, "holds-before-the-call").get(60, TimeUnit.SECONDS);
    proxy.dropReplies(RedisTopology.ATTEMPTS);
    assertThrows(LockException.class, lock::forceUnlock, "every reply lost");
    assertEquals(0, proxy.pendingDrops(), "each attempt's reply was dropped");
    assertFalse(redisState.exists("thrown"), "the first attempt deleted the key");
    assertNoTwoHolders("thrown", hold, "forceUnlock() deleted before it threw", losses);
  }
  /**
   * The holder's final unlock() is on its way (5 s of latency; the hold is "ending", so the scan
   * leaves it to the release) when this client's forceUnlock() deletes the key: the release
   * finds the field gone and reports the loss, once; nothing is believed afterwards.
   */
  @Test
  void holderReleasing_whileForceUnlockDeletes_releaseReportsTheLossOnce() throws Exception {
    LockClient b = viaProxy("20s", "30s");
    DistributedLock lock = b.getLock("ending");
    LossRecorder losses = LossRecorder.on(b);
    CountDownLatch held = new CountDownLatch(1);
    CountDownLatch go = new CountDownLatch(1);
    CompletableFuture<Throwable> unlocked = new CompletableFuture<>();
    long[] holder = new long[1];
    Thread t = new Thread(() -> {
      try {
        lock.lock(120, TimeUnit.SECONDS);
        holder[0] = Thread.currentThread().getId();
        held.countDown();
        go.await();
        lock.unlock();
        unlocked.complete(null);
      } catch (Throwable e) {
        unlocked.complete(e);
      }
    }, "releases-while-forced");
    t.start();
    assertTrue(held.await(60, TimeUnit.SECONDS));
    proxy.delay(Duration.ofSeconds(5));
    go.countDown();
    Hold hold = ((RedisLock) lock).holdOf(holder[0]);
    Await.until(Duration.ofSeconds(20), hold::ending, "the release sent");
    // Held back by the proxy before the delay ends: a release read after it would go at once.
    Await.until(Duration.ofSeconds(20), () -> proxy.pendingRequestBytes() > 0,
        "the release held back by the proxy");
    proxy.delay(Duration.ZERO);
    assertTrue(lock.forceUnlock(), "deleted before the release arrives");
    assertEquals(0, losses.count(), "the scan leaves the releasing hold to its release");
    Throwable failure = unlocked.get(60, TimeUnit.SECONDS);
    assertTrue(failure instanceof IllegalMonitorStateException, "the release reports it: "
        + failure);
    Await.until(Duration.ofSeconds(10), () -> losses.count() == 1, "reported: " + losses);
    assertFalse(Clients.engine(b).live(hold), "nothing believed");
    assertFalse(redisState.exists("ending"));
    assertEquals(1, losses.count(), "once: " + losses);
  }

  /**
   * Acquisitions of other threads of this client (three contend; each force-unlock wakes the
   * next) race this client's forceUnlock() calls, many rounds with varied pacing; once the
   * takers are done and no call is in flight, a hold that is believed has its field in Redis and
   * a hold not believed has none.
   */
  @Test
  void acquisitionsRacingTheScan_beliefMatchesRedis() throws Exception {
    LockClient b = viaProxy("20s", "30s");
    proxy.delay(Duration.ofMillis(2)); // replies cross the scan now and then
    DistributedLock lock = b.getLock("dekker");
    RedisLock engineLock = (RedisLock) lock;
    java.util.Random random = new java.util.Random(24);
    for (int round = 0; round < 15; round++) {
      List<CompletableFuture<LockHold>> takers = new ArrayList<>();
      for (int i = 0; i < 3; i++) {
        takers.add(take(lock, "taker-" + round + "-" + i));
      }
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(90);
      while (!takers.stream().allMatch(CompletableFuture::isDone)) {
        assertTrue(System.nanoTime() - deadline < 0, "round " + round + ": takers stuck");
        lock.forceUnlock();
        java.util.concurrent.locks.LockSupport.parkNanos(
            TimeUnit.MICROSECONDS.toNanos(random.nextInt(20_000)));
      }
      for (CompletableFuture<LockHold> f : takers) {
        OwnedLockHold h = (OwnedLockHold) f.get();
        Hold record = engineLock.holdOf(h.ownerId);
        boolean inRedis = redisState.hget("dekker", Clients.engine(b).fieldOf(h.ownerId)) != null;
        assertEquals(inRedis, h.isHeld(), "round " + round + ": belief " + h.isHeld()
            + " against Redis " + inRedis + " (record " + record + ")");
      }
      lock.forceUnlock();
      for (CompletableFuture<LockHold> f : takers) {
        assertFalse(f.get().isHeld(), "round " + round + ": the last forceUnlock ended it");
      }
    }
  }
  /**
   * The holder itself (count 2) force-unlocks: its hold is reported lost once, both unlock()
   * calls fail without a second report, and the thread takes the lock afresh unreported.
   */
  @Test
  void reentrantHolderForceUnlocksItself_lostOnce_unlocksFail() throws Exception {
    LossRecorder losses = LossRecorder.on(a);
    DistributedLock lock = a.getLock("self");
    lock.lock();
    lock.lock();
    assertTrue(lock.forceUnlock());
    assertFalse(redisState.exists("self"));
    assertFalse(Clients.engine(a).live(((RedisLock) lock).holdOf(Thread.currentThread().getId())),
        "no longer believed");
    assertThrows(IllegalMonitorStateException.class, lock::unlock);
    assertThrows(IllegalMonitorStateException.class, lock::unlock);
    Await.until(Duration.ofSeconds(10), () -> losses.count() == 1, "reported: " + losses);
    assertTrue(lock.tryLock(), "taken afresh");
    lock.unlock();
    assertEquals(1, losses.count(), "once: " + losses);
  }

  /**
   * Read holds of two other threads of this client; a third force-unlocks the read side: both
   * reported lost, neither believed, the key gone.
   */
  @Test
  void readHoldsOfTwoThreads_readForceUnlock_bothLost() throws Exception {
    LossRecorder losses = LossRecorder.on(a);
    var rw = a.getReadWriteLock("rw-many");
    List<LockHold> holds = new ArrayList<>();
    for (int i = 0; i < 2; i++) {
      holds.add(take(rw.readLock(), "reader-" + i).get(60, TimeUnit.SECONDS));
    }
    assertTrue(rw.readLock().forceUnlock());
    assertFalse(redisState.exists("rw-many"));
    for (LockHold h : holds) {
      assertFalse(h.isHeld(), "a read hold deleted is not believed");
    }
    Await.until(Duration.ofSeconds(10), () -> losses.count() == 2, "both reported: " + losses);
  }

  /**
   * A RedLock of three members of this client held by this thread; two members force-unlocked
   * from this thread (a majority gone): their holds are no longer believed, the third is, the
   * RedLock is not held and its unlock() fails.
   */
  @Test
  void redLockMajorityForceUnlocked_notBelieved() throws Exception {
    LossRecorder losses = LossRecorder.on(a);
    DistributedLock m1 = a.getLock("red-1");
    DistributedLock m2 = a.getLock("red-2");
    DistributedLock m3 = a.getLock("red-3");
    DistributedLock red = a.getRedLock(m1, m2, m3);
    red.lock(120, TimeUnit.SECONDS);
    assertTrue(m1.forceUnlock());
    assertTrue(m2.forceUnlock());
    long me = Thread.currentThread().getId();
    LockEngine engine = Clients.engine(a);
    assertFalse(engine.live(((RedisLock) m1).holdOf(me)));
    assertFalse(engine.live(((RedisLock) m2).holdOf(me)));
    assertTrue(engine.live(((RedisLock) m3).holdOf(me)), "the third member is still held");
    assertFalse(red.isHeldByCurrentThread(), "no majority");
    assertThrows(RuntimeException.class, red::unlock, "the RedLock was lost");
    Await.until(Duration.ofSeconds(10), () -> losses.count() >= 2, "reported: " + losses);
    awaitFree("red-1", "red-2", "red-3");
  }
  /**
   * forceUnlock()'s first send is held 15 s on the way to Redis; the retry (sent without delay
   * once the client's 2 s timeout passed) is answered and the call returns normally. Another
   * thread of this client then takes the lock (after the record: no self-check). The first send
   * reached Redis afterwards and deleted that hold, which stayed believed — two holders; the
   * request now runs once, so the late send does nothing.
   */
  @Test
  void forceUnlockAnsweredByItsRetry_heldFirstSendDeletesLaterHold() throws Exception {
    LockClient b = viaProxy("2s", "30s");
    DistributedLock lock = b.getLock("late-first");
    LossRecorder losses = LossRecorder.on(b);
    b.getLock("warm-force").forceUnlock(); // its script loaded
    proxy.delay(Duration.ofSeconds(15));
    CompletableFuture<Boolean> forced = new CompletableFuture<>();
    new Thread(() -> {
      try {
        forced.complete(lock.forceUnlock());
      } catch (Throwable e) {
        forced.completeExceptionally(e);
      }
    }, "force-unlocks").start();
    Await.until(Duration.ofSeconds(10), () -> proxy.pendingRequestBytes() > 0,
        "the first send held back");
    proxy.delay(Duration.ZERO); // the retry goes through at once
    forced.get(60, TimeUnit.SECONDS);
    assertTrue(proxy.pendingRequestBytes() > 0, "the first send is still on its way");
    LockHold hold = take(lock, "takes-after-the-call").get(60, TimeUnit.SECONDS);
    assertTrue(redisState.exists("late-first"), "taken in Redis");
    assertNoTwoHoldersOnceDelivered("late-first", hold, losses, false);
  }
  /**
   * A local handoff (one thread of this client hands the lock to another parked for it) runs in
   * Redis, its answer still on the way (3 s of latency), when this client's forceUnlock()
   * deletes the key: the releaser is "ending" (left to its release), the receiver not yet
   * registered. The receiver opens the grant later, checks itself, and is not left believing a
   * hold that is gone.
   */
  @Test
  void localHandoffInFlight_forceUnlockDeletes_receiverNotBelieved() throws Exception {
    LockClient b = viaProxy("20s", "30s");
    DistributedLock lock = b.getLock("handoff");
    LockEngine engine = Clients.engine(b);
    CountDownLatch held = new CountDownLatch(1);
    CountDownLatch release = new CountDownLatch(1);
    CompletableFuture<Throwable> releaser = new CompletableFuture<>();
    new Thread(() -> {
      try {
        lock.lock(120, TimeUnit.SECONDS);
        held.countDown();
        release.await();
        lock.unlock();
        releaser.complete(null);
      } catch (Throwable e) {
        releaser.complete(e);
      }
    }, "hands-off").start();
    assertTrue(held.await(60, TimeUnit.SECONDS));
    CompletableFuture<Long> receiver = new CompletableFuture<>();
    Thread waiter = new Thread(() -> {
      try {
        lock.lock(120, TimeUnit.SECONDS);
        receiver.complete(Thread.currentThread().getId());
      } catch (Throwable e) {
        receiver.completeExceptionally(e);
      }
    }, "receives");
    waiter.start();
    Await.until(Duration.ofSeconds(30), () -> engine.waitingThreads() == 1
        && (waiter.getState() == Thread.State.WAITING
        || waiter.getState() == Thread.State.TIMED_WAITING), "the receiver parked");
    long handoffs = engine.localHandoffs();
    proxy.delay(Duration.ofSeconds(3));
    release.countDown();
    String receiverField = engine.fieldOf(waiter.getId());
    Await.until(Duration.ofSeconds(30), () -> redisState.hget("handoff", receiverField) != null,
        "handed over in Redis (or taken by the receiver itself)");
    proxy.delay(Duration.ZERO);
    assertTrue(lock.forceUnlock());
    assertFalse(redisState.exists("handoff"));
    long id = receiver.get(60, TimeUnit.SECONDS);
    releaser.get(60, TimeUnit.SECONDS);
    assertEquals(handoffs + 1, engine.localHandoffs(), "it was a local handoff");
    boolean believes = engine.live(((RedisLock) lock).holdOf(id));
    assertFalse(believes && !redisState.exists("handoff"), "the receiver believes a hold "
        + "forceUnlock() deleted (local handoffs " + (engine.localHandoffs() - handoffs) + ")");
  }
}

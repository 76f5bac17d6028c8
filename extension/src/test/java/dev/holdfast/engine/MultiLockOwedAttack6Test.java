package dev.holdfast.engine;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.holdfast.DistributedLock;
import dev.holdfast.LockClient;
import dev.holdfast.LockClientConfig;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Queue;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Sixth round of attacks on the multi-lock's owed record (commit 2420463): the record carried
 * through an acquisition, a RedLock member's due composed of its members' dues, and records
 * owing a RedLock, nested multi-lock or foreign lock kept in the static store. Client A talks
 * to Redis directly, B through a {@link BlackHoleProxy}.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
class MultiLockOwedAttack6Test extends MultiLockOwedFixture {

  /**
   * RedLock(r1 on A, r2 on B) in a multi-lock held twice. The failed unlock releases r1 (one
   * section left: the outer one) and r2's release RUNS with its reply lost (the RedLock: 1 of 2,
   * fails). The thread takes the RedLock alone: r2's re-entry settles the pending release as
   * run, so nothing of the multi-lock's release is owed any more. The composed due still calls
   * the RedLock owed: r1's part, released by the failed call, has open sections (the outer
   * one) and so passes the single-lock rule. The next acquisition retries RedLock#unlock(),
   * which releases a section of r1 and r2 that is not the multi-lock's: after the multi-lock's
   * sections are all unlocked, the thread's own RedLock hold (never unlocked) is gone from Redis
   * and a rival takes the RedLock: two holders. Fixed: a RedLock part owes only if the failed
   * call failed its release.
   */
  @Test
  void redLockMember_releaseRanSettledByReentry_releasedPartNotCountedOwed() {
    DistributedLock red = a.getRedLock(a.getLock("r61-1"), b.getLock("r61-2"));
    DistributedLock multi = a.getMultiLock(a.getLock("a61"), red);
    multi.lock();
    multi.lock();
    proxy.runNextScriptThenBlackHole(); // r2's release runs, its reply is lost
    assertFailed(multi); // a61 1, r1 1; r2 1 in Redis, 2 in the client with the release pending
    proxy.blackHole(false);
    assertEquals("1", redisState.hget("r61-2", RedisProbe.fieldOf(b)), "r2's release ran");
    red.lock(); // the thread's own hold: r1 2; r2 settled as run (1), re-entered (2)
    assertEquals("2", redisState.hget("r61-2", RedisProbe.fieldOf(b)));
    multi.lock();
    assertNull(unlockOutcome(multi), "inner unlock");
    assertNull(unlockOutcome(multi), "outer unlock");
    String r1 = redisState.hget("r61-1", RedisProbe.fieldOf(a));
    String r2 = redisState.hget("r61-2", RedisProbe.fieldOf(b));
    System.out.println("after multi unlocks: r1=" + r1 + " r2=" + r2 + " red held="
        + red.isHeldByCurrentThread());
    assertFalse(redisState.exists("a61"));
    DistributedLock rivalRed = rival.getRedLock(rival.getLock("r61-1"), rival.getLock("r61-2"));
    boolean rivalGot = rivalRed.tryLock();
    if (rivalGot) {
      rivalRed.unlock();
    }
    assertFalse(rivalGot, "a rival takes the RedLock the thread took and never unlocked");
    assertEquals("1", r1, "the thread's own RedLock section on r1");
    assertEquals("1", r2, "the thread's own RedLock section on r2");
    assertTrue(red.isHeldByCurrentThread(), "the thread never unlocked its own RedLock hold");
    red.unlock();
    assertFalse(redisState.exists("r61-1"));
    assertFalse(redisState.exists("r61-2"));
  }

  /**
   * The same RedLock (r1 on A, r2 on C through the proxy), multi-lock held twice, r2's release
   * NOT run; then C is closed (r2's hold ends with its lease). Nothing is owed any more: r1's
   * part was released by the failed call (its outer section stays). Was a defect: r1's part
   * counted as owed, so the next acquisition retried the RedLock's unlock(), which took r1's
   * outer section and failed on r2 ("acquired nothing: the release … failed again"). Now the
   * acquisition goes to the RedLock, which cannot reach its majority without C (2 of 2), and
   * r1 keeps its outer section.
   */
  @Test
  void redLockMember_owingClientClosed_releasedPartKeepsItsOuterSection() {
    LockClient c = clients.create(Map.of(LockClientConfig.ADDRESS, proxy.uri(),
        LockClientConfig.TIMEOUT, "200ms"));
    warmUp(c.getLock("warm62"));
    DistributedLock red = a.getRedLock(a.getLock("r62-1"), c.getLock("r62-2"));
    DistributedLock multi = a.getMultiLock(a.getLock("a62"), red);
    takeTwiceThenFailUnlock(multi); // a62 1, r1 1; r2 2 (not run)
    c.close();
    RuntimeException relock = null;
    try {
      multi.lock();
    } catch (RuntimeException e) {
      relock = e;
    }
    assertTrue(relock != null && relock.getMessage().contains("majority"),
        "the RedLock cannot reach its majority with C closed: " + relock);
    assertFalse(relock.getMessage().contains("failed again"), "nothing was owed: " + relock);
    assertEquals("1", redisState.hget("r62-1", RedisProbe.fieldOf(a)),
        "r1 keeps the multi-lock's outer section");
  }

  /**
   * A record owing a RedLock is kept in the static store. Its thread ends right after the failed
   * unlock (a thread per request: it never calls again), and every client is closed.
   * Nothing can finish or read that record any more (thread ids are never reused), yet it stays
   * in the static map for the life of the JVM, with the closed clients' engines it references.
   * Fixed: a record owing only this library's locks is kept by their clients' engines.
   */
  @Test
  void unownedRecord_threadEndedClientsClosed_dropped() throws Exception {
    LockClient c = clients.create(Map.of(LockClientConfig.ADDRESS, proxy.uri(),
        LockClientConfig.TIMEOUT, "200ms"));
    LockClient d = clients.create(Map.of(LockClientConfig.ADDRESS, redis.server().uri()));
    warmUp(c.getLock("warm63"));
    MultiLock multi = (MultiLock) d.getMultiLock(d.getLock("a63"),
        d.getRedLock(d.getLock("r63-1"), c.getLock("r63-2"), c.getLock("r63-3")));
    AtomicLong tid = new AtomicLong();
    Thread t = new Thread(() -> {
      tid.set(Thread.currentThread().getId());
      multi.lock();
      proxy.blackHole(true);
      assertFailed(multi);
      proxy.blackHole(false);
    });
    t.start();
    t.join(60_000);
    assertFalse(t.isAlive());
    assertTrue(multi.owes(tid.get()), "the failed unlock is recorded");
    c.close();
    d.close();
    assertFalse(multi.owes(tid.get()), "a dead thread's record over closed clients is dropped");
  }

  /**
   * A re-acquisition's give-back of B fails (not run: Redis counts 3) and stays owed on B's
   * hold. The thread has taken the multi-lock three times and unlocked once: B's
   * getHoldCount() is 2. It counted 3 until the thread's next call finished the give-back; now
   * getHoldCount() is that call.
   */
  @Test
  void giveBackOwed_notRun_holdCountIsTheApplications() {
    DistributedLock multi = relockWithFailingFinish("67", () -> proxy.blackHole(true));
    assertEquals("3", redisState.hget("b67", RedisProbe.fieldOf(b)), "the give-back never ran");
    assertEquals(2, b.getLock("b67").getHoldCount());
    assertEquals(2, multi.getHoldCount());
    assertNull(unlockOutcome(multi));
    assertNull(unlockOutcome(multi));
    assertFalse(redisState.exists("b67"));
    assertFalse(redisState.exists("a67"));
  }

  /** The same with the give-back run and only its reply lost: 2 as well, and not 1. */
  @Test
  void giveBackOwed_ranUnanswered_holdCountIsTheApplications() {
    DistributedLock multi = relockWithFailingFinish("68", proxy::runNextScriptThenBlackHole);
    assertEquals(2, b.getLock("b68").getHoldCount());
    assertEquals(2, multi.getHoldCount());
    assertNull(unlockOutcome(multi));
    assertNull(unlockOutcome(multi));
    assertFalse(redisState.exists("b68"));
  }

  /**
   * A record owing another implementation's lock is kept in the static store (no client of
   * this library can drop it). Its thread ends right after the failed unlock; the next record
   * kept there, by another thread, drops it: nothing could ever finish it.
   */
  @Test
  void unownedRecord_foreignMember_threadEnded_droppedByTheNextOne() throws Exception {
    MultiLock dead = (MultiLock) a.getMultiLock(a.getLock("a65"), hook(b.getLock("f65"), null,
        null));
    long deadId = failUnlockOnAThreadThatEnds(dead);
    assertTrue(dead.owes(deadId), "the failed unlock is recorded");
    MultiLock live = (MultiLock) a.getMultiLock(a.getLock("a66"), hook(b.getLock("f66"), null,
        null));
    takeTwiceThenFailUnlock(live); // kept in the static store too
    assertFalse(dead.owes(deadId), "the ended thread's record is dropped");
    assertTrue(live.owes(Thread.currentThread().getId()), "the live thread's record is kept");
    assertNull(unlockOutcome(live), "the completion");
    assertNull(unlockOutcome(live), "the outer section");
    assertFalse(redisState.exists("f66"));
  }

  /** Takes {@code multi} on a new thread, fails its unlock on B, lets the thread end: its id. */
  private long failUnlockOnAThreadThatEnds(DistributedLock multi) throws InterruptedException {
    AtomicLong tid = new AtomicLong();
    AtomicReference<Throwable> error = new AtomicReference<>();
    Thread t = new Thread(() -> {
      try {
        tid.set(Thread.currentThread().getId());
        multi.lock();
        failUnlockOnB(multi);
      } catch (Throwable e) {
        error.set(e);
      }
    });
    t.start();
    t.join(60_000);
    assertFalse(t.isAlive());
    assertNull(error.get(), "the thread's calls");
    return tid.get();
  }

  /**
   * A record owing a RedLock and B's plain lock starts in the static store; the next tryLock()
   * retries the RedLock (r2, r3 released now), then fails on a64, which a rival took meanwhile:
   * the record, now owing only B's plain lock, moves to the engines' stores. Held: no stale copy
   * is left in the static store, and the next unlock() releases b64 once and nothing else (the
   * RedLock is not released again, the rival keeps a64).
   */
  @Test
  void recordMovesFromStaticToEngineStores_noStaleCopy() {
    DistributedLock red = a.getRedLock(a.getLock("r64-1"), b.getLock("r64-2"),
        b.getLock("r64-3"));
    MultiLock multi = (MultiLock) a.getMultiLock(a.getLock("a64"), b.getLock("b64"), red);
    multi.lock();
    proxy.blackHole(true);
    assertFailed(multi); // a64, r1 released; b64, r2, r3 not run
    proxy.blackHole(false);
    long tid = Thread.currentThread().getId();
    assertTrue(multi.owes(tid));
    DistributedLock rivalA = rival.getLock("a64");
    assertTrue(rivalA.tryLock());
    assertFalse(multi.tryLock(), "a64 is the rival's");
    assertFalse(redisState.exists("r64-2"), "the RedLock's owed release was retried");
    assertFalse(redisState.exists("r64-3"));
    assertTrue(multi.owes(tid), "b64 still owed");
    // (Its final release ended in doubt: the background may remove b64's field at any time.)
    RuntimeException completion = unlockOutcome(multi);
    System.out.println("completion: " + completion);
    assertFalse(multi.owes(tid), "no stale copy of the record anywhere");
    assertFalse(redisState.exists("b64"), "b64 released by the completion");
    assertTrue(rivalA.isLocked(), "the rival keeps a64");
    assertTrue(unlockOutcome(multi) instanceof IllegalMonitorStateException,
        "the multi-lock is no longer held");
    assertTrue(rivalA.isLocked());
    rivalA.unlock();
  }

  /**
   * Eight threads each hold their own multi-lock [A, B, RedLock(B, B, B)] twice and fail its
   * inner unlock at once (B black-holed: records in the static store, keyed by thread), then
   * each takes it again and unlocks twice. Held: the records do not mix; every member ends
   * released by the two unlocks after the acquisition, and no record is left.
   */
  @Test
  void manyThreads_ownRecordsDoNotMix() throws Exception {
    int n = 8;
    List<Thread> threads = new ArrayList<>();
    Queue<Throwable> errors = new ConcurrentLinkedQueue<>();
    CountDownLatch taken = new CountDownLatch(n);
    CountDownLatch dark = new CountDownLatch(1);
    CountDownLatch failed = new CountDownLatch(n);
    CountDownLatch healed = new CountDownLatch(1);
    List<MultiLock> multis = new CopyOnWriteArrayList<>();
    long[] ids = new long[n];
    for (int i = 0; i < n; i++) {
      int k = i;
      Thread t = new Thread(() -> {
        try {
          DistributedLock red = a.getRedLock(b.getLock("r65-1-" + k), b.getLock("r65-2-" + k),
              b.getLock("r65-3-" + k));
          MultiLock multi = (MultiLock) a.getMultiLock(a.getLock("a65-" + k),
              b.getLock("b65-" + k), red);
          multis.add(multi);
          ids[k] = Thread.currentThread().getId();
          multi.lock();
          multi.lock();
          taken.countDown();
          dark.await();
          try {
            assertFailed(multi);
          } finally {
            failed.countDown();
          }
          healed.await();
          multi.lock(); // finishes the failed unlock first
          assertNull(unlockOutcome(multi), "inner section");
          assertNull(unlockOutcome(multi), "outer section");
          assertFalse(multi.owes(ids[k]));
        } catch (Throwable e) {
          errors.add(e);
        }
      });
      threads.add(t);
      t.start();
    }
    assertTrue(taken.await(60, TimeUnit.SECONDS));
    proxy.blackHole(true);
    dark.countDown();
    assertTrue(failed.await(90, TimeUnit.SECONDS));
    proxy.blackHole(false);
    healed.countDown();
    for (Thread t : threads) {
      t.join(90_000);
    }
    assertTrue(errors.isEmpty(), errors.toString());
    for (int k = 0; k < n; k++) {
      for (String key : new String[] {"a65-", "b65-", "r65-1-", "r65-2-", "r65-3-"}) {
        assertFalse(redisState.exists(key + k), key + k);
      }
    }
  }

  /**
   * The same multi-lock M = [c67 on A, b67 on B] reached twice: directly, and through a nested
   * N = [M (another handle), w67], both inside O = [M, N]; O held once (c67, b67 count 2). O's
   * unlock fails on b67 through both paths, and the two share M's record (same members, same
   * thread). Held: the completion leaves nothing held.
   */
  @Test
  void sameMultiLockDirectAndNested_failedUnlock_completionReleasesEverything() {
    DistributedLock m = a.getMultiLock(a.getLock("c67"), b.getLock("b67"));
    DistributedLock n = a.getMultiLock(a.getMultiLock(a.getLock("c67"), b.getLock("b67")),
        a.getLock("w67"));
    DistributedLock o = a.getMultiLock(m, n);
    o.lock();
    assertEquals("2", redisState.hget("c67", RedisProbe.fieldOf(a)));
    proxy.blackHole(true);
    RuntimeException first = unlockOutcome(o);
    proxy.blackHole(false);
    System.out.println("67 failed: " + first + " c67=" + redisState.hget("c67",
        RedisProbe.fieldOf(a)) + " b67=" + redisState.hget("b67", RedisProbe.fieldOf(b)));
    for (Throwable t : first.getSuppressed()) {
      System.out.println("67 suppressed: " + t);
    }
    RuntimeException completion = unlockOutcome(o);
    String c = redisState.hget("c67", RedisProbe.fieldOf(a));
    String bb = redisState.hget("b67", RedisProbe.fieldOf(b));
    System.out.println("67 completion: " + completion + " c67=" + c + " b67=" + bb);
    assertNull(c, "c67: two sections taken, both released");
    assertNull(bb, "b67: two sections taken, both released");
    assertFalse(redisState.exists("w67"));
  }

  /**
   * The record is out of every store while an acquisition runs. Multi-lock [a69, b69 on B,
   * hook z69, RedLock on B] held twice, the inner unlock fails on B (not run); the next lock()
   * retries the RedLock, takes a69 and b69, and then an Error is thrown from z69's acquisition.
   * Held: the record (b69 still owed) is put back, so the following lock() finishes it and two
   * unlocks free everything.
   */
  @Test
  void errorMidAcquisition_recordKept_countsMatch() {
    AtomicReference<Runnable> before = new AtomicReference<>();
    DistributedLock z = hook(a.getLock("z69"), before, null);
    DistributedLock red = a.getRedLock(b.getLock("r69-1"), b.getLock("r69-2"),
        b.getLock("r69-3"));
    MultiLock multi = (MultiLock) a.getMultiLock(a.getLock("a69"), b.getLock("b69"), z, red);
    multi.lock();
    multi.lock();
    proxy.blackHole(true);
    assertFailed(multi);
    proxy.blackHole(false);
    before.set(() -> {
      before.set(null);
      throw new StackOverflowError("injected in z69's acquisition");
    });
    Error thrown = null;
    try {
      multi.lock();
    } catch (StackOverflowError e) {
      thrown = e;
    }
    assertTrue(thrown != null, "the injected Error reached the caller");
    assertTrue(multi.owes(Thread.currentThread().getId()), "the record was put back");
    multi.lock();
    assertNull(unlockOutcome(multi), "inner unlock");
    assertNull(unlockOutcome(multi), "outer unlock");
    for (String key : new String[] {"a69", "b69", "z69", "r69-1", "r69-2", "r69-3"}) {
      assertFalse(redisState.exists(key), key);
    }
  }
}

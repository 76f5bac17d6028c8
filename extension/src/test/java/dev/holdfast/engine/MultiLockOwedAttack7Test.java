package dev.holdfast.engine;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.holdfast.DistributedLock;
import dev.holdfast.LockClient;
import dev.holdfast.LockClientConfig;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Seventh round of attacks on the multi-lock's owed record (commit 5ed33f4): a RedLock member's
 * due made of part-dues with a {@code failed} flag, its part-by-part retry, and where records
 * are kept (every engine involved, or the static store for a foreign lock). Client A talks to
 * Redis directly, B through a {@link BlackHoleProxy}; some probes add C through a second proxy.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
class MultiLockOwedAttack7Test extends MultiLockOwedFixture {

  private BlackHoleProxy proxyC;

  @AfterEach
  void closeProxyC() {
    if (proxyC != null) {
      proxyC.close();
    }
  }

  /** Client C, through its own black-hole proxy ({@link #proxyC}), scripts loaded. */
  private LockClient clientC() throws Exception {
    proxyC = new BlackHoleProxy(redis.server().port());
    LockClient c = clients.create(Map.of(LockClientConfig.ADDRESS, proxyC.uri(),
        LockClientConfig.TIMEOUT, "200ms"));
    warmUp(c.getLock("warmC"));
    return c;
  }

  /** {@link #unlockOutcome} of {@code lock} with B's link a black hole (restored after). */
  /**
   * RedLock(r1 on A, r2, r3 on B) in a multi-lock held twice; the inner unlock with B dark
   * releases r1, r2's and r3's releases do not run (a majority failed: LockException).
   * A rival force-unlocks r3 (the thread's r3 hold is lost: a minority). The completion releases
   * r2 and finds r3 lost: by the RedLock's own rule 2 of 3 were released (a minority loss does
   * not end a RedLock hold), yet the part-by-part retry reports IllegalMonitorStateException
   * ("not held"), i.e. the multi-lock lost — while the next unlock() of the same open sections
   * returns normally. The Javadoc: once a loss is known, every later unlock of the open sections
   * reports it. Either the completion follows the RedLock's quorum rule (no loss) or the loss
   * sticks; not both.
   * Was a defect (round 7); fixed: the retry judges the RedLock by its majority.
   */
  @Test
  void redLockMember_retryFindsMinorityPartLost_lossReportConsistent() {
    DistributedLock red = a.getRedLock(a.getLock("r71-1"), b.getLock("r71-2"), b.getLock("r71-3"));
    DistributedLock multi = a.getMultiLock(a.getLock("a71"), red);
    takeTwiceThenFailUnlock(multi); // a71 1, r1 1; r2, r3 2 (not run)
    assertTrue(rival.getLock("r71-3").forceUnlock(), "r3 taken away from the thread");
    RuntimeException completion = unlockOutcome(multi);
    RuntimeException outer = unlockOutcome(multi);
    System.out.println("71 completion: " + completion + "\n71 outer: " + outer);
    assertFalse(redisState.exists("a71"));
    assertFalse(redisState.exists("r71-1"));
    assertFalse(redisState.exists("r71-2"));
    if (completion instanceof IllegalMonitorStateException) {
      assertTrue(outer instanceof IllegalMonitorStateException,
          "the completion reported the multi-lock lost; its outer unlock must say so too");
    } else {
      assertNull(completion, "2 of 3 released: the RedLock's quorum rule");
    }
  }

  /**
   * RedLock(r1, r2 on A, r3 on B) in a multi-lock held twice. A rival force-unlocks r1 and r2
   * (a majority of the thread's RedLock lost), then the multi-lock's inner unlock runs with B a
   * black hole: r1, r2 answer "not held", r3's release does not run. RedLock#unlock() throws
   * IllegalMonitorStateException (a majority not held), so the multi-lock records nothing: r3's
   * release (one section) is never done. After the application's two unlocks r3 is still held
   * by the thread in Redis, renewed by the watchdog for as long as the thread lives: a plain
   * user of r3, or a RedLock whose majority needs it, waits for ever.
   * Was a defect (round 7); fixed: a RedLock unlock() that ends (lost on a majority) owes r3's
   * failed release on r3's hold.
   */
  @Test
  void redLockMember_majorityLost_minorityReleaseNotRun_partNotLeaked() {
    DistributedLock red = a.getRedLock(a.getLock("r72-1"), a.getLock("r72-2"),
        b.getLock("r72-3"));
    DistributedLock multi = a.getMultiLock(a.getLock("a72"), red);
    multi.lock();
    multi.lock();
    assertTrue(rival.getLock("r72-1").forceUnlock());
    assertTrue(rival.getLock("r72-2").forceUnlock());
    RuntimeException inner = unlockWithBDark(multi);
    RuntimeException outer = unlockOutcome(multi);
    System.out.println("72 inner: " + inner + "\n72 outer: " + outer + "\n72 r3="
        + redisState.hget("r72-3", RedisProbe.fieldOf(b)));
    assertTrue(inner instanceof IllegalMonitorStateException, "a majority lost: " + inner);
    assertFalse(redisState.exists("a72"));
    assertFalse(redisState.exists("r72-3"),
        "two sections of r3 taken, two unlocks: r3 must not stay held");
  }

  /**
   * RedLock(r1, r2 on A, r3 on B) in a multi-lock held twice; the inner unlock with B a black
   * hole: r1, r2 released, r3 not run — RedLock#unlock() returns normally (a majority released),
   * so the multi-lock's unlock succeeds and records nothing. The outer unlock releases one of
   * r3's two sections: r3 stays held by the thread (renewed) after the last unlock.
   * Was a defect (round 7); fixed: a RedLock unlock() that succeeds on a majority owes r3's failed
   * release on r3's hold.
   */
  @Test
  void redLockMember_minorityReleaseNotRun_unlockSucceeds_partNotLeaked() {
    DistributedLock red = a.getRedLock(a.getLock("r73-1"), a.getLock("r73-2"),
        b.getLock("r73-3"));
    DistributedLock multi = a.getMultiLock(a.getLock("a73"), red);
    multi.lock();
    multi.lock();
    RuntimeException inner = unlockWithBDark(multi);
    RuntimeException outer = unlockOutcome(multi);
    System.out.println("73 inner: " + inner + "\n73 outer: " + outer + "\n73 r3="
        + redisState.hget("r73-3", RedisProbe.fieldOf(b)));
    assertNull(inner, "a majority released");
    assertNull(outer);
    assertFalse(redisState.exists("r73-1"));
    assertFalse(redisState.exists("r73-3"),
        "two sections of r3 taken, two unlocks that succeeded: r3 must not stay held");
  }

  /**
   * A record owing only this library's locks is kept in the engines' stores. Its thread ends
   * right after the failed unlock (a thread per request); the engine itself drops that thread's
   * holds (the watchdog: thread ended), and another thread's failed unlock is recorded on the
   * same engines. The dead thread's record stays in both engines' stores for as long as the
   * clients are open (the static store drops ended threads' records; the engine stores never
   * do): one record per failed request, unbounded, with its holds.
   * Was a defect (round 7); fixed: every store drops the records of ended threads when it keeps
   * one.
   */
  @Test
  void libraryOnlyRecord_threadEnded_dropped() throws Exception {
    MultiLock dead = (MultiLock) a.getMultiLock(a.getLock("a74"), b.getLock("b74"));
    AtomicLong tid = new AtomicLong();
    AtomicReference<Throwable> error = new AtomicReference<>();
    Thread t = new Thread(() -> {
      try {
        tid.set(Thread.currentThread().getId());
        dead.lock();
        failUnlockOnB(dead);
      } catch (Throwable e) {
        error.set(e);
      }
    });
    t.start();
    t.join(60_000);
    assertFalse(t.isAlive());
    assertNull(error.get());
    assertTrue(dead.owes(tid.get()), "the failed unlock is recorded");
    MultiLock live = (MultiLock) a.getMultiLock(a.getLock("a75"), b.getLock("b75"));
    takeTwiceThenFailUnlock(live);
    assertTrue(live.owes(Thread.currentThread().getId()));
    assertFalse(dead.owes(tid.get()),
        "an ended thread's record can never be finished: it is dropped");
    assertNull(unlockOutcome(live));
    assertNull(unlockOutcome(live));
  }

  /**
   * RedLock(r1 on A, r2 on B, r3 on C) in a multi-lock held twice; the inner unlock fails with
   * B and C dark (r1 released; r2, r3 not run). The completion with only B healed releases r2
   * and fails again on r3: the due is re-captured. Then lock() with C healed retries r3 alone,
   * acquires, and two unlocks free everything; r1 and r2 are not released twice (a rival never
   * gets the RedLock while the thread holds its sections). Held.
   */
  @Test
  void redLockMember_retryPartlyFailsAgain_recapturedDue_countsMatch() throws Exception {
    LockClient c = clientC();
    DistributedLock red = a.getRedLock(a.getLock("r76-1"), b.getLock("r76-2"), c.getLock("r76-3"));
    DistributedLock multi = a.getMultiLock(a.getLock("a76"), red);
    multi.lock();
    multi.lock();
    proxy.blackHole(true);
    proxyC.blackHole(true);
    assertFailed(multi);
    proxy.blackHole(false);
    RuntimeException completion = unlockOutcome(multi);
    System.out.println("76 completion: " + completion);
    assertTrue(completion instanceof dev.holdfast.LockException, "r3 failed again");
    assertEquals("1", redisState.hget("r76-1", RedisProbe.fieldOf(a)), "r1: outer section");
    assertEquals("1", redisState.hget("r76-2", RedisProbe.fieldOf(b)), "r2: released once");
    assertEquals("2", redisState.hget("r76-3", RedisProbe.fieldOf(c)), "r3: not run");
    proxyC.blackHole(false);
    multi.lock();
    assertEquals("2", redisState.hget("r76-1", RedisProbe.fieldOf(a)));
    assertEquals("2", redisState.hget("r76-2", RedisProbe.fieldOf(b)));
    assertEquals("2", redisState.hget("r76-3", RedisProbe.fieldOf(c)));
    assertNull(unlockOutcome(multi), "inner");
    DistributedLock rivalRed = rival.getRedLock(rival.getLock("r76-1"), rival.getLock("r76-2"),
        rival.getLock("r76-3"));
    assertFalse(rivalRed.tryLock(), "the RedLock is still held by the thread");
    assertNull(unlockOutcome(multi), "outer");
    assertFalse(redisState.exists("r76-1"));
    assertFalse(redisState.exists("r76-2"));
    assertFalse(redisState.exists("r76-3"));
    assertFalse(redisState.exists("a76"));
    assertFalse(multi.isLocked());
  }

  /**
   * The thread holds plain lock r2 (on B) alone; then a multi-lock [a77, RedLock(r1 on A, r2,
   * r3 on B)] once: r1 1, r2 2, r3 1. The unlock with B dark releases a77 and r1 (its hold ends),
   * r2's release does not run (count 2: not final), r3's final release is in doubt. The thread
   * then takes plain lock r1 alone (a new hold, its own). The RedLock's due is owed only while
   * EVERY part's hold is the one the failed call left, so r1's new hold cancels the whole due:
   * r2's release, whose hold never changed, is never done. After the thread's unlocks (the
   * completion returns normally, then r1 and r2 alone), r2 stays held in Redis, renewed.
   * Was a defect (round 7); fixed: a RedLock's members owe one by one.
   */
  @Test
  void redLockMember_onePartRetakenAlone_otherPartsReleaseStillDone() {
    DistributedLock plain2 = b.getLock("r77-2");
    plain2.lock();
    DistributedLock red = a.getRedLock(a.getLock("r77-1"), b.getLock("r77-2"),
        b.getLock("r77-3"));
    DistributedLock multi = a.getMultiLock(a.getLock("a77"), red);
    multi.lock();
    assertEquals("2", redisState.hget("r77-2", RedisProbe.fieldOf(b)));
    failUnlockOnB(multi); // a77, r1 released; r2 not run (2); r3 final, in doubt
    assertFalse(redisState.exists("r77-1"));
    assertEquals("2", redisState.hget("r77-2", RedisProbe.fieldOf(b)));
    DistributedLock plain1 = a.getLock("r77-1");
    plain1.lock(); // the thread's own new hold of r1
    RuntimeException completion = unlockOutcome(multi);
    System.out.println("77 completion: " + completion + " r2="
        + redisState.hget("r77-2", RedisProbe.fieldOf(b)));
    assertEquals("1", redisState.hget("r77-2", RedisProbe.fieldOf(b)),
        "the completion releases the multi-lock's section of r2; the plain one stays");
    assertEquals("1", redisState.hget("r77-1", RedisProbe.fieldOf(a)), "r1: the thread's own");
    plain1.unlock();
    plain2.unlock();
    assertFalse(redisState.exists("r77-1"));
    assertFalse(redisState.exists("r77-2"), "every section of r2 unlocked");
  }

  /**
   * A nested multi-lock holding a RedLock: O = [a78, N], N = [b78 on B, RedLock(r1 on A, r2, r3
   * on B)], O held twice; the inner unlock fails on B. The record of N (library-only: kept by
   * A's and B's engines) and of O; then O is taken again and unlocked twice: nothing is left,
   * and no record. Held.
   */
  @Test
  void nestedMultiWithRedLock_failedUnlock_relockAndUnlocks_countsMatch() {
    DistributedLock red = a.getRedLock(a.getLock("r78-1"), b.getLock("r78-2"),
        b.getLock("r78-3"));
    MultiLock n = (MultiLock) a.getMultiLock(b.getLock("b78"), red);
    MultiLock o = (MultiLock) a.getMultiLock(a.getLock("a78"), n);
    takeTwiceThenFailUnlock(o);
    long tid = Thread.currentThread().getId();
    assertTrue(o.owes(tid));
    o.lock();
    assertNull(unlockOutcome(o), "inner");
    assertNull(unlockOutcome(o), "outer");
    for (String key : new String[] {"a78", "b78", "r78-1", "r78-2", "r78-3"}) {
      assertFalse(redisState.exists(key), key);
    }
    assertFalse(o.owes(tid));
    assertFalse(n.owes(tid));
  }

  /**
   * Multi-lock [a79, RedLock(r1 on A, r2, r3 on B)] held once; the unlock with B dark releases
   * a79 and r1, r2's and r3's final releases are in doubt (the thread no longer holds them; they
   * are released in the background). Once they are gone a rival takes the RedLock; then the
   * thread's completion settles r2 and r3 part by part. Held: the rival keeps every member, and
   * the completion does not report a loss of the rival's hold as the thread's release.
   */
  @Test
  void redLockMember_finalReleasesInDoubt_rivalTakesRedLock_completionSparesRival()
      throws Exception {
    DistributedLock red = a.getRedLock(a.getLock("r79-1"), b.getLock("r79-2"),
        b.getLock("r79-3"));
    MultiLock multi = (MultiLock) a.getMultiLock(a.getLock("a79"), red);
    multi.lock();
    failUnlockOnB(multi);
    dev.holdfast.testing.Await.until(java.time.Duration.ofSeconds(60),
        () -> !redisState.exists("r79-2") && !redisState.exists("r79-3"),
        "the in-doubt releases done in the background (or expired)");
    DistributedLock rivalRed = rival.getRedLock(rival.getLock("r79-1"), rival.getLock("r79-2"),
        rival.getLock("r79-3"));
    java.util.concurrent.atomic.AtomicBoolean rivalHolds = new java.util.concurrent.atomic
        .AtomicBoolean();
    CountDownLatch taken = new CountDownLatch(1);
    CountDownLatch done = new CountDownLatch(1);
    Thread rivalThread = new Thread(() -> {
      rivalHolds.set(rivalRed.tryLock());
      taken.countDown();
      try {
        done.await();
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
      if (rivalHolds.get()) {
        rivalRed.unlock();
      }
    });
    rivalThread.start();
    try {
      assertTrue(taken.await(60, TimeUnit.SECONDS));
      assertTrue(rivalHolds.get(), "the rival takes the free RedLock");
      RuntimeException completion = unlockOutcome(multi);
      System.out.println("79 completion: " + completion);
      assertTrue(redisState.exists("r79-1") && redisState.exists("r79-2")
          && redisState.exists("r79-3"), "the rival keeps every member");
      assertTrue(rivalRed.isLocked());
      assertFalse(multi.owes(Thread.currentThread().getId()));
    } finally {
      done.countDown();
    }
    rivalThread.join(60_000);
    assertFalse(redisState.exists("r79-2"));
  }

  /**
   * The same lock r2 (on B) directly and as a RedLock part: multi-lock [r80-2, RedLock(r80-1
   * on A, r80-2, r80-3 on B)] held twice (r2 count 4). The inner unlock: the RedLock goes first
   * (its name sorts last): r2's release RUNS with its reply lost, then B is dark: r3 and the
   * direct r2 release do not run (the direct one re-sends the pending request, unanswered). Both
   * dues hold the same pending request. Held: the completion releases r2 twice in total (the
   * pending one settled as run, plus one), and the outer unlock leaves nothing.
   */
  @Test
  void sameLockDirectAndAsRedLockPart_pendingShared_countsMatch() {
    DistributedLock red = a.getRedLock(a.getLock("r80-1"), b.getLock("r80-2"),
        b.getLock("r80-3"));
    DistributedLock multi = a.getMultiLock(b.getLock("r80-2"), red);
    multi.lock();
    multi.lock();
    assertEquals("4", redisState.hget("r80-2", RedisProbe.fieldOf(b)));
    proxy.runNextScriptThenBlackHole();
    RuntimeException inner = unlockOutcome(multi);
    proxy.blackHole(false);
    System.out.println("80 inner: " + inner + " r2="
        + redisState.hget("r80-2", RedisProbe.fieldOf(b)));
    assertTrue(inner instanceof dev.holdfast.LockException, "" + inner);
    RuntimeException completion = unlockOutcome(multi);
    System.out.println("80 completion: " + completion + " r2="
        + redisState.hget("r80-2", RedisProbe.fieldOf(b)));
    assertNull(completion);
    assertEquals("2", redisState.hget("r80-2", RedisProbe.fieldOf(b)), "two sections left");
    assertEquals("1", redisState.hget("r80-3", RedisProbe.fieldOf(b)));
    assertEquals("1", redisState.hget("r80-1", RedisProbe.fieldOf(a)));
    assertNull(unlockOutcome(multi), "outer");
    for (String key : new String[] {"r80-1", "r80-2", "r80-3"}) {
      assertFalse(redisState.exists(key), key);
    }
  }

  /**
   * A RedLock alone (r1, r2 on A, r3 on B) held twice; its inner unlock with B dark releases a
   * majority and returns normally, r3's release not run. r3's section is owed on its hold, so
   * the outer unlock releases everything; and getHoldCount() of r3 in between counts only the
   * application's section.
   */
  @Test
  void redLockAlone_minorityInnerReleaseNotRun_outerUnlockReleasesAll() {
    DistributedLock red = a.getRedLock(a.getLock("r79-1"), a.getLock("r79-2"),
        b.getLock("r79-3"));
    red.lock();
    red.lock();
    assertNull(unlockWithBDark(red), "a majority released");
    assertEquals(1, b.getLock("r79-3").getHoldCount(), "the application's outer section");
    assertNull(unlockOutcome(red));
    assertFalse(redisState.exists("r79-1"));
    assertFalse(redisState.exists("r79-2"));
    assertFalse(redisState.exists("r79-3"), "r3 must not stay held");
  }

}

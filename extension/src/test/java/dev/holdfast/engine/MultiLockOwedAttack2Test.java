package dev.holdfast.engine;

import static java.util.concurrent.TimeUnit.MILLISECONDS;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.holdfast.DistributedLock;
import dev.holdfast.LockException;
import java.lang.reflect.Proxy;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Second round of attacks on the multi-lock's owed record (commits 36ead1d, 3a50e1b): the
 * acquisition that finishes a failed unlock ({@code MultiLock#finishOwed}), the request id a
 * re-entry settles ({@code Hold#releaseSettledByReentry}), RedLock members, later rounds and
 * interrupts. Client A talks to Redis directly, client B through a {@link BlackHoleProxy}. A
 * "hook" member — a real lock of client A behind a {@link Proxy} that runs an action right after
 * (or before) its acquisition — puts a fault at an exact point inside a multi-lock acquisition;
 * it sorts last, so its action runs after every other member was taken. Five probes showed
 * defects, fixed since: a give-back in {@code finishOwed} that failed left a record that made the
 * next unlock() release only that member; {@code finishOwed} unlocked a RedLock or nested
 * multi-lock member the acquisition had just taken; and a hold remembered only the newest
 * release a re-entry settled as run.
 */
@Timeout(value = 90, unit = TimeUnit.SECONDS, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
class MultiLockOwedAttack2Test extends MultiLockOwedFixture {

  // ---- 1: finishOwed's own release fails ----

  /**
   * The multi-lock is held twice; the inner unlock's release of B gets no answer and never ran
   * (count 2 kept, pending). The thread takes the multi-lock a third time: the acquisition
   * settles B's release (not run: 3) and finishOwed releases B once — but that release is
   * black-holed too (the hook member, sorted last, blacks out the link right after the
   * acquisition's last member). The acquisition still reports success. The thread then made
   * three acquisitions and one unlock, which the acquisition was to complete: two unlocks must
   * release every member. The record kept B alone, so the next unlock() is taken for the retry
   * of the old failed unlock: it releases only B and returns normally; A and the hook keep a
   * section after the two unlocks (held for ever, renewed by the watchdog).
   */
  @Test
  void finishOwedReleaseFails_nextUnlocksReleaseEveryMember() {
    // finishOwed's release of B never reaches Redis
    DistributedLock multi = relockWithFailingFinish("21", () -> proxy.blackHole(true));
    RuntimeException first = unlockOutcome(multi);
    RuntimeException second = unlockOutcome(multi);
    System.out.println("finishOwed failed: first=" + first + " second=" + second + " a="
        + a.getLock("a21").getHoldCount() + " b=" + b.getLock("b21").getHoldCount() + " z="
        + a.getLock("z21").getHoldCount());
    assertNull(first, "the inner unlock: " + first);
    assertNull(second, "the outer unlock: " + second);
    assertFalse(redisState.exists("a21"), "A released by the two unlocks");
    assertFalse(redisState.exists("z21"), "the hook member released by the two unlocks");
    assertFalse(redisState.exists("b21"), "B released by the two unlocks");
  }

  /**
   * The same with finishOwed's release of B run in Redis and only its reply lost: still the
   * next unlock() is the old record's retry (re-sends B's release) and the other members keep
   * a section. Regardless of what the failed call did, the counts must match.
   */
  @Test
  void finishOwedReleaseRanUnanswered_nextUnlocksReleaseEveryMember() {
    DistributedLock multi = relockWithFailingFinish("22", proxy::runNextScriptThenBlackHole);
    RuntimeException first = unlockOutcome(multi);
    int aAfterFirst = a.getLock("a22").getHoldCount();
    int bAfterFirst = b.getLock("b22").getHoldCount();
    System.out.println("finishOwed ran unanswered: first=" + first + " a=" + aAfterFirst
        + " b=" + bAfterFirst);
    assertNull(first);
    assertEquals(1, aAfterFirst, "the first unlock releases one section of A");
    assertEquals(1, bAfterFirst, "and one of B");
  }

  /**
   * finishOwed releases a member of another kind (a RedLock) unconditionally: {@code Due.owed}
   * is true for any member not of this engine. The RedLock's final release is in doubt on two
   * of its three members (fewer than a majority released: LockException), so the multi-lock's
   * unlock fails. The thread takes the multi-lock again: the RedLock is taken afresh (the doubts
   * settled) — and then finishOwed calls its unlock(), ending the hold the acquisition is about
   * to report as taken. The thread believes it holds the multi-lock; the RedLock's members are
   * free for anyone.
   */
  @Test
  void redLockMember_finalReleaseInDoubt_multiRelocked_stillHeld() {
    warmUp(b.getLock("warm2"));
    DistributedLock red = a.getRedLock(a.getLock("r23-1"), b.getLock("r23-2"),
        b.getLock("r23-3"));
    DistributedLock multi = a.getMultiLock(a.getLock("a23"), red);
    multi.lock();
    failUnlockOnB(multi); // A released, r23-1 released; r23-2 and r23-3 in doubt
    multi.lock();
    boolean held = multi.isHeldByCurrentThread();
    boolean memberInRedis = redisState.exists("r23-2") && redisState.exists("r23-3");
    System.out.println("RedLock member: held=" + held + " r23-2/3 in Redis=" + memberInRedis);
    assertTrue(held, "the multi-lock was just acquired: its RedLock member is held");
    assertTrue(memberInRedis, "Redis has the RedLock's members");
    assertNull(unlockOutcome(multi));
    assertFalse(redisState.exists("a23"));
  }

  /** The same with a multi-lock as the member: the inner multi-lock is unlocked by finishOwed. */
  @Test
  void nestedMultiMember_finalReleaseInDoubt_multiRelocked_stillHeld() {
    DistributedLock inner = a.getMultiLock(a.getLock("n24-c"), b.getLock("n24-b"));
    DistributedLock multi = a.getMultiLock(a.getLock("a24"), inner);
    multi.lock();
    failUnlockOnB(multi); // inner: C released, B's final release in doubt; A released
    multi.lock();
    boolean held = multi.isHeldByCurrentThread();
    System.out.println("nested multi member: held=" + held + " b=" + redisState.exists("n24-b")
        + " c=" + redisState.exists("n24-c"));
    assertTrue(held, "the multi-lock was just acquired: its inner multi-lock is held");
    assertTrue(redisState.exists("n24-b") && redisState.exists("n24-c"));
  }

  // ---- 3: releaseSettledByReentry keeps only the newest request id ----

  /**
   * The multi-lock's pending release of B (P1) ran unanswered; the thread's re-entry of B alone
   * settles it as ran (settled = P1): the record's Due is done. Then the thread's own unlock of
   * B fails the same way (P2) and its next re-entry settles that one as ran: settled = P2
   * overwrites P1, and the record's Due(B, P1) is "owed" again. The retry of the multi-lock's
   * unlock releases B a second time: of the thread's three single acquisitions of B and one
   * (completed) single unlock, two sections must remain; one does.
   */
  @Test
  void settledRunReleaseOverwrittenByLaterOne_retryDoesNotReleaseTwice() {
    DistributedLock bAlone = b.getLock("b25");
    DistributedLock multi = a.getMultiLock(a.getLock("a25"), b.getLock("b25"));
    bAlone.lock();
    multi.lock();
    proxy.runNextScriptThenBlackHole(); // the multi-lock's release of B (P1) runs unanswered
    assertFailed(multi);
    proxy.blackHole(false);
    bAlone.lock(); // settles P1: ran (1), re-enters (2)
    proxy.runNextScriptThenBlackHole(); // the thread's own release of B (P2) runs unanswered
    assertThrows(LockException.class, bAlone::unlock);
    proxy.blackHole(false);
    bAlone.lock(); // settles P2: ran (1), re-enters (2)
    assertEquals("2", redisState.hget("b25", RedisProbe.fieldOf(b)));
    RuntimeException retry = unlockOutcome(multi);
    int count = bAlone.getHoldCount();
    String inRedis = redisState.hget("b25", RedisProbe.fieldOf(b));
    System.out.println("overwritten settlement: retry=" + retry + " count=" + count + " redis="
        + inRedis);
    assertEquals(2, count, "the multi-lock's release of B was settled by the first re-entry");
    assertEquals("2", inRedis);
  }



  // ---- 2: a later round; members given back between rounds ----

  /** B's pending release did not run: round 1 takes and gives B back, round 2 takes it again. */
  @Test
  void releaseNotRun_tryLockSucceedsInLaterRound_countsMatch() throws Exception {
    laterRound("m26", false);
  }

  /** The same with B's pending release run (settled as ran by round 1's re-entry). */
  @Test
  void releaseRanUnanswered_tryLockSucceedsInLaterRound_countsMatch() throws Exception {
    laterRound("m27", true);
  }

  /**
   * The thread holds B alone and the multi-lock [B, C]; the multi-lock's unlock releases C and
   * fails on B (ran or not). A rival takes C with a short lease; the thread's multi-lock tryLock
   * takes B in round 1 (settling its pending release), finds C busy, gives B back, waits for C
   * and takes both in round 2. One unlock of the multi-lock then leaves exactly the thread's
   * single section of B.
   */
  private void laterRound(String key, boolean ran) throws Exception {
    DistributedLock bAlone = b.getLock(key + "-0");
    DistributedLock multi = a.getMultiLock(b.getLock(key + "-0"), a.getLock(key + "-1"));
    bAlone.lock();
    multi.lock();
    if (ran) {
      proxy.runNextScriptThenBlackHole();
    } else {
      proxy.blackHole(true);
    }
    assertFailed(multi);
    proxy.blackHole(false);
    assertFalse(redisState.exists(key + "-1"), "C released by the failed call");
    assertTrue(rival.getLock(key + "-1").tryLock(0, 2_000, MILLISECONDS), "the rival takes C");
    assertTrue(multi.tryLock(20_000, MILLISECONDS), "round 2 takes both once C expires");
    assertEquals(2, bAlone.getHoldCount(), "B: the single section and the multi-lock's");
    assertNull(unlockOutcome(multi));
    assertEquals(1, bAlone.getHoldCount(), "the single section of B remains");
    assertEquals("1", redisState.hget(key + "-0", RedisProbe.fieldOf(b)));
    assertFalse(redisState.exists(key + "-1"));
    bAlone.unlock();
    assertFalse(redisState.exists(key + "-0"));
  }

  // ---- 5: interrupts ----

  /**
   * B's pending release did not run; the thread's lockInterruptibly() of the multi-lock takes B
   * (settling it: not run, so the multi-lock's release is still owed) and is interrupted at the
   * hook member (sorted last). B is given back; the record must survive: the next unlock()
   * releases B's owed section and leaves the thread's single one.
   */
  @Test
  void lockInterruptiblyInterruptedAfterMemberTaken_recordSurvives() {
    interruptedAfterMemberTaken("m28", false);
  }

  /** The same with B's release run: round 1 settles it as ran; the retry releases nothing. */
  @Test
  void lockInterruptiblyInterruptedAfterMemberTaken_ranRelease_notReleasedAgain() {
    interruptedAfterMemberTaken("m29", true);
  }

  private void interruptedAfterMemberTaken(String key, boolean ran) {
    AtomicReference<Runnable> beforeAcquire = new AtomicReference<>();
    DistributedLock hook = hook(a.getLock(key + "-z"), beforeAcquire, null);
    DistributedLock bAlone = b.getLock(key + "-b");
    DistributedLock multi = a.getMultiLock(a.getLock(key + "-a"), b.getLock(key + "-b"), hook);
    bAlone.lock();
    multi.lock();
    if (ran) {
      proxy.runNextScriptThenBlackHole();
    } else {
      proxy.blackHole(true);
    }
    assertFailed(multi);
    proxy.blackHole(false);
    beforeAcquire.set(() -> Thread.currentThread().interrupt());
    assertThrows(InterruptedException.class, multi::lockInterruptibly);
    beforeAcquire.set(null);
    assertFalse(Thread.interrupted(), "the interrupt was consumed");
    assertFalse(redisState.exists(key + "-a"), "A given back");
    assertFalse(redisState.exists(key + "-z"), "the hook member never taken");
    RuntimeException retry = unlockOutcome(multi);
    System.out.println(key + " interrupted: retry=" + retry + " b=" + bAlone.getHoldCount());
    assertNull(retry, "the retry finishes the failed unlock: " + retry);
    assertEquals(1, bAlone.getHoldCount(), "the thread's single section of B remains");
    assertEquals("1", redisState.hget(key + "-b", RedisProbe.fieldOf(b)));
    bAlone.unlock();
    assertFalse(redisState.exists(key + "-b"));
  }

  // ---- 4: a read member while the thread also holds the write side ----

  /**
   * The thread holds the write side of a read-write lock and the multi-lock [A, read side] twice;
   * the inner unlock's release of the read side runs unanswered. The thread takes the
   * multi-lock again (settling it as ran): two unlocks then release everything of the
   * multi-lock, and the write side stays held.
   */
  @Test
  void readMemberUnderOwnWriteLock_releaseRanUnanswered_multiRelocked_countsMatch() {
    warmUp(b.getReadWriteLock("warm-rw").readLock());
    DistributedLock write = b.getReadWriteLock("rw30").writeLock();
    DistributedLock read = b.getReadWriteLock("rw30").readLock();
    DistributedLock multi = a.getMultiLock(a.getLock("a30"), read);
    write.lock();
    multi.lock();
    multi.lock();
    proxy.runNextScriptThenBlackHole();
    assertFailed(multi);
    proxy.blackHole(false);
    multi.lock();
    assertEquals(2, read.getHoldCount(), "read side: two sections, as A");
    assertEquals(2, a.getLock("a30").getHoldCount());
    assertNull(unlockOutcome(multi));
    assertNull(unlockOutcome(multi));
    assertEquals(0, read.getHoldCount());
    assertFalse(redisState.exists("a30"));
    assertEquals(1, write.getHoldCount(), "the write side is untouched");
    write.unlock();
    assertFalse(redisState.exists("rw30"));
  }
}

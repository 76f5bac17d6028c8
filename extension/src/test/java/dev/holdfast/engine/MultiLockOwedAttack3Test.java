package dev.holdfast.engine;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.holdfast.DistributedLock;
import dev.holdfast.LockException;
import java.lang.reflect.Field;
import java.lang.reflect.Proxy;
import java.util.Collection;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Third round of attacks on the multi-lock's owed record (commit 41cf706): the give-back that
 * {@code MultiLock#finishOwed} leaves owed on a member's hold when it fails
 * ({@code Hold#giveBackOwed}), members that finishOwed never releases (a RedLock, a foreign
 * {@link DistributedLock}), and the set of releases a re-entry settled as run. Client A talks to
 * Redis directly, client B through a {@link BlackHoleProxy}; a "hook" member (a real lock behind
 * a {@link Proxy}, sorted last) runs an action right after its acquisition. Three probes showed
 * defects, fixed since: a RedLock or foreign member whose release did not run stayed held once
 * too often after the multi-lock was taken again (now its unlock() is retried before the
 * acquisition), and a hold remembered every settled release for its whole life (now the
 * newest few).
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
class MultiLockOwedAttack3Test extends MultiLockOwedFixture {

  // ---- fix 2: members finishOwed does not release ----

  /**
   * Multi-lock [A, RedLock(r1 direct, r2 and r3 through B)] held twice; the inner unlock
   * releases A and r1, and r2's and r3's releases never reach Redis (not run: count 2, pending),
   * so the RedLock fails (1 of 3) and the multi-lock's unlock fails. The thread takes the
   * multi-lock again: the RedLock's acquisition settles r2's and r3's pending releases (not run)
   * and re-enters them (3); finishOwed skips the RedLock. Three acquisitions and one unlock: two
   * unlocks must release everything. r2 and r3 keep a section — a majority: the RedLock stays
   * held by the thread for ever (renewed by the watchdog), and nobody else can take it.
   */
  @Test
  void redLockMember_releaseNotRun_multiRelocked_unlocksReleaseIt() {
    DistributedLock red = a.getRedLock(a.getLock("r31-1"), b.getLock("r31-2"),
        b.getLock("r31-3"));
    DistributedLock multi = a.getMultiLock(a.getLock("a31"), red);
    takeTwiceThenFailUnlock(multi); // A 1, r1 1; r2, r3 2 with a pending release that never ran
    assertEquals("2", redisState.hget("r31-2", RedisProbe.fieldOf(b)), "not run");
    multi.lock();
    assertNull(unlockOutcome(multi), "inner unlock");
    assertNull(unlockOutcome(multi), "outer unlock");
    boolean r2 = redisState.exists("r31-2");
    boolean r3 = redisState.exists("r31-3");
    boolean redHeld = red.isHeldByCurrentThread();
    System.out.println("RedLock not run: r2=" + r2 + " r3=" + r3 + " red held=" + redHeld);
    assertFalse(redisState.exists("a31"));
    assertFalse(redisState.exists("r31-1"));
    assertFalse(r2, "r2 released by the two unlocks");
    assertFalse(r3, "r3 released by the two unlocks");
    assertFalse(redHeld, "the RedLock is not held after every section was unlocked");
  }

  /**
   * The RedLock member's owed release is retried before the next acquisition; while Redis still
   * does not answer, that retry fails, and so does the acquisition, taking nothing and saying
   * why; once Redis answers, the next acquisition finishes it and two unlocks free everything.
   */
  @Test
  void redLockMember_retryFailsAgain_acquisitionFailsTakingNothing_thenRecovers() {
    DistributedLock red = a.getRedLock(a.getLock("r33-1"), b.getLock("r33-2"),
        b.getLock("r33-3"));
    DistributedLock multi = a.getMultiLock(a.getLock("a33"), red);
    multi.lock();
    multi.lock();
    proxy.blackHole(true);
    assertFailed(multi); // A 1, r1 1; r2, r3 2 with a pending release that never ran
    LockException failed = assertThrows(LockException.class, multi::tryLock,
        "the owed release fails again: nothing is acquired");
    proxy.blackHole(false);
    assertTrue(failed.getMessage().contains("acquired nothing")
        && failed.getMessage().contains(red.getName()), failed.getMessage());
    assertEquals("1", redisState.hget("a33", RedisProbe.fieldOf(a)), "A not taken again");
    multi.lock();
    assertNull(unlockOutcome(multi), "inner unlock");
    assertNull(unlockOutcome(multi), "outer unlock");
    for (String key : new String[] {"a33", "r33-1", "r33-2", "r33-3"}) {
      assertFalse(redisState.exists(key), key + " released by the two unlocks");
    }
  }

  /**
   * The same with a foreign member (a {@link DistributedLock} proxy of B's lock, as another
   * library's lock would be): its release did not run, the re-acquisition re-enters it, and
   * finishOwed skips it — DistributedLock#unlock() says an unlock that did not run "is still
   * owed to unlock()" and must be called again before acquiring again, which the multi-lock
   * never does. The member stays held after the last unlock.
   */
  @Test
  void foreignMember_releaseNotRun_multiRelocked_unlocksReleaseIt() {
    DistributedLock foreign = hook(b.getLock("f32"), null, null);
    DistributedLock multi = a.getMultiLock(a.getLock("a32"), foreign);
    takeTwiceThenFailUnlock(multi);
    multi.lock();
    assertNull(unlockOutcome(multi));
    assertNull(unlockOutcome(multi));
    System.out.println("foreign not run: f32 in Redis=" + redisState.exists("f32"));
    assertFalse(redisState.exists("a32"));
    assertFalse(redisState.exists("f32"), "the foreign member released by the two unlocks");
  }

  /**
   * A nested multi-lock keeps its own record, so its acquisition finishes it: [A, [C, B]] held
   * twice, B's release not run; taken again, two unlocks release everything.
   */
  @Test
  void nestedMultiMember_releaseNotRun_multiRelocked_unlocksReleaseIt() {
    DistributedLock inner = a.getMultiLock(a.getLock("n33-c"), b.getLock("n33-b"));
    DistributedLock multi = a.getMultiLock(a.getLock("a33"), inner);
    takeTwiceThenFailUnlock(multi);
    multi.lock();
    assertNull(unlockOutcome(multi));
    assertNull(unlockOutcome(multi));
    assertFalse(redisState.exists("a33"));
    assertFalse(redisState.exists("n33-c"));
    assertFalse(redisState.exists("n33-b"));
  }

  // ---- fix 1: the give-back finishOwed leaves owed on the member's hold ----

  /**
   * The thread holds B alone, and the multi-lock [A, B, hook] is left with B's give-back owed
   * (finishOwed's release black-holed). The application's own unlock of B alone finishes the
   * give-back first, then releases its own section; the two unlocks of the multi-lock then
   * release every member.
   */
  @Test
  void giveBackOwed_memberUnlockedAlone_countsMatch() {
    DistributedLock bAlone = b.getLock("b34");
    bAlone.lock();
    DistributedLock multi = relockWithFailingFinish("34", () -> proxy.blackHole(true));
    assertEquals("4", redisState.hget("b34", RedisProbe.fieldOf(b)), "one section owed");
    assertNull(unlockOutcome(bAlone), "B alone: give-back, then its own release");
    assertEquals("2", redisState.hget("b34", RedisProbe.fieldOf(b)));
    assertNull(unlockOutcome(multi));
    assertNull(unlockOutcome(multi));
    assertFalse(redisState.exists("b34"));
    assertFalse(redisState.exists("a34"));
    assertFalse(redisState.exists("z34"));
  }

  /**
   * B's give-back owed, then B taken alone: the re-entry finishes the give-back first (count 3,
   * not 4); one unlock of B alone and two of the multi-lock release everything.
   */
  @Test
  void giveBackOwed_memberTakenAlone_countsMatch() {
    DistributedLock multi = relockWithFailingFinish("35", proxy::runNextScriptThenBlackHole);
    DistributedLock bAlone = b.getLock("b35");
    bAlone.lock();
    assertEquals("3", redisState.hget("b35", RedisProbe.fieldOf(b)));
    bAlone.unlock();
    assertNull(unlockOutcome(multi));
    assertNull(unlockOutcome(multi));
    assertFalse(redisState.exists("b35"));
    assertFalse(redisState.exists("a35"));
  }

  /**
   * B's give-back owed; the next unlock of the multi-lock finds the link still down: B's
   * give-back fails again (ran, unanswered) and the multi-lock's own release of B is not made.
   * The thread then takes the multi-lock again (not the retry): that acquisition finishes B's
   * give-back and finishOwed gives back the multi-lock's release of B; two unlocks then release
   * everything.
   */
  @Test
  void giveBackOwedFailsAgainInUnlock_multiRelocked_countsMatch() {
    DistributedLock multi = relockWithFailingFinish("36", () -> proxy.blackHole(true));
    proxy.runNextScriptThenBlackHole(); // B's give-back, re-sent by the unlock, runs unanswered
    assertFailed(multi); // A 1, z 1; B: 2 in Redis, the client 3 with the give-back pending
    proxy.blackHole(false);
    multi.lock();
    assertEquals(2, a.getLock("a36").getHoldCount());
    assertEquals("2", redisState.hget("b36", RedisProbe.fieldOf(b)), "B: as A");
    assertNull(unlockOutcome(multi));
    assertNull(unlockOutcome(multi));
    assertFalse(redisState.exists("b36"));
    assertFalse(redisState.exists("a36"));
    assertFalse(redisState.exists("z36"));
  }

  /**
   * The same, but the thread retries the failed unlock: the retry finishes the give-back and
   * the multi-lock's release of B; one more unlock releases everything.
   */
  @Test
  void giveBackOwedFailsAgainInUnlock_retried_countsMatch() {
    DistributedLock multi = relockWithFailingFinish("37", () -> proxy.blackHole(true));
    failUnlockOnB(multi);
    assertNull(unlockOutcome(multi), "the retry");
    assertEquals("1", redisState.hget("b37", RedisProbe.fieldOf(b)));
    assertNull(unlockOutcome(multi));
    assertFalse(redisState.exists("b37"));
    assertFalse(redisState.exists("a37"));
    assertFalse(redisState.exists("z37"));
  }

  /**
   * B's give-back owed; B is force-unlocked and a rival takes it. Each of the multi-lock's two
   * unlocks reports the loss (the give-back's section is closed silently); the rival's hold is
   * never touched.
   */
  @Test
  void giveBackOwed_memberLostToRival_unlocksReportLoss_rivalKeepsIt() {
    DistributedLock multi = relockWithFailingFinish("38", () -> proxy.blackHole(true));
    assertTrue(rival.getLock("b38").forceUnlock());
    assertTrue(rival.getLock("b38").tryLock());
    RuntimeException first = unlockOutcome(multi);
    RuntimeException second = unlockOutcome(multi);
    System.out.println("lost to rival: first=" + first + " second=" + second);
    assertTrue(first instanceof IllegalMonitorStateException, "first: " + first);
    assertTrue(second instanceof IllegalMonitorStateException, "second: " + second);
    assertEquals("1", redisState.hget("b38", RedisProbe.fieldOf(rival)), "the rival keeps B");
    assertFalse(redisState.exists("a38"));
    assertFalse(redisState.exists("z38"));
    assertTrue(unlockOutcome(multi) instanceof IllegalMonitorStateException, "nothing left");
  }

  /**
   * B's give-back owed; B's client is closed: the first unlock fails on B (LockException), its
   * retry finds B done, and the multi-lock's second unlock releases the other members.
   */
  @Test
  void giveBackOwed_memberClientClosed_othersReleased() {
    DistributedLock multi = relockWithFailingFinish("39", () -> proxy.blackHole(true));
    b.close();
    RuntimeException first = unlockOutcome(multi);
    RuntimeException retry = first instanceof LockException ? unlockOutcome(multi) : null;
    RuntimeException second = unlockOutcome(multi);
    System.out.println("client closed: first=" + first + " retry=" + retry + " second="
        + second);
    assertNull(retry, "the retry finds B's client closed: done");
    assertFalse(redisState.exists("a39"), "A released by the two unlocks");
    assertFalse(redisState.exists("z39"), "the hook member released by the two unlocks");
  }

  // ---- fix 3: the releases a re-entry settled as run ----

  /**
   * A long-lived hold of B (the outer section) with many inner sections whose unlock ran
   * unanswered, each settled as run by the next re-entry. No multi-lock record refers to any of
   * those requests, yet the hold kept every id until it ended: memory grew with the number of
   * failed unlocks over the hold's life (a watchdog hold lives for ever). Now it keeps the newest
   * few only.
   */
  @Test
  void settledIdsOnLongLivedHold_stayBounded() throws Exception {
    DistributedLock bAlone = b.getLock("b40");
    bAlone.lock(); // the long-lived outer section
    int failures = 25;
    for (int i = 0; i < failures; i++) {
      bAlone.lock();
      proxy.runNextScriptThenBlackHole();
      assertTrue(unlockOutcome(bAlone) != null, "the inner unlock got no answer");
      proxy.blackHole(false);
    }
    bAlone.lock(); // settles the last one
    Hold hold = ((RedisLock) bAlone).holdOf(Thread.currentThread().getId());
    Field f = Hold.class.getDeclaredField("releasesSettledByReentry");
    f.setAccessible(true);
    Collection<?> ids = (Collection<?>) f.get(hold);
    int kept = ids == null ? 0 : ids.size();
    System.out.println("settled ids kept on one hold after " + failures + " failures: " + kept);
    assertEquals("2", redisState.hget("b40", RedisProbe.fieldOf(b)), "counts right");
    assertTrue(kept <= 16, "a hold keeps only the newest settled ids: " + kept);
  }

  // ---- helpers ----


}

package dev.holdfast.engine;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.holdfast.DistributedLock;
import dev.holdfast.LockClient;
import dev.holdfast.LockClientConfig;
import dev.holdfast.LockLost;
import dev.holdfast.testing.Await;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.function.Function;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Attack round 9 on the give-backs a hold COUNTS (commit b8d828e: {@code Hold#giveBacksOwed},
 * {@code RedisLock#finishGiveBack} giving them back one by one). Two give-backs are owed on a
 * RedLock member r3 (client {@link #bw}, through the black-hole proxy) by holding the RedLock
 * three times and unlocking it twice with B dark (each returns normally: a majority released).
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
class GiveBacksOwedAttackTest extends MultiLockOwedFixture {

  LockClient bw;

  @BeforeEach
  void shortWatchdogClient() {
    bw = clients.create(Map.of(LockClientConfig.ADDRESS, proxy.uri(),
        LockClientConfig.TIMEOUT, "200ms", LockClientConfig.WATCHDOG_TIMEOUT, "5s"));
    warmUp(bw.getLock("warm-bw"));
  }

  private DistributedLock red(String p) {
    return a.getRedLock(a.getLock(p + "-1"), a.getLock(p + "-2"), bw.getLock(p + "-3"));
  }

  private String r3(String p) {
    return redisState.hget(p + "-3", RedisProbe.fieldOf(bw));
  }

  /** RedLock {@code red} held {@code times}; then times-1 unlocks with B dark: r3 owes times-1. */
  private void owe(DistributedLock red, String p, int times) {
    owe(red, p, times, times - 1);
  }

  /** RedLock held {@code times}, then {@code dark} unlocks with B dark: r3 owes {@code dark}. */
  private void owe(DistributedLock red, String p, int times, int dark) {
    for (int i = 0; i < times; i++) {
      red.lock();
    }
    for (int i = 1; i <= dark; i++) {
      assertNull(unlockWithBDark(red), "unlock " + i + ": a majority released");
    }
    assertEquals(Integer.toString(times), r3(p), "r3: nothing ran");
    assertEquals(Integer.toString(times - dark), redisState.hget(p + "-1", RedisProbe.fieldOf(a)));
  }

  private void assertAllFree(String p) {
    for (int i = 1; i <= 3; i++) {
      assertFalse(redisState.exists(p + "-" + i), p + "-" + i + " left at "
          + redisState.hget(p + "-" + i, RedisProbe.fieldOf(i == 3 ? bw : a)));
    }
  }

  /** Two owed; B answers; the outer unlock gives back both, then releases r3's own section. */
  @Test
  void twoOwed_outerUnlock_releasesAll() {
    DistributedLock red = red("h1");
    owe(red, "h1", 3);
    assertNull(unlockOutcome(red));
    assertAllFree("h1");
  }

  /** Two owed: getHoldCount finishes both first: 1 (Redis too); the outer unlock frees all. */
  @Test
  void twoOwed_getHoldCount_isTheApplications() {
    DistributedLock red = red("h2");
    owe(red, "h2", 3);
    assertEquals(1, bw.getLock("h2-3").getHoldCount());
    assertEquals("1", r3("h2"));
    assertNull(unlockOutcome(red));
    assertAllFree("h2");
  }

  /** Two owed: the RedLock re-entered: both finished before the re-entry counts (2 everywhere). */
  @Test
  void twoOwed_reentry_countsMatch() {
    DistributedLock red = red("h3");
    owe(red, "h3", 3);
    red.lock();
    assertEquals("2", redisState.hget("h3-1", RedisProbe.fieldOf(a)));
    assertEquals("2", r3("h3"));
    assertNull(unlockOutcome(red));
    assertEquals("1", r3("h3"));
    assertNull(unlockOutcome(red));
    assertAllFree("h3");
  }

  /**
   * Two owed (r3 at 4, the application's 2); the third unlock's first give-back RUNS with its
   * reply lost (pending, expected 4), the second is not tried, the own release not made: three
   * owed. B answers: getHoldCount re-sends the pending one under its request (settled as run,
   * once), gives back the other two: 1. The outer unlock frees everything.
   */
  @Test
  void firstGiveBackPending_resentOnce_countsMatch() {
    DistributedLock red = red("h4");
    owe(red, "h4", 4, 2);
    proxy.runNextScriptThenBlackHole();
    RuntimeException third = unlockOutcome(red);
    proxy.blackHole(false);
    assertNull(third, "a majority released");
    assertEquals("3", r3("h4"), "the first give-back ran, once");
    assertEquals(1, bw.getLock("h4-3").getHoldCount());
    assertEquals("1", r3("h4"), "nothing applied twice, nothing left");
    assertNull(unlockOutcome(red));
    assertAllFree("h4");
  }

  /**
   * Two owed (r3 at 4); the third unlock's first give-back RUNS with its reply lost (pending at
   * expected 4, three owed). The thread re-enters the RedLock: the pending one is re-sent under
   * its request (settled as run once), the other two given back, the re-entry counts on top: 2
   * everywhere.
   */
  @Test
  void secondGiveBackPending_reentry_countsMatch() {
    DistributedLock red = red("h5");
    owe(red, "h5", 4, 2);
    proxy.runNextScriptThenBlackHole();
    RuntimeException third = unlockOutcome(red);
    proxy.blackHole(false);
    assertNull(third, "a majority released");
    assertEquals("3", r3("h5"), "the first give-back ran, once");
    red.lock();
    assertEquals("2", redisState.hget("h5-1", RedisProbe.fieldOf(a)));
    assertEquals("2", r3("h5"), "pending settled as run once, then the re-entry");
    assertNull(unlockOutcome(red));
    assertNull(unlockOutcome(red));
    assertAllFree("h5");
  }

  /**
   * Two owed; r3 force-unlocked meanwhile. The outer unlock (B answering): the first give-back
   * finds r3 gone (lost, reported), the second and the own section close silently; the RedLock
   * returns normally (a majority released). r3's loss reported exactly once, its hold gone, and
   * the RedLock can be taken and released again cleanly.
   */
  @Test
  void twoOwed_forceUnlocked_lossReportedOnce_holdForgotten() {
    DistributedLock red = red("h6");
    owe(red, "h6", 3);
    List<LockLost> lost = new CopyOnWriteArrayList<>();
    bw.onLockLost(lost::add);
    rival.getLock("h6-3").forceUnlock();
    RuntimeException outer = unlockOutcome(red);
    assertNull(outer, "r1, r2 released: " + outer);
    Await.until(Duration.ofSeconds(20), () -> !lost.isEmpty(), "r3's loss reported");
    assertFalse(bw.getLock("h6-3").isHeldByCurrentThread());
    assertEquals(0, bw.getLock("h6-3").getHoldCount());
    red.lock();
    assertEquals("1", r3("h6"));
    assertNull(unlockOutcome(red));
    assertAllFree("h6");
    assertEquals(1, lost.stream().filter(l -> l.lockName().equals("h6-3")).count(),
        "reported once: " + lost);
  }

  /**
   * Composite give-back (not RedLock) on a fair lock, a read lock and a write lock of client B,
   * each held once by the application: multi-lock [member, hook x] tried once while a rival
   * holds x; the hook arms "run the next script, then black-hole" before x is tried, so the
   * member's give-back RUNS with its reply lost (pending, owed). B answers; the thread re-enters
   * the member alone: the give-back is settled as run once, the re-entry counts on top: 2; two
   * unlocks free it.
   */
  @Test
  void compositeGiveBackPending_fairReadWrite_reentryCountsMatch() {
    Map<String, DistributedLock> members = new java.util.LinkedHashMap<>();
    members.put("cf", bw.getFairLock("cf"));
    members.put("cr", bw.getReadWriteLock("cr").readLock());
    members.put("cw", bw.getReadWriteLock("cw").writeLock());
    for (Map.Entry<String, DistributedLock> e : members.entrySet()) {
      String p = e.getKey();
      DistributedLock member = e.getValue();
      DistributedLock x = a.getLock(p + "-x");
      java.util.concurrent.atomic.AtomicReference<Runnable> before =
          new java.util.concurrent.atomic.AtomicReference<>(proxy::runNextScriptThenBlackHole);
      DistributedLock multi = a.getMultiLock(member, hook(x, before, null));
      member.lock();
      Thread rivalThread = new Thread(() -> rival.getLock(p + "-x").lock());
      rivalThread.start();
      Await.until(Duration.ofSeconds(20), () -> redisState.exists(p + "-x"), "rival holds x");
      boolean took;
      try {
        took = multi.tryLock();
      } catch (dev.holdfast.LockException giveBackFailed) {
        took = false; // the give-back got no answer: owed, finished by the next call
      }
      proxy.blackHole(false);
      before.set(null);
      assertFalse(took, p + ": x is the rival's");
      System.out.println(p + " after give-back: " + redisState.hget(p, RedisProbe.fieldOf(bw))
          + " keys field");
      member.lock();
      assertEquals(2, member.getHoldCount(), p);
      member.unlock();
      member.unlock();
      assertFalse(member.isHeldByCurrentThread(), p);
      Await.until(Duration.ofSeconds(20), () -> !redisState.exists(p), p + " freed in Redis");
    }
  }

  /**
   * Two owed; getHoldCount with B still dark: the first give-back fails again (getHoldCount
   * throws), both stay owed; B answers: getHoldCount 1, the outer unlock frees all.
   */
  @Test
  void twoOwed_getHoldCountWithBDark_bothStayOwed() {
    DistributedLock red = red("h7");
    owe(red, "h7", 3);
    proxy.blackHole(true);
    RuntimeException dark;
    try {
      bw.getLock("h7-3").getHoldCount();
      dark = null;
    } catch (RuntimeException e) {
      dark = e;
    } finally {
      proxy.blackHole(false);
    }
    assertTrue(dark != null, "no answer: the give-back failed again");
    assertEquals("3", r3("h7"));
    assertEquals(1, bw.getLock("h7-3").getHoldCount());
    assertNull(unlockOutcome(red));
    assertAllFree("h7");
  }

  /**
   * Two owed; the RedLock re-entered with B dark: r1, r2 re-entered (a majority), r3's
   * give-backs fail again and stay owed, r3 not re-entered. B answers: the two unlocks free
   * everything (r3's own release made at the first, found not held at the second).
   */
  @Test
  void twoOwed_reentryWithBDark_twoUnlocksFreeAll() {
    DistributedLock red = red("h8");
    owe(red, "h8", 3);
    proxy.blackHole(true);
    try {
      red.lock();
    } finally {
      proxy.blackHole(false);
    }
    assertEquals("2", redisState.hget("h8-1", RedisProbe.fieldOf(a)));
    assertEquals("3", r3("h8"));
    RuntimeException first = unlockOutcome(red);
    RuntimeException second = unlockOutcome(red);
    assertNull(first, "first");
    assertNull(second, "second");
    assertAllFree("h8");
  }

  /**
   * Two owed under a fixed lease of 2 s (no watchdog): the lease runs out everywhere. The
   * outer unlock: r3's two give-backs and its own section close with one loss reported.
   */
  @Test
  void twoOwed_leaseRanOut_lossReportedOnce() {
    DistributedLock red = red("h9");
    red.lock(2, TimeUnit.SECONDS);
    red.lock(2, TimeUnit.SECONDS);
    red.lock(2, TimeUnit.SECONDS);
    assertNull(unlockWithBDark(red), "first");
    assertNull(unlockWithBDark(red), "second");
    List<LockLost> lost = new CopyOnWriteArrayList<>();
    bw.onLockLost(lost::add);
    Await.until(Duration.ofSeconds(30), () -> !redisState.exists("h9-3")
        && !redisState.exists("h9-1"), "leases ran out");
    RuntimeException outer = unlockOutcome(red);
    assertTrue(outer instanceof IllegalMonitorStateException, "lost: " + outer);
    Await.until(Duration.ofSeconds(20), () -> !lost.isEmpty(), "r3's loss reported");
    assertFalse(bw.getLock("h9-3").isHeldByCurrentThread());
    assertTrue(red.tryLock(), "free again");
    red.unlock();
    assertAllFree("h9");
    assertEquals(1, lost.stream().filter(l -> l.lockName().equals("h9-3")).count(),
        "reported once: " + lost);
  }
}

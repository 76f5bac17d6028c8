package dev.holdfast.engine;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.holdfast.DistributedLock;
import dev.holdfast.LockClient;
import dev.holdfast.LockClientConfig;
import dev.holdfast.testing.Await;
import java.time.Duration;
import java.util.Map;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * Attack round 8 on the give-back a {@link RedLock}'s unlock() owes on a member whose release
 * failed while a majority was released (or found not held): {@link RedisLock#oweFailedRelease}.
 * RedLocks here are r1, r2 on client A (direct) and r3 on client {@link #bw} (through the
 * black-hole proxy, 200 ms timeout, 5 s watchdog: a hold nobody renews is gone within a second).
 */
class RedLockGiveBackAttackTest extends MultiLockOwedFixture {

  LockClient bw;

  @BeforeEach
  void shortWatchdogClient() {
    bw = clients.create(Map.of(LockClientConfig.ADDRESS, proxy.uri(),
        LockClientConfig.TIMEOUT, "200ms", LockClientConfig.WATCHDOG_TIMEOUT, "5s"));
    warmUp(bw.getLock("warm-bw"));
  }

  private DistributedLock red(String prefix) {
    return a.getRedLock(a.getLock(prefix + "-1"), a.getLock(prefix + "-2"),
        bw.getLock(prefix + "-3"));
  }

  /**
   * RedLock held twice; the inner unlock with B dark releases a majority (r3's give-back owed,
   * r3 count 2); the outer unlock with B still dark releases r1, r2 and returns normally — but on
   * r3 only the give-back was tried (it failed again and stays owed), r3's own final release was
   * never attempted nor left in doubt. The application is done with the RedLock and never calls
   * r3 again: the watchdog keeps r3 held for ever.
   * Was a defect (round 8); fixed: when the member's last section of the application's is the
   * one left owed, the hold ends in the background as a final release in doubt does.
   */
  @Test
  void finalUnlock_giveBackFailsAgain_memberHeldForever() {
    DistributedLock red = red("g1");
    red.lock();
    red.lock();
    assertNull(unlockWithBDark(red), "inner: a majority released");
    assertEquals("2", redisState.hget("g1-3", RedisProbe.fieldOf(bw)), "r3 not run");
    RuntimeException outer = unlockWithBDark(red);
    System.out.println("g1 outer: " + outer + " r3=" + redisState.hget("g1-3",
        RedisProbe.fieldOf(bw)) + " held=" + bw.getLock("g1-3").isHeldByCurrentThread());
    java.util.List<Object> lost = new java.util.concurrent.CopyOnWriteArrayList<>();
    bw.onLockLost(lost::add);
    bw.onLockAtRisk(lost::add);
    long t0 = System.nanoTime();
    assertNull(outer, "outer: a majority released, the application is done");
    assertFalse(redisState.exists("g1-1"));
    assertFalse(redisState.exists("g1-2"));
    // B answers again; nothing the thread does touches r3 any more.
    Await.until(Duration.ofSeconds(40), () -> !redisState.exists("g1-3"),
        "r3 released in the background or expired (5 s watchdog), as a final release in doubt"
            + " would be; it is at " + redisState.hget("g1-3", RedisProbe.fieldOf(bw)));
    System.out.println("g1 gone after ms " + (System.nanoTime() - t0) / 1_000_000 + " events "
        + lost);
  }

  /**
   * The IllegalMonitorStateException path: r1, r2 force-unlocked (a majority lost); the inner
   * unlock with B dark throws IMSE and owes r3's section; the application's finally block's
   * outer unlock, with B still dark, throws IMSE again — r3's give-back fails, its own final
   * release is never tried: r3 held for ever.
   * Was a defect (round 8); fixed: when the member's last section of the application's is the
   * one left owed, the hold ends in the background as a final release in doubt does.
   */
  @Test
  void majorityLost_outerUnlockGiveBackFailsAgain_memberHeldForever() {
    DistributedLock red = red("g2");
    red.lock();
    red.lock();
    rival.getLock("g2-1").forceUnlock();
    rival.getLock("g2-2").forceUnlock();
    RuntimeException inner = unlockWithBDark(red);
    assertTrue(inner instanceof IllegalMonitorStateException, "a majority lost: " + inner);
    RuntimeException outer = unlockWithBDark(red);
    System.out.println("g2 outer: " + outer);
    assertTrue(outer instanceof IllegalMonitorStateException, "still lost: " + outer);
    Await.until(Duration.ofSeconds(40), () -> !redisState.exists("g2-3"),
        "r3 released in the background or expired (5 s watchdog); it is at "
            + redisState.hget("g2-3", RedisProbe.fieldOf(bw)));
  }

  /**
   * Held: the inner unlock's r3 release RUNS with its reply lost (pending, expected 2) and is
   * owed as a give-back; the outer unlock re-sends it under its request (settled as run once:
   * count 1), then releases r3's own section — nothing applied twice, nothing left.
   */
  @Test
  void pendingGiveBack_resentOnce_outerReleasesAll() {
    DistributedLock red = red("g3");
    red.lock();
    red.lock();
    proxy.runNextScriptThenBlackHole();
    RuntimeException inner = unlockOutcome(red);
    proxy.blackHole(false);
    assertNull(inner, "a majority released");
    assertEquals("1", redisState.hget("g3-3", RedisProbe.fieldOf(bw)), "r3's release ran");
    assertEquals(1, bw.getLock("g3-3").getHoldCount(), "the give-back settled as run, once");
    assertEquals("1", redisState.hget("g3-3", RedisProbe.fieldOf(bw)), "not applied twice");
    assertNull(unlockOutcome(red));
    for (String key : new String[] {"g3-1", "g3-2", "g3-3"}) {
      assertFalse(redisState.exists(key), key);
    }
  }

  /**
   * Held: with r3's give-back owed, the thread takes r3 alone (plain lock): the give-back is
   * finished first, so r3 counts the RedLock's outer section plus the plain one; unlocking both
   * leaves nothing.
   */
  @Test
  void memberTakenAloneWithGiveBackOwed_countsOwnSectionsOnly() {
    DistributedLock red = red("g4");
    red.lock();
    red.lock();
    assertNull(unlockWithBDark(red), "a majority released");
    DistributedLock r3 = bw.getLock("g4-3");
    r3.lock();
    assertEquals("2", redisState.hget("g4-3", RedisProbe.fieldOf(bw)));
    assertEquals(2, r3.getHoldCount());
    r3.unlock();
    assertEquals("1", redisState.hget("g4-3", RedisProbe.fieldOf(bw)));
    assertNull(unlockOutcome(red));
    for (String key : new String[] {"g4-1", "g4-2", "g4-3"}) {
      assertFalse(redisState.exists(key), key);
    }
  }

  /**
   * Held: with r3's give-back owed, the RedLock is re-entered: r3's give-back is finished
   * before the re-entry counts, so every member counts 2 and two unlocks leave nothing.
   */
  @Test
  void redLockReentryWithGiveBackOwed_countsMatch() {
    DistributedLock red = red("g5");
    red.lock();
    red.lock();
    assertNull(unlockWithBDark(red), "a majority released");
    red.lock();
    assertEquals("2", redisState.hget("g5-1", RedisProbe.fieldOf(a)));
    assertEquals("2", redisState.hget("g5-3", RedisProbe.fieldOf(bw)));
    assertNull(unlockOutcome(red));
    assertEquals("1", redisState.hget("g5-3", RedisProbe.fieldOf(bw)));
    assertNull(unlockOutcome(red));
    for (String key : new String[] {"g5-1", "g5-2", "g5-3"}) {
      assertFalse(redisState.exists(key), key);
    }
  }

  /**
   * A give-back owed is one flag, not a count: RedLock held three times; the first unlock with
   * B dark owes r3's section (r3 3, one owed); the second unlock with B dark tries only that
   * give-back (fails again, re-marked) and never r3's own release — now two of r3's sections
   * are the application's no more, one is owed. The outer unlock with B answering finishes the
   * one give-back and releases one section: r3 stays held (count 1) for ever, the RedLock
   * reported released at every call. Was a defect (round 8); fixed: the hold counts the
   * give-backs it owes.
   */
  @Test
  void twoFailedUnlocks_oneGiveBackFlag_sectionLeaks() {
    DistributedLock red = red("g6");
    red.lock();
    red.lock();
    red.lock();
    assertNull(unlockWithBDark(red), "first: a majority released");
    assertNull(unlockWithBDark(red), "second: a majority released");
    assertEquals("1", redisState.hget("g6-1", RedisProbe.fieldOf(a)));
    assertEquals("3", redisState.hget("g6-3", RedisProbe.fieldOf(bw)), "r3: nothing ran");
    assertNull(unlockOutcome(red), "outer, B answering");
    assertFalse(redisState.exists("g6-1"));
    assertFalse(redisState.exists("g6-2"));
    assertFalse(redisState.exists("g6-3"), "r3 left at "
        + redisState.hget("g6-3", RedisProbe.fieldOf(bw)) + ", held by nobody's section");
  }

  /**
   * The same through a multi-lock [x on A, RedLock]: held three times, two unlocks with B dark
   * (each returns normally: the RedLock released a majority, so no multi-lock record is kept),
   * the outer unlock with B answering returns normally too — and r3 stays held for ever, the
   * thread still believing it holds r3.
   * Was a defect (round 8); fixed: the hold counts the give-backs it owes.
   */
  @Test
  void inMultiLock_twoFailedUnlocks_sectionLeaks() {
    DistributedLock multi = a.getMultiLock(a.getLock("g7-x"), red("g7"));
    multi.lock();
    multi.lock();
    multi.lock();
    assertNull(unlockWithBDark(multi), "first");
    assertNull(unlockWithBDark(multi), "second");
    assertNull(unlockOutcome(multi), "outer, B answering");
    assertFalse(redisState.exists("g7-x"));
    assertFalse(redisState.exists("g7-1"));
    assertFalse(bw.getLock("g7-3").isHeldByCurrentThread(), "the thread released everything");
    assertFalse(redisState.exists("g7-3"), "r3 left at "
        + redisState.hget("g7-3", RedisProbe.fieldOf(bw)));
  }

  /**
   * Held: with r3's give-back owed, r3 is force-unlocked and a rival takes it; the thread's
   * outer RedLock unlock finishes the give-back (finds r3 gone: lost, the section closed
   * silently) and its own release reports r3 lost — the rival's r3 is never touched, and the
   * RedLock still released its majority normally.
   */
  @Test
  void giveBackOwed_memberTakenByRival_rivalUntouched() throws Exception {
    DistributedLock red = red("g8");
    red.lock();
    red.lock();
    assertNull(unlockWithBDark(red), "a majority released");
    rival.getLock("g8-3").forceUnlock();
    java.util.concurrent.CountDownLatch taken = new java.util.concurrent.CountDownLatch(1);
    java.util.concurrent.CountDownLatch done = new java.util.concurrent.CountDownLatch(1);
    java.util.concurrent.atomic.AtomicReference<String> rivalField =
        new java.util.concurrent.atomic.AtomicReference<>();
    Thread rivalThread = new Thread(() -> {
      DistributedLock r3 = rival.getLock("g8-3");
      r3.lock();
      rivalField.set(RedisProbe.fieldOf(rival));
      taken.countDown();
      try {
        done.await();
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
      r3.unlock();
    });
    rivalThread.start();
    try {
      assertTrue(taken.await(60, java.util.concurrent.TimeUnit.SECONDS));
      assertNull(unlockOutcome(red), "a majority released");
      assertEquals("1", redisState.hget("g8-3", rivalField.get()), "rival untouched");
      assertFalse(redisState.exists("g8-1"));
      assertFalse(bw.getLock("g8-3").isHeldByCurrentThread());
    } finally {
      done.countDown();
    }
    rivalThread.join(60_000);
    assertFalse(redisState.exists("g8-3"));
  }

  /**
   * Held: four (platform: Java 17 baseline) threads, each with its own RedLock held twice, do their inner unlock at once
   * while B is dark (each owes its r3 give-back), then their outer unlock with B answering:
   * every member of every RedLock is released, no thread's give-back touches another's.
   */
  @Test
  void manyThreads_eachOwesItsGiveBack_allReleased() throws Exception {
    int n = 4;
    java.util.concurrent.CountDownLatch locked = new java.util.concurrent.CountDownLatch(n);
    java.util.concurrent.CountDownLatch dark = new java.util.concurrent.CountDownLatch(1);
    java.util.concurrent.CountDownLatch innerDone = new java.util.concurrent.CountDownLatch(n);
    java.util.concurrent.CountDownLatch light = new java.util.concurrent.CountDownLatch(1);
    java.util.List<Object> outcomes = new java.util.concurrent.CopyOnWriteArrayList<>();
    java.util.List<Thread> threads = new java.util.ArrayList<>();
    for (int t = 0; t < n; t++) {
      String prefix = "g9t" + t;
      Thread th = new Thread(() -> {
        DistributedLock red = red(prefix);
        try {
          red.lock();
          red.lock();
          locked.countDown();
          dark.await();
          outcomes.add("inner " + prefix + ": " + unlockOutcome(red));
          innerDone.countDown();
          light.await();
          outcomes.add("outer " + prefix + ": " + unlockOutcome(red));
        } catch (Throwable e) {
          outcomes.add(e);
        }
      });
      th.start();
      threads.add(th);
    }
    assertTrue(locked.await(60, java.util.concurrent.TimeUnit.SECONDS));
    proxy.blackHole(true);
    dark.countDown();
    try {
      assertTrue(innerDone.await(60, java.util.concurrent.TimeUnit.SECONDS));
    } finally {
      proxy.blackHole(false);
    }
    light.countDown();
    for (Thread t : threads) {
      t.join(60_000);
    }
    System.out.println("g9 " + outcomes);
    assertEquals(2 * n, outcomes.size(), "" + outcomes);
    assertTrue(outcomes.stream().allMatch(o -> o.toString().endsWith(": null")), "" + outcomes);
    for (int t = 0; t < n; t++) {
      for (int m = 1; m <= 3; m++) {
        assertFalse(redisState.exists("g9t" + t + "-" + m), "g9t" + t + "-" + m);
      }
    }
  }

  /**
   * Held: a RedLock with a fixed 3 s lease held twice; the inner unlock with B dark owes r3's
   * give-back; every lease runs out. The outer unlock reports the RedLock lost
   * (IllegalMonitorStateException), and nothing owed is left: the thread takes the RedLock
   * again and one unlock releases every member.
   */
  @Test
  void fixedLeaseRunsOut_withGiveBackOwed_lostThenCleanRetake() {
    DistributedLock red = red("g10");
    red.lock(3, java.util.concurrent.TimeUnit.SECONDS);
    red.lock(3, java.util.concurrent.TimeUnit.SECONDS);
    assertNull(unlockWithBDark(red), "a majority released");
    Await.until(Duration.ofSeconds(30), () -> !redisState.exists("g10-1")
        && !redisState.exists("g10-2") && !redisState.exists("g10-3"), "every lease over");
    RuntimeException outer = unlockOutcome(red);
    System.out.println("g10 outer: " + outer);
    assertTrue(outer instanceof IllegalMonitorStateException, "lost: " + outer);
    assertEquals(0, bw.getLock("g10-3").getHoldCount());
    red.lock();
    assertEquals("1", redisState.hget("g10-3", RedisProbe.fieldOf(bw)));
    assertNull(unlockOutcome(red));
    for (String key : new String[] {"g10-1", "g10-2", "g10-3"}) {
      assertFalse(redisState.exists(key), key);
    }
  }
}

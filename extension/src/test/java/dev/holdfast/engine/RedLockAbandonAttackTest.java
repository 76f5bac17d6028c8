package dev.holdfast.engine;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.holdfast.DistributedLock;
import dev.holdfast.LockClient;
import dev.holdfast.testing.Await;
import dev.holdfast.testing.FaultProxy;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * Attack round 10 on {@link RedisLock#oweFailedRelease} with {@code from == 1} (commit 1a2a703):
 * a RedLock member whose give-back failed again in the RedLock's final unlock is ended in the
 * background ({@link LockEngine#endInDoubt}, kind 'abandon', a fresh request). RedLocks here are
 * r1, r2 on client {@link #a} (direct) and r3 on client {@link #bw}, through a {@link FaultProxy}
 * whose delay holds requests back and delivers them late (200 ms timeout, 5 s watchdog). Round
 * 11 (commit bde09e1, the abandon settled under the pending release) added the last two probes.
 */
class RedLockAbandonAttackTest extends ProxiedClientFixture {

  LockClient bw;

  @BeforeEach
  void setUp() {
    bw = viaProxy("200ms", "5s");
  }

  private DistributedLock red(String prefix) {
    return a.getRedLock(a.getLock(prefix + "-1"), a.getLock(prefix + "-2"),
        bw.getLock(prefix + "-3"));
  }

  private static RuntimeException unlockOutcome(DistributedLock lock) {
    try {
      lock.unlock();
      return null;
    } catch (RuntimeException e) {
      return e;
    }
  }

  /**
   * RedLock held twice; with B's requests delayed 10 s (held back, delivered late), the inner
   * unlock's r3 release P gets no answer (pending, owed as a give-back) and the outer unlock's
   * re-send of P too: r3 is abandoned under a FRESH request (oweFailedRelease, from 1), P itself
   * is never settled nor sealed. B answers again; the thread takes r3 alone with a 60 s fixed
   * lease, twice (the abandon is settled first: field removed, then count 2). P's late copies
   * (expected 2) now arrive and apply to the NEW hold: its count drops to 1 and its expiry to
   * P's 5 s — the key expires ~55 s before the lease the thread was granted, and a rival takes
   * r3 while the thread still holds it.
   * Was a defect (round 10); fixed: the abandon is settled under the pending release's own
   * request id, so its late copies are refused.
   */
  @Test
  void abandon_pendingGiveBackLateCopy_appliesToNewHold() throws Exception {
    DistributedLock red = red("p1");
    red.lock();
    red.lock();
    proxy.delay(Duration.ofSeconds(10));
    RuntimeException inner;
    RuntimeException outer;
    try {
      inner = unlockOutcome(red);
      outer = unlockOutcome(red);
    } finally {
      proxy.delay(Duration.ZERO);
    }
    assertNull(inner, "inner: a majority released");
    assertNull(outer, "outer: a majority released");
    DistributedLock r3 = bw.getLock("p1-3");
    assertEquals(0, r3.getHoldCount(), "r3 abandoned (from 1)");
    String before = redisState.hget("p1-3", RedisProbe.fieldOf(bw));
    assertTrue(before == null || before.equals("2"),
        "nothing ran yet, or only the abandon's own resolve (the field removed): " + before);
    assertTrue(proxy.pendingRequestBytes() > 0, "P's copies still on their way");
    // The thread takes r3 again, alone, at once: the abandon is settled first.
    r3.lock(60, TimeUnit.SECONDS);
    r3.lock(60, TimeUnit.SECONDS);
    assertEquals("2", redisState.hget("p1-3", RedisProbe.fieldOf(bw)), "the new hold");
    assertEquals(2, r3.getHoldCount(), "the new hold, as the thread counts it");
    assertTrue(proxy.pendingRequestBytes() > 0, "P's copies still on their way (slow machine?)");
    Await.until(Duration.ofSeconds(60), () -> proxy.pendingRequestBytes() == 0,
        "every late copy delivered");
    String count = redisState.hget("p1-3", RedisProbe.fieldOf(bw));
    long pttl = redisState.pttl("p1-3");
    System.out.println("p1 after late copies: count=" + count + " pttl=" + pttl);
    List<Object> events = new CopyOnWriteArrayList<>();
    bw.onLockLost(events::add);
    boolean rivalTook;
    try {
      System.out.println("p1 thread count=" + r3.getHoldCount() + " held="
          + r3.isHeldByCurrentThread());
      // Within the 60 s lease the thread was granted, no one else may take r3.
      rivalTook = rival.getLock("p1-3").tryLock(15, TimeUnit.SECONDS);
      System.out.println("p1 rival took=" + rivalTook + " thread still holds="
          + r3.isHeldByCurrentThread() + " lost=" + events);
    } finally {
      while (r3.getHoldCount() > 0) {
        unlockOutcome(r3);
      }
    }
    assertEquals("2", count, "a late copy of the abandoned hold's release changed the new hold");
    assertTrue(pttl > 30_000, "the new hold's expiry was cut to " + pttl + " ms");
    assertFalse(rivalTook, "two holders of r3");
  }

  /**
   * Held: r3 abandoned (from 1) with B dark (the background resolve cannot run); the thread takes
   * the RedLock again at once, B answering: r3's abandon is settled before its new acquisition,
   * and the background resolve's late copies (same request, sealed x:) never touch the new
   * hold; one unlock leaves nothing.
   */
  @Test
  void abandonThenRedLockRetaken_newHoldUntouched() {
    DistributedLock red = red("p2");
    red.lock();
    red.lock();
    proxy.blackHole(true);
    RuntimeException inner;
    RuntimeException outer;
    try {
      inner = unlockOutcome(red);
      outer = unlockOutcome(red);
    } finally {
      proxy.blackHole(false); // held bytes (the resolve's attempts) now delivered late
    }
    assertNull(inner);
    assertNull(outer);
    red.lock();
    Await.until(Duration.ofSeconds(60), () -> proxy.pendingRequestBytes() == 0,
        "every late copy delivered");
    assertEquals("1", redisState.hget("p2-3", RedisProbe.fieldOf(bw)), "new r3 hold intact");
    assertNull(unlockOutcome(red));
    for (String key : new String[] {"p2-1", "p2-2", "p2-3"}) {
      assertFalse(redisState.exists(key), key);
    }
  }

  // ---- attack round 11 (commit bde09e1): the abandon settled under the pending release ----

  /**
   * Held: RedLock held three times; with B's requests delayed 10 s, the first unlock's r3
   * release P (expected 3) is left pending and owed, the second and third unlocks re-send P
   * (never a new request: the count stays 3), the third abandons r3 under P. B answers again;
   * the thread takes r3 alone twice with a 60 s fixed lease; all of P's late copies (original
   * and sealed re-sends) are refused: the new hold keeps its count and expiry, no rival gets in.
   */
  @Test
  void twoGiveBacksOwed_firstPending_abandonLater_newHoldUntouched() throws Exception {
    DistributedLock red = red("q1");
    red.lock();
    red.lock();
    red.lock();
    proxy.delay(Duration.ofSeconds(10));
    RuntimeException[] outcomes = new RuntimeException[3];
    try {
      for (int i = 0; i < 3; i++) {
        outcomes[i] = unlockOutcome(red);
      }
    } finally {
      proxy.delay(Duration.ZERO);
    }
    for (RuntimeException e : outcomes) {
      assertNull(e, "a majority released");
    }
    DistributedLock r3 = bw.getLock("q1-3");
    assertEquals(0, r3.getHoldCount(), "r3 abandoned");
    r3.lock(60, TimeUnit.SECONDS);
    r3.lock(60, TimeUnit.SECONDS);
    assertEquals("2", redisState.hget("q1-3", RedisProbe.fieldOf(bw)), "the new hold");
    Await.until(Duration.ofSeconds(90), () -> proxy.pendingRequestBytes() == 0,
        "every late copy delivered");
    String count = redisState.hget("q1-3", RedisProbe.fieldOf(bw));
    long pttl = redisState.pttl("q1-3");
    boolean rivalTook;
    try {
      rivalTook = rival.getLock("q1-3").tryLock(5, TimeUnit.SECONDS);
    } finally {
      while (r3.getHoldCount() > 0) {
        unlockOutcome(r3);
      }
    }
    assertEquals("2", count, "a late copy changed the new hold");
    assertTrue(pttl > 30_000, "the new hold's expiry was cut to " + pttl + " ms");
    assertFalse(rivalTook, "two holders of r3");
  }

  /**
   * Held: r3 abandoned with B dark; the thread takes the RedLock again while B is still dark
   * (r3's settle fails: a majority of r1, r2 suffices), then B answers and the thread unlocks:
   * the RedLock's unlock succeeds, r3's abandoned field is removed (by the background resolve or
   * the unlock's settle), and a fresh r3 acquisition afterwards counts 1, as Redis does.
   */
  @Test
  void abandonThenRetakenWhileDark_thenBack_nothingLeft() throws Exception {
    DistributedLock red = red("q3");
    red.lock();
    red.lock();
    proxy.blackHole(true);
    try {
      assertNull(unlockOutcome(red));
      assertNull(unlockOutcome(red));
      assertTrue(red.tryLock(30, TimeUnit.SECONDS), "r1, r2: a majority");
    } finally {
      proxy.blackHole(false);
    }
    assertNull(unlockOutcome(red));
    Await.until(Duration.ofSeconds(60), () -> proxy.pendingRequestBytes() == 0
        && !redisState.exists("q3-3"), "r3's abandoned field removed");
    for (String key : new String[] {"q3-1", "q3-2"}) {
      assertFalse(redisState.exists(key), key);
    }
    DistributedLock r3 = bw.getLock("q3-3");
    assertEquals(0, r3.getHoldCount());
    r3.lock();
    try {
      assertEquals("1", redisState.hget("q3-3", RedisProbe.fieldOf(bw)));
      assertEquals(1, r3.getHoldCount());
    } finally {
      r3.unlock();
    }
    assertFalse(redisState.exists("q3-3"));
  }
}

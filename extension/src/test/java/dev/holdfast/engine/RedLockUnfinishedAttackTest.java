package dev.holdfast.engine;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.holdfast.DistributedLock;
import dev.holdfast.LockClient;
import dev.holdfast.LockException;
import dev.holdfast.testing.Await;
import java.time.Duration;
import org.junit.jupiter.api.Test;

/**
 * Attack round 20 on a RedLock's failed-unlock record (kept in {@link LockEngine#redLockUnfinished}): after an
 * unlock() that threw {@link LockException}, the thread takes the lock another way (a second
 * RedLock sharing members, a multi-lock of the members, another handle of the same RedLock),
 * then calls the first RedLock's unlock() again. Layout as {@link RedLockRetryTest}: {@code -0}
 * on the direct client {@link #a}, {@code -1} and {@code -2} on a client through the proxy.
 */
class RedLockUnfinishedAttackTest extends ProxiedClientFixture {

  private DistributedLock red(LockClient b, String prefix) {
    return a.getRedLock(a.getLock(prefix + "-0"), b.getLock(prefix + "-1"),
        b.getLock(prefix + "-2"));
  }




  /**
   * Final unlock failed ({@code -1}, {@code -2} in doubt); the thread takes a second RedLock
   * sharing two of three members ({@code -1}, {@code -2}, and {@code -3}); the first RedLock's
   * retry finds its release went through (late) and must neither throw nor touch the second
   * RedLock's hold.
   */
  @Test
  void finalUnlockFailed_secondRedLockSharingTwo_retryLeavesIt() {
    LockClient b = viaProxy("300ms", "30s");
    DistributedLock red = red(b, "s2");
    red.lock();
    unlockUnanswered(red);
    DistributedLock other = a.getRedLock(b.getLock("s2-1"), b.getLock("s2-2"),
        a.getLock("s2-3"));
    assertTrue(other.tryLock(), "the second RedLock taken");
    red.unlock(); // the retry: its release went through late, nothing left to do
    assertTrue(other.isHeldByCurrentThread());
    assertEquals("1", count("s2-1", b));
    assertEquals("1", count("s2-2", b));
    assertEquals("1", count("s2-3", a));
    assertFalse(redisState.exists("s2-0"));
    other.unlock();
    awaitFree("s2-0", "s2-1", "s2-2", "s2-3");
  }

  /**
   * Held twice; the inner unlock fails ({@code -1}, {@code -2} pending, delivered late); the
   * thread takes a second RedLock sharing two members (re-entering them); the retry must not
   * take the second RedLock's section nor the first one's outer section.
   */
  @Test
  void innerUnlockFailed_secondRedLockSharingTwo_countsKept() {
    LockClient b = viaProxy("300ms", "30s");
    DistributedLock red = red(b, "i2");
    red.lock();
    red.lock();
    unlockUnanswered(red);
    DistributedLock other = a.getRedLock(b.getLock("i2-1"), b.getLock("i2-2"),
        a.getLock("i2-3"));
    assertTrue(other.tryLock(), "the second RedLock taken");
    red.unlock(); // the retry
    assertEquals("1", count("i2-0", a), "first RedLock's outer section");
    assertEquals("2", count("i2-1", b), "outer section + the second RedLock's");
    assertEquals("2", count("i2-2", b));
    assertEquals("1", count("i2-3", a));
    other.unlock();
    assertEquals("1", count("i2-1", b));
    assertTrue(red.isHeldByCurrentThread());
    red.unlock();
    awaitFree("i2-0", "i2-1", "i2-2", "i2-3");
  }

  /**
   * Final unlock failed; the thread takes both failed members with a multi-lock: the retry must
   * leave the multi-lock's holds alone and report success (the late release did go through).
   */
  @Test
  void finalUnlockFailed_multiLockOfMembers_retryLeavesIt() {
    LockClient b = viaProxy("300ms", "30s");
    DistributedLock red = red(b, "ml");
    red.lock();
    unlockUnanswered(red);
    DistributedLock multi = b.getMultiLock(b.getLock("ml-1"), b.getLock("ml-2"));
    assertTrue(multi.tryLock(), "multi-lock of the members taken");
    red.unlock(); // the retry
    assertTrue(multi.isHeldByCurrentThread());
    assertEquals("1", count("ml-1", b));
    assertEquals("1", count("ml-2", b));
    multi.unlock();
    awaitFree("ml-0", "ml-1", "ml-2");
  }

  /**
   * Inner unlock failed; a second handle over the same members (other order) acquires: the
   * record is dropped in both clients ("its members' holds settle their own requests"), and
   * the thread closes its two open sections. But the failed call's release of {@code -2} did
   * not run (only {@code -1}'s was held back and ran late): nobody owes it once the record is
   * dropped, so {@code -2} keeps one section of the thread's, renewed by the watchdog for ever
   * (the RedLock is not held; {@code -0}, {@code -1} are free). A third unlock() would answer
   * "not held" (IllegalMonitorStateException) instead. Seen: {@code [null, null, 1]}.
   */
  @Test
  void innerUnlockFailed_otherHandleAcquires_recordDropped() {
    LockClient b = viaProxy("300ms", "30s");
    DistributedLock red = red(b, "oh");
    red.lock();
    red.lock();
    unlockUnanswered(red);
    assertEquals(1, Clients.engine(b).redLockUnfinished().size());
    DistributedLock same = a.getRedLock(b.getLock("oh-2"), a.getLock("oh-0"),
        b.getLock("oh-1"));
    assertTrue(same.tryLock());
    // What may stay is the mark "the newest acquisition finished it" (it names no lock).
    assertTrue(noFailedUnlockRecorded(a), "dropped in a");
    assertTrue(noFailedUnlockRecorded(b), "dropped in b");
    assertEquals("2", count("oh-0", a));
    assertEquals("2", count("oh-1", b));
    red.unlock();
    red.unlock();
    assertFalse(red.isHeldByCurrentThread());
    assertFalse(b.getLock("oh-2").isHeldByCurrentThread(), "oh-2 still held by the thread");
    assertEquals(java.util.Arrays.asList(null, null, null), java.util.Arrays.asList(
        count("oh-0", a), count("oh-1", b), count("oh-2", b)), "every section released");
    awaitFree("oh-0", "oh-1", "oh-2");
  }

  /**
   * Inner unlock failed; a multi-lock containing the same RedLock (another handle) is taken and
   * released; the thread's next unlock() of the RedLock is an ordinary one (the record dropped)
   * and closes the outer section: everything must be free. Same defect as {@link
   * #innerUnlockFailed_otherHandleAcquires_recordDropped}: {@code mr-2} stays held.
   */
  @Test
  void innerUnlockFailed_multiLockWithTheRedLock_outerSectionKept() {
    LockClient b = viaProxy("300ms", "30s");
    DistributedLock red = red(b, "mr");
    red.lock();
    red.lock();
    unlockUnanswered(red);
    DistributedLock multi = a.getMultiLock(red(b, "mr"), a.getLock("mr-x"));
    assertTrue(multi.tryLock());
    multi.unlock();
    red.unlock(); // an ordinary unlock now (the record dropped): the outer section
    assertEquals(java.util.Arrays.asList(null, null, null, null), java.util.Arrays.asList(
        count("mr-0", a), count("mr-1", b), count("mr-2", b), count("mr-x", a)),
        "every section released");
    awaitFree("mr-0", "mr-1", "mr-2", "mr-x");
  }

  /**
   * Held twice; the inner unlock fails; still unreachable, the thread tries the RedLock again
   * and FAILS (no majority): nothing was acquired, yet {@code acquire} dropped the record first.
   * The retry the contract asks for ("call unlock() again, before acquiring this RedLock
   * again") is then an ordinary unlock: it releases {@code -0} a second time, closing the outer
   * section there (the RedLock, still held, now stands on 2 of 3 members: one more server lost
   * loses it). Expected: {@code -0} keeps its outer section.
   */
  @Test
  void innerUnlockFailed_failedReacquire_retryDoesNotReleaseTwice() {
    LockClient b = viaProxy("300ms", "30s");
    DistributedLock red = red(b, "fa");
    red.lock();
    red.lock();
    proxy.blackHole(true);
    try {
      assertThrows(LockException.class, red::unlock, "1 of 3 released: no majority");
      try {
        assertFalse(red.tryLock(), "no majority reachable");
      } catch (LockException expected) {
        // no majority reachable: nothing acquired either way
      }
    } finally {
      proxy.blackHole(false);
    }
    Await.until(Duration.ofSeconds(20), () -> proxy.pendingRequestBytes() == 0,
        "the held requests delivered");
    assertEquals("1", count("fa-0", a), "before the retry");
    red.unlock(); // the retry the contract asks for
    assertEquals("1", count("fa-0", a), "-0 released once only: its outer section kept");
    red.unlock();
    awaitFree("fa-0", "fa-1", "fa-2");
  }

  /**
   * Held twice; the inner unlock fails ({@code -2}'s release did not run); the thread takes
   * {@code -2} alone and the retry then closes only the RedLock's inner section there: the
   * thread's own section and the RedLock's outer one stay.
   */
  @Test
  void innerUnlockFailed_notRunMemberTakenAlone_retryClosesOnlyTheInnerSection() {
    LockClient b = viaProxy("300ms", "30s");
    DistributedLock red = red(b, "na");
    red.lock();
    red.lock();
    unlockUnanswered(red);
    DistributedLock alone = b.getLock("na-2");
    assertTrue(alone.tryLock());
    red.unlock(); // the retry
    assertEquals("1", count("na-0", a));
    assertEquals("1", count("na-1", b));
    assertEquals("2", count("na-2", b), "the RedLock's outer section + the thread's own");
    alone.unlock();
    red.unlock();
    awaitFree("na-0", "na-1", "na-2");
  }

  /** Whether no record of a failed RedLock unlock() still to finish is kept by the client. */
  private static boolean noFailedUnlockRecorded(LockClient client) {
    return Clients.engine(client).redLockUnfinished().values().stream()
        .allMatch(r -> r.value().member() == null);
  }
}

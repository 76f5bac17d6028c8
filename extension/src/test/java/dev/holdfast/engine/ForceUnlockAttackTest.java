package dev.holdfast.engine;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.holdfast.DistributedLock;
import dev.holdfast.LockClient;
import dev.holdfast.LockHold;
import dev.holdfast.testing.Await;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * Attack round 21 on b4fada7's {@code forceUnlock()}: which of this client's holds it reports
 * lost. A hold is spared when it was opened (its reply handled) after the forceUnlock was sent;
 * the probes race acquisitions of this same client against the call.
 */
class ForceUnlockAttackTest extends ProxiedClientFixture {

  /**
   * Another thread of this client sends its acquisition; Redis runs it (the field is there),
   * its reply is still on the way (3 s of latency) when this thread's forceUnlock() is sent and
   * deletes the key. The acquisition's reply is handled after the forceUnlock was sent, so its
   * hold counts as "taken since, on a new key" — but its field was just deleted. The thread
   * believes it holds a lock that is gone, and a rival takes it: two holders. (Before b4fada7
   * every hold of the key was reported lost on a deletion.)
   */
  @Test
  void acquisitionRunBeforeTheDelete_replyHandledAfterTheSend_reportedLost() throws Exception {
    LockClient b = viaProxy("30s", "30s");
    DistributedLock lock = b.getLock("race");
    LossRecorder losses = LossRecorder.on(b);
    proxy.delay(Duration.ofSeconds(3));
    CompletableFuture<LockHold> taken = take(lock, "acquires-during-force-unlock");
    Await.until(Duration.ofSeconds(30), () -> redisState.exists("race"),
        "the acquisition ran in Redis");
    proxy.delay(Duration.ZERO); // the acquisition's reply already carries its 3 s
    assertFalse(taken.isDone(), "its reply is still on the way");
    assertTrue(lock.forceUnlock(), "the forceUnlock deletes the acquisition's field");
    assertFalse(redisState.exists("race"));
    boolean believes = taken.get(60, TimeUnit.SECONDS).isHeld(); // the client's own belief
    DistributedLock rivals = rival.getLock("race");
    boolean rivalTakes = rivals.tryLock();
    try {
      assertFalse(believes && rivalTakes, "two holders: the thread still believes in a hold "
          + "forceUnlock() deleted, and a rival took the lock; losses " + losses);
    } finally {
      if (rivalTakes) {
        rivals.unlock();
      }
    }
  }

  /**
   * The forceUnlock's reply is lost: the call is retried, and between the lost and the retried
   * attempt another thread of this client takes the lock (a new key). The retry deletes it. That
   * hold was opened after the send, so it is not reported lost, though the retry deleted it.
   */
  @Test
  void replyLost_holdTakenBeforeTheRetry_deletedByIt_reportedLost() throws Exception {
    LockClient b = viaProxy("5s", "30s");
    DistributedLock lock = b.getLock("retried");
    LossRecorder losses = LossRecorder.on(b);
    b.getLock("warm-force").forceUnlock(); // its script loaded: the dropped reply is the call's
    lock.lock(120, TimeUnit.SECONDS);
    CompletableFuture<Boolean> forced = new CompletableFuture<>();
    proxy.dropReplies(1);
    Thread forcer = new Thread(() -> {
      try {
        forced.complete(lock.forceUnlock());
      } catch (Throwable e) {
        forced.completeExceptionally(e);
      }
    }, "force-unlocks");
    forcer.start();
    Await.until(Duration.ofSeconds(30), () -> !redisState.exists("retried"),
        "the first attempt deleted the key, its reply dropped");
    CompletableFuture<LockHold> taken = take(lock, "acquires-between-attempts");
    LockHold hold = taken.get(60, TimeUnit.SECONDS);
    boolean forcedResult = forced.get(60, TimeUnit.SECONDS);
    boolean believes = hold.isHeld();
    DistributedLock rivals = rival.getLock("retried");
    boolean rivalTakes = rivals.tryLock();
    try {
      assertFalse(believes && rivalTakes, "two holders (forceUnlock returned " + forcedResult
          + ", key exists " + redisState.exists("retried") + "); losses " + losses);
    } finally {
      if (rivalTakes) {
        rivals.unlock();
      }
    }
  }

  /** A hold taken strictly after forceUnlock() returned is never reported lost. */
  @Test
  void holdTakenAfterTheCall_notReportedLost() throws Exception {
    LossRecorder losses = LossRecorder.on(a);
    DistributedLock lock = a.getLock("after");
    lock.lock();
    assertTrue(lock.forceUnlock());
    Await.until(Duration.ofSeconds(10), () -> losses.count() == 1, "the old hold lost");
    CompletableFuture<LockHold> taken = take(lock, "acquires-after");
    assertTrue(taken.get(60, TimeUnit.SECONDS).isHeld());
    assertTrue(redisState.exists("after"));
    assertEquals(1, losses.count(), "only the old hold reported: " + losses);
  }

  /**
   * Read side force-unlocked while this thread holds the write lock (the write holder's own
   * read re-entry: the key is in write mode): the write hold is this client's, taken before.
   */
  @Test
  void readForceUnlock_whileThisThreadHoldsWrite() throws Exception {
    LossRecorder losses = LossRecorder.on(a);
    var rw = a.getReadWriteLock("rw-w");
    rw.writeLock().lock();
    assertFalse(rw.readLock().forceUnlock(), "write mode: the read side deletes nothing");
    assertTrue(redisState.exists("rw-w"), "nothing deleted: the key is there");
    assertTrue(rw.writeLock().isHeldByCurrentThread(), "the write hold stays");
    assertEquals(0, losses.count(), "no loss: " + losses);
    rw.writeLock().unlock();
  }

  /**
   * Read side force-unlocked while this thread and a rival hold read: the key is deleted, this
   * client's read hold reported lost once (FORCE_UNLOCKED), a new read hold afterwards is not.
   */
  @Test
  void readForceUnlock_sharedReadHolds_deleted_ownReadLostOnce() throws Exception {
    LossRecorder losses = LossRecorder.on(a);
    var rw = a.getReadWriteLock("rw-r");
    rw.readLock().lock();
    assertTrue(rival.getReadWriteLock("rw-r").readLock().tryLock());
    assertTrue(rw.readLock().forceUnlock(), "read mode: deleted");
    assertFalse(redisState.exists("rw-r"));
    assertFalse(rw.readLock().isHeldByCurrentThread(), "the read hold is lost");
    Await.until(Duration.ofSeconds(10), () -> losses.count() == 1, "reported: " + losses);
    assertTrue(rw.writeLock().tryLock(), "the thread takes write afresh");
    assertEquals(1, losses.count(), "only the old read hold: " + losses);
    rw.writeLock().unlock();
  }

  /** A fair lock held by a LockHold of this client: force-unlocked, the LockHold is lost. */
  @Test
  void fairLock_lockHold_forceUnlocked_reportedLost() throws Exception {
    LossRecorder losses = LossRecorder.on(a);
    DistributedLock lock = a.getFairLock("fair");
    LockHold hold = lock.acquire(Duration.ZERO, null);
    assertTrue(lock.forceUnlock());
    assertFalse(hold.isHeld(), "the LockHold knows it is gone");
    Await.until(Duration.ofSeconds(10), () -> losses.count() == 1, "reported once: " + losses);
    assertTrue(lock.tryLock(), "the thread takes it afresh");
    assertEquals(1, losses.count(), "the new hold not reported: " + losses);
    lock.unlock();
  }

  /**
   * The write holder's own read re-entry (a read hold inside a write-mode lock): the read side's
   * forceUnlock() deletes nothing (the lock is in write mode), so this client's read holds of
   * before the call are reported lost ("not held in this mode") — yet Redis still has that
   * read hold: the report is false, and the loss's abandon removes a field the thread held.
   */
  @Test
  void readForceUnlock_writeHoldersOwnReadHold_stillInRedis_notReportedLost() throws Exception {
    LossRecorder losses = LossRecorder.on(a);
    var rw = a.getReadWriteLock("rw-both");
    rw.writeLock().lock();
    rw.readLock().lock();
    String readField = RedisProbe.fieldOf(a);
    assertFalse(rw.readLock().forceUnlock(), "write mode: the read side deletes nothing");
    assertEquals("1", redisState.hget("rw-both", readField), "Redis still has the read hold");
    assertTrue(rw.readLock().isHeldByCurrentThread(), "the thread still holds read; losses "
        + losses);
    assertEquals(0, losses.count(), "no loss happened: " + losses);
    rw.readLock().unlock();
    rw.writeLock().unlock();
    assertFalse(redisState.exists("rw-both"));
  }

  /**
   * The write holder with its own read re-entry calls the write side's forceUnlock(); the reply
   * is lost. The first attempt deleted the key (write and read hold with it); the retry finds
   * nothing, so only the write kind's holds are reported — the read hold, deleted by the first
   * attempt, stays believed.
   */
  @Test
  void writeForceUnlockReplyLost_retryFindsNothing_ownReadHoldReportedLostToo() throws Exception {
    LockClient b = viaProxy("2s", "30s");
    LossRecorder losses = LossRecorder.on(b);
    var rw = b.getReadWriteLock("rw-lost-reply");
    var warm = b.getReadWriteLock("rw-warm"); // its scripts loaded: the dropped reply is the call's
    warm.writeLock().lock();
    warm.readLock().lock();
    warm.writeLock().forceUnlock();
    Await.until(Duration.ofSeconds(10), () -> losses.count() == 2, "the warm-up's own losses");
    long thread = Thread.currentThread().getId();
    rw.writeLock().lock(120, TimeUnit.SECONDS);
    rw.readLock().lock(120, TimeUnit.SECONDS);
    proxy.dropReplies(1);
    boolean deleted = rw.writeLock().forceUnlock();
    assertEquals(0, proxy.pendingDrops(), "the first reply was dropped");
    assertFalse(redisState.exists("rw-lost-reply"), "the key is gone");
    RedisLock read = (RedisLock) rw.readLock();
    boolean readBelieved = Clients.engine(b).live(read.holdOf(thread));
    var rivals = rival.getReadWriteLock("rw-lost-reply").writeLock();
    boolean rivalTakes = rivals.tryLock();
    try {
      assertFalse(readBelieved && rivalTakes, "two holders: the read hold, deleted with the "
          + "key, is still believed (forceUnlock returned " + deleted + ") and a rival took "
          + "the write lock; losses " + losses);
    } finally {
      if (rivalTakes) {
        rivals.unlock();
      }
    }
  }
}

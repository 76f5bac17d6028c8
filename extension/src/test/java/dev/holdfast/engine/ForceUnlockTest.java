package dev.holdfast.engine;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.holdfast.DistributedLock;
import dev.holdfast.LockHold;
import dev.holdfast.testing.Await;
import java.time.Duration;
import org.junit.jupiter.api.Test;

/**
 * {@code forceUnlock()} and this client's own holds: deleted or found missing, the holds it had
 * before the call are reported lost at once (the model test's commit-check violation: a
 * holder's forceUnlock() that found the lock already deleted by another client left the holder
 * believing, and a local commit check passed).
 */
class ForceUnlockTest extends ProxiedClientFixture {

  @Test
  void lockAlreadyForceUnlockedElsewhere_ownForceUnlockFindsItGone_holdReportedLost() {
    LossRecorder losses = LossRecorder.on(a);
    DistributedLock lock = a.getLock("gone");
    lock.lock();
    assertTrue(rival.getLock("gone").forceUnlock(), "another client deletes it");
    assertFalse(lock.forceUnlock(), "nothing left to delete");
    assertFalse(lock.isHeldByCurrentThread(), "the holder knows it is gone");
    Await.until(Duration.ofSeconds(10), () -> losses.count() > 0, "the loss reported");
    assertEquals(1, losses.count(), "reported once: " + losses);
    IllegalMonitorStateException e = assertThrows(IllegalMonitorStateException.class,
        lock::unlock);
    assertTrue(e.getMessage().contains("lost"), e.getMessage());
  }

  @Test
  void lockHeldByAnObject_sameShape_reportedLost() throws Exception {
    LossRecorder losses = LossRecorder.on(a);
    DistributedLock lock = a.getLock("gone-hold");
    LockHold hold = lock.acquire(Duration.ZERO, null);
    assertTrue(rival.getLock("gone-hold").forceUnlock());
    assertFalse(lock.forceUnlock());
    assertFalse(hold.isHeld(), "the LockHold knows it is gone");
    Await.until(Duration.ofSeconds(10), () -> losses.count() > 0, "the loss reported");
    assertEquals(1, losses.count(), "reported once: " + losses);
  }

  @Test
  void readWriteLock_writeSideFindsNothing_readHoldsOfThisClientStay() {
    LossRecorder losses = LossRecorder.on(a);
    var rw = a.getReadWriteLock("modes");
    rw.readLock().lock();
    assertFalse(rw.writeLock().forceUnlock(), "not in write mode");
    assertTrue(rw.readLock().isHeldByCurrentThread(), "the read hold is untouched");
    assertEquals(0, losses.count(), "no loss: " + losses);
    rw.readLock().unlock();
  }
}

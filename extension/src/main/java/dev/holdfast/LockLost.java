package dev.holdfast;

import java.time.Instant;
import java.util.Objects;

/**
 * A report that a lock this client held is no longer held, although the holder never released it.
 *
 * <p>Raised once per lost hold, when the client finds that: a lease renewal no longer finds the
 * holder's entry (the key expired while Redis was unreachable, Redis restarted or failed over to a
 * replica that had not seen the lock, or another client called
 * {@link DistributedLock#forceUnlock()}); the hold's lease could not be confirmed before its local
 * deadline (Redis unreachable); a fixed lease ran out before the final unlock; a re-entry or an
 * unlock found the hold gone; {@code forceUnlock()} was called on this client; the holding thread
 * ended without unlocking; or a re-entry's outcome could not be settled during an outage. From
 * that moment other clients may hold the lock, so the work it protected is no longer exclusive.
 * Each {@code unlock()} of the hold's open sections throws an {@link IllegalMonitorStateException}
 * that says the lock was lost.
 *
 * <p>For a hold owned by a {@link LockHold} rather than a thread, {@code threadId} is that
 * hold's <em>owner id</em>: a negative number, unique within the client, that no thread id
 * equals (it appears in {@code LockHold.toString()}). A {@code LockHold} that was garbage
 * collected without {@link LockHold#release()} is reported lost like a thread that ended
 * without unlocking, and its lock released in the background.
 *
 * @param lockName   the name given to {@link LockClient#getLock(String)}
 * @param threadId   the id of the thread that held the lock, or the negative owner id of the
 *     {@link LockHold} that held it
 * @param reason     what was observed, for humans
 * @param detectedAt when the loss was noticed (not when it happened, which is unknowable)
 */
public record LockLost(String lockName, long threadId, String reason, Instant detectedAt) {
  /**
   * A report; Holdfast creates them, applications only receive them.
   *
   * @param lockName   the name given to {@link LockClient#getLock(String)}
   * @param threadId   the id of the thread that held the lock, or a {@link LockHold}'s owner id
   * @param reason     what was observed, for humans
   * @param detectedAt when the loss was noticed
   * @throws NullPointerException if {@code lockName}, {@code reason} or {@code detectedAt} is
   *     {@code null}
   */
  public LockLost {
    Objects.requireNonNull(lockName, "lockName");
    Objects.requireNonNull(reason, "reason");
    Objects.requireNonNull(detectedAt, "detectedAt");
  }
}

package dev.holdfast;

import java.time.Instant;
import java.util.Objects;

/**
 * A report that a lock this client held is no longer held, although the holder never unlocked it.
 *
 * <p>The watchdog raises it when a renewal finds that the lock's hash no longer carries this
 * holder's entry: the key expired while Redis was unreachable for longer than the watchdog
 * timeout, Redis restarted or failed over to a replica that had not seen the lock, or someone
 * called {@link DistributedLock#forceUnlock()}. From that moment other clients may hold the lock,
 * so the work it protected is no longer exclusive. The holder's next {@code unlock()} throws an
 * {@link IllegalMonitorStateException} that says the lock was lost.
 *
 * @param lockName   the name given to {@link LockClient#getLock(String)}
 * @param threadId   the id of the thread that held the lock
 * @param reason     what was observed, for humans
 * @param detectedAt when the loss was noticed (not when it happened, which is unknowable)
 */
public record LockLost(String lockName, long threadId, String reason, Instant detectedAt) {
  /**
   * A report; Holdfast creates them, applications only receive them.
   *
   * @param lockName   the name given to {@link LockClient#getLock(String)}
   * @param threadId   the id of the thread that held the lock
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

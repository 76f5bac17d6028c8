package dev.holdfast;

import java.util.concurrent.TimeUnit;

/**
 * A {@link DistributedLock} whose every hold carries a <em>fencing token</em>: a number, assigned
 * atomically with the acquisition, that is greater than every token handed out before for this
 * lock name, by any client. Pass it to the resource the lock protects, and have the resource
 * refuse a write whose token is lower than the highest it has seen: a holder that was paused past
 * its lease (a GC pause, a stopped VM) and wakes up after another holder took over is then refused,
 * which no lease can guarantee.
 *
 * <pre>{@code
 * FencedLock lock = locks.getFencedLock("inventory:42");
 * long token = lock.lockAndGetToken();
 * try {
 *   store.write(sku, quantity, token);   // the store keeps the highest token per SKU
 * } finally {
 *   lock.unlock();
 * }
 * }</pre>
 *
 * <p>The token is assigned on a hold's first acquisition; re-entries of the same hold return the
 * same token. Tokens only grow: also after the lock expired, after the client restarted, after
 * {@code SCRIPT FLUSH}, and after a Redis restart that lost every key — each token is at least the
 * Redis server's clock in microseconds, and one more than the last token for the name while that
 * is still known (a small key next to the lock, kept one hour after the last fenced acquisition).
 * The assumption: the clocks of the Redis servers that hold the lock in turn (a master and the
 * replicas that may replace it) do not go back by more than the time between two acquisitions
 * once that key is gone.
 *
 * <p>Every method of {@link DistributedLock} works as documented there; {@link #lock()} and the
 * other methods without "Token" in their name assign tokens too, readable with
 * {@link #getToken()}. Method names follow Redisson's {@code RFencedLock}.
 */
public interface FencedLock extends DistributedLock {

  /**
   * Acquires the lock like {@link #lock()} (watchdog lease, waiting as long as it takes).
   *
   * @return the hold's fencing token, never null
   * @throws LockException if Redis cannot be reached, or if this is a re-entry of a lost hold
   */
  Long lockAndGetToken();

  /**
   * Acquires the lock like {@link #lock(long, TimeUnit)} (fixed lease).
   *
   * @param leaseTime how long the lock stays held unless unlocked first; 1 ms to 365 days
   * @param unit the unit of {@code leaseTime}
   * @return the hold's fencing token, never null
   * @throws IllegalArgumentException if {@code leaseTime} is out of that range
   * @throws LockException if Redis cannot be reached, or if this is a re-entry of a lost hold
   */
  Long lockAndGetToken(long leaseTime, TimeUnit unit);

  /**
   * Acquires the lock like {@link #tryLock()}: only if it is free or already held by this thread.
   *
   * @return the hold's fencing token, or null if the lock was not acquired
   */
  Long tryLockAndGetToken();

  /**
   * Acquires the lock like {@link #tryLock(long, TimeUnit)}.
   *
   * @param waitTime how long to wait; zero or negative means do not wait
   * @param unit the unit of {@code waitTime}
   * @return the hold's fencing token, or null if the lock was not acquired in time
   * @throws InterruptedException if the thread is interrupted on entry or while waiting
   */
  Long tryLockAndGetToken(long waitTime, TimeUnit unit) throws InterruptedException;

  /**
   * Acquires the lock like {@link #tryLock(long, long, TimeUnit)}.
   *
   * @param waitTime how long to wait; zero or negative means do not wait
   * @param leaseTime how long the lock stays held unless unlocked first; 1 ms to 365 days
   * @param unit the unit of {@code waitTime} and {@code leaseTime}
   * @return the hold's fencing token, or null if the lock was not acquired in time
   * @throws InterruptedException if the thread is interrupted on entry or while waiting
   * @throws IllegalArgumentException if {@code leaseTime} is out of that range
   */
  Long tryLockAndGetToken(long waitTime, long leaseTime, TimeUnit unit)
      throws InterruptedException;

  /**
   * {@return the calling thread's fencing token for this lock, or null if it holds none} A hold
   * that this client knows to be lost has no token. No I/O.
   */
  Long getToken();
}

package dev.holdfast;

import java.time.Duration;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.Lock;

/**
 * A reentrant lock with one holder across every process that shares the Redis deployment.
 *
 * <p>The holder is a <em>thread of a {@link LockClient}</em>: the same thread may acquire the lock
 * again (each acquisition needs its own {@link #unlock()}), any other thread — in this JVM or
 * elsewhere — waits. Only the holding thread may {@code unlock()}.
 *
 * <h2>Leases</h2>
 * Every hold has a lease in Redis, so a crashed holder cannot block others forever.
 * <ul>
 *   <li>Methods without a lease argument ({@link #lock()}, {@link #lockInterruptibly()},
 *       {@link #tryLock()}, {@link #tryLock(long, TimeUnit)}) use the client's <b>watchdog</b>: the
 *       lease is {@code holdfast.watchdog-timeout} (30 s by default) and is renewed every third of
 *       it until the last {@code unlock()}, or until the client is closed.</li>
 *   <li>Methods with a lease ({@link #lock(long, TimeUnit)}, {@link #tryLock(long, long, TimeUnit)},
 *       {@link #lockInterruptibly(long, TimeUnit)}) set exactly that lease and never renew it; when
 *       it runs out the lock is free again, whether or not the holder is done.</li>
 * </ul>
 * Each acquisition opens a section with the lease it asked for; the key's TTL is always at least
 * what every open section needs, the watchdog renews while any open section is a watchdog one, and
 * a re-entry never shortens the TTL. Leases must be between 1 ms and 365 days.
 *
 * <h2>Losing a lock</h2>
 * The client believes a hold until the lease Redis last acknowledged, counted from when that call
 * was sent (less a small margin for clock drift), has passed — so it stops believing before any
 * other client can acquire, even when Redis cannot be reached. A hold that ends without its final
 * {@code unlock()} is <em>lost</em>: the client's {@link LockLost} listeners hear about it once,
 * {@link #isHeldByCurrentThread()} is false, and each {@code unlock()} of its open sections throws
 * an {@link IllegalMonitorStateException} that says it was lost and why. A re-entry never hides a
 * loss: it throws {@link LockException} instead of starting a new hold under the old one.
 *
 * <h2>Waiting</h2>
 * Waiters do not poll: they wait for the unlock message Redis publishes on the lock's channel, and
 * every wait is bounded by the holder's remaining lease, so a lost message costs at most that.
 *
 * <h2>Thread safety</h2>
 * Handles are immutable, cheap, and safe to share between threads; two handles for the same name
 * from the same client are interchangeable. Every method may block on Redis I/O for up to the
 * configured timeout (and retries), and throws {@link LockException} when Redis cannot be reached
 * — except that a thread already <em>waiting</em> for the lock rides out an outage (a restart, a
 * failover) for up to one watchdog timeout before it gives up with that exception.
 */
public interface DistributedLock extends Lock {

  /**
   * {@return the lock's name, as given to {@link LockClient#getLock(String)} (without the key
   * prefix)}
   */
  String getName();

  /**
   * Acquires the lock, waiting as long as it takes; uninterruptible like {@link Lock#lock()}:
   * an interrupt while waiting is remembered and the flag restored once the lock is held.
   * The lease is kept alive by the watchdog.
   *
   * @throws LockException if Redis cannot be reached
   */
  @Override
  void lock();

  /**
   * Acquires the lock with a fixed lease and no watchdog, waiting as long as it takes
   * (uninterruptibly, like {@link #lock()}).
   *
   * @param leaseTime how long the lock stays held unless unlocked first; 1 ms to 365 days
   * @param unit the unit of {@code leaseTime}
   * @throws IllegalArgumentException if {@code leaseTime} is out of that range
   * @throws LockException if Redis cannot be reached, or if this is a re-entry and the thread's
   *     hold was lost
   */
  void lock(long leaseTime, TimeUnit unit);

  /**
   * Like {@link #lock()}, but gives up when the thread is interrupted.
   *
   * @throws InterruptedException if the thread is interrupted on entry or while waiting; the lock
   *     is then not held (by this acquisition)
   */
  @Override
  void lockInterruptibly() throws InterruptedException;

  /**
   * Like {@link #lock(long, TimeUnit)}, but gives up when the thread is interrupted.
   *
   * @param leaseTime how long the lock stays held unless unlocked first; 1 ms to 365 days
   * @param unit the unit of {@code leaseTime}
   * @throws InterruptedException if the thread is interrupted on entry or while waiting
   * @throws IllegalArgumentException if {@code leaseTime} is not between 1 ms and 365 days
   */
  void lockInterruptibly(long leaseTime, TimeUnit unit) throws InterruptedException;

  /**
   * Acquires the lock only if it is free (or already held by this thread) right now, with the
   * watchdog lease. One round trip to Redis; never waits for another holder.
   *
   * @return whether the lock is now held by this thread
   */
  @Override
  boolean tryLock();

  /**
   * Acquires the lock with the watchdog lease, waiting at most {@code waitTime}.
   *
   * @param waitTime how long to wait for another holder to let go; zero or negative means do not
   *     wait
   * @return whether the lock is now held by this thread
   * @throws InterruptedException if the thread is interrupted on entry or while waiting
   */
  @Override
  boolean tryLock(long waitTime, TimeUnit unit) throws InterruptedException;

  /**
   * Acquires the lock with a fixed lease (no watchdog), waiting at most {@code waitTime}.
   *
   * @param waitTime how long to wait; zero or negative means do not wait
   * @param leaseTime how long the lock stays held unless unlocked first; 1 ms to 365 days
   * @param unit the unit of {@code waitTime} and {@code leaseTime}
   * @return whether the lock is now held by this thread
   * @throws InterruptedException if the thread is interrupted on entry or while waiting
   * @throws IllegalArgumentException if {@code leaseTime} is not between 1 ms and 365 days
   */
  boolean tryLock(long waitTime, long leaseTime, TimeUnit unit) throws InterruptedException;

  /**
   * Acquires a hold that belongs to the returned object instead of the calling thread: it may be
   * released from any thread, it is not reentrant, and it excludes every other owner of the lock,
   * the calling thread's own holds included (so a thread that holds the lock and calls this waits
   * for itself until {@code waitTime} elapses).
   *
   * @param waitTime the most to wait for other holders; {@code null}: as long as it takes;
   *     zero or negative: do not wait
   * @param leaseTime a fixed lease (1 ms to 365 days, never renewed); {@code null}: the watchdog
   *     keeps the hold until it is released
   * @return the hold, held
   * @throws LockNotAcquiredException if the wait elapsed with the lock held by someone else
   * @throws InterruptedException if the thread is interrupted on entry or while waiting
   * @throws IllegalArgumentException if {@code leaseTime} is out of range
   * @throws LockException if Redis cannot be reached
   */
  LockHold acquire(Duration waitTime, Duration leaseTime) throws InterruptedException;

  /**
   * Like {@link #acquire(Duration, Duration)}, without blocking the calling thread, not even for
   * the first call to Redis. The stage completes on a thread of the client (never the caller's);
   * move dependent work off it with the {@code *Async} methods and an executor of your own (in a
   * CDI container, preferably its {@code ManagedExecutor}).
   *
   * <p>The client's threads: on Java 21 and later a virtual thread per acquisition, else daemon
   * threads named {@code holdfast-async-<n>} (idle ones end after a minute). A dependent stage
   * attached without an executor ({@code thenApply}, {@code whenComplete} …) runs on that
   * thread, or on the attaching thread if the stage is complete already; blocking work there
   * delays nothing of the client's but holds that thread. For example:
   * <pre>{@code
   * lock.acquireAsync(Duration.ofSeconds(5), null)
   *     .thenApplyAsync(hold -> {
   *       try (hold) {
   *         return work();
   *       }
   *     }, managedExecutor);
   * }</pre>
   * Closing the client fails acquisitions still waiting and those asked for afterwards with
   * {@link IllegalStateException}.
   *
   * @param waitTime as for {@link #acquire(Duration, Duration)}
   * @param leaseTime as for {@link #acquire(Duration, Duration)}
   * @return a stage completed with the hold once held, or exceptionally with
   *     {@link LockNotAcquiredException} when the wait elapses, {@link LockException} when Redis
   *     cannot be reached; cancelling it before it completes gives up the acquisition (a hold
   *     granted meanwhile is released)
   * @throws IllegalArgumentException if {@code leaseTime} is out of range
   */
  CompletionStage<LockHold> acquireAsync(Duration waitTime, Duration leaseTime);

  /**
   * Releases one hold of this thread. The last release deletes the lock and wakes a waiter; an
   * earlier one only decrements the hold count (and refreshes the lease).
   *
   * @throws IllegalMonitorStateException if this thread does not hold the lock; the message says
   *     whether the lock was lost (expired, force-unlocked, Redis lost it) rather than never held
   * @throws LockException if Redis cannot be reached, so whether the release ran is unknown.
   *     An inner release leaves the hold unchanged as far as this client knows; calling
   *     {@code unlock()} again re-sends the same release, and one that did run is recognised.
   *     Call it again before acquiring this lock again: a re-entry first settles the release
   *     (one that ran closes its section then), but one that did not run is still owed to
   *     {@code unlock()}.
   *     The last release ends the hold for this thread all the same: it is never renewed
   *     again, the release is completed in the background as soon as Redis answers, and the
   *     lock expires with its lease at the latest, even if the thread never calls again;
   *     calling {@code unlock()} again settles it at once (and throws again only if Redis still
   *     does not answer)
   */
  @Override
  void unlock();

  /**
   * Not supported: a distributed lock has no conditions.
   *
   * @throws UnsupportedOperationException always
   */
  @Override
  Condition newCondition();

  /**
   * Deletes the lock whoever holds it and wakes a waiter. A holder in another client is not
   * told directly: its watchdog (if any) reports a {@link LockLost}, and its {@code unlock()}
   * fails. This client's holds of the lock are checked in Redis when the call returns, and
   * those whose entry is gone (or cannot be confirmed) are reported lost at once — also when
   * nothing was deleted, since the lock was then found not held; an acquisition of this client
   * answered later checks itself the same way. A read-write lock's other side, if it holds,
   * stays held. The request runs at most once: if the call throws, it is sealed in the
   * background so that a copy still on its way does nothing, and if a copy ran first, the holds
   * it deleted are reported lost then.
   *
   * @return {@code true} if a lock was deleted, {@code false} if it was not held
   */
  boolean forceUnlock();

  /**
   * {@return whether any thread of any client holds the lock now}
   *
   * @throws LockException if Redis cannot be reached
   */
  boolean isLocked();

  /**
   * {@return whether the calling thread holds the lock now}: false without asking Redis when
   * this client knows the hold is lost or its lease could not be confirmed in time, else Redis'
   * answer.
   *
   * @throws LockException if Redis cannot be reached
   */
  boolean isHeldByCurrentThread();

  /**
   * {@return whether the thread with this id, of this client, holds the lock now}, like
   * {@link #isHeldByCurrentThread()}.
   *
   * @param threadId a {@link Thread#getId() thread id} in this JVM
   * @throws LockException if Redis cannot be reached
   */
  boolean isHeldByThread(long threadId);

  /**
   * {@return the calling thread's hold count according to Redis; 0 when it does not hold the
   * lock, or this client knows its hold is lost}
   *
   * @throws LockException if Redis cannot be reached
   */
  int getHoldCount();

  /**
   * {@return the lock's remaining lease in milliseconds: {@code -2} when the lock is not held,
   * {@code -1} when it is held with no expiry (set by something other than Holdfast or Redisson)}
   *
   * @throws LockException if Redis cannot be reached
   */
  long remainTimeToLive();
}

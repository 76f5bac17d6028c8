package dev.holdfast;

import java.util.concurrent.CompletionStage;

/**
 * One hold of a lock that belongs to this object rather than to a thread: taken with
 * {@link DistributedLock#acquire(java.time.Duration, java.time.Duration)} or
 * {@link DistributedLock#acquireAsync(java.time.Duration, java.time.Duration)}, released from
 * any thread, once.
 *
 * <p>A hold is its own owner in Redis (a hash field of its own): it is not reentrant, and it
 * excludes every other owner of the lock — other holds, and thread holds including those of the
 * thread that acquired it. Renewal by the watchdog, loss reporting ({@link LockLost} and the
 * client's listeners), replica acknowledgement and fencing apply exactly as to a thread's hold; a
 * hold that is garbage collected without {@link #release()} is given up like the hold of a thread
 * that ended without {@code unlock()}. A loss is reported ({@link LockLost}) under the hold's
 * owner id, a negative number no thread id equals, shown by {@code toString()}.
 *
 * <p>A hold excludes thread holds like any other owner: a thread that holds the lock waits for
 * its own {@code LockHold} (and the other way round) until its wait elapses; neither side is
 * refused as an upgrade of a read lock would be. A thread of this client waiting for the lock
 * may be handed it directly when a hold of an exclusive lock is released, and the other way
 * round, exactly as between threads.
 *
 * <p>Threads of the stages: those of {@link DistributedLock#acquireAsync(java.time.Duration,
 * java.time.Duration) acquireAsync} and {@link #releaseAsync()} complete on a thread of the
 * client, never the caller's; move dependent work off it with the {@code *Async} methods of the
 * stage and an executor of your own — in a CDI container, preferably its {@code ManagedExecutor}
 * (see {@code acquireAsync}).
 *
 * <p>Thread safety: every method may be called from any thread, concurrently; {@code release()},
 * {@code releaseAsync()} and {@code close()} release at most once between them.
 */
public interface LockHold extends AutoCloseable {

  /** {@return the lock's name, as given to {@link LockClient#getLock(String)}} */
  String lockName();

  /**
   * {@return whether this hold is still held}: false once released, or once this client knows it
   * lost it (its lease could not be renewed in time, it was force-unlocked, Redis lost it). No I/O.
   */
  boolean isHeld();

  /**
   * {@return the fencing token this hold was granted when it was acquired through a
   * {@link FencedLock}, else {@code null}}
   */
  Long token();

  /**
   * Releases the hold; a second call (or one after {@link #releaseAsync()} or {@link #close()})
   * does nothing.
   *
   * @throws IllegalMonitorStateException if the hold was lost before this release; the message
   *     says so and why
   * @throws LockException if Redis cannot be reached; the hold is then ended for this client all
   *     the same (never renewed again) and the release is completed in the background, or the
   *     lock expires with its lease
   */
  void release();

  /**
   * Releases the hold without blocking the calling thread. Completes normally when released (or
   * when it had been released already), exceptionally with the exceptions {@link #release()}
   * would throw.
   *
   * @return the stage of the release; it completes on a thread of the client, not the caller's
   *     (the threads of {@link DistributedLock#acquireAsync(java.time.Duration,
   *     java.time.Duration) acquireAsync}), exceptionally with {@link IllegalStateException}
   *     if the client is closed
   */
  CompletionStage<Void> releaseAsync();

  /** Same as {@link #release()}, for try-with-resources. */
  @Override
  void close();
}

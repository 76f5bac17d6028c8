package dev.holdfast.engine;

import dev.holdfast.DistributedLock;
import dev.holdfast.LockException;
import dev.holdfast.LockHold;
import java.time.Duration;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.TimeUnit;

/**
 * What the composite locks ({@link MultiLock}, {@link RedLock}) share: every acquisition method of
 * {@link java.util.concurrent.locks.Lock} mapped onto one {@link #acquire} of the subclass, with
 * leases and waits checked as a single lock checks them.
 */
abstract class CompositeLock implements DistributedLock {
  /** No bound on the wait, or no fixed lease (the watchdog). */
  static final long NONE = LockGroup.NONE;

  @Override
  public void lock() {
    acquireUninterruptibly(NONE);
  }

  @Override
  public void lock(long leaseTime, TimeUnit unit) {
    acquireUninterruptibly(LockGroup.leaseMillis(leaseTime, unit));
  }

  @Override
  public void lockInterruptibly() throws InterruptedException {
    acquire(NONE, NONE, true);
  }

  @Override
  public void lockInterruptibly(long leaseTime, TimeUnit unit) throws InterruptedException {
    acquire(NONE, LockGroup.leaseMillis(leaseTime, unit), true);
  }

  @Override
  public boolean tryLock() {
    try {
      return acquire(0, NONE, false);
    } catch (InterruptedException e) {
      throw new AssertionError("an uninterruptible acquisition was interrupted", e);
    }
  }

  @Override
  public boolean tryLock(long waitTime, TimeUnit unit) throws InterruptedException {
    return acquire(LockGroup.waitNanos(waitTime, unit), NONE, true);
  }

  @Override
  public boolean tryLock(long waitTime, long leaseTime, TimeUnit unit)
      throws InterruptedException {
    long lease = LockGroup.leaseMillis(leaseTime, unit);
    return acquire(LockGroup.waitNanos(waitTime, unit), lease, true);
  }

  /**
   * Not supported: a composite lock's holds belong to threads (see {@code
   * LockClient#getMultiLock} and {@code LockClient#getRedLock}).
   *
   * @throws UnsupportedOperationException always
   */
  @Override
  public LockHold acquire(Duration waitTime, Duration leaseTime) {
    throw unsupported();
  }

  /**
   * Not supported, as {@link #acquire(Duration, Duration)}.
   *
   * @throws UnsupportedOperationException always, from this call (not through the stage)
   */
  @Override
  public CompletionStage<LockHold> acquireAsync(Duration waitTime, Duration leaseTime) {
    throw unsupported();
  }

  private UnsupportedOperationException unsupported() {
    return new UnsupportedOperationException(getClass().getSimpleName() + " " + getName()
        + " has no LockHold: a multi-lock or RedLock is held by a thread only. Take a LockHold "
        + "of each member lock instead (acquire them in a fixed order), or use lock()/unlock() "
        + "on one thread");
  }

  private void acquireUninterruptibly(long leaseMillis) {
    try {
      acquire(NONE, leaseMillis, false);
    } catch (InterruptedException e) {
      throw new AssertionError("an uninterruptible acquisition was interrupted", e);
    }
  }

  /**
   * Acquires the composite lock.
   *
   * @param waitNanos {@link #NONE} for no bound, 0 to try once, else the bound
   * @param leaseMillis {@link #NONE} for the watchdog, else each member's lease
   * @param interruptible whether an interrupt ends the call; if not, it is remembered and the
   *     flag restored at the end
   * @return whether the lock was acquired
   */
  abstract boolean acquire(long waitNanos, long leaseMillis, boolean interruptible)
      throws InterruptedException;

  /**
   * Gives back the section an acquisition of another composite lock took of this one and now
   * gives up: {@link #unlock()}, except that what a failed unlock() leaves owed is not kept as
   * the record that the thread's next unlock() finishes <em>instead of</em> closing a section
   * (that section is not the application's): each member release still owed is tried once
   * more and, failing again, owed on that member's hold, finished by the thread's next call on
   * the member — before its own. If that acquisition finished a failed unlock() of the
   * thread's (as an acquisition does once it holds), the failed unlock() stays finished: the
   * thread's retry of it, as its contract asks, returns without closing a section
   * ({@link #settleFinishedUnlock}). Calling thread only.
   *
   * @throws RuntimeException what {@link #unlock()} threw
   */
  final void giveBackSection() {
    long threadId = Thread.currentThread().getId();
    boolean finishedAFailedUnlock = newestFinishedAFailedUnlock(threadId);
    try {
      unlock();
    } catch (LockException e) {
      owedOnMembers(threadId); // only a LockException leaves a record to call again for
      throw e;
    } finally {
      if (finishedAFailedUnlock) {
        settleFinishedUnlock(threadId);
      }
    }
  }

  /**
   * {@return whether the thread's newest open acquisition of this lock finished a failed
   * unlock() of the thread's (which the thread may still call again)}
   */
  abstract boolean newestFinishedAFailedUnlock(long threadId);

  /**
   * Records that the thread's failed unlock() was finished, by an acquisition since given back:
   * the thread's next unlock() returns at once, closing nothing (its next acquisition drops the
   * record).
   */
  abstract void settleFinishedUnlock(long threadId);

  /**
   * Turns what a failed unlock() of the thread's left owed into give-backs of the members (see
   * {@link #giveBackSection()}); nothing if no record is left.
   */
  abstract void owedOnMembers(long threadId);
}

package dev.holdfast.engine;

import dev.holdfast.DistributedLock;
import dev.holdfast.LockException;
import java.util.ArrayDeque;
import java.util.Deque;
import java.util.List;
import java.util.Map;
import java.util.Set;
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
   * the member — before its own; a composite member of a multi-lock is given back the same way.
   * If an acquisition finished a failed unlock() of the thread's (as an acquisition does once
   * it holds; its {@link Section} says so), the failed unlock() stays finished: the thread's retry of it, as
   * its contract asks, returns without closing a section ({@link #settleFinishedUnlock}).
   * Calling thread only.
   *
   * @throws RuntimeException what {@link #unlock()} threw
   */
  final void giveBackSection() {
    long threadId = Thread.currentThread().getId();
    Deque<Section> open = openSections(threadId);
    Section newest = open == null ? null : open.peek();
    boolean settled = takeSettled(threadId); // set aside, so that unlock() closes the section
    try {
      unlockGivingBack();
    } catch (LockException e) {
      owedOnMembers(threadId); // only a LockException leaves a record to call again for
      throw e;
    } finally {
      if (settled || (newest != null && newest.finishedAFailedUnlock())) {
        settleFinishedUnlock(threadId);
      }
    }
  }

  /**
   * One open acquisition of a composite lock by a thread, which one unlock() closes.
   *
   * @param won the identities of the members it won ({@link LockGroup#identity}; a RedLock's
   *     acquisition may win a majority only), or null for all of them
   * @param finishedAFailedUnlock whether it finished a failed unlock() of the thread's (its
   *     record, or a settled one), which the thread must not do again if this acquisition is
   *     given back ({@link #giveBackSection()})
   */
  record Section(Set<Object> won, boolean finishedAFailedUnlock) {
  }

  /** {@return the stores of the thread's open sections of this lock: one per open client} */
  abstract List<Map<MultiLock.OwedKey, ThreadRecord<Deque<Section>>>> sectionStores();

  /** {@return the key of the thread's records of this lock (its identity and the thread)} */
  abstract MultiLock.OwedKey sectionKey(long threadId);

  /** Opens the thread's newest section, after an acquisition. */
  final void openSection(long threadId, Section section) {
    List<Map<MultiLock.OwedKey, ThreadRecord<Deque<Section>>>> stores = sectionStores();
    MultiLock.OwedKey key = sectionKey(threadId);
    Deque<Section> open = ThreadRecord.find(stores, key);
    if (open == null) {
      open = new ArrayDeque<>();
      ThreadRecord.keep(stores, key, ThreadRecord.ofCurrentThread(open));
    }
    open.push(section);
  }

  /** {@return the thread's open sections, newest first, or null if none} */
  final Deque<Section> openSections(long threadId) {
    Deque<Section> open = ThreadRecord.find(sectionStores(), sectionKey(threadId));
    return open == null || open.isEmpty() ? null : open;
  }

  /** Closes the thread's newest section; the last one drops the record. */
  final void closeSection(long threadId) {
    List<Map<MultiLock.OwedKey, ThreadRecord<Deque<Section>>>> stores = sectionStores();
    MultiLock.OwedKey key = sectionKey(threadId);
    Deque<Section> open = ThreadRecord.find(stores, key);
    if (open != null) {
      open.poll();
      if (open.isEmpty()) {
        ThreadRecord.take(stores, key);
      }
    }
  }

  /** {@link #unlock()} as {@link #giveBackSection()} runs it. */
  void unlockGivingBack() {
    unlock();
  }

  /**
   * Removes the thread's settled record ({@link #settleFinishedUnlock}), leaving any other record
   * in place.
   *
   * @return whether there was one
   */
  abstract boolean takeSettled(long threadId);

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

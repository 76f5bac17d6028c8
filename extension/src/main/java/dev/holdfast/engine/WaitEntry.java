package dev.holdfast.engine;

import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import redis.clients.jedis.HostAndPort;

/**
 * The local waiters of one lock channel: shared by every thread of the client that waits for that
 * lock, reference counted by {@link UnlockSubscriptions}. An unlock message releases one permit,
 * so one waiter retries; a (re)subscription releases one per parked waiter, so all re-poll.
 */
final class WaitEntry {
  final String channel;
  private final Semaphore wakeups = new Semaphore(0);
  /** Guarded by the owning {@link UnlockSubscriptions}. */
  int references;
  /** Guarded by the owning {@link UnlockSubscriptions}. */
  HostAndPort node;
  private volatile boolean subscribed;
  private volatile boolean closed;

  WaitEntry(String channel, HostAndPort node) {
    this.channel = channel;
    this.node = node;
  }

  /** Whether an unlock message would reach this entry now. */
  boolean subscribed() {
    return subscribed;
  }

  void subscribed(boolean value) {
    this.subscribed = value;
  }

  /**
   * Parks until woken or {@code millis} pass.
   *
   * @return whether a wake-up arrived
   */
  boolean await(long millis) throws InterruptedException {
    return closed || wakeups.tryAcquire(millis, TimeUnit.MILLISECONDS);
  }

  void wakeOne() {
    wakeups.release();
  }

  /**
   * Wakes every registered waiter, parked or about to park: one permit per reference, not per
   * parked thread, so a waiter between its Redis try and its park cannot miss it. Called with
   * the owning {@link UnlockSubscriptions}' monitor held. Spare permits cost a spurious retry.
   */
  void wakeAll() {
    wakeups.release(Math.max(1, Math.max(references, wakeups.getQueueLength())));
  }

  /** The client is closing: every waiter returns from {@link #await} now and from now on. */
  void close() {
    closed = true;
    wakeAll();
  }
}

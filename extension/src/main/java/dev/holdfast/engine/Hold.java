package dev.holdfast.engine;

/**
 * What this client believes one thread holds of one lock.
 *
 * <p>The count is written only by the holding thread (acquire and release run on it) and read by
 * the watchdog; {@code watchdog} and {@code lostReason} are written by either. Redis stays the
 * authority: the count is what the thread's calls made it, and it is sent with the next call so a
 * replayed script can recognise itself.
 */
final class Hold {
  final LockNames names;
  final long threadId;
  final String field;
  private volatile int count;
  private volatile boolean watchdog;
  private volatile String lostReason;
  private volatile boolean releasing;
  private volatile long leaseMillis;
  /** For holds with an explicit lease: when Redis lets the key expire (System.nanoTime()). */
  private volatile long expiresAtNanos;

  Hold(LockNames names, long threadId, String field) {
    this.names = names;
    this.threadId = threadId;
    this.field = field;
  }

  int count() {
    return count;
  }

  void count(int count) {
    this.count = count;
  }

  boolean watchdog() {
    return watchdog && lostReason == null;
  }

  void useWatchdog() {
    this.watchdog = true;
  }

  String lostReason() {
    return lostReason;
  }

  void lost(String reason) {
    this.lostReason = reason;
  }

  /** True while the holder runs a release, whose final step makes renewals miss legitimately. */
  boolean releasing() {
    return releasing;
  }

  void releasing(boolean value) {
    this.releasing = value;
  }

  long leaseMillis() {
    return leaseMillis;
  }

  /** Records the lease just set in Redis by an acquisition. */
  void leased(long leaseMillis) {
    this.leaseMillis = leaseMillis;
    this.expiresAtNanos = System.nanoTime() + leaseMillis * 1_000_000L;
  }

  /** An explicit-lease hold whose lease ran out long ago: its key is gone from Redis. */
  boolean expiredBefore(long nanoTime) {
    return !watchdog && expiresAtNanos - nanoTime < 0;
  }

  /** Identifies a hold: one lock key, one thread. */
  record Id(String key, long threadId) {
  }
}

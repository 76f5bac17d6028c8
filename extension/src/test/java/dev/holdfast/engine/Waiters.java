package dev.holdfast.engine;

import java.util.concurrent.ExecutorService;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Lock;
import redis.clients.jedis.Jedis;

/** A thread waiting for a lock, and what tests measure about it. */
final class Waiters {
  private Waiters() {
  }

  /**
   * Starts a thread that waits for {@code lock} as long as it takes, then releases it.
   *
   * @return the {@code System.nanoTime()} at which it held the lock
   */
  static Future<Long> acquireAndRelease(ExecutorService threads, Lock lock) {
    return threads.submit(() -> {
      lock.lock();
      long acquiredAt = System.nanoTime();
      lock.unlock();
      return acquiredAt;
    });
  }

  /** Milliseconds from {@code releasedAt} until the waiter held the lock (waits up to 20 s). */
  static long millisUntilAcquired(Future<Long> waiter, long releasedAt) throws Exception {
    return TimeUnit.NANOSECONDS.toMillis(waiter.get(20, TimeUnit.SECONDS) - releasedAt);
  }

  /** Classic subscribers of {@code channel} on the server behind {@code jedis}, which it closes. */
  static long subscribers(Jedis jedis, String channel) {
    try (jedis) {
      return jedis.pubsubNumSub(channel).getOrDefault(channel, 0L);
    }
  }
}

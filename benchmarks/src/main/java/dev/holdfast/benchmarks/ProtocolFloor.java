package dev.holdfast.benchmarks;

import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.Lock;
import java.util.function.Supplier;
import redis.clients.jedis.Jedis;
import redis.clients.jedis.Pipeline;

/**
 * The protocol floor of {@link Impl#FLOOR}: the two classic scripts of the Redisson lock layout (a
 * hash per lock, one field per holder counting re-entries, a lease as the key's expiry, a message
 * on {@code redisson_lock__channel:{name}} when it is freed), each sent as one {@code EVALSHA} on
 * the calling thread's own connection. With {@code waitReplicas > 0} every script is followed by a
 * {@code WAIT} in the same pipeline, i.e. still one round trip.
 *
 * <p>Only for uncontended measurements: {@link Lock#lock()} fails instead of waiting if the lock
 * is taken. Each {@link #lock(String)} handle owns one connection and must be used by one thread.
 */
final class ProtocolFloor implements AutoCloseable {

  /** Take the lock if it is free or ours (one more re-entry); else answer its remaining lease. */
  private static final String ACQUIRE = String.join("\n",
      "if redis.call('exists', KEYS[1]) == 0 or redis.call('hexists', KEYS[1], ARGV[2]) == 1 then",
      "  redis.call('hincrby', KEYS[1], ARGV[2], 1)",
      "  redis.call('pexpire', KEYS[1], ARGV[1])",
      "  return nil",
      "end",
      "return redis.call('pttl', KEYS[1])");

  /** Drop one re-entry of ours; at zero delete the lock and tell the waiters. */
  private static final String RELEASE = String.join("\n",
      "if redis.call('hexists', KEYS[1], ARGV[3]) == 0 then",
      "  return nil",
      "end",
      "if redis.call('hincrby', KEYS[1], ARGV[3], -1) > 0 then",
      "  redis.call('pexpire', KEYS[1], ARGV[2])",
      "  return 0",
      "end",
      "redis.call('del', KEYS[1])",
      "redis.call('publish', KEYS[2], ARGV[1])",
      "return 1");

  private static final String LEASE_MILLIS = "30000";
  private static final long WAIT_TIMEOUT_MILLIS = 1_000;

  private final Supplier<Jedis> connections;
  private final int waitReplicas;
  private final String clientId = UUID.randomUUID().toString();
  private final List<Jedis> opened = new ArrayList<>();

  /**
   * @param connections  opens a connection to the master
   * @param waitReplicas replicas each script waits for with {@code WAIT}; 0 sends no {@code WAIT}
   */
  ProtocolFloor(Supplier<Jedis> connections, int waitReplicas) {
    this.connections = connections;
    this.waitReplicas = waitReplicas;
  }

  /** A handle on {@code name} with a connection of its own; for one thread. */
  synchronized Lock lock(String name) {
    Jedis jedis = connections.get();
    opened.add(jedis);
    return new FloorLock(jedis, jedis.scriptLoad(ACQUIRE), jedis.scriptLoad(RELEASE), name);
  }

  @Override
  public synchronized void close() {
    opened.forEach(Jedis::close);
    opened.clear();
  }

  private final class FloorLock implements Lock {

    private final Jedis jedis;
    private final String acquireSha;
    private final String releaseSha;
    private final String[] acquireArgs;
    private final String[] releaseArgs;

    FloorLock(Jedis jedis, String acquireSha, String releaseSha, String name) {
      this.jedis = jedis;
      this.acquireSha = acquireSha;
      this.releaseSha = releaseSha;
      // The owner is fixed per handle: a handle belongs to one thread.
      String owner = clientId + ":" + Thread.currentThread().getId();
      this.acquireArgs = new String[] {name, LEASE_MILLIS, owner};
      this.releaseArgs = new String[] {name, "redisson_lock__channel:{" + name + "}", "0",
          LEASE_MILLIS, owner};
    }

    @Override
    public void lock() {
      Object taken = call(acquireSha, 1, acquireArgs);
      if (taken != null) {
        throw new IllegalStateException("protocol floor measures uncontended locks only, but "
            + acquireArgs[0] + " is taken");
      }
    }

    @Override
    public void unlock() {
      call(releaseSha, 2, releaseArgs);
    }

    private Object call(String sha, int keys, String[] args) {
      if (waitReplicas == 0) {
        return jedis.evalsha(sha, keys, args);
      }
      Pipeline pipeline = jedis.pipelined();
      var result = pipeline.evalsha(sha, keys, args);
      pipeline.waitReplicas(waitReplicas, WAIT_TIMEOUT_MILLIS);
      pipeline.sync();
      return result.get();
    }

    @Override
    public void lockInterruptibly() {
      lock();
    }

    @Override
    public boolean tryLock() {
      return call(acquireSha, 1, acquireArgs) == null;
    }

    @Override
    public boolean tryLock(long time, TimeUnit unit) {
      return tryLock();
    }

    @Override
    public Condition newCondition() {
      throw new UnsupportedOperationException("protocol floor");
    }
  }
}

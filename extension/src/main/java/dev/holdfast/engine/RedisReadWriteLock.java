package dev.holdfast.engine;

import dev.holdfast.DistributedLock;
import dev.holdfast.DistributedReadWriteLock;

/**
 * A read-write lock handle: its two sides are {@link RedisLock}s of the
 * {@link ReadWriteLockKind#READ} and {@link ReadWriteLockKind#WRITE} kinds on the same key.
 * Immutable and thread-safe; holds no state of its own.
 */
final class RedisReadWriteLock implements DistributedReadWriteLock {
  private final String name;
  private final RedisLock read;
  private final RedisLock write;

  RedisReadWriteLock(LockEngine engine, String keyPrefix, String name, String template) {
    this.name = name;
    this.read = new RedisLock(engine, LockNames.of(keyPrefix, name, ReadWriteLockKind.READ),
        false, template);
    this.write = new RedisLock(engine, LockNames.of(keyPrefix, name, ReadWriteLockKind.WRITE),
        false, template);
  }

  @Override
  public String getName() {
    return name;
  }

  @Override
  public DistributedLock readLock() {
    return read;
  }

  @Override
  public DistributedLock writeLock() {
    return write;
  }

  @Override
  public String toString() {
    return "DistributedReadWriteLock[" + name + "]";
  }
}

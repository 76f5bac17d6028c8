package dev.holdfast.engine;

import java.util.List;

/**
 * The two sides of a read-write lock, on Redisson's {@code RReadWriteLock} layout (see the
 * read-write section of {@link LockScripts}): one hash per lock whose {@code mode} field says
 * which side holds it, reader fields {@code <clientId>:<threadId>}, writer field
 * {@code <clientId>:<threadId>:write}, per-section reader timeout keys, and the channel
 * {@code redisson_rwlock:<slotted key>}.
 *
 * <p>Both sides pass one extra key to their scripts: the prefix of the readers' timeout keys
 * (the key's slotted form, Redisson's; locks {@code a} and {@code {a}} keep their readers'
 * timeout keys apart by the field, see {@link LockNames}), in the lock's slot like every key a
 * script touches.
 */
abstract class ReadWriteLockKind extends LockKind {

  /** The read side: any number of readers, or the writer's own read sections. */
  static final ReadWriteLockKind READ = new ReadWriteLockKind() {
    @Override
    String handleName() {
      return "ReadLock";
    }

    @Override
    String idSuffix() {
      return "#read";
    }

    @Override
    LockScript acquire() {
      return LockScripts.RW_READ_ACQUIRE;
    }

    @Override
    LockScript release() {
      return LockScripts.RW_READ_RELEASE;
    }

    @Override
    LockScript resolve() {
      return LockScripts.RW_READ_RESOLVE;
    }

    @Override
    LockScript forceRelease() {
      return LockScripts.RW_READ_FORCE_RELEASE;
    }

    @Override
    LockScript keep() {
      return LockScripts.RW_READ_KEEP;
    }

    /** A read hold lives while one of its own timeout keys does: the watchdog renews those. */
    @Override
    String renewalDetail(LockNames names, String field) {
      return "read:" + names.slotted() + ":" + field + ":rwlock_timeout";
    }

    /**
     * Held for reading by anyone: in read mode, or in write mode when the writer holds read
     * sections too (the hash then has more than its mode and writer fields), as Redisson says.
     */
    @Override
    boolean isLocked(LockEngine engine, LockNames names) {
      String mode = engine.topology().commands().hget(names.key(), MODE);
      return "read".equals(mode)
          || ("write".equals(mode) && engine.topology().commands().hlen(names.key()) > 2);
    }
  };

  /** The write side: one writer, whose field is its thread's field plus {@code :write}. */
  static final ReadWriteLockKind WRITE = new ReadWriteLockKind() {
    @Override
    String handleName() {
      return "WriteLock";
    }

    @Override
    String idSuffix() {
      return "#write";
    }

    @Override
    String field(String threadField) {
      return threadField + ":write";
    }

    @Override
    LockScript acquire() {
      return LockScripts.RW_WRITE_ACQUIRE;
    }

    @Override
    LockScript release() {
      return LockScripts.RW_WRITE_RELEASE;
    }

    @Override
    LockScript resolve() {
      return LockScripts.RW_WRITE_RESOLVE;
    }

    @Override
    LockScript forceRelease() {
      return LockScripts.RW_WRITE_FORCE_RELEASE;
    }

    @Override
    LockScript keep() {
      return LockScripts.RW_WRITE_KEEP;
    }

    /**
     * An upgrade (read to write) would wait for the thread's own read hold for ever, as it does
     * with Redisson and {@code ReentrantReadWriteLock}: a call that would wait is refused at once
     * with {@link IllegalStateException}; one that does not wait fails as refused, as theirs do.
     * Only a read hold the thread still has counts: one that was lost (force-unlocked, or its
     * lease ran out) blocks nothing, even while its sections are not yet unlocked.
     */
    @Override
    boolean beforeAcquire(LockEngine engine, LockNames names, long threadId, boolean waits) {
      Hold read = engine.holds().get(new Hold.Id(names.key() + READ.idSuffix(), threadId));
      if (!engine.live(read)) {
        return true;
      }
      Hold write = engine.holds().get(new Hold.Id(names.holdKey(), threadId));
      if (write != null && write.count() > 0) {
        return true; // a re-entry of the write hold: its read sections are its own
      }
      if (!waits) {
        return false;
      }
      throw new IllegalStateException("Thread " + threadId + " holds the read lock of '"
          + names.name() + "' (" + read.count() + " times) and asked for its write lock, which "
          + "would wait for itself for ever: unlock the read lock first (as often as it was "
          + "locked), then lock the write lock; or take the write lock first, then the read "
          + "lock, and release the write lock to downgrade");
    }

    @Override
    boolean isLocked(LockEngine engine, LockNames names) {
      return "write".equals(engine.topology().commands().hget(names.key(), MODE));
    }
  };

  private static final String MODE = "mode";

  private ReadWriteLockKind() {
  }

  @Override
  String channelPrefix() {
    return "redisson_rwlock:";
  }

  /** The prefix of the readers' timeout keys: {@code <prefix>:<field>:rwlock_timeout:<n>}. */
  @Override
  List<String> extraKeys(LockNames names) {
    return List.of(names.slotted());
  }
}

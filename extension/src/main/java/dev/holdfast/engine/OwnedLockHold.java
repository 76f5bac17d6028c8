package dev.holdfast.engine;

import dev.holdfast.LockHold;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.locks.ReentrantLock;

/**
 * A {@link LockHold}: a hold of one {@link RedisLock} whose owner is this object, not a thread.
 *
 * <p><b>Owner.</b> Each object has an owner id of its own, negative ({@link
 * LockEngine#nextOwnerId()}) so that it never equals the id of a thread of this JVM; its hash
 * field is {@code <clientId>:<ownerId>} (plus the kind's suffixes, e.g. {@code :write}), the
 * same layout as a thread's, so Redisson and every script see an ordinary holder. The hold
 * protocol ({@link RedisLock}'s acquisition and release, renewal, loss, settling) runs for it
 * exactly as for a thread, keyed by the owner id instead of the thread's. The engine's hold
 * registry refers to this object only weakly ({@link Hold#threadAlive()}): an object collected
 * without {@link #release()} is given up by the watchdog like the hold of a thread that ended
 * without {@code unlock()}.
 *
 * <p><b>Threads.</b> Any thread may call any method. Releases are serialised on this object and
 * happen at most once; {@link #isHeld()} and {@link #token()} never wait for a release in
 * flight. The acquiring thread publishes the hold through {@link #acquired} under a lock that a
 * release takes too, so a release on another thread sees what the acquisition wrote.
 */
final class OwnedLockHold implements LockHold {
  private final RedisLock lock;
  /** This hold's owner id: negative, unique in its engine. */
  final long ownerId;
  /** The registry's record of this hold; set once acquired. */
  private volatile Hold hold;
  private volatile Long token;
  /**
   * The release ran (whatever its outcome: the hold ended, was found lost, or ended in doubt):
   * from now on this object owns nothing. Written under {@link #ends}.
   */
  private volatile boolean released;
  /**
   * Serialises the acquisition's hand-over and the releases (a lock, not a monitor: a release
   * blocks on Redis, which must not pin a virtual thread to its carrier on Java 21-23).
   */
  private final ReentrantLock ends = new ReentrantLock();

  OwnedLockHold(RedisLock lock, long ownerId) {
    this.lock = lock;
    this.ownerId = ownerId;
  }

  /** The acquisition succeeded: {@code hold} is this owner's record in the registry. */
  void acquired(Hold hold, boolean fenced) {
    ends.lock();
    try {
      this.hold = hold; // never null: a live owner's hold stays in the registry until released
      this.token = fenced && hold != null && hold.token() != 0 ? hold.token() : null;
    } finally {
      ends.unlock();
    }
  }

  /** Whether the release ran (see {@link #released}); the watchdog's liveness check. */
  boolean released() {
    return released;
  }

  /** The lock this is a hold of. */
  RedisLock lock() {
    return lock;
  }

  /** This hold's record in the registry; null before acquisition. */
  Hold hold() {
    return hold;
  }

  @Override
  public String lockName() {
    return lock.getName();
  }

  @Override
  public boolean isHeld() {
    Hold h = hold;
    return h != null && !released && lock.engine().live(h);
  }

  @Override
  public Long token() {
    return token;
  }

  @Override
  public void release() {
    end(0);
  }

  /**
   * Releases now ({@code keepMillis} ≤ 0), or keeps the lock held in Redis for {@code keepMillis}
   * more, without renewal, and then lets it expire ({@link RedisLock#unlockAfter(long, long)});
   * at most once with {@link #release()}.
   */
  void end(long keepMillis) {
    ends.lock();
    try {
      endOnce(keepMillis);
    } finally {
      ends.unlock();
    }
  }

  private void endOnce(long keepMillis) {
    if (released) {
      return;
    }
    Hold h = hold;
    if (h != null && !h.active() && lock.engine().holds().get(h.id) != h) {
      // Lost, and forgotten by the registry since (no section is kept for an object forever).
      released = true;
      throw new IllegalMonitorStateException("Lock '" + lock.getName() + "' was lost by "
          + h.ownerName() + " before release(): " + h.lostReason());
    }
    try {
      if (keepMillis > 0) {
        lock.unlockAfter(ownerId, keepMillis);
      } else {
        lock.release(ownerId);
      }
      released = true;
    } catch (RuntimeException e) {
      // Over unless Redis answered with an error that changed nothing (the hold goes on, and
      // a later release may try again).
      if (h == null || h.count() == 0 || !h.active()) {
        released = true;
      }
      throw e;
    }
  }

  @Override
  public CompletionStage<Void> releaseAsync() {
    return lock.engine().async(() -> {
      release();
      return null;
    });
  }

  /** {@link #releaseAsync()} after {@code keepMillis} as {@link #end(long)} does. */
  CompletableFuture<Void> releaseAfterAsync(long keepMillis) {
    return lock.engine().async(() -> {
      end(keepMillis);
      return null;
    });
  }

  @Override
  public void close() {
    release();
  }

  @Override
  public String toString() {
    return "LockHold[" + lock.getName() + ", owner " + ownerId + ", "
        + (released ? "released" : isHeld() ? "held" : "lost") + "]";
  }
}

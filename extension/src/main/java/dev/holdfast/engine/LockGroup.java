package dev.holdfast.engine;

import dev.holdfast.DistributedLock;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;

/**
 * The member locks of a {@link MultiLock} or {@link RedLock}: validated once, immutable, and the
 * few calls both make on every member. Members are used only through {@link DistributedLock}, so
 * they may come from any client (and any Redis deployment) and be of any kind.
 */
final class LockGroup {
  /** A wait or lease argument meaning "none": wait for ever, or use the watchdog. */
  static final long NONE = -1;

  private final String kind;
  private final List<DistributedLock> members;

  private LockGroup(String kind, List<DistributedLock> members) {
    this.kind = kind;
    this.members = members;
  }

  /**
   * Validates {@code locks} for a lock of {@code kind} ("multi-lock", "RedLock").
   *
   * @throws IllegalArgumentException naming the problem: no locks, a null one (by index), or the
   *     same lock twice (by name and indexes)
   */
  static LockGroup of(String kind, DistributedLock[] locks) {
    if (locks == null || locks.length == 0) {
      throw new IllegalArgumentException("A " + kind + " needs at least one lock, but got none");
    }
    List<DistributedLock> members = new ArrayList<>(locks.length);
    Map<Object, Integer> seen = new HashMap<>();
    for (int i = 0; i < locks.length; i++) {
      DistributedLock lock = locks[i];
      if (lock == null) {
        throw new IllegalArgumentException("A " + kind + " cannot hold null: lock " + i + " of "
            + locks.length + " is null");
      }
      Integer earlier = seen.putIfAbsent(identity(lock), i);
      if (earlier != null) {
        throw new IllegalArgumentException("A " + kind + " cannot hold the same lock twice: '"
            + lock.getName() + "' is lock " + earlier + " and lock " + i
            + (kind.equals("RedLock") ? " (it would count as two votes of one server)" : ""));
      }
      members.add(lock);
    }
    return new LockGroup(kind, List.copyOf(members));
  }

  /**
   * What makes two handles the same lock: two handles from one client for one key and side are
   * interchangeable (fenced or not, fair or not: they share the hash field); the read and write
   * sides of one read-write lock are two locks; two RedLocks are the same when their members are
   * (in any order), two multi-locks when their members are; handles of other classes are only
   * the same as themselves.
   */
  static Object identity(DistributedLock lock) {
    if (lock instanceof RedisLock r) {
      return List.of(r.engine(), r.holdKey());
    }
    if (lock instanceof RedLock red) {
      // A set of votes: the members' order means nothing.
      return List.of("RedLock", red.members().stream().map(LockGroup::identity)
          .collect(Collectors.toUnmodifiableSet()));
    }
    if (lock instanceof MultiLock multi) {
      return List.of("multi-lock", multi.identities());
    }
    return new IdentityKey(lock);
  }

  private record IdentityKey(Object lock) {
    @Override
    public boolean equals(Object o) {
      return o instanceof IdentityKey k && k.lock == lock;
    }

    @Override
    public int hashCode() {
      return System.identityHashCode(lock);
    }
  }

  List<DistributedLock> members() {
    return members;
  }

  int size() {
    return members.size();
  }

  String kind() {
    return kind;
  }

  /** The members' names, comma-separated, in order. */
  String names() {
    List<String> names = new ArrayList<>(members.size());
    for (DistributedLock m : members) {
      names.add(m.getName());
    }
    return String.join(", ", names);
  }

  /**
   * One acquisition of {@code lock} on the calling thread.
   *
   * @param waitNanos {@link #NONE} to wait as long as it takes, 0 to try once, else the most to
   *     wait
   * @param leaseMillis {@link #NONE} for the watchdog, else the lease
   * @return whether it was acquired
   */
  static boolean acquire(DistributedLock lock, long waitNanos, long leaseMillis)
      throws InterruptedException {
    if (waitNanos == NONE) {
      if (leaseMillis == NONE) {
        lock.lockInterruptibly();
      } else {
        lock.lockInterruptibly(leaseMillis, TimeUnit.MILLISECONDS);
      }
      return true;
    }
    if (leaseMillis == NONE) {
      return waitNanos == 0 ? lock.tryLock() : lock.tryLock(waitNanos, TimeUnit.NANOSECONDS);
    }
    return lock.tryLock(waitNanos, TimeUnit.MILLISECONDS.toNanos(leaseMillis),
        TimeUnit.NANOSECONDS);
  }

  /**
   * Releases one hold of each of {@code held}, members an acquisition took and now gives back
   * ({@link RedLock}'s lost round), newest first, trying every one whatever the others do; as
   * {@link DistributedLock#unlock()}, except that a re-entered section of this engine whose
   * release fails stays owed to that member ({@link RedisLock#giveBackSection()}) and is
   * finished by the thread's next call on it. Failures are added to {@code failure} as
   * suppressed, or to a new exception.
   *
   * @return {@code failure}, or the first release failure if {@code failure} was null, or null
   */
  static Throwable releaseQuietly(List<DistributedLock> held, Throwable failure) {
    return newestFirst(held, failure, m -> {
      if (m instanceof RedisLock r) {
        r.giveBackSection(); // a failed re-entered section stays owed, not the application's
      } else if (m instanceof CompositeLock c) {
        c.giveBackSection(); // the same, member by member
      } else {
        m.unlock();
      }
    });
  }

  /**
   * {@link #releaseQuietly}, for members an acquisition took and now gives back because it gives
   * up: a member of this engine that this acquisition took afresh and that is found gone is
   * dropped without a {@code LockLost} ({@link RedisLock#giveBack()}): the application never
   * held the composite lock; a re-entered section whose release fails stays owed to that member
   * as in {@link #releaseQuietly}.
   */
  static Throwable giveBack(List<DistributedLock> taken, Throwable failure) {
    return newestFirst(taken, failure, m -> {
      if (m instanceof RedisLock r) {
        r.giveBack();
      } else if (m instanceof CompositeLock c) {
        c.giveBackSection();
      } else {
        m.unlock();
      }
    });
  }

  /** Applies {@code release} to each lock, newest first, collecting failures as described. */
  private static Throwable newestFirst(List<DistributedLock> locks, Throwable failure,
      java.util.function.Consumer<DistributedLock> release) {
    Throwable first = failure;
    for (int i = locks.size() - 1; i >= 0; i--) {
      try {
        release.accept(locks.get(i));
      } catch (RuntimeException e) {
        if (first == null) {
          first = e;
        } else {
          first.addSuppressed(e);
        }
      }
    }
    return first;
  }

  /**
   * The lease in milliseconds, validated before any member is touched, so that a bad value never
   * leaves some members acquired.
   */
  static long leaseMillis(long leaseTime, TimeUnit unit) {
    return RedisLock.leaseMillis(leaseTime, unit);
  }

  /** A wait argument in nanoseconds: 0 for zero or negative, saturated at the top. */
  static long waitNanos(long waitTime, TimeUnit unit) {
    Objects.requireNonNull(unit, "unit");
    return waitTime <= 0 ? 0 : unit.toNanos(waitTime);
  }
}

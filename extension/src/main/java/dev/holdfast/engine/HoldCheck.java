package dev.holdfast.engine;

import dev.holdfast.DistributedLock;
import dev.holdfast.LockHold;
import java.util.List;

/**
 * One hold, captured for the commit guard ({@code dev.holdfast.CommitGuard} and {@code @Locked}
 * in a transaction): a thread's hold of a {@link DistributedLock}, taken when the check is
 * created on that thread, or a {@link LockHold}. {@link #verify} may run later on any thread
 * (the one that completes the transaction) and tells whether the hold is still there.
 *
 * <p>What is checked: a hold of this library's locks must be believed (not reported lost, not
 * released, within its local deadline) — no I/O; with {@code inRedis}, one round trip then
 * confirms the holder's entry in Redis, answered within the local deadline, and an entry found
 * gone is reported lost ({@code LockLost}, once, as a renewal would). A multi-lock needs every
 * member, a RedLock a majority (as its own queries count). Locks and holds of other
 * implementations are asked through their public API ({@link DistributedLock#isHeldByThread},
 * {@link LockHold#isHeld()}).
 *
 * <p>Immutable; thread-safe. Not API.
 */
public abstract class HoldCheck {
  private final String lockName;

  private HoldCheck(String lockName) {
    this.lockName = lockName;
  }

  /**
   * The calling thread's hold of {@code lock}, as it is now: if the thread does not hold it, the
   * check fails from the start.
   */
  public static HoldCheck ofThread(DistributedLock lock) {
    long threadId = Thread.currentThread().getId();
    if (lock instanceof RedisLock redis) {
      Hold hold = redis.holdOf(threadId);
      return new HoldCheck(lock.getName()) {
        @Override
        public String verify(boolean inRedis) {
          return redis.commitCheck(hold, inRedis);
        }
      };
    }
    if (lock instanceof MultiLock multi) {
      return composite(lock.getName(), members(multi.members()), multi.members().size());
    }
    if (lock instanceof RedLock red) {
      return composite(lock.getName(), members(red.members()), red.quorum());
    }
    return new HoldCheck(lock.getName()) {
      @Override
      public String verify(boolean inRedis) {
        return lock.isHeldByThread(threadId) ? null : "the thread no longer holds it";
      }
    };
  }

  /** {@code hold}, whichever thread it is checked on. */
  public static HoldCheck of(LockHold hold) {
    if (hold instanceof OwnedLockHold owned) {
      return new HoldCheck(hold.lockName()) {
        @Override
        public String verify(boolean inRedis) {
          if (owned.released()) {
            return "it was released";
          }
          return owned.lock().commitCheck(owned.hold(), inRedis);
        }
      };
    }
    return new HoldCheck(hold.lockName()) {
      @Override
      public String verify(boolean inRedis) {
        return hold.isHeld() ? null : "it is no longer held";
      }
    };
  }

  private static List<HoldCheck> members(List<DistributedLock> members) {
    return members.stream().map(HoldCheck::ofThread).toList();
  }

  /** Passes while at least {@code needed} members pass; checks no more members than needed. */
  private static HoldCheck composite(String name, List<HoldCheck> members, int needed) {
    return new HoldCheck(name) {
      @Override
      public String verify(boolean inRedis) {
        int passed = 0;
        int failed = 0;
        StringBuilder why = new StringBuilder();
        for (HoldCheck member : members) {
          String reason = member.verify(inRedis);
          if (reason == null) {
            passed++;
          } else {
            failed++;
            why.append(why.isEmpty() ? "" : "; ").append("member '").append(member.lockName())
                .append("': ").append(reason);
          }
          if (passed >= needed) {
            return null;
          }
          if (members.size() - failed < needed) {
            break;
          }
        }
        return (needed == members.size() ? "" : "fewer than " + needed + " of " + members.size()
            + " members are held: ") + why;
      }
    };
  }

  /** {@return the lock's name} */
  public String lockName() {
    return lockName;
  }

  /**
   * Checks the hold now (see the class comment). With {@code inRedis}, blocks for one round trip
   * (at most the client's timeout) per hold of this library.
   *
   * @return null if it is held, else why not (the reason it was lost, or that it was released or
   *     could not be confirmed)
   */
  public abstract String verify(boolean inRedis);
}

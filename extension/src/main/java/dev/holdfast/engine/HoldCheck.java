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
 * released nor being released, within its local deadline) — no I/O; with {@code inRedis}, one
 * round trip then confirms the holder's entry in Redis, answered within the local deadline, and
 * an entry found gone is reported lost ({@code LockLost}, once, as a renewal would) — unless the
 * owner's release is in flight, which removes the entry itself. A multi-lock needs every
 * member, a RedLock a majority (as its own queries count). Locks and holds of other
 * implementations are asked through their public API ({@link DistributedLock#isHeldByThread},
 * {@link LockHold#isHeld()}).
 *
 * <p>Two kinds: a check of {@link #ofThread}/{@link #of} relies on the hold until the check, so a
 * hold released before it fails; a check of {@link #ofLockedCall} relies on it only while the
 * {@code @Locked} call runs, so a hold that its call released, and that was never lost, passes
 * — but one lost before its release fails however late the check runs.
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
   * check fails from the start. A hold released later fails too.
   */
  public static HoldCheck ofThread(DistributedLock lock) {
    return ofThread(lock, false);
  }

  /** {@code hold}, whichever thread it is checked on; a hold released later fails. */
  public static HoldCheck of(LockHold hold) {
    return of(hold, false);
  }

  /**
   * The hold of {@code lock} that a blocking {@code @Locked} call running on the calling thread
   * took: passes once the call released it, unless it was lost before.
   */
  public static HoldCheck ofLockedCall(DistributedLock lock) {
    return ofThread(lock, true);
  }

  /**
   * The hold an asynchronous {@code @Locked} call took: passes once the call released it, unless
   * it was lost before.
   */
  public static HoldCheck ofLockedCall(LockHold hold) {
    return of(hold, true);
  }

  private static HoldCheck ofThread(DistributedLock lock, boolean untilReleased) {
    long threadId = Thread.currentThread().getId();
    if (lock instanceof RedisLock redis) {
      Hold hold = redis.holdOf(threadId);
      return new HoldCheck(lock.getName()) {
        @Override
        public String verify(boolean inRedis) {
          return redis.commitCheck(hold, inRedis, untilReleased);
        }
      };
    }
    if (lock instanceof MultiLock multi) {
      return composite(lock.getName(), members(multi.members(), untilReleased),
          multi.members().size());
    }
    if (lock instanceof RedLock red) {
      return composite(lock.getName(), members(red.members(), untilReleased), red.quorum());
    }
    return new HoldCheck(lock.getName()) {
      @Override
      public String verify(boolean inRedis) {
        return lock.isHeldByThread(threadId) ? null : "is no longer held by the thread";
      }
    };
  }

  private static HoldCheck of(LockHold hold, boolean untilReleased) {
    if (hold instanceof OwnedLockHold owned) {
      return new HoldCheck(hold.lockName()) {
        @Override
        public String verify(boolean inRedis) {
          Hold h = owned.hold();
          if (!untilReleased && owned.released()) {
            return h != null && !h.active() ? "was lost: " + h.lostReason() : "was released";
          }
          return owned.lock().commitCheck(h, inRedis, untilReleased);
        }
      };
    }
    return new HoldCheck(hold.lockName()) {
      @Override
      public String verify(boolean inRedis) {
        return hold.isHeld() ? null : "is no longer held";
      }
    };
  }

  /** The members' checks, of the same kind as the composite's ({@code untilReleased}). */
  private static List<HoldCheck> members(List<DistributedLock> members, boolean untilReleased) {
    return members.stream().map(m -> ofThread(m, untilReleased)).toList();
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
                .append("' ").append(reason);
          }
          if (passed >= needed) {
            return null;
          }
          if (members.size() - failed < needed) {
            break;
          }
        }
        return (needed == members.size() ? "lost a member: "
            : "kept fewer than " + needed + " of " + members.size() + " members: ") + why;
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
   * @return null if it passed, else why not, as what befell the lock, to follow its name:
   *     "was lost: …", "was released", "was being released", "could not be confirmed in Redis:
   *     …", "is no longer held"
   */
  public abstract String verify(boolean inRedis);
}

package dev.holdfast.engine;

import dev.holdfast.DistributedLock;
import dev.holdfast.LockClient;
import java.util.List;
import java.util.Set;

/**
 * The lock keys of a {@link LockModelTest} run and what each one means: every actor names a
 * lock by its <em>key</em>, which fixes the kind of lock, how the exclusion probe sees it and
 * which names its {@code LockLost} events carry.
 *
 * <ul>
 *   <li>{@code m…}: the exclusive lock ({@link LockClient#getLock}); {@value #HOT} is the hot
 *       name most actors compete for, so that threads of one client wait for each other and the
 *       lock is handed off locally (TRANSFER); {@value #HOT_TWIN} is another exclusive lock, also
 *       hot, whose unlock channel is the same ({@code redisson_lock__channel:{m0}}): two names
 *       are two locks even when their channel is one;</li>
 *   <li>{@code f…}: the fair lock ({@link LockClient#getFairLock});</li>
 *   <li>{@code x…}: the fenced lock ({@link LockClient#getFencedLock}): every hold carries a
 *       token, recorded with the hold;</li>
 *   <li>{@code <name>/1w} and {@code <name>/2r}: the write and read sides of the read-write lock
 *       {@code <name>} ({@link LockClient#getReadWriteLock}). The side is in the key's order so
 *       that the actors' rule "take another lock only if its key is higher" allows write then
 *       read (the contract's downgrade) and never read then write (an upgrade, refused);</li>
 *   <li>{@value #MULTI}: a multi-lock ({@link LockClient#getMultiLock}) over the exclusive locks
 *       {@code n0} (inside a nested multi-lock of its own, so that rounds give a composite back)
 *       and {@code n1}, which nothing else takes — but for {@value #RETAKEN_MEMBER},
 *       taken alone now and then before an unlock of the multi-lock (its first try, or the
 *       retry of a failed one);</li>
 *   <li>{@value #RED}: a RedLock ({@link LockClient#getRedLock}) over the exclusive locks
 *       {@code q0}, {@code q1} and {@code q2} of the actor's own client, which nothing else
 *       takes — but for {@value #RED_RETAKEN_MEMBER}, taken alone as {@value #RETAKEN_MEMBER}
 *       is (the first member asked: the one a fault starting during an unlock leaves released,
 *       and whose vote a fault refuses first). The contract wants one server per member; here all three live on the run's one
 *       Redis (or cluster), which exercises every client-side path of a RedLock (rounds of
 *       votes, split votes between competitors, the quorum of 2, a minority lost, failed member
 *       releases owed as give-backs) — but not independent server failures: a fault hits every
 *       member at once. The probe sees it under its key, and its {@code LockLost} events name
 *       its members: the loss of one is the loss of a minority, which does not end the hold by
 *       itself.</li>
 * </ul>
 */
final class ModelLocks {
  /** The keys of every run. */
  static final List<String> KEYS =
      List.of("f0", "m0", "mm", "r0/1w", "r0/2r", "rl", "x0", "{m0}");
  static final String HOT = "m0";
  /** A second exclusive lock whose unlock channel is {@value #HOT}'s (Redisson's naming). */
  static final String HOT_TWIN = "{m0}";
  static final String MULTI = "mm";
  private static final List<String> MULTI_MEMBERS = List.of("n0", "n1");
  /**
   * The member an actor takes alone, now and then, before an unlock of the multi-lock
   * ({@code ModelActor#retakeMemberThenUnlock}): the only use of a member alone.
   */
  static final String RETAKEN_MEMBER = "n1";
  static final String RED = "rl";
  static final List<String> RED_MEMBERS = List.of("q0", "q1", "q2");
  /** How many members a RedLock over {@link #RED_MEMBERS} needs: a majority. */
  static final int RED_QUORUM = RED_MEMBERS.size() / 2 + 1;
  /** As {@link #RETAKEN_MEMBER}, for the RedLock. */
  static final String RED_RETAKEN_MEMBER = "q0";

  private ModelLocks() {
  }

  /** A handle of {@code client} on the lock {@code key} names. No I/O. */
  static DistributedLock handle(LockClient client, String key) {
    if (key.equals(MULTI)) {
      // n0 inside a nested multi-lock: a round that took it and finds n1 busy gives a
      // composite back (CompositeLock#giveBackSection); exclusion is the same as {n0, n1}.
      return client.getMultiLock(client.getMultiLock(client.getLock(MULTI_MEMBERS.get(0))),
          client.getLock(MULTI_MEMBERS.get(1)));
    }
    if (key.equals(RED)) {
      return client.getRedLock(RED_MEMBERS.stream().map(client::getLock)
          .toArray(DistributedLock[]::new));
    }
    if (isReadWrite(key)) {
      var rw = client.getReadWriteLock(probeName(key));
      return isShared(key) ? rw.readLock() : rw.writeLock();
    }
    return switch (key.charAt(0)) {
      case 'f' -> client.getFairLock(key);
      case 'x' -> client.getFencedLock(key);
      default -> client.getLock(key);
    };
  }

  static boolean isReadWrite(String key) {
    return key.contains("/");
  }

  /** The read side of a read-write lock: shares the lock with other readers. */
  static boolean isShared(String key) {
    return key.endsWith("/2r");
  }

  static boolean isFenced(String key) {
    return key.startsWith("x");
  }

  /**
   * Whether the key is a lock over other locks (the multi-lock, the RedLock): held by a thread
   * only, with no {@code LockHold}.
   */
  static boolean composite(String key) {
    return key.equals(MULTI) || key.equals(RED);
  }

  /** The member of a composite lock an actor may take alone before retrying its unlock. */
  static String retakenMember(String key) {
    return key.equals(MULTI) ? RETAKEN_MEMBER : RED_RETAKEN_MEMBER;
  }

  static boolean isRedLock(String key) {
    return key.equals(RED);
  }

  /**
   * Whether {@code unlockAfter} keeps this lock held: not a composite lock's (a plain unlock),
   * nor a member's taken alone, whose hold in Redis may also count the composite's sections of
   * the same thread (one hash field): its release there is not final, and keeps nothing.
   */
  static boolean keepable(String key) {
    return !composite(key) && !key.equals(RETAKEN_MEMBER) && !key.equals(RED_RETAKEN_MEMBER);
  }

  /**
   * The name the probe (and forceUnlock) sees: both sides of a read-write lock are one lock,
   * whose windows conflict unless both are reads.
   */
  static String probeName(String key) {
    int slash = key.indexOf('/');
    return slash < 0 ? key : key.substring(0, slash);
  }

  /** The lock names a {@code LockLost} for a hold of {@code key} may carry. */
  static Set<String> reportedNames(String key) {
    return key.equals(MULTI) ? Set.copyOf(MULTI_MEMBERS)
        : key.equals(RED) ? Set.copyOf(RED_MEMBERS) : Set.of(probeName(key));
  }
}

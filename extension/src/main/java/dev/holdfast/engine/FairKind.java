package dev.holdfast.engine;

import java.lang.System.Logger.Level;
import java.util.List;

/**
 * The fair lock: Redisson's {@code RFairLock} layout. The lock itself is the exclusive lock's hash
 * (same key, same fields); beside it, in the same slot, a list
 * {@code redisson_lock_queue:<base>} of waiting fields in arrival order and a sorted set
 * {@code redisson_lock_timeout:<base>} scoring each waiter, where the base is the slotted key
 * except for a braced key ({@link LockNames}: lock {@code {a}} must not share lock {@code a}'s
 * queue). Each waiter listens on its own
 * channel, {@code <lock channel>:<field>}, and an unlock publishes {@code 0} to the head waiter's
 * channel only, so exactly the next one wakes. That channel stays Redisson's even for a braced
 * key, whose lock channel is its unbraced twin's: a channel only wakes a thread, which then
 * re-polls its own lock and queue, and a thread waits for one lock at a time.
 *
 * <p><b>Liveness.</b> A Holdfast waiter's score is a deadline, {@code now + waiter-timeout} by the
 * Redis server's clock, written again at every attempt; a waiter parks at most a third of the
 * timeout between attempts, so a live waiter never reaches its deadline, and every fair script
 * first drops the waiters past theirs, wherever they stand in the queue. A waiter that gives up
 * leaves the queue at once ({@link #gaveUp}). Only the queue's head may take a free lock.
 *
 * <p><b>No waiter oversleeps its turn.</b> Nothing is published when a lease runs out, so the
 * head must park no longer than the holder's remaining lease, which every refusal while the lock
 * is held tells it. A waiter behind the head may park longer (while the lock is free but the
 * head's turn, it is told the time until the head's deadline, up to a third of the timeout), and
 * that is harmless as long as it is woken when it becomes the head: every fair script that moves
 * the head wakes the new one (see {@link LockScripts#FAIR_ACQUIRE}), so the new head re-polls
 * and parks by the lease of whoever holds the lock now. This costs one publish and one re-poll
 * per change of head, none without waiters.
 *
 * <p>Stateless and thread-safe.
 */
final class FairKind extends LockKind {
  private static final System.Logger LOG = System.getLogger(FairKind.class.getName());

  static final FairKind INSTANCE = new FairKind();

  /** The prefix of the queue list's name (Redisson's), followed by the derived base. */
  static final String QUEUE_PREFIX = "redisson_lock_queue:";
  /** The prefix of the waiter scores' sorted set (Redisson's), followed by the derived base. */
  static final String TIMEOUT_PREFIX = "redisson_lock_timeout:";

  private FairKind() {
  }

  @Override
  String handleName() {
    return "FairLock";
  }

  static String queueKey(LockNames names) {
    return QUEUE_PREFIX + names.derivedBase();
  }

  static String timeoutKey(LockNames names) {
    return TIMEOUT_PREFIX + names.derivedBase();
  }

  @Override
  LockScript acquire() {
    return LockScripts.FAIR_ACQUIRE;
  }

  @Override
  LockScript release() {
    return LockScripts.FAIR_RELEASE;
  }

  @Override
  LockScript resolve() {
    return LockScripts.FAIR_RESOLVE;
  }

  @Override
  LockScript forceRelease() {
    return LockScripts.FAIR_FORCE_RELEASE;
  }

  @Override
  LockScript keep() {
    return LockScripts.FAIR_KEEP;
  }

  /** {@code queue, timeouts}. */
  @Override
  List<String> extraKeys(LockNames names) {
    return List.of(queueKey(names), timeoutKey(names));
  }

  /**
   * {@code waiter-timeout ms, publish command, lock channel}: every fair script gets all three,
   * so that any of them can drop dead waiters and wake the next head.
   */
  @Override
  List<String> extraArgs(LockEngine engine, LockNames names, String field) {
    return List.of(Long.toString(engine.fairWaiterMillis()), engine.topology().publishCommand(),
        names.channel());
  }

  /** The extra arguments and whether the caller queues when refused: a single try does not. */
  @Override
  List<String> acquireExtraArgs(LockEngine engine, LockNames names, String field,
      boolean waits) {
    return List.of(Long.toString(engine.fairWaiterMillis()), engine.topology().publishCommand(),
        names.channel(), waits ? "1" : "0");
  }

  /** Redisson's per-waiter channel: the lock channel, a colon, and the waiter's field. */
  @Override
  String waitChannel(LockNames names, String field) {
    return names.channel() + ":" + field;
  }

  /** A third of the waiter timeout: a live waiter refreshes its deadline well before it passes. */
  @Override
  long maxParkMillis(LockEngine engine) {
    return Math.max(1, engine.fairWaiterMillis() / 3);
  }

  @Override
  void gaveUp(LockEngine engine, LockNames names, String field) {
    if (engine.closed()) {
      return; // dead once its deadline passes; dropped by the lock's next fair-lock call
    }
    try {
      engine.topology().eval(LockScripts.FAIR_LEAVE,
          List.of(names.key(), queueKey(names), timeoutKey(names)),
          sealed -> List.of(field, engine.topology().publishCommand(), names.channel()), false,
          1);
    } catch (RuntimeException e) {
      LOG.log(Level.DEBUG, () -> "Leaving the queue of fair lock '" + names.name()
          + "' failed; the entry is dead once its deadline passes (within the waiter timeout) and "
          + "is dropped by the next fair-lock call on this lock: " + e.getMessage());
    }
  }
}

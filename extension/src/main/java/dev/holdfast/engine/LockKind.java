package dev.holdfast.engine;

import java.util.List;

/**
 * What sets one kind of lock apart (exclusive, fair, the read or write side of a read-write lock)
 * while {@link RedisLock} runs the same hold protocol for all: expected counts, request markers,
 * settling of uncertain calls, sections, local deadlines, renewal and loss reporting.
 *
 * <p>Every kind's {@code acquire}, {@code release} and {@code resolve} scripts take the KEYS and
 * ARGV of {@link LockScripts#ACQUIRE}, {@link LockScripts#RELEASE} and {@link LockScripts#RESOLVE}
 * in the same positions, followed by the kind's {@link #extraKeys} and {@link #extraArgs}, and
 * return the same replies. Kinds are stateless singletons.
 */
abstract class LockKind {

  /** The exclusive lock: Redisson's {@code RLock} layout. */
  static final LockKind EXCLUSIVE = new LockKind() {
  };

  /** What a handle of this kind calls itself in {@code toString()}. */
  String handleName() {
    return "DistributedLock";
  }

  /** The prefix of the lock's unlock channel, followed by the slotted key. */
  String channelPrefix() {
    return "redisson_lock__channel:";
  }

  /**
   * What tells this kind's holds apart from other kinds' holds of the same key in the hold
   * registry (e.g. the write side of a read-write lock from its read side).
   */
  String idSuffix() {
    return "";
  }

  /** The hash field of a thread whose plain field is {@code threadField}. */
  String field(String threadField) {
    return threadField;
  }

  LockScript acquire() {
    return LockScripts.ACQUIRE;
  }

  LockScript release() {
    return LockScripts.RELEASE;
  }

  LockScript resolve() {
    return LockScripts.RESOLVE;
  }

  /**
   * {@code KEYS[1] lock key, ARGV[1] 'publish'/'spublish', ARGV[2] channel}, then the extras;
   * returns 1 if it released a lock of this kind, 0 if there was none.
   */
  LockScript forceRelease() {
    return LockScripts.FORCE_RELEASE;
  }

  /**
   * {@code KEYS[1] lock key, ARGV[1] field, ARGV[2] ms}, then the extras: the hold ends locally,
   * but the lock stays held in Redis for that long; returns 1 if done, 0 if not held.
   */
  LockScript keep() {
    return LockScripts.KEEP;
  }

  /** Keys appended to this kind's script calls (same slot as the lock key). */
  List<String> extraKeys(LockNames names) {
    return List.of();
  }

  /** Arguments appended to this kind's script calls, after the kind's extra keys' turn. */
  List<String> extraArgs(LockEngine engine, LockNames names, String field) {
    return List.of();
  }

  /**
   * The arguments appended to an acquisition; {@code waits}: whether the caller waits when
   * refused (false for a single try, such as {@code tryLock()}).
   */
  List<String> acquireExtraArgs(LockEngine engine, LockNames names, String field,
      boolean waits) {
    return extraArgs(engine, names, field);
  }

  /**
   * What the renewal script needs besides the key and field to renew a hold of this kind;
   * empty for a plain hash field (see {@link LockScripts#RENEW}).
   */
  String renewalDetail(LockNames names, String field) {
    return "";
  }

  /** The channel a waiting thread with {@code field} listens on. */
  String waitChannel(LockNames names, String field) {
    return names.channel();
  }

  /** The longest a waiter parks between attempts, whatever the holder's lease. */
  long maxParkMillis(LockEngine engine) {
    return Long.MAX_VALUE;
  }

  /**
   * Checks before an acquisition by {@code threadId} (no I/O).
   *
   * @param waits whether the acquisition would wait when refused (false for {@code tryLock()}
   *     and a wait of zero or less)
   * @return whether to try at all: false if the acquisition cannot succeed now and does not
   *     wait, so that it fails at once as refused
   * @throws IllegalStateException if the acquisition would wait, and could only wait for the
   *     thread itself
   */
  boolean beforeAcquire(LockEngine engine, LockNames names, long threadId, boolean waits) {
    return true;
  }

  /**
   * The thread stopped waiting without the lock (timeout, interrupt, failure): undo what waiting
   * left in Redis. Best effort; must not throw. Not called after a single try.
   */
  void gaveUp(LockEngine engine, LockNames names, String field) {
  }

  /** Whether a lock of this kind is held by anyone. */
  boolean isLocked(LockEngine engine, LockNames names) {
    return engine.topology().commands().exists(names.key());
  }
}

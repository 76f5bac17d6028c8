package dev.holdfast.engine;

/**
 * What the engine tells whoever measures it: the one seam between the lock code and metrics.
 * Every method has a no-op default, and {@link #NONE} is what a client without metrics uses, so
 * the lock code calls it unconditionally. JFR events are not behind this seam: they must begin
 * where the work begins ({@link LockEvents}).
 *
 * <p>Implementations are called on the threads that do the work (callers of {@code lock()} and
 * {@code unlock()}, the renewal pool, the timer, the event thread) and must be thread-safe,
 * must not block and must not throw. {@code template} is the lock's template
 * ({@code inventory:{sku}} for {@code @Locked}, the name given to {@code getLock} otherwise),
 * never a rendered name unless it is one.
 */
interface LockObserver {

  LockObserver NONE = new LockObserver() {
  };

  /** How an acquisition call ended. */
  enum Outcome {
    ACQUIRED("acquired"),
    /** Its wait ran out, or a replica acknowledgement did not come in time. */
    TIMED_OUT("timed_out"),
    INTERRUPTED("interrupted"),
    /** Not tried because the lock was busy (reserved for {@code @Locked(skipIfBusy)}). */
    SKIPPED("skipped"),
    /** It threw: Redis failed or did not answer, the hold was lost, the client closed. */
    FAILED("failed");

    final String tag;

    Outcome(String tag) {
      this.tag = tag;
    }
  }

  /** Why a hold was lost: the category of {@link dev.holdfast.LockLost#reason()}. */
  enum LossCause {
    /** No renewal was acknowledged within the watchdog timeout (contract 8). */
    LEASE_UNCONFIRMED("lease_unconfirmed"),
    /** A fixed lease ran out before the unlock. */
    LEASE_EXPIRED("lease_expired"),
    /** A renewal, re-entry or unlock found it gone from Redis. */
    GONE("gone"),
    FORCE_UNLOCKED("force_unlocked"),
    THREAD_ENDED("thread_ended"),
    /** An uncertain re-entry could not be settled with Redis. */
    UNCERTAIN("uncertain"),
    /** Redis has a hold count for the thread that none of its calls explains. */
    COUNT_MISMATCH("count_mismatch");

    final String tag;

    LossCause(String tag) {
      this.tag = tag;
    }
  }

  /** An acquisition call ended after {@code nanos}. */
  default void acquisition(String template, Outcome outcome, long nanos) {
  }

  /**
   * A {@code @Locked(skipIfBusy = true)} call returned without running its method: the lock was
   * busy. (Its acquisition attempt was reported to {@link #acquisition} as usual.)
   */
  default void skipped(String template) {
  }

  /** A hold's final {@code unlock()} released the lock {@code nanos} after it was acquired. */
  default void released(String template, long nanos) {
  }

  /** A hold was lost. */
  default void lost(String template, LossCause cause) {
  }

  /**
   * A hold kept by the watchdog is at risk: a renewal could not be confirmed while the hold is
   * still believed ({@link dev.holdfast.LockAtRisk}); once per episode. Called on the event
   * thread.
   */
  default void atRisk(String template) {
  }

  /**
   * A hold's at-risk episode ended with a confirmed renewal ({@link dev.holdfast.LockRecovered}).
   * Called on the event thread.
   */
  default void recovered(String template) {
  }

  /** A watchdog renewal of one hold was confirmed ({@code ok}) or failed. */
  default void renewal(String template, boolean ok) {
  }

  /**
   * A Redis call failed: Redis answered with an error, or ({@code unanswered}) no attempt got an
   * answer.
   *
   * @param operation the script ({@code acquire}, {@code release}, {@code renew}...) or
   *     {@code query}
   */
  default void redisError(String operation, boolean unanswered) {
  }

  /** The client is closing: stop reporting its gauges. */
  default void close() {
  }
}

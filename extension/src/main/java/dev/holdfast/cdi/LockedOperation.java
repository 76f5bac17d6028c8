package dev.holdfast.cdi;

import dev.holdfast.DistributedLock;
import dev.holdfast.FencedLock;
import dev.holdfast.LockClient;
import dev.holdfast.LockException;
import dev.holdfast.LockNotAcquiredException;
import dev.holdfast.Locked;
import dev.holdfast.engine.EngineAccess;
import dev.holdfast.engine.LockEngine;
import dev.holdfast.LockHold;
import java.time.Duration;
import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletionException;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.TimeUnit;
import java.util.function.BiConsumer;

/**
 * Everything the interceptor needs for one {@code @Locked} method, prepared once: the parsed
 * name, the wait (null: as long as it takes), the lease (null: the watchdog), whether the hold
 * carries a fencing token, which kind of lock it is, whether a busy lock skips the call, the
 * minimum hold (null: none), what a loss does to the running call, and how the commit guard
 * checks the hold (locally, or in Redis). Immutable.
 *
 * <p>Exclusive locks are taken through the engine with the name's template, so that metrics and
 * JFR events count them by {@code inventory:{sku}}, not by each SKU.
 */
final class LockedOperation {
  private static final System.Logger LOG = System.getLogger(LockedInterceptor.class.getName());

  private final String where;
  private final LockNameTemplate name;
  private final Duration waitTime;
  private final Duration leaseTime;
  private final boolean fenced;
  private final Locked.Mode mode;
  private final boolean skipIfBusy;
  private final Duration holdAtLeast;
  private final LockedReturn returns;
  private final Locked.OnLoss onLoss;
  private final boolean verifyInRedis;
  private final String template;
  private final String spanName;

  LockedOperation(String where, LockNameTemplate name, Duration waitTime, Duration leaseTime,
      boolean fenced, Locked.Mode mode, boolean skipIfBusy, Duration holdAtLeast,
      LockedReturn returns, Locked.OnLoss onLoss, boolean verifyInRedis) {
    this.where = where;
    this.name = name;
    this.waitTime = waitTime;
    this.leaseTime = leaseTime;
    this.fenced = fenced;
    this.mode = mode;
    this.skipIfBusy = skipIfBusy;
    this.holdAtLeast = holdAtLeast;
    this.returns = returns;
    this.onLoss = onLoss;
    this.verifyInRedis = verifyInRedis;
    this.template = name.toString();
    this.spanName = "lock.wait " + template;
  }

  /** Whether the method runs with its hold's {@link dev.holdfast.FencingToken}. */
  boolean fenced() {
    return fenced;
  }

  /** When the method's work is done: when it returns, or when the result it returns completes. */
  LockedReturn returns() {
    return returns;
  }

  /** What a loss does to the running call. */
  Locked.OnLoss onLoss() {
    return onLoss;
  }

  /**
   * Whether the commit guard confirms the hold in Redis before a commit
   * ({@code verify-before-commit=redis}), rather than only locally.
   */
  boolean verifyInRedis() {
    return verifyInRedis;
  }

  /**
   * Acquires the lock for these arguments without blocking the calling thread, as the annotation
   * says (the kind of lock of its mode, fenced when the operation is fenced, the wait a span when
   * tracing is on), and reports the outcome to {@code then} on the thread that completes the
   * acquisition (a thread of the client): the hold, or {@code (null, null)} when the operation
   * skips a busy lock and the lock was busy (logged and counted here), or the failure —
   * {@link LockNotAcquiredException} when the wait elapsed.
   *
   * @return the acquisition, to cancel if the call is cancelled before it completes
   * @throws RuntimeException if the acquisition could not even start (e.g. a {@code null} argument
   *     for the name); {@code then} is not called
   */
  CompletionStage<LockHold> acquireAsync(LockClient client, LockTracing tracing, Object[] args,
      BiConsumer<LockHold, Throwable> then) {
    String lockName = name.render(args);
    LockEngine engine = EngineAccess.engine(client);
    DistributedLock lock = lock(engine, lockName);
    Object span = tracing.waitBegins(spanName, template, lockName);
    CompletionStage<LockHold> acquisition;
    try {
      acquisition = lock.acquireAsync(waitTime, leaseTime);
    } catch (RuntimeException | Error e) {
      tracing.waitEnds(span, "failed", e);
      throw e;
    }
    acquisition.whenComplete((hold, error) -> {
      Throwable failure = unwrap(error);
      if (failure == null) {
        tracing.waitEnds(span, "acquired", null);
        then.accept(hold, null);
      } else if (failure instanceof LockNotAcquiredException && skipIfBusy) {
        tracing.waitEnds(span, "skipped", null);
        engine.skipped(template);
        LOG.log(System.Logger.Level.DEBUG, () -> "Skipped " + where + ": lock '" + lockName
            + "' is held elsewhere (@Locked(skipIfBusy = true), waited " + waitTime + ")");
        then.accept(null, null);
      } else {
        tracing.waitEnds(span, failure instanceof LockNotAcquiredException ? "timed_out"
            : failure instanceof CancellationException ? "cancelled" : "failed", failure);
        then.accept(null, failure);
      }
    });
    return acquisition;
  }

  /**
   * Releases a hold {@link #acquireAsync} granted, once the work of the method that started at
   * {@code startedNanos} ({@link System#nanoTime()}) has ended: at once, or, with a minimum hold
   * not yet reached, by leaving the lock held until it is.
   *
   * @return the release; exceptionally as {@link LockHold#releaseAsync()}
   */
  CompletionStage<Void> releaseAsync(LockHold hold, long startedNanos) {
    if (holdAtLeast == null) {
      return hold.releaseAsync();
    }
    long remaining = holdAtLeast.minus(Duration.ofNanos(System.nanoTime() - startedNanos))
        .toMillis();
    // Kept in Redis until then, without renewal (as for a blocking method's holdAtLeast).
    return EngineAccess.releaseAfter(hold, remaining);
  }


  /** The cause of a {@link CompletionException} from a stage, else {@code t}. */
  static Throwable unwrap(Throwable t) {
    while (t instanceof CompletionException && t.getCause() != null) {
      t = t.getCause();
    }
    return t;
  }

  /**
   * Acquires the lock for these arguments, as the annotation says: the kind of lock of its mode,
   * fenced when the operation is fenced; the wait is a span when tracing is on.
   *
   * @return the held lock, to {@link #release} after the method; {@code null} when the operation
   *     skips a busy lock and the lock was busy (logged and counted here): the method must not run
   * @throws LockNotAcquiredException when the wait elapsed (unless the call is skipped) or the
   *     thread was interrupted
   */
  DistributedLock acquire(LockClient client, LockTracing tracing, Object[] args) {
    String lockName = name.render(args);
    LockEngine engine = EngineAccess.engine(client);
    DistributedLock lock = lock(engine, lockName);
    Object span = tracing.waitBegins(spanName, template, lockName);
    String outcome = "failed";
    Throwable failure = null;
    try {
      outcome = acquire(lock, lockName) ? "acquired" : skipIfBusy ? "skipped" : "timed_out";
    } catch (LockNotAcquiredException e) {
      outcome = "interrupted";
      failure = e;
    } catch (RuntimeException | Error e) {
      failure = e;
    } finally {
      tracing.waitEnds(span, outcome, failure);
    }
    if (failure instanceof RuntimeException e) {
      throw e;
    } else if (failure instanceof Error e) {
      throw e;
    }
    if ("skipped".equals(outcome)) {
      engine.skipped(template);
      LOG.log(System.Logger.Level.DEBUG, () -> "Skipped " + where + ": lock '" + lockName
          + "' is held elsewhere (@Locked(skipIfBusy = true), waited " + waitTime + ")");
      return null;
    }
    if (!"acquired".equals(outcome)) {
      throw new LockNotAcquiredException(lockName, waitTime, null);
    }
    return lock;
  }

  /** The handle for {@code lockName} of the operation's kind; no I/O. */
  private DistributedLock lock(LockEngine engine, String lockName) {
    return switch (mode) {
      case EXCLUSIVE -> fenced ? engine.fencedLock(lockName, template)
          : engine.lock(lockName, template);
      case READ -> engine.readWriteLock(lockName, template).readLock();
      case WRITE -> engine.readWriteLock(lockName, template).writeLock();
      case FAIR -> engine.fairLock(lockName, template);
    };
  }

  /**
   * Releases the hold {@link #acquire} returned, once the method that started at
   * {@code startedNanos} ({@link System#nanoTime()}) has returned or thrown: at once, or, with a
   * minimum hold not yet reached, by leaving the lock to expire when it is.
   *
   * @throws RuntimeException as {@link DistributedLock#unlock()} does
   */
  void release(LockClient client, DistributedLock lock, long startedNanos) {
    if (holdAtLeast == null) {
      lock.unlock();
      return;
    }
    Duration elapsed = Duration.ofNanos(System.nanoTime() - startedNanos);
    EngineAccess.engine(client).unlockAfter(lock, holdAtLeast.minus(elapsed));
  }

  /**
   * Acquires {@code lock} as the annotation says.
   *
   * @return whether it was acquired within the wait
   * @throws LockNotAcquiredException when the thread was interrupted
   */
  private boolean acquire(DistributedLock lock, String lockName) {
    try {
      if (waitTime == null) {
        if (leaseTime == null) {
          lock.lock();
        } else {
          lock.lock(leaseTime.toMillis(), TimeUnit.MILLISECONDS);
        }
        return true;
      } else if (leaseTime == null) {
        return lock.tryLock(waitTime.toMillis(), TimeUnit.MILLISECONDS);
      } else {
        return lock.tryLock(waitTime.toMillis(), leaseTime.toMillis(), TimeUnit.MILLISECONDS);
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new LockNotAcquiredException(lockName, waitTime, e);
    }
  }

  /**
   * The fencing token of the hold {@link #acquire} just returned.
   *
   * @throws LockException if the hold has no token: it was acquired but is already lost (its
   *     lease ran out before the method could start, e.g. in a pause), so the method must not run
   */
  static long token(DistributedLock held) {
    return token(((FencedLock) held).getToken(), held.getName());
  }

  /** {@link #token(DistributedLock)} for a hold acquired by {@link #acquireAsync}. */
  static long token(LockHold held) {
    return token(held.isHeld() ? held.token() : null, held.lockName());
  }

  private static long token(Long token, String lockName) {
    if (token == null) {
      throw new LockException("Lock '" + lockName + "' was lost right after it was "
          + "acquired, before the @Locked(fenced = true) method could start (its lease ran out); "
          + "the method did not run");
    }
    return token;
  }

  @Override
  public String toString() {
    return "@Locked(\"" + name + "\"" + (fenced ? ", fenced" : "")
        + (mode != Locked.Mode.EXCLUSIVE ? ", " + mode : "")
        + (skipIfBusy ? ", skipIfBusy" : "") + ") on " + where + " [wait "
        + (waitTime == null ? "unbounded" : waitTime) + ", lease "
        + (leaseTime == null ? "watchdog" : leaseTime)
        + (holdAtLeast == null ? "" : ", held at least " + holdAtLeast)
        + (onLoss == Locked.OnLoss.NOTHING ? "" : ", on loss " + onLoss)
        + (verifyInRedis ? ", verified in Redis before commit" : "")
        + (returns == LockedReturn.SYNC ? "" : ", until its " + returns + " completes") + "]";
  }
}

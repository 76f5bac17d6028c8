package dev.holdfast.example.stock;

import dev.holdfast.DistributedLock;
import dev.holdfast.FencingToken;
import dev.holdfast.LockClient;
import dev.holdfast.Locked;
import io.smallrye.mutiny.Uni;
import io.smallrye.mutiny.infrastructure.Infrastructure;
import jakarta.enterprise.context.ApplicationScoped;
import jakarta.inject.Inject;
import jakarta.transaction.Status;
import jakarta.transaction.Synchronization;
import jakarta.transaction.TransactionSynchronizationRegistry;
import jakarta.transaction.Transactional;
import org.eclipse.microprofile.config.inject.ConfigProperty;

/**
 * Reservations as a deliberate read-modify-write: read the level, work a little, write level - 1.
 * Two callers interleaving there sell the same unit twice; {@code @Locked("stock:{sku}")} lets one
 * caller per SKU in at a time, across every instance that shares the Redis.
 */
@ApplicationScoped
public class Inventory {
  private static final System.Logger LOG = System.getLogger(Inventory.class.getName());

  @Inject
  StockStore store;

  @Inject
  LockClient locks;

  @Inject
  TransactionSynchronizationRegistry transactions;

  /** Stands in for whatever a real reservation does between reading and writing. */
  @ConfigProperty(name = "stock.work-millis", defaultValue = "10")
  long workMillis;

  /** Reserves one unit if any is left; one caller per SKU at a time, on every instance. */
  @Locked("stock:{sku}")
  public Reservation reserve(String sku) {
    return reserveOne(sku);
  }

  /**
   * The same reservation as a {@code Uni} whose work runs later, on a worker thread, after this
   * method returned: {@code @Locked} takes the lock at each subscription without blocking the
   * subscriber (here the event loop), calls this method once it is held, and releases when the
   * {@code Uni} it returned has its item — so the read-modify-write runs under the lock although
   * it runs after the call.
   */
  @Locked("stock:{sku}")
  public Uni<Reservation> reserveUni(String sku) {
    return Uni.createFrom().item(() -> reserveOne(sku))
        .runSubscriptionOn(Infrastructure.getDefaultWorkerPool());
  }

  /** The same read-modify-write without the lock, to show what goes wrong. */
  public Reservation reserveUnprotected(String sku) {
    return reserveOne(sku);
  }

  /**
   * Adds units in a transaction under the reservations' lock, noting at each step whether this
   * thread holds the lock. {@code @Locked} ({@code Locked.PRIORITY}, 150) runs outside
   * {@code @Transactional} (200): the lock is taken before the transaction begins and released
   * after it completed. Redis takes no part in the transaction; it is here to show the order.
   */
  @Locked("stock:{sku}")
  @Transactional
  public Restock restock(String sku, int units) {
    DistributedLock lock = locks.getLock("stock:" + sku); // the name @Locked renders
    LockAtCompletion atCompletion = new LockAtCompletion(lock);
    transactions.registerInterposedSynchronization(atCompletion);
    boolean inTransaction = transactions.getTransactionStatus() == Status.STATUS_ACTIVE;
    int level = store.units(sku).orElse(0) + units;
    store.setUnits(sku, level);
    return new Restock(level, inTransaction, lock.getHoldCount(), atCompletion);
  }

  /**
   * Sets the level under the SKU's fenced lock, {@code holdMillis} after acquiring it (a stand-in
   * for slow work, and a window in which a test can pause this process). The lease is short and
   * fixed: a holder paused past it loses the lock to the next caller. The store takes the write
   * only with a token greater than any it has written with, so a paused holder's late write is
   * refused once the next holder has written.
   *
   * @return the token the level was written with
   * @throws StaleTokenException if the store refused the write; nothing was written
   */
  @Locked(value = "inventory:{sku}", fenced = true, leaseTime = "2s")
  public long setUnitsFenced(String sku, int units, long holdMillis) {
    long token = FencingToken.current();
    holdBeforeWriting(sku, "fencing token " + token, holdMillis);
    if (!store.setUnitsFenced(sku, units, token)) {
      throw new StaleTokenException(sku, token);
    }
    return token;
  }

  /**
   * {@link #setUnitsFenced} without the token check, to show what it prevents: the same lock and
   * lease, but the store takes every write, a paused holder's late one included.
   */
  @Locked(value = "inventory:{sku}", leaseTime = "2s")
  public void setUnitsUnfenced(String sku, int units, long holdMillis) {
    holdBeforeWriting(sku, "no fencing token", holdMillis);
    store.setUnits(sku, units);
  }

  private Reservation reserveOne(String sku) {
    long startedNanos = System.nanoTime(); // the lock, if any, is held from here
    int units = store.units(sku).orElse(0);
    if (units <= 0) {
      return new Reservation(false, startedNanos);
    }
    work();
    store.setUnits(sku, units - 1);
    return new Reservation(true, startedNanos);
  }

  private void work() {
    pause(workMillis);
  }

  /** Waits under the SKU's lock, logging first: a test watches for the line to pause us. */
  private static void holdBeforeWriting(String sku, String token, long holdMillis) {
    if (holdMillis > 0) {
      LOG.log(System.Logger.Level.INFO, "Holding lock inventory:" + sku + " (" + token + ") for "
          + holdMillis + " ms before writing");
      pause(holdMillis);
    }
  }

  private static void pause(long millis) {
    try {
      Thread.sleep(millis);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException("Interrupted while working under the lock", e);
    }
  }

  /**
   * A fenced write the store refused: a later holder of the SKU's lock has written since this
   * holder acquired it. Thrown out of the locked method, so that it reaches the caller even when
   * releasing the lost lock fails too (that failure is attached as suppressed).
   */
  public static final class StaleTokenException extends RuntimeException {
    private static final long serialVersionUID = 1L;
    private final long token;

    StaleTokenException(String sku, long token) {
      super("The stock of " + sku + " was written by a later holder of its lock: the write "
          + "with fencing token " + token + " was refused");
      this.token = token;
    }

    public long token() {
      return token;
    }
  }

  /**
   * A reservation's outcome.
   *
   * @param startedNanos {@code System.nanoTime()} at the reservation's first line, i.e. once the
   *                     lock was acquired
   */
  public record Reservation(boolean reserved, long startedNanos) {
  }

  /**
   * A restock's outcome; {@code atCompletion} is filled in when the transaction completes, which
   * is before {@link #restock} returns to its caller.
   */
  public record Restock(int units, boolean inTransaction, int lockHoldCount,
      LockAtCompletion atCompletion) {
  }

  /** Notes whether the committing thread holds the lock just before and just after completion. */
  public static final class LockAtCompletion implements Synchronization {
    private final DistributedLock lock;
    private volatile Boolean heldBefore;
    private volatile Boolean heldAfter;
    private volatile boolean committed;

    LockAtCompletion(DistributedLock lock) {
      this.lock = lock;
    }

    @Override
    public void beforeCompletion() {
      heldBefore = lock.isHeldByCurrentThread();
    }

    @Override
    public void afterCompletion(int status) {
      committed = status == Status.STATUS_COMMITTED;
      heldAfter = lock.isHeldByCurrentThread();
    }

    /** Whether the lock was held just before the commit; null if not observed. */
    public Boolean heldBeforeCompletion() {
      return heldBefore;
    }

    /** Whether the lock was still held right after the commit; null if not observed. */
    public Boolean heldAfterCompletion() {
      return heldAfter;
    }

    public boolean committed() {
      return committed;
    }
  }
}

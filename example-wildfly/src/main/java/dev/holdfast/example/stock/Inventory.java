package dev.holdfast.example.stock;

import dev.holdfast.DistributedLock;
import dev.holdfast.FencingToken;
import dev.holdfast.LockClient;
import dev.holdfast.Locked;
import jakarta.annotation.Resource;
import jakarta.enterprise.concurrent.ManagedExecutorService;
import jakarta.enterprise.context.ApplicationScoped;
import jakarta.inject.Inject;
import jakarta.transaction.Status;
import jakarta.transaction.Synchronization;
import jakarta.transaction.TransactionSynchronizationRegistry;
import jakarta.transaction.Transactional;
import java.util.OptionalInt;
import java.util.concurrent.CompletionStage;
import javax.naming.InitialContext;
import javax.naming.NamingException;
import org.eclipse.microprofile.config.inject.ConfigProperty;

/**
 * Reservations and restocking. A reservation is a deliberate read-modify-write with a few
 * milliseconds of "work" between the read and the write: without a lock, concurrent callers on
 * any instance read the same level and sell the same unit twice.
 */
@ApplicationScoped
public class Inventory {
  private static final System.Logger LOG = System.getLogger(Inventory.class.getName());

  @Inject
  StockStore store;

  @Inject
  LockClient locks;

  @Resource
  TransactionSynchronizationRegistry transactions;

  @Inject
  @ConfigProperty(name = "stock.work-millis")
  long workMillis;

  /** Reserves one unit; one caller per SKU at a time, across every instance. */
  @Locked("stock:{sku}")
  public Reservation reserve(String sku) {
    return reserveOne(sku);
  }

  /**
   * The same reservation as a {@code CompletionStage} whose work runs later, on the server's
   * managed executor: {@code @Locked} takes the lock without blocking the caller, calls this
   * method once it is held, and releases when the stage it returned completes — so the
   * read-modify-write runs under the lock although it runs after the call. The method itself
   * runs on a Holdfast thread with the caller's context, carried by the server's
   * {@code ContextService}: its {@code java:comp} lookup works as it would on the request thread.
   */
  @Locked("stock:{sku}")
  public CompletionStage<Reservation> reserveAsync(String sku) {
    ManagedExecutorService executor;
    try {
      executor = InitialContext.doLookup("java:comp/DefaultManagedExecutorService");
    } catch (NamingException e) {
      throw new IllegalStateException("java:comp is not available to this call: " + e, e);
    }
    return executor.supplyAsync(() -> reserveOne(sku));
  }

  /** The same read-modify-write without the lock, to show what goes wrong. */
  public Reservation reserveUnprotected(String sku) {
    return reserveOne(sku);
  }

  private Reservation reserveOne(String sku) {
    long startedNanos = System.nanoTime();
    int units = store.units(sku).orElse(0);
    if (units <= 0) {
      return new Reservation(false, startedNanos);
    }
    work();
    store.setUnits(sku, units - 1);
    return new Reservation(true, startedNanos);
  }

  /**
   * Adds units inside a transaction, under the same lock as {@link #reserve}, and records
   * whether this thread held the lock at each step of the transaction. {@code @Locked} runs
   * outside {@code @Transactional} (priority 150 before 200): the lock is taken before the
   * transaction begins and released after it completed, so the lock is held throughout. (Redis
   * takes no part in the transaction: it is here to show the ordering.)
   */
  @Locked("stock:{sku}")
  @Transactional
  public Restock restock(String sku, int units) {
    DistributedLock lock = locks.getLock("stock:" + sku); // the name @Locked renders
    LockAtCompletion atCompletion = new LockAtCompletion(lock);
    transactions.registerInterposedSynchronization(atCompletion);
    boolean inTransaction = transactions.getTransactionStatus() == Status.STATUS_ACTIVE;
    int holdCount = lock.getHoldCount();
    int level = store.units(sku).orElse(0) + units;
    store.setUnits(sku, level);
    return new Restock(level, inTransaction, holdCount, atCompletion);
  }

  /**
   * Sets the level under the SKU's fenced lock, {@code holdMillis} after acquiring it (a stand-in
   * for slow work, and a window in which a test can pause this server). The lease is short and
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
   * The outcome of a reservation.
   *
   * @param startedNanos {@link System#nanoTime()} when the reservation's own work began, i.e.
   *                     after the lock was acquired
   */
  public record Reservation(boolean reserved, long startedNanos) {
  }

  /**
   * The outcome of a restock; {@code atCompletion} is filled in when the transaction completes,
   * which is before {@link #restock} returns to its caller.
   */
  public record Restock(int units, boolean inTransaction, int lockHoldCount,
      LockAtCompletion atCompletion) {
  }

  /** Records whether the calling thread holds a lock when its transaction completes. */
  public static final class LockAtCompletion implements Synchronization {
    private final DistributedLock lock;
    private volatile Boolean heldBeforeCompletion;
    private volatile Boolean heldAfterCompletion;
    private volatile boolean committed;

    LockAtCompletion(DistributedLock lock) {
      this.lock = lock;
    }

    @Override
    public void beforeCompletion() {
      heldBeforeCompletion = lock.isHeldByCurrentThread();
    }

    @Override
    public void afterCompletion(int status) {
      committed = status == Status.STATUS_COMMITTED;
      heldAfterCompletion = lock.isHeldByCurrentThread();
    }

    /** Whether the lock was held just before the commit; null if that was not observed. */
    public Boolean heldBeforeCompletion() {
      return heldBeforeCompletion;
    }

    /** Whether the lock was still held after the commit; null if that was not observed. */
    public Boolean heldAfterCompletion() {
      return heldAfterCompletion;
    }

    public boolean committed() {
      return committed;
    }
  }
}

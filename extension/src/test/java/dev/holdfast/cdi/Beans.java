package dev.holdfast.cdi;

import dev.holdfast.DistributedLock;
import dev.holdfast.FencedLock;
import dev.holdfast.FencingToken;
import dev.holdfast.LockClient;
import dev.holdfast.LockLost;
import dev.holdfast.Locked;
import dev.holdfast.testing.ExclusionProbe;
import jakarta.enterprise.context.ApplicationScoped;
import jakarta.enterprise.event.Observes;
import jakarta.enterprise.event.ObservesAsync;
import jakarta.inject.Inject;
import jakarta.inject.Named;
import jakarta.inject.Singleton;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.Lock;

/** The beans the CDI tests deploy, as an application would write them. */
final class Beans {
  private Beans() {
  }

  /** A read-modify-write on shared state that loses updates unless calls are exclusive. */
  @ApplicationScoped
  public static class Inventory {
    static final AtomicInteger STOCK = new AtomicInteger();
    static final ExclusionProbe PROBE = new ExclusionProbe();

    @Inject
    LockClient client;

    @Locked("inventory:{sku}")
    public boolean reserve(String sku, int qty) {
      PROBE.enter();
      try {
        int left = STOCK.get();
        Thread.yield();
        if (left < qty) {
          return false;
        }
        STOCK.set(left - qty);
        return true;
      } finally {
        PROBE.exit();
      }
    }

    @Locked("stock:{0}:{{tag}}")
    public boolean heldDuring(String sku) {
      // Exactly one hold: the interceptor is registered once, not once per discovery path.
      return client.getLock("stock:" + sku + ":{tag}").getHoldCount() == 1;
    }
  }

  @ApplicationScoped
  public static class Reports {
    private final CountDownLatch entered = new CountDownLatch(1);
    private final CountDownLatch release = new CountDownLatch(1);

    public CountDownLatch entered() {
      return entered;
    }

    public CountDownLatch release() {
      return release;
    }

    @Inject
    Reports self;

    @Locked(value = "nightly-report", waitTime = "0s")
    public void report() throws InterruptedException {
      entered.countDown();
      release.await(20, TimeUnit.SECONDS);
    }

    @Locked(value = "quick-report", waitTime = "200ms", leaseTime = "10s")
    public long quick(LockClient client) {
      return client.getLock("quick-report").remainTimeToLive();
    }

    @Locked("outer")
    public int outer() {
      return self.inner();
    }

    @Locked("outer")
    public int inner() {
      return 42;
    }

    @Locked("failing")
    public void fail() {
      throw new IllegalStateException("the method's own failure");
    }

    @Locked("sabotaged")
    public void failAfterLosingTheLock(LockClient client) {
      client.getLock("sabotaged").forceUnlock();
      throw new IllegalStateException("the method's own failure");
    }

    @Locked("sabotaged-ok")
    public void succeedAfterLosingTheLock(LockClient client) {
      client.getLock("sabotaged-ok").forceUnlock();
    }

    @Locked("user:{id}")
    public void forUser(String id) {
    }
  }

  /** Every business method runs under the lock named after it. */
  @Locked
  @ApplicationScoped
  public static class Ledger {
    @Inject
    LockClient client;

    public boolean post() {
      return client.getLock(Ledger.class.getName() + ".post").isHeldByCurrentThread();
    }

    @Locked(value = "ledger-close")
    public boolean close() {
      return client.getLock("ledger-close").isHeldByCurrentThread()
          && !client.getLock(Ledger.class.getName() + ".close").isLocked();
    }
  }

  @ApplicationScoped
  public static class Payments {
    @Locked("payment:{0}")
    @TestTransactional
    public void pay(String lockName) {
      TestTransactionInterceptor.EVENTS.add("work");
    }
  }

  /** Injects named locks in every way CDI allows (not proxied, so tests read its fields). */
  @Singleton
  public static class LockUser {
    @Inject
    @Named("payouts")
    DistributedLock payouts;

    @Inject
    @Named("payouts")
    Lock samePayouts;

    @Inject
    @Named
    DistributedLock reportLock;

    @Inject
    LockClient client;

    final DistributedLock fromConstructor;
    Lock fromInitializer;

    @Inject
    LockUser(@Named("ctor-lock") DistributedLock lock) {
      this.fromConstructor = lock;
    }

    @Inject
    void init(@Named("init-lock") Lock lock) {
      this.fromInitializer = lock;
    }
  }

  /** {@code @Locked(fenced = true)} methods reading their token, as a fenced resource's caller. */
  @ApplicationScoped
  public static class Fences {
    static final AtomicBoolean RAN = new AtomicBoolean();

    @Inject
    Fences self;

    @Inject
    LockClient client;

    @Locked(value = "fence:{sku}", fenced = true)
    public long token(String sku) {
      return FencingToken.current();
    }

    /** The token seen by the handle, inside the method. */
    @Locked(value = "fence:{sku}", fenced = true)
    public Long handleToken(String sku) {
      return client.getFencedLock("fence:" + sku).getToken();
    }

    /** {outer's token, inner's token (another lock), outer's token after the inner returned}. */
    @Locked(value = "fence:outer", fenced = true)
    public long[] nestedOnAnotherLock() {
      long outer = FencingToken.current();
      long inner = self.token("inner");
      return new long[] {outer, inner, FencingToken.current()};
    }

    /** {outer's token, the re-entered same lock's token}. */
    @Locked(value = "fence:{sku}", fenced = true)
    public long[] reenteringTheSameLock(String sku) {
      return new long[] {FencingToken.current(), self.token(sku)};
    }

    /** Calls a fenced method from a plain locked one: only the fenced one has a token. */
    @Locked("plain-outer")
    public long fencedInsidePlain() {
      return self.token("inside-plain");
    }

    @Locked("plain")
    public long plain() {
      return FencingToken.current();
    }

    /** A lease too short to still be believed when the method would start. */
    @Locked(value = "fence:instant", fenced = true, leaseTime = "1ms")
    public void lostBeforeItStarts() {
      RAN.set(true);
    }
  }

  /** Injects fenced named locks in every way CDI allows (not proxied: tests read its fields). */
  @Singleton
  public static class FencedLockUser {
    @Inject
    @Named("ledger")
    FencedLock ledger;

    /** The plain lock of the same name: another bean, the same lock in Redis. */
    @Inject
    @Named("ledger")
    DistributedLock plainLedger;

    @Inject
    @Named
    FencedLock auditLock;

    final FencedLock fromConstructor;
    FencedLock fromInitializer;

    @Inject
    FencedLockUser(@Named("ctor-fence") FencedLock lock) {
      this.fromConstructor = lock;
    }

    @Inject
    void init(@Named("init-fence") FencedLock lock) {
      this.fromInitializer = lock;
    }
  }

  @Singleton
  public static class Fragile {
    final CountDownLatch lost = new CountDownLatch(1);

    @Locked("fragile")
    public void workWhileLockIsLost(Runnable deleteKey) throws InterruptedException {
      deleteKey.run();
      if (!lost.await(10, TimeUnit.SECONDS)) {
        throw new AssertionError("no LockLost event within 10 s");
      }
    }
  }

  @ApplicationScoped
  public static class LostLocks {
    static final List<LockLost> SYNC = new CopyOnWriteArrayList<>();
    static final List<LockLost> ASYNC = new CopyOnWriteArrayList<>();

    @Inject
    Fragile fragile;

    void onLost(@Observes LockLost lost) {
      SYNC.add(lost);
      fragile.lost.countDown();
    }

    void onLostAsync(@ObservesAsync LockLost lost) {
      ASYNC.add(lost);
    }
  }
}

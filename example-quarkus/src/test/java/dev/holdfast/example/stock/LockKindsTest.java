package dev.holdfast.example.stock;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.holdfast.DistributedLock;
import dev.holdfast.DistributedReadWriteLock;
import dev.holdfast.Fair;
import dev.holdfast.LockNotAcquiredException;
import io.quarkus.test.common.WithTestResource;
import io.quarkus.test.junit.QuarkusTest;
import jakarta.inject.Inject;
import jakarta.inject.Named;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * The lock kinds under Quarkus ArC (the build-compatible extension): read-write and fair locks
 * injected by name, and {@code @Locked(mode = …)}.
 */
@QuarkusTest
@WithTestResource(RedisTestResource.class)
class LockKindsTest {

  @Inject
  @Named("prices")
  DistributedReadWriteLock prices;

  @Inject
  @Named("payouts")
  @Fair
  DistributedLock fairPayouts;

  @Inject
  @Named("payouts")
  DistributedLock plainPayouts;

  @Inject
  CatalogLocks catalog;

  private final ExecutorService threads = Executors.newCachedThreadPool();

  @AfterEach
  void stopThreads() {
    threads.shutdownNow();
  }

  @Test
  void namedLocksOfEachKind_areInjected() {
    assertEquals("prices", prices.getName());
    assertEquals("FairLock[payouts]", fairPayouts.toString());
    assertEquals("DistributedLock[payouts]", plainPayouts.toString());
    prices.readLock().lock();
    try {
      assertTrue(prices.readLock().isHeldByCurrentThread());
      assertThrows(IllegalStateException.class, () -> prices.writeLock().lock(),
          "no upgrade from read to write");
    } finally {
      prices.readLock().unlock();
    }
    fairPayouts.lock();
    fairPayouts.unlock();
    assertFalse(fairPayouts.isLocked());
  }

  @Test
  void readMethods_runTogether_andAWriteMethodCannotRunMeanwhile() throws Exception {
    CountDownLatch entered = new CountDownLatch(2);
    CountDownLatch leave = new CountDownLatch(1);
    Future<?> first = threads.submit(() -> {
      catalog.read(entered, leave);
      return null;
    });
    Future<?> second = threads.submit(() -> {
      catalog.read(entered, leave);
      return null;
    });
    assertTrue(entered.await(10, TimeUnit.SECONDS), "both readers are inside at once");
    assertThrows(LockNotAcquiredException.class, catalog::write, "a writer waits for readers");
    leave.countDown();
    first.get(10, TimeUnit.SECONDS);
    second.get(10, TimeUnit.SECONDS);
    assertEquals(2, catalog.mostInside());
    catalog.write();
    assertEquals("ran", catalog.fair());
  }
}

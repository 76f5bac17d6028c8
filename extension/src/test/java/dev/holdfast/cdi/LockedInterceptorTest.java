package dev.holdfast.cdi;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.holdfast.LockClient;
import dev.holdfast.LockNotAcquiredException;
import dev.holdfast.Locked;
import dev.holdfast.testing.Await;
import dev.holdfast.testing.RedisExtension;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.jboss.weld.environment.se.Weld;
import org.jboss.weld.environment.se.WeldContainer;
import org.jboss.weld.junit5.EnableWeld;
import org.jboss.weld.junit5.WeldInitiator;
import org.jboss.weld.junit5.WeldSetup;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;
import redis.clients.jedis.Jedis;

/** {@code @Locked}, named locks and the client, in a real Weld container against real Redis. */
@EnableWeld
class LockedInterceptorTest {

  @RegisterExtension
  static final RedisExtension redis = RedisExtension.standalone();

  private static TestConfig config;

  static Weld weld() {
    return WeldInitiator.createWeld()
        .addExtension(new HoldfastExtension())
        .addBeanClasses(Beans.Inventory.class, Beans.Reports.class, Beans.Ledger.class,
            Beans.Payments.class, Beans.LockUser.class, Beans.Fragile.class,
            Beans.LostLocks.class, TestTransactionInterceptor.class);
  }

  @WeldSetup
  WeldInitiator weld = WeldInitiator.from(weld()).build();

  private final ExecutorService threads = Executors.newCachedThreadPool();

  @BeforeAll
  static void configure() {
    config = TestConfig.of(Map.of("holdfast.redis.address", redis.server().uri(),
        "holdfast.watchdog-timeout", "900ms"));
  }

  @AfterAll
  static void unconfigure() {
    config.close();
  }

  @BeforeEach
  void clean() {
    redis.flushAll();
  }

  @AfterEach
  void stopThreads() {
    threads.shutdownNow();
  }

  private <T> T bean(Class<T> type) {
    return weld.select(type).get();
  }

  @Test
  void lockedMethod_excludesCallsAcrossTwoContainers() throws Exception {
    Beans.Inventory.STOCK.set(40);
    Beans.Inventory.PROBE.reset();
    try (WeldContainer second = weld().containerId("second-instance").initialize()) {
      Beans.Inventory here = bean(Beans.Inventory.class);
      Beans.Inventory there = second.select(Beans.Inventory.class).get();
      assertFalse(bean(LockClient.class).getClientId()
          .equals(second.select(LockClient.class).get().getClientId()), "two clients");
      CountDownLatch start = new CountDownLatch(1);
      List<Future<Integer>> callers = new ArrayList<>();
      for (int i = 0; i < 8; i++) {
        Beans.Inventory target = i % 2 == 0 ? here : there;
        callers.add(threads.submit(() -> {
          start.await();
          int reserved = 0;
          for (int r = 0; r < 10; r++) {
            reserved += target.reserve("sku-1", 1) ? 1 : 0;
          }
          return reserved;
        }));
      }
      start.countDown();
      int reserved = 0;
      for (Future<Integer> f : callers) {
        reserved += f.get(60, TimeUnit.SECONDS);
      }
      assertEquals(40, reserved, "exactly the stock was reserved");
      assertEquals(0, Beans.Inventory.STOCK.get());
      assertEquals(0, Beans.Inventory.PROBE.overlaps(), "never two callers inside");
    }
  }

  @Test
  void template_resolvesParametersIndexesAndLiteralBraces() {
    assertTrue(bean(Beans.Inventory.class).heldDuring("A-1"));
    assertFalse(bean(LockClient.class).getLock("stock:A-1:{tag}").isLocked(), "released after");
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
        () -> bean(Beans.Reports.class).forUser(null));
    assertTrue(e.getMessage().contains("{id} is null"), e.getMessage());
  }

  @Test
  void reentrantCall_onTheSameLock_doesNotDeadlock() {
    assertEquals(42, bean(Beans.Reports.class).outer());
    assertFalse(bean(LockClient.class).getLock("outer").isLocked());
  }

  @Test
  void waitElapsing_throwsLockNotAcquired_namingLockAndWait() throws Exception {
    Beans.Reports reports = bean(Beans.Reports.class);
    Future<?> running = threads.submit(() -> {
      reports.report();
      return null;
    });
    assertTrue(reports.entered().await(10, TimeUnit.SECONDS));
    LockNotAcquiredException e =
        assertThrows(LockNotAcquiredException.class, reports::report);
    assertEquals("nightly-report", e.lockName());
    assertEquals(Duration.ZERO, e.waitTime());
    assertTrue(e.getMessage().contains("'nightly-report'") && e.getMessage().contains("0ms"),
        e.getMessage());
    reports.release().countDown();
    running.get(10, TimeUnit.SECONDS);
  }

  @Test
  void leaseTime_isAppliedWithoutWatchdog() {
    long ttl = bean(Beans.Reports.class).quick(bean(LockClient.class));
    assertTrue(ttl > 9_000 && ttl <= 10_000, "lease of 10s, was " + ttl);
  }

  @Test
  void methodException_releasesTheLock_andPropagates() {
    IllegalStateException e =
        assertThrows(IllegalStateException.class, () -> bean(Beans.Reports.class).fail());
    assertEquals("the method's own failure", e.getMessage());
    assertFalse(bean(LockClient.class).getLock("failing").isLocked());
  }

  @Test
  void failingUnlock_doesNotHideTheMethodsException() {
    LockClient client = bean(LockClient.class);
    IllegalStateException e = assertThrows(IllegalStateException.class,
        () -> bean(Beans.Reports.class).failAfterLosingTheLock(client));
    assertEquals("the method's own failure", e.getMessage());
    assertEquals(1, e.getSuppressed().length);
    assertTrue(e.getSuppressed()[0] instanceof IllegalMonitorStateException);
  }

  @Test
  void failingUnlock_afterSuccess_isReported() {
    LockClient client = bean(LockClient.class);
    assertThrows(IllegalMonitorStateException.class,
        () -> bean(Beans.Reports.class).succeedAfterLosingTheLock(client));
  }

  @Test
  void classLevelAnnotation_locksEveryBusinessMethod_methodAnnotationWins() {
    Beans.Ledger ledger = bean(Beans.Ledger.class);
    assertTrue(ledger.post(), "locked under <class>.<method>");
    assertTrue(ledger.close(), "the method's own @Locked replaces the class's");
  }

  @Test
  void lockWrapsTheTransaction() {
    TestTransactionInterceptor.EVENTS.clear();
    bean(Beans.Payments.class).pay("p-1");
    assertEquals(List.of("begin, locked=true", "work", "commit, locked=true"),
        TestTransactionInterceptor.EVENTS);
    assertFalse(bean(LockClient.class).getLock("payment:p-1").isLocked(), "released after commit");
    assertEquals(jakarta.interceptor.Interceptor.Priority.PLATFORM_BEFORE + 150, Locked.PRIORITY);
  }

  @Test
  void namedLocks_areInjectedAsBothTypes_inEveryKindOfInjectionPoint() {
    Beans.LockUser user = bean(Beans.LockUser.class);
    assertEquals("payouts", user.payouts.getName());
    user.samePayouts.lock();
    try {
      assertTrue(user.payouts.isHeldByCurrentThread(), "same lock through both types");
    } finally {
      user.samePayouts.unlock();
    }
    assertEquals("reportLock", user.reportLock.getName(), "@Named on a field means its name");
    assertEquals("ctor-lock", user.fromConstructor.getName());
    assertNotNull(user.fromInitializer);
    assertTrue(user.fromInitializer.tryLock());
    user.fromInitializer.unlock();
    assertSame(bean(LockClient.class), user.client, "one client per application");
  }

  @Test
  void lostLock_firesCdiEvents_andTheCallerLearnsOfIt() {
    Beans.LostLocks.SYNC.clear();
    Beans.LostLocks.ASYNC.clear();
    bean(Beans.LostLocks.class); // instantiate the observer's dependencies
    Runnable deleteKey = () -> {
      try (Jedis jedis = redis.server().admin()) {
        jedis.del("fragile");
      }
    };
    IllegalMonitorStateException e = assertThrows(IllegalMonitorStateException.class,
        () -> bean(Beans.Fragile.class).workWhileLockIsLost(deleteKey));
    assertTrue(e.getMessage().contains("was lost"), e.getMessage());
    assertEquals("fragile", Beans.LostLocks.SYNC.get(0).lockName());
    Await.until(Duration.ofSeconds(5), () -> !Beans.LostLocks.ASYNC.isEmpty(), "async event");
  }

  @Test
  void shutdown_closesTheClient() {
    LockClient client;
    try (WeldContainer other = weld().containerId("short-lived").initialize()) {
      client = other.select(LockClient.class).get();
      client.getLock("x").tryLock();
    }
    LockClient closed = client;
    assertThrows(IllegalStateException.class, () -> closed.getLock("x").tryLock());
  }
}

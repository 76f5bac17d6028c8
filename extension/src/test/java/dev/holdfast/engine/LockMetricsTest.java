package dev.holdfast.engine;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.holdfast.DistributedLock;
import dev.holdfast.LockClient;
import dev.holdfast.LockClientConfig;
import dev.holdfast.LockException;
import dev.holdfast.testing.Await;
import dev.holdfast.testing.RedisExtension;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.Timer;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.time.Duration;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;
import redis.clients.jedis.Jedis;

/** The Micrometer meters of a client given a registry, against a real redis-server. */
class LockMetricsTest {

  @RegisterExtension
  static final RedisExtension redis = RedisExtension.standalone();

  @RegisterExtension
  final Clients clients = new Clients();

  private final ExecutorService threads = Executors.newCachedThreadPool();
  private SimpleMeterRegistry registry;
  private LockClient client;

  @BeforeEach
  void setUp() {
    redis.flushAll();
    registry = new SimpleMeterRegistry();
    client = clients.create(config().build());
  }

  private LockClientConfig.Builder config() {
    return LockClientConfig.builder().address(redis.server().uri())
        .watchdogTimeout(Duration.ofMillis(600)).meterRegistry(registry);
  }

  @AfterEach
  void stopThreads() {
    threads.shutdownNow();
  }

  @Test
  void lockAndUnlock_countAnAcquisitionAndTimeTheHold() throws Exception {
    DistributedLock lock = client.getLock("orders");
    lock.lock();
    assertEquals(1, gauge("holdfast.lock.active"));
    Thread.sleep(50);
    lock.unlock();

    assertEquals(1, waits("orders", "acquired").count());
    Timer held = registry.get("holdfast.lock.held").tag("template", "orders").timer();
    assertEquals(1, held.count());
    assertTrue(held.totalTime(TimeUnit.MILLISECONDS) >= 50, () -> "held " + held);
    assertEquals(0, gauge("holdfast.lock.active"));
  }

  @Test
  void waits_areTimedByOutcome_andWaitingThreadsAreCounted() throws Exception {
    LockEngine engine = Clients.engine(client);
    DistributedLock lock = engine.lock("stock:1", "stock:{sku}");
    lock.lock();
    CountDownLatch interruptNow = new CountDownLatch(1);
    Future<Boolean> timedOut = threads.submit(() ->
        engine.lock("stock:1", "stock:{sku}").tryLock(200, TimeUnit.MILLISECONDS));
    Future<?> interrupted = threads.submit(() -> {
      interruptNow.countDown();
      engine.lock("stock:1", "stock:{sku}").lockInterruptibly();
      return null;
    });
    interruptNow.await();
    Await.until(Duration.ofSeconds(5), () -> gauge("holdfast.lock.waiting") == 2,
        "two threads wait");
    assertFalse(timedOut.get(10, TimeUnit.SECONDS));
    interrupted.cancel(true);
    Await.until(Duration.ofSeconds(5), () -> gauge("holdfast.lock.waiting") == 0,
        "nobody waits");
    Future<Boolean> acquired = threads.submit(() -> {
      DistributedLock mine = engine.lock("stock:1", "stock:{sku}");
      mine.lock();
      mine.unlock();
      return true;
    });
    Await.until(Duration.ofSeconds(5), () -> gauge("holdfast.lock.waiting") == 1, "one waits");
    Thread.sleep(100);
    lock.unlock();
    assertTrue(acquired.get(10, TimeUnit.SECONDS));

    assertEquals(1, waits("stock:{sku}", "timed_out").count());
    assertTrue(waits("stock:{sku}", "timed_out").totalTime(TimeUnit.MILLISECONDS) >= 200);
    Await.until(Duration.ofSeconds(5),
        () -> registry.find("holdfast.lock.wait").tag("outcome", "interrupted").timer() != null,
        "the interrupted wait is counted");
    assertEquals(1, waits("stock:{sku}", "interrupted").count());
    assertEquals(2, waits("stock:{sku}", "acquired").count());
    assertTrue(waits("stock:{sku}", "acquired").max(TimeUnit.MILLISECONDS) >= 100);
    assertNull(registry.find("holdfast.lock.wait").tag("template", "stock:1").timer(),
        "no meter by rendered name");
    assertNull(registry.find("holdfast.lock.held").tag("template", "stock:1").timer());
  }

  @Test
  void renewalsAndLosses_areCountedByTemplateAndReason() throws Exception {
    DistributedLock lock = client.getLock("report");
    lock.lock();
    Await.until(Duration.ofSeconds(5), () -> counter("holdfast.lock.renewals", "report",
        "result", "ok") >= 2, "the watchdog renews");

    CountDownLatch lost = new CountDownLatch(1);
    client.onLockLost(l -> lost.countDown());
    try (Jedis admin = redis.server().admin()) {
      admin.del("report");
    }
    assertTrue(lost.await(5, TimeUnit.SECONDS));
    assertEquals(1, counter("holdfast.lock.renewals", "report", "result", "failed"));
    assertEquals(1, counter("holdfast.lock.lost", "report", "reason", "gone"));
    assertNull(registry.find("holdfast.lock.at.risk").counter(), "found gone: no risk, a loss");
    assertThrows(IllegalMonitorStateException.class, lock::unlock);

    lock.lock();
    assertTrue(client.getLock("report").forceUnlock());
    assertEquals(1, counter("holdfast.lock.lost", "report", "reason", "force_unlocked"));
    assertThrows(IllegalMonitorStateException.class, lock::unlock);
  }

  @Test
  void atRiskAndRecovered_areCountedByTemplate() throws Exception {
    try (dev.holdfast.testing.FaultProxy proxy =
        new dev.holdfast.testing.FaultProxy(redis.server().port())) {
      LockClient proxied = clients.create(config().address(proxy.uri())
          .watchdogTimeout(Duration.ofSeconds(6)).timeout(Duration.ofMillis(500)).build());
      CountDownLatch recovered = new CountDownLatch(1);
      proxied.onLockRecovered(r -> recovered.countDown());
      DistributedLock lock = Clients.engine(proxied).lock("stock:7", "stock:{sku}");
      lock.lock();
      proxy.blackHole(true);
      try {
        Await.until(Duration.ofSeconds(10), () -> counter("holdfast.lock.at.risk",
            "stock:{sku}") == 1, "the hold at risk is counted");
      } finally {
        proxy.blackHole(false);
      }
      assertTrue(recovered.await(10, TimeUnit.SECONDS), "recovered within the lease");
      assertEquals(1, counter("holdfast.lock.recovered", "stock:{sku}"));
      assertEquals(1, counter("holdfast.lock.at.risk", "stock:{sku}"));
      assertNull(registry.find("holdfast.lock.at.risk").tag("template", "stock:7").counter(),
          "no meter by rendered name");
      lock.unlock();
    }
  }

  @Test
  void templates_areCappedThenCountedAsOther() {
    for (int i = 0; i < MicrometerObserver.MAX_TEMPLATES + 20; i++) {
      DistributedLock lock = client.getLock("job-" + i);
      lock.lock();
      lock.unlock();
    }
    long templates = registry.find("holdfast.lock.held").timers().stream()
        .map(t -> t.getId().getTag("template")).distinct().count();
    assertEquals(MicrometerObserver.MAX_TEMPLATES + 1, templates);
    assertEquals(20, registry.get("holdfast.lock.held").tag("template", "_other_").timer()
        .count());
  }

  @Test
  void redisErrors_areCountedByOperation() {
    try (LockClient unreachable = clients.create(LockClientConfig.builder()
        .address("redis://127.0.0.1:" + dev.holdfast.testing.LoopbackPorts.reserve())
        .timeout(Duration.ofMillis(200)).connectAtStartup(false).meterRegistry(registry)
        .build())) {
      assertThrows(LockException.class, () -> unreachable.getLock("x").tryLock());
    }
    assertEquals(1, registry.get("holdfast.redis.errors").tag("operation", "acquire")
        .tag("kind", "unanswered").counter().count());
    assertEquals(1, waits("x", "failed").count());
  }

  @Test
  void clientsSharingARegistry_addUpTheirGauges_andCloseLeavesNoGauge() {
    LockClient other = clients.create(config().build());
    DistributedLock a = client.getLock("a");
    DistributedLock b = other.getLock("b");
    a.lock();
    b.lock();
    assertEquals(2, gauge("holdfast.lock.active"));
    b.unlock();
    a.unlock();
    other.close();
    client.close();
    assertNull(registry.find("holdfast.lock.active").gauge());

    LockClient again = clients.create(config().build());
    DistributedLock c = again.getLock("c");
    c.lock();
    assertEquals(1, gauge("holdfast.lock.active"), "a new client's gauge counts its holds");
    c.unlock();
  }

  @Test
  void meterRegistry_mustBeAMeterRegistry() {
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
        () -> LockClientConfig.builder().meterRegistry("registry"));
    assertTrue(e.getMessage().contains("io.micrometer.core.instrument.MeterRegistry"),
        e.getMessage());
  }

  private Timer waits(String template, String outcome) {
    return registry.get("holdfast.lock.wait").tag("template", template).tag("outcome", outcome)
        .timer();
  }

  private double counter(String name, String template) {
    Counter c = registry.find(name).tag("template", template).counter();
    return c == null ? 0 : c.count();
  }

  private double counter(String name, String template, String tag, String value) {
    Counter c = registry.find(name).tag("template", template).tag(tag, value).counter();
    return c == null ? 0 : c.count();
  }

  private double gauge(String name) {
    var gauge = registry.find(name).gauge();
    assertNotNull(gauge, name);
    return gauge.value();
  }
}

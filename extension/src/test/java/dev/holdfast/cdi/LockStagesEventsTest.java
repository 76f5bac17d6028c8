package dev.holdfast.cdi;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.holdfast.DistributedLock;
import dev.holdfast.LockAtRisk;
import dev.holdfast.LockClient;
import dev.holdfast.LockLost;
import dev.holdfast.LockRecovered;
import dev.holdfast.testing.Await;
import dev.holdfast.testing.FaultProxy;
import dev.holdfast.testing.RedisExtension;
import jakarta.enterprise.context.ApplicationScoped;
import jakarta.enterprise.event.Observes;
import jakarta.enterprise.event.ObservesAsync;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import org.jboss.weld.junit5.EnableWeld;
import org.jboss.weld.junit5.WeldInitiator;
import org.jboss.weld.junit5.WeldSetup;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * Issue 17, part 3, in a real Weld container: the client's {@link LockAtRisk} and
 * {@link LockRecovered} reports are CDI events, synchronous and asynchronous, like
 * {@link LockLost}; Redis is made unreachable for the application's client through a
 * {@link FaultProxy}.
 */
@EnableWeld
class LockStagesEventsTest {

  @RegisterExtension
  static final RedisExtension redis = RedisExtension.standalone();

  private static FaultProxy proxy;
  private static TestConfig config;

  @WeldSetup
  WeldInitiator weld = WeldInitiator.from(WeldInitiator.createWeld()
      .addExtension(new HoldfastExtension())
      .addBeanClasses(Stages.class)).build();

  @BeforeAll
  static void configure() throws Exception {
    proxy = new FaultProxy(redis.server().port());
    config = TestConfig.of(Map.of("holdfast.redis.address", proxy.uri(),
        "holdfast.watchdog-timeout", "6s", "holdfast.redis.timeout", "500ms"));
  }

  @AfterAll
  static void unconfigure() {
    config.close();
    proxy.close();
  }

  @BeforeEach
  void clean() {
    redis.flushAll();
    Stages.SYNC.clear();
    Stages.ASYNC.clear();
  }

  /** Observes every stage, in the order the events came. */
  @ApplicationScoped
  public static class Stages {
    static final List<Object> SYNC = new CopyOnWriteArrayList<>();
    static final List<Object> ASYNC = new CopyOnWriteArrayList<>();

    void atRisk(@Observes LockAtRisk event) {
      SYNC.add(event);
    }

    void recovered(@Observes LockRecovered event) {
      SYNC.add(event);
    }

    void lost(@Observes LockLost event) {
      SYNC.add(event);
    }

    void atRiskAsync(@ObservesAsync LockAtRisk event) {
      ASYNC.add(event);
    }

    void recoveredAsync(@ObservesAsync LockRecovered event) {
      ASYNC.add(event);
    }
  }

  @Test
  void briefOutage_firesAtRiskThenRecovered_syncAndAsync() {
    weld.select(Stages.class).get().toString(); // the observer exists before the events
    DistributedLock lock = weld.select(LockClient.class).get().getLock("shaky");
    lock.lock();
    proxy.blackHole(true);
    try {
      Await.until(Duration.ofSeconds(10), () -> !Stages.SYNC.isEmpty(), "LockAtRisk observed");
    } finally {
      proxy.blackHole(false);
    }
    Await.until(Duration.ofSeconds(10), () -> Stages.SYNC.size() >= 2,
        "LockRecovered observed; so far " + Stages.SYNC);
    lock.unlock();
    assertEquals(List.of(LockAtRisk.class, LockRecovered.class),
        Stages.SYNC.stream().map(Object::getClass).toList(), Stages.SYNC::toString);
    LockAtRisk risk = (LockAtRisk) Stages.SYNC.get(0);
    assertEquals("shaky", risk.lockName());
    assertEquals(Thread.currentThread().getId(), risk.threadId());
    assertTrue(risk.timeLeft().toMillis() > 0, risk::toString);
    assertEquals("shaky", ((LockRecovered) Stages.SYNC.get(1)).lockName());
    Await.until(Duration.ofSeconds(5), () -> Stages.ASYNC.size() == 2,
        "both observed asynchronously too; so far " + Stages.ASYNC);
  }
}

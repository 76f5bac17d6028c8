package dev.holdfast.engine;

import static org.junit.jupiter.api.Assertions.assertDoesNotThrow;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.holdfast.DistributedLock;
import dev.holdfast.LockAtRisk;
import dev.holdfast.LockClient;
import dev.holdfast.LockClientConfig;
import dev.holdfast.LockHold;
import dev.holdfast.LockLost;
import dev.holdfast.LockRecovered;
import dev.holdfast.testing.Await;
import dev.holdfast.testing.FaultProxy;
import dev.holdfast.testing.RedisExtension;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.function.Function;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Issue 17, part 3: the two stages of a loss. A watchdog hold whose renewal cannot be confirmed
 * is reported {@link LockAtRisk} once, then either {@link LockRecovered} (a renewal got through
 * before its deadline) or {@link LockLost}, never both; a hold found gone, or one with a fixed
 * lease, is never at risk. Redis is made unreachable for the client under test only, through a
 * {@link FaultProxy} black hole (or by pausing the server).
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
class LockAtRiskTest {

  @RegisterExtension
  static final RedisExtension redis = RedisExtension.standalone();

  @RegisterExtension
  final Clients clients = new Clients();

  /** A lease that an outage outlives: renewed every 500 ms, lost about 1.5 s after the last. */
  static final String SHORT_LEASE = "1500ms";
  /**
   * A lease that a brief outage does not: renewed every 2 s, so that the renewal after the
   * outage comes seconds before the deadline even on a loaded machine.
   */
  static final String LEASE_TO_RECOVER = "6s";
  /** Socket timeout: a renewal fails after three such attempts. */
  static final String TIMEOUT = "500ms";

  private FaultProxy proxy;

  @BeforeEach
  void setUp() throws Exception {
    redis.flushAll();
    proxy = new FaultProxy(redis.server().port());
  }

  @AfterEach
  void tearDown() {
    proxy.close();
    redis.server().resume();
  }

  /** Every report of one client, in the order its listeners heard them, with their thread. */
  static final class Reports {
    record Heard(Object event, String thread) {
    }

    final List<Heard> heard = new CopyOnWriteArrayList<>();

    static Reports on(LockClient client) {
      Reports reports = new Reports();
      client.onLockAtRisk(e -> reports.heard.add(new Heard(e, Thread.currentThread().getName())));
      client.onLockRecovered(
          e -> reports.heard.add(new Heard(e, Thread.currentThread().getName())));
      client.onLockLost(e -> reports.heard.add(new Heard(e, Thread.currentThread().getName())));
      return reports;
    }

    List<Class<?>> kinds() {
      return heard.stream().<Class<?>>map(h -> h.event().getClass()).toList();
    }

    <E> E await(Class<E> type, Duration timeout) {
      try {
        Await.until(timeout, () -> heard.stream().anyMatch(h -> type.isInstance(h.event())),
            type.getSimpleName() + " reported");
      } catch (AssertionError e) {
        throw new AssertionError(e.getMessage() + "; reported: " + this, e);
      }
      return heard.stream().map(Heard::event).filter(type::isInstance).map(type::cast)
          .findFirst().orElseThrow();
    }

    @Override
    public String toString() {
      return heard.stream().map(h -> h.event().toString()).toList().toString();
    }
  }

  private LockClient proxied(String watchdog, String timeout) {
    LockClient client = clients.create(Map.of(LockClientConfig.ADDRESS, proxy.uri(),
        LockClientConfig.WATCHDOG_TIMEOUT, watchdog, LockClientConfig.TIMEOUT, timeout));
    DistributedLock warmUp = client.getLock("warm-up");
    warmUp.lock();
    warmUp.unlock();
    return client;
  }

  // (a) Redis unreachable for longer than the lease: first the warning, then the loss.
  @ParameterizedTest
  @ValueSource(strings = {"exclusive", "fair", "read", "write", "fenced"})
  void outage_reportsAtRiskBeforeLost_everyKind(String kind) {
    LockClient client = proxied(SHORT_LEASE, TIMEOUT);
    Reports reports = Reports.on(client);
    client.onLockAtRisk(e -> {
      throw new IllegalStateException("a faulty listener must not silence the others");
    });
    DistributedLock lock = handle(client, kind, "outage");
    lock.lock();
    LockLost lost = inOutageUntil(reports, LockLost.class, Duration.ofSeconds(15));
    assertEquals(List.of(LockAtRisk.class, LockLost.class), reports.kinds(), reports::toString);
    LockAtRisk risk = (LockAtRisk) reports.heard.get(0).event();
    assertEquals("outage", risk.lockName());
    assertEquals("outage", risk.template());
    assertEquals(Thread.currentThread().getId(), risk.threadId());
    assertEquals(lost.threadId(), risk.threadId());
    assertTrue(risk.timeLeft().compareTo(Duration.ZERO) > 0
        && risk.timeLeft().compareTo(Duration.ofMillis(1500)) < 0, risk::toString);
    assertFalse(risk.lastError().isBlank(), risk::toString);
    assertFalse(risk.detectedAt().isAfter(lost.detectedAt()), reports::toString);
    assertTrue(reports.heard.stream().allMatch(h -> h.thread().endsWith("-events")),
        "listeners run on the client's event thread: " + reports.heard);
    assertThrows(IllegalMonitorStateException.class, lock::unlock, "the loss is reported");
  }

  // (a) with the default socket timeout, longer than the whole lease: a renewal that stays
  // unanswered for a renewal period is enough of a warning.
  @Test
  void outage_longerSocketTimeoutThanLease_stillWarnsBeforeLoss() {
    LockClient client = proxied(SHORT_LEASE, "2s");
    Reports reports = Reports.on(client);
    DistributedLock lock = client.getLock("slow-outage");
    lock.lock();
    inOutageUntil(reports, LockLost.class, Duration.ofSeconds(15));
    assertEquals(List.of(LockAtRisk.class, LockLost.class), reports.kinds(), reports::toString);
    LockAtRisk risk = (LockAtRisk) reports.heard.get(0).event();
    // Either warning may come first: the renewal unanswered for a period, or nothing having
    // confirmed the hold for half its lease.
    assertTrue(risk.lastError().contains("not answered")
        || risk.lastError().contains("confirmed the lease"), risk::toString);
    assertTrue(risk.timeLeft().compareTo(Duration.ZERO) > 0, risk::toString);
    assertThrows(IllegalMonitorStateException.class, lock::unlock);
  }

  // (b) Redis back within the lease: the risk ends with LockRecovered, and the hold works.
  @ParameterizedTest
  @ValueSource(strings = {"exclusive", "read", "write"})
  void briefOutage_endsWithRecovered_andTheHoldStillWorks(String kind) {
    LockClient client = proxied(LEASE_TO_RECOVER, TIMEOUT);
    Reports reports = Reports.on(client);
    DistributedLock lock = handle(client, kind, "brief");
    lock.lock();
    LockAtRisk risk = inOutageUntil(reports, LockAtRisk.class, Duration.ofSeconds(10));
    LockRecovered recovered = reports.await(LockRecovered.class, Duration.ofSeconds(10));
    assertEquals(List.of(LockAtRisk.class, LockRecovered.class), reports.kinds(),
        reports::toString);
    assertEquals(risk.lockName(), recovered.lockName());
    assertEquals(risk.threadId(), recovered.threadId());
    assertTrue(recovered.atRiskFor().compareTo(Duration.ZERO) > 0, recovered::toString);
    assertFalse(recovered.detectedAt().isBefore(risk.detectedAt()));
    assertTrue(lock.isHeldByCurrentThread());
    assertDoesNotThrow(lock::unlock, "the recovered hold is released normally");
    assertTrue(reports.kinds().stream().noneMatch(LockLost.class::equals), reports::toString);
  }

  // (b) a server frozen for less than the lease, then thawed: recovered, not lost.
  @Test
  void pausedServer_resumedWithinTheLease_recovers() {
    LockClient client = clients.create(Map.of(LockClientConfig.ADDRESS, redis.server().uri(),
        LockClientConfig.WATCHDOG_TIMEOUT, LEASE_TO_RECOVER, LockClientConfig.TIMEOUT, TIMEOUT));
    Reports reports = Reports.on(client);
    DistributedLock lock = client.getLock("paused");
    lock.lock();
    redis.server().pause();
    try {
      reports.await(LockAtRisk.class, Duration.ofSeconds(10));
    } finally {
      redis.server().resume();
    }
    reports.await(LockRecovered.class, Duration.ofSeconds(10));
    assertDoesNotThrow(lock::unlock);
    assertEquals(List.of(LockAtRisk.class, LockRecovered.class), reports.kinds(),
        reports::toString);
  }

  // (c) a renewal that finds the hold gone is a loss, never a risk.
  @Test
  void forceUnlockNoticedByRenewal_isLostWithoutAtRisk() {
    LockClient client = clients.create(Map.of(LockClientConfig.ADDRESS, redis.server().uri(),
        LockClientConfig.WATCHDOG_TIMEOUT, SHORT_LEASE));
    Reports reports = Reports.on(client);
    DistributedLock lock = client.getLock("taken");
    lock.lock();
    LockClient operator = clients.create(Map.of(LockClientConfig.ADDRESS, redis.server().uri()));
    assertTrue(operator.getLock("taken").forceUnlock());
    LockLost lost = reports.await(LockLost.class, Duration.ofSeconds(10));
    assertTrue(lost.reason().contains("renewal"), lost::toString);
    assertEquals(List.of(LockLost.class), reports.kinds(), reports::toString);
    assertThrows(IllegalMonitorStateException.class, lock::unlock);
  }

  // (d) holds owned by a LockHold go through the same two stages, under their owner id.
  @Test
  void lockHold_atRiskThenRecovered_underItsOwnerId() throws Exception {
    LockClient client = proxied(LEASE_TO_RECOVER, TIMEOUT);
    Reports reports = Reports.on(client);
    LockHold hold = client.getLock("owned").acquire(null, null);
    LockAtRisk risk = inOutageUntil(reports, LockAtRisk.class, Duration.ofSeconds(10));
    assertTrue(risk.threadId() < 0, risk::toString);
    assertTrue(hold.toString().contains(Long.toString(risk.threadId())), hold::toString);
    LockRecovered recovered = reports.await(LockRecovered.class, Duration.ofSeconds(10));
    assertEquals(risk.threadId(), recovered.threadId());
    assertDoesNotThrow(hold::release);
    assertEquals(List.of(LockAtRisk.class, LockRecovered.class), reports.kinds(),
        reports::toString);
  }

  // (d) and a LockHold kept too long in an outage: at risk, then lost.
  @Test
  void lockHold_longOutage_atRiskThenLost() throws Exception {
    LockClient client = proxied(SHORT_LEASE, TIMEOUT);
    Reports reports = Reports.on(client);
    LockHold hold = client.getLock("owned-lost").acquire(null, null);
    inOutageUntil(reports, LockLost.class, Duration.ofSeconds(15));
    assertEquals(List.of(LockAtRisk.class, LockLost.class), reports.kinds(), reports::toString);
    assertThrows(IllegalMonitorStateException.class, hold::release);
  }

  // Fixed leases are not renewed: their end is known, so they are never at risk.
  @Test
  void fixedLease_inAnOutage_isLostWithoutAtRisk() {
    LockClient client = proxied(SHORT_LEASE, TIMEOUT);
    Reports reports = Reports.on(client);
    DistributedLock lock = client.getLock("fixed");
    lock.lock(1200, TimeUnit.MILLISECONDS);
    inOutageUntil(reports, LockLost.class, Duration.ofSeconds(10));
    assertEquals(List.of(LockLost.class), reports.kinds(), reports::toString);
  }

  // A release during an episode ends it silently: neither recovered nor lost.
  @Test
  void releaseDuringAnEpisode_endsItSilently() {
    LockClient client = proxied(LEASE_TO_RECOVER, TIMEOUT);
    Reports reports = Reports.on(client);
    DistributedLock lock = client.getLock("released");
    lock.lock();
    inOutageUntil(reports, LockAtRisk.class, Duration.ofSeconds(10));
    // The renewal that would confirm it comes a whole renewal period later: unlock first.
    assertDoesNotThrow(lock::unlock);
    LockEngine engine = Clients.engine(client);
    Await.until(Duration.ofSeconds(5), () -> engine.holds().isEmpty(), "hold forgotten");
    // No renewal of it is in flight once unlock() returned; a marker report queued now comes
    // after anything the released hold could still have caused.
    DistributedLock marker = client.getLock("marker");
    marker.lock();
    assertTrue(marker.forceUnlock());
    assertEquals("marker", reports.await(LockLost.class, Duration.ofSeconds(5)).lockName());
    assertEquals(List.of(LockAtRisk.class, LockLost.class), reports.kinds(), reports::toString);
    assertEquals("released", ((LockAtRisk) reports.heard.get(0).event()).lockName());
    assertThrows(IllegalMonitorStateException.class, marker::unlock);
  }

  /** Makes Redis unreachable for the proxied client until it reports a {@code type}. */
  private <E> E inOutageUntil(Reports reports, Class<E> type, Duration timeout) {
    proxy.blackHole(true);
    try {
      return reports.await(type, timeout);
    } finally {
      proxy.blackHole(false);
    }
  }

  private static DistributedLock handle(LockClient client, String kind, String name) {
    Function<String, DistributedLock> of = switch (kind) {
      case "exclusive" -> client::getLock;
      case "fair" -> client::getFairLock;
      case "read" -> n -> client.getReadWriteLock(n).readLock();
      case "write" -> n -> client.getReadWriteLock(n).writeLock();
      case "fenced" -> client::getFencedLock;
      default -> throw new IllegalArgumentException(kind);
    };
    return of.apply(name);
  }
}

package dev.holdfast.cdi;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.holdfast.DistributedLock;
import dev.holdfast.FencedLock;
import dev.holdfast.FencingToken;
import dev.holdfast.LockClient;
import dev.holdfast.LockException;
import dev.holdfast.testing.RedisExtension;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import org.jboss.weld.junit5.EnableWeld;
import org.jboss.weld.junit5.WeldInitiator;
import org.jboss.weld.junit5.WeldSetup;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * {@code @Locked(fenced = true)} with {@link FencingToken#current()}, and {@code @Named}
 * {@link FencedLock} injection, in a real Weld container against real Redis.
 */
@EnableWeld
class FencedLockedTest {

  @RegisterExtension
  static final RedisExtension redis = RedisExtension.standalone();

  private static TestConfig config;

  @WeldSetup
  WeldInitiator weld = WeldInitiator.from(WeldInitiator.createWeld()
      .addExtension(new HoldfastExtension())
      .addBeanClasses(Beans.Fences.class, Beans.FencedLockUser.class)).build();

  private final ExecutorService otherThread = Executors.newSingleThreadExecutor();

  @BeforeAll
  static void configure() {
    config = TestConfig.of(Map.of("holdfast.redis.address", redis.server().uri()));
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
    otherThread.shutdownNow();
  }

  private <T> T bean(Class<T> type) {
    return weld.select(type).get();
  }

  @Test
  void fencedMethod_seesItsHoldsToken_andNoTokenIsLeftOnTheThread() {
    Beans.Fences fences = bean(Beans.Fences.class);
    long token = fences.token("a");
    assertTrue(token > 0, "token " + token);
    Long seenByHandle = fences.handleToken("a");
    assertNotNull(seenByHandle, "the fenced handle has the hold's token inside the method");
    assertThrows(IllegalStateException.class, FencingToken::current, "none after the call");
    assertFalse(bean(LockClient.class).getLock("fence:a").isLocked(), "released");
  }

  @Test
  void tokens_growFromCallToCall_alsoAcrossContainers() throws Exception {
    Beans.Fences fences = bean(Beans.Fences.class);
    long first = fences.token("b");
    long second = fences.token("b");
    assertTrue(second > first, first + " then " + second);
    // Another client (another instance of the application) continues the sequence.
    try (LockClient other = LockClient.create(Map.of("holdfast.redis.address",
        redis.server().uri()))) {
      FencedLock lock = other.getFencedLock("fence:b");
      long third = lock.lockAndGetToken();
      lock.unlock();
      assertTrue(third > second, second + " then " + third);
      assertTrue(fences.token("b") > third, "and back");
    }
  }

  @Test
  void nestedFencedMethod_onAnotherLock_seesItsOwnToken_thenTheCallersAgain() {
    long[] tokens = bean(Beans.Fences.class).nestedOnAnotherLock();
    assertTrue(tokens[0] > 0 && tokens[1] > 0, "both have tokens");
    assertTrue(tokens[1] != tokens[0], "the inner method's own token: " + tokens[1]);
    assertEquals(tokens[0], tokens[2], "the outer token is current again after the inner call");
  }

  @Test
  void reenteringTheSameLock_keepsTheHoldsToken() {
    long[] tokens = bean(Beans.Fences.class).reenteringTheSameLock("c");
    assertArrayEquals(new long[] {tokens[0], tokens[0]}, tokens, "one hold, one token");
  }

  @Test
  void fencedMethod_insideAPlainLockedOne_hasAToken() {
    assertTrue(bean(Beans.Fences.class).fencedInsidePlain() > 0);
  }

  @Test
  void currentToken_inANonFencedLockedMethod_throwsIllegalState_andReleases() {
    IllegalStateException e = assertThrows(IllegalStateException.class,
        () -> bean(Beans.Fences.class).plain());
    assertTrue(e.getMessage().contains("@Locked(fenced = true)"), e.getMessage());
    assertFalse(bean(LockClient.class).getLock("plain").isLocked(), "released");
  }

  @Test
  void holdLostBeforeTheMethodStarts_theMethodDoesNotRun() {
    Beans.Fences.RAN.set(false);
    LockException e = assertThrows(LockException.class,
        () -> bean(Beans.Fences.class).lostBeforeItStarts());
    assertTrue(e.getMessage().contains("'fence:instant' was lost right after it was acquired"),
        e.getMessage());
    assertFalse(Beans.Fences.RAN.get(), "the method ran");
    assertEquals(1, e.getSuppressed().length, "the failed release is attached");
    assertInstanceOf(IllegalMonitorStateException.class, e.getSuppressed()[0]);
  }

  @Test
  void namedFencedLock_isInjectedEverywhere_andExcludesThePlainLockOfTheSameName()
      throws Exception {
    Beans.FencedLockUser user = bean(Beans.FencedLockUser.class);
    assertEquals("ledger", user.ledger.getName());
    assertEquals("auditLock", user.auditLock.getName(), "@Named on a field means its name");
    assertEquals("ctor-fence", user.fromConstructor.getName());
    assertEquals("init-fence", user.fromInitializer.getName());
    DistributedLock plain = user.plainLedger;
    assertEquals("ledger", plain.getName());
    long token = user.ledger.lockAndGetToken();
    try {
      assertTrue(token > 0);
      assertEquals(token, user.ledger.getToken());
      assertFalse(otherThread.submit(() -> plain.tryLock()).get(10, TimeUnit.SECONDS),
          "the plain lock of the same name is taken");
    } finally {
      user.ledger.unlock();
    }
    assertNull(user.ledger.getToken(), "no token without a hold");

    assertTrue(otherThread.submit(() -> plain.tryLock()).get(10, TimeUnit.SECONDS));
    try {
      assertNull(user.ledger.tryLockAndGetToken(), "the fenced lock is taken by the plain one");
    } finally {
      otherThread.submit(plain::unlock).get(10, TimeUnit.SECONDS);
    }
    Long next = user.ledger.tryLockAndGetToken();
    assertNotNull(next);
    user.ledger.unlock();
    assertTrue(next > token, token + " then " + next);
  }
}

package dev.holdfast.engine;

import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.holdfast.DistributedLock;
import dev.holdfast.LockClient;
import dev.holdfast.testing.RedisExtension;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * The commit guard's check of a composite lock ({@link HoldCheck}) checks its members the way it
 * was asked to: a check "until released" (a locked call's) passes once every member was released
 * unlost, as it does for a single lock; a check of the hold as it is now fails once released;
 * both fail when a member was lost, also when confirming in Redis.
 */
class HoldCheckCompositeTest {

  @RegisterExtension
  static final RedisExtension redis = RedisExtension.standalone();

  @RegisterExtension
  final Clients clients = new Clients();

  private LockClient client;
  private LockClient other;

  @BeforeEach
  void setUp() {
    redis.flushAll();
    client = clients.create(redis.config());
    other = clients.create(redis.config());
  }

  @Test
  void multiLock_untilReleased_passesAfterAnUnlostRelease_theHoldNowFails() {
    DistributedLock multi = client.getMultiLock(client.getLock("a"), client.getLock("b"));
    multi.lock();
    HoldCheck untilReleased = HoldCheck.ofLockedCall(multi);
    HoldCheck now = HoldCheck.ofThread(multi);
    assertNull(untilReleased.verify(true), "held: passes, confirmed in Redis");
    assertNull(now.verify(true), "held: passes, confirmed in Redis");
    multi.unlock();

    assertNull(untilReleased.verify(false), "released unlost: a locked call's check passes");
    assertNull(untilReleased.verify(true), "released unlost: a locked call's check passes");
    String released = now.verify(false);
    assertNotNull(released, "a check of the hold as it is now fails once released");
    assertTrue(released.contains("released"), released);
  }

  @Test
  void redLock_untilReleased_passesAfterAnUnlostRelease() {
    DistributedLock red = client.getRedLock(client.getLock("r1"), client.getLock("r2"),
        client.getLock("r3"));
    red.lock();
    HoldCheck untilReleased = HoldCheck.ofLockedCall(red);
    red.unlock();

    assertNull(untilReleased.verify(true), "released unlost: a locked call's check passes");
    assertNotNull(HoldCheck.ofThread(red).verify(false), "no hold now: fails");
  }

  @Test
  void multiLock_aMemberLostBeforeTheRelease_failsBothKinds() {
    DistributedLock multi = client.getMultiLock(client.getLock("x"), client.getLock("y"));
    multi.lock();
    HoldCheck untilReleased = HoldCheck.ofLockedCall(multi);
    HoldCheck now = HoldCheck.ofThread(multi);
    assertTrue(other.getLock("y").forceUnlock());

    String inRedis = untilReleased.verify(true);
    assertNotNull(inRedis, "the check in Redis finds the member gone");
    assertTrue(inRedis.contains("'y'") && inRedis.contains("lost"), inRedis);
    assertNotNull(now.verify(false), "the loss is known locally now");
    try {
      multi.unlock();
    } catch (IllegalMonitorStateException expected) {
      // the member's loss is reported by the unlock too
    }
    String after = untilReleased.verify(false);
    assertNotNull(after, "lost before the release: fails however late it runs");
    assertTrue(after.contains("lost"), after);
  }
}

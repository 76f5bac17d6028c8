package dev.holdfast.engine;

import static java.util.concurrent.TimeUnit.MILLISECONDS;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.holdfast.DistributedLock;
import dev.holdfast.LockClient;
import dev.holdfast.LockClientConfig;
import dev.holdfast.LockHold;
import dev.holdfast.testing.Await;
import dev.holdfast.testing.RedisExtension;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * Attacks on the stale-grant rule of {@code RedisLock.Attempt.opened} on a standalone server:
 * the client under test talks through a {@link BlackHoleProxy} (replies held as long as a probe
 * needs), the rival talks to Redis directly.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
class StaleGrantAttackTest {

  @RegisterExtension
  static final RedisExtension redis = RedisExtension.standalone();

  @RegisterExtension
  final Clients clients = new Clients();

  private BlackHoleProxy proxy;
  private RedisProbe redisState;
  private LockClient client;
  private LockClient rival;
  private LossRecorder lost;

  @BeforeEach
  void setUp() throws Exception {
    redis.flushAll();
    redisState = new RedisProbe(redis.server());
    proxy = new BlackHoleProxy(redis.server().port());
    // A timeout longer than any reply is held below: the call sends once and waits.
    client = clients.create(Map.of(LockClientConfig.ADDRESS, proxy.uri(),
        LockClientConfig.TIMEOUT, "10s"));
    rival = clients.create(Map.of(LockClientConfig.ADDRESS, redis.server().uri()));
    lost = LossRecorder.on(client);
  }

  @AfterEach
  void tearDown() {
    proxy.close();
  }

  /**
   * A single send whose grant (a fresh one: it reports the full lease) is answered only after
   * that lease ran out in Redis and a rival took the lock: it must be undone and tried again, not
   * returned (tryLock returned true while the rival held the lock — the hold reported lost at
   * once — until opened() treated every grant answered past its time as stale, not only replays
   * and re-sent calls; the replica soak's fenced lock() without a token was this).
   */
  @Test
  void singleSend_freshGrantAnsweredAfterItsLease_isNotReturnedWhileRivalHolds()
      throws Exception {
    DistributedLock lock = client.getLock("slow");
    DistributedLock other = rival.getLock("slow");
    warmUp(lock);
    proxy.holdScriptReplies(true);
    AtomicReference<String> seen = new AtomicReference<>("not finished");
    Thread caller = new Thread(() -> {
      try {
        boolean got = lock.tryLock(3_000, 1_000, MILLISECONDS);
        String state = "tryLock=" + got + " isHeldByCurrentThread=" + lock.isHeldByCurrentThread()
            + " holdCount=" + lock.getHoldCount();
        if (got) {
          try {
            lock.unlock();
            state += " unlock=ok";
          } catch (RuntimeException e) {
            state += " unlock=" + e.getClass().getSimpleName();
          }
        }
        seen.set(state);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    });
    caller.start();
    Await.until(Duration.ofSeconds(10), () -> proxy.heldReplies() >= 1,
        "the single send ran, its reply held");
    Await.until(Duration.ofSeconds(10), () -> !redisState.exists("slow"),
        "the grant's lease ran out in Redis");
    assertTrue(other.tryLock(), "the rival takes the free lock");
    proxy.holdScriptReplies(false); // the grant's answer arrives, late
    caller.join();
    boolean rivalHolds = other.isHeldByCurrentThread();
    System.out.println("late single-send grant: " + seen.get() + "; rival holds=" + rivalHolds
        + "; lost=" + lost);
    other.unlock();
    assertTrue(rivalHolds, "the rival held it throughout");
    assertFalse(seen.get().startsWith("tryLock=true"), "tryLock returned true while the rival "
        + "holds the lock: " + seen.get() + "; lost=" + lost);
  }

  /** The same for a {@link LockHold}: acquire() returns a hold while the rival holds the lock. */
  @Test
  void lockHold_singleSend_freshGrantAnsweredAfterItsLease_isNotReturnedWhileRivalHolds()
      throws Exception {
    DistributedLock lock = client.getLock("slowHold");
    DistributedLock other = rival.getLock("slowHold");
    warmUp(lock);
    proxy.holdScriptReplies(true);
    AtomicReference<String> seen = new AtomicReference<>("not finished");
    Thread caller = new Thread(() -> {
      try {
        LockHold hold = lock.acquire(Duration.ofSeconds(3), Duration.ofSeconds(1));
        String state = "acquired " + hold;
        try {
          hold.release();
          state += " release=ok";
        } catch (RuntimeException e) {
          state += " release=" + e.getClass().getSimpleName();
        }
        seen.set(state);
      } catch (RuntimeException e) {
        seen.set("not acquired: " + e.getClass().getSimpleName());
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    });
    caller.start();
    Await.until(Duration.ofSeconds(10), () -> proxy.heldReplies() >= 1,
        "the single send ran, its reply held");
    Await.until(Duration.ofSeconds(10), () -> !redisState.exists("slowHold"),
        "the grant's lease ran out in Redis");
    assertTrue(other.tryLock(), "the rival takes the free lock");
    proxy.holdScriptReplies(false);
    caller.join();
    boolean rivalHolds = other.isHeldByCurrentThread();
    System.out.println("late single-send LockHold grant: " + seen.get() + "; rival holds="
        + rivalHolds + "; lost=" + lost);
    other.unlock();
    assertTrue(rivalHolds, "the rival held it throughout");
    assertFalse(seen.get().startsWith("acquired"), "acquire() returned a hold while the rival "
        + "holds the lock: " + seen.get() + "; lost=" + lost);
  }

  /**
   * Change 4: what a failed multi-lock unlock owes is kept by the first member's engine and
   * dropped when that client closes. Members: {@code a-owed} of client A (first by name, direct
   * to Redis) and {@code b-owed} of client B (through the proxy). The unlock releases A's member
   * and gets no answer for B's (in doubt: its own retry finishes it); A is then closed, as an
   * application shutting down one of two clients does. The thread's retry of the multi-lock's
   * unlock() should finish only what is owed (B's member) — as it did with the static record —
   * but the record went with A's engine, so the retry targets every member, fails on A's
   * released member ("client is closed") and throws although nothing is left to do. Passes with
   * the author's changes reverted (static record): introduced by change 4. Fixed: every
   * member's engine keeps the record.
   */
  @Test
  void multiLockOwed_firstMembersClientClosed_retryFinishesOnlyWhatIsOwed() throws Exception {
    LockClient a = clients.create(Map.of(LockClientConfig.ADDRESS, redis.server().uri()));
    LockClient b = proxiedClient();
    DistributedLock multi = a.getMultiLock(a.getLock("a-owed"), b.getLock("b-owed"));
    warmUp(b.getLock("warm"));
    multi.lock();
    proxy.blackHole(true);
    RuntimeException first = unlockOutcome(multi);
    assertTrue(first != null, "B's member got no answer: the unlock failed for it");
    assertFalse(redisState.exists("a-owed"), "A's member was released");
    a.close();
    proxy.blackHole(false);
    RuntimeException retry = unlockOutcome(multi); // finishes what the failed unlock owes
    Await.until(Duration.ofSeconds(10), () -> !redisState.exists("b-owed"),
        "B's member is released (by the retry or in the background)");
    if (retry != null) {
      retry.printStackTrace(System.out);
    }
    assertTrue(retry == null, "the retry threw although only B's member was owed: " + retry);
  }

  /**
   * A failed multi-lock unlock leaves B's final release in doubt (the record owes B). The thread
   * then takes B alone — that acquisition settles the doubt first, so the multi-lock's release of
   * B is done — and retries the multi-lock's unlock(). The retry must not release the new single
   * hold of B, which the thread still means to hold (it released it when the record kept the
   * member, not the member's hold: any open section of B counted as owed).
   */
  @Test
  void multiLockOwed_memberRetakenAlone_retryDoesNotReleaseNewHold() throws Exception {
    LockClient a = clients.create(Map.of(LockClientConfig.ADDRESS, redis.server().uri()));
    LockClient b = proxiedClient();
    DistributedLock bAlone = b.getLock("b-retaken");
    DistributedLock multi = a.getMultiLock(a.getLock("a-retaken"), b.getLock("b-retaken"));
    warmUp(b.getLock("warm"));
    multi.lock();
    proxy.blackHole(true);
    RuntimeException first = unlockOutcome(multi);
    assertTrue(first != null, "B's member got no answer: the unlock failed for it");
    proxy.blackHole(false);
    bAlone.lock(); // settles the release in doubt, then takes B afresh
    RuntimeException retry = unlockOutcome(multi);
    boolean stillHeld = bAlone.isHeldByCurrentThread();
    boolean inRedis = redisState.exists("b-retaken");
    System.out.println("retaken alone: retry=" + retry + " held=" + stillHeld + " inRedis="
        + inRedis + "; lost=" + lost);
    assertTrue(stillHeld, "the retry released the thread's new single hold of B");
    assertTrue(inRedis, "B's new hold is still in Redis");
    bAlone.unlock();
    assertFalse(redisState.exists("b-retaken"), "B's own unlock releases it");
  }

  /**
   * A failed multi-lock unlock owes B's member; then B's client is closed (its holds expire with
   * their lease). A retry has nothing left it can do for B: it must not throw "client is closed"
   * each time and keep the record for ever.
   */
  @Test
  void multiLockOwed_owingMembersClientClosed_retryEndsTheRecord() throws Exception {
    LockClient a = clients.create(Map.of(LockClientConfig.ADDRESS, redis.server().uri()));
    LockClient b = proxiedClient();
    DistributedLock multi = a.getMultiLock(a.getLock("a-closed"), b.getLock("b-closed"));
    warmUp(b.getLock("warm"));
    multi.lock();
    proxy.blackHole(true);
    RuntimeException first = unlockOutcome(multi);
    assertTrue(first != null, "B's member got no answer: the unlock failed for it");
    b.close();
    proxy.blackHole(false);
    RuntimeException retry = unlockOutcome(multi);
    RuntimeException again = unlockOutcome(multi);
    System.out.println("owing client closed: retry=" + retry + " again=" + again);
    assertTrue(retry == null, "the retry threw although B's client is closed: " + retry);
    assertTrue(again != null, "once the record is finished, another unlock() is an unlock of "
        + "nothing (A's member is released, B's client is closed), not a success");
  }

  /** Loads the scripts through the proxy: a held NOSCRIPT reply would mean nothing ran. */
  private static void warmUp(DistributedLock lock) {
    lock.lock();
    lock.unlock();
  }

  /** {@return what {@code lock.unlock()} threw, or null} */
  private static RuntimeException unlockOutcome(DistributedLock lock) {
    try {
      lock.unlock();
      return null;
    } catch (RuntimeException e) {
      return e;
    }
  }

  /** {@return a client through the black-hole proxy, with a 200 ms command timeout} */
  private LockClient proxiedClient() {
    return clients.create(Map.of(LockClientConfig.ADDRESS, proxy.uri(),
        LockClientConfig.TIMEOUT, "200ms"));
  }
}

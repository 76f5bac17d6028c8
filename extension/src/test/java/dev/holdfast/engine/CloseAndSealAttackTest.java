package dev.holdfast.engine;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.holdfast.DistributedLock;
import dev.holdfast.LockClient;
import dev.holdfast.LockClientConfig;
import dev.holdfast.LockException;
import dev.holdfast.LockHold;
import dev.holdfast.testing.Await;
import dev.holdfast.testing.RedisSentinelSetup;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.Function;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Disabled;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import redis.clients.jedis.Jedis;

/**
 * Attack round 32: (B) calls of a Sentinel client in flight while it closes (its {@code
 * SentinelMasterCheck} and deadline timer closing under them); (C) the seal of an unanswered
 * {@code forceUnlock()} against a copy of the force-release held in the network and let go
 * after the seal, before it, between a seal's lost send and its re-send, and after close.
 *
 * <p>{@link HoldingProxy} holds, per connection, every request from the first that names one of
 * the given scripts (by SHA-1) on: the client's call times out and closes its socket, and the
 * held bytes reach Redis only when let go — a late copy, on a connection of its own.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
class CloseAndSealAttackTest extends ProxiedClientFixture {

  private HoldingProxy holding;
  private RedisSentinelSetup sentinels;

  @AfterEach
  void closeHoldingProxyAndSentinels() {
    if (holding != null) {
      holding.close();
    }
    if (sentinels != null) {
      sentinels.close();
    }
  }

  private static long millisSince(long nanos) {
    return (System.nanoTime() - nanos) / 1_000_000L;
  }

  @SuppressWarnings("unchecked")
  private static Set<Object> sealsOwed(LockClient client) {
    try {
      var f = LockEngine.class.getDeclaredField("sealsOwed");
      f.setAccessible(true);
      return (Set<Object>) f.get(Clients.engine(client));
    } catch (ReflectiveOperationException e) {
      throw new AssertionError(e);
    }
  }

  /** A client through {@link #holding}, its scripts loaded (timeout 1 s, watchdog 30 s). */
  private LockClient viaHolding() throws IOException {
    holding = new HoldingProxy(redis.server().port());
    LockClient b = clients.create(Map.of(LockClientConfig.ADDRESS,
        "redis://127.0.0.1:" + holding.port(), LockClientConfig.TIMEOUT, "1s",
        LockClientConfig.WATCHDOG_TIMEOUT, "30s"));
    try (Jedis j = redis.server().admin()) {
      for (LockScript s : List.of(LockScripts.FORCE_SEAL, LockScripts.FORCE_RELEASE,
          LockScripts.FAIR_FORCE_RELEASE, LockScripts.RW_WRITE_FORCE_RELEASE)) {
        j.scriptLoad(s.source());
      }
    }
    DistributedLock warm = b.getLock("warm");
    warm.lock();
    warm.unlock();
    return b;
  }

  private record Kind(String name, Function<LockClient, DistributedLock> lock,
      LockScript forceRelease) {
  }

  private static final List<Kind> KINDS = List.of(
      new Kind("exclusive", c -> c.getLock("seal-x"), LockScripts.FORCE_RELEASE),
      new Kind("fair", c -> c.getFairLock("seal-f"), LockScripts.FAIR_FORCE_RELEASE),
      new Kind("rw", c -> c.getReadWriteLock("seal-rw").writeLock(),
          LockScripts.RW_WRITE_FORCE_RELEASE));

  private static String keyOf(Kind k) {
    return switch (k.name()) {
      case "exclusive" -> "seal-x";
      case "fair" -> "seal-f";
      default -> "seal-rw";
    };
  }

  // ---------------------------------------------------------------------------------------
  // (C) the force-unlock seal and late copies

  /**
   * For each kind: another client X holds the lock; B's forceUnlock() is held in the network
   * (throws); its seal lands on another connection. X lets go, a rival R takes the lock, and
   * only then does the held copy reach Redis: it must do nothing (R's field stays, R holds).
   */
  @Test
  void copyArrivesAfterSeal_rivalTakenSince_nothingDeleted() throws Exception {
    LockClient b = viaHolding();
    LockClient x = direct();
    for (Kind k : KINDS) {
      String key = keyOf(k);
      LockHold xHold = k.lock().apply(x).acquire(Duration.ofSeconds(10), Duration.ofSeconds(60));
      holding.hold(k.forceRelease().sha1());
      assertThrows(LockException.class, () -> k.lock().apply(b).forceUnlock(),
          k.name() + ": forceUnlock() held in the network");
      assertTrue(holding.held(k.forceRelease().sha1()) > 0, k.name() + ": the copy is held");
      Await.until(Duration.ofSeconds(20), () -> sealsOwed(b).isEmpty(),
          k.name() + ": the seal lands");
      assertTrue(xHold.isHeld() && redisState.exists(key), k.name() + ": X still holds");
      xHold.release();
      LockHold rHold = k.lock().apply(rival).acquire(Duration.ofSeconds(10),
          Duration.ofSeconds(60));
      Map<String, String> before = hgetAll(key);
      letGoAndAwaitRan(k.forceRelease());
      assertEquals(before, hgetAll(key), k.name() + ": the late copy changed the lock");
      assertTrue(rHold.isHeld(), k.name() + ": R still holds");
      assertFalse(k.lock().apply(x).tryLock(), k.name() + ": a second holder");
      rHold.release();
      awaitFree(key);
    }
  }

  /** Lets go of what is held for {@code script}'s pattern and waits until Redis ran it. */
  private void letGoAndAwaitRan(LockScript script) {
    long before = evalshaCalls();
    holding.letGo(script.sha1());
    Await.until(Duration.ofSeconds(20), () -> evalshaCalls() > before,
        "the held copy of " + script.name() + " ran");
  }

  private long evalshaCalls() {
    try (Jedis j = redis.server().admin()) {
      for (String line : j.info("commandstats").split("\r?\n")) {
        if (line.startsWith("cmdstat_evalsha:")) {
          String calls = line.substring(line.indexOf("calls=") + 6);
          return Long.parseLong(calls.substring(0, calls.indexOf(',')));
        }
      }
    }
    return 0;
  }

  private Map<String, String> hgetAll(String key) {
    try (Jedis j = redis.server().admin()) {
      return j.hgetAll(key);
    }
  }

  /**
   * For each kind: B's own thread T holds the lock; B's forceUnlock() and every send of its
   * seal are held in the network. T lets go and takes the lock again (its new grant sent after
   * the force-unlock). The force-release copy reaches Redis first and deletes T's new hold; then
   * the seal's sends: the seal finds the copy ran (1), T's hold is checked again and reported
   * lost; a rival takes the lock and T does not believe a hold.
   */
  @Test
  void copyBeforeSeal_ownThreadReacquired_holdReportedLost() throws Exception {
    LockClient b = viaHolding();
    LossRecorder losses = LossRecorder.on(b);
    for (Kind k : KINDS) {
      String key = keyOf(k);
      DistributedLock lock = k.lock().apply(b);
      LockHold first = take(lock, "t-first-" + k.name()).get(60, TimeUnit.SECONDS);
      holding.hold(k.forceRelease().sha1());
      holding.hold(LockScripts.FORCE_SEAL.sha1());
      assertThrows(LockException.class, lock::forceUnlock, k.name() + ": held in the network");
      assertTrue(first.isHeld(), k.name() + ": no copy ran, T's hold is kept");
      Await.until(Duration.ofSeconds(20), () -> holding.held(LockScripts.FORCE_SEAL.sha1()) > 0,
          k.name() + ": the seal's first send is held");
      first.release();
      LockHold again = take(lock, "t-again-" + k.name()).get(60, TimeUnit.SECONDS);
      assertTrue(redisState.exists(key), k.name() + ": T holds again");
      int lostBefore = losses.count();
      holding.letGo(k.forceRelease().sha1());
      Await.until(Duration.ofSeconds(20), () -> !redisState.exists(key),
          k.name() + ": the copy (sent before T's new grant) deleted it");
      holding.letGo(LockScripts.FORCE_SEAL.sha1());
      Await.until(Duration.ofSeconds(30), () -> sealsOwed(b).isEmpty(),
          k.name() + ": the seal lands");
      Await.until(Duration.ofSeconds(20), () -> !again.isHeld(),
          k.name() + ": T's hold the copy deleted is reported lost; losses " + losses);
      assertTrue(losses.count() > lostBefore, k.name() + ": a loss reported");
      LockHold r = k.lock().apply(rival).acquire(Duration.ofSeconds(10), Duration.ofSeconds(60));
      assertFalse(again.isHeld(), k.name() + ": two holders");
      r.release();
      awaitFree(key);
    }
  }

  /**
   * B's own thread T holds the lock; the force-unlock and the first sends of its seal are held.
   * The seal's sends are let go first (they seal; their replies are lost, the client gave up on
   * those connections), then the copy (finds the seal, does nothing), then later seal re-sends
   * pass: they answer "sealed" (0). T's hold is untouched and never reported lost (no false
   * loss), and a rival is refused.
   */
  @Test
  void sealSendsLandBeforeCopy_repliesLost_resendAnswersSealed_noFalseLoss() throws Exception {
    LockClient b = viaHolding();
    LossRecorder losses = LossRecorder.on(b);
    for (Kind k : KINDS) {
      String key = keyOf(k);
      DistributedLock lock = k.lock().apply(b);
      LockHold hold = take(lock, "t-" + k.name()).get(60, TimeUnit.SECONDS);
      holding.hold(k.forceRelease().sha1());
      holding.hold(LockScripts.FORCE_SEAL.sha1());
      assertThrows(LockException.class, lock::forceUnlock, k.name() + ": held in the network");
      Await.until(Duration.ofSeconds(20), () -> holding.held(LockScripts.FORCE_SEAL.sha1()) > 1,
          k.name() + ": a seal send and its re-send are held");
      int lostBefore = losses.count();
      Map<String, String> before = hgetAll(key);
      holding.letGo(LockScripts.FORCE_SEAL.sha1()); // later re-sends pass and are answered
      Await.until(Duration.ofSeconds(30), () -> sealsOwed(b).isEmpty(),
          k.name() + ": the seal lands");
      letGoAndAwaitRan(k.forceRelease());
      assertEquals(before, hgetAll(key), k.name() + ": the copy after the seal changed the lock");
      assertTrue(hold.isHeld(), k.name() + ": T's hold kept; losses " + losses);
      assertEquals(lostBefore, losses.count(), k.name() + ": a false loss: " + losses);
      assertFalse(k.lock().apply(rival).tryLock(), k.name() + ": two holders");
      hold.release();
      awaitFree(key);
    }
  }

  /**
   * For each kind: another client X holds the lock; B's forceUnlock() and its seal's sends are
   * held. The copy reaches Redis first and deletes X's lock (what the call asked for); B's own
   * thread T then takes the free lock; then the seal lands and finds the copy ran (1): B's holds
   * are checked again, and T's, taken after the copy, is kept (no false loss); a rival is refused.
   */
  @Test
  void copyBeforeSeal_ownThreadTookFreedLock_keptAfterSeal() throws Exception {
    LockClient b = viaHolding();
    LockClient x = direct();
    LossRecorder losses = LossRecorder.on(b);
    for (Kind k : KINDS) {
      String key = keyOf(k);
      k.lock().apply(x).acquire(Duration.ofSeconds(10), Duration.ofSeconds(60));
      holding.hold(k.forceRelease().sha1());
      holding.hold(LockScripts.FORCE_SEAL.sha1());
      assertThrows(LockException.class, () -> k.lock().apply(b).forceUnlock(),
          k.name() + ": held in the network");
      Await.until(Duration.ofSeconds(20), () -> holding.held(LockScripts.FORCE_SEAL.sha1()) > 0,
          k.name() + ": the seal's first send is held");
      holding.letGo(k.forceRelease().sha1());
      Await.until(Duration.ofSeconds(20), () -> !redisState.exists(key),
          k.name() + ": the copy deleted X's lock");
      int lostBefore = losses.count();
      LockHold t = take(k.lock().apply(b), "t-after-" + k.name()).get(60, TimeUnit.SECONDS);
      holding.letGo(LockScripts.FORCE_SEAL.sha1());
      Await.until(Duration.ofSeconds(30), () -> sealsOwed(b).isEmpty(),
          k.name() + ": the seal lands");
      assertTrue(t.isHeld() && redisState.exists(key), k.name() + ": T's hold, taken after the "
          + "copy, kept; losses " + losses);
      assertEquals(lostBefore, losses.count(), k.name() + ": a false loss: " + losses);
      assertFalse(k.lock().apply(rival).tryLock(), k.name() + ": two holders");
      t.release();
      awaitFree(key);
    }
  }

  /**
   * B's forceUnlock() of a lock X holds is held in the network, and so is the first send of its
   * seal; the network is back for new sends, and B closes while that one is still unanswered.
   * close() sends the seal once more, so the held force-release copy, arriving after a rival R
   * took the lock, does nothing. (A DEFECT of round 32, fixed: close() dropped owed seals, and
   * the copy deleted R's lock: R believed a hold Redis no longer had, and X took it again.)
   */
  @Test
  void sealOwedAtClose_networkBack_closeSealsIt_lateCopyDeletesNothing() throws Exception {
    LockClient b = viaHolding();
    LockClient x = direct();
    DistributedLock lock = b.getLock("seal-close-back");
    LockHold xHold = x.getLock("seal-close-back").acquire(Duration.ofSeconds(10),
        Duration.ofSeconds(60));
    holding.hold(LockScripts.FORCE_RELEASE.sha1());
    holding.hold(LockScripts.FORCE_SEAL.sha1());
    assertThrows(LockException.class, lock::forceUnlock, "held in the network");
    Await.until(Duration.ofSeconds(20), () -> holding.held(LockScripts.FORCE_SEAL.sha1()) > 0,
        "a seal send is held");
    // That send stays unanswered (the background retry waits for its timeout); later ones pass.
    holding.stopHolding(LockScripts.FORCE_SEAL.sha1());
    b.close();
    assertTrue(sealsOwed(b).isEmpty(), "no seal owed after close");
    holding.drop(LockScripts.FORCE_SEAL.sha1()); // the first send never arrives
    xHold.release();
    LockHold r = rival.getLock("seal-close-back").acquire(Duration.ofSeconds(10),
        Duration.ofSeconds(60));
    letGoAndAwaitRan(LockScripts.FORCE_RELEASE);
    assertTrue(redisState.exists("seal-close-back"),
        "R's lock deleted by a force-unlock copy sent before B closed");
    assertFalse(x.getLock("seal-close-back").tryLock(), "two holders: R and X");
    r.release();
  }

  /**
   * B's forceUnlock() of a lock X holds is held in the network, and so is every send of its
   * seal, the one close() makes included; B closes. X lets go, a rival R takes the lock, and the
   * held force-release copy reaches Redis: nothing sealed it, so it deletes R's lock — R
   * believes a hold Redis no longer has, and a third client takes it. No client can seal through
   * a network that delivers nothing it sends; close() logs the seal it could not send, and
   * safety.md states the residual.
   */
  @Disabled("LIMITATION: a seal that no send of close() delivers is given up; a copy of the "
      + "force-unlock delivered later deletes a lock taken since (documented in safety.md)")
  @Test
  void sealOwedDroppedAtClose_lateCopyDeletesLockTakenSince() throws Exception {
    LockClient b = viaHolding();
    LockClient x = direct();
    DistributedLock lock = b.getLock("seal-close");
    LockHold xHold = x.getLock("seal-close").acquire(Duration.ofSeconds(10),
        Duration.ofSeconds(60));
    holding.hold(LockScripts.FORCE_RELEASE.sha1());
    holding.hold(LockScripts.FORCE_SEAL.sha1());
    assertThrows(LockException.class, lock::forceUnlock, "held in the network");
    Await.until(Duration.ofSeconds(20), () -> holding.held(LockScripts.FORCE_SEAL.sha1()) > 0,
        "a seal send is held");
    b.close();
    holding.drop(LockScripts.FORCE_SEAL.sha1()); // the seal's sends never arrive
    xHold.release();
    LockHold r = rival.getLock("seal-close").acquire(Duration.ofSeconds(10),
        Duration.ofSeconds(60));
    letGoAndAwaitRan(LockScripts.FORCE_RELEASE);
    boolean third = x.getLock("seal-close").tryLock();
    assertFalse(r.isHeld() && third, "two holders: the late copy deleted R's lock");
    assertTrue(redisState.exists("seal-close"), "R's lock deleted by a copy sent before it");
  }

  // ---------------------------------------------------------------------------------------
  // (B) a Sentinel client closing under calls

  private static long threadsNamed(String part) {
    return Thread.getAllStackTraces().keySet().stream()
        .filter(t -> t.isAlive() && t.getName().toLowerCase().contains(part)).count();
  }

  private static int openFds() {
    String[] fds = new java.io.File("/proc/self/fd").list();
    return fds == null ? -1 : fds.length;
  }

  /** What one thread's call ended with, and when (nanoTime). */
  private record Outcome(String what, long at) {
  }

  private static CompletableFuture<Outcome> run(String name, ThrowingCall call) {
    CompletableFuture<Outcome> done = new CompletableFuture<>();
    TestThreads.start(name, () -> {
      String what;
      try {
        what = call.run();
      } catch (Throwable e) {
        what = e.getClass().getSimpleName() + ": " + e.getMessage();
      }
      done.complete(new Outcome(what, System.nanoTime()));
    });
    return done;
  }

  private interface ThrowingCall {
    String run() throws Exception;
  }

  /**
   * A Sentinel client C (timeout 1 s, watchdog 3 s) with threads in lock(), tryLock(4 s) and
   * lockInterruptibly() on a lock another client holds, two threads taking and releasing locks
   * in a loop, a LockHold released and a watchdog-renewed lock unlocked as C closes. Every call
   * ends within its bound (lock() with an exception naming the closed client); no acquisition
   * returns after close() returned; C's fields are absent from the lock it waited for; C's keys
   * expire within their lease; C's threads (deadline timer, renewals) end, and no descriptors
   * leak.
   */
  @Test
  void sentinelClientClosesUnderCalls_boundedNoLateGrantNoLeak() throws Exception {
    sentinels = RedisSentinelSetup.start("close-calls");
    SentinelStaging.slowAutomaticFailover(sentinels);
    RedisProbe master = new RedisProbe(sentinels.master());
    LockClient holder = clients.create(Map.of(LockClientConfig.ADDRESS,
        sentinels.master().uri()));
    LockHold busy = holder.getLock("close-busy").acquire(Duration.ofSeconds(10),
        Duration.ofSeconds(60));
    long holdfastThreads = threadsNamed("holdfast");
    long deadlineThreads = threadsNamed("sentinel-ask-deadline");
    int fdsBefore = openFds();
    LockClient c = clients.create(Map.of(
        LockClientConfig.MODE, "sentinel",
        LockClientConfig.NODES, sentinels.sentinelNodes(),
        LockClientConfig.SENTINEL_MASTER, sentinels.masterName(),
        LockClientConfig.TIMEOUT, "1000ms",
        LockClientConfig.WATCHDOG_TIMEOUT, "3s"));
    LockHold own = c.getLock("close-own").acquire(Duration.ofSeconds(10), Duration.ofSeconds(4));
    CompletableFuture<Void> renewedHeld = new CompletableFuture<>();
    java.util.concurrent.CountDownLatch closing = new java.util.concurrent.CountDownLatch(1);
    CompletableFuture<Outcome> renewed = run("close-renewed", () -> {
      DistributedLock l = c.getLock("close-renewed");
      l.lock();
      renewedHeld.complete(null);
      closing.await();
      l.unlock();
      return "unlocked";
    });
    renewedHeld.get(30, TimeUnit.SECONDS);
    CompletableFuture<Outcome> plain = run("close-lock", () -> {
      c.getLock("close-busy").lock();
      return "acquired";
    });
    CompletableFuture<Outcome> timed = run("close-timed", () -> {
      return "tryLock=" + c.getLock("close-busy").tryLock(4, TimeUnit.SECONDS);
    });
    CompletableFuture<Outcome> interruptible = run("close-interruptible", () -> {
      c.getLock("close-busy").lockInterruptibly();
      return "acquired";
    });
    AtomicBoolean stop = new AtomicBoolean();
    List<Long> grantsAt = new CopyOnWriteArrayList<>();
    List<CompletableFuture<Outcome>> churn = new ArrayList<>();
    for (int i = 0; i < 2; i++) {
      DistributedLock l = c.getLock("close-churn-" + i);
      churn.add(run("close-churn-" + i, () -> {
        while (!stop.get()) {
          l.lock();
          grantsAt.add(System.nanoTime());
          l.unlock();
        }
        return "stopped";
      }));
    }
    Await.until(Duration.ofSeconds(20), () -> grantsAt.size() > 20, "the churn runs");
    long began = System.nanoTime();
    CompletableFuture<Outcome> released = run("close-release", () -> {
      closing.await();
      own.release();
      return "released";
    });
    closing.countDown();
    c.close();
    long closed = System.nanoTime();
    List<String> churnKeys = List.of("close-churn-0", "close-churn-1");
    Map<String, Long> pttlAtClose = new java.util.HashMap<>();
    for (String key : churnKeys) {
      pttlAtClose.put(key, master.pttl(key));
    }
    long closeTook = millisSince(began);
    try {
      Outcome p = plain.get(30, TimeUnit.SECONDS);
      Outcome t = timed.get(30, TimeUnit.SECONDS);
      Outcome in = interruptible.get(30, TimeUnit.SECONDS);
      List<Outcome> churned = new ArrayList<>();
      for (CompletableFuture<Outcome> f : churn) {
        churned.add(f.get(30, TimeUnit.SECONDS));
      }
      Outcome rel = released.get(30, TimeUnit.SECONDS);
      Outcome ren = renewed.get(30, TimeUnit.SECONDS);
      assertTrue(closeTook < 10_000, "close() took " + closeTook + " ms");
      assertTrue((p.at() - closed) / 1_000_000L < 10_000, "lock() ended "
          + (p.at() - closed) / 1_000_000L + " ms after close: " + p.what());
      assertFalse(p.what().equals("acquired"), "lock() acquired a lock another client holds");
      assertTrue(p.what().toLowerCase().contains("clos"), "lock() ended with " + p.what());
      assertTrue((t.at() - began) / 1_000_000L < 4_000 + 6_000, "tryLock(4 s) took "
          + (t.at() - began) / 1_000_000L + " ms: " + t.what());
      assertFalse(in.what().equals("acquired"), "lockInterruptibly() acquired: " + in.what());
      for (Outcome o : churned) {
        assertFalse(o.what().equals("stopped"), "a churn thread kept acquiring: " + o.what());
      }
      for (long at : grantsAt) { // one answered as close() ran may be recorded just after
        assertTrue((at - closed) / 1_000_000L < 1_000, "a grant returned "
            + (at - closed) / 1_000_000L + " ms after close() returned");
      }
      // Redis: no key of C appears, and none is renewed, after close() returned.
      for (String key : churnKeys) {
        long now = master.pttl(key);
        long then = pttlAtClose.get(key);
        assertTrue(then >= 0 || now < 0, key + " written after close(): pttl " + then + " -> "
            + now);
        assertTrue(now <= then || then < 0 && now < 0, key + " renewed after close(): pttl "
            + then + " -> " + now);
      }
      assertNotNull(rel.what());
      assertNotNull(ren.what());
    } finally {
      stop.set(true);
    }
    // C's fields never appear beside the holder's; its keys expire within their lease.
    Map<String, String> busyFields;
    try (Jedis j = sentinels.master().admin()) {
      busyFields = j.hgetAll("close-busy");
    }
    assertEquals(1, busyFields.size(), "fields of close-busy: " + busyFields);
    for (String key : List.of("close-own", "close-renewed", "close-churn-0", "close-churn-1")) {
      long pttl = master.pttl(key);
      assertTrue(pttl != -1, key + " left in Redis without expiry");
    }
    Await.until(Duration.ofSeconds(20), () -> List.of("close-own", "close-renewed",
        "close-churn-0", "close-churn-1").stream().noneMatch(master::exists),
        "C's keys expire within their lease");
    assertTrue(busy.isHeld());
    busy.release();
    Await.until(Duration.ofSeconds(20), () -> threadsNamed("holdfast") <= holdfastThreads
        && threadsNamed("sentinel-ask-deadline") <= deadlineThreads,
        "C's threads end (holdfast " + threadsNamed("holdfast") + " vs " + holdfastThreads + ")");
    Await.until(Duration.ofSeconds(20), () -> openFds() - fdsBefore < 10,
        "descriptors back near " + fdsBefore + " (now " + openFds() + ")");
  }

  /**
   * A Sentinel client C whose verdict is stale: its first call asks the sentinels through a link
   * that trickles (the ask is held to its cut, 2 x the 1 s timeout); threads in lock(),
   * tryLock(500 ms) and lockInterruptibly() wait behind that ask when C closes. close() cuts the
   * ask: every call ends within the ask's bound plus a margin after close, none acquires after
   * close() returned, no key of C is left without expiry, and the deadline thread ends.
   */
  @Test
  void sentinelClientClosesDuringAnAsk_waitersEndBoundedNoLateGrant() throws Exception {
    sentinels = RedisSentinelSetup.start("close-ask");
    SentinelStaging.slowAutomaticFailover(sentinels);
    RedisProbe master = new RedisProbe(sentinels.master());
    List<redis.clients.jedis.HostAndPort> real = new ArrayList<>(sentinels.sentinels());
    SentinelAskAttackTest.TrickleProxy trickle =
        new SentinelAskAttackTest.TrickleProxy(real.get(0).getPort(), 0);
    try {
      int timeoutMillis = 1_000;
      long deadlineThreads = threadsNamed("sentinel-ask-deadline");
      LockClient c = clients.create(Map.of(
          LockClientConfig.MODE, "sentinel",
          LockClientConfig.NODES, trickle.address() + "," + real.get(1) + "," + real.get(2),
          LockClientConfig.SENTINEL_MASTER, sentinels.masterName(),
          LockClientConfig.TIMEOUT, timeoutMillis + "ms",
          LockClientConfig.WATCHDOG_TIMEOUT, "3s"));
      SentinelCheckRefreshAttackTest.warmUpPool(c, 3);
      SentinelMasterCheck check = SentinelCheckRefreshAttackTest.masterCheckOf(c);
      long idle = System.nanoTime();
      Await.until(Duration.ofSeconds(30), () -> millisSince(idle)
          > 2 * SentinelMasterCheck.VERDICT_MILLIS + 2L * timeoutMillis + 1_000,
          "C idle: its verdict is past a term plus an ask");
      trickle.gap(300);
      long asked = check.callerAsks();
      int links = trickle.accepted();
      CompletableFuture<Outcome> first = run("ask-first",
          () -> "tryLock=" + c.getLock("ask-first").tryLock());
      Await.until(Duration.ofSeconds(10),
          () -> check.callerAsks() > asked && trickle.accepted() > links,
          "C's first call asks, through the trickling link");
      CompletableFuture<Outcome> plain = run("ask-lock", () -> {
        c.getLock("ask-plain").lock();
        return "acquired";
      });
      CompletableFuture<Outcome> timed = run("ask-timed",
          () -> "tryLock=" + c.getLock("ask-timed").tryLock(500, TimeUnit.MILLISECONDS));
      CompletableFuture<Outcome> interruptible = run("ask-interruptible", () -> {
        c.getLock("ask-int").lockInterruptibly();
        return "acquired";
      });
      long began = System.nanoTime();
      c.close();
      long closed = System.nanoTime();
      assertTrue(millisSince(began) < 5_000, "close() took " + millisSince(began) + " ms");
      long bound = 2L * timeoutMillis + 4_000;
      for (CompletableFuture<Outcome> f : List.of(first, plain, timed, interruptible)) {
        Outcome o = f.get(60, TimeUnit.SECONDS);
        long after = (o.at() - closed) / 1_000_000L;
        assertTrue(after < bound, "a call ended " + after + " ms after close: " + o.what());
        if (o.what().equals("acquired") || o.what().equals("tryLock=true")) {
          assertTrue(after < 1_000, "acquired " + after + " ms after close() returned");
        }
      }
      for (String key : List.of("ask-first", "ask-plain", "ask-timed", "ask-int")) {
        assertTrue(master.pttl(key) != -1, key + " left in Redis without expiry");
      }
      Await.until(Duration.ofSeconds(20), () -> List.of("ask-first", "ask-plain", "ask-timed",
          "ask-int").stream().noneMatch(master::exists), "C's keys expire within their lease");
      Await.until(Duration.ofSeconds(20),
          () -> threadsNamed("sentinel-ask-deadline") <= deadlineThreads,
          "the deadline thread ends with close()");
    } finally {
      trickle.cut();
      trickle.close();
    }
  }

  // ---------------------------------------------------------------------------------------

  /**
   * A proxy that holds, per connection, every request from the first one containing a held
   * pattern on, until {@link #letGo} (delivered upstream, late) or {@link #drop}.
   */
  static final class HoldingProxy implements AutoCloseable {
    private final int upstreamPort;
    private final ServerSocket server;
    private final Set<String> patterns = java.util.concurrent.ConcurrentHashMap.newKeySet();
    private final List<Link> links = new CopyOnWriteArrayList<>();
    private volatile boolean closed;

    HoldingProxy(int upstreamPort) throws IOException {
      this.upstreamPort = upstreamPort;
      this.server = new ServerSocket(0, 200, InetAddress.getLoopbackAddress());
      Thread t = new Thread(this::accept, "holding-proxy-accept");
      t.setDaemon(true);
      t.start();
    }

    int port() {
      return server.getLocalPort();
    }

    void hold(String pattern) {
      patterns.add(pattern);
    }

    /** {@return how many connections are held for {@code pattern}} */
    int held(String pattern) {
      return (int) links.stream().filter(l -> pattern.equals(l.heldFor)).count();
    }

    /** {@return whether every connection held for {@code pattern} was let go and flushed} */
    boolean delivered(String pattern) {
      return links.stream().noneMatch(l -> pattern.equals(l.heldFor));
    }

    /** Stops holding for {@code pattern}; what was held is sent upstream, in order per link. */
    void letGo(String pattern) {
      patterns.remove(pattern);
      for (Link l : links) {
        l.letGo(pattern, true);
      }
    }

    /** Holds no new request for {@code pattern}; what is held stays held. */
    void stopHolding(String pattern) {
      patterns.remove(pattern);
    }

    /** Stops holding for {@code pattern}; what was held never arrives. */
    void drop(String pattern) {
      patterns.remove(pattern);
      for (Link l : links) {
        l.letGo(pattern, false);
      }
    }

    private void accept() {
      while (!closed) {
        try {
          Socket client = server.accept();
          Socket upstream = new Socket(InetAddress.getLoopbackAddress(), upstreamPort);
          Link link = new Link(client, upstream);
          links.add(link);
          link.start();
        } catch (IOException e) {
          return;
        }
      }
    }

    @Override
    public void close() {
      closed = true;
      try {
        server.close();
      } catch (IOException e) {
        // closing
      }
      for (Link l : links) {
        l.close();
      }
    }

    private final class Link {
      final Socket client;
      final Socket upstream;
      volatile String heldFor;
      final List<byte[]> queue = new ArrayList<>();

      Link(Socket client, Socket upstream) {
        this.client = client;
        this.upstream = upstream;
      }

      void start() {
        Thread up = new Thread(this::requests, "holding-proxy-requests");
        up.setDaemon(true);
        up.start();
        Thread down = new Thread(this::replies, "holding-proxy-replies");
        down.setDaemon(true);
        down.start();
      }

      private void requests() {
        byte[] buffer = new byte[65536];
        try (InputStream in = client.getInputStream()) {
          int n;
          while ((n = in.read(buffer)) >= 0) {
            byte[] chunk = Arrays.copyOf(buffer, n);
            synchronized (this) {
              if (heldFor == null) {
                String text = new String(chunk, StandardCharsets.ISO_8859_1);
                for (String p : patterns) {
                  if (text.contains(p)) {
                    heldFor = p;
                    break;
                  }
                }
              }
              if (heldFor != null) {
                queue.add(chunk);
                continue;
              }
              upstream.getOutputStream().write(chunk);
            }
          }
        } catch (IOException e) {
          // the client gave up on this connection: what is held stays held
        }
      }

      private void replies() {
        byte[] buffer = new byte[65536];
        try (InputStream in = upstream.getInputStream()) {
          int n;
          while ((n = in.read(buffer)) >= 0) {
            try {
              client.getOutputStream().write(buffer, 0, n);
            } catch (IOException e) {
              // the client is gone: the reply is lost, keep draining
            }
          }
        } catch (IOException e) {
          // closed
        }
      }

      synchronized void letGo(String pattern, boolean deliver) {
        if (!pattern.equals(heldFor)) {
          return;
        }
        try {
          if (deliver) {
            OutputStream out = upstream.getOutputStream();
            for (byte[] chunk : queue) {
              out.write(chunk);
            }
            out.flush();
          } else {
            upstream.close();
            client.close();
          }
        } catch (IOException e) {
          // upstream gone
        }
        queue.clear();
        heldFor = null;
      }

      void close() {
        try {
          client.close();
        } catch (IOException e) {
          // closing
        }
        try {
          upstream.close();
        } catch (IOException e) {
          // closing
        }
      }
    }
  }
}

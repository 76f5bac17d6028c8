package dev.holdfast.engine;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.holdfast.DistributedLock;
import dev.holdfast.DistributedReadWriteLock;
import dev.holdfast.LockClient;
import dev.holdfast.LockClientConfig;
import dev.holdfast.LockException;
import dev.holdfast.testing.Await;
import dev.holdfast.testing.RedisSentinelSetup;
import java.io.File;
import java.lang.reflect.Field;
import java.lang.reflect.Method;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import redis.clients.jedis.DefaultJedisClientConfig;
import redis.clients.jedis.HostAndPort;
import redis.clients.jedis.JedisClientConfig;

/**
 * Attack round 29 on 413b5e5 and 03edd82: the ask of the sentinels cut at its deadline by a
 * timer ({@code SentinelMasterCheck.CutSocket}); an interruptible or timed acquisition waiting
 * for another thread's ask ({@code awaitAsk}) before it borrows; the seal of an unanswered
 * {@code forceUnlock()} owed to the cleanup rounds, and the force-unlock's one HMGET.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
class CutAskAttackTest extends ProxiedClientFixture {

  private static final String DEADLINE_THREAD = "holdfast-sentinel-ask-deadline";

  private RedisSentinelSetup sentinels;
  private final List<AutoCloseable> closing = new ArrayList<>();

  @AfterEach
  void closeSentinels() throws Exception {
    for (AutoCloseable c : closing) {
      c.close();
    }
    if (sentinels != null) {
      sentinels.close();
    }
  }

  private static long deadlineThreads() {
    return Thread.getAllStackTraces().keySet().stream()
        .filter(t -> t.isAlive() && DEADLINE_THREAD.equals(t.getName())).count();
  }

  private static int openFds() {
    String[] fds = new File("/proc/self/fd").list();
    return fds == null ? -1 : fds.length;
  }

  private static long millisSince(long nanos) {
    return (System.nanoTime() - nanos) / 1_000_000L;
  }

  /** A sentinel link that accepts and never answers; its accepted sockets are kept to close. */
  private ServerSocket silentSentinel(List<Socket> accepted) throws Exception {
    ServerSocket silent = new ServerSocket(0, 200, InetAddress.getLoopbackAddress());
    closing.add(silent);
    Thread t = new Thread(() -> {
      while (!silent.isClosed()) {
        try {
          accepted.add(silent.accept());
        } catch (java.io.IOException e) {
          return;
        }
      }
    }, "silent-sentinel");
    t.setDaemon(true);
    t.start();
    closing.add(() -> {
      for (Socket s : accepted) {
        s.close();
      }
    });
    return silent;
  }

  private static Object ask(SentinelMasterCheck check, HostAndPort node) throws Exception {
    Method ask = SentinelMasterCheck.class.getDeclaredMethod("ask", HostAndPort.class);
    ask.setAccessible(true);
    return ask.invoke(check, node);
  }

  /**
   * 200 asks, each through a link that trickles its reply (a byte every 5 ms: every read within
   * its wait, the cut ends it) and a sentinel that accepts and never answers (its reads time
   * out): each ask ends near its bound, one deadline thread serves them all, the sockets the
   * asks opened are closed (no descriptor growth), and the thread ends with close().
   */
  @Test
  void manyAsksThroughTricklingAndSilentLinks_boundedNoThreadOrSocketLeak() throws Exception {
    sentinels = RedisSentinelSetup.start("cut-many");
    SentinelStaging.slowAutomaticFailover(sentinels);
    HostAndPort master = sentinels.master().hostAndPort();
    List<HostAndPort> real = new ArrayList<>(sentinels.sentinels());
    SentinelAskAttackTest.TrickleProxy trickle =
        new SentinelAskAttackTest.TrickleProxy(real.get(0).getPort(), 5);
    closing.add(trickle);
    List<Socket> silentAccepted = new CopyOnWriteArrayList<>();
    ServerSocket silent = silentSentinel(silentAccepted);
    int timeout = 40;
    JedisClientConfig config = DefaultJedisClientConfig.builder().connectionTimeoutMillis(timeout)
        .socketTimeoutMillis(timeout).build();
    long threadsBefore = deadlineThreads();
    SentinelMasterCheck check = new SentinelMasterCheck(sentinels.masterName(),
        List.of(trickle.address(), new HostAndPort("127.0.0.1", silent.getLocalPort()),
            real.get(1)), config);
    ask(check, master); // warm: class loading, the timer's thread
    int fdsBefore = openFds();
    long slowest = 0;
    for (int i = 0; i < 200; i++) {
      long began = System.nanoTime();
      ask(check, master);
      slowest = Math.max(slowest, millisSince(began));
      assertTrue(deadlineThreads() - threadsBefore <= 1, "more than one deadline thread");
    }
    assertTrue(slowest <= 2L * timeout + 1_500, "an ask took " + slowest
        + " ms (bound 2 x " + timeout + " ms)");
    // The silent sentinel's server side keeps its accepted sockets: close them before counting.
    for (Socket s : silentAccepted) {
      s.close();
    }
    trickle.cut();
    Await.until(Duration.ofSeconds(20), () -> openFds() - fdsBefore < 30,
        "file descriptors back near " + fdsBefore + " after 200 asks");
    check.close();
    Await.until(Duration.ofSeconds(10), () -> deadlineThreads() <= threadsBefore,
        "the deadline thread ends with close()");
  }

  /**
   * An ask in flight through a trickling link (a byte every 300 ms, each read within its 666 ms
   * wait) when the check is closed (the client closes while a call asks): close() calls
   * shutdownNow() on the timer, which drops the ask's scheduled cut. The ask then runs on for as
   * long as the link trickles (~10 s for the reply), not its bound of 2 s: a call of a closing
   * client is held far past its own wait. (Safe: the late answer is refused as too old.)
   */
  // A DEFECT of round 29, fixed.
  @Test
  void checkClosedDuringATrickledAsk_askStillEndsAtItsBound() throws Exception {
    sentinels = RedisSentinelSetup.start("cut-close");
    SentinelStaging.slowAutomaticFailover(sentinels);
    HostAndPort master = sentinels.master().hostAndPort();
    List<HostAndPort> real = new ArrayList<>(sentinels.sentinels());
    SentinelAskAttackTest.TrickleProxy trickle =
        new SentinelAskAttackTest.TrickleProxy(real.get(0).getPort(), 300);
    closing.add(trickle);
    int timeout = 1_000;
    JedisClientConfig config = DefaultJedisClientConfig.builder().connectionTimeoutMillis(timeout)
        .socketTimeoutMillis(timeout).build();
    SentinelMasterCheck check = new SentinelMasterCheck(sentinels.masterName(),
        List.of(trickle.address(), real.get(1), real.get(2)), config);
    long began = System.nanoTime();
    CompletableFuture<Long> asked = CompletableFuture.supplyAsync(() -> {
      try {
        ask(check, master);
      } catch (Exception e) {
        // only the timing matters
      }
      return millisSince(began);
    });
    Await.until(Duration.ofSeconds(10), () -> trickle.accepted() > 0, "the ask is in flight");
    check.close();
    long took;
    try {
      took = asked.get(60, TimeUnit.SECONDS);
    } finally {
      trickle.cut();
    }
    assertTrue(took <= 2L * timeout + 1_000, "an ask in flight when the check closed took "
        + took + " ms (bound 2 x " + timeout + " ms)");
  }

  private static int availablePermits(LockClient client) throws Exception {
    RedisTopology topology = Clients.engine(client).topology();
    Field f = RedisTopology.class.getDeclaredField("acquisitions");
    f.setAccessible(true);
    return ((Semaphore) f.get(topology)).availablePermits();
  }

  private static boolean waitsInMasterCheck(Thread t) {
    return (t.getState() == Thread.State.WAITING || t.getState() == Thread.State.TIMED_WAITING)
        && java.util.Arrays.stream(t.getStackTrace()).anyMatch(
            f -> f.getClassName().equals(SentinelMasterCheck.class.getName()));
  }

  /**
   * An idle sentinel client (verdict past a term plus an ask); its first call asks, the first
   * sentinel's link trickles (the ask is held to its 2 s cut). Meanwhile: 8 lockInterruptibly()
   * threads wait for that ask and are interrupted (each must end at once, interrupted, and give
   * its permit back); a tryLock(200 ms) returns within its wait plus one command timeout; a
   * lock() entered with its interrupt flag set acquires once the ask ends and keeps the flag.
   * After all: every permit of the pool is back.
   */
  @Test
  void interruptsAndTimedWaitsDuringAnAsk_noPermitLeaks_boundedWaits() throws Exception {
    sentinels = RedisSentinelSetup.start("cut-await");
    SentinelStaging.slowAutomaticFailover(sentinels);
    List<HostAndPort> real = new ArrayList<>(sentinels.sentinels());
    SentinelAskAttackTest.TrickleProxy trickle =
        new SentinelAskAttackTest.TrickleProxy(real.get(0).getPort(), 0);
    closing.add(trickle);
    int timeoutMillis = 1_000;
    long threadsBefore = deadlineThreads();
    for (int i = 0; i < 5; i++) { // a client that cannot start leaves no deadline thread
      assertThrows(LockException.class, () -> clients.create(Map.of(
          LockClientConfig.MODE, "sentinel",
          LockClientConfig.NODES, real.get(1) + "," + real.get(2),
          LockClientConfig.SENTINEL_MASTER, "no-such-master",
          LockClientConfig.TIMEOUT, "500ms")));
    }
    assertEquals(threadsBefore, deadlineThreads(), "deadline threads of clients never started");
    LockClient a = clients.create(Map.of(
        LockClientConfig.MODE, "sentinel",
        LockClientConfig.NODES, trickle.address() + "," + real.get(1) + "," + real.get(2),
        LockClientConfig.SENTINEL_MASTER, sentinels.masterName(),
        LockClientConfig.TIMEOUT, timeoutMillis + "ms"));
    SentinelCheckRefreshAttackTest.warmUpPool(a, 3);
    int permits = availablePermits(a);
    SentinelMasterCheck check = SentinelCheckRefreshAttackTest.masterCheckOf(a);
    long idle = System.nanoTime();
    Await.until(Duration.ofSeconds(30), () -> millisSince(idle)
        > 2 * SentinelMasterCheck.VERDICT_MILLIS + 2L * timeoutMillis + 1_000,
        "A idle: its verdict is past a term plus an ask");
    trickle.gap(150); // each read within its wait; the ask is ended by its cut
    long asked = check.callerAsks();
    int links = trickle.accepted();
    CompletableFuture<Void> first = CompletableFuture.runAsync(() -> {
      try {
        a.getLock("cut-first").tryLock();
      } catch (LockException e) {
        // only the timing matters here
      }
    });
    Await.until(Duration.ofSeconds(10),
        () -> check.callerAsks() > asked && trickle.accepted() > links,
        "A's first call asks, through the trickling link");

    List<Thread> waiters = new ArrayList<>();
    List<CompletableFuture<String>> outcomes = new ArrayList<>();
    for (int i = 0; i < 8; i++) {
      DistributedLock lock = a.getLock("cut-int-" + i);
      CompletableFuture<String> outcome = new CompletableFuture<>();
      outcomes.add(outcome);
      Thread t = new Thread(() -> {
        try {
          lock.lockInterruptibly();
          lock.unlock();
          outcome.complete("acquired");
        } catch (InterruptedException e) {
          outcome.complete("interrupted");
        } catch (RuntimeException e) {
          outcome.complete(e.toString());
        }
      }, "cut-interruptible-" + i);
      waiters.add(t);
      t.start();
    }
    CompletableFuture<long[]> timed = CompletableFuture.supplyAsync(() -> {
      long from = System.nanoTime();
      boolean got;
      try {
        got = a.getLock("cut-timed").tryLock(200, TimeUnit.MILLISECONDS);
        if (got) {
          a.getLock("cut-timed").unlock();
        }
      } catch (InterruptedException | LockException e) {
        got = false;
      }
      return new long[] {millisSince(from), got ? 1 : 0};
    });
    CompletableFuture<boolean[]> flagged = new CompletableFuture<>();
    Thread plain = new Thread(() -> {
      DistributedLock lock = a.getLock("cut-plain");
      Thread.currentThread().interrupt();
      try {
        lock.lock();
        boolean flag = Thread.currentThread().isInterrupted();
        boolean held = lock.isHeldByCurrentThread();
        Thread.interrupted();
        lock.unlock();
        flagged.complete(new boolean[] {held, flag});
      } catch (Throwable e) {
        flagged.completeExceptionally(e);
      }
    }, "cut-plain");
    plain.start();
    Await.until(Duration.ofSeconds(10), () -> waiters.stream().allMatch(
        t -> waitsInMasterCheck(t) || !t.isAlive()), "the interruptible waiters wait for the ask");
    long interruptedAt = System.nanoTime();
    waiters.forEach(Thread::interrupt);
    for (CompletableFuture<String> o : outcomes) {
      String r = o.get(30, TimeUnit.SECONDS);
      assertTrue(r.equals("interrupted") || r.equals("acquired"), r);
    }
    long tookInterrupted = millisSince(interruptedAt);
    long[] t = timed.get(30, TimeUnit.SECONDS);
    boolean[] p = flagged.get(60, TimeUnit.SECONDS);
    first.join();
    trickle.cut();
    assertTrue(tookInterrupted < 1_500, "interrupted waiters took " + tookInterrupted + " ms");
    assertTrue(t[0] <= 200 + timeoutMillis + 800, "tryLock(200 ms) took " + t[0] + " ms");
    assertTrue(p[0], "lock() with its interrupt flag set acquired");
    assertTrue(p[1], "lock() kept the interrupt flag");
    Await.until(Duration.ofSeconds(20), () -> availablePermitsQuiet(a) == permits,
        "every permit back (" + permits + ")");
    assertEquals(0, Clients.engine(a).topology().acquisitionsQueued());
    a.close();
    Await.until(Duration.ofSeconds(10), () -> deadlineThreads() <= threadsBefore,
        "the client's deadline thread ends with close()");
  }

  private static int availablePermitsQuiet(LockClient a) {
    try {
      return availablePermits(a);
    } catch (Exception e) {
      throw new IllegalStateException(e);
    }
  }

  @SuppressWarnings("unchecked")
  private static Set<Object> sealsOwed(LockClient client) throws Exception {
    Field f = LockEngine.class.getDeclaredField("sealsOwed");
    f.setAccessible(true);
    return (Set<Object>) f.get(Clients.engine(client));
  }

  /**
   * Through a black-holed link: this client's unlock() of one lock is unanswered (a hold's debt)
   * and its forceUnlock() of another is too (a seal owed). Both fail in every cleanup round while
   * the link is down (each round waits a timeout per debt). The link comes back (the held sends
   * arrive, the forceUnlock's and the seal's, in either order): the seal lands within a few
   * retry periods, and the hold is believed exactly while Redis has it, never beside a rival.
   */
  @Test
  void sealOwedBesideAFailingHoldDebt_landsWhenTheLinkReturns() throws Exception {
    LockClient b = viaProxy("1s", "30s");
    b.getLock("cut-force").forceUnlock(); // its script loaded
    DistributedLock debt = b.getLock("cut-debt");
    DistributedLock forced = b.getLock("cut-force");
    debt.lock(60, TimeUnit.SECONDS);
    LockHoldish held = new LockHoldish(take(forced, "force-holder").get(60, TimeUnit.SECONDS));
    proxy.blackHole(true);
    try {
      assertThrows(LockException.class, debt::unlock, "unlock() through a black hole");
      assertThrows(LockException.class, forced::forceUnlock, "forceUnlock() unanswered");
      assertEquals(1, sealsOwed(b).size(), "the seal is owed");
      // A few cleanup rounds fail meanwhile (each waits its timeout).
      long from = System.nanoTime();
      Await.until(Duration.ofSeconds(10), () -> millisSince(from) > 2_500, "rounds fail");
      assertEquals(1, sealsOwed(b).size(), "the seal is still owed");
    } finally {
      proxy.blackHole(false);
    }
    long back = System.nanoTime();
    Await.until(Duration.ofSeconds(15), () -> sealsOwedQuiet(b).isEmpty(),
        "the seal lands once the link is back");
    long landedAfter = millisSince(back);
    assertTrue(landedAfter < 8_000, "the seal landed " + landedAfter + " ms after the link");
    Await.until(Duration.ofSeconds(20), () -> proxy.pendingRequestBytes() == 0,
        "the held copies delivered");
    // Whichever came first (the copy of the forceUnlock, or a held send of its seal), the hold
    // is believed only while Redis has its field, and never while a rival can take the lock.
    Await.until(Duration.ofSeconds(20),
        () -> held.hold.isHeld() == redisState.exists("cut-force"),
        "the hold believed exactly while Redis has it");
    boolean believes = held.hold.isHeld();
    boolean rivalTakes = rival.getLock("cut-force").tryLock();
    if (rivalTakes) {
      rival.getLock("cut-force").unlock();
    }
    assertFalse(believes && rivalTakes, "two holders after the seal landed");
  }

  private void outOfMemory(boolean on) {
    redis.server().withAdmin(j -> j.configSet("maxmemory", on ? "1" : "0"));
  }

  /**
   * The same two debts, then Redis runs out of memory as the link returns: the hold's debt and
   * the seal (whose first write is refused unless a copy left its marker) fail round after
   * round, side by side. Memory comes back: the seal lands within a few fast-rate rounds (not
   * the past-lease rate of 2 s, nor starved by the debt failing before it in each round), the
   * debt is settled, and the force-unlocked hold is believed exactly while Redis has it.
   */
  @Test
  void sealOwedBesideAHoldDebtRefusedByOom_landsOnceMemoryIsBack() throws Exception {
    LockClient b = viaProxy("1s", "30s");
    b.getLock("oom-force").forceUnlock(); // its script loaded
    DistributedLock debt = b.getLock("oom-debt");
    DistributedLock forced = b.getLock("oom-force");
    debt.lock(60, TimeUnit.SECONDS);
    LockHoldish held = new LockHoldish(take(forced, "oom-holder").get(60, TimeUnit.SECONDS));
    long back;
    proxy.blackHole(true);
    try {
      assertThrows(LockException.class, debt::unlock, "unlock() through a black hole");
      assertThrows(LockException.class, forced::forceUnlock, "forceUnlock() unanswered");
      assertEquals(1, sealsOwed(b).size(), "the seal is owed");
      outOfMemory(true);
      proxy.blackHole(false);
      Await.until(Duration.ofSeconds(20), () -> proxy.pendingRequestBytes() == 0,
          "the held copies delivered");
      long from = System.nanoTime();
      Await.until(Duration.ofSeconds(10), () -> millisSince(from) > 2_000,
          "rounds fail under OOM");
      if (redisState.exists("oom-force")) { // no copy ran: the seal's write is refused
        assertEquals(1, sealsOwed(b).size(), "the seal is owed while OOM refuses it");
      }
    } finally {
      proxy.blackHole(false);
      outOfMemory(false);
      back = System.nanoTime();
    }
    Await.until(Duration.ofSeconds(20), () -> sealsOwedQuiet(b).isEmpty(),
        "the seal lands once memory is back");
    long landedAfter = millisSince(back);
    assertTrue(landedAfter < 3_000, "the seal landed " + landedAfter + " ms after memory");
    Await.until(Duration.ofSeconds(20), () -> !redisState.exists("oom-debt"),
        "the debt settled once memory is back");
    Await.until(Duration.ofSeconds(20),
        () -> held.hold.isHeld() == redisState.exists("oom-force"),
        "the hold believed exactly while Redis has it");
    boolean believes = held.hold.isHeld();
    boolean rivalTakes = rival.getLock("oom-force").tryLock();
    if (rivalTakes) {
      rival.getLock("oom-force").unlock();
    }
    assertFalse(believes && rivalTakes, "two holders after the seal landed");
  }

  private record LockHoldish(dev.holdfast.LockHold hold) {
  }

  private static Set<Object> sealsOwedQuiet(LockClient b) {
    try {
      return sealsOwed(b);
    } catch (Exception e) {
      throw new IllegalStateException(e);
    }
  }

  /**
   * A seal owed (forceUnlock() through a black hole) when the client closes: close() returns
   * promptly, the owed seals are dropped, and no thread of the engine is left retrying.
   */
  @Test
  void sealOwedWhenTheClientCloses_closesPromptly_nothingRetries() throws Exception {
    LockClient b = viaProxy("1s", "30s");
    DistributedLock forced = b.getLock("cut-close-force");
    forced.forceUnlock();
    proxy.blackHole(true);
    try {
      assertThrows(LockException.class, forced::forceUnlock, "forceUnlock() unanswered");
      assertEquals(1, sealsOwed(b).size(), "the seal is owed");
      Set<Object> owed = sealsOwed(b);
      long from = System.nanoTime();
      b.close();
      assertTrue(millisSince(from) < 5_000, "close() took " + millisSince(from) + " ms");
      assertTrue(owed.isEmpty(), "owed seals dropped on close");
    } finally {
      proxy.blackHole(false);
    }
  }

  /**
   * A read-write lock: one thread holds the write side and, re-entering, the read side (the
   * hash has 'mode' and both fields). This client's forceUnlock() answered: one HMGET of both
   * fields finds neither; both sides are reported lost, and a rival writes.
   */
  @Test
  void readWriteBothSidesHeld_forceUnlock_bothLost() throws Exception {
    LockClient b = direct();
    DistributedReadWriteLock rw = b.getReadWriteLock("cut-rw");
    LossRecorder losses = LossRecorder.on(b);
    CompletableFuture<boolean[]> after = new CompletableFuture<>();
    java.util.concurrent.CountDownLatch holding = new java.util.concurrent.CountDownLatch(1);
    java.util.concurrent.CountDownLatch forcedDone = new java.util.concurrent.CountDownLatch(1);
    Thread t = new Thread(() -> {
      try {
        rw.writeLock().lock(60, TimeUnit.SECONDS);
        rw.readLock().lock(60, TimeUnit.SECONDS);
        holding.countDown();
        forcedDone.await();
        after.complete(new boolean[] {rw.writeLock().isHeldByCurrentThread(),
            rw.readLock().isHeldByCurrentThread()});
      } catch (Throwable e) {
        after.completeExceptionally(e);
      }
    }, "rw-holder");
    t.start();
    assertTrue(holding.await(30, TimeUnit.SECONDS));
    assertTrue(redisState.exists("cut-rw"));
    try (redis.clients.jedis.Jedis j = redis.server().admin()) {
      assertEquals(3, j.hgetAll("cut-rw").size(), "mode and both sides' fields: "
          + j.hgetAll("cut-rw"));
    }
    rw.writeLock().forceUnlock();
    forcedDone.countDown();
    boolean[] held = after.get(30, TimeUnit.SECONDS);
    assertFalse(held[0], "write side believed after forceUnlock; losses " + losses);
    assertFalse(held[1], "read side believed after forceUnlock; losses " + losses);
    assertTrue(rival.getReadWriteLock("cut-rw").writeLock().tryLock(), "a rival writes");
    rival.getReadWriteLock("cut-rw").writeLock().unlock();
  }
}

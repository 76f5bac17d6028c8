package dev.holdfast.engine;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import dev.holdfast.DistributedLock;
import dev.holdfast.LockClient;
import dev.holdfast.LockClientConfig;
import dev.holdfast.LockException;
import dev.holdfast.testing.Await;
import dev.holdfast.testing.FaultProxy;
import dev.holdfast.testing.RedisServer;
import dev.holdfast.testing.RedisSentinelSetup;
import java.io.IOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Executors;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;
import redis.clients.jedis.DefaultJedisClientConfig;
import redis.clients.jedis.HostAndPort;
import redis.clients.jedis.Jedis;
import redis.clients.jedis.JedisClientConfig;

/**
 * Attack round 23 on 1af6862 ({@link SentinelMasterCheck}: verdicts renewed in the background,
 * a borrow uses the last verdict while another thread asks).
 *
 * <p>The sentinels are real ({@link RedisSentinelSetup}); their switch is staged as in {@link
 * SentinelMasterCheckAttackTest} ({@code SENTINEL REMOVE}/{@code MONITOR}, automatic failover
 * slowed), so a check built before keeps its verdict about the former master, as a client that
 * missed the switch does. A silent sentinel is a loopback socket that is never read: the
 * connection is made (kernel backlog), the command's reply never comes.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
class SentinelCheckRefreshAttackTest {

  private static final int SENTINEL_TIMEOUT_MILLIS = 2_000;
  private static final String LOCK = "refresh-attack-lock";

  @RegisterExtension
  final Clients clients = new Clients();

  private RedisSentinelSetup sentinels;
  private ServerSocket silent;
  private ScheduledExecutorService timer;

  @AfterEach
  void tearDown() throws IOException {
    if (timer != null) {
      timer.shutdownNow();
    }
    if (silent != null) {
      silent.close();
    }
    if (sentinels != null) {
      sentinels.close();
    }
  }

  /**
   * An idle client (or a node not used for a while): its verdict about the master is minutes
   * old. The sentinels switch; well past the documented bound (a term plus an ask) the client's
   * traffic resumes: one thread's call asks the sentinels (one of four is silent, so the ask
   * takes its timeout), and a borrow by any other thread meanwhile finds the asking lock taken
   * and uses the last verdict — the ancient "confirmed" one — on the former master, although
   * every answering sentinel has named the promoted node for seconds. The ask in progress may
   * even be about another node: the lock is one for all nodes.
   */
  @Test
  void borrowWhileAnotherThreadAsks_doesNotAcceptAnAncientVerdict() throws Exception {
    sentinels = RedisSentinelSetup.start("refresh-ancient");
    SentinelStaging.slowAutomaticFailover(sentinels);
    HostAndPort former = sentinels.master().hostAndPort();
    HostAndPort promoted = sentinels.replica().hostAndPort();
    SentinelMasterCheck check = checkWithASilentSentinel();
    check.confirm(former); // the client's last traffic before it went idle
    assertEquals(1, check.callerAsks());

    SentinelStaging.switchSentinelsTo(sentinels, promoted);
    long agreed = System.nanoTime();
    // Past the documented residual: a term plus an ask in progress (twice the sentinel timeout).
    long documentedMillis = SentinelMasterCheck.VERDICT_MILLIS + 2L * SENTINEL_TIMEOUT_MILLIS;
    Await.until(Duration.ofSeconds(30), () -> millisSince(agreed) > documentedMillis + 500,
        "the documented window after the switch passes");

    // Traffic resumes: one thread asks (about the promoted node: a new socket there).
    CompletableFuture<Void> asker = CompletableFuture.runAsync(() -> check.confirm(promoted));
    Await.until(Duration.ofSeconds(10), () -> check.callerAsks() == 2, "another thread asks");
    long borrowAt = millisSince(agreed);
    try {
      check.refuseIfNamedOther(former);
      fail("a borrow of a connection to " + former + " was allowed " + borrowAt + " ms after "
          + "every sentinel named " + promoted + " (documented bound " + documentedMillis
          + " ms)");
    } catch (SentinelMasterCheck.NotConfirmedException expected) {
      // refused: the sentinels name another node
    } finally {
      asker.join();
    }
  }

  /**
   * The same defect end to end. Client A (sentinels behind proxies, timeout 2 s) works, then
   * goes idle; one sentinel goes silent. The sentinels switch to the replica (A misses it: no
   * {@code +switch-master}); B takes a lock on the promoted master. Seconds past the documented
   * bound A's traffic resumes: thread 1's call asks the sentinels (the silent one holds the ask
   * for its timeout); thread 2's tryLock meanwhile borrows A's pooled connection to the former
   * master on the verdict A made before it went idle — and is granted the lock B holds.
   */
  @Test
  void idleClientResumes_secondThreadIsNotGrantedOnTheFormerMaster() throws Exception {
    sentinels = RedisSentinelSetup.start("refresh-resume");
    SentinelStaging.slowAutomaticFailover(sentinels);
    HostAndPort formerNode = sentinels.master().hostAndPort();
    RedisServer replica = sentinels.replica();
    List<FaultProxy> proxies = new ArrayList<>();
    try {
      LockClient a = clientThroughProxies(proxies);
      warmUpPool(a, 6);
      proxies.get(0).blackHole(true);
      long idle = System.nanoTime();
      // Idle past the in-use window and a renewal in progress (twice the sentinel timeout).
      Await.until(Duration.ofSeconds(30), () -> millisSince(idle)
          > 2 * SentinelMasterCheck.VERDICT_MILLIS + 2L * SENTINEL_TIMEOUT_MILLIS + 1_000,
          "A idle: its verdict is no longer renewed");

      replica.withAdmin(Jedis::replicaofNoOne);
      SentinelStaging.switchSentinelsTo(sentinels, replica.hostAndPort());
      long agreed = System.nanoTime();
      LockClient b = clients.create(Map.of(
          LockClientConfig.MODE, "sentinel",
          LockClientConfig.NODES, sentinels.sentinelNodes(),
          LockClientConfig.SENTINEL_MASTER, sentinels.masterName(),
          LockClientConfig.TIMEOUT, "2s"));
      assertTrue(b.getLock(LOCK).tryLock(), "B takes the lock on the promoted master");
      assertEquals(formerNode, Clients.engine(a).topology().primary(),
          "A has not followed the switch");
      long documentedMillis = SentinelMasterCheck.VERDICT_MILLIS + 2L * SENTINEL_TIMEOUT_MILLIS;
      Await.until(Duration.ofSeconds(30), () -> millisSince(agreed) > documentedMillis + 500,
          "the documented window after the switch passes");

      SentinelMasterCheck check = masterCheckOf(a);
      long asked = check.callerAsks();
      CompletableFuture<Void> first = CompletableFuture.runAsync(() -> {
        try {
          a.getLock("first-call").tryLock();
        } catch (LockException expected) {
          // refused: the sentinels name another node
        }
      });
      Await.until(Duration.ofSeconds(10), () -> check.callerAsks() > asked,
          "A's first call asks the sentinels");
      long at = millisSince(agreed);
      boolean granted;
      try {
        granted = a.getLock(LOCK).tryLock();
      } catch (LockException e) {
        granted = false;
      }
      first.join();
      assertFalse(granted, "A was granted the lock B holds, on the former master " + formerNode
          + ", " + at + " ms after every sentinel named " + replica.hostAndPort()
          + " (documented bound " + documentedMillis + " ms)");
    } finally {
      proxies.forEach(FaultProxy::close);
    }
  }

  /**
   * One of three sentinels silent (a host down without a reset): a majority still answers and
   * names the master, so the client should work. But an ask now lasts the silent one's timeout
   * (2 s), longer than a term, and a verdict's age counts from the ask's start: every verdict is
   * expired when stored. A new socket waits for the ask in progress, finds its answer expired
   * and asks again itself, under the one lock: a burst needing N new connections takes N asks
   * in a row (measured: 16 threads, slowest 32 s; the parent used the last verdict instead).
   */
  @Test
  void oneSilentSentinel_burstNeedingNewConnections_isServedInBoundedTime() throws Exception {
    sentinels = RedisSentinelSetup.start("refresh-burst");
    SentinelStaging.slowAutomaticFailover(sentinels);
    List<FaultProxy> proxies = new ArrayList<>();
    java.util.concurrent.ExecutorService pool = null;
    try {
      LockClient a = clientThroughProxies(proxies);
      DistributedLock warmUp = a.getLock("warm-up");
      warmUp.lock();
      warmUp.unlock();
      proxies.get(0).blackHole(true);
      long silentFrom = System.nanoTime();
      Await.until(Duration.ofSeconds(30), () -> millisSince(silentFrom)
          > 2 * SentinelMasterCheck.VERDICT_MILLIS + 2L * SENTINEL_TIMEOUT_MILLIS + 1_000,
          "the verdicts made before the sentinel went silent are past");

      int threads = 16;
      pool = Executors.newFixedThreadPool(threads);
      java.util.concurrent.CountDownLatch start = new java.util.concurrent.CountDownLatch(1);
      List<java.util.concurrent.Future<Long>> calls = new ArrayList<>();
      for (int i = 0; i < threads; i++) {
        DistributedLock lock = a.getLock("burst-" + i);
        calls.add(pool.submit(() -> {
          start.await();
          long began = System.nanoTime();
          assertTrue(lock.tryLock(120, TimeUnit.SECONDS), "granted");
          long took = millisSince(began);
          lock.unlock();
          return took;
        }));
      }
      start.countDown();
      long slowest = 0;
      for (java.util.concurrent.Future<Long> call : calls) {
        slowest = Math.max(slowest, call.get(150, TimeUnit.SECONDS));
      }
      // One ask in progress plus one's own: 2 x (2 x timeout), and slack for a loaded machine.
      long bound = 4L * SENTINEL_TIMEOUT_MILLIS + 6_000;
      assertTrue(slowest < bound, "with 2 of 3 sentinels answering, the slowest of " + threads
          + " concurrent tryLock() took " + slowest + " ms (bound " + bound + " ms)");
    } finally {
      if (pool != null) {
        pool.shutdownNow();
      }
      proxies.forEach(FaultProxy::close);
    }
  }

  /**
   * The part that holds: an idle client whose first borrow after the switch finds nobody asking
   * asks itself and is refused, and so is a new socket.
   */
  @Test
  void idleClient_firstBorrowAfterTheSwitch_isRefused() {
    sentinels = RedisSentinelSetup.start("refresh-idle");
    SentinelStaging.slowAutomaticFailover(sentinels);
    HostAndPort former = sentinels.master().hostAndPort();
    HostAndPort promoted = sentinels.replica().hostAndPort();
    SentinelMasterCheck check = new SentinelMasterCheck(sentinels.masterName(),
        new ArrayList<>(sentinels.sentinels()), sentinelConfig());
    check.confirm(former);
    SentinelStaging.switchSentinelsTo(sentinels, promoted);
    long agreed = System.nanoTime();
    Await.until(Duration.ofSeconds(30),
        () -> millisSince(agreed) > SentinelMasterCheck.VERDICT_MILLIS + 200,
        "a term passes");
    assertThrows(SentinelMasterCheck.NotConfirmedException.class,
        () -> check.refuseIfNamedOther(former));
    assertThrows(SentinelMasterCheck.NotConfirmedException.class, () -> check.confirm(former));
  }

  /**
   * A busy client with the background renewal ticking: the caller never asks after the first
   * verdict, and once the sentinels switch, a borrow of the former master is refused within a
   * term plus an ask (generous slack for a loaded machine).
   */
  @Test
  void backgroundRenewal_keepsCallersOffTheSentinels_andFollowsTheSwitchInBound() {
    sentinels = RedisSentinelSetup.start("refresh-busy");
    SentinelStaging.slowAutomaticFailover(sentinels);
    HostAndPort former = sentinels.master().hostAndPort();
    HostAndPort promoted = sentinels.replica().hostAndPort();
    SentinelMasterCheck check = new SentinelMasterCheck(sentinels.masterName(),
        new ArrayList<>(sentinels.sentinels()), sentinelConfig());
    timer = Executors.newScheduledThreadPool(2);
    ScheduledExecutorService io = timer;
    timer.scheduleAtFixedRate(() -> check.refreshDue(io), 0,
        SentinelMasterCheck.REFRESH_TICK_MILLIS, TimeUnit.MILLISECONDS);
    check.confirm(former);
    long from = System.nanoTime();
    Await.until(Duration.ofSeconds(20), () -> {
      check.refuseIfNamedOther(former);
      return millisSince(from) > 4 * SentinelMasterCheck.VERDICT_MILLIS;
    }, "four terms of borrows");
    assertTrue(check.backgroundAsks() >= 2, "the background renewed: " + check.backgroundAsks());

    SentinelStaging.switchSentinelsTo(sentinels, promoted);
    long agreed = System.nanoTime();
    Await.until(Duration.ofSeconds(20), () -> {
      try {
        check.refuseIfNamedOther(former);
        return false;
      } catch (SentinelMasterCheck.NotConfirmedException e) {
        return true;
      }
    }, "a borrow of the former master is refused");
    long took = millisSince(agreed);
    assertTrue(took < SentinelMasterCheck.VERDICT_MILLIS + 2L * SENTINEL_TIMEOUT_MILLIS + 3_000,
        "refused " + took + " ms after the sentinels agreed");
  }

  /**
   * The refreshing flag is not left set when the executor refuses the renewal (a client
   * closing, a saturated pool), nor when a renewal fails: later ticks renew again.
   */
  @Test
  void renewal_rejectedOrFailing_doesNotStopLaterRenewals() {
    sentinels = RedisSentinelSetup.start("refresh-flag");
    SentinelStaging.slowAutomaticFailover(sentinels);
    HostAndPort master = sentinels.master().hostAndPort();
    SentinelMasterCheck check = new SentinelMasterCheck(sentinels.masterName(),
        new ArrayList<>(sentinels.sentinels()), sentinelConfig());
    check.confirm(master); // in use from now on
    long from = System.nanoTime();
    Await.until(Duration.ofSeconds(10),
        () -> millisSince(from) > SentinelMasterCheck.VERDICT_MILLIS - 150, "the verdict is due");
    check.refreshDue(task -> {
      throw new RejectedExecutionException("closing");
    });
    check.refreshDue(task -> {
      throw new IllegalStateException("a pool that fails otherwise");
    });
    Await.until(Duration.ofSeconds(10), () -> {
      check.refuseIfNamedOther(master);
      check.refreshDue(Runnable::run);
      return check.backgroundAsks() >= 1;
    }, "a later tick renews");
  }

  /** A client reaching each sentinel through a new proxy (added to {@code proxies}). */
  private LockClient clientThroughProxies(List<FaultProxy> proxies) throws IOException {
    for (HostAndPort sentinel : sentinels.sentinels()) {
      proxies.add(new FaultProxy(sentinel.getPort()));
    }
    return clients.create(Map.of(
        LockClientConfig.MODE, "sentinel",
        LockClientConfig.NODES, String.join(",",
            proxies.stream().map(p -> "127.0.0.1:" + p.port()).toList()),
        LockClientConfig.SENTINEL_MASTER, sentinels.masterName(),
        LockClientConfig.TIMEOUT, SENTINEL_TIMEOUT_MILLIS + "ms"));
  }

  /** The check inside a Sentinel-mode client (a private field: read for the probe's timing). */
  static SentinelMasterCheck masterCheckOf(LockClient client) throws Exception {
    RedisTopology topology = Clients.engine(client).topology();
    java.lang.reflect.Field field = topology.getClass().getDeclaredField("masterCheck");
    field.setAccessible(true);
    return (SentinelMasterCheck) field.get(topology);
  }

  /** Several threads hold locks at once: the pool keeps that many connections to the master. */
  static void warmUpPool(LockClient client, int threads) throws Exception {
    java.util.concurrent.CountDownLatch held = new java.util.concurrent.CountDownLatch(threads);
    List<CompletableFuture<Void>> holders = new ArrayList<>();
    java.util.concurrent.ExecutorService pool = Executors.newFixedThreadPool(threads);
    for (int i = 0; i < threads; i++) {
      DistributedLock lock = client.getLock("warm-up-" + i);
      holders.add(CompletableFuture.runAsync(() -> {
        lock.lock();
        try {
          held.countDown();
          held.await(20, TimeUnit.SECONDS);
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
        } finally {
          lock.unlock();
        }
      }, pool));
    }
    try {
      CompletableFuture.allOf(holders.toArray(CompletableFuture[]::new)).get(30, TimeUnit.SECONDS);
    } finally {
      pool.shutdown();
    }
  }

  private SentinelMasterCheck checkWithASilentSentinel() throws IOException {
    silent = new ServerSocket(0, 50, InetAddress.getLoopbackAddress());
    List<HostAndPort> listed = new ArrayList<>();
    listed.add(new HostAndPort(silent.getInetAddress().getHostAddress(), silent.getLocalPort()));
    listed.addAll(sentinels.sentinels());
    return new SentinelMasterCheck(sentinels.masterName(), listed, sentinelConfig());
  }

  private static JedisClientConfig sentinelConfig() {
    return DefaultJedisClientConfig.builder().connectionTimeoutMillis(SENTINEL_TIMEOUT_MILLIS)
        .socketTimeoutMillis(SENTINEL_TIMEOUT_MILLIS).build();
  }

  static long millisSince(long nanos) {
    return (System.nanoTime() - nanos) / 1_000_000L;
  }

}

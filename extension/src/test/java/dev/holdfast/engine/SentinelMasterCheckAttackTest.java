package dev.holdfast.engine;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.holdfast.DistributedLock;
import dev.holdfast.LockClient;
import dev.holdfast.LockClientConfig;
import dev.holdfast.LockException;
import dev.holdfast.testing.Await;
import dev.holdfast.testing.RedisSentinelSetup;
import dev.holdfast.testing.RedisServer;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;
import redis.clients.jedis.DefaultJedisClientConfig;
import redis.clients.jedis.HostAndPort;
import redis.clients.jedis.Jedis;
import redis.clients.jedis.exceptions.JedisConnectionException;

/**
 * Attack round 18 on 677541b ({@link SentinelMasterCheck}: a new connection to a data node only
 * while a majority of the sentinels name it the master and none names another).
 *
 * <p>Where a probe needs sentinels in a state a failover passes through but only for a moment
 * (some sentinels already name the promoted replica, others still the former master), the real
 * sentinels of a {@link RedisSentinelSetup} are put in that state with {@code SENTINEL REMOVE}
 * and {@code SENTINEL MONITOR} (their automatic failover slowed to a minute so that they do not
 * interfere), and the promotion is done with {@code REPLICAOF NO ONE}, as the leader sentinel
 * does it. Neither publishes {@code +switch-master}, so a client built before keeps naming the
 * former master, as one that missed the switch does.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
class SentinelMasterCheckAttackTest {

  private static final String LOCK = "check-attack-lock";

  @RegisterExtension
  final Clients clients = new Clients();

  private RedisSentinelSetup sentinels;

  @AfterEach
  void tearDown() {
    if (sentinels != null) {
      sentinels.close();
    }
  }

  /**
   * The window of every failover: the leader has promoted the replica, the other sentinels (a
   * majority) still name the former master until its hello reaches them (up to 2 s, more on a
   * loaded machine). A former master restarted empty in that window (a supervisor restarting it
   * a few seconds after a crash) passes the check: client A, retrying its calls, opens a
   * connection to it. The sentinels then agree on the promoted node; B takes the lock there. A's
   * connection, opened after the restart, is not closed by anything ("a restart closes them"
   * does not hold for it): A's next tryLock borrows it and is granted the lock B holds, on the
   * former master, for the ~10 s until the sentinels demote it.
   */
  @Test
  void connectionOpenedWhileTheMajorityStillNamedTheFormerMaster_outlivesTheSwitch() {
    sentinels = RedisSentinelSetup.start("stale-window");
    SentinelStaging.slowAutomaticFailover(sentinels);
    LockClient a = warmedUp(config(sentinels.sentinelNodes()));
    RedisServer former = sentinels.master();
    RedisServer replica = sentinels.replica();

    // The crash; the leader promotes the replica; the former master comes back empty while every
    // sentinel but the leader still names it (here: all of them, the leader's word not asked).
    former.kill();
    replica.withAdmin(Jedis::replicaofNoOne);
    former.restartEmpty();
    assertTrue(former.withAdmin(j -> j.info("replication")).contains("role:master"));
    DistributedLock other = a.getLock("opened-in-the-window");
    assertTrue(tryLockRidingOut(other), "A works on the former master while the sentinels name it");
    other.unlock();

    // The hello reaches every sentinel: they all name the promoted node now.
    SentinelStaging.switchSentinelsTo(sentinels, replica.hostAndPort());
    LockClient b = clients.create(config(sentinels.sentinelNodes()));
    assertTrue(b.getLock(LOCK).tryLock(), "B takes the lock on the promoted master");
    assertTrue((boolean) replica.withAdmin(j -> j.exists(LOCK)));
    assertEquals(former.hostAndPort(), Clients.engine(a).topology().primary(),
        "A has not followed the switch");
    // A's verdict about the former master, made in the window, is used for at most its term
    // (the residual the docs state; min-replicas-to-write closes it): past it, A asks again.
    outlastVerdicts();

    boolean aGranted;
    try {
      aGranted = a.getLock(LOCK).tryLock();
    } catch (LockException e) {
      aGranted = false;
    }
    assertFalse((boolean) former.withAdmin(j -> j.exists(LOCK)),
        "nothing was granted on the former master");
    assertFalse(aGranted, "A must not take the lock B holds on the promoted master");
  }

  /**
   * The Javadoc and docs/safety.md: a connection is made only while a majority name the node
   * "and none names another". The loop returns as soon as a majority confirmed, so the sentinels
   * listed after them are never asked: the verdict for the same sentinel states depends on the
   * order of {@code holdfast.redis.nodes}. Listed last, a sentinel naming the promoted node is
   * not heard (the former master passes); listed first, one stale sentinel — a minority — refuses
   * every connection to the real master.
   */
  @Test
  void verdictDoesNotDependOnTheOrderOfTheSentinels() {
    sentinels = RedisSentinelSetup.start("check-order");
    SentinelStaging.slowAutomaticFailover(sentinels);
    RedisServer master = sentinels.master();
    RedisServer replica = sentinels.replica();
    List<HostAndPort> listed = new ArrayList<>(sentinels.sentinels());
    HostAndPort dissenter = listed.get(2);
    // One sentinel (a minority) names another node the master.
    SentinelStaging.monitor(sentinels, dissenter, replica.hostAndPort());

    List<String> verdicts = new ArrayList<>();
    for (List<HostAndPort> order : List.of(listed,
        List.of(listed.get(2), listed.get(0), listed.get(1)))) {
      SentinelMasterCheck check = new SentinelMasterCheck(sentinels.masterName(), order,
          DefaultJedisClientConfig.builder().connectionTimeoutMillis(2_000)
              .socketTimeoutMillis(2_000).build());
      String verdict;
      try {
        verdict = "connects to " + check.getHostAndPort(master.hostAndPort());
      } catch (JedisConnectionException e) {
        verdict = "refused";
      }
      verdicts.add(verdict);
    }
    assertEquals(verdicts.get(1), verdicts.get(0),
        "the same sentinels, listed in another order: " + verdicts);
    assertEquals("refused", verdicts.get(0),
        "a sentinel names " + replica.hostAndPort() + " the master: " + verdicts);
  }

  /**
   * A sentinel listed twice in {@code holdfast.redis.nodes} (a copy-paste, or one sentinel by
   * hostname and by IP): {@code RedisTopology.Sentinel} hands Jedis a set, but the check takes the
   * list as it is, so that sentinel's answer counts twice and makes the majority alone — here
   * against the one other sentinel listed, which names another master.
   */
  @Test
  void sentinelListedTwice_votesOnce() {
    sentinels = RedisSentinelSetup.start("check-twice");
    SentinelStaging.slowAutomaticFailover(sentinels);
    RedisServer master = sentinels.master();
    List<HostAndPort> listed = new ArrayList<>(sentinels.sentinels());
    SentinelStaging.monitor(sentinels, listed.get(2), sentinels.replica().hostAndPort());
    SentinelMasterCheck check = new SentinelMasterCheck(sentinels.masterName(),
        List.of(listed.get(0), listed.get(0), listed.get(2)),
        DefaultJedisClientConfig.builder().connectionTimeoutMillis(2_000)
            .socketTimeoutMillis(2_000).build());
    boolean refused;
    try {
      check.getHostAndPort(master.hostAndPort());
      refused = false;
    } catch (JedisConnectionException e) {
      refused = true;
    }
    assertTrue(refused, "one sentinel confirms " + master.hostAndPort() + ", the only other one "
        + "listed names " + sentinels.replica().hostAndPort());
  }

  /**
   * Cost (measured, not asserted beyond its bound by construction): a burst of 500 threads
   * taking different locks at once makes the pool open its connections, each after asking the
   * sentinels. Every thread must get its lock; the sentinel connections stay within one per
   * sentinel per new data connection.
   */
  @Test
  void burstOfThreads_asksTheSentinelsOncePerNewConnection() throws Exception {
    sentinels = RedisSentinelSetup.start("check-burst");
    LockClient a = clients.create(config(sentinels.sentinelNodes()));
    RedisServer master = sentinels.master();
    long sentinelBefore = sentinelConnections();
    long dataBefore = connectionsReceived(master.hostAndPort());
    int threads = 500;
    java.util.concurrent.CountDownLatch start = new java.util.concurrent.CountDownLatch(1);
    java.util.concurrent.ExecutorService pool =
        java.util.concurrent.Executors.newFixedThreadPool(threads);
    List<java.util.concurrent.Future<Boolean>> results = new ArrayList<>();
    long began = System.nanoTime();
    for (int i = 0; i < threads; i++) {
      DistributedLock lock = a.getLock("burst-" + i);
      results.add(pool.submit(() -> {
        start.await();
        boolean got = lock.tryLock(30, TimeUnit.SECONDS);
        if (got) {
          lock.unlock();
        }
        return got;
      }));
    }
    start.countDown();
    int granted = 0;
    for (java.util.concurrent.Future<Boolean> r : results) {
      granted += r.get(60, TimeUnit.SECONDS) ? 1 : 0;
    }
    long millis = (System.nanoTime() - began) / 1_000_000;
    pool.shutdown();
    long sentinelConns = sentinelConnections() - sentinelBefore - sentinels.sentinels().size();
    long dataConns = connectionsReceived(master.hostAndPort()) - dataBefore - 1;
    System.out.printf("[attack18] burst of %d threads: %d granted in %d ms; %d data connections, "
        + "%d sentinel connections%n", threads, granted, millis, dataConns, sentinelConns);
    assertEquals(threads, granted, "every thread gets its lock");
    assertTrue(sentinelConns <= 3 * dataConns + 3,
        sentinelConns + " sentinel connections for " + dataConns + " data connections");
  }

  /**
   * Cost during an outage (measured): the master is down (no failover), 32 threads wait in
   * tryLock. Every attempt to open a connection asks the sentinels first (they still name the
   * master, so the check passes and the connect is refused). The client must work again once
   * the master is back.
   */
  @Test
  void outage_clientRecoversWhenTheMasterIsBack() throws Exception {
    Outage outage = outage("check-outage");
    assertEquals(outage.threads(), outage.granted(),
        "every waiting thread gets its lock once the master is back");
  }

  /**
   * The storm: with the master down, every pass of a waiting thread's retry loop opens a
   * connection to two sentinels (connect, CLIENT SETNAME, SENTINEL GET-MASTER-ADDR-BY-NAME,
   * close) before its connect is refused — measured here ~960 sentinel connections a second for
   * 32 waiting threads of one client (~30 per thread per second), each leaving a TIME_WAIT
   * socket on the client: about a minute of outage exhausts the 28k ephemeral ports towards a
   * sentinel (Linux reuses TIME_WAIT ports only on loopback by default), and many clients load
   * the single-threaded sentinels while they should be failing over. Before the change a refused
   * connect cost nothing remote. One answer per node shared by concurrent creators, kept for a
   * fraction of a second, would bound this to a few connections per second per client.
   */
  @Test
  void outage_sentinelConnectionsStayBounded() throws Exception {
    Outage outage = outage("check-storm");
    assertTrue(outage.sentinelConnections() <= 50 * outage.seconds(),
        outage.sentinelConnections() + " sentinel connections in " + outage.seconds() + " s for "
            + outage.threads() + " waiting threads of one client");
  }

  private record Outage(int threads, long sentinelConnections, double seconds, int granted) {
  }

  /** Kills the master (no failover) for 4 s while 32 threads wait in tryLock, then restarts it. */
  private Outage outage(String masterName) throws Exception {
    sentinels = RedisSentinelSetup.start(masterName);
    SentinelStaging.slowAutomaticFailover(sentinels);
    LockClient a = warmedUp(config(sentinels.sentinelNodes()));
    RedisServer master = sentinels.master();
    master.kill();
    long sentinelBefore = sentinelConnections();
    long began = System.nanoTime();
    int threads = 32;
    java.util.concurrent.ExecutorService pool =
        java.util.concurrent.Executors.newFixedThreadPool(threads);
    List<java.util.concurrent.Future<Boolean>> results = new ArrayList<>();
    for (int i = 0; i < threads; i++) {
      DistributedLock lock = a.getLock("outage-" + i);
      results.add(pool.submit(() -> {
        try {
          boolean got = lock.tryLock(20, TimeUnit.SECONDS);
          if (got) {
            lock.unlock();
          }
          return got;
        } catch (LockException e) {
          return false;
        }
      }));
    }
    Await.until(Duration.ofSeconds(30), () -> (System.nanoTime() - began) > 4_000_000_000L,
        "4 s of outage");
    long duringOutage = sentinelConnections() - sentinelBefore - sentinels.sentinels().size();
    double seconds = (System.nanoTime() - began) / 1e9;
    master.restart();
    int granted = 0;
    for (java.util.concurrent.Future<Boolean> r : results) {
      granted += r.get(60, TimeUnit.SECONDS) ? 1 : 0;
    }
    pool.shutdown();
    System.out.printf("[attack18] outage with %d waiting threads: %d sentinel connections in "
        + "%.1f s (%.0f/s); %d of %d granted after the restart%n", threads, duringOutage,
        seconds, duringOutage / seconds, granted, threads);
    return new Outage(threads, duringOutage, seconds, granted);
  }

  /**
   * Shape 5, documented (docs/safety.md, "Redis restarted empty"): the master restarts without
   * its data before the sentinels notice (no failover). The check passes (they still name it, and
   * it is the master); the holder's next renewal finds the hold gone and reports LockLost, and
   * another client can take the lock.
   */
  @Test
  void quickRestartWithoutFailover_holderLearnsAtItsNextRenewal() throws Exception {
    sentinels = RedisSentinelSetup.start("check-quick-restart");
    SentinelStaging.slowAutomaticFailover(sentinels);
    LockClient a = clients.create(config(sentinels.sentinelNodes()),
        LockClientConfig.WATCHDOG_TIMEOUT, "3s");
    LossRecorder losses = LossRecorder.on(a);
    DistributedLock held = a.getLock(LOCK);
    assertTrue(held.tryLock());
    RedisServer master = sentinels.master();
    master.restartEmpty();
    LossRecorder.Report lost = losses.awaitFirst(Duration.ofSeconds(30), "the hold gone");
    System.out.println("[attack18] quick restart without failover: " + lost.event());
    LockClient b = clients.create(config(sentinels.sentinelNodes()));
    assertTrue(b.getLock(LOCK).tryLock(10, TimeUnit.SECONDS), "B takes the lock after the loss");
  }

  /**
   * Sentinels down (two of three): pooled connections go on working (docs/safety.md), new
   * ones are refused; once the sentinels are back, new connections are made again.
   */
  @Test
  void majorityOfSentinelsDown_pooledConnectionsWork_andTheClientRecovers() throws Exception {
    sentinels = RedisSentinelSetup.start("check-sentinels-down");
    LockClient a = warmedUp(config(sentinels.sentinelNodes()));
    List<RedisServer> servers = sentinels.sentinelServers();
    servers.get(0).kill();
    servers.get(1).kill();
    DistributedLock pooled = a.getLock("while-sentinels-down");
    assertTrue(pooled.tryLock(), "a pooled connection still works");
    pooled.unlock();
    // Break the pooled connections: new ones must be refused while the sentinels are down.
    breakDataConnections();
    outlastVerdicts();
    boolean refused;
    try {
      refused = !a.getLock("needs-a-new-connection").tryLock();
    } catch (LockException e) {
      refused = true;
    }
    assertTrue(refused, "no new connection without a majority of the sentinels");
    servers.get(0).restart();
    servers.get(1).restart();
    DistributedLock after = a.getLock("after-sentinels-back");
    assertTrue(after.tryLock(20, TimeUnit.SECONDS), "the client recovers with the sentinels");
    after.unlock();
  }

  /**
   * Two of three sentinels silent (a partition that drops packets: connects hang, no refusal):
   * every new data connection first waits a timeout on each silent sentinel. A tryLock() that
   * needs a new connection (its pooled ones broken) — measured: how long does it take, and what
   * does it answer?
   */
  @Test
  void silentSentinels_tryLockNeedingANewConnection_isRefusedInBoundedTime() throws Exception {
    sentinels = RedisSentinelSetup.start("check-silent");
    List<dev.holdfast.testing.FaultProxy> proxies = new ArrayList<>();
    try {
      for (HostAndPort sentinel : sentinels.sentinels()) {
        proxies.add(new dev.holdfast.testing.FaultProxy(sentinel.getPort()));
      }
      LockClient a = warmedUp(config(String.join(",",
          proxies.stream().map(p -> "127.0.0.1:" + p.port()).toList())));
      proxies.get(0).blackHole(true);
      proxies.get(1).blackHole(true);
      breakDataConnections();
      outlastVerdicts();
      long began = System.nanoTime();
      String outcome;
      try {
        outcome = "tryLock() = " + a.getLock("silent").tryLock();
      } catch (LockException e) {
        outcome = e.getClass().getSimpleName() + ": " + e.getMessage();
      }
      long millis = (System.nanoTime() - began) / 1_000_000;
      System.out.println("[attack18] 2 of 3 sentinels silent, timeout 500ms: " + outcome + " after "
          + millis + " ms");
      assertFalse(outcome.equals("tryLock() = true"), "no connection without a majority");
      assertTrue(millis < 30_000, "bounded: " + millis + " ms");
      proxies.forEach(p -> p.blackHole(false));
      DistributedLock after = a.getLock("after-silence");
      assertTrue(after.tryLock(20, TimeUnit.SECONDS), "works again when the sentinels answer");
      after.unlock();
    } finally {
      proxies.forEach(dev.holdfast.testing.FaultProxy::close);
    }
  }

  // --- helpers ---

  /** Returns once every verdict a client made so far is past its term: the next use asks. */
  private static void outlastVerdicts() {
    long from = System.nanoTime();
    Await.until(Duration.ofSeconds(10), () -> System.nanoTime() - from
        > TimeUnit.MILLISECONDS.toNanos(2 * SentinelMasterCheck.VERDICT_MILLIS),
        "two verdict terms pass");
  }

  /** A client that has made its first data connections (a lock taken and released). */
  private LockClient warmedUp(Map<String, String> config) {
    LockClient client = clients.create(config);
    DistributedLock warmUp = client.getLock("warm-up");
    warmUp.lock();
    warmUp.unlock();
    return client;
  }

  /** Closes every client connection of the master: the pools must open new ones. */
  private void breakDataConnections() {
    sentinels.master().withAdmin(j -> j.clientKill(new redis.clients.jedis.params.ClientKillParams()
        .type(redis.clients.jedis.args.ClientType.NORMAL)
        .skipMe(redis.clients.jedis.params.ClientKillParams.SkipMe.YES)));
  }

  private long sentinelConnections() {
    long total = 0;
    for (HostAndPort sentinel : sentinels.sentinels()) {
      total += connectionsReceived(sentinel);
    }
    return total;
  }

  private static long connectionsReceived(HostAndPort node) {
    try (Jedis jedis = new Jedis(node)) {
      for (String line : jedis.info("stats").split("\r?\n")) {
        if (line.startsWith("total_connections_received:")) {
          return Long.parseLong(line.substring(line.indexOf(':') + 1).trim());
        }
      }
    }
    throw new AssertionError("no total_connections_received from " + node);
  }

  /** tryLock with a wait: rides out the broken pooled connections the crash left. */
  private static boolean tryLockRidingOut(DistributedLock lock) {
    try {
      return lock.tryLock(10, TimeUnit.SECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new AssertionError(e);
    }
  }

  private Map<String, String> config(String sentinelNodes) {
    return Map.of(
        LockClientConfig.MODE, "sentinel",
        LockClientConfig.NODES, sentinelNodes,
        LockClientConfig.SENTINEL_MASTER, sentinels.masterName(),
        LockClientConfig.TIMEOUT, "500ms",
        LockClientConfig.SYNC_REPLICAS, "auto");
  }
}

package dev.holdfast.engine;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.holdfast.DistributedLock;
import dev.holdfast.LockClient;
import dev.holdfast.LockClientConfig;
import dev.holdfast.testing.RedisSentinelSetup;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;
import redis.clients.jedis.HostAndPort;

/**
 * Issue 8, the failover double grant, reproduced and closed on a real master, replica and three
 * sentinels.
 *
 * <p>The replica replicates through a {@link BlackHoleProxy}. Black-holing it holds replication
 * back while the master still counts the replica as connected (the link stays open, as in a
 * network partition); the sentinels talk to the replica directly, so it stays promotable.
 * (SIGSTOP would not do: what the master sent would wait in kernel buffers and be applied on
 * SIGCONT.) Then client A acquires, the master is killed, the sentinels promote the replica —
 * which never saw A's grant — and client B acquires on the new master.
 *
 * <p>With {@code sync-replicas=none} both are granted while A has not been told of any loss:
 * two holders, so the flaw is real. With {@code auto} A's acquisition is never granted (no
 * replica acknowledged it, so it is rolled back), and only B holds the lock.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
class FailoverSafetyTest {

  private static final String LOCK = "failover-lock";

  @RegisterExtension
  final Clients clients = new Clients();

  private BlackHoleProxy replication;
  private RedisSentinelSetup sentinels;

  @AfterEach
  void tearDown() {
    try {
      if (sentinels != null) {
        sentinels.close();
      }
    } finally {
      if (replication != null) {
        replication.close();
      }
    }
  }

  @Test
  void syncReplicasNone_replicationHeldBack_failoverGrantsTheLockTwice() throws Exception {
    // A long watchdog: A's first renewal (a third of it) comes well after any failover, so the
    // window in which A believes it holds the lock is not closed by chance.
    Outcome o = acquireAcrossFailover("none", "60s");

    assertTrue(o.aGranted(), "A acquired on the old master");
    assertTrue(o.bGranted(), "B acquired on the promoted replica");
    assertEquals(0, o.aLossesWhenBGranted(), "A had not been told of a loss when B was granted");
    assertTrue(o.aBelievedWhenBGranted(), "A's client still believed it held the lock");
    assertTrue(o.bGrantedAt() > o.aGrantedAt());
    // The flaw, observed: two holders at the same time.
  }

  @Test
  void syncReplicasAuto_replicationHeldBack_aIsNeverGranted_soAtMostOneHolder() throws Exception {
    Outcome o = acquireAcrossFailover("auto", "60s");

    assertFalse(o.aGranted(), "A's grant was not acknowledged by the replica: not granted");
    assertFalse(o.aKeyLeftOnOldMaster(), "A's grant was rolled back on the old master");
    assertTrue(o.bGranted(), "B acquired on the promoted replica");
    assertFalse(o.aBelievedWhenBGranted(), "A holds nothing");
  }

  /**
   * The choreography, with A and B configured with {@code sync-replicas=<syncReplicas>}: hold
   * replication back, A tries once, kill the master, await the promotion, B tries once.
   */
  private Outcome acquireAcrossFailover(String syncReplicas, String watchdog) throws Exception {
    sentinels = RedisSentinelSetup.start("failover-safety", master -> {
      try {
        replication = new BlackHoleProxy(master.getPort());
      } catch (IOException e) {
        throw new UncheckedIOException(e);
      }
      return new HostAndPort("127.0.0.1", replication.port());
    });
    RedisProbe oldMaster = new RedisProbe(sentinels.master());
    HostAndPort replicaAddress = sentinels.replica().hostAndPort();
    RedisProbe replica = new RedisProbe(sentinels.replica());
    Map<String, String> config = Map.of(
        LockClientConfig.MODE, "sentinel",
        LockClientConfig.NODES, sentinels.sentinelNodes(),
        LockClientConfig.SENTINEL_MASTER, sentinels.masterName(),
        LockClientConfig.TIMEOUT, "500ms",
        LockClientConfig.WATCHDOG_TIMEOUT, watchdog,
        LockClientConfig.SYNC_REPLICAS, syncReplicas,
        LockClientConfig.SYNC_TIMEOUT, "300ms");

    LockClient a = clients.create(config);
    LossRecorder aLosses = LossRecorder.on(a);
    DistributedLock warmUp = a.getLock("warm-up"); // loads the scripts while replication flows
    warmUp.lock();
    warmUp.unlock();

    replication.blackHole(true);
    assertEquals(1, oldMaster.connectedReplicas(), "the master still counts the replica");
    boolean aGranted = a.getLock(LOCK).tryLock();
    long aGrantedAt = System.nanoTime();
    boolean aKeyLeft = oldMaster.exists(LOCK);
    assertEquals(aGranted, aKeyLeft, "the old master holds the lock exactly when A was granted");
    assertFalse(replica.exists(LOCK), "replication is held back");

    // kill -9 the master; returns once every sentinel reports the replica as a writable master
    assertEquals(replicaAddress, sentinels.failover());
    assertFalse(replica.exists(LOCK), "the new master never saw A's grant");

    LockClient b = clients.create(config);
    boolean bGranted = b.getLock(LOCK).tryLock();
    long bGrantedAt = System.nanoTime();
    int aLossesWhenBGranted = aLosses.count();
    Hold aHold = Clients.engine(a).holds().get(new Hold.Id(LOCK, Thread.currentThread().getId()));
    boolean aBelieved = aHold != null && aHold.count() > 0 && aHold.active()
        && aHold.believedAt(bGrantedAt);
    if (aGranted) {
      assertNotNull(aHold, "A's client has a hold");
    }
    return new Outcome(aGranted, aGrantedAt, aKeyLeft, bGranted, bGrantedAt, aLossesWhenBGranted,
        aBelieved);
  }

  /** What the choreography observed; instants are {@link System#nanoTime()}. */
  private record Outcome(boolean aGranted, long aGrantedAt, boolean aKeyLeftOnOldMaster,
      boolean bGranted, long bGrantedAt, int aLossesWhenBGranted, boolean aBelievedWhenBGranted) {
  }
}

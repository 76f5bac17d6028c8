package dev.holdfast.engine;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.holdfast.DistributedLock;
import dev.holdfast.LockClient;
import dev.holdfast.LockClientConfig;
import dev.holdfast.LockException;
import dev.holdfast.testing.Await;
import dev.holdfast.testing.FaultProxy;
import dev.holdfast.testing.RedisSentinelSetup;
import dev.holdfast.testing.RedisServer;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;
import redis.clients.jedis.HostAndPort;

/**
 * A Sentinel client that has not followed a failover must not take locks on the former master
 * when it comes back empty (found by the replica model soak: a lock kept by one client was taken
 * by another in the same process, whose renewals had just found its own holds gone).
 *
 * <p>Client A reaches the sentinels through {@link FaultProxy}s, black-holed before the failover,
 * so it never hears {@code +switch-master} and still names the former master; B talks to the
 * sentinels directly. The former master is restarted without its data: for about ten seconds,
 * until the sentinels demote it, it answers as an empty master at the address A still uses.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
class SentinelFormerMasterTest {

  private static final String LOCK = "former-master-lock";

  @RegisterExtension
  final Clients clients = new Clients();

  private RedisSentinelSetup sentinels;
  private final List<FaultProxy> proxies = new ArrayList<>();

  @AfterEach
  void tearDown() {
    proxies.forEach(FaultProxy::close);
    if (sentinels != null) {
      sentinels.close();
    }
  }

  @Test
  void clientThatMissedTheSwitch_takesNoLockOnTheFormerMasterRestartedEmpty() throws Exception {
    sentinels = RedisSentinelSetup.start("former-master");
    for (HostAndPort sentinel : sentinels.sentinels()) {
      proxies.add(new FaultProxy(sentinel.getPort()));
    }
    LockClient a = clients.create(config(proxies.stream().map(p -> "127.0.0.1:" + p.port())
        .collect(Collectors.joining(","))));
    DistributedLock warmUp = a.getLock("warm-up");
    warmUp.lock();
    warmUp.unlock();
    RedisServer former = sentinels.master();

    proxies.forEach(p -> p.blackHole(true)); // A hears nothing from the sentinels from now on
    HostAndPort promoted = sentinels.failover();
    LockClient b = clients.create(config(sentinels.sentinelNodes()));
    assertTrue(b.getLock(LOCK).tryLock(), "B takes the lock on the promoted master");

    former.restartEmpty(); // an empty master at the address A still uses, until demoted
    assertEquals(former.hostAndPort(), Clients.engine(a).topology().primary(),
        "A has not followed the switch");
    assertTrue(former.withAdmin(j -> j.info("replication")).contains("role:master"),
        "the former master answers as a master");
    boolean aGranted;
    try {
      aGranted = a.getLock(LOCK).tryLock();
    } catch (LockException e) {
      aGranted = false; // refused: no sentinel confirmed the node A still names
    }
    assertFalse(aGranted, "A must not take the lock B holds on the promoted master");
    assertFalse((boolean) former.withAdmin(j -> j.exists(LOCK)),
        "nothing was granted on the former master");
    // Reads go through the same check: the former master would answer "not locked".
    Boolean aSeesLocked;
    try {
      aSeesLocked = a.getLock(LOCK).isLocked();
    } catch (LockException e) {
      aSeesLocked = null; // refused: no sentinel confirmed the node
    }
    assertFalse(Boolean.FALSE.equals(aSeesLocked), "A must not read B's lock as free");

    // Once A hears the sentinels again it follows the switch and works on the promoted master.
    proxies.forEach(p -> p.blackHole(false));
    Await.until(Duration.ofSeconds(60), () -> promoted.equals(
        Clients.engine(a).topology().primary()), "A follows the switch to " + promoted);
    DistributedLock other = a.getLock("after-the-switch");
    assertTrue(other.tryLock(10, TimeUnit.SECONDS), "A takes a free lock on the promoted master");
    assertTrue((boolean) sentinels.master().withAdmin(j -> j.exists("after-the-switch")));
    other.unlock();
    assertFalse(a.getLock(LOCK).tryLock(), "A sees B's hold");
  }

  /**
   * The check's verdicts are renewed in the background while the client is busy, so that lock
   * calls do not wait for the sentinels (they used to: one call per verdict term asked them
   * itself, up to twice the sentinel timeout when they were silent), and not at all once the
   * client is idle.
   */
  @Test
  void busyClient_findsVerdictsRenewedInTheBackground_idleClientAsksNothing() throws Exception {
    sentinels = RedisSentinelSetup.start("renewed-verdicts");
    LockClient a = clients.create(config(sentinels.sentinelNodes()));
    DistributedLock lock = a.getLock("busy");
    lock.lock();
    lock.unlock(); // the first verdict: asked by the caller, there is none yet
    SentinelMasterCheck check = masterCheck(a);
    long callerAsksBefore = check.callerAsks();
    long busyUntil = System.nanoTime() + TimeUnit.SECONDS.toNanos(3);
    int calls = 0;
    while (System.nanoTime() < busyUntil) {
      assertTrue(lock.tryLock(5, TimeUnit.SECONDS));
      lock.unlock();
      calls++;
      Thread.sleep(10); // pacing: a client doing lock work (not a synchronisation)
    }
    long background = check.backgroundAsks();
    long byCallers = check.callerAsks() - callerAsksBefore;
    assertTrue(background >= 3, "verdicts renewed in the background during " + calls
        + " calls: " + background);
    assertTrue(byCallers < background, "callers asked " + byCallers + " times, the background "
        + background);

    // Idle: past the in-use window nothing more is asked.
    long idleFrom = System.nanoTime();
    Await.until(Duration.ofSeconds(10), () -> System.nanoTime() - idleFrom
        > TimeUnit.MILLISECONDS.toNanos(4 * SentinelMasterCheck.VERDICT_MILLIS), "idle a while");
    long settled = check.backgroundAsks();
    long observeFrom = System.nanoTime();
    Await.until(Duration.ofSeconds(10), () -> System.nanoTime() - observeFrom
        > TimeUnit.MILLISECONDS.toNanos(4 * SentinelMasterCheck.VERDICT_MILLIS), "observed");
    assertEquals(settled, check.backgroundAsks(), "an idle client asks the sentinels nothing");
  }

  private static SentinelMasterCheck masterCheck(LockClient client) throws Exception {
    RedisTopology topology = Clients.engine(client).topology();
    var field = topology.getClass().getDeclaredField("masterCheck");
    field.setAccessible(true);
    return (SentinelMasterCheck) field.get(topology);
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

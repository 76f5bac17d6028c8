package dev.holdfast.engine;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.holdfast.DistributedLock;
import dev.holdfast.LockClient;
import dev.holdfast.testing.RedisExtension;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import redis.clients.jedis.Jedis;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * Round trips the client saves: a thousand watchdog holds on one server cost one renewal call per
 * round, and a wait too short to need a subscription does not subscribe.
 */
class StandaloneRoundTripsTest {

  @RegisterExtension
  static final RedisExtension redis = RedisExtension.standalone();

  @RegisterExtension
  final Clients clients = new Clients();

  @Test
  void thousandWatchdogHolds_renewedWithOneCallPerRound() throws Exception {
    redis.flushAll();
    LockClient client = clients.create(Map.of("holdfast.redis.address", redis.server().uri(),
        "holdfast.watchdog-timeout", RenewalCounting.WATCHDOG));
    List<DistributedLock> held = RenewalCounting.lockMany(client, 1_000);
    long calls = RenewalCounting.evalshaCallsDuringWindow(List.of(redis.server())).get(0);
    // ~7 rounds of one call each; in chunks of 256 holds it would be ~28.
    assertTrue(calls >= 3 && calls <= 12, "renewal calls in the window: " + calls);
    for (DistributedLock lock : held) {
      assertTrue(lock.isHeldByCurrentThread(), lock.getName() + " was not kept");
      lock.unlock();
    }
  }

  @Test
  void shortWait_pollsOnceInsteadOfSubscribing() throws Exception {
    redis.flushAll();
    LockClient holder = clients.create(Map.of("holdfast.redis.address", redis.server().uri()));
    LockClient waiter = clients.create(Map.of("holdfast.redis.address", redis.server().uri()));
    DistributedLock held = holder.getLock("short-wait");
    held.lock();
    redis.server().withAdmin(Jedis::configResetStat);
    boolean acquired = CompletableFuture.supplyAsync(() -> {
      try {
        return waiter.getLock("short-wait").tryLock(4, TimeUnit.MILLISECONDS);
      } catch (InterruptedException e) {
        throw new IllegalStateException(e);
      }
    }).get(10, TimeUnit.SECONDS);
    assertFalse(acquired);
    String stats = redis.server().withAdmin(j -> j.info("commandstats"));
    assertFalse(stats.contains("cmdstat_subscribe:"), "a 4ms wait subscribed: " + stats);
    Matcher calls = Pattern.compile("cmdstat_evalsha:calls=(\\d+)").matcher(stats);
    assertTrue(calls.find(), stats);
    long tries = Long.parseLong(calls.group(1));
    // One try and one retry at the wait's end (just one if the first try outlasted the wait).
    assertTrue(tries >= 1 && tries <= 2, "acquire calls: " + tries);
    held.unlock();
  }

  /**
   * The local-handoff budget pauses this client's own attempts after a release through Redis only
   * when another process is subscribed to the lock's channel: with nobody else the pause would
   * leave a hot key idle.
   */
  @Test
  void othersSubscribed_countsOnlyOtherProcessesWaiters() throws Exception {
    redis.flushAll();
    Map<String, String> config = Map.of("holdfast.redis.address", redis.server().uri());
    LockClient local = clients.create(config);
    LockClient remote = clients.create(config);
    RedisTopology topology = Clients.engine(local).topology();
    DistributedLock lock = local.getLock("others");
    String channel = "redisson_lock__channel:{others}";
    assertFalse(topology.othersSubscribed("others", channel, 0), "nobody waits");
    lock.lock();
    CompletableFuture<Boolean> waiter = CompletableFuture.supplyAsync(() -> {
      try {
        return remote.getLock("others").tryLock(20, TimeUnit.SECONDS);
      } catch (InterruptedException e) {
        throw new IllegalStateException(e);
      }
    });
    dev.holdfast.testing.Await.until(java.time.Duration.ofSeconds(10),
        () -> topology.othersSubscribed("others", channel, 0), "the remote waiter subscribed");
    assertTrue(topology.othersSubscribed("others", channel, 0));
    assertFalse(topology.othersSubscribed("others", channel, 1),
        "one subscriber, counted as our own, is nobody else");
    lock.unlock();
    assertTrue(waiter.get(10, TimeUnit.SECONDS));
  }
}

package dev.holdfast.engine;

import dev.holdfast.testing.Await;
import dev.holdfast.testing.RedisSentinelSetup;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import redis.clients.jedis.HostAndPort;
import redis.clients.jedis.Jedis;

/**
 * Puts the real sentinels of a {@link RedisSentinelSetup} in the states a failover passes
 * through, for probes that stage one themselves: {@code SENTINEL REMOVE} and {@code SENTINEL
 * MONITOR} publish no {@code +switch-master}, so a client built before keeps naming the former
 * master, as one that missed the switch does.
 */
final class SentinelStaging {
  private SentinelStaging() {
  }

  /** Sentinels in a test must not fail over by themselves while a probe stages one. */
  static void slowAutomaticFailover(RedisSentinelSetup setup) {
    for (HostAndPort sentinel : setup.sentinels()) {
      try (Jedis jedis = new Jedis(sentinel)) {
        jedis.sentinelSet(setup.masterName(), Map.of("down-after-milliseconds", "60000"));
      }
    }
  }

  /** What the hello of a failover does to every sentinel: it names {@code node} the master. */
  static void switchSentinelsTo(RedisSentinelSetup setup, HostAndPort node) {
    for (HostAndPort sentinel : setup.sentinels()) {
      monitor(setup, sentinel, node);
    }
    Await.until(Duration.ofSeconds(20), () -> setup.sentinels().stream().allMatch(
        s -> node.equals(masterAccordingTo(setup, s))), "every sentinel names " + node);
  }

  /** {@code sentinel} names {@code node} the master (automatic failover slowed, as above). */
  static void monitor(RedisSentinelSetup setup, HostAndPort sentinel, HostAndPort node) {
    try (Jedis jedis = new Jedis(sentinel)) {
      jedis.sentinelRemove(setup.masterName());
      jedis.sentinelMonitor(setup.masterName(), node.getHost(), node.getPort(), 2);
      jedis.sentinelSet(setup.masterName(), Map.of("down-after-milliseconds", "60000"));
    }
  }

  /** {@return the master {@code sentinel} names, or null if it names none} */
  static HostAndPort masterAccordingTo(RedisSentinelSetup setup, HostAndPort sentinel) {
    try (Jedis jedis = new Jedis(sentinel)) {
      List<String> address = jedis.sentinelGetMasterAddrByName(setup.masterName());
      return address == null || address.size() != 2 ? null
          : new HostAndPort(address.get(0), Integer.parseInt(address.get(1)));
    }
  }
}

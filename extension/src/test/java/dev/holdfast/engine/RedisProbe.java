package dev.holdfast.engine;

import dev.holdfast.LockClient;
import dev.holdfast.testing.RedisServer;
import java.util.Set;
import redis.clients.jedis.Jedis;

/**
 * Reads one server's state directly (fresh admin connection per call), for assertions about what
 * Redis holds rather than what a client believes.
 */
record RedisProbe(RedisServer server) {

  private static final Set<String> SCRIPT_COMMANDS =
      Set.of("eval", "evalsha", "eval_ro", "evalsha_ro", "fcall", "fcall_ro");
  private static final Set<String> SUBSCRIBE_COMMANDS = Set.of("subscribe", "ssubscribe");

  /** The hash field of the calling thread of {@code client}. */
  static String fieldOf(LockClient client) {
    return client.getClientId() + ":" + Thread.currentThread().getId();
  }

  String hget(String key, String field) {
    try (Jedis jedis = server.admin()) {
      return jedis.hget(key, field);
    }
  }

  String get(String key) {
    try (Jedis jedis = server.admin()) {
      return jedis.get(key);
    }
  }

  long pttl(String key) {
    try (Jedis jedis = server.admin()) {
      return jedis.pttl(key);
    }
  }

  boolean exists(String key) {
    try (Jedis jedis = server.admin()) {
      return jedis.exists(key);
    }
  }

  long subscribers(String channel) {
    try (Jedis jedis = server.admin()) {
      return jedis.pubsubNumSub(channel).getOrDefault(channel, 0L);
    }
  }

  /** Script calls of any kind served so far ({@code INFO commandstats}). */
  long scriptCalls() {
    return calls(SCRIPT_COMMANDS);
  }

  /** Replicas the server counts as connected ({@code connected_slaves}). */
  long connectedReplicas() {
    try (Jedis jedis = server.admin()) {
      for (String line : jedis.info("replication").split("\r?\n")) {
        if (line.startsWith("connected_slaves:")) {
          return Long.parseLong(line.substring("connected_slaves:".length()).trim());
        }
      }
      throw new IllegalStateException("INFO replication has no connected_slaves");
    }
  }

  /** {@code WAIT} calls served so far. */
  long waitCalls() {
    return calls(Set.of("wait"));
  }

  /** {@code SUBSCRIBE} and {@code SSUBSCRIBE} calls served so far. */
  long subscribeCalls() {
    return calls(SUBSCRIBE_COMMANDS);
  }

  private long calls(Set<String> commands) {
    try (Jedis jedis = server.admin()) {
      long calls = 0;
      for (String line : jedis.info("commandstats").split("\r?\n")) {
        if (!line.startsWith("cmdstat_")) {
          continue;
        }
        String command = line.substring("cmdstat_".length(), line.indexOf(':'));
        if (commands.contains(command)) {
          calls += Long.parseLong(line.replaceAll("^cmdstat_\\w+:calls=(\\d+),.*", "$1"));
        }
      }
      return calls;
    }
  }
}

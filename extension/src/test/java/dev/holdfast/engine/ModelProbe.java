package dev.holdfast.engine;

import java.util.List;
import redis.clients.jedis.DefaultJedisClientConfig;
import redis.clients.jedis.HostAndPort;
import redis.clients.jedis.Jedis;

/**
 * The exclusion probe: one connection of one actor to a separate redis-server that no fault
 * ever touches. Entering a window increments {@code probe:<lock>} and adds the window to
 * {@code probe-in:<lock>}, atomically, and answers the count and who is inside; a count above 1
 * means two holders at once, whatever the library said. Leaving undoes both.
 *
 * <p>Not thread-safe: one per actor thread.
 */
final class ModelProbe implements AutoCloseable {
  /** KEYS[1] counter, KEYS[2] set of windows inside; ARGV[1] window id; returns {count, set}. */
  private static final String ENTER = """
      local n = redis.call('incr', KEYS[1])
      redis.call('sadd', KEYS[2], ARGV[1])
      return {n, redis.call('smembers', KEYS[2])}
      """;
  /** KEYS and ARGV as for ENTER; returns the count left. */
  private static final String EXIT = """
      redis.call('srem', KEYS[2], ARGV[1])
      return redis.call('decr', KEYS[1])
      """;

  private final Jedis jedis;

  ModelProbe(int port) {
    this.jedis = new Jedis(new HostAndPort("127.0.0.1", port), DefaultJedisClientConfig.builder()
        .connectionTimeoutMillis(2_000).socketTimeoutMillis(5_000)
        .autoNegotiateProtocol(false).build());
  }

  /** Who was inside on entry, this window included. */
  record Entry(long count, List<String> inside) {
  }

  Entry enter(String lock, String window) {
    List<?> reply = (List<?>) jedis.eval(ENTER, List.of("probe:" + lock, "probe-in:" + lock),
        List.of(window));
    List<String> inside = ((List<?>) reply.get(1)).stream().map(String::valueOf).toList();
    return new Entry(((Number) reply.get(0)).longValue(), inside);
  }

  void exit(String lock, String window) {
    jedis.eval(EXIT, List.of("probe:" + lock, "probe-in:" + lock), List.of(window));
  }

  @Override
  public void close() {
    jedis.close();
  }
}

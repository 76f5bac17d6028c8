package dev.holdfast.engine;

import java.util.List;
import redis.clients.jedis.DefaultJedisClientConfig;
import redis.clients.jedis.HostAndPort;
import redis.clients.jedis.Jedis;

/**
 * The exclusion probe: one connection of one actor to a separate redis-server that no fault
 * ever touches. Entering a window increments {@code probe:<lock>} and adds the window, tagged
 * with its mode ({@code r:} shared, {@code w:} exclusive), to {@code probe-in:<lock>},
 * atomically, and answers who is inside; a window that finds a conflicting one inside (any
 * other, unless both are shared) means two holders at once, whatever the library said. Leaving
 * undoes both.
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

  /**
   * What a window found on entry.
   *
   * @param count the windows inside, this one included
   * @param conflicting the other windows inside that conflict with this one
   */
  record Entry(long count, List<String> conflicting) {
  }

  /** Enters {@code window} on {@code lock}; a {@code shared} window conflicts only with others. */
  Entry enter(String lock, String window, boolean shared) {
    List<?> reply = (List<?>) jedis.eval(ENTER, List.of("probe:" + lock, "probe-in:" + lock),
        List.of(tagged(window, shared)));
    List<String> conflicting = ((List<?>) reply.get(1)).stream().map(String::valueOf)
        .filter(w -> !w.substring(2).equals(window) && !(shared && w.startsWith("r:")))
        .map(w -> w.substring(2)).toList();
    return new Entry(((Number) reply.get(0)).longValue(), conflicting);
  }

  void exit(String lock, String window, boolean shared) {
    jedis.eval(EXIT, List.of("probe:" + lock, "probe-in:" + lock),
        List.of(tagged(window, shared)));
  }

  private static String tagged(String window, boolean shared) {
    return (shared ? "r:" : "w:") + window;
  }

  @Override
  public void close() {
    jedis.close();
  }
}

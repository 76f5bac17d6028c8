package dev.holdfast.engine;

import dev.holdfast.DistributedLock;
import dev.holdfast.LockClient;
import dev.holdfast.testing.RedisServer;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import redis.clients.jedis.Jedis;

/**
 * Counts renewal script calls: the watchdog renews many holds with few calls, one per node and
 * round for up to {@link LeaseWatchdog#BATCH} holds. Counted with {@code INFO commandstats} over a
 * window of about seven renewal rounds, with generous bounds: what the tests check is the order of
 * magnitude (per node, not per slot or per 256 holds).
 */
final class RenewalCounting {
  private static final Pattern EVALSHA_CALLS =
      Pattern.compile("cmdstat_evalsha:calls=(\\d+)");
  /** Renewal every 300 ms. */
  static final String WATCHDOG = "900ms";
  static final long WINDOW_MILLIS = 2_100;

  private RenewalCounting() {
  }

  static List<DistributedLock> lockMany(LockClient client, int count) {
    List<DistributedLock> held = new ArrayList<>();
    for (int i = 0; i < count; i++) {
      DistributedLock lock = client.getLock("renewed-" + i);
      lock.lock();
      held.add(lock);
    }
    return held;
  }

  /** evalsha calls each server served during a window of idle holds. */
  static List<Long> evalshaCallsDuringWindow(List<RedisServer> servers)
      throws InterruptedException {
    servers.forEach(s -> s.withAdmin(Jedis::configResetStat));
    Thread.sleep(WINDOW_MILLIS); // a measurement window, not synchronisation
    List<Long> calls = new ArrayList<>();
    for (RedisServer s : servers) {
      Matcher m = EVALSHA_CALLS.matcher(s.withAdmin(j -> j.info("commandstats")));
      calls.add(m.find() ? Long.parseLong(m.group(1)) : 0);
    }
    return calls;
  }
}

package dev.holdfast.example.stock;

import jakarta.annotation.PreDestroy;
import jakarta.enterprise.context.ApplicationScoped;
import jakarta.inject.Inject;
import java.net.URI;
import java.time.Instant;
import java.util.List;
import java.util.OptionalInt;
import org.eclipse.microprofile.config.inject.ConfigProperty;
import redis.clients.jedis.RedisClient;
import redis.clients.jedis.params.ScanParams;
import redis.clients.jedis.resps.ScanResult;

/**
 * Stock levels, one Redis string per SKU in the Redis the locks use, so that every instance sees
 * the same numbers. Deliberately plain GET and SET: making a reservation safe is the lock's job.
 *
 * <p>Except for {@link #setUnitsFenced}: a fenced resource, which a lock holder paused past its
 * lease cannot overwrite once a later holder has written.
 */
@ApplicationScoped
public class StockStore {

  /* Not "stock:": that is where the lock "stock:{sku}" keeps its hash. */
  private static final String KEY_PREFIX = "stock-level:";
  /* The highest fencing token a SKU's level was written with. */
  private static final String TOKEN_PREFIX = "stock-fence:";
  /* Every run of the snapshot job, oldest first (not "stock-snapshot": that is the job's lock). */
  private static final String SNAPSHOTS_KEY = "stock-snapshots";
  /* How many runs the list keeps: the newest. */
  private static final int SNAPSHOTS_KEPT = 1000;

  /**
   * The fenced write, in one round trip and atomically: a refused write changes nothing.
   *
   * <pre>
   * KEYS[1] the SKU's level, KEYS[2] the highest token it was written with
   * ARGV[1] the new level, ARGV[2] the writer's fencing token
   * returns 1 if written, 0 if refused: ARGV[2] is not greater than KEYS[2]
   * </pre>
   *
   * Tokens stay below 2^53, so Lua's numbers compare them exactly. (The two keys are in different
   * Cluster slots: this store is for a standalone Redis, like the rest of the example.)
   */
  private static final String SET_IF_NEWER_TOKEN = """
      local last = tonumber(redis.call('get', KEYS[2]) or '0')
      if tonumber(ARGV[2]) <= last then
        return 0
      end
      redis.call('set', KEYS[1], ARGV[1])
      redis.call('set', KEYS[2], ARGV[2])
      return 1
      """;

  private final RedisClient redis;

  @Inject
  StockStore(@ConfigProperty(name = "holdfast.redis.address") String redisAddress) {
    this.redis = RedisClient.create(URI.create(redisAddress));
  }

  /** The units left, or empty if the SKU was never stocked. */
  public OptionalInt units(String sku) {
    String units = redis.get(KEY_PREFIX + sku);
    return units == null ? OptionalInt.empty() : OptionalInt.of(Integer.parseInt(units));
  }

  /** Sets the level, whoever writes it. */
  public void setUnits(String sku, int units) {
    redis.set(KEY_PREFIX + sku, Integer.toString(units));
  }

  /**
   * Sets the level if {@code token} is greater than every token the SKU's level was written with
   * before: one write per hold of a {@link dev.holdfast.FencedLock}, and none from a holder whose
   * lock has passed to another holder that wrote since.
   *
   * @return whether the level was written; if not, nothing changed
   */
  public boolean setUnitsFenced(String sku, int units, long token) {
    Object written = redis.eval(SET_IF_NEWER_TOKEN, List.of(KEY_PREFIX + sku, TOKEN_PREFIX + sku),
        List.of(Integer.toString(units), Long.toString(token)));
    return Long.valueOf(1).equals(written);
  }

  /** Deletes the level; the SKU's highest token stays, so that no stale holder can write. */
  public void delete(String sku) {
    redis.del(KEY_PREFIX + sku);
  }

  /** How many SKUs are stocked, with how many units in all. */
  public Totals totals() {
    int skus = 0;
    long units = 0;
    ScanParams match = new ScanParams().match(KEY_PREFIX + "*").count(500);
    String cursor = ScanParams.SCAN_POINTER_START;
    do {
      ScanResult<String> page = redis.scan(cursor, match);
      for (String key : page.getResult()) {
        String value = redis.get(key);
        if (value != null) { // deleted since the scan saw it
          skus++;
          units += Integer.parseInt(value);
        }
      }
      cursor = page.getCursor();
    } while (!cursor.equals(ScanParams.SCAN_POINTER_START));
    return new Totals(skus, units);
  }

  /** Appends a run of the snapshot job to the shared list, which keeps the newest runs. */
  public void recordSnapshot(Snapshot snapshot) {
    redis.rpush(SNAPSHOTS_KEY, snapshot.occurrence() + " " + snapshot.skus() + " "
        + snapshot.units() + " " + snapshot.instance());
    redis.ltrim(SNAPSHOTS_KEY, -SNAPSHOTS_KEPT, -1);
  }

  /** The snapshot job's runs on every instance, oldest first. */
  public List<Snapshot> snapshots() {
    return redis.lrange(SNAPSHOTS_KEY, 0, -1).stream().map(entry -> {
      String[] fields = entry.split(" ", 4); // the instance, last, may contain spaces
      return new Snapshot(Instant.parse(fields[0]), fields[3], Integer.parseInt(fields[1]),
          Long.parseLong(fields[2]));
    }).toList();
  }

  @PreDestroy
  void close() {
    redis.close();
  }

  /** Stocked SKUs and their units. */
  public record Totals(int skus, long units) {
  }

  /**
   * One run of the snapshot job.
   *
   * @param occurrence the scheduled time of the run: the same on every instance for one
   *                   occurrence of the schedule
   * @param instance   the instance that ran it
   */
  public record Snapshot(Instant occurrence, String instance, int skus, long units) {
  }
}

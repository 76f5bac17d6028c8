package dev.holdfast.example.stock;

import jakarta.annotation.PreDestroy;
import jakarta.enterprise.context.ApplicationScoped;
import jakarta.inject.Inject;
import java.net.URI;
import java.util.OptionalInt;
import org.eclipse.microprofile.config.inject.ConfigProperty;
import redis.clients.jedis.RedisClient;
import redis.clients.jedis.params.ScanParams;
import redis.clients.jedis.resps.ScanResult;

/**
 * Stock levels, one Redis string per SKU in the Redis the locks use, so that every instance sees
 * the same numbers. Deliberately plain GET and SET: making a reservation safe is the lock's job.
 */
@ApplicationScoped
public class StockStore {

  /* Not "stock:": that is where the lock "stock:{sku}" keeps its hash. */
  private static final String KEY_PREFIX = "stock-level:";

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

  public void setUnits(String sku, int units) {
    redis.set(KEY_PREFIX + sku, Integer.toString(units));
  }

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

  @PreDestroy
  void close() {
    redis.close();
  }

  /** Stocked SKUs and their units. */
  public record Totals(int skus, long units) {
  }
}

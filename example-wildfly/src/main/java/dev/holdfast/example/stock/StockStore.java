package dev.holdfast.example.stock;

import jakarta.annotation.PostConstruct;
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
 * Stock levels, one Redis string per SKU, so that every instance of the service sees the same
 * numbers. Deliberately plain reads and writes: making a reservation safe is the lock's job.
 */
@ApplicationScoped
public class StockStore {

  /* Not "stock:": that is where the lock "stock:{sku}" keeps its hash. */
  private static final String KEY_PREFIX = "stock-level:";

  @Inject
  @ConfigProperty(name = "holdfast.redis.address")
  String redisAddress; // the Redis the locks use

  private RedisClient redis;

  @PostConstruct
  void connect() {
    redis = RedisClient.create(URI.create(redisAddress));
  }

  @PreDestroy
  void close() {
    redis.close();
  }

  /** The units left, or empty if the SKU was never stocked. */
  public OptionalInt units(String sku) {
    String value = redis.get(KEY_PREFIX + sku);
    return value == null ? OptionalInt.empty() : OptionalInt.of(Integer.parseInt(value));
  }

  public void setUnits(String sku, int units) {
    redis.set(KEY_PREFIX + sku, Integer.toString(units));
  }

  /** The number of stocked SKUs and their total units. */
  public Totals totals() {
    int skus = 0;
    long units = 0;
    ScanParams match = new ScanParams().match(KEY_PREFIX + "*").count(500);
    String cursor = ScanParams.SCAN_POINTER_START;
    do {
      ScanResult<String> page = redis.scan(cursor, match);
      for (String key : page.getResult()) {
        String value = redis.get(key);
        if (value != null) {
          skus++;
          units += Integer.parseInt(value);
        }
      }
      cursor = page.getCursor();
    } while (!cursor.equals(ScanParams.SCAN_POINTER_START));
    return new Totals(skus, units);
  }

  /** Stocked SKUs and their units. */
  public record Totals(int skus, long units) {
  }
}

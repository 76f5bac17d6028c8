package dev.holdfast.example.stock;

import dev.holdfast.testing.RedisBackend;
import dev.holdfast.testing.RedisServer;
import java.io.PrintStream;
import java.net.URI;
import java.nio.charset.Charset;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.logging.Level;
import java.util.logging.Logger;
import java.util.stream.Collectors;

/**
 * The quick-start demo, README's first command:
 * {@code ./mvnw -B -q -pl example-quarkus -am package -Pdemo -DskipTests}.
 *
 * <p>Starts two instances of the packaged example on one Redis, fires the same burst of
 * concurrent reservations at both with and without {@code @Locked}, and prints what happened.
 * Redis is {@code -Dholdfast.redis.address} or {@code HOLDFAST_REDIS_ADDRESS} when set, else a
 * redis-server started here (from {@code PATH}, or the binary in {@code org.signal:embedded-redis}).
 * Everything it starts is stopped at the end, and by shutdown hooks on a failure or Ctrl-C; a
 * Ctrl-C prints "interrupted — stopped everything" and nothing of what the stopping instances
 * answered. Fails if {@code @Locked} ever sells more than the stock, and within seconds, naming
 * the cause from its log, if an instance cannot start (e.g. Redis is unreachable).
 */
public final class Demo {
  private static final int STOCK = 50;
  private static final int REQUESTS = 4 * STOCK;
  private static final int INSTANCES = 2;
  /** Held so that the level sticks: the harness's INFO lines would clutter the report. */
  private static final Logger HARNESS_LOG = Logger.getLogger("dev.holdfast.testing");
  /** Counted down when the JVM shuts down before the demo ended: Ctrl-C. */
  private static final CountDownLatch INTERRUPTED = new CountDownLatch(1);
  /** How long a failure waits for a Ctrl-C that may have caused it (the instances got it too). */
  private static final Duration INTERRUPT_GRACE = Duration.ofMillis(500);
  private static volatile RedisServer ownRedis;

  private Demo() {
  }

  /**
   * Runs the demo.
   *
   * @param args the packaged application, {@code target/quarkus-app/quarkus-run.jar}
   * @throws IllegalStateException if {@code @Locked} oversold, or a process did not start
   */
  public static void main(String[] args) {
    if (args.length != 1) {
      throw new IllegalArgumentException("Usage: Demo <path to quarkus-run.jar>");
    }
    // Ctrl-C reaches the instances too (one process group): they stop, and requests in flight
    // fail with 500s or refused connections. Say what happened instead of reporting those.
    Thread onInterrupt = new Thread(Demo::stopOnInterrupt, "holdfast-demo-interrupted");
    Runtime.getRuntime().addShutdownHook(onInterrupt);
    try {
      run(args[0]);
    } catch (RuntimeException | Error e) {
      awaitHaltIfInterrupted(INTERRUPT_GRACE);
      removeHook(onInterrupt); // a failure of its own: Maven reports it
      throw e;
    }
    removeHook(onInterrupt);
  }

  /** Removes the Ctrl-C hook once the demo ended; if the JVM is already going down, waits. */
  private static void removeHook(Thread hook) {
    try {
      Runtime.getRuntime().removeShutdownHook(hook);
    } catch (IllegalStateException shuttingDown) {
      awaitHaltIfInterrupted(INTERRUPT_GRACE);
    }
  }

  private static void run(String appJar) {
    HARNESS_LOG.setLevel(Level.WARNING);
    long started = System.nanoTime();
    Path jar = Path.of(appJar).toAbsolutePath();
    Path logs = jar.getParent().getParent().resolve("demo-logs");
    String configured = configuredRedisAddress();
    List<AppInstance> instances = List.of();
    try {
      String address;
      if (configured == null) {
        ownRedis = RedisServer.start(RedisBackend.LOCAL);
        address = ownRedis.uri();
      } else {
        address = configured;
      }
      print("Holdfast demo: %d units in stock, %d concurrent reservations split over %d instances",
          STOCK, REQUESTS, INSTANCES);
      print("Redis:     %s", configured == null ? describe(ownRedis)
          : redact(configured) + " (configured)");

      long booting = System.nanoTime();
      instances = AppInstance.startAll(INSTANCES, jar, address, logs, Duration.ofSeconds(90));
      List<URI> uris = instances.stream().map(AppInstance::uri).toList();
      print("Instances: %s (example-quarkus, ready in %s)",
          String.join(" and ", uris.stream().map(URI::toString).toList()), seconds(booting));

      run(new StockApi(), uris);
    } finally {
      AppInstance.closeAll(instances);
      RedisServer redis = ownRedis;
      if (redis != null) {
        redis.close();
      }
    }
    print("");
    print("Stopped both instances%s. Instance logs: %s. Total %s.",
        configured == null ? " and Redis" : "", relative(logs), seconds(started));
  }

  /**
   * The shutdown hook: on Ctrl-C (or a kill) before the demo ended, stops every process the demo
   * started, then says so, and nothing else is printed.
   */
  private static void stopOnInterrupt() {
    INTERRUPTED.countDown(); // from now on print() is silent and a failing main() waits
    AppInstance.stopAll();
    RedisServer redis = ownRedis;
    if (redis != null) {
      redis.close();
    }
    PrintStream out = System.out;
    out.println();
    out.println(canPrint('\u2014') ? "interrupted \u2014 stopped everything"
        : "interrupted - stopped everything");
    out.flush();
  }

  /**
   * If the demo was interrupted (now or within {@code grace}), blocks until the JVM halts, which
   * it does once the shutdown hooks are done: the failure the interruption caused in this
   * thread is never reported. Returns otherwise.
   */
  private static void awaitHaltIfInterrupted(Duration grace) {
    boolean interrupted;
    try {
      interrupted = INTERRUPTED.await(grace.toMillis(), TimeUnit.MILLISECONDS);
    } catch (InterruptedException e) {
      interrupted = true; // the JVM is going down
    }
    while (interrupted) {
      try {
        Thread.sleep(Long.MAX_VALUE);
      } catch (InterruptedException e) {
        // keep waiting for the halt
      }
    }
  }

  private static boolean canPrint(char c) {
    String encoding = System.getProperty("stdout.encoding",
        System.getProperty("sun.stdout.encoding"));
    try {
      Charset charset = encoding == null ? Charset.defaultCharset() : Charset.forName(encoding);
      return charset.newEncoder().canEncode(c);
    } catch (IllegalArgumentException e) {
      return false;
    }
  }

  private static void run(StockApi api, List<URI> uris) {
    String run = Long.toString(System.currentTimeMillis(), 36); // fresh keys on a shared Redis
    String lockedSku = "demo-" + run + "-locked";
    String unprotectedSku = "demo-" + run + "-unprotected";
    warmUp(api, uris, "demo-" + run + "-warm-up");

    api.setStock(uris.get(0), lockedSku, STOCK);
    StockApi.Burst locked = api.reserveAll(uris, lockedSku, "reserve", REQUESTS);
    int lockedLeft = api.units(uris.get(1), lockedSku);

    api.setStock(uris.get(0), unprotectedSku, STOCK);
    StockApi.Burst unprotected =
        api.reserveAll(uris, unprotectedSku, "reserve-unprotected", REQUESTS);
    int unprotectedLeft = api.units(uris.get(1), unprotectedSku);

    List<Integer> reports = reportOnAllAtOnce(api, uris);
    api.delete(uris.get(0), lockedSku);
    api.delete(uris.get(0), unprotectedSku);

    print("");
    print("                  requests  reserved  stock left  oversold");
    row("with @Locked", locked, lockedLeft);
    row("without a lock", unprotected, unprotectedLeft);
    print("");
    print("Wait for the lock (@Locked, %d callers): p50 %d ms, p99 %d ms; they queue, one "
        + "holder of the SKU's lock at a time", locked.waitsMs().length,
        locked.waitPercentile(50), locked.waitPercentile(99));
    print("Units reserved with @Locked, per instance: %s; one lock across both processes",
        Arrays.stream(locked.reservedPerInstance()).mapToObj(Integer::toString)
            .collect(Collectors.joining(" and ")));
    long ran = reports.stream().filter(status -> status == 200).count();
    long refused = reports.stream().filter(status -> status == 409).count();
    print("@Named(\"report\") lock, POST /report on both instances at once: "
        + "%d ran it, %d answered 409 Conflict", ran, refused);

    if (locked.errors() > 0 || unprotected.errors() > 0) {
      throw new IllegalStateException("Some requests failed; see the instance logs");
    }
    if (locked.reserved() != STOCK || lockedLeft != 0) {
      throw new IllegalStateException("@Locked reserved " + locked.reserved() + " of " + STOCK
          + " units with " + lockedLeft + " left: the lock did not hold");
    }
  }

  /** A few calls on each instance first, so class loading and connecting are not measured. */
  private static void warmUp(StockApi api, List<URI> uris, String sku) {
    api.setStock(uris.get(0), sku, 4 * uris.size());
    api.reserveAll(uris, sku, "reserve", 2 * uris.size());
    api.reserveAll(uris, sku, "reserve-unprotected", 2 * uris.size());
    api.delete(uris.get(0), sku);
  }

  private static List<Integer> reportOnAllAtOnce(StockApi api, List<URI> uris) {
    List<CompletableFuture<Integer>> runs = new ArrayList<>();
    for (URI instance : uris) {
      runs.add(api.report(instance));
    }
    return runs.stream().map(CompletableFuture::join).toList();
  }

  private static void row(String label, StockApi.Burst burst, int left) {
    int oversold = Math.max(0, burst.reserved() - STOCK);
    String verdict = burst.reserved() + left == STOCK && oversold == 0 ? "correct"
        : "WRONG: " + burst.reserved() + " sold from " + STOCK + ", stock says " + left + " left";
    print("  %-15s %9d %9d %11d %9d   %s (%s)", label, burst.requests(), burst.reserved(), left,
        oversold, verdict, String.format(Locale.ROOT, "%.1f s", burst.took().toMillis() / 1000.0));
  }

  private static String configuredRedisAddress() {
    String address = System.getProperty("holdfast.redis.address");
    if (address == null || address.isBlank()) {
      address = System.getenv("HOLDFAST_REDIS_ADDRESS");
    }
    return address == null || address.isBlank() ? null : address.trim();
  }

  private static String describe(RedisServer redis) {
    String info = redis.withAdmin(jedis -> jedis.info("server"));
    return "redis-server " + infoField(info, "redis_version") + " (" + infoField(info, "executable")
        + ") on " + redis.host() + ":" + redis.port()
        + ", started for this demo; set holdfast.redis.address to use yours";
  }

  private static String infoField(String info, String name) {
    return info.lines().filter(line -> line.startsWith(name + ":"))
        .map(line -> line.substring(name.length() + 1).trim()).findFirst().orElse("?");
  }

  /** The address without user and password. */
  static String redact(String address) {
    try {
      URI uri = URI.create(address);
      return uri.getUserInfo() == null ? address
          : uri.getScheme() + "://***@" + uri.getHost() + (uri.getPort() < 0 ? "" : ":"
              + uri.getPort()) + (uri.getPath() == null ? "" : uri.getPath());
    } catch (IllegalArgumentException e) {
      return "(unparseable address)";
    }
  }

  private static String seconds(long sinceNanos) {
    return String.format(Locale.ROOT, "%.1f s", (System.nanoTime() - sinceNanos) / 1e9);
  }

  private static Path relative(Path path) {
    Path here = Path.of("").toAbsolutePath();
    return path.startsWith(here) ? here.relativize(path) : path;
  }

  private static void print(String format, Object... args) {
    if (INTERRUPTED.getCount() == 0) {
      return; // interrupted: what the dying instances answered means nothing
    }
    System.out.println(String.format(Locale.ROOT, format, args));
  }
}

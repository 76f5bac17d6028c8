package dev.holdfast.example.stock;

import dev.holdfast.testing.RedisServer;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import org.junit.jupiter.api.extension.ExtensionContext;
import org.junit.jupiter.api.extension.ParameterContext;
import org.junit.jupiter.api.extension.ParameterResolver;

/**
 * JUnit 5 extension giving test classes the shared {@link Servers}: one harness Redis and two
 * WildFly servers, {@code a} and {@code b}, running the example against it. They are started on
 * first use — the two servers in parallel — and stopped when JUnit closes its root store, after
 * the last test class of the JVM; booting WildFly once per class would triple the run time.
 *
 * <pre>{@code
 * @ExtendWith(StockServers.class)
 * class SomeIT {
 *   SomeIT(Servers servers) { ... }
 * }
 * }</pre>
 */
final class StockServers implements ParameterResolver {

  /** The deliberate pause in a reservation, {@code stock.work-millis}, in every server. */
  static final long WORK_MILLIS = 10;
  /** The snapshot job's schedule, {@code stock.snapshot.cron}: every {@link #SNAPSHOT_PERIOD}. */
  static final String SNAPSHOT_CRON = "*/3 * * * * *";
  static final Duration SNAPSHOT_PERIOD = Duration.ofSeconds(3);
  /**
   * Each server calls the job up to this long after the scheduled time, at random: the two
   * servers' calls are apart by up to that, much more than the job takes.
   */
  static final long SNAPSHOT_MAX_DELAY_MILLIS = 500;
  /**
   * The snapshot job's {@code holdAtLeast}, by configuration (the annotation's 5 s suits a
   * once-a-minute job): longer than the two servers' calls are apart (with a second to spare for
   * a busy machine), shorter than the period (likewise).
   */
  static final String SNAPSHOT_HOLD = "1500ms";

  /**
   * {@code holdfast.watchdog-timeout} in every server: short, so that a renewal (every third of
   * it) notices a lock taken away within a second.
   */
  static final String WATCHDOG_TIMEOUT = "2s";

  private static final ExtensionContext.Namespace NAMESPACE =
      ExtensionContext.Namespace.create(StockServers.class);

  @Override
  public boolean supportsParameter(ParameterContext parameter, ExtensionContext context) {
    return parameter.getParameter().getType() == Servers.class;
  }

  @Override
  public Object resolveParameter(ParameterContext parameter, ExtensionContext context) {
    return context.getRoot().getStore(NAMESPACE)
        .getOrComputeIfAbsent(Servers.class, key -> Servers.start(), Servers.class);
  }

  /** The running environment; closing it stops everything (JUnit does). */
  record Servers(RedisServer redis, WildFlyServer a, WildFlyServer b) implements AutoCloseable {

    static Servers start() {
      RedisServer redis = RedisServer.start();
      Map<String, String> config = Map.of(
          "holdfast.redis.address", redis.uri(),
          "holdfast.watchdog-timeout", WATCHDOG_TIMEOUT,
          "stock.work-millis", Long.toString(WORK_MILLIS),
          "stock.snapshot.cron", SNAPSHOT_CRON,
          "stock.snapshot.max-delay-millis", Long.toString(SNAPSHOT_MAX_DELAY_MILLIS),
          "holdfast.\"" + StockSnapshotJob.class.getName() + "/takeSnapshot\".locked."
              + "hold-at-least", SNAPSHOT_HOLD);
      ExecutorService boot = Executors.newFixedThreadPool(2);
      try {
        CompletableFuture<WildFlyServer> a =
            CompletableFuture.supplyAsync(() -> WildFlyServer.start("a", config), boot);
        CompletableFuture<WildFlyServer> b =
            CompletableFuture.supplyAsync(() -> WildFlyServer.start("b", config), boot);
        List<Throwable> failures = new ArrayList<>();
        WildFlyServer serverA = joinOrCollect(a, failures);
        WildFlyServer serverB = joinOrCollect(b, failures);
        if (failures.isEmpty()) {
          return new Servers(redis, serverA, serverB);
        }
        List<AutoCloseable> started = new ArrayList<>();
        for (WildFlyServer server : new WildFlyServer[] {serverA, serverB}) {
          if (server != null) {
            started.add(server);
          }
        }
        started.add(redis);
        closeAll(started, failures);
        AssertionError error = new AssertionError("The example servers did not start",
            failures.get(0));
        failures.subList(1, failures.size()).forEach(error::addSuppressed);
        throw error;
      } catch (RuntimeException | Error e) {
        redis.close(); // idempotent
        throw e;
      } finally {
        boot.shutdown();
      }
    }

    /** Stops both servers and Redis, continuing past failures. */
    @Override
    public void close() {
      List<Throwable> failures = new ArrayList<>();
      closeAll(List.of(a, b, redis), failures);
      if (!failures.isEmpty()) {
        IllegalStateException error =
            new IllegalStateException("Stopping the example servers failed", failures.get(0));
        failures.subList(1, failures.size()).forEach(error::addSuppressed);
        throw error;
      }
    }

    private static WildFlyServer joinOrCollect(CompletableFuture<WildFlyServer> start,
        List<Throwable> failures) {
      try {
        return start.join();
      } catch (CompletionException e) {
        failures.add(e.getCause());
        return null;
      }
    }

    private static void closeAll(List<AutoCloseable> resources, List<Throwable> failures) {
      for (AutoCloseable resource : resources) {
        try {
          resource.close();
        } catch (Exception | Error e) {
          failures.add(e);
        }
      }
    }
  }
}

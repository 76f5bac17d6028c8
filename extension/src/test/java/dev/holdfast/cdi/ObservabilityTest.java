package dev.holdfast.cdi;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.holdfast.LockClient;
import dev.holdfast.LockNotAcquiredException;
import dev.holdfast.Locked;
import dev.holdfast.testing.RedisServer;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.opentelemetry.api.OpenTelemetry;
import io.opentelemetry.api.trace.Span;
import io.opentelemetry.api.trace.StatusCode;
import io.opentelemetry.context.Scope;
import io.opentelemetry.sdk.OpenTelemetrySdk;
import io.opentelemetry.sdk.testing.exporter.InMemorySpanExporter;
import io.opentelemetry.sdk.trace.SdkTracerProvider;
import io.opentelemetry.sdk.trace.data.SpanData;
import io.opentelemetry.sdk.trace.export.SimpleSpanProcessor;
import jakarta.enterprise.context.ApplicationScoped;
import jakarta.enterprise.inject.Produces;
import jakarta.inject.Singleton;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.eclipse.microprofile.health.HealthCheck;
import org.eclipse.microprofile.health.HealthCheckResponse;
import org.eclipse.microprofile.health.Liveness;
import org.eclipse.microprofile.health.Readiness;
import org.jboss.weld.environment.se.Weld;
import org.jboss.weld.environment.se.WeldContainer;
import org.jboss.weld.junit5.WeldInitiator;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * The CDI layer's operations support in Weld (the portable extension, as in WildFly): the
 * {@code holdfast} readiness check, meters in the container's registry tagged by {@code @Locked}
 * template, and {@code lock.wait} spans in the current trace.
 */
class ObservabilityTest {

  private RedisServer redis;

  @BeforeEach
  void startRedis() {
    redis = RedisServer.start(); // its own: one test kills it
  }

  @AfterEach
  void stopRedis() {
    redis.close();
  }

  private static Weld weld(Class<?>... beans) {
    return WeldInitiator.createWeld().addExtension(new HoldfastExtension())
        .addBeanClasses(Stock.class).addBeanClasses(beans);
  }

  private TestConfig config(String... more) {
    return TestConfig.of(Map.of("holdfast.redis.address", redis.uri(),
        "holdfast.redis.timeout", "500ms"), more);
  }

  @Test
  void readinessCheck_isUpWithEveryNode_thenDownNamingTheNodeWhenRedisStops() {
    try (TestConfig c = config(); WeldContainer container = weld().initialize()) {
      HealthCheck check = container.select(HealthCheck.class, Readiness.Literal.INSTANCE).get();
      HealthCheckResponse up = check.call();
      assertEquals("holdfast", up.getName());
      assertEquals(HealthCheckResponse.Status.UP, up.getStatus());
      Map<String, Object> data = up.getData().orElseThrow();
      String node = redis.hostAndPort().toString();
      assertTrue(String.valueOf(data.get(node)).startsWith("UP "), () -> "" + data);

      redis.kill();
      HealthCheckResponse down = check.call();
      assertEquals(HealthCheckResponse.Status.DOWN, down.getStatus());
      String why = String.valueOf(down.getData().orElseThrow().get(node));
      assertTrue(why.startsWith("DOWN: "), why);

      assertTrue(container.select(HealthCheck.class, Liveness.Literal.INSTANCE).isUnsatisfied(),
          "never a liveness check: a Redis outage must not restart the application");
    }
  }

  @Test
  void readinessCheck_isNotRegistered_whenHealthIsDisabled() {
    try (TestConfig c = config("holdfast.health.enabled", "false");
        WeldContainer container = weld().initialize()) {
      assertTrue(container.select(HealthCheck.class, Readiness.Literal.INSTANCE).isUnsatisfied());
    }
  }

  @Test
  void healthEnabled_thatIsNoBoolean_failsTheDeployment() {
    try (TestConfig c = config("holdfast.health.enabled", "yes")) {
      RuntimeException e = assertThrows(RuntimeException.class, () -> weld().initialize());
      assertTrue(String.valueOf(e.getMessage()).contains(
          "holdfast.health.enabled must be true or false, but was 'yes'"), e.getMessage());
    }
  }

  @Test
  void lockedCalls_areMeasuredInTheContainersRegistry_byTemplate() throws Exception {
    try (TestConfig c = config(); WeldContainer container = weld(Telemetry.class).initialize()) {
      Stock stock = container.select(Stock.class).get();
      stock.reserve("A");
      stock.reserve("B");
      MeterRegistry registry = container.select(MeterRegistry.class).get();

      assertEquals(2, registry.get("holdfast.lock.wait").tag("template", "stock:{sku}")
          .tag("outcome", "acquired").timer().count());
      assertEquals(2, registry.get("holdfast.lock.held").tag("template", "stock:{sku}")
          .timer().count());
      assertNull(registry.find("holdfast.lock.held").tag("template", "stock:A").timer());
    }
  }

  @Test
  void metricsDisabled_leavesTheRegistryAlone() {
    try (TestConfig c = config("holdfast.metrics.enabled", "false");
        WeldContainer container = weld(Telemetry.class).initialize()) {
      container.select(Stock.class).get().reserve("A");
      assertTrue(container.select(MeterRegistry.class).get().find("holdfast.lock.wait")
          .meters().isEmpty());
    }
  }

  @Test
  void lockedWaits_areSpansInTheCurrentTrace() throws Exception {
    try (TestConfig c = config(); WeldContainer container = weld(Telemetry.class).initialize()) {
      Stock stock = container.select(Stock.class).get();
      OpenTelemetry otel = container.select(OpenTelemetry.class).get();
      Span parent = otel.getTracer("test").spanBuilder("request").startSpan();
      try (Scope scope = parent.makeCurrent()) {
        stock.reserve("A");
      } finally {
        parent.end();
      }
      try (LockClient otherInstance = LockClient.create(Map.of("holdfast.redis.address",
          redis.uri()))) {
        otherInstance.getLock("stock-quick:B").lock();
        assertThrows(LockNotAcquiredException.class, () -> stock.reserveQuickly("B"));
      }

      List<SpanData> spans = Telemetry.SPANS.getFinishedSpanItems();
      SpanData acquired = spans.stream()
          .filter(s -> s.getName().equals("lock.wait stock:{sku}")).findFirst().orElseThrow();
      assertEquals(parent.getSpanContext().getTraceId(), acquired.getTraceId());
      assertEquals(parent.getSpanContext().getSpanId(), acquired.getParentSpanId());
      assertEquals("stock:A", acquired.getAttributes().get(OpenTelemetryTracing.NAME));
      assertEquals("acquired", acquired.getAttributes().get(OpenTelemetryTracing.OUTCOME));
      assertEquals(StatusCode.UNSET, acquired.getStatus().getStatusCode());

      SpanData timedOut = spans.stream()
          .filter(s -> s.getName().equals("lock.wait stock-quick:{sku}")).findFirst()
          .orElseThrow(() -> new AssertionError("spans: " + spans));
      assertEquals("timed_out", timedOut.getAttributes().get(OpenTelemetryTracing.OUTCOME));
      assertEquals(StatusCode.ERROR, timedOut.getStatus().getStatusCode());
      assertTrue(timedOut.getEndEpochNanos() - timedOut.getStartEpochNanos()
          >= TimeUnit.MILLISECONDS.toNanos(100));
    } finally {
      Telemetry.SPANS.reset();
    }
  }

  /** The application's locked service. */
  @ApplicationScoped
  public static class Stock {
    @Locked("stock:{sku}")
    public void reserve(String sku) {
    }

    @Locked(value = "stock-quick:{sku}", waitTime = "100ms")
    public void reserveQuickly(String sku) {
    }
  }

  /** What Quarkus and WildFly provide as beans: a meter registry and OpenTelemetry. */
  @ApplicationScoped
  public static class Telemetry {
    static final InMemorySpanExporter SPANS = InMemorySpanExporter.create();

    @Produces
    @Singleton
    MeterRegistry registry() {
      return new SimpleMeterRegistry();
    }

    @Produces
    @Singleton
    OpenTelemetry openTelemetry() {
      return OpenTelemetrySdk.builder().setTracerProvider(SdkTracerProvider.builder()
          .addSpanProcessor(SimpleSpanProcessor.create(SPANS)).build()).build();
    }
  }
}

package dev.holdfast.cdi;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;

import dev.holdfast.testing.RedisExtension;
import java.io.File;
import java.net.URL;
import java.net.URLClassLoader;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Callable;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * Holdfast without its optional dependencies: the test class path minus Micrometer,
 * OpenTelemetry, MicroProfile Health and Mutiny, in a class loader of its own, runs the engine
 * and a Weld container with {@code @Locked} ({@link AbsentApisScenario}), a blocking and an
 * asynchronous method — no {@code NoClassDefFoundError}, no health check, locks as usual.
 */
class ObservationAbsentTest {

  @RegisterExtension
  static final RedisExtension redis = RedisExtension.standalone();

  private static final List<String> OPTIONAL = List.of("/io/micrometer/", "/io/opentelemetry/",
      "/org/eclipse/microprofile/health/", "/org/hdrhistogram/", "/org/latencyutils/",
      "/io/smallrye/reactive/mutiny/", "/jakarta/transaction/", "/org/jboss/narayana/",
      "/org/jboss/jboss-transaction-spi/");

  @Test
  void withoutMicrometerOpenTelemetryAndHealth_locksWorkAndNothingIsRegistered()
      throws Exception {
    String classPath = System.getProperty("surefire.test.class.path",
        System.getProperty("java.class.path"));
    List<URL> urls = new ArrayList<>();
    List<String> removed = new ArrayList<>();
    for (String entry : classPath.split(File.pathSeparator)) {
      String normalized = entry.replace(File.separatorChar, '/');
      if (OPTIONAL.stream().anyMatch(normalized::contains)) {
        removed.add(entry);
      } else {
        urls.add(Path.of(entry).toUri().toURL());
      }
    }
    assertFalse(removed.isEmpty(), "the optional APIs were on the test class path");

    Thread thread = Thread.currentThread();
    ClassLoader previous = thread.getContextClassLoader();
    try (URLClassLoader isolated = new URLClassLoader(urls.toArray(new URL[0]),
        ClassLoader.getPlatformClassLoader())) {
      thread.setContextClassLoader(isolated);
      @SuppressWarnings("unchecked")
      Callable<List<String>> scenario = (Callable<List<String>>) isolated
          .loadClass(AbsentApisScenario.class.getName()).getConstructor(String.class)
          .newInstance(redis.server().uri());
      assertEquals(List.of(
          "io.micrometer.core.instrument.MeterRegistry absent",
          "io.opentelemetry.api.OpenTelemetry absent",
          "org.eclipse.microprofile.health.HealthCheck absent",
          "io.smallrye.mutiny.Uni absent",
          "jakarta.transaction.TransactionSynchronizationRegistry absent",
          "plain Java: locked and unlocked",
          "CDI: locked call ran",
          "CDI: locked stage completed",
          "CDI: 0 health beans",
          "CDI: 0 transaction beans"), scenario.call());
    } finally {
      thread.setContextClassLoader(previous);
    }
  }
}

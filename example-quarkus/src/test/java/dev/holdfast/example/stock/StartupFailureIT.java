package dev.holdfast.example.stock;

import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.holdfast.testing.LoopbackPorts;
import java.nio.file.Path;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * An instance pointed at a Redis that is not there stops the demo (and these tests' startup)
 * within seconds, naming the cause, instead of polling until the timeout.
 */
class StartupFailureIT {
  /** Far longer than a failure may take: the tests show it is not what ends the wait. */
  private static final Duration TIMEOUT = Duration.ofSeconds(90);

  private final Path jar =
      Path.of(System.getProperty("app.jar", "target/quarkus-app/quarkus-run.jar"));
  private int port;

  @BeforeEach
  void reservePortNobodyListensOn() {
    port = LoopbackPorts.reserve();
  }

  @AfterEach
  void releasePort() {
    LoopbackPorts.release(port);
  }

  @Test
  void unreachableRedis_stopsTheStartInSeconds_namingAddressAndCause() {
    long start = System.nanoTime();
    IllegalStateException e = assertThrows(IllegalStateException.class,
        () -> AppInstance.startAll(1, jar, "redis://demo:secret-pw@127.0.0.1:" + port,
            Path.of("target", "it-logs", "unreachable"), TIMEOUT));
    long tookSeconds = TimeUnit.NANOSECONDS.toSeconds(System.nanoTime() - start);

    String message = e.getMessage();
    assertTrue(tookSeconds < 20, "took " + tookSeconds + " s: " + message);
    assertTrue(message.contains("did not start: it exited with code 1"), message);
    assertTrue(message.contains("Cause: jakarta.enterprise.inject.spi.DeploymentException: "
        + "Cannot connect to Redis (standalone redis://demo:***@127.0.0.1:" + port
        + "): connection refused"), message);
    assertTrue(!message.contains("secret-pw"), message);
  }

  @Test
  void unreachableRedis_withConnectAtStartupFalse_failsAtTheFirstAnswer_namingTheCause() {
    long start = System.nanoTime();
    IllegalStateException e = assertThrows(IllegalStateException.class,
        () -> AppInstance.startAll(1, jar, "redis://127.0.0.1:" + port,
            Path.of("target", "it-logs", "unreachable-lazy"), TIMEOUT,
            "holdfast.redis.connect-at-startup=false"));
    long tookSeconds = TimeUnit.NANOSECONDS.toSeconds(System.nanoTime() - start);

    String message = e.getMessage();
    assertTrue(tookSeconds < 20, "took " + tookSeconds + " s: " + message);
    assertTrue(message.contains("started but answered 500 to GET /stock/readiness-probe"),
        message);
    assertTrue(message.contains("Failed to connect to 127.0.0.1:" + port), message);
  }
}

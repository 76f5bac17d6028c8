package dev.holdfast.example.stock;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;

import org.junit.jupiter.api.Test;

/** Finding the cause of a failed start in an instance's log, as Quarkus 3.37 writes it. */
class AppInstanceTest {

  @Test
  void startupCause_ofAFailedStart_isTheOutermostCauseThatIsNotAWrapper() {
    String log = """
        04:39:32,160 ERROR [io.qua.run.Quarkus] Error running Quarkus: java.lang.ExceptionInInitializerError
        \tat java.base/jdk.internal.misc.Unsafe.allocateInstance(Native Method)
        \tat io.quarkus.bootstrap.runner.QuarkusEntryPoint.main(QuarkusEntryPoint.java:36)
        Caused by: java.lang.RuntimeException: Failed to start quarkus
        \tat io.quarkus.runner.ApplicationImpl.<clinit>(Unknown Source)
        \t... 8 more
        Caused by: jakarta.enterprise.inject.spi.DeploymentException: Cannot connect to Redis (standalone redis://app:***@127.0.0.1:1): connection refused (Connection refused). Check holdfast.redis.address
        \tat dev.holdfast.cdi.HoldfastConfig.connectAtStartup(HoldfastConfig.java:130)
        \t... 9 more
        Caused by: dev.holdfast.LockException: Cannot connect to Redis (standalone redis://app:***@127.0.0.1:1): connection refused (Connection refused). Check holdfast.redis.address
        \tat dev.holdfast.engine.RedisTopology.cannotConnect(RedisTopology.java:147)
        Caused by: redis.clients.jedis.exceptions.JedisConnectionException: Failed to connect to 127.0.0.1:1.
        \tat redis.clients.jedis.DefaultJedisSocketFactory.connectToFirstSuccessfulHost(DefaultJedisSocketFactory.java:68)
        \tSuppressed: java.net.ConnectException: Connection refused
        """;
    assertEquals("jakarta.enterprise.inject.spi.DeploymentException: Cannot connect to Redis "
        + "(standalone redis://app:***@127.0.0.1:1): connection refused (Connection refused). "
        + "Check holdfast.redis.address", AppInstance.startupCause(log));
  }

  @Test
  void startupCause_ofAFailedRequest_isTheErrorLineWithWhatItSuppressed() {
    String log = """
        2026-11-23 04:39:41,966 INFO  [io.quarkus] (main) holdfast-example-quarkus 0.2.0-SNAPSHOT on JVM (powered by Quarkus 3.37.4) started in 0.943s.
        2026-11-23 04:39:45,211 ERROR [io.quarkus.vertx.http.runtime.QuarkusErrorHandler] (executor-thread-1) HTTP Request to /stock/readiness-probe failed, error id: 1615: redis.clients.jedis.exceptions.JedisConnectionException: Failed to connect to 127.0.0.1:1.
        \tat redis.clients.jedis.DefaultJedisSocketFactory.connectToFirstSuccessfulHost(DefaultJedisSocketFactory.java:68)
        \tSuppressed: java.net.ConnectException: Connection refused
        \t\t... 34 more

        2026-11-23 04:39:45,768 INFO  [io.quarkus] (Shutdown thread) holdfast-example-quarkus stopped in 0.040s
        """;
    assertEquals("HTTP Request to /stock/readiness-probe failed, error id: 1615: "
        + "redis.clients.jedis.exceptions.JedisConnectionException: Failed to connect to "
        + "127.0.0.1:1.\n         java.net.ConnectException: Connection refused",
        AppInstance.startupCause(log));
  }

  @Test
  void startupCause_withoutAnError_isNull() {
    assertNull(AppInstance.startupCause("""
        2026-11-23 04:39:41,966 INFO  [io.quarkus] (main) starting
        """));
  }
}

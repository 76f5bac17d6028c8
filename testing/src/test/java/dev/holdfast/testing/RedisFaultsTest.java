package dev.holdfast.testing;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.Map;

import org.junit.jupiter.api.Nested;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

import redis.clients.jedis.Jedis;
import redis.clients.jedis.exceptions.JedisConnectionException;

/** The fault API and the extension's injection on the backend the build selects. */
class RedisFaultsTest {

  @RegisterExtension
  static final RedisExtension redis = RedisExtension.standalone();

  @Test
  void parameters_areTheRunningServerAndItsConfig(RedisServer server, Map<String, String> config,
      RedisExtension extension) {
    assertSame(redis.server(), server);
    assertSame(redis, extension);
    assertEquals(Map.of("holdfast.redis.address", server.uri()), config);
    assertEquals(RedisBackend.selected(), server.backend());
  }

  @Test
  void pause_freezesTheServer_untilResumed(RedisServer server) {
    server.withAdmin(jedis -> jedis.set("k", "v"));
    server.pause();
    try {
      assertTrue(server.isPaused());
      assertTrue(server.isRunning());
      assertThrows(JedisConnectionException.class,
          () -> server.connect(200, 300).get("k"), "a frozen server answers nothing");
    } finally {
      server.resume();
    }
    assertFalse(server.isPaused());
    assertEquals("v", server.withAdmin(jedis -> jedis.get("k")));
  }

  @Test
  void clientPause_holdsCommands_thenRunsThem(RedisServer server) {
    server.clientPause(Duration.ofMillis(500));
    long start = System.nanoTime();
    server.withAdmin(jedis -> jedis.set("paused", "1"));
    long tookMillis = (System.nanoTime() - start) / 1_000_000;
    assertTrue(tookMillis >= 300, "the write waited for CLIENT PAUSE: " + tookMillis + " ms");
    assertThrows(IllegalArgumentException.class, () -> server.clientPause(Duration.ZERO));
  }

  @Test
  void stop_thenRestart_comesBackOnTheSamePort(RedisServer server) {
    int port = server.port();
    server.stop();
    assertFalse(server.isRunning());
    assertFalse(LoopbackPorts.isListening(port));
    server.restart();
    assertEquals(port, server.port());
    assertEquals("PONG", server.withAdmin(Jedis::ping));
  }

  @Test
  void backend_names_parse() {
    assertEquals(RedisBackend.LOCAL, RedisBackend.parse("local"));
    assertEquals(RedisBackend.EMBEDDED, RedisBackend.parse(" Embedded "));
    assertEquals(RedisBackend.TESTCONTAINERS, RedisBackend.parse("testcontainers"));
    assertThrows(IllegalArgumentException.class, () -> RedisBackend.parse("podman"));
  }

  /** A master and a replica; the config names the master. */
  @Nested
  class Replicated {
    @RegisterExtension
    final RedisExtension replicated = RedisExtension.replicated(1);

    @Test
    void replica_followsTheMaster() {
      RedisServer master = replicated.server();
      master.withAdmin(jedis -> jedis.set("r", "1"));
      RedisServer replica = replicated.replicas().get(0);
      Await.until(Duration.ofSeconds(5),
          () -> "1".equals(replica.withAdmin(jedis -> jedis.get("r"))), "replicated");
      assertEquals(Map.of("holdfast.redis.address", master.uri()), replicated.config());
    }
  }

  /** Two classes registering equal suite-scoped extensions share one server. */
  @Nested
  class SuiteScope {
    @RegisterExtension
    static final RedisExtension first = RedisExtension.standalone("--maxmemory", "64mb")
        .sharedBySuite();
    @RegisterExtension
    static final RedisExtension second = RedisExtension.standalone("--maxmemory", "64mb")
        .sharedBySuite();

    @Test
    void equalExtensions_shareTheServer() {
      assertSame(first.server(), second.server());
      assertTrue(first.server().isRunning());
    }
  }
}

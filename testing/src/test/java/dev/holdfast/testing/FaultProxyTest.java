package dev.holdfast.testing;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.List;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

import redis.clients.jedis.DefaultJedisClientConfig;
import redis.clients.jedis.HostAndPort;
import redis.clients.jedis.Jedis;
import redis.clients.jedis.exceptions.JedisConnectionException;

/** Each fault of {@link FaultProxy}, observed with a plain Jedis client and a short timeout. */
class FaultProxyTest {

  private static final int TIMEOUT_MS = 300;
  private static final Duration SHORT = Duration.ofSeconds(5);

  @RegisterExtension
  static final RedisExtension redis = RedisExtension.standalone();

  private FaultProxy proxy;

  @BeforeEach
  void setUp() throws Exception {
    redis.flushAll();
    proxy = new FaultProxy(redis.server().port());
  }

  @AfterEach
  void tearDown() {
    proxy.close();
  }

  @Test
  void noFault_forwardsBothWays() {
    try (Jedis jedis = client()) {
      assertEquals("OK", jedis.set("k", "v"));
      assertEquals("v", jedis.get("k"));
      assertEquals(1, proxy.openConnections());
    }
  }

  @Test
  void dropReplies_scriptRunsButItsReplyIsLost_otherCommandsPass() {
    try (Jedis jedis = client()) {
      assertEquals("PONG", jedis.ping());
      proxy.dropReplies(1);
      assertEquals("PONG", jedis.ping(), "only script replies are dropped");
      assertThrows(JedisConnectionException.class,
          () -> jedis.eval("return redis.call('incr', KEYS[1])", List.of("ran"), List.of()));
      assertEquals(0, proxy.pendingDrops());
    }
    assertEquals("1", redis.server().withAdmin(admin -> admin.get("ran")), "the script ran");
    try (Jedis jedis = client()) {
      assertEquals(2L, jedis.eval("return redis.call('incr', KEYS[1])", List.of("ran"),
          List.of()), "once consumed, replies flow again");
    }
  }

  @Test
  void delay_addsLatencyEachWay_andZeroStopsIt() {
    try (Jedis jedis = client()) {
      jedis.ping();
      proxy.delay(Duration.ofMillis(100));
      long start = System.nanoTime();
      assertEquals("PONG", jedis.ping());
      long millis = (System.nanoTime() - start) / 1_000_000;
      assertTrue(millis >= 200, "a round trip takes both delays, took " + millis + " ms");
      proxy.delay(Duration.ofMillis(TIMEOUT_MS));
      assertThrows(JedisConnectionException.class, jedis::ping);
    }
    proxy.delay(Duration.ZERO);
    try (Jedis jedis = client()) {
      long start = System.nanoTime();
      assertEquals("PONG", jedis.ping());
      assertTrue((System.nanoTime() - start) / 1_000_000 < 100);
    }
  }

  @Test
  void blackHole_keepsSocketsOpenButSilent_thenDeliversHeldBytesLate() {
    try (Jedis before = client()) {
      before.ping();
      proxy.blackHole(true);
      assertTrue(proxy.isBlackHoled());
      assertThrows(JedisConnectionException.class, () -> before.set("late", "1"),
          "a read timeout, not a reset");
      assertEquals(1, proxy.openConnections(), "the connection was not closed by the proxy");
      assertNull(redis.server().withAdmin(admin -> admin.get("late")));

      // A new connection is accepted (connect succeeds) but its handshake never answers.
      assertThrows(JedisConnectionException.class, () -> {
        try (Jedis during = client()) {
          during.ping();
        }
      });
    }
    proxy.blackHole(false);
    // The SET sent during the black hole was held, not dropped: it reaches Redis late.
    Await.until(SHORT, () -> "1".equals(redis.server().withAdmin(admin -> admin.get("late"))),
        "the held request is delivered");
    try (Jedis after = client()) {
      assertEquals("PONG", after.ping());
    }
  }

  @Test
  void resetAll_resetsOpenConnections_newOnesWork() {
    Jedis jedis = client();
    try {
      jedis.ping();
      long clientsBefore = redisClients();
      assertEquals(1, proxy.resetAll());
      JedisConnectionException e = assertThrows(JedisConnectionException.class, jedis::ping);
      assertTrue(String.valueOf(describe(e)).toLowerCase().matches(
          "(?s).*(reset|broken pipe|end of stream).*"), describe(e));
      Await.until(SHORT, () -> redisClients() < clientsBefore,
          "Redis sees its side of the connection closed");
    } finally {
      closeQuietly(jedis);
    }
    try (Jedis again = client()) {
      assertEquals("PONG", again.ping());
    }
  }

  @Test
  void upstreamDown_newConnectionFailsFast_andComesBackWithRedis() throws Exception {
    try (RedisServer own = RedisServer.start();
        FaultProxy ownProxy = new FaultProxy(own.port())) {
      own.kill();
      long start = System.nanoTime();
      assertThrows(JedisConnectionException.class, () -> {
        try (Jedis jedis = client(ownProxy.port())) {
          jedis.ping();
        }
      });
      assertTrue((System.nanoTime() - start) / 1_000_000 < TIMEOUT_MS,
          "refused upstream: reset at once, not a timeout");
      own.restart();
      try (Jedis jedis = client(ownProxy.port())) {
        assertEquals("PONG", jedis.ping());
      }
    }
  }

  @Test
  void maxConnections_extraConnectionsAreReset() throws Exception {
    try (FaultProxy small = new FaultProxy(redis.server().port(), 1);
        Jedis first = client(small.port())) {
      first.ping();
      assertThrows(JedisConnectionException.class, () -> {
        try (Jedis second = client(small.port())) {
          second.ping();
        }
      });
      assertEquals(1, small.refusedConnections());
      assertEquals("PONG", first.ping());
    }
  }

  @Test
  void close_stopsListeningAndResetsConnections() {
    Jedis jedis = client();
    try {
      jedis.ping();
      proxy.close();
      proxy.close();
      // Polled: on a busy machine the freed port may be taken by another process for a moment.
      Await.until(Duration.ofSeconds(5), () -> !LoopbackPorts.isListening(proxy.port()),
          "the proxy's port is closed");
      assertThrows(JedisConnectionException.class, jedis::ping);
      assertEquals(0, proxy.openConnections());
    } finally {
      closeQuietly(jedis);
    }
  }

  @Test
  void arguments_areChecked() {
    assertThrows(IllegalArgumentException.class, () -> proxy.dropReplies(-1));
    assertThrows(IllegalArgumentException.class, () -> proxy.delay(Duration.ofMillis(-1)));
    assertThrows(IllegalArgumentException.class, () -> new FaultProxy(0));
    assertThrows(IllegalArgumentException.class, () -> new FaultProxy(6379, 0));
  }

  private Jedis client() {
    return client(proxy.port());
  }

  private static Jedis client(int port) {
    return new Jedis(new HostAndPort(RedisServer.HOST, port), DefaultJedisClientConfig.builder()
        .connectionTimeoutMillis(TIMEOUT_MS)
        .socketTimeoutMillis(TIMEOUT_MS)
        .autoNegotiateProtocol(false)
        .build());
  }

  /** A Jedis whose socket was reset may throw from close(); that is not what is tested. */
  private static void closeQuietly(Jedis jedis) {
    try {
      jedis.close();
    } catch (JedisConnectionException e) {
      // the connection is gone either way
    }
  }

  private long redisClients() {
    return redis.server().withAdmin(admin -> admin.clientList().lines().count());
  }

  private static String describe(Throwable e) {
    StringBuilder text = new StringBuilder();
    for (Throwable t = e; t != null; t = t.getCause()) {
      text.append(t).append(" / ");
    }
    return text.toString();
  }
}

package dev.holdfast.engine;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.holdfast.DistributedLock;
import dev.holdfast.LockClient;
import dev.holdfast.LockClientConfig;
import dev.holdfast.LockException;
import dev.holdfast.testing.LoopbackPorts;
import dev.holdfast.testing.RedisExtension;
import dev.holdfast.testing.RedisServer;
import java.io.IOException;
import java.io.InputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;
import redis.clients.jedis.Jedis;

/**
 * {@code LockClient.create} finds a wrong address, a wrong password or a silent server at once,
 * with a message naming the address (never the password) and the cause; with
 * {@code holdfast.redis.connect-at-startup=false} it starts while Redis is down.
 */
class StartupConnectionTest {

  @RegisterExtension
  static final RedisExtension redis = RedisExtension.standalone();

  @RegisterExtension
  final Clients clients = new Clients();

  @Test
  void create_nothingListening_failsAtOnce_namingTheAddressButNotThePassword() {
    int port = LoopbackPorts.reserve(); // reserved, so nobody listens on it
    try {
      long start = System.nanoTime();
      LockException e = assertThrows(LockException.class, () -> clients.create(Map.of(
          "holdfast.redis.address", "redis://app:s3cret-pw@127.0.0.1:" + port,
          "holdfast.redis.timeout", "1s")));
      long tookMs = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);

      assertTrue(tookMs < 2_000, "took " + tookMs + " ms, the timeout is 1 s");
      String message = e.getMessage();
      assertTrue(message.startsWith("Cannot connect to Redis (standalone redis://app:***@127.0.0.1:"
          + port + "): connection refused"), message);
      assertTrue(message.contains("Check holdfast.redis.address, or set "
          + "holdfast.redis.connect-at-startup=false"), message);
      assertFalse(message.contains("s3cret-pw"), message);
    } finally {
      LoopbackPorts.release(port);
    }
  }

  @Test
  void create_serverThatNeverAnswers_failsWithinTheTimeout_andClosesItsConnection()
      throws Exception {
    try (SilentServer silent = new SilentServer()) {
      long start = System.nanoTime();
      LockException e = assertThrows(LockException.class, () -> clients.create(Map.of(
          "holdfast.redis.address", "redis://127.0.0.1:" + silent.port(),
          "holdfast.redis.timeout", "500ms")));
      long tookMs = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);

      assertTrue(tookMs < 1_000, "took " + tookMs + " ms, the timeout is 500 ms; connections: " + silent.accepted().size() + " " + e);
      assertTrue(e.getMessage().contains("no answer within holdfast.redis.timeout=500ms"),
          e.getMessage());
      assertFalse(silent.accepted().isEmpty(), "it did connect");
      for (Socket socket : silent.accepted()) {
        assertTrue(closedByPeer(socket), "the client closed the connection it opened");
      }
    }
  }

  @Test
  void create_wrongPassword_failsNamingTheAuthenticationFailure() {
    try (Jedis jedis = redis.server().admin()) {
      jedis.aclSetUser("starter", "on", ">right-pw", "~*", "&*", "+@all");
    }
    try {
      String address = "redis://starter:wrong-pw@127.0.0.1:" + redis.server().port();
      LockException e = assertThrows(LockException.class,
          () -> clients.create(Map.of("holdfast.redis.address", address)));
      String message = e.getMessage();
      assertTrue(message.contains("(standalone redis://starter:***@127.0.0.1:"
          + redis.server().port() + "): authentication failed (WRONGPASS"), message);
      assertTrue(message.contains("holdfast.redis.username and holdfast.redis.password"), message);
      assertFalse(message.contains("wrong-pw"), message);
    } finally {
      try (Jedis jedis = redis.server().admin()) {
        jedis.aclDelUser("starter");
      }
    }
  }

  @Test
  void create_withoutThePasswordTheServerRequires_saysOneIsNeeded() {
    try (RedisServer guarded = RedisServer.start("--requirepass", "guarded-pw")) {
      LockException e = assertThrows(LockException.class,
          () -> clients.create(Map.of("holdfast.redis.address", guarded.uri())));
      assertTrue(e.getMessage().contains("the server requires a password (NOAUTH"),
          e.getMessage());
      assertTrue(e.getMessage().contains("set holdfast.redis.password"), e.getMessage());
    }
  }

  @Test
  void connectAtStartupFalse_createsWhileRedisIsDown_thenLocksOnceItIsUp() {
    try (RedisServer later = RedisServer.start()) {
      later.kill(); // its port now refuses connections; restart() brings it back on that port
      LockClient client = clients.create(LockClientConfig.builder()
          .address(later.uri())
          .timeout(Duration.ofMillis(500))
          .connectAtStartup(false)
          .build());
      DistributedLock lock = client.getLock("started-early");

      assertThrows(LockException.class, lock::tryLock, "tryLock() fails fast while Redis is down");

      later.restart();
      assertTrue(lock.tryLock());
      lock.unlock();
      assertFalse(lock.isLocked());
    }
  }

  @Test
  void connectAtStartup_isAKnownKey_parsedStrictly() {
    assertFalse(LockClientConfig.fromProperties(
        Map.of("holdfast.redis.connect-at-startup", "FALSE")).connectAtStartup());
    assertTrue(LockClientConfig.fromProperties(Map.of()).connectAtStartup());
    IllegalArgumentException bad = assertThrows(IllegalArgumentException.class,
        () -> LockClientConfig.fromProperties(Map.of("holdfast.redis.connect-at-startup", "no")));
    assertEquals("holdfast.redis.connect-at-startup='no' must be true or false", bad.getMessage());
    IllegalArgumentException typo = assertThrows(IllegalArgumentException.class,
        () -> LockClientConfig.fromProperties(Map.of("holdfast.redis.connect-on-startup", "x")));
    assertTrue(typo.getMessage().contains("did you mean 'holdfast.redis.connect-at-startup'?"),
        typo.getMessage());
  }

  /** Whether the peer closed {@code socket} (reads end of stream) within a second. */
  private static boolean closedByPeer(Socket socket) throws IOException {
    socket.setSoTimeout(1_000);
    InputStream in = socket.getInputStream();
    try {
      while (true) {
        if (in.read() < 0) {
          return true;
        }
      }
    } catch (SocketTimeoutException e) {
      return false;
    } catch (IOException e) {
      return true; // reset by the peer
    }
  }

  /** Accepts connections on 127.0.0.1 and never writes a byte: a hung server. */
  private static final class SilentServer implements AutoCloseable {
    private final ServerSocket listener;
    private final List<Socket> accepted = new CopyOnWriteArrayList<>();

    SilentServer() throws IOException {
      listener = new ServerSocket(0, 50, InetAddress.getLoopbackAddress());
      Thread acceptor = new Thread(() -> {
        try {
          while (true) {
            accepted.add(listener.accept());
          }
        } catch (IOException e) {
          // closed
        }
      }, "silent-server");
      acceptor.setDaemon(true);
      acceptor.start();
    }

    int port() {
      return listener.getLocalPort();
    }

    List<Socket> accepted() {
      return accepted;
    }

    @Override
    public void close() throws IOException {
      listener.close();
      for (Socket s : accepted) {
        s.close();
      }
    }
  }
}

package dev.holdfast.engine;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import dev.holdfast.DistributedLock;
import dev.holdfast.LockClient;
import dev.holdfast.LockClientConfig;
import dev.holdfast.LockException;
import dev.holdfast.testing.Await;
import dev.holdfast.testing.LoopbackPorts;
import dev.holdfast.testing.RedisBinary;
import dev.holdfast.testing.RedisExtension;
import dev.holdfast.testing.RedisServer;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.KeyStore;
import java.security.cert.Certificate;
import java.security.cert.CertificateFactory;
import java.time.Duration;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import javax.net.ssl.SSLContext;
import javax.net.ssl.SSLSocketFactory;
import javax.net.ssl.TrustManagerFactory;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.junit.jupiter.api.io.TempDir;
import redis.clients.jedis.Jedis;

/** ACL users, database index and TLS, each against a real server. */
class ConnectionOptionsTest {

  @RegisterExtension
  static final RedisExtension redis = RedisExtension.standalone();

  @RegisterExtension
  final Clients clients = new Clients();

  @BeforeEach
  void setUp() {
    redis.flushAll();
    try (Jedis jedis = redis.server().admin()) {
      jedis.aclDelUser("locker");
      jedis.aclDelUser("nochannels");
    }
  }

  @Test
  void aclUser_withPassword_locks() throws Exception {
    try (Jedis jedis = redis.server().admin()) {
      jedis.aclSetUser("locker", "on", ">pw-123", "~*", "&*", "+@all");
    }
    LockClient client = clients.create(Map.of("holdfast.redis.address", redis.server().uri(),
        "holdfast.redis.username", "locker", "holdfast.redis.password", "pw-123"));
    DistributedLock lock = client.getLock("acl");
    lock.lock();
    assertTrue(lock.isHeldByCurrentThread());
    // A waiter's subscriber connection authenticates too, or it would never hear the unlock.
    LockClient other = clients.create(Map.of("holdfast.redis.address", redis.server().uri(),
        "holdfast.redis.username", "locker", "holdfast.redis.password", "pw-123"));
    CompletableFuture<Boolean> waiter = CompletableFuture.supplyAsync(() -> {
      try {
        return other.getLock("acl").tryLock(20, TimeUnit.SECONDS);
      } catch (InterruptedException e) {
        throw new IllegalStateException(e);
      }
    });
    Await.until(Duration.ofSeconds(5), () -> Waiters.subscribers(redis.server().admin(),
        "redisson_lock__channel:{acl}") > 0,
        "waiter subscribed as the ACL user");
    long released = System.nanoTime();
    lock.unlock();
    assertTrue(waiter.get(10, TimeUnit.SECONDS));
    assertTrue(System.nanoTime() - released < TimeUnit.SECONDS.toNanos(5), "woken by message");
  }


  @Test
  void aclUser_limitedToTheKeyPrefix_locksAndUnlocks() {
    try (Jedis jedis = redis.server().admin()) {
      jedis.aclSetUser("locker", "on", ">pw", "~locks:*", "&redisson_lock__channel:*", "+@all");
    }
    LockClient client = clients.create(Map.of("holdfast.redis.address", redis.server().uri(),
        "holdfast.redis.username", "locker", "holdfast.redis.password", "pw",
        "holdfast.key-prefix", "locks:"));
    DistributedLock lock = client.getLock("orders");
    lock.lock();
    lock.lock();
    lock.unlock();
    lock.unlock(); // the final release writes its marker under the prefix too
    assertFalse(lock.isLocked());
    assertFalse(lock.forceUnlock());
  }

  @Test
  void wrongPassword_failsWithoutRepeatingIt() {
    try (Jedis jedis = redis.server().admin()) {
      jedis.aclSetUser("locker", "on", ">right", "~*", "&*", "+@all");
    }
    String address = "redis://locker:wrong-pw@127.0.0.1:" + redis.server().port();
    LockException atStart = assertThrows(LockException.class,
        () -> clients.create(Map.of("holdfast.redis.address", address)));
    assertFalse(atStart.getMessage().contains("wrong-pw"), atStart.getMessage());
    // Without the check at creation, the first lock call is where it fails: no password there.
    LockClient client = clients.create(Map.of("holdfast.redis.address", address,
        "holdfast.redis.connect-at-startup", "false"));
    LockException e = assertThrows(LockException.class, () -> client.getLock("acl").tryLock());
    assertFalse(e.getMessage().contains("wrong-pw"), e.getMessage());
  }

  @Test
  void aclUser_withoutChannelPermission_getsAHint() {
    try (Jedis jedis = redis.server().admin()) {
      jedis.aclSetUser("nochannels", "on", ">pw", "~*", "resetchannels", "+@all");
    }
    LockClient client = clients.create(Map.of("holdfast.redis.address", redis.server().uri(),
        "holdfast.redis.username", "nochannels", "holdfast.redis.password", "pw"));
    DistributedLock lock = client.getLock("acl");
    lock.lock();
    LockException e = assertThrows(LockException.class, lock::unlock);
    assertTrue(e.getMessage().contains("&redisson_lock__channel:*"), e.getMessage());
    assertTrue(lock.isHeldByCurrentThread(), "a refused unlock changes nothing");
    assertEquals(1, lock.getHoldCount());
  }

  @Test
  void database_keepsLocksInThatDatabase() {
    LockClient client = clients.create(Map.of(
        "holdfast.redis.address", redis.server().uri() + "/5"));
    client.getLock("db").lock(10, TimeUnit.SECONDS);
    try (Jedis jedis = redis.server().admin()) {
      assertFalse(jedis.exists("db"));
      jedis.select(5);
      assertTrue(jedis.exists("db"));
    }
  }

  @Test
  void tls_rediss(@TempDir Path dir) throws Exception {
    Optional<Path> opensslOnPath = RedisBinary.findOnPath("openssl");
    assumeTrue(opensslOnPath.isPresent(),
        "skipped: no openssl on the PATH to make the test's certificate (CI installs it)");
    Process openssl = new ProcessBuilder(opensslOnPath.get().toString(), "req", "-x509",
        "-newkey", "rsa:2048",
        "-nodes", "-days", "1", "-subj", "/CN=localhost",
        "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost",
        "-keyout", dir.resolve("key.pem").toString(), "-out", dir.resolve("cert.pem").toString())
        .redirectErrorStream(true).redirectOutput(dir.resolve("openssl.log").toFile()).start();
    assertEquals(0, openssl.waitFor(), () -> read(dir.resolve("openssl.log")));
    int tlsPort = LoopbackPorts.reserve();
    try (RedisServer server = RedisServer.start("--tls-port", Integer.toString(tlsPort),
        "--tls-cert-file", dir.resolve("cert.pem").toString(),
        "--tls-key-file", dir.resolve("key.pem").toString(),
        "--tls-ca-cert-file", dir.resolve("cert.pem").toString(),
        "--tls-auth-clients", "no")) {
      LockClient client = clients.create(LockClientConfig.builder()
          .address("rediss://127.0.0.1:" + tlsPort)
          .sslSocketFactory(trusting(dir.resolve("cert.pem")))
          .build());
      DistributedLock lock = client.getLock("secure");
      lock.lock();
      assertTrue(lock.isHeldByCurrentThread());
      lock.unlock();
      assertFalse(lock.isLocked());
    } finally {
      LoopbackPorts.release(tlsPort);
    }
  }

  private static SSLSocketFactory trusting(Path pem) throws Exception {
    Certificate cert;
    try (InputStream in = Files.newInputStream(pem)) {
      cert = CertificateFactory.getInstance("X.509").generateCertificate(in);
    }
    KeyStore trust = KeyStore.getInstance(KeyStore.getDefaultType());
    trust.load(null, null);
    trust.setCertificateEntry("redis", cert);
    TrustManagerFactory tmf =
        TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
    tmf.init(trust);
    SSLContext context = SSLContext.getInstance("TLS");
    context.init(null, tmf.getTrustManagers(), null);
    return context.getSocketFactory();
  }

  private static String read(Path file) {
    try {
      return Files.readString(file);
    } catch (Exception e) {
      return e.toString();
    }
  }
}

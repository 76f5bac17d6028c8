package dev.holdfast.testing;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Collectors;

import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Nested;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

import redis.clients.jedis.HostAndPort;
import redis.clients.jedis.Jedis;
import redis.clients.jedis.RedisClusterClient;
import redis.clients.jedis.RedisSentinelClient;

/** Proves the harness itself: real processes, the waits it promises, and that nothing leaks. */
class HarnessSmokeTest {

  private static final Duration SHORT = Duration.ofSeconds(5);

  @RegisterExtension
  static final RedisExtension redis = RedisExtension.standalone();

  /** Pid of the static extension's server, to show that nested classes share it. */
  private static long outerServerPid;
  /** Ports of the instance-field extension's servers; all must be closed by the end. */
  private static final List<Integer> perTestPorts = new ArrayList<>();

  @BeforeAll
  static void rememberServer() {
    outerServerPid = redis.server().pid();
  }

  @BeforeEach
  void clean() {
    redis.flushAll();
  }

  @AfterAll
  static void onlyTheExtensionsServerIsStillRunning() {
    assertNothingListensOn(perTestPorts);
    // Runs before the extension's afterAll, so its server is the one expected survivor.
    long extensionServer = redis.server().pid();
    List<String> leftovers = ProcessHandle.current().descendants()
        .filter(ProcessHandle::isAlive)
        .filter(process -> process.pid() != extensionServer)
        .map(process -> process.pid() + " " + process.info().commandLine().orElse("?"))
        .collect(Collectors.toList());
    assertEquals(List.of(), leftovers, "child processes left running");
  }

  @Test
  void extension_standalone_answersAndDescribesItself() {
    RedisServer server = redis.server();
    assertEquals("PONG", server.withAdmin(Jedis::ping));
    assertEquals("127.0.0.1", server.host());
    assertEquals("redis://127.0.0.1:" + server.port(), server.uri());
    assertEquals(new HostAndPort("127.0.0.1", server.port()), server.hostAndPort());
    String save = server.withAdmin(jedis -> jedis.configGet("save").get("save"));
    assertEquals("", save, "persistence is off");
    assertThrows(IllegalStateException.class, redis::clusterSetup);
  }

  @Test
  void restart_keepsPortAndLosesDataAndScripts() {
    int port;
    try (RedisServer server = RedisServer.start()) {
      port = server.port();
      server.withAdmin(jedis -> jedis.set("key", "value"));
      String sha = server.withAdmin(jedis -> jedis.scriptLoad("return 1"));
      long pidBefore = server.pid();

      server.restart();

      assertEquals(port, server.port());
      assertNotEquals(pidBefore, server.pid());
      assertNull(server.withAdmin(jedis -> jedis.get("key")));
      boolean scriptCached = server.withAdmin(jedis -> jedis.scriptExists(sha));
      assertFalse(scriptCached, "script cache survived the restart");

      server.kill();
      assertFalse(server.isRunning());
      assertFalse(LoopbackPorts.isListening(port), "killed server still listening");
      server.restart();
      assertEquals("PONG", server.withAdmin(Jedis::ping));
    }
    assertFalse(LoopbackPorts.isListening(port), "closed server still listening");
  }

  @Test
  void killAndRestart_withAppendFsyncAlways_keepsAcknowledgedWrites() {
    try (RedisServer server = RedisServer.start("--appendonly", "yes", "--appendfsync", "always")) {
      server.withAdmin(jedis -> jedis.set("key", "value"));
      server.withAdmin(jedis -> jedis.psetex("expiring", 60_000, "soon"));

      server.kill();
      server.restart();

      assertEquals("value", server.withAdmin(jedis -> jedis.get("key")));
      long ttl = server.withAdmin(jedis -> jedis.pttl("expiring"));
      assertTrue(ttl > 0 && ttl <= 60_000, "the expiry survives too: " + ttl);
    }
  }

  @Test
  void invalidArguments_areRejectedBeforeAnythingStarts() {
    assertThrows(IllegalArgumentException.class, () -> RedisServer.start("--port", "6379"));
    assertThrows(IllegalArgumentException.class,
        () -> RedisExtension.standalone("--bind", "0.0.0.0"));
    assertThrows(IllegalArgumentException.class, () -> RedisExtension.sentinel("my master"));
    assertThrows(IllegalArgumentException.class, () -> RedisExtension.cluster(0, 1));
  }

  @Test
  void startReplica_replicatesSet() {
    RedisServer master = redis.server();
    int replicaPort;
    try (RedisServer replica = master.startReplica()) {
      replicaPort = replica.port();
      master.withAdmin(jedis -> jedis.set("replicated", "yes"));
      Await.until(SHORT, () -> "yes".equals(replica.withAdmin(jedis -> jedis.get("replicated"))),
          "the replica has the key");
      assertEquals("slave", replica.info("replication", "role"));
    }
    assertFalse(LoopbackPorts.isListening(replicaPort));
  }

  @Test
  void sentinel_failover_promotesReplicaThatAcceptsWrites() {
    List<Integer> ports = new ArrayList<>();
    try (RedisSentinelSetup setup = RedisSentinelSetup.start("smoke-master")) {
      setup.sentinels().forEach(sentinel -> ports.add(sentinel.getPort()));
      ports.add(setup.master().port());
      ports.add(setup.replica().port());
      assertEquals(3, setup.sentinelNodes().split(",").length);
      assertEquals(setup.master().hostAndPort(), setup.currentMaster());

      RedisServer formerReplica = setup.replica();
      try (RedisSentinelClient client = RedisSentinelClient.builder()
          .masterName(setup.masterName()).sentinels(setup.sentinels()).build()) {
        client.set("before", "failover");
        Await.until(SHORT,
            () -> "failover".equals(formerReplica.withAdmin(jedis -> jedis.get("before"))),
            "the replica has the key");

        HostAndPort newMaster = setup.failover();

        assertEquals(formerReplica.hostAndPort(), newMaster);
        assertEquals(newMaster, setup.currentMaster());
        assertSame(formerReplica, setup.master());
        assertFalse(setup.replica().isRunning(), "the former master was killed");
        assertEquals("failover", formerReplica.withAdmin(jedis -> jedis.get("before")));
        assertEquals("OK", formerReplica.withAdmin(jedis -> jedis.set("after", "failover")));
        Await.until(SHORT, () -> newMaster.equals(client.getCurrentMaster()),
            "the sentinel client follows");
      }
    }
    assertNothingListensOn(ports);
  }

  @Test
  void cluster_formsAndFailoverMovesSlotToFormerReplica() {
    List<Integer> ports = new ArrayList<>();
    try (RedisClusterSetup cluster = RedisClusterSetup.start(3, 1)) {
      cluster.nodes().forEach(node -> {
        ports.add(node.getPort());
        ports.add(node.getPort() + LoopbackPorts.CLUSTER_BUS_OFFSET);
      });
      assertEquals(6, cluster.nodes().size());
      assertEquals(3, cluster.seedNodes().split(",").length);

      try (RedisClusterClient client =
          RedisClusterClient.builder().nodes(cluster.nodes()).build()) {
        client.set("smoke", "1");
        assertEquals("1", client.get("smoke"));
        RedisServer oldMaster = cluster.masterForKey("smoke");
        assertEquals("1", oldMaster.withAdmin(jedis -> jedis.get("smoke")));
        RedisServer replica = cluster.replicaOf(oldMaster);

        RedisServer promoted = cluster.failoverMasterOf("smoke");

        assertSame(replica, promoted);
        assertSame(replica, cluster.masterForKey("smoke"));
        assertSame(oldMaster, cluster.replicaOf(replica));
        assertEquals("1", replica.withAdmin(jedis -> jedis.get("smoke")));
        assertEquals("1", client.get("smoke"), "the client follows the MOVED redirect");
        client.set("smoke", "2");
        assertEquals("2", replica.withAdmin(jedis -> jedis.get("smoke")));
      }
    }
    assertNothingListensOn(ports);
  }

  private static void assertNothingListensOn(List<Integer> ports) {
    List<Integer> listening =
        ports.stream().filter(LoopbackPorts::isListening).collect(Collectors.toList());
    assertEquals(List.of(), listening, "ports still listening after close()");
  }

  @Test
  void extension_killsServerAfterOutermostClassAndAfterEachTest() throws Exception {
    // The callbacks ignore the context, so they can be driven directly.
    RedisExtension perClass = RedisExtension.standalone();
    perClass.beforeAll(null);
    perClass.beforeAll(null); // a @Nested class
    int port = perClass.server().port();
    perClass.beforeEach(null);
    perClass.afterEach(null);
    perClass.afterAll(null);
    assertTrue(LoopbackPorts.isListening(port), "still used by the outer class");
    perClass.afterAll(null);
    assertFalse(LoopbackPorts.isListening(port));
    assertThrows(IllegalStateException.class, perClass::server);

    RedisExtension perTest = RedisExtension.standalone();
    perTest.beforeEach(null);
    int perTestPort = perTest.server().port();
    perTest.afterEach(null);
    assertFalse(LoopbackPorts.isListening(perTestPort));
  }

  /** The outer class's static extension serves nested classes too; it is started only once. */
  @Nested
  class NestedClass {

    @Test
    void sharesTheOuterServer() {
      assertEquals(outerServerPid, redis.server().pid());
    }
  }

  /** An extension on an instance field gets a fresh server per test, killed after it. */
  @Nested
  class InstanceField {

    @RegisterExtension
    final RedisExtension perTest = RedisExtension.standalone();

    @Test
    void startsAServerForTheTest() {
      assertEquals("PONG", perTest.server().withAdmin(Jedis::ping));
      perTestPorts.add(perTest.server().port());
    }

    @Test
    void startsAnotherServerForThisTest() {
      assertEquals("PONG", perTest.server().withAdmin(Jedis::ping));
      perTestPorts.add(perTest.server().port());
    }
  }
}

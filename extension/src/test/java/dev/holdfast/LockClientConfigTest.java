package dev.holdfast;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.holdfast.testing.LogCapture;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.logging.Level;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/** Configuration parsing: defaults, every key, and errors that name the culprit. */
class LockClientConfigTest {

  @Test
  void emptyMap_givesTheDocumentedDefaults() {
    LockClientConfig c = LockClientConfig.fromProperties(Map.of());
    assertEquals(LockClientConfig.Mode.STANDALONE, c.mode());
    assertEquals("redis://localhost:6379", c.address().toString());
    assertEquals(Duration.ofSeconds(2), c.timeout());
    assertEquals(64, c.poolMaxSize());
    assertEquals(Duration.ofSeconds(30), c.watchdogTimeout());
    assertEquals("", c.keyPrefix());
    assertEquals(0, c.database());
    assertFalse(c.tls());
    assertTrue(c.username().isEmpty());
    assertTrue(c.password().isEmpty());
  }

  @Test
  void everyKey_isRead() {
    LockClientConfig c = LockClientConfig.fromProperties(Map.of(
        "holdfast.redis.mode", "Sentinel",
        "holdfast.redis.nodes", "10.0.0.1:26379, 10.0.0.2:26379",
        "holdfast.redis.sentinel.master", "main",
        "holdfast.redis.username", "app",
        "holdfast.redis.password", "s3cret",
        "holdfast.redis.database", "3",
        "holdfast.redis.timeout", "500ms",
        "holdfast.redis.pool.max-size", "16",
        "holdfast.watchdog-timeout", "PT45S",
        "holdfast.key-prefix", "svc:"));
    assertEquals(LockClientConfig.Mode.SENTINEL, c.mode());
    assertEquals(List.of("redis://10.0.0.1:26379", "redis://10.0.0.2:26379"),
        c.nodes().stream().map(Object::toString).toList());
    assertEquals("main", c.sentinelMaster().orElseThrow());
    assertEquals("app", c.username().orElseThrow());
    assertEquals("s3cret", c.password().orElseThrow());
    assertEquals(3, c.database());
    assertEquals(Duration.ofMillis(500), c.timeout());
    assertEquals(16, c.poolMaxSize());
    assertEquals(Duration.ofSeconds(45), c.watchdogTimeout());
    assertEquals("svc:", c.keyPrefix());
  }

  @Test
  void addressUri_suppliesCredentialsAndDatabase_unlessKeysOverride() {
    LockClientConfig fromUri = LockClientConfig.fromProperties(
        Map.of("holdfast.redis.address", "rediss://bob:p%40ss@cache:6380/4"));
    assertEquals("bob", fromUri.username().orElseThrow());
    assertEquals("p@ss", fromUri.password().orElseThrow());
    assertEquals(4, fromUri.database());
    assertTrue(fromUri.tls());
    LockClientConfig overridden = LockClientConfig.fromProperties(Map.of(
        "holdfast.redis.address", "redis://bob:old@cache:6380/4",
        "holdfast.redis.password", "new", "holdfast.redis.database", "1"));
    assertEquals("new", overridden.password().orElseThrow());
    assertEquals(1, overridden.database());
  }

  @Test
  void toString_neverShowsPasswords() {
    LockClientConfig c = LockClientConfig.fromProperties(Map.of(
        "holdfast.redis.address", "redis://bob:hunter2@cache:6380",
        "holdfast.redis.password", "topsecret"));
    assertFalse(c.toString().contains("hunter2"), c.toString());
    assertFalse(c.toString().contains("topsecret"), c.toString());
    assertTrue(c.toString().contains("redis://bob:***@cache:6380"), c.toString());
  }

  @ParameterizedTest
  @CsvSource(delimiter = '|', value = {
      "500ms|500", "30s|30000", "5m|300000", "1h|3600000", "PT1.5S|1500", "2 s|2000"})
  void durations_acceptUnitsAndIso(String text, long millis) {
    LockClientConfig c = LockClientConfig.fromProperties(Map.of("holdfast.redis.timeout", text));
    assertEquals(millis, c.timeout().toMillis());
  }

  @ParameterizedTest
  @CsvSource(delimiter = '|', value = {
      "holdfast.redis.timeout|30|holdfast.redis.timeout='30' is not a duration",
      "holdfast.redis.timeout|soon|holdfast.redis.timeout='soon' is not a duration",
      "holdfast.redis.timeout|0s|holdfast.redis.timeout must be a positive duration",
      "holdfast.watchdog-timeout|100ms|holdfast.watchdog-timeout must be at least 300ms",
      "holdfast.redis.mode|replicated|holdfast.redis.mode='replicated' is not a mode",
      "holdfast.redis.pool.max-size|lots|holdfast.redis.pool.max-size='lots' is not a whole number",
      "holdfast.redis.pool.max-size|0|holdfast.redis.pool.max-size must be at least 1",
      "holdfast.redis.database|-1|holdfast.redis.database must not be negative",
      "holdfast.redis.address|http://cache:6379|must start with redis:// or rediss://",
      "holdfast.redis.address|redis://cache|must name a host and a port",
      "holdfast.redis.address|redis://cache:6379/x|the only path allowed is a database index",
      "holdfast.redis.adress|redis://cache:6379|"
          + "Unknown configuration key 'holdfast.redis.adress': did you mean 'holdfast.redis.address'?",
      "holdfast.watchdog-timout|30s|"
          + "Unknown configuration key 'holdfast.watchdog-timout': did you mean 'holdfast.watchdog-timeout'?",
      "holdfast.redis.mode|cluster|holdfast.redis.nodes is required when holdfast.redis.mode=cluster",
      "holdfast.redis.mode|sentinel|holdfast.redis.nodes is required when holdfast.redis.mode=sentinel"})
  void badValues_failNamingKeyAndValue(String key, String value, String message) {
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
        () -> LockClientConfig.fromProperties(Map.of(key, value)));
    assertTrue(e.getMessage().contains(message), e.getMessage());
  }

  @Test
  void badUri_withPassword_doesNotRepeatThePassword() {
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
        () -> LockClientConfig.fromProperties(
            Map.of("holdfast.redis.address", "redis://bob:hunter2@cache:6379/x")));
    assertFalse(e.getMessage().contains("hunter2"), e.getMessage());
  }

  @Test
  void contradictions_failNamingBothKeys() {
    IllegalArgumentException noMaster = assertThrows(IllegalArgumentException.class,
        () -> LockClientConfig.fromProperties(Map.of("holdfast.redis.mode", "sentinel",
            "holdfast.redis.nodes", "a:26379")));
    assertTrue(noMaster.getMessage().contains("holdfast.redis.sentinel.master"));
    IllegalArgumentException clusterDb = assertThrows(IllegalArgumentException.class,
        () -> LockClientConfig.fromProperties(Map.of("holdfast.redis.mode", "cluster",
            "holdfast.redis.nodes", "a:7000", "holdfast.redis.database", "2")));
    assertTrue(clusterDb.getMessage().contains("holdfast.redis.database=2"));
    IllegalArgumentException mixed = assertThrows(IllegalArgumentException.class,
        () -> LockClientConfig.fromProperties(Map.of("holdfast.redis.mode", "cluster",
            "holdfast.redis.nodes", "redis://a:7000,rediss://b:7000")));
    assertTrue(mixed.getMessage().contains("holdfast.redis.nodes"));
  }

  @Test
  void otherLayersKeys_andOtherNamespaces_areIgnoredSilently() {
    try (LogCapture log = LogCapture.of(LockClientConfig.class.getName())) {
      LockClientConfig c = LockClientConfig.fromProperties(Map.of(
          "holdfast.locked.wait-time", "2s",
          "holdfast.\"com.acme.Job/run\".locked.lease-time", "5s",
          "java.version", "17", "holdfastx.redis.adress", "redis://x:1",
          "holdfast.redis.timeout", "3s"));
      assertEquals(Duration.ofSeconds(3), c.timeout());
      assertEquals(List.of(), log.messages(Level.WARNING));
    }
  }

  @Test
  void foreignKeyUnderHoldfast_isIgnoredWithAWarningNamingIt() {
    try (LogCapture log = LogCapture.of(LockClientConfig.class.getName())) {
      LockClientConfig c = LockClientConfig.fromProperties(Map.of(
          "holdfast.version", "0.2.0-SNAPSHOT", "holdfast.redis.address", "redis://cache:6380"));
      assertEquals("redis://cache:6380", c.address().toString());
      List<String> warnings = log.messages(Level.WARNING);
      assertEquals(1, warnings.size(), warnings.toString());
      assertTrue(warnings.get(0).startsWith("Unrecognized configuration key 'holdfast.version'"
          + " was provided; Holdfast ignores it (its closest key is '"), warnings.get(0));
    }
  }

  @ParameterizedTest
  @CsvSource(delimiter = '|', value = {
      "holdfast.redis.cluster.nodes|holdfast.redis.nodes",  // anything under holdfast.redis.
      "holdfast.keyprefix|holdfast.key-prefix",              // within two edits of a key
      "holdfast.rediss.address|holdfast.redis.address",
      "holdfast.watchdog.timeout|holdfast.watchdog-timeout",
      "holdfast.lock.wait-time|holdfast.locked.wait-time",
      "holdfast.watchdgo-timeout|holdfast.watchdog-timeout"}) // a transposition is one edit
  void unknownKeyInOrNearHoldfastsNamespaces_failsWithTheClosestKey(String key, String closest) {
    try (LogCapture log = LogCapture.of(LockClientConfig.class.getName())) {
      IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
          () -> LockClientConfig.fromProperties(Map.of(key, "x")));
      assertTrue(e.getMessage().startsWith("Unknown configuration key '" + key
          + "': did you mean '" + closest + "'?"), e.getMessage());
      assertEquals(List.of(), log.messages(Level.WARNING), "an error, not also a warning");
    }
  }

  @Test
  void everyUnknownKey_isNamed() {
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
        () -> LockClientConfig.fromProperties(Map.of(
            "holdfast.redis.adress", "redis://x:1", "holdfast.key-prefx", "app:")));
    assertTrue(e.getMessage().contains("'holdfast.redis.adress'")
        && e.getMessage().contains("'holdfast.key-prefx'"), e.getMessage());
  }

  @Test
  void lockClientCreate_followsTheSameRules() {
    try (LogCapture log = LogCapture.of(LockClientConfig.class.getName());
        LockClient client = LockClient.create(Map.of("holdfast.version", "1.0",
            "holdfast.redis.connect-at-startup", "false"))) { // no Redis here
      assertTrue(log.messages(Level.WARNING).get(0).contains("'holdfast.version'"));
    }
    assertThrows(IllegalArgumentException.class,
        () -> LockClient.create(Map.of("holdfast.redis.adress", "redis://x:1")));
  }

  @Test
  void builder_rejectsBadValuesImmediately() {
    LockClientConfig.Builder b = LockClientConfig.builder();
    assertThrows(IllegalArgumentException.class, () -> b.poolMaxSize(0));
    assertThrows(IllegalArgumentException.class, () -> b.timeout(Duration.ZERO));
    assertThrows(IllegalArgumentException.class, () -> b.address("nope://x:1"));
    assertThrows(IllegalArgumentException.class, () -> b.sentinelMaster(" "));
    LockClientConfig c = b.mode(LockClientConfig.Mode.CLUSTER).nodes(List.of("a:7000")).build();
    assertEquals(List.of("redis://a:7000"), c.nodes().stream().map(Object::toString).toList());
  }

  @Test
  void syncReplicas_defaultsToAuto_withAOneSecondTimeout() {
    LockClientConfig c = LockClientConfig.fromProperties(Map.of());
    assertEquals(LockClientConfig.SYNC_REPLICAS_AUTO, c.syncReplicas());
    assertEquals(Duration.ofSeconds(1), c.syncTimeout());
  }

  @ParameterizedTest
  @CsvSource({"auto, -1", "AUTO, -1", "none, 0", "None, 0", "1, 1", "3, 3"})
  void syncReplicas_isAutoNoneOrACount(String text, int replicas) {
    LockClientConfig c = LockClientConfig.fromProperties(Map.of(
        "holdfast.redis.sync-replicas", text, "holdfast.redis.sync-timeout", "250ms"));
    assertEquals(replicas, c.syncReplicas());
    assertEquals(Duration.ofMillis(250), c.syncTimeout());
  }

  @ParameterizedTest
  @CsvSource(delimiter = '|', value = {
      "holdfast.redis.sync-replicas|0|holdfast.redis.sync-replicas must be 'auto', 'none' or a "
          + "positive number of replicas, but was '0'",
      "holdfast.redis.sync-replicas|-1|holdfast.redis.sync-replicas must be 'auto', 'none' or a "
          + "positive number of replicas, but was '-1'",
      "holdfast.redis.sync-replicas|many|holdfast.redis.sync-replicas must be 'auto', 'none' or "
          + "a positive number of replicas, but was 'many'",
      "holdfast.redis.sync-timeout|0s|holdfast.redis.sync-timeout must be a positive duration",
      "holdfast.redis.sync-timeout|soon|holdfast.redis.sync-timeout='soon' is not a duration"})
  void badSyncValues_failNamingKeyAndValue(String key, String value, String message) {
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
        () -> LockClientConfig.fromProperties(Map.of(key, value)));
    assertTrue(e.getMessage().contains(message), e.getMessage());
  }

  @Test
  void builder_syncReplicas_takesAutoNoneOrACount() {
    LockClientConfig.Builder b = LockClientConfig.builder();
    assertEquals(LockClientConfig.SYNC_REPLICAS_NONE,
        b.syncReplicas(LockClientConfig.SYNC_REPLICAS_NONE).build().syncReplicas());
    assertEquals(2, b.syncReplicas(2).build().syncReplicas());
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
        () -> b.syncReplicas(-2));
    assertTrue(e.getMessage().contains("holdfast.redis.sync-replicas"), e.getMessage());
    assertThrows(IllegalArgumentException.class, () -> b.syncTimeout(Duration.ZERO));
  }
}

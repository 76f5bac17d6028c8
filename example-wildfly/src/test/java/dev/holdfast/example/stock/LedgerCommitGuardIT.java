package dev.holdfast.example.stock;

import static org.junit.jupiter.api.Assertions.assertAll;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.holdfast.LockClient;
import dev.holdfast.example.stock.StockServers.Servers;
import dev.holdfast.testing.Await;
import jakarta.json.Json;
import jakarta.json.JsonObject;
import jakarta.json.JsonReader;
import java.io.StringReader;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInfo;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import redis.clients.jedis.Jedis;

/**
 * The commit guard on WildFly's Narayana: a {@code @Locked} posting ({@link Ledger}) in a JTA
 * transaction — begun by {@code @Transactional} or by the method itself — whose lock another
 * client takes away ({@code forceUnlock}) while it runs is rolled back, and its caller is told
 * which lock was lost and why. The servers' watchdog lease is
 * {@value StockServers#WATCHDOG_TIMEOUT}.
 */
@ExtendWith(StockServers.class)
class LedgerCommitGuardIT {
  private static final Duration TIMEOUT = Duration.ofSeconds(30);
  /** Longer than any test waits: a posting holds still until the test ends its hold. */
  private static final long HOLD_MS = 25_000;

  private static LockClient otherClient;

  private final Servers servers;
  private final StockClient server;

  LedgerCommitGuardIT(Servers servers) {
    this.servers = servers;
    this.server = new StockClient(servers.a());
  }

  @BeforeAll
  static void connectOtherClient(Servers servers) {
    otherClient = LockClient.create(Map.of("holdfast.redis.address", servers.redis().uri()));
  }

  @AfterAll
  static void closeOtherClient() {
    if (otherClient != null) {
      otherClient.close();
    }
  }

  @Test
  void post_withItsLockUntouched_commits(TestInfo test) {
    String account = StockEndpointIT.sku(test);
    for (String variant : List.of("", "/verified", "/own-transaction")) {
      JsonObject posted = StockClient.json(StockClient.expectOk(post(account, variant, 0)));
      assertEquals(5, posted.getJsonObject("entry").getInt("amount"), variant);
    }

    JsonObject statement = statement(account);
    assertAll(statement.toString(),
        () -> assertEquals(15, statement.getInt("balance")),
        () -> assertEquals(3, statement.getJsonArray("entries").size()),
        () -> assertEquals(0, statement.getInt("rolledBack")));
    try (Jedis redis = servers.redis().admin()) {
      assertFalse(redis.exists(lockName(account)), "released once the call returned");
    }
  }

  @ParameterizedTest(name = "POST /ledger/…{0}")
  @ValueSource(strings = {"", "/own-transaction"})
  void post_whoseLockIsTakenAwayAndNoticedByARenewal_rollsBack_andSaysWhy(String variant,
      TestInfo test) throws Exception {
    String account = StockEndpointIT.sku(test) + variant.replace('/', '-');
    String lock = lockName(account);
    try (Jedis redis = servers.redis().admin()) {
      CompletableFuture<HttpResponse<String>> call =
          CompletableFuture.supplyAsync(() -> post(account, variant, HOLD_MS));
      Await.until(TIMEOUT, () -> redis.exists(lock), "the posting holds " + lock);

      assertTrue(otherClient.getLock(lock).forceUnlock(), "taken away");
      Await.until(TIMEOUT, () -> lostLocks().contains(lock),
          "a renewal reported " + lock + " lost (LockLost event)");
      assertFalse(call.isDone(), "the posting is still holding still");
      endHold(account);

      assertLost(call.get(TIMEOUT.toMillis(), TimeUnit.MILLISECONDS), lock);
    }
    assertRolledBackOnly(account);
  }

  @Test
  void postVerified_whoseLockIsTakenAwayUnnoticed_rollsBack_andSaysWhy(TestInfo test)
      throws Exception {
    String account = StockEndpointIT.sku(test);
    String lock = lockName(account);
    try (Jedis redis = servers.redis().admin()) {
      CompletableFuture<HttpResponse<String>> call =
          CompletableFuture.supplyAsync(() -> post(account, "/verified", HOLD_MS));
      Await.until(TIMEOUT, () -> redis.exists(lock), "the posting holds " + lock);

      assertTrue(otherClient.getLock(lock).forceUnlock(), "taken away");
      // A fixed lease: no renewal looks at the lock, so only the check before the commit can
      // find it gone.
      assertFalse(lostLocks().contains(lock), "nothing noticed the loss yet");
      endHold(account);

      assertLost(call.get(TIMEOUT.toMillis(), TimeUnit.MILLISECONDS), lock);
    }
    assertRolledBackOnly(account);
    Await.until(TIMEOUT, () -> lostLocks().contains(lock),
        "the check before the commit reported " + lock + " lost (LockLost event)");
  }

  @Test
  void postInterruptible_whoseLockIsTakenAway_stopsAtOnce_andLeavesNoInterruptBehind(
      TestInfo test) throws Exception {
    String account = StockEndpointIT.sku(test);
    String lock = lockName(account);
    long tookMillis;
    try (Jedis redis = servers.redis().admin()) {
      CompletableFuture<HttpResponse<String>> call =
          CompletableFuture.supplyAsync(() -> post(account, "/interruptible", HOLD_MS));
      Await.until(TIMEOUT, () -> redis.exists(lock), "the posting holds " + lock);

      long takenNanos = System.nanoTime();
      assertTrue(otherClient.getLock(lock).forceUnlock(), "taken away");
      // No end-hold: only the interrupt ends the hold before HOLD_MS.
      HttpResponse<String> response = call.get(TIMEOUT.toMillis(), TimeUnit.MILLISECONDS);
      tookMillis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - takenNanos);
      assertLost(response, lock);
      assertTrue(StockClient.json(response.body()).getString("error")
          .contains("the posting stopped"), response::body);
    }
    System.out.println("interruptible posting answered " + tookMillis + " ms after forceUnlock");
    assertTrue(tookMillis < HOLD_MS / 2, () -> "stopped after " + tookMillis + " ms");
    assertRolledBackOnly(account);
    JsonObject thread = StockClient.json(
        StockClient.expectOk(server.get("ledger/last-interrupted-thread")));
    assertFalse(thread.getBoolean("interruptPending"), thread::toString);
  }

  @Test
  void manyPosts_spanningRenewals_areNeverRolledBack(TestInfo test) throws Exception {
    String prefix = StockEndpointIT.sku(test);
    int accounts = 10;
    int postsPerAccount = 10;
    ExecutorService callers = Executors.newFixedThreadPool(accounts);
    try {
      List<CompletableFuture<Integer>> calls = new ArrayList<>();
      for (int a = 0; a < accounts; a++) {
        String account = prefix + "-" + a;
        calls.add(CompletableFuture.supplyAsync(() -> {
          int committed = 0;
          for (int i = 0; i < postsPerAccount; i++) {
            long holdMs = i % 4 * 400L; // 0 to 1.2 s: up to two renewals during a transaction
            committed += post(account, "", holdMs).statusCode() == 200 ? 1 : 0;
          }
          return committed;
        }, callers));
      }
      int committed = 0;
      for (CompletableFuture<Integer> call : calls) {
        committed += call.get(2 * TIMEOUT.toMillis(), TimeUnit.MILLISECONDS);
      }
      assertEquals(accounts * postsPerAccount, committed, "postings committed");
    } finally {
      callers.shutdownNow();
    }
    List<String> lost = lostLocks();
    for (int a = 0; a < accounts; a++) {
      String account = prefix + "-" + a;
      JsonObject statement = statement(account);
      assertEquals(postsPerAccount, statement.getJsonArray("entries").size(), account);
      assertEquals(0, statement.getInt("rolledBack"), account);
      assertFalse(lost.contains(lockName(account)), "no loss reported for " + account);
    }
  }

  private HttpResponse<String> post(String account, String variant, long holdMs) {
    return server.post("ledger/" + account + variant + "?amount=5&holdMs=" + holdMs);
  }

  private void endHold(String account) {
    assertEquals(204, server.post("ledger/" + account + "/end-hold").statusCode());
  }

  private JsonObject statement(String account) {
    return StockClient.json(StockClient.expectOk(server.get("ledger/" + account)));
  }

  /** The transaction ran (and was counted) but nothing of it was committed. */
  private void assertRolledBackOnly(String account) {
    JsonObject statement = statement(account);
    assertAll(statement.toString(),
        () -> assertEquals(0, statement.getInt("balance")),
        () -> assertTrue(statement.getJsonArray("entries").isEmpty()),
        () -> assertEquals(1, statement.getInt("rolledBack")));
  }

  private static void assertLost(HttpResponse<String> response, String lock) {
    assertEquals(409, response.statusCode(), response::body);
    JsonObject body = StockClient.json(response.body());
    assertEquals(lock, body.getString("lock"));
    assertTrue(body.getString("error").contains(lock), body::toString);
  }

  private List<String> lostLocks() {
    String body = StockClient.expectOk(server.get("ledger/lost-locks"));
    try (JsonReader reader = Json.createReader(new StringReader(body))) {
      return reader.readArray().getValuesAs(JsonObject.class).stream()
          .map(lost -> lost.getString("lockName")).toList();
    }
  }

  private static String lockName(String account) {
    return "ledger:" + account;
  }
}

package dev.holdfast.example.stock;

import static io.restassured.RestAssured.given;
import static org.hamcrest.Matchers.containsString;
import static org.hamcrest.Matchers.empty;
import static org.hamcrest.Matchers.equalTo;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.holdfast.LockClient;
import dev.holdfast.testing.Await;
import io.quarkus.test.common.WithTestResource;
import io.quarkus.test.junit.QuarkusTest;
import io.restassured.response.Response;
import jakarta.inject.Inject;
import java.net.URI;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import org.eclipse.microprofile.config.inject.ConfigProperty;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInfo;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import redis.clients.jedis.DefaultJedisClientConfig;
import redis.clients.jedis.Jedis;

/**
 * The commit guard on Quarkus's Narayana: a {@code @Locked @Transactional} posting
 * ({@link Ledger}) whose lock another client takes away ({@code forceUnlock}) while it runs is
 * rolled back, and its caller is told which lock was lost and why — whether the transaction was
 * begun by {@code @Transactional} or by the method itself, and also when the method returns a
 * {@code Uni} ({@code /async}), whose transaction Quarkus commits only when the {@code Uni}
 * completes. The test profile's watchdog lease is 2 s (renewed every ~670 ms).
 */
@QuarkusTest
@WithTestResource(RedisTestResource.class)
class LedgerCommitGuardTest {
  private static final Duration TIMEOUT = Duration.ofSeconds(20);
  /** Longer than any test waits: a posting holds still until the test ends its hold. */
  private static final long HOLD_MS = 25_000;

  @ConfigProperty(name = "holdfast.redis.address")
  String redisAddress;

  @Inject
  Ledger ledger;

  private String account;

  @BeforeEach
  void uniqueAccount(TestInfo test) {
    account = test.getTestMethod().orElseThrow().getName();
  }

  @Test
  void post_withItsLockUntouched_commits() {
    List<String> variants = List.of("", "/verified", "/own-transaction", "/async");
    for (String variant : variants) {
      post(variant, 0).then().statusCode(200).body("entry.amount", equalTo(5));
    }

    given().get("/ledger/{account}", account).then().statusCode(200)
        .body("balance", equalTo(5 * variants.size()))
        .body("entries.size()", equalTo(variants.size()))
        .body("rolledBack", equalTo(0));
    try (Jedis redis = redis()) {
      assertFalse(redis.exists(lockName()), "released once the call returned");
    }
  }

  /**
   * For {@code /async} the method has long returned its {@code Uni} when the lock is taken away:
   * the transaction is still open then (nothing committed, nothing rolled back), and the guard
   * checks the lock when Quarkus commits, once the {@code Uni} completes.
   */
  @ParameterizedTest(name = "POST /ledger/…{0}")
  @ValueSource(strings = {"", "/own-transaction", "/async"})
  void post_whoseLockIsTakenAwayAndNoticedByARenewal_rollsBack_andSaysWhy(String variant)
      throws Exception {
    account += variant.replace('/', '-');
    try (LockClient otherClient = otherClient()) {
      CompletableFuture<Response> call =
          CompletableFuture.supplyAsync(() -> post(variant, HOLD_MS));
      Await.until(TIMEOUT, () -> ledger.holding(account), "the posting holds still");

      assertTrue(otherClient.getLock(lockName()).forceUnlock(), "taken away");
      Await.until(TIMEOUT, () -> lostLocks().contains(lockName()),
          "a renewal reported " + lockName() + " lost (LockLost event)");
      assertFalse(call.isDone(), "the posting is still holding still");
      assertOpen();
      endHold();

      call.get(TIMEOUT.toMillis(), TimeUnit.MILLISECONDS).then().statusCode(409)
          .body("lock", equalTo(lockName()))
          .body("error", containsString(lockName()));
    }
    assertRolledBackOnly();
  }

  /** Quarkus commits a {@code Uni} method's transaction when the {@code Uni} completes. */
  @Test
  void postAsync_withItsLockUntouched_commitsWhenItsUniCompletes() throws Exception {
    CompletableFuture<Response> call = CompletableFuture.supplyAsync(() -> post("/async", HOLD_MS));
    Await.until(TIMEOUT, () -> ledger.holding(account), "the posting holds still");
    assertFalse(call.isDone(), "the posting is still holding still");
    assertOpen();
    endHold();

    call.get(TIMEOUT.toMillis(), TimeUnit.MILLISECONDS).then().statusCode(200)
        .body("entry.amount", equalTo(5));
    given().get("/ledger/{account}", account).then().statusCode(200)
        .body("balance", equalTo(5)).body("entries.size()", equalTo(1))
        .body("rolledBack", equalTo(0));
    try (Jedis redis = redis()) {
      assertFalse(redis.exists(lockName()), "released before the answer");
    }
  }

  @Test
  void postVerified_whoseLockIsTakenAwayUnnoticed_rollsBack_andSaysWhy() throws Exception {
    try (LockClient otherClient = otherClient(); Jedis redis = redis()) {
      CompletableFuture<Response> call =
          CompletableFuture.supplyAsync(() -> post("/verified", HOLD_MS));
      Await.until(TIMEOUT, () -> redis.exists(lockName()), "the posting holds " + lockName());

      assertTrue(otherClient.getLock(lockName()).forceUnlock(), "taken away");
      // A fixed lease: no renewal looks at the lock, so only the check before the commit can
      // find it gone.
      assertFalse(lostLocks().contains(lockName()), "nothing noticed the loss yet");
      endHold();

      call.get(TIMEOUT.toMillis(), TimeUnit.MILLISECONDS).then().statusCode(409)
          .body("lock", equalTo(lockName()))
          .body("error", containsString(lockName()));
    }
    assertRolledBackOnly();
    Await.until(TIMEOUT, () -> lostLocks().contains(lockName()),
        "the check before the commit reported " + lockName() + " lost (LockLost event)");
  }

  @Test
  void postInterruptible_whoseLockIsTakenAway_stopsAtOnce_andLeavesNoInterruptBehind()
      throws Exception {
    long tookMillis;
    try (LockClient otherClient = otherClient(); Jedis redis = redis()) {
      CompletableFuture<Response> call =
          CompletableFuture.supplyAsync(() -> post("/interruptible", HOLD_MS));
      Await.until(TIMEOUT, () -> redis.exists(lockName()), "the posting holds " + lockName());

      long takenNanos = System.nanoTime();
      assertTrue(otherClient.getLock(lockName()).forceUnlock(), "taken away");
      // No end-hold: only the interrupt ends the hold before HOLD_MS.
      Response response = call.get(TIMEOUT.toMillis(), TimeUnit.MILLISECONDS);
      tookMillis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - takenNanos);
      response.then().statusCode(409)
          .body("lock", equalTo(lockName()))
          .body("error", containsString("the posting stopped"));
    }
    System.out.println("interruptible posting answered " + tookMillis + " ms after forceUnlock");
    assertTrue(tookMillis < HOLD_MS / 2, () -> "stopped after " + tookMillis + " ms");
    assertRolledBackOnly();
    given().get("/ledger/last-interrupted-thread").then().statusCode(200)
        .body("interruptPending", equalTo(false));
  }

  @Test
  void manyPosts_spanningRenewals_areNeverRolledBack() throws Exception {
    int accounts = 10;
    int postsPerAccount = 10;
    ExecutorService callers = Executors.newFixedThreadPool(accounts);
    try {
      List<CompletableFuture<Integer>> calls = new ArrayList<>();
      for (int a = 0; a < accounts; a++) {
        String name = account + "-" + a;
        calls.add(CompletableFuture.supplyAsync(() -> {
          int committed = 0;
          for (int i = 0; i < postsPerAccount; i++) {
            long holdMs = i % 4 * 400L; // 0 to 1.2 s: up to two renewals during a transaction
            int status = given().post("/ledger/{account}?amount=1&holdMs={holdMs}", name, holdMs)
                .statusCode();
            committed += status == 200 ? 1 : 0;
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
    for (int a = 0; a < accounts; a++) {
      String name = account + "-" + a;
      given().get("/ledger/{account}", name).then()
          .body("entries.size()", equalTo(postsPerAccount)).body("rolledBack", equalTo(0));
      assertFalse(lostLocks().contains("ledger:" + name), "no loss reported for " + name);
    }
  }

  @Test
  void post_withAHoldOutOfRange_isRejected() {
    post("", -1).then().statusCode(400);
    post("/verified", Ledger.MAX_HOLD_MILLIS + 1).then().statusCode(400);
    given().get("/ledger/{account}", account).then()
        .body("entries", empty()).body("rolledBack", equalTo(0));
  }

  private Response post(String variant, long holdMs) {
    return given().post("/ledger/{account}" + variant + "?amount=5&holdMs={holdMs}", account,
        holdMs);
  }

  private void endHold() {
    given().post("/ledger/{account}/end-hold", account).then().statusCode(204);
  }

  /** The posting's transaction has not completed: nothing committed, nothing rolled back. */
  private void assertOpen() {
    given().get("/ledger/{account}", account).then().statusCode(200)
        .body("entries", empty()).body("rolledBack", equalTo(0));
  }

  /** The transaction ran (and was counted) but nothing of it was committed. */
  private void assertRolledBackOnly() {
    given().get("/ledger/{account}", account).then().statusCode(200)
        .body("balance", equalTo(0)).body("entries", empty()).body("rolledBack", equalTo(1));
  }

  private List<String> lostLocks() {
    return given().get("/ledger/lost-locks").then().statusCode(200).extract().jsonPath()
        .getList("lockName", String.class);
  }

  private String lockName() {
    return "ledger:" + account;
  }

  /** Another instance's client, on the same Redis. */
  private LockClient otherClient() {
    return LockClient.create(Map.of("holdfast.redis.address", redisAddress));
  }

  private Jedis redis() {
    return new Jedis(URI.create(redisAddress),
        DefaultJedisClientConfig.builder().serverDefaultProtocol().build());
  }
}

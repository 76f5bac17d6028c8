package dev.holdfast.example.stock;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.holdfast.testing.Await;
import dev.holdfast.testing.RedisServer;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInfo;
import redis.clients.jedis.Jedis;

/**
 * A lock holder frozen past its lease, then thawed — the pause no lease can cover. Two processes
 * of the packaged application on one Redis: instance A takes the SKU's lock (2 s lease) to set
 * the stock and is stopped with SIGSTOP before it writes; once the lease has run out in Redis,
 * instance B takes the lock and writes; then A is resumed and writes late. With fencing tokens
 * the store refuses A's write and keeps B's; without (the control) A's late write overwrites B's.
 */
class PausedHolderIT {
  private static final System.Logger LOG = System.getLogger(PausedHolderIT.class.getName());
  private static final Duration TIMEOUT = Duration.ofSeconds(30);
  /** A's wait between acquiring and writing: the window to stop it in; within its 2 s lease. */
  private static final long HOLD_MS = 1_000;
  private static final int INITIAL_UNITS = 10;
  private static final int LATE_UNITS = 1;
  private static final int NEXT_UNITS = 2;

  private static RedisServer redis;
  private static List<AppInstance> instances = List.of();
  private static AppInstance a;
  private static AppInstance b;
  private static final StockApi api = new StockApi();

  @BeforeAll
  static void startRedisAndTwoInstances() {
    redis = RedisServer.start();
    Path jar = Path.of(System.getProperty("app.jar", "target/quarkus-app/quarkus-run.jar"));
    instances = AppInstance.startAll(2, jar, redis.uri(), Path.of("target", "it-logs", "paused"),
        Duration.ofSeconds(60));
    a = instances.get(0);
    b = instances.get(1);
  }

  @AfterAll
  static void stopEverything() {
    try {
      AppInstance.closeAll(instances);
    } finally {
      if (redis != null) {
        redis.close();
      }
    }
  }

  @Test
  void pausedHolder_lateFencedWrite_isRefused_andTheNextHoldersWriteIsKept(TestInfo test)
      throws Exception {
    String sku = sku(test);

    Writes writes = pauseHolderPastItsLease(sku, true);

    assertEquals(409, writes.late().status(), "the paused holder's late write: " + writes.late());
    assertFalse(writes.late().accepted());
    assertTrue(writes.late().lockLost(), "A learns that its lock was lost");
    assertNotNull(writes.late().token());
    assertTrue(writes.next().token() > writes.late().token(), "B's token is newer: " + writes);
    assertEquals(NEXT_UNITS, api.units(a.uri(), sku), "B's level is kept");
  }

  /** The control: the same pause without the token check loses B's write. */
  @Test
  void pausedHolder_lateUnfencedWrite_overwritesTheNextHoldersWrite(TestInfo test)
      throws Exception {
    String sku = sku(test);

    Writes writes = pauseHolderPastItsLease(sku, false);

    assertEquals(200, writes.late().status(), "the paused holder's late write: " + writes.late());
    assertTrue(writes.late().accepted());
    assertTrue(writes.late().lockLost(), "A learns that its lock was lost, after writing");
    assertEquals(LATE_UNITS, api.units(a.uri(), sku), "A's late write replaced B's level");
  }

  /**
   * A's write and B's, in the order described in the class comment; fenced or not. Every wait is
   * on something observed — A's log, the lock in Redis, an answer — and bounded; A always runs
   * again afterwards.
   *
   * <p>A is paused once it logs that it holds the lock and waits to write, not as soon as the lock
   * appears in Redis: then A may not have read the acquisition's reply yet, and on resuming finds
   * its hold lost before the method started, so the method does not run at all (500).
   */
  private Writes pauseHolderPastItsLease(String sku, boolean fenced)
      throws InterruptedException, ExecutionException, TimeoutException {
    api.setStock(a.uri(), sku, INITIAL_UNITS);
    String lockKey = "inventory:" + sku;
    try (Jedis redisView = redis.admin()) {
      CompletableFuture<StockApi.Write> late = api.write(a.uri(), sku, fenced, LATE_UNITS,
          HOLD_MS);
      Await.until(TIMEOUT, () -> read(a.log()).contains("Holding lock " + lockKey + " ("),
          "A logs that it holds " + lockKey + " and waits to write");
      StockApi.Write next;
      a.pause();
      try {
        Await.until(TIMEOUT, () -> !redisView.exists(lockKey),
            "A's lease on " + lockKey + " has run out in Redis");
        assertEquals(INITIAL_UNITS, api.units(b.uri(), sku),
            "A wrote before it was paused: the test lost the race; raise HOLD_MS");
        next = api.write(b.uri(), sku, fenced, NEXT_UNITS, 0)
            .get(TIMEOUT.toMillis(), TimeUnit.MILLISECONDS);
        assertEquals(200, next.status(), "B's write: " + next);
        assertTrue(next.accepted() && !next.lockLost(), "B's write: " + next);
        assertEquals(NEXT_UNITS, api.units(b.uri(), sku), "B's level");
      } finally {
        a.resume();
      }
      Writes writes = new Writes(late.get(TIMEOUT.toMillis(), TimeUnit.MILLISECONDS), next);
      LOG.log(System.Logger.Level.INFO, "{0}: {1}", fenced ? "fenced" : "unfenced", writes);
      return writes;
    }
  }

  private static String read(Path file) {
    try {
      return Files.readString(file, StandardCharsets.UTF_8);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  private static String sku(TestInfo test) {
    return test.getTestMethod().orElseThrow().getName();
  }

  /** The paused holder's (A's) late write and the next holder's (B's). */
  private record Writes(StockApi.Write late, StockApi.Write next) {
  }
}

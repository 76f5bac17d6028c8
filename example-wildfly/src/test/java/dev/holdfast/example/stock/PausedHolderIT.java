package dev.holdfast.example.stock;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.holdfast.example.stock.StockClient.Write;
import dev.holdfast.example.stock.StockServers.Servers;
import dev.holdfast.testing.Await;
import dev.holdfast.testing.RedisServer;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInfo;
import org.junit.jupiter.api.extension.ExtendWith;
import redis.clients.jedis.Jedis;

/**
 * A lock holder frozen past its lease, then thawed — the pause no lease can cover. Two WildFly
 * servers on one Redis: server A takes the SKU's lock (2 s lease) to set the stock and is stopped
 * with SIGSTOP before it writes; once the lease has run out in Redis, server B takes the lock and
 * writes; then A is resumed and writes late. With fencing tokens the store refuses A's write and
 * keeps B's; without (the control) A's late write overwrites B's.
 */
@ExtendWith(StockServers.class)
class PausedHolderIT {

  private static final System.Logger LOG = System.getLogger(PausedHolderIT.class.getName());
  private static final Duration TIMEOUT = Duration.ofSeconds(30);
  /** A's wait between acquiring and writing: the window to stop it in; within its 2 s lease. */
  private static final long HOLD_MS = 1_000;
  private static final int INITIAL_UNITS = 10;
  private static final int LATE_UNITS = 1;
  private static final int NEXT_UNITS = 2;

  private final RedisServer redis;
  private final WildFlyServer serverA;
  private final StockClient a;
  private final StockClient b;

  PausedHolderIT(Servers servers) {
    this.redis = servers.redis();
    this.serverA = servers.a();
    this.a = new StockClient(servers.a());
    this.b = new StockClient(servers.b());
  }

  @Test
  void pausedHolder_lateFencedWrite_isRefused_andTheNextHoldersWriteIsKept(TestInfo test)
      throws Exception {
    String sku = StockEndpointIT.sku(test);

    Writes writes = pauseHolderPastItsLease(sku, true);

    assertEquals(409, writes.late().status(), "the paused holder's late write: " + writes.late());
    assertFalse(writes.late().accepted());
    assertTrue(writes.late().lockLost(), "A learns that its lock was lost");
    assertNotNull(writes.late().token());
    assertTrue(writes.next().token() > writes.late().token(), "B's token is newer: " + writes);
    assertEquals(NEXT_UNITS, a.stock(sku), "B's level is kept");
  }

  /** The control: the same pause without the token check loses B's write. */
  @Test
  void pausedHolder_lateUnfencedWrite_overwritesTheNextHoldersWrite(TestInfo test)
      throws Exception {
    String sku = StockEndpointIT.sku(test);

    Writes writes = pauseHolderPastItsLease(sku, false);

    assertEquals(200, writes.late().status(), "the paused holder's late write: " + writes.late());
    assertTrue(writes.late().accepted());
    assertTrue(writes.late().lockLost(), "A learns that its lock was lost, after writing");
    assertEquals(LATE_UNITS, a.stock(sku), "A's late write replaced B's level");
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
    a.setStock(sku, INITIAL_UNITS);
    String lockKey = "inventory:" + sku;
    try (Jedis redisView = redis.admin()) {
      CompletableFuture<Write> late = a.writeAsync(sku, fenced, LATE_UNITS, HOLD_MS);
      String holding = "Holding lock " + lockKey + " (";
      Await.until(TIMEOUT, () -> serverA.consoleLogText().contains(holding),
          "A logs that it holds " + lockKey + " and waits to write");
      Write next;
      serverA.pause();
      try {
        Await.until(TIMEOUT, () -> !redisView.exists(lockKey),
            "A's lease on " + lockKey + " has run out in Redis");
        assertEquals(INITIAL_UNITS, b.stock(sku),
            "A wrote before it was paused: the test lost the race; raise HOLD_MS");
        next = b.writeAsync(sku, fenced, NEXT_UNITS, 0)
            .get(TIMEOUT.toMillis(), TimeUnit.MILLISECONDS);
        assertEquals(200, next.status(), "B's write: " + next);
        assertTrue(next.accepted() && !next.lockLost(), "B's write: " + next);
        assertEquals(NEXT_UNITS, b.stock(sku), "B's level");
      } finally {
        serverA.resume();
      }
      Writes writes = new Writes(late.get(TIMEOUT.toMillis(), TimeUnit.MILLISECONDS), next);
      LOG.log(System.Logger.Level.INFO, "{0}: {1}", fenced ? "fenced" : "unfenced", writes);
      return writes;
    }
  }

  /** The paused holder's (A's) late write and the next holder's (B's). */
  private record Writes(Write late, Write next) {
  }
}

package dev.holdfast.example.stock;

import static org.junit.jupiter.api.Assertions.assertAll;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.holdfast.example.stock.StockServers.Servers;
import jakarta.json.JsonObject;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInfo;
import org.junit.jupiter.api.extension.ExtendWith;
import redis.clients.jedis.Jedis;

/**
 * {@code @Locked} around {@code @Transactional} on WildFly's transaction manager: the lock is
 * held for the whole transaction, commit included, and released after it.
 */
@ExtendWith(StockServers.class)
class TransactionOrderingIT {

  private final Servers servers;
  private final StockClient server;

  TransactionOrderingIT(Servers servers) {
    this.servers = servers;
    this.server = new StockClient(servers.a());
  }

  @Test
  void restock_holdsTheLockFromBeforeTheTransactionUntilAfterItsCommit(TestInfo test) {
    String sku = StockEndpointIT.sku(test);
    server.setStock(sku, 1);

    JsonObject restock = StockClient.json(
        StockClient.expectOk(server.post("stock/" + sku + "/restock?units=4")));

    assertAll(restock.toString(),
        () -> assertTrue(restock.getBoolean("inTransaction"), "ran in a transaction"),
        () -> assertTrue(restock.getBoolean("lockHeldInTransaction"), "lock held inside"),
        () -> assertEquals(1, restock.getInt("lockHoldCount"),
            "the interceptor ran once (a second registration would reenter: 2)"),
        () -> assertTrue(restock.getBoolean("lockHeldBeforeCommit"),
            "lock still held at beforeCompletion: released after, not before, the commit"),
        () -> assertTrue(restock.getBoolean("committed"), "committed"),
        () -> assertTrue(restock.getBoolean("lockHeldAfterCommit"),
            "lock still held at afterCompletion: the transaction ended inside the lock"),
        () -> assertEquals(5, restock.getInt("units")));
    try (Jedis redis = servers.redis().admin()) {
      assertFalse(redis.exists("stock:" + sku), "the lock is released once the call returned");
    }
    assertEquals(5, server.stock(sku));
  }
}

package dev.holdfast.engine;

import java.lang.System.Logger.Level;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentMap;
import java.util.function.BiConsumer;

/**
 * Keeps watchdog holds alive: every third of the watchdog timeout, one scheduled run renews every
 * such hold of the client, batched — one script call per cluster slot, or per chunk of
 * {@value #BATCH} holds elsewhere — and reports holds that Redis no longer has as lost.
 *
 * <p>A run never throws: a Redis error is logged once per outage and the next run tries again;
 * a hold is only reported lost when Redis answers that it is gone.
 */
final class LeaseWatchdog {
  private static final System.Logger LOG = System.getLogger(LeaseWatchdog.class.getName());
  static final int BATCH = 256;
  /** Explicit-lease holds are forgotten this long after their lease ran out. */
  private static final long EXPIRED_GRACE_NANOS = 60_000_000_000L;

  private final RedisTopology topology;
  private final ConcurrentMap<Hold.Id, Hold> holds;
  private final long leaseMillis;
  private final BiConsumer<Hold, String> onLost;
  private boolean failing;

  LeaseWatchdog(RedisTopology topology, ConcurrentMap<Hold.Id, Hold> holds, long leaseMillis,
      BiConsumer<Hold, String> onLost) {
    this.topology = topology;
    this.holds = holds;
    this.leaseMillis = leaseMillis;
    this.onLost = onLost;
  }

  /** One renewal round; safe to call from the scheduler only (not concurrently with itself). */
  void run() {
    try {
      renewAll();
      forgetExpiredLeases();
    } catch (Throwable t) {
      LOG.log(Level.ERROR, "Unexpected error in the lock watchdog; it keeps running", t);
    }
  }

  private void renewAll() {
    Map<Object, List<Hold>> groups = new LinkedHashMap<>();
    for (Hold h : holds.values()) {
      if (h.watchdog() && !h.releasing()) {
        groups.computeIfAbsent(topology.renewalGroup(h.names.key()), g -> new ArrayList<>()).add(h);
      }
    }
    boolean failed = false;
    for (List<Hold> group : groups.values()) {
      for (int from = 0; from < group.size(); from += BATCH) {
        List<Hold> batch = group.subList(from, Math.min(group.size(), from + BATCH));
        try {
          renew(batch);
        } catch (RuntimeException e) {
          failed = true;
          if (!failing) {
            LOG.log(Level.WARNING, "Lock lease renewal failed; retrying every "
                + leaseMillis / 3 + "ms. Locks are lost if this lasts " + leaseMillis + "ms: "
                + e.getMessage());
          }
        }
      }
    }
    if (failing && !failed) {
      LOG.log(Level.INFO, "Lock lease renewal works again");
    }
    failing = failed;
  }

  private void renew(List<Hold> batch) {
    List<String> keys = new ArrayList<>(batch.size());
    List<String> args = new ArrayList<>(batch.size() + 1);
    args.add(Long.toString(leaseMillis));
    for (Hold h : batch) {
      keys.add(h.names.key());
      args.add(h.field);
    }
    List<?> renewed = (List<?>) topology.eval(LockScripts.RENEW, keys, args);
    for (int i = 0; i < batch.size(); i++) {
      Hold h = batch.get(i);
      boolean stillHeld = ((Number) renewed.get(i)).longValue() == 1;
      // A release that ran after we read the hold explains the miss; that is no loss.
      if (!stillHeld && !h.releasing() && holds.get(new Hold.Id(h.names.key(), h.threadId)) == h
          && h.count() > 0 && h.lostReason() == null) {
        String reason = "the lease renewal found the lock no longer held by this thread: it "
            + "expired while Redis was unreachable, was force-unlocked, or was lost in a Redis "
            + "restart or failover";
        h.lost(reason);
        onLost.accept(h, reason);
      }
    }
  }

  private void forgetExpiredLeases() {
    long cutoff = System.nanoTime() - EXPIRED_GRACE_NANOS;
    for (Hold h : holds.values()) {
      if (h.expiredBefore(cutoff)) {
        holds.computeIfPresent(new Hold.Id(h.names.key(), h.threadId),
            (id, current) -> current == h && h.expiredBefore(cutoff) ? null : current);
      }
    }
  }
}

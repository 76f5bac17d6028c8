package dev.holdfast.engine;

import dev.holdfast.LockException;
import dev.holdfast.engine.LockObserver.LossCause;
import java.lang.System.Logger.Level;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;

/**
 * Keeps watchdog holds alive: every third of the watchdog timeout, a round renews every such hold
 * of the client, batched — one script call per chunk of {@value #BATCH} holds on each node (per
 * slot on a Redis 6.2 cluster, whose scripts cannot span slots) — and reports holds that Redis
 * no longer has as lost. A hold whose slot the node no longer serves (moved, or migrating with
 * its key gone) is renewed on its own where Redis redirects it, never reported lost for that.
 *
 * <p>The round itself runs on the scheduler and only sorts holds by node; each node's renewals
 * run as one task on the I/O pool, and a node whose previous renewals are still in flight is
 * skipped, so a node that does not answer delays no other node. A renewal's answer is applied to
 * a hold only if its holder changed nothing since the renewal was sent. The round also forgets
 * lost holds that owe nothing, and gives up holds whose thread ended without unlocking.
 *
 * <p>A round never throws: a Redis error is logged once per outage and the next round tries
 * again. A hold whose renewals keep failing is declared lost by its deadline timer
 * ({@link LockEngine#watchDeadline}), not here.
 */
final class LeaseWatchdog {
  private static final System.Logger LOG = System.getLogger(LeaseWatchdog.class.getName());
  /**
   * Holds per renewal call: one call per node and round for up to this many (about a
   * millisecond of script time, short enough not to stall other clients).
   */
  static final int BATCH = 1_000;
  /** Lost holds whose thread never unlocks them are forgotten after this long. */
  private static final long LOST_RETENTION_NANOS = TimeUnit.MINUTES.toNanos(10);

  private final LockEngine engine;
  private final RedisTopology topology;
  private final long leaseMillis;
  private final Set<Object> busyNodes = ConcurrentHashMap.newKeySet();
  private final Set<Object> failingNodes = ConcurrentHashMap.newKeySet();

  LeaseWatchdog(LockEngine engine) {
    this.engine = engine;
    this.topology = engine.topology();
    this.leaseMillis = engine.watchdogMillis();
  }

  /** One round; called by the scheduler only. */
  void run() {
    try {
      Map<Object, List<Hold>> byNode = new LinkedHashMap<>();
      long now = System.nanoTime();
      for (Hold h : engine.holds().values()) {
        if (h.ending() && h.active()) {
          // Never renewed once its final call is sent; what is left of one in doubt goes once
          // settled and its thread is gone or has not called again for a long while.
          if (h.endedInDoubt() && h.cleanup() == null
              && (!h.threadAlive() || now - h.endingSince() > LOST_RETENTION_NANOS)) {
            engine.holds().remove(h.id, h); // no wait on this thread: nothing renews it
          }
        } else if (!h.active()) {
          forgetIfStale(h, now);
        } else if (!h.threadAlive()) {
          if (engine.lose(h, LossCause.THREAD_ENDED,
              "its thread ended without unlock()")) {
            engine.owe(h, new Hold.Cleanup(engine.nextRequestId(), h.count(), "abandon",
                engine.leaseOverAfter(leaseMillis)));
          }
        } else if (h.watchdog()) {
          byNode.computeIfAbsent(topology.renewalNode(h.names.key()), n -> new ArrayList<>())
              .add(h);
        }
      }
      byNode.forEach((node, holds) -> {
        if (busyNodes.add(node) && !engine.runIo(() -> renewNode(node, holds))) {
          busyNodes.remove(node);
        }
      });
    } catch (Throwable t) {
      LOG.log(Level.ERROR, "Unexpected error in the lock watchdog; it keeps running", t);
    }
  }

  private void forgetIfStale(Hold h, long now) {
    if (h.cleanup() == null && (h.count() == 0 || !h.threadAlive()
        || now - h.lostAt() > LOST_RETENTION_NANOS)) {
      engine.holds().remove(h.id, h);
    }
  }

  private void renewNode(Object node, List<Hold> holds) {
    try {
      Map<Object, List<Hold>> groups = new LinkedHashMap<>();
      for (Hold h : holds) {
        groups.computeIfAbsent(topology.renewalGroup(h.names.key()), g -> new ArrayList<>())
            .add(h);
      }
      boolean failed = false;
      for (List<Hold> group : groups.values()) {
        for (int from = 0; from < group.size(); from += BATCH) {
          failed |= !renew(group.subList(from, Math.min(group.size(), from + BATCH)));
        }
      }
      if (failed) {
        failingNodes.add(node);
      } else if (failingNodes.remove(node)) {
        LOG.log(Level.INFO, "Lock lease renewal works again" + where(node));
      }
    } catch (Throwable t) {
      LOG.log(Level.ERROR, "Unexpected error renewing locks" + where(node), t);
    } finally {
      busyNodes.remove(node);
    }
  }

  /**
   * Renews one batch (one node, or one slot); false if some hold of it could not be renewed
   * this round (Redis did not answer or failed). Holds the batch's node no longer serves (their
   * slot moved or is migrating) are renewed one by one where Redis redirects them, in the same
   * round: they are neither lost nor allowed to hold up the rest of the batch.
   */
  private boolean renew(List<Hold> candidates) {
    List<Hold> batch = new ArrayList<>(candidates.size());
    List<Long> epochs = new ArrayList<>(candidates.size());
    for (Hold h : candidates) {
      long epoch = h.startRenewal();
      if (epoch >= 0) {
        batch.add(h);
        epochs.add(epoch);
      }
    }
    if (batch.isEmpty()) {
      return true;
    }
    try {
      List<Integer> elsewhere;
      try {
        elsewhere = renewOn(topology.renewal(), batch, epochs);
      } catch (RedisUnavailableException e) {
        if (e.mayHaveRun() || batch.size() == 1) {
          failed(batch, e);
          return false;
        }
        // Refused as a whole, never run: a slot-routed batch (Redis 6.2) whose slot is
        // migrating with some keys on each side gets TRYAGAIN; one key at a time does not.
        elsewhere = new ArrayList<>(batch.size());
        for (int i = 0; i < batch.size(); i++) {
          elsewhere.add(i);
        }
      } catch (RuntimeException e) {
        failed(batch, e);
        return false;
      }
      boolean renewedAll = true;
      for (int i : elsewhere) {
        Hold h = batch.get(i);
        try {
          // Slot-routed, one key: a MOVED refreshes the slot map, an ASK is followed.
          if (!renewOn(LockScripts.RENEW, List.of(h), List.of(epochs.get(i))).isEmpty()) {
            throw new LockException("the node serving " + h.names.key() + " did not take it ("
                + topology.nodeName(h.names.key()) + ")");
          }
        } catch (RuntimeException e) {
          failed(List.of(h), e);
          renewedAll = false;
        }
      }
      return renewedAll;
    } finally {
      batch.forEach(Hold::renewalEnded);
    }
  }

  /**
   * One renewal call for {@code batch} (their renewals started at {@code epochs}), applying each
   * answer to its hold.
   *
   * @return the positions in {@code batch} of the holds the node could not tell about (-1: not
   *     served there)
   * @throws RuntimeException if Redis did not answer, failed, or the replicas did not confirm
   */
  private List<Integer> renewOn(LockScript script, List<Hold> batch, List<Long> epochs) {
    List<String> keys = new ArrayList<>(batch.size());
    List<String> args = new ArrayList<>(2 * batch.size() + 1);
    args.add(Long.toString(leaseMillis));
    for (Hold h : batch) {
      keys.add(h.names.key());
      args.add(h.field);
      args.add(h.names.kind().renewalDetail(h.names, h.field));
    }
    long sentAt = System.nanoTime();
    RedisTopology.Replicated replicated = topology.evalReplicated(script, keys,
        sealed -> args, false);
    List<?> renewed = (List<?>) replicated.reply();
    long until = LockEngine.confirmedUntil(sentAt, leaseMillis);
    List<Integer> elsewhere = new ArrayList<>(0);
    for (int i = 0; i < batch.size(); i++) {
      Hold h = batch.get(i);
      long epoch = epochs.get(i);
      long answer = ((Number) renewed.get(i)).longValue();
      if (answer == 1) {
        // A renewal the replicas did not acknowledge might not survive a failover: the hold
        // keeps the lease it had, and is lost at its deadline unless a later renewal is.
        if (replicated.confirmed()) {
          h.renewed(epoch, until);
          engine.watchDeadline(h);
          engine.observer().renewal(h.template, true);
        }
      } else if (answer < 0) {
        elsewhere.add(i);
      } else if (h.unchangedSince(epoch) && engine.holds().get(h.id) == h) {
        if (replicated.confirmed()) { // else the whole batch is reported by the caller
          renewalFailed(h, "the lock is no longer held by this thread in Redis");
        }
        // Unchanged since the renewal was sent: no release of its own explains the miss.
        engine.lose(h, LossCause.GONE,
            "the lease renewal found the lock no longer held by this thread: it "
            + "expired while Redis was unreachable, was force-unlocked, or was lost in a "
            + "Redis restart or failover");
      }
    }
    if (!replicated.confirmed()) {
      throw new LockException(replicated.acknowledged() + " of " + replicated.replicas()
          + " replicas acknowledged the renewal in time (holdfast.redis.sync-replicas)");
    }
    return elsewhere;
  }

  /** Reports a failed renewal of {@code holds}, logging once per outage of their node. */
  private void failed(List<Hold> holds, RuntimeException e) {
    for (Hold h : holds) {
      renewalFailed(h, e.getMessage());
    }
    if (!failingNodes.contains(topology.renewalNode(holds.get(0).names.key()))) {
      LOG.log(Level.WARNING, "Lock lease renewal failed; retrying every " + leaseMillis / 3
          + "ms. Locks are lost if this lasts " + leaseMillis + "ms: " + e.getMessage());
    }
  }

  private void renewalFailed(Hold h, String error) {
    engine.observer().renewal(h.template, false);
    LockEvents.renewalFailed(h.names.name(), h.template, h.thread(), h.threadId,
        topology.nodeName(h.names.key()), error);
  }

  private static String where(Object node) {
    return "all".equals(node) ? "" : " on " + node;
  }
}

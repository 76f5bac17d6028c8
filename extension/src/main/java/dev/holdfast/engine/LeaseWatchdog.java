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
import java.util.concurrent.atomic.AtomicBoolean;

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
 * lost holds that owe nothing, and gives up holds whose thread ended without unlocking (or whose
 * {@link dev.holdfast.LockHold} was garbage collected without release).
 *
 * <p>A round never throws: a Redis error is logged once per outage, and an extra round a
 * quarter of the renewal period later tries again ({@link #retrySoon()}). A hold whose
 * renewals keep failing is declared lost by its deadline timer ({@link LockEngine#watchDeadline}),
 * not here.
 *
 * <p><b>At risk.</b> A renewal that fails (no answer, an error, replicas that did not
 * acknowledge) or is still unanswered a renewal period after it was sent, or a hold that nothing
 * has confirmed for over half its lease while its holder's own call is in flight, puts a hold
 * that is still believed at risk ({@link LockEngine#atRisk}); the next renewal applied to it ends the episode
 * ({@link LockEngine#renewed}). A renewal that finds the hold gone is a loss, not a risk.
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
  /** How a read hold's renewal detail begins ({@link LockKind#renewalDetail}). */
  private static final String READ = "read:";

  private final LockEngine engine;
  private final RedisTopology topology;
  private final long leaseMillis;
  /** Nodes whose renewals are in flight, with when they were sent (nanoTime). */
  private final Map<Object, Long> busyNodes = new ConcurrentHashMap<>();
  private final Set<Object> failingNodes = ConcurrentHashMap.newKeySet();
  /** An extra round is scheduled ({@link #retrySoon()}). */
  private final AtomicBoolean retryPending = new AtomicBoolean();
  /** How soon a failed renewal is tried again: a quarter of the renewal period. */
  private final long retryMillis;
  /**
   * How long a node's renewals may go unanswered before its holds are at risk: a renewal period
   * (a third of the lease), less a tenth for the scheduler's jitter.
   */
  private final long lateNanos;
  /** Half the lease, in ns: a hold unconfirmed for longer is at risk ({@link #unconfirmed}). */
  private final long halfLeaseNanos;

  LeaseWatchdog(LockEngine engine) {
    this.engine = engine;
    this.topology = engine.topology();
    this.leaseMillis = engine.watchdogMillis();
    this.retryMillis = Math.max(1, leaseMillis / 12);
    this.lateNanos = TimeUnit.MILLISECONDS.toNanos(leaseMillis) / 3 * 9 / 10;
    this.halfLeaseNanos = TimeUnit.MILLISECONDS.toNanos(leaseMillis) / 2;
  }

  /** One round; called by the scheduler only. */
  void run() {
    run(false);
  }

  /**
   * A round: every node's renewals, or — for the extra round after a failure
   * ({@code failingOnly}) — only the failing nodes' (a healthy node renewed a quarter period ago
   * needs nothing, and its renewals still in flight are not late yet).
   */
  private void run(boolean failingOnly) {
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
          if (engine.lose(h, LossCause.THREAD_ENDED, h.ownedByObject()
              ? "its LockHold was garbage collected without release()"
              : "its thread ended without unlock()")) {
            engine.oweAbandon(h, h.count(), leaseMillis);
          }
        } else if (h.watchdog()) {
          unconfirmed(h, now);
          byNode.computeIfAbsent(topology.renewalNode(h.names.key()), n -> new ArrayList<>())
              .add(h);
        }
      }
      byNode.forEach((node, holds) -> {
        if (failingOnly && !failingNodes.contains(node)) {
          return;
        }
        Long busySince = busyNodes.putIfAbsent(node, now);
        if (busySince != null) {
          if (now - busySince >= lateNanos) {
            unanswered(holds, now - busySince);
          }
        } else if (!engine.runIo(() -> renewNode(node, holds))) {
          busyNodes.remove(node);
        }
      });
    } catch (Throwable t) {
      LOG.log(Level.ERROR, "Unexpected error in the lock watchdog; it keeps running", t);
    }
  }

  /**
   * Schedules one extra round a quarter of the renewal period from now, unless one is pending:
   * after a failed renewal, the regular round would come too late to save a hold whose previous
   * renewal failed too (its deadline comes before the round after next), so a brief outage
   * would cost every hold it spans two rounds of. It renews only the failing nodes.
   */
  private void retrySoon() {
    if (retryPending.compareAndSet(false, true) && !engine.schedule(() -> {
      retryPending.set(false);
      run(true);
    }, retryMillis)) {
      retryPending.set(false);
    }
  }

  /**
   * A node's renewals sent {@code nanos} ago (about a whole renewal period at least) are still
   * unanswered: the holds they renew are at risk, well before the call's own timeout says so.
   */
  private void unanswered(List<Hold> holds, long nanos) {
    String error = null;
    for (Hold h : holds) {
      if (!h.atRisk()) {
        if (error == null) {
          error = "Redis has not answered the lease renewal sent "
              + TimeUnit.NANOSECONDS.toMillis(nanos) + "ms ago"
              + where(topology.renewalNode(h.names.key()));
        }
        engine.atRisk(h, error, true);
      }
    }
  }

  /**
   * A believed watchdog hold that nothing has confirmed for over half its lease while its
   * holder's own call is in flight — so no renewal of it could be sent, and none can fail or be
   * late — is at risk (the call renews the lease itself, if it is ever answered). A hold merely
   * confirmed late (a slow but answered acquisition) is not: this round renews it.
   */
  private void unconfirmed(Hold h, long now) {
    if (!h.atRisk() && h.confirmedUntil() - now < halfLeaseNanos && h.callInFlight()) {
      long left = Math.max(0, TimeUnit.NANOSECONDS.toMillis(h.confirmedUntil() - now));
      engine.atRisk(h, "no renewal has confirmed the lease for over half of it (" + left
          + "ms left)" + where(topology.renewalNode(h.names.key())), false);
    }
  }

  private void forgetIfStale(Hold h, long now) {
    if ((h.count() == 0 || !h.threadAlive() || now - h.lostAt() > LOST_RETENTION_NANOS)
        && engine.nothingOwed(h)) {
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
        retrySoon();
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
   * round: they are neither lost nor allowed to hold up the rest of the batch. A batch refused
   * as a whole (a Redis 6.2 slot batch meeting {@code TRYAGAIN}) is split at once.
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
      long sentAt = System.nanoTime();
      Map<Integer, Long> unsettled;
      try {
        unsettled = renewOn(topology.renewal(), batch, epochs, false, sentAt);
      } catch (RedisUnavailableException e) {
        if (e.mayHaveRun() || batch.size() == 1) {
          failed(batch, e);
          return false;
        }
        // Refused as a whole, never run: a slot-routed batch (Redis 6.2) whose slot is
        // migrating with some keys on each side gets TRYAGAIN; one key at a time does not.
        unsettled = new LinkedHashMap<>();
        for (int i = 0; i < batch.size(); i++) {
          unsettled.put(i, -1L);
        }
      } catch (RuntimeException e) {
        failed(batch, e);
        return false;
      }
      boolean renewedAll = true;
      for (Map.Entry<Integer, Long> u : unsettled.entrySet()) {
        Hold h = batch.get(u.getKey());
        try {
          renewAlone(h, epochs.get(u.getKey()), u.getValue(), sentAt);
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
   * Renews one hold its batch's node could not tell about ({@code answer}, as {@link
   * LockScripts#RENEW} gave it): -1, on its own where Redis routes it now ({@code MOVED}
   * refreshes the slot map, {@code ASK} is followed); -2 (a read hold whose hash has its field,
   * renewed, but none of its timeout keys was visible there: a migration may have split them),
   * its timeout keys where they are — the hold is renewed only if they live, counted from the
   * earlier call ({@code sentAt}), and lost only if they are gone.
   *
   * @throws RuntimeException if it could not be told this round (not lost for that: a hold
   *     that is really gone is lost by its deadline at the latest)
   */
  private void renewAlone(Hold h, long epoch, long answer, long sentAt) {
    if (answer == -1) {
      sentAt = System.nanoTime();
      Long again = renewOn(LockScripts.RENEW, List.of(h), List.of(epoch), false, sentAt).get(0);
      if (again == null) {
        return; // renewed, or found gone
      }
      answer = again;
    }
    if (answer == -2 && sectionPrefix(h) != null
        && renewOn(LockScripts.RENEW, List.of(h), List.of(epoch), true, sentAt).isEmpty()) {
      return;
    }
    throw new LockException("the node serving " + h.names.key() + " could not tell whether it "
        + "is held (" + topology.nodeName(h.names.key()) + "); tried again next round");
  }

  /** A read hold's timeout key prefix, from its renewal detail; null for other kinds. */
  private static String sectionPrefix(Hold h) {
    String detail = h.names.kind().renewalDetail(h.names, h.field);
    return detail.startsWith(READ) ? detail.substring(READ.length()) : null;
  }

  /**
   * One renewal call for {@code batch} (their renewals started at {@code epochs}), applying each
   * answer to its hold: renewed from {@code sentAt} on, or lost.
   *
   * @param sections whether to renew only the read holds' timeout keys (detail
   *     {@code sections:}), routed by the first of them
   * @return the answers the node could not settle (-1: not served there; -2: a read hold's
   *     timeout keys not visible there), by position in {@code batch}
   * @throws RuntimeException if Redis did not answer, failed, or the replicas did not confirm
   */
  private Map<Integer, Long> renewOn(LockScript script, List<Hold> batch, List<Long> epochs,
      boolean sections, long sentAt) {
    List<String> keys = new ArrayList<>(batch.size());
    List<String> args = new ArrayList<>(2 * batch.size() + 1);
    args.add(Long.toString(leaseMillis));
    for (Hold h : batch) {
      String prefix = sections ? sectionPrefix(h) : null;
      keys.add(prefix != null ? prefix + ":1" : h.names.key());
      args.add(h.field);
      args.add(prefix != null ? "sections:" + prefix
          : h.names.kind().renewalDetail(h.names, h.field));
    }
    // A refused renewal is not waited out (one re-send at most): a batch is split instead, and
    // a single hold is tried again next round, well within its lease.
    RedisTopology.Replicated replicated = topology.evalReplicated(script, keys,
        sealed -> args, false, 0);
    List<?> renewed = (List<?>) replicated.reply();
    long until = LockEngine.confirmedUntil(sentAt, leaseMillis);
    Map<Integer, Long> unsettled = new LinkedHashMap<>(0);
    for (int i = 0; i < batch.size(); i++) {
      Hold h = batch.get(i);
      long epoch = epochs.get(i);
      long answer = ((Number) renewed.get(i)).longValue();
      if (answer == 1) {
        // A renewal the replicas did not acknowledge might not survive a failover: the hold
        // keeps the lease it had, and is lost at its deadline unless a later renewal is.
        if (replicated.confirmed()) {
          engine.renewed(h, epoch, until);
          engine.watchDeadline(h);
          engine.observer().renewal(h.template, true);
        }
      } else if (answer < 0) {
        unsettled.put(i, answer);
      } else if (h.unchangedSince(epoch) && engine.holds().get(h.id) == h) {
        if (replicated.confirmed()) { // else the whole batch is reported by the caller
          renewalFailed(h, "the lock is no longer held by " + h.thisOwner() + " in Redis");
        }
        // Unchanged since the renewal was sent: no release of its own explains the miss.
        engine.lose(h, LossCause.GONE,
            "the lease renewal found the lock no longer held by " + h.thisOwner() + ": it "
            + "expired while Redis was unreachable, was force-unlocked, or was lost in a "
            + "Redis restart or failover");
      }
    }
    if (!replicated.confirmed()) {
      throw new LockException(replicated.acknowledged() + " of " + replicated.replicas()
          + " replicas acknowledged the renewal in time (holdfast.redis.sync-replicas)");
    }
    return unsettled;
  }

  /**
   * Reports a failed renewal of {@code holds}, logging once per outage of their node; those
   * still believed are at risk.
   */
  private void failed(List<Hold> holds, RuntimeException e) {
    String error = String.valueOf(e.getMessage());
    for (Hold h : holds) {
      renewalFailed(h, error);
      engine.atRisk(h, error, false);
    }
    if (!failingNodes.contains(topology.renewalNode(holds.get(0).names.key()))) {
      LOG.log(Level.WARNING, "Lock lease renewal failed; retrying every " + retryMillis
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

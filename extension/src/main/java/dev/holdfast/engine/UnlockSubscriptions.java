package dev.holdfast.engine;

import java.lang.System.Logger.Level;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import redis.clients.jedis.HostAndPort;

/**
 * Waiting without polling: one {@link WaitEntry} per lock and channel it is waited for on,
 * shared by all local waiters of that lock there, and one dedicated subscriber connection per
 * Redis node carrying every channel this client waits on there.
 *
 * <p><b>Locks, not channels.</b> Entries are keyed by the lock ({@link WaitEntry.Key}); two locks
 * may share a channel (see {@link LockNames}), and then one subscription serves both entries. A
 * message on such a channel cannot say which lock it was for, so it wakes the waiters of every
 * lock on the channel as it would wake one lock's: a waiter woken for the other lock re-polls
 * and parks again.
 *
 * <p><b>Design.</b> The set of channels a node's connection should carry is derived from the
 * entries (desired state). {@link SubscriberConnection#sync()} compares it with what was sent and
 * writes the difference, under the connection's write lock; because it always reads the newest
 * desired state, concurrent joins and leaves converge without ordering subscribe against
 * unsubscribe by hand. A connection that breaks re-resolves its channels' nodes (failover, slot
 * moves), reconnects, resubscribes and wakes every waiter, since messages may have been lost while
 * it was away — a lost message must never leave a waiter parked longer than the lock's lease.
 *
 * <p>Thread-safe. Lock order: a connection's write lock, then this object's monitor.
 */
final class UnlockSubscriptions implements AutoCloseable {
  private static final System.Logger LOG = System.getLogger(UnlockSubscriptions.class.getName());

  /** How often idle subscriber connections prove they are alive. */
  static final Duration PING_INTERVAL = Duration.ofSeconds(5);

  /** The unlock message after which every waiter may retry. */
  static final String ALL_MAY_RETRY = "1";

  private final RedisTopology topology;
  private final String clientName;
  /** Written under this object's monitor; read lock-free by {@link #peek}. */
  private final Map<WaitEntry.Key, WaitEntry> entries = new ConcurrentHashMap<>();
  /** The entries of each channel (usually one); guarded by this object's monitor. */
  private final Map<String, List<WaitEntry>> byChannel = new HashMap<>();
  private final Map<HostAndPort, SubscriberConnection> connections = new HashMap<>();
  private boolean closed;

  UnlockSubscriptions(RedisTopology topology, String clientName) {
    this.topology = topology;
    this.clientName = clientName;
  }

  /**
   * Registers the calling thread as a waiter for lock {@code names} on {@code channel}; pair
   * with {@link #leave}.
   *
   * @param channel the lock's channel, or the waiter's own (a fair waiter's)
   * @param candidate whether a releasing thread may hand it the lock (see {@link WaitEntry})
   * @param field the waiter's hash field
   * @param leaseMillis the lease its acquisition sets, in ms
   */
  WaitEntry.Waiter join(LockNames names, String channel, boolean candidate, String field,
      long leaseMillis) {
    WaitEntry.Key key = WaitEntry.Key.of(names, channel);
    HostAndPort node = topology.subscriberNode(channel);
    SubscriberConnection connection;
    WaitEntry entry;
    WaitEntry.Waiter waiter;
    synchronized (this) {
      if (closed) {
        throw new IllegalStateException("The lock client is closed");
      }
      entry = entries.get(key);
      if (entry == null) {
        List<WaitEntry> sharing = byChannel.computeIfAbsent(channel, c -> new ArrayList<>(1));
        // Another lock's entry on this channel: ride on its subscription, wherever it is.
        entry = new WaitEntry(key, sharing.isEmpty() ? node : sharing.get(0).node);
        sharing.add(entry);
        entries.put(key, entry);
      }
      entry.references++;
      waiter = new WaitEntry.Waiter(entry, candidate, field, leaseMillis);
      entry.add(waiter);
      connection = connectionFor(entry.node);
    }
    connection.sync();
    return waiter;
  }

  /** The entry of lock {@code names} on its own channel if it has waiters now; lock-free. */
  WaitEntry peek(LockNames names) {
    return entries.get(WaitEntry.Key.of(names, names.channel()));
  }

  /**
   * Unregisters a waiter. The last one out unsubscribes. A head leaving, with the lock or
   * without (timed out, interrupted), signals the next head: after a grant it tries at once
   * (a shared lock may admit it too), and a wake-up the old head consumed is passed on. After a
   * grant of an exclusive lock that a thread of this client now holds to hand over
   * ({@link WaitEntry#handedLocally}), the next head is woken only if its park would outlast
   * the holder's lease ({@link WaitEntry#passTurn}): it parks again as a handoff candidate,
   * bounded by that lease, since the lease may end without any release message.
   */
  void leave(WaitEntry.Waiter waiter, boolean acquired) {
    WaitEntry entry = waiter.entry;
    SubscriberConnection connection = null;
    synchronized (this) {
      boolean head = entry.isHead(waiter);
      entry.remove(waiter);
      entry.references--;
      if (entry.references == 0) {
        entries.remove(entry.key, entry);
        List<WaitEntry> sharing = byChannel.get(entry.channel);
        sharing.remove(entry);
        if (sharing.isEmpty()) {
          byChannel.remove(entry.channel);
        }
        entry.subscribed(false);
        connection = connections.get(entry.node);
      } else if (head) {
        // After a local grant of a lock handed over locally, only a new head that would park
        // past the holder's lease is woken: it re-parks bounded by that lease (the lease may
        // run out without a release of this client, and no unlock message would wake it).
        entry.passTurn(acquired);
      } else if (acquired) {
        entry.passTurn(true); // handed past the head: wake it unless its park ends by our lease
      }
    }
    if (connection != null) {
      connection.sync();
    }
  }

  /** Channels the connection to {@code node} should carry now. */
  synchronized Set<String> desiredChannels(HostAndPort node) {
    Set<String> desired = new HashSet<>();
    for (WaitEntry e : entries.values()) {
      if (e.node.equals(node)) {
        desired.add(e.channel);
      }
    }
    return desired;
  }

  /**
   * An unlock message arrived: {@code 0} (Redisson's unlock message) lets the head retry,
   * {@code 1} (its read-unlock message: the lock may now admit many) wakes all, and the head
   * retries, each reader it admits passing the turn on at once (see {@link #leave}) — of every
   * lock waited for on {@code channel}, since it does not say which one it was for.
   */
  synchronized void onUnlockMessage(String channel, String message) {
    for (WaitEntry e : onChannel(channel)) {
      if (ALL_MAY_RETRY.equals(message)) {
        e.wakeAll();
      } else {
        e.wakeOne();
      }
    }
  }

  /** The entries waiting on {@code channel}; called under this object's monitor. */
  private List<WaitEntry> onChannel(String channel) {
    return byChannel.getOrDefault(channel, List.of());
  }

  /**
   * {@code channel} is confirmed on {@code node} already (an entry made anew while the channel's
   * last waiter was leaving, before its unsubscribe was sent): unlock messages reach it now.
   */
  synchronized void alreadySubscribed(HostAndPort node, String channel) {
    for (WaitEntry e : onChannel(channel)) {
      if (e.node.equals(node) && !e.subscribed()) {
        e.subscribed(true);
        e.wakeAll();
      }
    }
  }

  /** The server confirmed {@code channel}: waiters re-poll, as unlocks may have been missed. */
  synchronized void onSubscribed(HostAndPort node, String channel) {
    for (WaitEntry e : onChannel(channel)) {
      if (e.node.equals(node)) {
        e.subscribed(true);
        e.wakeAll();
      }
    }
  }

  /**
   * The connection to {@code node} broke or the server moved channels away from it: refresh the
   * topology, re-home entries whose node changed, and mark the rest unsubscribed.
   *
   * @return whether the connection still has channels to carry
   */
  boolean onConnectionLost(SubscriberConnection connection, HostAndPort node) {
    try {
      topology.refreshTopology();
    } catch (RuntimeException e) {
      LOG.log(Level.DEBUG, "Topology refresh failed; retrying later", e);
    }
    List<SubscriberConnection> gained = new ArrayList<>();
    boolean remaining = false;
    synchronized (this) {
      if (closed) {
        return false;
      }
      for (WaitEntry e : entries.values()) {
        if (!e.node.equals(node)) {
          continue;
        }
        e.subscribed(false);
        e.wakeAll();
        HostAndPort now = node;
        try {
          now = topology.subscriberNode(e.channel);
        } catch (RuntimeException ex) {
          LOG.log(Level.DEBUG, "No node known yet for " + e.channel, ex);
        }
        if (now.equals(node)) {
          remaining = true;
        } else {
          LOG.log(Level.DEBUG, "Waiters on " + e.channel + " move from " + node + " to " + now);
          e.node = now;
          gained.add(connectionFor(now));
        }
      }
      if (!remaining) {
        connections.remove(node, connection);
      }
    }
    gained.forEach(SubscriberConnection::sync);
    return remaining;
  }

  /** Sends a keep-alive PING on every subscriber connection. */
  void ping() {
    List<SubscriberConnection> all;
    synchronized (this) {
      all = new ArrayList<>(connections.values());
    }
    all.forEach(SubscriberConnection::ping);
  }

  /**
   * Reconnects every subscriber connection carrying a channel whose node the topology no longer
   * names ({@link RedisTopology#switchesMaster}: after a Sentinel switch, a demoted master keeps
   * its subscribers, and an unlock on the new master may never reach it): its waiters move and
   * wake, as for a lost connection. No I/O but the reconnection.
   */
  void followTopology() {
    Set<SubscriberConnection> stale = new HashSet<>();
    synchronized (this) {
      if (closed) {
        return;
      }
      for (WaitEntry e : entries.values()) {
        SubscriberConnection c = connections.get(e.node);
        if (c != null && !topology.subscriberNode(e.channel).equals(e.node)) {
          stale.add(c);
        }
      }
    }
    stale.forEach(SubscriberConnection::reconnect);
  }

  /** Channels currently subscribed or being subscribed, for tests. */
  synchronized Set<String> activeChannels() {
    return new HashSet<>(byChannel.keySet());
  }

  private SubscriberConnection connectionFor(HostAndPort node) {
    SubscriberConnection c = connections.get(node);
    if (c == null) {
      c = new SubscriberConnection(this, topology, node, clientName);
      connections.put(node, c);
      c.start();
    }
    return c;
  }

  @Override
  public void close() {
    List<SubscriberConnection> all;
    synchronized (this) {
      if (closed) {
        return;
      }
      closed = true;
      all = new ArrayList<>(connections.values());
      connections.clear();
      entries.values().forEach(WaitEntry::close);
    }
    all.forEach(SubscriberConnection::close);
  }
}

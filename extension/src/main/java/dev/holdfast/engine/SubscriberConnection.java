package dev.holdfast.engine;

import java.lang.System.Logger.Level;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;
import redis.clients.jedis.Connection;
import redis.clients.jedis.HostAndPort;
import redis.clients.jedis.JedisClientConfig;
import redis.clients.jedis.Protocol;

/**
 * One dedicated pub/sub connection to one Redis node (never taken from the command pool), with
 * its reader thread. Writes (subscribe, unsubscribe, ping) come from any thread under
 * {@link #writeLock}; only the reader thread reads.
 */
final class SubscriberConnection {
  private static final System.Logger LOG = System.getLogger(SubscriberConnection.class.getName());
  private static final long MAX_BACKOFF_MS = 2_000;

  private final UnlockSubscriptions owner;
  private final RedisTopology topology;
  private final HostAndPort node;
  private final Protocol.Command subscribe;
  private final Protocol.Command unsubscribe;
  private final Thread reader;
  private final ReentrantLock writeLock = new ReentrantLock();
  private final Condition closing = writeLock.newCondition();
  /** Guarded by writeLock. */
  private Socket socket;
  /** Channels we asked the server for and did not cancel; guarded by writeLock. */
  private final Set<String> sent = new HashSet<>();
  /** Subscribe requests not yet confirmed, per channel; guarded by writeLock. */
  private final Map<String, Integer> pending = new HashMap<>();
  private volatile boolean closed;

  SubscriberConnection(UnlockSubscriptions owner, RedisTopology topology, HostAndPort node,
      String clientName) {
    this.owner = owner;
    this.topology = topology;
    this.node = node;
    boolean sharded = topology.sharded();
    this.subscribe = sharded ? Protocol.Command.SSUBSCRIBE : Protocol.Command.SUBSCRIBE;
    this.unsubscribe = sharded ? Protocol.Command.SUNSUBSCRIBE : Protocol.Command.UNSUBSCRIBE;
    this.reader = new Thread(this::run, clientName + "-subscriber-" + node);
    this.reader.setDaemon(true);
  }

  void start() {
    reader.start();
  }

  /** Brings the server's subscriptions in line with what the waiters need now. */
  void sync() {
    writeLock.lock();
    try {
      if (socket == null) {
        return; // the reader subscribes everything once it is connected
      }
      Set<String> desired = owner.desiredChannels(node);
      List<String> add = new ArrayList<>();
      for (String channel : desired) {
        if (!sent.contains(channel)) {
          add.add(channel);
        }
      }
      List<String> remove = new ArrayList<>();
      for (String channel : sent) {
        if (!desired.contains(channel)) {
          remove.add(channel);
        }
      }
      if (!remove.isEmpty()) {
        socket.send(unsubscribe, remove);
        sent.removeAll(remove);
      }
      if (!add.isEmpty()) {
        LOG.log(Level.DEBUG, () -> subscribe + " " + add + " on " + node);
        socket.send(subscribe, add);
        sent.addAll(add);
        add.forEach(c -> pending.merge(c, 1, Integer::sum));
      }
      for (String channel : desired) {
        if (!add.contains(channel) && !pending.containsKey(channel)) {
          owner.alreadySubscribed(node, channel);
        }
      }
    } catch (RuntimeException e) {
      // The reader notices the broken socket too and reconnects; nothing is lost meanwhile
      // because waiters are bounded by the lease.
      LOG.log(Level.DEBUG, "Subscription update to " + node + " failed", e);
      dropSocket();
    } finally {
      writeLock.unlock();
    }
  }

  void ping() {
    writeLock.lock();
    try {
      if (socket != null) {
        socket.send(Protocol.Command.PING, List.of());
      }
    } catch (RuntimeException e) {
      dropSocket();
    } finally {
      writeLock.unlock();
    }
  }

  /**
   * Drops the socket, as a broken one: the reader then reconnects through {@link
   * UnlockSubscriptions#onConnectionLost}, which moves the channels the topology names another
   * node for, and wakes their waiters.
   */
  void reconnect() {
    writeLock.lock();
    try {
      dropSocket();
    } finally {
      writeLock.unlock();
    }
  }

  void close() {
    writeLock.lock();
    try {
      closed = true;
      dropSocket();
      closing.signalAll();
    } finally {
      writeLock.unlock();
    }
  }

  private void run() {
    long backoff = 50;
    while (!closed) {
      Socket s = null;
      try {
        s = new Socket(node, topology.subscriberConfig(), readTimeoutMillis());
        if (topology.sharded()) {
          requirePrimary(s);
        }
        writeLock.lock();
        try {
          if (closed) {
            return;
          }
          socket = s;
          sent.clear();
          pending.clear();
        } finally {
          writeLock.unlock();
        }
        sync();
        backoff = 50;
        read(s);
      } catch (RuntimeException e) {
        if (closed) {
          return;
        }
        LOG.log(Level.DEBUG, "Subscriber connection to " + node + " lost: " + e);
      } finally {
        writeLock.lock();
        try {
          if (socket == s) {
            socket = null;
          }
        } finally {
          writeLock.unlock();
        }
        if (s != null) {
          s.close();
        }
      }
      if (closed || !owner.onConnectionLost(this, node)) {
        return; // nothing left to carry here: a new connection is made if a waiter needs one
      }
      pause(backoff);
      backoff = Math.min(MAX_BACKOFF_MS, backoff * 2);
    }
  }

  /**
   * Sharded messages are delivered on the slot's primary only, and a replica accepts
   * {@code SSUBSCRIBE} anyway: after a failover, a topology cache that still names the old
   * primary would park waiters where no unlock ever arrives. Refuse such a node; the reconnect
   * path refreshes the topology and tries again (waiters poll meanwhile).
   */
  private void requirePrimary(Socket s) {
    s.send(Protocol.Command.ROLE, List.of());
    Object role = s.read();
    if (role instanceof List<?> parts && !parts.isEmpty() && !"master".equals(text(parts.get(0)))) {
      throw new MovedException(node + " is not a primary any more");
    }
  }

  private void read(Socket s) {
    while (!closed) {
      Object reply = s.read();
      if (!(reply instanceof List<?> parts) || parts.size() < 2) {
        continue;
      }
      String kind = text(parts.get(0));
      String channel = text(parts.get(1));
      switch (kind) {
        case "message", "smessage" -> owner.onUnlockMessage(channel,
            parts.size() > 2 ? text(parts.get(2)) : "");
        case "subscribe", "ssubscribe" -> confirmed(channel);
        case "unsubscribe", "sunsubscribe" -> {
          if (cancelledByServer(channel)) {
            LOG.log(Level.DEBUG, () -> node + " cancelled the subscription to " + channel);
            // The slot moved (failover, resharding): the channel lives elsewhere now.
            throw new MovedException("server cancelled the subscription to " + channel);
          }
        }
        default -> {
          // pong and anything else: proof of life only
        }
      }
    }
  }

  private void confirmed(String channel) {
    boolean done;
    writeLock.lock();
    try {
      Integer left = pending.merge(channel, -1, Integer::sum);
      done = left != null && left <= 0;
      if (done) {
        pending.remove(channel);
      }
      done = done && sent.contains(channel);
    } finally {
      writeLock.unlock();
    }
    if (done) {
      LOG.log(Level.DEBUG, () -> "Subscribed to " + channel + " on " + node);
      owner.onSubscribed(node, channel);
    }
  }

  /** An unsubscribe we did not ask for: still in {@code sent} means the server cancelled it. */
  private boolean cancelledByServer(String channel) {
    writeLock.lock();
    try {
      return sent.contains(channel) && !pending.containsKey(channel);
    } finally {
      writeLock.unlock();
    }
  }

  private long readTimeoutMillis() {
    // Pings every PING_INTERVAL keep a healthy connection talking; silence beyond this is a
    // dead peer (half-open TCP) and triggers a reconnect.
    return UnlockSubscriptions.PING_INTERVAL.toMillis() * 2 + topology.timeout.toMillis();
  }

  private void dropSocket() {
    if (socket != null) {
      socket.close();
      socket = null;
    }
  }

  private void pause(long millis) {
    writeLock.lock();
    try {
      if (!closed) {
        closing.await(millis, TimeUnit.MILLISECONDS);
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      closed = true;
    } finally {
      writeLock.unlock();
    }
  }

  private static String text(Object o) {
    return o instanceof byte[] b ? new String(b, StandardCharsets.UTF_8) : String.valueOf(o);
  }

  /** Thrown by the reader to force re-homing and resubscription. */
  private static final class MovedException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    MovedException(String why) {
      super(why, null, false, false);
    }
  }

  /** A Jedis connection that can flush, which pub/sub writes from other threads need. */
  private static final class Socket extends Connection {
    Socket(HostAndPort node, JedisClientConfig config, long readTimeoutMillis) {
      super(node, config);
      setSoTimeout(Math.toIntExact(readTimeoutMillis));
    }

    void send(Protocol.Command command, List<String> args) {
      sendCommand(command, args.toArray(new String[0]));
      flush();
    }

    Object read() {
      return getUnflushedObject();
    }
  }
}

package dev.holdfast.engine;

import java.io.IOException;
import java.net.Socket;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentMap;
import java.util.concurrent.Executor;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.ReentrantLock;
import redis.clients.jedis.ClientSetInfoConfig;
import redis.clients.jedis.DefaultJedisClientConfig;
import redis.clients.jedis.DefaultJedisSocketFactory;
import redis.clients.jedis.HostAndPort;
import redis.clients.jedis.HostAndPortMapper;
import redis.clients.jedis.Jedis;
import redis.clients.jedis.JedisClientConfig;
import redis.clients.jedis.JedisSocketFactory;
import redis.clients.jedis.exceptions.JedisConnectionException;
import redis.clients.jedis.exceptions.JedisException;

/**
 * Lets Holdfast use a data node of a Sentinel deployment only while a majority of the configured
 * sentinels name it the master and none of those that answer names another.
 *
 * <p>Why: Jedis follows the master through the sentinels' {@code +switch-master} messages. A
 * client that has not heard one yet (its sentinel connection broken, a late message on a busy
 * machine) still uses the former master's address — and a former master restarted without its
 * data answers there as an empty master until the sentinels demote it, seconds later. A lock
 * granted on it is one another client holds on the promoted master: two holders.
 *
 * <p>Checked twice: before every socket Jedis opens to a data node (this is its {@link
 * HostAndPortMapper}, which Jedis asks for each one: pooled command connections, the unlock
 * subscriber), which needs a majority; and at every borrow of a pooled connection ({@link
 * #refuseIfNamedOther}), so that a connection opened while the sentinels still named the former
 * master — a failover's first seconds — is refused once one names another. The borrow does not
 * need a majority: with the sentinels down the master goes on serving, and the pooled
 * connections with it (holds stay renewed). A verdict is reused for {@link #VERDICT_MILLIS}
 * and renewed in the background ({@link #refreshDue}) while its node is in use, so that a lock
 * call does not wait for the sentinels: a busy client asks them about three times a second, an
 * idle one not at all; a caller asks only when there is no verdict yet or the background has
 * fallen behind. While one thread asks, a borrow uses the last verdict if it is at most one ask
 * past its term (sentinels that do not answer must not stall every call), and otherwise waits
 * for the answer, as a new socket does. What remains: for up to a term plus an ask (twice the
 * sentinel timeout) after the sentinels agree on a new master, a client that has not followed the
 * switch may still use a former master that restarted empty in the failover's first seconds; {@code min-replicas-to-write 1} on the data nodes closes that (an empty restarted
 * master has no replica, so it refuses writes).
 *
 * <p>Thread-safe: one thread asks the sentinels at a time (the background renewal, or a caller
 * that needs a new verdict); the others use the last verdict meanwhile or wait, as above.
 */
final class SentinelMasterCheck implements HostAndPortMapper {
  /** How long a verdict about a node is used before the sentinels are asked again. */
  static final long VERDICT_MILLIS = 500;
  /** How often {@link #refreshDue} should be called. */
  static final long REFRESH_TICK_MILLIS = 100;
  /**
   * Age from which the background renews a verdict: a tick and an answer later it is still
   * younger than {@link #VERDICT_MILLIS}.
   */
  private static final long REFRESH_FROM_MILLIS = VERDICT_MILLIS - 2 * REFRESH_TICK_MILLIS;
  /** A node is in use while a verdict about it was asked for this recently. */
  private static final long IN_USE_MILLIS = 2 * VERDICT_MILLIS;

  private final String masterName;
  private final List<HostAndPort> sentinels;
  private final JedisClientConfig sentinelConfig;
  private final long askNanos;
  private final int majority;
  private final ConcurrentMap<HostAndPort, Node> nodes = new ConcurrentHashMap<>();
  private final AtomicBoolean refreshing = new AtomicBoolean();
  /** Verdicts a caller had to ask for itself (none yet, or the background behind). */
  private final AtomicLong callerAsks = new AtomicLong();
  private final AtomicLong backgroundAsks = new AtomicLong();
  /**
   * Cuts a sentinel's connection when its ask reaches its bound: a socket timeout bounds one
   * read, and a link that trickles its reply a byte at a time would hold the ask open for as
   * long as it trickles — and its answer would be older than a verdict may be when used.
   */
  private final ScheduledThreadPoolExecutor deadlines;
  /** The sockets of asks in progress, cut by {@link #close()}. */
  private final java.util.Set<CutSocket> asking = ConcurrentHashMap.newKeySet();
  private volatile boolean closed;

  /**
   * @param sentinels the configured sentinels; one listed twice counts once
   * @param sentinelConfig how to reach them; its timeouts bound each one's answer, and twice its
   *     socket timeout bounds asking them all
   */
  SentinelMasterCheck(String masterName, List<HostAndPort> sentinels,
      JedisClientConfig sentinelConfig) {
    this.masterName = masterName;
    this.sentinels = List.copyOf(new LinkedHashSet<>(sentinels));
    this.sentinelConfig = sentinelConfig;
    this.askNanos = 2L * sentinelConfig.getSocketTimeoutMillis() * 1_000_000L;
    this.majority = this.sentinels.size() / 2 + 1;
    this.deadlines = new ScheduledThreadPoolExecutor(1, r -> {
      Thread t = new Thread(r, "holdfast-sentinel-ask-deadline");
      t.setDaemon(true);
      return t;
    });
    deadlines.setRemoveOnCancelPolicy(true);
    // Its thread ends when no ask has run for a while: none is left behind by a client that
    // failed to start (and was never closed) or asks rarely.
    deadlines.setKeepAliveTime(10, TimeUnit.SECONDS);
    deadlines.allowCoreThreadTimeOut(true);
  }

  /**
   * Cuts the asks in progress (their cuts would be dropped with the timer) and stops the timer;
   * an ask after this refuses at once. Idempotent.
   */
  void close() {
    closed = true;
    deadlines.shutdownNow();
    asking.forEach(CutSocket::cut);
  }

  /**
   * A data node's answer to "is it the master?": refused, or not yet asked, as if it were down.
   * Nothing was sent to the node.
   */
  static final class NotConfirmedException extends JedisConnectionException {
    private static final long serialVersionUID = 1L;

    NotConfirmedException(String message, Throwable cause) {
      super(message, cause);
    }
  }

  /**
   * What the sentinels said about a node, when the asking began ({@code at}) and ended
   * ({@code done}), nanoTime.
   *
   * @param confirmed whether a majority named it and none another
   * @param namedOther whether an answering sentinel named another node
   */
  private record Verdict(boolean confirmed, boolean namedOther, String refusal,
      JedisException cause, long at, long done) {
  }

  /**
   * A data node's last verdict, when a caller last needed one (nanoTime), and who asks about it
   * now (one thread per node).
   */
  private static final class Node {
    final ReentrantLock asking = new ReentrantLock();
    volatile Verdict verdict;
    volatile long usedAt;
  }

  /**
   * Returns {@code node} when the sentinels confirm it.
   *
   * @throws NotConfirmedException otherwise: the socket is not opened
   */
  @Override
  public HostAndPort getHostAndPort(HostAndPort node) {
    confirm(node);
    return node;
  }

  /**
   * Returns when the sentinels confirm {@code node}: a majority name it and none another (a
   * verdict at most {@link #VERDICT_MILLIS} old, or being renewed).
   *
   * @throws NotConfirmedException otherwise
   */
  void confirm(HostAndPort node) {
    Verdict v = verdict(node, false);
    if (!v.confirmed()) {
      throw new NotConfirmedException(v.refusal(), v.cause());
    }
  }

  /**
   * Returns unless a sentinel that answered names another node than {@code node} the master.
   *
   * @throws NotConfirmedException if one does
   */
  void refuseIfNamedOther(HostAndPort node) {
    Verdict v = verdict(node, true);
    if (v.namedOther()) {
      throw new NotConfirmedException(v.refusal(), v.cause());
    }
  }

  /**
   * The verdict about {@code address}: the last one within its term; else one thread asks the
   * sentinels (within twice their timeout) and the others wait for its answer — except a borrow
   * ({@code lastWillDo}), which meanwhile uses the last verdict while it is at most one ask past
   * its term (sentinels that do not answer must not stall every call; an older verdict, of a
   * client idle since, is not used). A waiter takes an answer that came in while it waited, even
   * one begun before: asking again would make N waiters take N asks, one after another.
   */
  private Verdict verdict(HostAndPort address, boolean lastWillDo) {
    Node node = nodes.computeIfAbsent(address, a -> new Node());
    long from = System.nanoTime();
    node.usedAt = from;
    Verdict v = node.verdict;
    if (v != null && age(v) < VERDICT_MILLIS) {
      return v;
    }
    if (v != null && lastWillDo && usable(v)) {
      if (!node.asking.tryLock()) {
        return v;
      }
    } else {
      node.asking.lock();
    }
    try {
      Verdict now = node.verdict;
      if (now != null && (age(now) < VERDICT_MILLIS
          || (now.done() - from >= 0 && usable(now))
          || (lastWillDo && usable(now) && node.asking.hasQueuedThreads()))) {
        // Fresh; or answered while this thread waited; or, for a borrow with others queued
        // here (new sockets waiting for an answer), the last verdict: its own ask would hold
        // them up, one ask after another.
        return now;
      }
      callerAsks.incrementAndGet();
      now = ask(address);
      node.verdict = now;
      // The rule every waiter follows holds for the asker too: an answer is not used past it.
      return usable(now) ? now : tooOld(address, now);
    } finally {
      node.asking.unlock();
    }
  }

  /**
   * Waits, at most {@code waitNanos} and heeding an interrupt, while another thread asks the
   * sentinels about {@code address} and a borrow of a pooled connection would wait for that ask
   * (no verdict, or the last one past a term plus an ask): for an interruptible or timed
   * acquisition, whose borrow waits without heeding either. The borrow that follows finds the
   * answer. (A borrow that must open a new socket also waits while the verdict is merely past
   * its term; that wait, at most one ask, is not covered.)
   *
   * @return false if the thread was interrupted (the flag is set again) or the wait elapsed
   *     while the ask went on
   */
  boolean awaitAsk(HostAndPort address, long waitNanos) {
    Node node = nodes.get(address);
    if (node == null || !node.asking.isLocked() || node.asking.isHeldByCurrentThread()) {
      return true;
    }
    Verdict v = node.verdict;
    if (v != null && usable(v)) {
      return true; // the borrow uses it without waiting
    }
    try {
      if (!node.asking.tryLock(Math.max(0, waitNanos), TimeUnit.NANOSECONDS)) {
        return false;
      }
      node.asking.unlock();
      return true;
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return false;
    }
  }

  /**
   * Renews, on {@code executor}, the verdicts about nodes in use that will soon be too old, so
   * that callers find them fresh. Call every {@link #REFRESH_TICK_MILLIS}; does no I/O itself and
   * starts at most one renewal at a time. A renewal skips a node a caller is asking about.
   */
  void refreshDue(Executor executor) {
    if (!anyDue() || !refreshing.compareAndSet(false, true)) {
      return;
    }
    boolean started = false;
    try {
      executor.execute(() -> {
        try {
          nodes.forEach(this::refreshIfDue);
        } finally {
          refreshing.set(false);
        }
      });
      started = true;
    } catch (RuntimeException e) {
      // refused: closing
    } finally {
      if (!started) {
        refreshing.set(false); // refused (closing), or an Error: the next tick tries again
      }
    }
  }

  private boolean anyDue() {
    for (Node node : nodes.values()) {
      if (due(node)) {
        return true;
      }
    }
    return false;
  }

  private static boolean due(Node node) {
    Verdict v = node.verdict;
    return v != null && age(v) >= REFRESH_FROM_MILLIS
        && (System.nanoTime() - node.usedAt) / 1_000_000L < IN_USE_MILLIS;
  }

  private void refreshIfDue(HostAndPort address, Node node) {
    if (!due(node) || !node.asking.tryLock()) {
      return;
    }
    try {
      if (due(node)) {
        backgroundAsks.incrementAndGet();
        node.verdict = ask(address);
      }
    } finally {
      node.asking.unlock();
    }
  }

  /** {@return how many verdicts callers asked for themselves} For tests. */
  long callerAsks() {
    return callerAsks.get();
  }

  /** {@return how many verdicts the background renewed} For tests. */
  long backgroundAsks() {
    return backgroundAsks.get();
  }

  private static long age(Verdict v) {
    return (System.nanoTime() - v.at()) / 1_000_000L;
  }

  /** Whether {@code v} may still be used: it is at most one ask past its term. */
  private boolean usable(Verdict v) {
    return age(v) < VERDICT_MILLIS + askNanos / 1_000_000L;
  }

  /** A refusal in place of {@code v}, an answer that came too late to be used. */
  private Verdict tooOld(HostAndPort node, Verdict v) {
    return new Verdict(false, v.namedOther(), "Not using " + node + " as the master of '"
        + masterName + "': the sentinels' answer is " + age(v) + " ms old, older than a "
        + "verdict may be used", v.cause(), v.at(), v.done());
  }

  /**
   * Schedules {@code socket}'s cut at {@code deadline} (nanoTime), which ends a connect or read
   * in progress; null once closed (the ask then relies on its socket timeouts alone).
   */
  private ScheduledFuture<?> cutAt(long deadline, CutSocket socket) {
    try {
      return deadlines.schedule(socket::cut, deadline - System.nanoTime(),
          TimeUnit.NANOSECONDS);
    } catch (RuntimeException e) {
      return null; // closing
    }
  }

  /** The socket of one sentinel's ask, which another thread can cut whatever it is doing. */
  private static final class CutSocket implements JedisSocketFactory {
    private final DefaultJedisSocketFactory sockets;
    private volatile Socket socket;
    private volatile boolean over;

    CutSocket(HostAndPort sentinel, JedisClientConfig config) {
      this.sockets = new DefaultJedisSocketFactory(sentinel, config);
    }

    @Override
    public Socket createSocket() {
      Socket s = sockets.createSocket();
      socket = s;
      if (over) { // cut while it connected
        closeQuietly(s);
        throw new JedisConnectionException("the ask of the sentinels reached its bound");
      }
      return s;
    }

    void cut() {
      over = true;
      Socket s = socket;
      if (s != null) {
        closeQuietly(s);
      }
    }

    private static void closeQuietly(Socket s) {
      try {
        s.close();
      } catch (IOException e) {
        // closed either way
      }
    }
  }

  private Verdict ask(HostAndPort node) {
    long start = System.nanoTime();
    long deadline = start + askNanos;
    int confirmed = 0;
    List<String> others = new ArrayList<>();
    JedisException last = null;
    for (HostAndPort sentinel : sentinels) {
      if (closed) {
        break; // no votes: refused
      }
      long leftMillis = (askNanos - (System.nanoTime() - start)) / 1_000_000L;
      if (leftMillis <= 0) {
        break; // the rest did not answer in time
      }
      // A sentinel costs up to three waits (connect, AUTH, the query; no client name nor library
      // info), each given a third of what is left; a reply that trickles is cut at the bound.
      int timeout = (int) Math.max(1, Math.min(sentinelConfig.getSocketTimeoutMillis(),
          leftMillis / 3));
      JedisClientConfig bounded = DefaultJedisClientConfig.builder().from(sentinelConfig)
          .clientName(null).clientSetInfoConfig(ClientSetInfoConfig.DISABLED)
          .connectionTimeoutMillis(timeout).socketTimeoutMillis(timeout).build();
      CutSocket socket = new CutSocket(sentinel, bounded);
      asking.add(socket);
      if (closed) {
        socket.cut(); // close() may have looked before the add
      }
      ScheduledFuture<?> cut = cutAt(deadline, socket);
      try (Jedis jedis = new Jedis(socket, bounded)) {
        List<String> address = jedis.sentinelGetMasterAddrByName(masterName);
        if (address == null || address.size() != 2) {
          continue; // this sentinel does not know the master: no vote
        }
        HostAndPort named = new HostAndPort(address.get(0), Integer.parseInt(address.get(1)));
        if (!named.equals(node)) {
          others.add(sentinel + " names " + named); // heeded however late
        } else if (System.nanoTime() - deadline <= 0) {
          confirmed++; // a vote for the node counts only within the ask's bound
        }
      } catch (JedisException e) {
        last = e;
      } finally {
        asking.remove(socket);
        if (cut != null) {
          cut.cancel(false);
        }
      }
    }
    String prefix = "Not using " + node + " as the master of '" + masterName + "': ";
    if (!others.isEmpty()) {
      return new Verdict(false, true, prefix + String.join(", ", others) + " (this client has "
          + "not followed the switch yet; a former master answers empty until it is demoted)",
          null, start, System.nanoTime());
    }
    if (confirmed < majority) {
      return new Verdict(false, false, prefix + confirmed + " of " + sentinels.size()
          + " sentinels name it, fewer than a majority (" + majority + ")", last, start,
          System.nanoTime());
    }
    return new Verdict(true, false, null, null, start, System.nanoTime());
  }
}

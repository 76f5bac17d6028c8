package dev.holdfast.engine;

import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentMap;
import java.util.concurrent.locks.ReentrantLock;
import redis.clients.jedis.DefaultJedisClientConfig;
import redis.clients.jedis.HostAndPort;
import redis.clients.jedis.HostAndPortMapper;
import redis.clients.jedis.Jedis;
import redis.clients.jedis.JedisClientConfig;
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
 * connections with it (holds stay renewed). A verdict is reused for {@link #VERDICT_MILLIS}:
 * a busy client asks the sentinels about twice a second, a client in an outage no more. What
 * remains: for up to that long after the sentinels agree on a new master, a client that has not
 * followed the switch may still use a former master that restarted empty in the failover's first
 * seconds; {@code min-replicas-to-write 1} on the data nodes closes that (an empty restarted
 * master has no replica, so it refuses writes).
 *
 * <p>Thread-safe: one thread asks the sentinels at a time, a caller that needs a new verdict; the
 * others use the last verdict meanwhile, or wait for a first one.
 */
final class SentinelMasterCheck implements HostAndPortMapper {
  /** How long a verdict about a node is used before the sentinels are asked again. */
  static final long VERDICT_MILLIS = 500;

  private final String masterName;
  private final List<HostAndPort> sentinels;
  private final JedisClientConfig sentinelConfig;
  private final long askNanos;
  private final int majority;
  private final ConcurrentMap<HostAndPort, Verdict> verdicts = new ConcurrentHashMap<>();
  private final ReentrantLock asking = new ReentrantLock();

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
   * What the sentinels said about a node, and when the asking began (nanoTime).
   *
   * @param confirmed whether a majority named it and none another
   * @param namedOther whether an answering sentinel named another node
   */
  private record Verdict(boolean confirmed, boolean namedOther, String refusal,
      JedisException cause, long at) {
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
    Verdict v = verdict(node);
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
    Verdict v = verdict(node);
    if (v.namedOther()) {
      throw new NotConfirmedException(v.refusal(), v.cause());
    }
  }

  private Verdict verdict(HostAndPort node) {
    Verdict v = verdicts.get(node);
    if (v != null && age(v) < VERDICT_MILLIS) {
      return v;
    }
    // One asks (within twice the sentinel timeout); the others go on with the last verdict.
    boolean mine = v != null ? asking.tryLock() : lock();
    if (!mine) {
      return v;
    }
    try {
      Verdict now = verdicts.get(node);
      if (now != null && age(now) < VERDICT_MILLIS) {
        return now;
      }
      now = ask(node);
      verdicts.put(node, now);
      return now;
    } finally {
      asking.unlock();
    }
  }

  private boolean lock() {
    asking.lock();
    return true;
  }

  private static long age(Verdict v) {
    return (System.nanoTime() - v.at()) / 1_000_000L;
  }

  private Verdict ask(HostAndPort node) {
    long start = System.nanoTime();
    int confirmed = 0;
    List<String> others = new ArrayList<>();
    JedisException last = null;
    for (HostAndPort sentinel : sentinels) {
      long leftMillis = (askNanos - (System.nanoTime() - start)) / 1_000_000L;
      if (leftMillis <= 0) {
        break; // the rest did not answer in time
      }
      int timeout = (int) Math.min(sentinelConfig.getSocketTimeoutMillis(), leftMillis);
      JedisClientConfig bounded = DefaultJedisClientConfig.builder().from(sentinelConfig)
          .connectionTimeoutMillis(timeout).socketTimeoutMillis(timeout).build();
      try (Jedis jedis = new Jedis(sentinel, bounded)) {
        List<String> address = jedis.sentinelGetMasterAddrByName(masterName);
        if (address == null || address.size() != 2) {
          continue; // this sentinel does not know the master: no vote
        }
        HostAndPort named = new HostAndPort(address.get(0), Integer.parseInt(address.get(1)));
        if (named.equals(node)) {
          confirmed++;
        } else {
          others.add(sentinel + " names " + named);
        }
      } catch (JedisException e) {
        last = e;
      }
    }
    String prefix = "Not using " + node + " as the master of '" + masterName + "': ";
    if (!others.isEmpty()) {
      return new Verdict(false, true, prefix + String.join(", ", others) + " (this client has "
          + "not followed the switch yet; a former master answers empty until it is demoted)",
          null, start);
    }
    if (confirmed < majority) {
      return new Verdict(false, false, prefix + confirmed + " of " + sentinels.size()
          + " sentinels name it, fewer than a majority (" + majority + ")", last, start);
    }
    return new Verdict(true, false, null, null, start);
  }
}

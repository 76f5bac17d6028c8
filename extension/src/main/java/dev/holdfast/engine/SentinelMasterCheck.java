package dev.holdfast.engine;

import java.util.List;
import redis.clients.jedis.HostAndPort;
import redis.clients.jedis.HostAndPortMapper;
import redis.clients.jedis.Jedis;
import redis.clients.jedis.JedisClientConfig;
import redis.clients.jedis.exceptions.JedisConnectionException;
import redis.clients.jedis.exceptions.JedisException;

/**
 * Lets a new connection to a data node of a Sentinel deployment be made only while a majority of
 * the configured sentinels name that node the master, and none names another.
 *
 * <p>Why: Jedis follows the master through the sentinels' {@code +switch-master} messages. A
 * client that has not heard one yet (its sentinel connection broken, a late message on a busy
 * machine) still connects to the former master's address — and a former master restarted
 * without its data answers there as an empty master until the sentinels demote it, seconds
 * later. A lock granted on it is one another client holds on the promoted master: two holders.
 * Every connection Holdfast makes to a data node (pooled command connections, the unlock
 * subscriber) is opened after this check; connections already open are not affected, since a
 * restart closes them.
 *
 * <p>It is a {@link HostAndPortMapper} because Jedis asks the mapper for the address of every
 * socket it opens, which is the one hook before a connection to a data node exists. The check
 * costs one short-lived connection to each sentinel asked, per new data connection; a pool
 * makes those rarely (at start, after a failure).
 *
 * <p>Thread-safe: stateless but for its configuration.
 */
final class SentinelMasterCheck implements HostAndPortMapper {
  private final String masterName;
  private final List<HostAndPort> sentinels;
  private final JedisClientConfig sentinelConfig;
  private final int majority;

  SentinelMasterCheck(String masterName, List<HostAndPort> sentinels,
      JedisClientConfig sentinelConfig) {
    this.masterName = masterName;
    this.sentinels = List.copyOf(sentinels);
    this.sentinelConfig = sentinelConfig;
    this.majority = this.sentinels.size() / 2 + 1;
  }

  /**
   * Returns {@code node} when a majority of the sentinels name it the master.
   *
   * @throws JedisConnectionException when a sentinel names another master, or fewer than a
   *     majority answer: the connection is refused as if the node were down
   */
  @Override
  public HostAndPort getHostAndPort(HostAndPort node) {
    int confirmed = 0;
    JedisException last = null;
    for (HostAndPort sentinel : sentinels) {
      HostAndPort named;
      try (Jedis jedis = new Jedis(sentinel, sentinelConfig)) {
        List<String> address = jedis.sentinelGetMasterAddrByName(masterName);
        if (address == null || address.size() != 2) {
          continue; // this sentinel does not know the master: no vote
        }
        named = new HostAndPort(address.get(0), Integer.parseInt(address.get(1)));
      } catch (JedisException e) {
        last = e;
        continue;
      }
      if (!named.equals(node)) {
        throw new JedisConnectionException("Not connecting to " + node + ": sentinel " + sentinel
            + " names " + named + " the master of '" + masterName + "' (this client has not "
            + "followed the switch yet; a former master answers empty until it is demoted)");
      }
      if (++confirmed >= majority) {
        return node;
      }
    }
    throw new JedisConnectionException("Not connecting to " + node + ": " + confirmed + " of "
        + sentinels.size() + " sentinels name it the master of '" + masterName + "', fewer than "
        + "a majority (" + majority + ")", last);
  }
}

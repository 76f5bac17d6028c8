package dev.holdfast.benchmarks;

import dev.holdfast.DistributedLock;
import dev.holdfast.LockClient;
import dev.holdfast.LockClientConfig;
import dev.holdfast.testing.RedisClusterSetup;
import dev.holdfast.testing.RedisServer;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Lock;
import org.redisson.Redisson;
import org.redisson.api.RedissonClient;
import org.redisson.config.Config;
import redis.clients.jedis.Jedis;

/**
 * The Redis servers one scenario runs against — a standalone server, a master with one replica, or
 * a 3-primary Cluster — and how each {@link Impl} connects to them, configured alike (same
 * watchdog timeout; Holdfast's defaults otherwise, so {@code sync-replicas=auto}; Redisson's
 * defaults otherwise, so it checks synced replicas where it knows of them).
 *
 * <p>Not thread-safe; one benchmark thread drives it.
 */
abstract class Deployment implements AutoCloseable {

  /** The servers whose {@code INFO} the resource figures read (the masters). */
  abstract List<RedisServer> masters();

  abstract LockClientConfig.Builder holdfastConfig();

  abstract Config redissonConfig();

  /** A fresh connection to the (first) master, for the protocol floor; null if it has none. */
  abstract Jedis floorConnection();

  /** Replicas the protocol floor waits for after each script. */
  int floorWaitReplicas() {
    return 0;
  }

  /** Stops every server of this deployment. */
  @Override
  public abstract void close();

  /** Removes every key, so that a measurement starts from an empty server. */
  void flush() {
    for (RedisServer master : masters()) {
      try (Jedis admin = master.admin()) {
        admin.flushAll();
      }
    }
  }

  /** Connects a new client of {@code impl}; close it after the measurement. */
  Contender connect(Impl impl, Duration watchdogTimeout) {
    switch (impl) {
      case HOLDFAST: {
        LockClient client = LockClient.create(holdfastConfig().watchdogTimeout(watchdogTimeout)
            .build());
        return new Contender() {
          @Override
          public DistributedLock lock(String name) {
            return client.getLock(name);
          }

          @Override
          public void close() {
            client.close();
          }
        };
      }
      case REDISSON: {
        Config config = redissonConfig();
        config.setLockWatchdogTimeout(watchdogTimeout.toMillis());
        RedissonClient client = Redisson.create(config);
        return new Contender() {
          @Override
          public Lock lock(String name) {
            return client.getLock(name);
          }

          @Override
          public void close() {
            client.shutdown(0, 2, TimeUnit.SECONDS);
          }
        };
      }
      case FLOOR: {
        ProtocolFloor floor = new ProtocolFloor(this::floorConnection, floorWaitReplicas());
        return new Contender() {
          @Override
          public Lock lock(String name) {
            return floor.lock(name);
          }

          @Override
          public void close() {
            floor.close();
          }
        };
      }
      default:
        throw new IllegalArgumentException("unknown implementation " + impl);
    }
  }

  /** A client of one implementation: lock handles by name. */
  interface Contender extends AutoCloseable {

    /** A handle on the lock {@code name}; for the protocol floor, usable by one thread only. */
    Lock lock(String name);

    @Override
    void close();
  }

  /** One standalone redis-server. */
  static Deployment standalone() {
    RedisServer server = RedisServer.start();
    return new Deployment() {
      @Override
      List<RedisServer> masters() {
        return List.of(server);
      }

      @Override
      LockClientConfig.Builder holdfastConfig() {
        return LockClientConfig.builder().address(server.uri());
      }

      @Override
      Config redissonConfig() {
        Config config = new Config();
        config.useSingleServer().setAddress(server.uri());
        return config;
      }

      @Override
      Jedis floorConnection() {
        return server.admin();
      }

      @Override
      public void close() {
        server.close();
      }

      @Override
      public String toString() {
        return "standalone " + server;
      }
    };
  }

  /**
   * A master with one connected replica. Redisson is told of the replica
   * ({@code useMasterSlaveServers}), else it would not wait for it; Holdfast finds it itself
   * ({@code sync-replicas=auto}); the floor pipelines {@code WAIT 1 1000} after each script.
   */
  static Deployment replicated() {
    RedisServer master = RedisServer.start();
    RedisServer replica;
    try {
      replica = master.startReplica();
    } catch (RuntimeException | Error e) {
      master.close();
      throw e;
    }
    return new Deployment() {
      @Override
      List<RedisServer> masters() {
        return List.of(master);
      }

      @Override
      LockClientConfig.Builder holdfastConfig() {
        return LockClientConfig.builder().address(master.uri())
            .syncReplicas(LockClientConfig.SYNC_REPLICAS_AUTO);
      }

      @Override
      Config redissonConfig() {
        Config config = new Config();
        config.setCheckLockSyncedSlaves(true);
        config.useMasterSlaveServers().setMasterAddress(master.uri())
            .addSlaveAddress(replica.uri());
        return config;
      }

      @Override
      Jedis floorConnection() {
        return master.admin();
      }

      @Override
      int floorWaitReplicas() {
        return 1;
      }

      @Override
      void flush() {
        super.flush();
        try (Jedis admin = master.admin()) { // the replica has it too before the next round
          admin.waitReplicas(1, 5_000);
        }
      }

      @Override
      public void close() {
        replica.close();
        master.close();
      }

      @Override
      public String toString() {
        return "master " + master + " with replica " + replica;
      }
    };
  }

  /** A Redis Cluster of three primaries without replicas. */
  static Deployment cluster() {
    RedisClusterSetup cluster = RedisClusterSetup.start(3, 0);
    return new Deployment() {
      @Override
      List<RedisServer> masters() {
        return cluster.servers();
      }

      @Override
      LockClientConfig.Builder holdfastConfig() {
        return LockClientConfig.builder().mode(LockClientConfig.Mode.CLUSTER)
            .nodes(Arrays.asList(cluster.seedNodes().split(",")));
      }

      @Override
      Config redissonConfig() {
        List<String> nodes = new ArrayList<>();
        for (String node : cluster.seedNodes().split(",")) {
          nodes.add("redis://" + node);
        }
        Config config = new Config();
        config.useClusterServers().setNodeAddresses(nodes);
        return config;
      }

      @Override
      Jedis floorConnection() {
        return null; // no protocol floor in the cluster scenario
      }

      @Override
      RedisServer clusterMasterForSlot(int slot) {
        return cluster.masterForSlot(slot);
      }

      @Override
      public void close() {
        cluster.close();
      }

      @Override
      public String toString() {
        return "cluster " + cluster.seedNodes();
      }
    };
  }

  /** The cluster's node for slot {@code slot}; only for {@link #cluster()}. */
  RedisServer clusterMasterForSlot(int slot) {
    throw new UnsupportedOperationException("not a cluster: " + this);
  }
}

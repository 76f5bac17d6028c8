package dev.holdfast.testing;

import java.util.ArrayList;
import java.util.List;

/** A master and its replicas: {@link RedisExtension#replicated}. */
record RedisReplicaSet(RedisServer master, List<RedisServer> replicas)
    implements AutoCloseable {

  static RedisReplicaSet start(RedisBackend backend, List<String> args, int count) {
    RedisServer master = RedisServer.start(backend, args.toArray(String[]::new));
    List<RedisServer> replicas = new ArrayList<>();
    try {
      for (int i = 0; i < count; i++) {
        replicas.add(master.startReplica());
      }
      return new RedisReplicaSet(master, List.copyOf(replicas));
    } catch (RuntimeException | Error e) {
      replicas.add(master);
      RedisServer.closeAll(replicas);
      throw e;
    }
  }

  @Override
  public void close() {
    List<RedisServer> all = new ArrayList<>(replicas);
    all.add(master);
    RedisServer.closeAll(all);
  }
}

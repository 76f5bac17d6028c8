package dev.holdfast.testing;

import java.lang.reflect.Parameter;
import java.lang.reflect.ParameterizedType;
import java.lang.reflect.Type;
import java.util.LinkedHashMap;
import java.util.Map;

/** What {@link RedisExtension} injects into test parameters, and its Holdfast configuration. */
final class RedisParameters {

  private RedisParameters() {
  }

  /** Whether {@code parameter} is injectable from an extension of {@code topology}. */
  static boolean supports(Parameter parameter, String topology) {
    Class<?> type = parameter.getType();
    return type == RedisExtension.class
        || type == RedisServer.class
            && (topology.equals("standalone") || topology.equals("replicated"))
        || type == RedisSentinelSetup.class && topology.equals("sentinel")
        || type == RedisClusterSetup.class && topology.equals("cluster")
        || isStringMap(parameter.getParameterizedType());
  }

  static Object resolve(Parameter parameter, RedisExtension redis) {
    Class<?> type = parameter.getType();
    if (type == RedisExtension.class) {
      return redis;
    } else if (type == RedisServer.class) {
      return redis.server();
    } else if (type == RedisSentinelSetup.class) {
      return redis.sentinelSetup();
    } else if (type == RedisClusterSetup.class) {
      return redis.clusterSetup();
    }
    return redis.config();
  }

  /** See {@link RedisExtension#config()}. */
  static Map<String, String> config(RedisExtension redis, String topology) {
    Map<String, String> config = new LinkedHashMap<>();
    switch (topology) {
      case "sentinel" -> {
        config.put("holdfast.redis.mode", "sentinel");
        config.put("holdfast.redis.nodes", redis.sentinelSetup().sentinelNodes());
        config.put("holdfast.redis.sentinel.master", redis.sentinelSetup().masterName());
      }
      case "cluster" -> {
        config.put("holdfast.redis.mode", "cluster");
        config.put("holdfast.redis.nodes", redis.clusterSetup().seedNodes());
      }
      default -> config.put("holdfast.redis.address", redis.server().uri());
    }
    return Map.copyOf(config);
  }

  private static boolean isStringMap(Type type) {
    return type instanceof ParameterizedType parameterized
        && parameterized.getRawType() == Map.class
        && parameterized.getActualTypeArguments()[0] == String.class
        && parameterized.getActualTypeArguments()[1] == String.class;
  }
}

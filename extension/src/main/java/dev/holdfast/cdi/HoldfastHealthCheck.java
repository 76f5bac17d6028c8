package dev.holdfast.cdi;

import dev.holdfast.LockClient;
import dev.holdfast.engine.EngineAccess;
import dev.holdfast.engine.NodeStatus;
import jakarta.enterprise.context.ApplicationScoped;
import jakarta.enterprise.inject.Instance;
import jakarta.inject.Inject;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import org.eclipse.microprofile.health.HealthCheck;
import org.eclipse.microprofile.health.HealthCheckResponse;
import org.eclipse.microprofile.health.Readiness;

/**
 * The {@value #NAME} readiness check: {@code PING}s every Redis node the application's
 * {@link LockClient} sends lock commands to (the standalone server, the master the sentinels
 * name, each cluster primary) and is {@code UP} when all answer. Each node is a data entry,
 * {@code host:port} → {@code "UP 0.4 ms"} or {@code "DOWN: <error>"}; addresses never carry
 * credentials.
 *
 * <p>Readiness, never liveness: a Redis outage should take the instance out of the load balancer
 * (its locked work cannot run), not restart it (a restart cannot bring Redis back).
 *
 * <p>Registered by the extensions only when MicroProfile Health is on the class path and
 * {@code holdfast.health.enabled} is not {@code false}; this class is not loaded otherwise.
 */
@Readiness
@ApplicationScoped
public class HoldfastHealthCheck implements HealthCheck {
  static final String NAME = "holdfast";

  private Instance<LockClient> client;

  /** For the container's proxy. */
  public HoldfastHealthCheck() {
  }

  /** The client is looked up at each check: a client that cannot be created is a DOWN. */
  @Inject
  public HoldfastHealthCheck(Instance<LockClient> client) {
    this.client = client;
  }

  @Override
  public HealthCheckResponse call() {
    Map<String, Object> data = new LinkedHashMap<>();
    List<NodeStatus> nodes;
    try {
      nodes = EngineAccess.engine(client.get()).ping();
    } catch (RuntimeException e) {
      data.put("error", String.valueOf(e.getMessage()));
      return response(false, data);
    }
    boolean up = !nodes.isEmpty();
    for (NodeStatus node : nodes) {
      up &= node.up();
      data.put(node.node(), node.up()
          ? String.format(Locale.ROOT, "UP %.1f ms", node.millis())
          : "DOWN: " + node.error());
    }
    if (nodes.isEmpty()) {
      data.put("error", "no Redis node is known");
    }
    return response(up, data);
  }

  /** Built directly, not with {@code HealthCheckResponse.named}: that needs a provider SPI. */
  private static HealthCheckResponse response(boolean up, Map<String, Object> data) {
    return new HealthCheckResponse(NAME, up ? HealthCheckResponse.Status.UP
        : HealthCheckResponse.Status.DOWN, Optional.of(data));
  }
}

package dev.holdfast.cdi;

import dev.holdfast.LockClient;
import dev.holdfast.LockClientConfig;
import dev.holdfast.LockAtRisk;
import dev.holdfast.LockLost;
import dev.holdfast.LockRecovered;
import dev.holdfast.engine.ConfigValues;
import jakarta.enterprise.context.ApplicationScoped;
import jakarta.enterprise.event.Event;
import jakarta.enterprise.inject.Disposes;
import jakarta.enterprise.inject.Produces;
import jakarta.inject.Singleton;
import jakarta.enterprise.inject.Instance;
import org.eclipse.microprofile.config.Config;

/**
 * Produces the application's {@link LockClient} from MicroProfile Config (read at run time, also
 * in Quarkus), closes it at shutdown, and turns the client's reports ({@link LockLost},
 * {@link LockAtRisk}, {@link LockRecovered}) into CDI events: observe them with
 * {@code @Observes LockLost} (on the client's event thread, in the order the reports were made,
 * never on the renewal path) or {@code @ObservesAsync LockLost}, and likewise for the others. The client publishes lock meters to the container's Micrometer
 * registry when there is one, unless {@code holdfast.metrics.enabled=false}.
 *
 * <p>The client is created as the application starts (by {@link HoldfastExtension} or
 * {@link HoldfastStartup}), which checks that Redis answers, unless
 * {@code holdfast.redis.connect-at-startup=false}: then at its first use.
 *
 * <p>An application replaces this client by producing its own {@code LockClient} as an enabled
 * {@code @Alternative}; that one too is created at startup unless the key says {@code false}.
 */
@ApplicationScoped
public class HoldfastProducer {

  /** For the container. */
  public HoldfastProducer() {
  }

  // @Singleton rather than @ApplicationScoped: LockClient is final and cannot be proxied.
  // Public, like the disposer: container-generated bean classes may live in another loader.
  @Produces
  @Singleton
  public LockClient lockClient(Event<LockLost> lostEvents, Event<LockAtRisk> atRiskEvents,
      Event<LockRecovered> recoveredEvents, Instance<Config> config, Instance<Object> beans) {
    Config current = HoldfastConfig.current(config);
    LockClientConfig.Builder builder =
        ConfigValues.read(HoldfastConfig.clientProperties(current), LockClientConfig.builder());
    if (HoldfastConfig.enabled(current, HoldfastConfig.METRICS_ENABLED)) {
      MeterRegistries.find(beans).ifPresent(builder::meterRegistry);
    }
    LockClient client = LockClient.create(builder.build());
    client.onLockLost(lost -> fire(lostEvents, lost));
    client.onLockAtRisk(atRisk -> fire(atRiskEvents, atRisk));
    client.onLockRecovered(recovered -> fire(recoveredEvents, recovered));
    return client;
  }

  private static <E> void fire(Event<E> events, E event) {
    events.fire(event);
    events.fireAsync(event);
  }

  public void close(@Disposes LockClient client) {
    client.close();
  }
}

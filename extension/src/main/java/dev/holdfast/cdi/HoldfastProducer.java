package dev.holdfast.cdi;

import dev.holdfast.LockClient;
import dev.holdfast.LockLost;
import jakarta.enterprise.context.ApplicationScoped;
import jakarta.enterprise.event.Event;
import jakarta.enterprise.inject.Disposes;
import jakarta.enterprise.inject.Produces;
import jakarta.inject.Singleton;
import jakarta.enterprise.inject.Instance;
import org.eclipse.microprofile.config.Config;

/**
 * Produces the application's {@link LockClient} from MicroProfile Config (read at run time, also
 * in Quarkus), closes it at shutdown, and turns lost-lock reports into CDI events: observe them
 * with {@code @Observes LockLost} (on the client's event thread, never the renewal path) or
 * {@code @ObservesAsync LockLost}.
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
  public LockClient lockClient(Event<LockLost> lostEvents, Instance<Config> config) {
    LockClient client =
        LockClient.create(HoldfastConfig.clientProperties(HoldfastConfig.current(config)));
    client.onLockLost(lost -> {
      lostEvents.fire(lost);
      lostEvents.fireAsync(lost);
    });
    return client;
  }

  public void close(@Disposes LockClient client) {
    client.close();
  }
}

package dev.holdfast.cdi;

import dev.holdfast.DistributedLock;
import dev.holdfast.LockClient;
import dev.holdfast.Locked;
import jakarta.enterprise.context.ApplicationScoped;
import jakarta.enterprise.inject.Any;
import jakarta.enterprise.inject.spi.Bean;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;
import org.jboss.weld.environment.se.Weld;
import org.jboss.weld.environment.se.WeldContainer;

/**
 * What an application without Micrometer, OpenTelemetry, MicroProfile Health, Mutiny and JTA does
 * with Holdfast: run by {@link ObservationAbsentTest} in a class loader that has none of them, so
 * any class that touches them unguarded fails here with {@code NoClassDefFoundError}.
 *
 * @return what it saw, one line per finding
 */
public final class AbsentApisScenario implements Callable<List<String>> {
  private final String redisUri;

  public AbsentApisScenario(String redisUri) {
    this.redisUri = redisUri;
  }

  @Override
  public List<String> call() throws Exception {
    List<String> seen = new ArrayList<>();
    for (String api : List.of(OptionalApis.METER_REGISTRY, OptionalApis.OPEN_TELEMETRY,
        OptionalApis.HEALTH_CHECK, LockedReturn.UNI_TYPE, OptionalApis.TRANSACTION_REGISTRY)) {
      seen.add(api + (OptionalApis.present(api) ? " present" : " absent"));
    }
    try (LockClient client = LockClient.create(Map.of("holdfast.redis.address", redisUri))) {
      DistributedLock lock = client.getLock("plain");
      lock.lock();
      lock.unlock();
      seen.add("plain Java: locked and unlocked");
    }
    try (TestConfig config = TestConfig.of(Map.of("holdfast.redis.address", redisUri));
        WeldContainer container = new Weld().disableDiscovery()
            .addExtension(new HoldfastExtension()).addBeanClasses(Service.class).initialize()) {
      seen.add("CDI: " + container.select(Service.class).get().work("a"));
      seen.add("CDI: " + container.select(Service.class).get().workLater("b")
          .toCompletableFuture().get(30, java.util.concurrent.TimeUnit.SECONDS));
      long healthBeans = container.getBeanManager().getBeans(Object.class, Any.Literal.INSTANCE)
          .stream().map(Bean::getBeanClass).filter(c -> c.getName().contains("Health")).count();
      seen.add("CDI: " + healthBeans + " health beans");
      long transactionBeans = container.getBeanManager()
          .getBeans(Object.class, Any.Literal.INSTANCE).stream().map(Bean::getBeanClass)
          .filter(c -> c.getName().contains("Transaction")).count();
      seen.add("CDI: " + transactionBeans + " transaction beans");
    }
    return seen;
  }

  /** The application's locked service. */
  @ApplicationScoped
  public static class Service {
    @Locked("work:{kind}")
    public String work(String kind) {
      return "locked call ran";
    }

    @Locked("work:{kind}")
    public java.util.concurrent.CompletionStage<String> workLater(String kind) {
      return java.util.concurrent.CompletableFuture.completedFuture("locked stage completed");
    }
  }
}

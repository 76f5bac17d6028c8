package dev.holdfast.cdi;

import dev.holdfast.Fair;
import dev.holdfast.LockClient;
import jakarta.enterprise.context.Dependent;
import jakarta.enterprise.event.Observes;
import jakarta.enterprise.inject.Any;
import jakarta.enterprise.inject.spi.AfterBeanDiscovery;
import jakarta.enterprise.inject.spi.AfterDeploymentValidation;
import jakarta.enterprise.inject.spi.AnnotatedField;
import jakarta.enterprise.inject.spi.BeanManager;
import jakarta.enterprise.inject.spi.BeforeBeanDiscovery;
import jakarta.enterprise.inject.spi.DefinitionException;
import jakarta.enterprise.inject.spi.DeploymentException;
import jakarta.enterprise.inject.spi.Extension;
import jakarta.enterprise.inject.spi.InjectionPoint;
import jakarta.enterprise.inject.spi.ProcessInjectionPoint;
import jakarta.enterprise.inject.spi.ProcessManagedBean;
import jakarta.inject.Named;
import jakarta.inject.Singleton;
import jakarta.enterprise.inject.literal.NamedLiteral;
import java.lang.reflect.Type;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import org.eclipse.microprofile.config.Config;
import org.eclipse.microprofile.config.ConfigProvider;

/**
 * Holdfast for CDI Full containers (Weld: WildFly, weld-junit5, Open Liberty, Payara).
 *
 * <ul>
 *   <li>Adds the library's own beans (the interceptor, the {@link LockClient} producer): the jar
 *       has no {@code beans.xml}, so they are registered exactly once, here. With MicroProfile
 *       Health, also the {@code holdfast} readiness check ({@link HealthCheckBean}); with JTA,
 *       the commit guard of transactions begun in {@code @Locked} calls
 *       ({@link TransactionBegun}).</li>
 *   <li>Checks every {@code @Locked} method of every managed bean as written
 *       ({@code ProcessManagedBean}), then prepares all of them with the configuration's
 *       overrides and checks the rest of the configuration ({@code AfterDeploymentValidation}):
 *       mistakes fail the deployment. The prepared {@link LockedOperations} are the ones the
 *       interceptor uses. Then the {@link LockClient} is created, which checks that Redis
 *       answers: an unreachable Redis fails the deployment too, unless
 *       {@code holdfast.redis.connect-at-startup=false}.</li>
 *   <li>Adds a {@code @Dependent} bean per name and kind used at a {@code @Named} injection
 *       point of {@code DistributedLock} or {@code Lock} (plain, or fair with {@code @Fair}),
 *       {@code FencedLock}, or {@code DistributedReadWriteLock} or {@code ReadWriteLock} (see
 *       {@link NamedLocks}).</li>
 * </ul>
 */
public class HoldfastExtension implements Extension {
  /** The {@code @Named} lock beans to add: name and kind. */
  private final Set<Map.Entry<String, NamedLocks.Kind>> lockBeans = ConcurrentHashMap.newKeySet();
  private final Set<Class<?>> lockedBeanClasses = ConcurrentHashMap.newKeySet();
  private volatile LockedOperations operations;
  /** A bean class of the application's own archive, whose visibility the health check gets. */
  private volatile Class<?> applicationBeanClass;

  void addLibraryBeans(@Observes BeforeBeanDiscovery discovery, BeanManager beans) {
    for (Class<?> type : List.of(LockedInterceptor.class, HoldfastProducer.class)) {
      discovery.addAnnotatedType(beans.createAnnotatedType(type), type.getName());
    }
    if (LockedCalls.TRACKED) {
      // Only now may a class that names JTA's types load.
      Class<?> type = OptionalApis.load(OptionalApis.TRANSACTION_BEGUN);
      discovery.addAnnotatedType(beans.createAnnotatedType(type), type.getName());
    }
  }

  /**
   * Whether to register the {@code holdfast} readiness check: MicroProfile Health is on the class
   * path and {@code holdfast.health.enabled} is not {@code false}.
   */
  static boolean healthCheckWanted() {
    return OptionalApis.present(OptionalApis.HEALTH_CHECK)
        && HoldfastConfig.enabled(ConfigProvider.getConfig(), HoldfastConfig.HEALTH_ENABLED);
  }

  void checkLockedMethods(@Observes ProcessManagedBean<?> bean) {
    Class<?> beanClass = bean.getAnnotatedBeanClass().getJavaClass();
    if (applicationBeanClass == null && beanClass.getClassLoader() == getClass().getClassLoader()
        && !beanClass.getName().startsWith("dev.holdfast.cdi.")) {
      applicationBeanClass = beanClass;
    }
    Collection<LockedTarget> targets = LockedDefinitions.targets(beanClass).values();
    boolean valid = true;
    for (LockedTarget target : targets) {
      List<String> problems = LockedDefinitions.problems(target);
      problems.forEach(p -> bean.addDefinitionError(new DefinitionException(p)));
      valid &= problems.isEmpty();
    }
    if (valid && !targets.isEmpty()) {
      lockedBeanClasses.add(beanClass);
    }
  }

  void collectNamedLock(@Observes ProcessInjectionPoint<?, ?> event) {
    InjectionPoint ip = event.getInjectionPoint();
    Type type = ip.getType();
    if (!(type instanceof Class<?> c) || !NamedLocks.isLockType(c.getName())) {
      return;
    }
    Named named = ip.getQualifiers().stream().filter(Named.class::isInstance)
        .map(Named.class::cast).findFirst().orElse(null);
    boolean fair = ip.getQualifiers().stream().anyMatch(Fair.class::isInstance);
    if (named == null) {
      if (fair) {
        event.addDefinitionError(new DefinitionException("@Fair lock injection point "
            + ip.getMember() + " has no @Named: write @Named(\"<lock name>\") @Fair"));
      }
      return; // an unqualified Lock is someone else's bean
    }
    String field = ip.getAnnotated() instanceof AnnotatedField<?> f
        ? f.getJavaMember().getName() : null;
    try {
      String where = String.valueOf(ip.getMember());
      String name = NamedLocks.resolve(named.value(), field, where);
      lockBeans.add(Map.entry(name, NamedLocks.kind(c.getName(), fair, where)));
      if (named.value().isEmpty()) {
        // @Named on a field means @Named("<field>"): make the injection point say so.
        event.configureInjectionPoint().qualifiers(qualifiersWith(ip, name));
      }
    } catch (IllegalArgumentException e) {
      event.addDefinitionError(new DefinitionException(e.getMessage()));
    }
  }

  private static Set<java.lang.annotation.Annotation> qualifiersWith(InjectionPoint ip,
      String name) {
    Set<java.lang.annotation.Annotation> qualifiers = new HashSet<>();
    for (var q : ip.getQualifiers()) {
      if (!(q instanceof Named)) {
        qualifiers.add(q);
      }
    }
    qualifiers.add(NamedLiteral.of(name));
    return qualifiers;
  }

  void addBeans(@Observes AfterBeanDiscovery abd, BeanManager beans) {
    if (healthCheckWanted()) {
      // Only now may a class that uses MicroProfile Health's API load.
      abd.addBean(new HealthCheckBean(
          applicationBeanClass != null ? applicationBeanClass : HoldfastExtension.class, beans));
    }
    // Created after AfterDeploymentValidation, which prepared the operations or failed.
    abd.<LockedOperations>addBean()
        .beanClass(HoldfastExtension.class)
        .types(LockedOperations.class, Object.class)
        .scope(Singleton.class)
        .createWith(ctx -> operations);
    for (Map.Entry<String, NamedLocks.Kind> lock : lockBeans) {
      String name = lock.getKey();
      NamedLocks.Kind kind = lock.getValue();
      Set<Type> types = new HashSet<>(List.of(kind.beanTypes()));
      types.add(Object.class);
      var bean = abd.addBean()
          .beanClass(HoldfastExtension.class)
          .types(types)
          .qualifiers(NamedLiteral.of(name), Any.Literal.INSTANCE)
          .scope(Dependent.class)
          .createWith(ctx -> NamedLocks.create(beans.createInstance().select(LockClient.class)
              .get(), name, kind));
      if (kind == NamedLocks.Kind.FAIR) {
        bean.addQualifier(NamedLocks.FairLiteral.INSTANCE);
      } else if (kind == NamedLocks.Kind.PLAIN
          && lockBeans.contains(Map.entry(name, NamedLocks.Kind.FAIR))) {
        bean.alternative(true).priority(NamedLocks.PLAIN_PRIORITY); // see NamedLocks
      }
    }
  }

  void prepareOperations(@Observes AfterDeploymentValidation adv, BeanManager beans) {
    List<String> problems = new ArrayList<>();
    Config config = ConfigProvider.getConfig();
    operations = LockedOperations.prepare(lockedBeanClasses, config, problems);
    problems.forEach(p -> adv.addDeploymentProblem(new DeploymentException(p)));
    if (problems.isEmpty()) {
      try {
        HoldfastConfig.connectAtStartup(config, beans.createInstance().select(LockClient.class));
      } catch (DeploymentException e) {
        adv.addDeploymentProblem(e);
      }
    }
  }

  /** The operations prepared at deployment ({@code null} before), for tests. */
  LockedOperations operations() {
    return operations;
  }
}

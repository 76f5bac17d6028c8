package dev.holdfast.cdi;

import jakarta.enterprise.inject.Instance;
import jakarta.enterprise.inject.build.compatible.spi.Parameters;
import jakarta.enterprise.inject.build.compatible.spi.SyntheticBeanCreator;
import jakarta.enterprise.inject.spi.DeploymentException;
import java.lang.reflect.Method;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.Callable;
import java.util.function.Function;
import java.util.function.UnaryOperator;
import org.eclipse.microprofile.config.Config;

/**
 * The prepared {@link LockedOperation} of every {@code @Locked} method of every bean, keyed by
 * bean class and method: two beans inheriting one method with different class-level
 * {@code @Locked} values have an operation each. Everything is prepared once, when the
 * application is deployed (portable extension: {@code AfterDeploymentValidation}) or starts
 * (build-compatible extension: {@link HoldfastStartup}, because run-time configuration is only
 * readable then); the interceptor only looks operations up. Thread-safe: immutable but for what
 * carries callers' context to asynchronous methods, found once at the first such call.
 *
 * <p>A {@code @Singleton} synthetic bean (public for container-generated code; not API).
 */
public final class LockedOperations {
  /** The synthetic bean's parameter: the bean classes that have {@code @Locked} methods. */
  static final String BEAN_CLASSES_PARAM = "beanClasses";

  /** Whether Mutiny is there to carry the caller's context to an asynchronous method. */
  private static final boolean MUTINY = OptionalApis.present(OptionalApis.MUTINY);
  /** Whether a container's Jakarta Concurrency context service may be there to carry it. */
  private static final boolean CONTEXT_SERVICE =
      OptionalApis.present(OptionalApis.CONTEXT_SERVICE);

  private final Map<Class<?>, Map<Method, LockedOperation>> byBeanClass;
  /** See {@link #callerContext()}; found at the first asynchronous call. */
  private volatile UnaryOperator<Callable<Object>> callerContext;

  private LockedOperations(Map<Class<?>, Map<Method, LockedOperation>> byBeanClass) {
    this.byBeanClass = byBeanClass;
  }

  /**
   * Prepares the {@code @Locked} methods of these bean classes with the overrides in
   * {@code config}, and checks the rest of Holdfast's configuration (client keys, override keys
   * no method consulted). Every problem found is appended to {@code problems}, naming the method,
   * the annotation member, the config key and the value; the operations of methods with a
   * problem are left out.
   */
  static LockedOperations prepare(Collection<Class<?>> beanClasses, Config config,
      List<String> problems) {
    Function<String, Optional<String>> lookup = HoldfastConfig.lookup(config);
    Set<String> consulted = new HashSet<>();
    Function<String, Optional<String>> recording = key -> {
      consulted.add(key);
      return lookup.apply(key);
    };
    // The same inherited method fails once per bean class that inherits it: report it once.
    Set<String> methodProblems = new LinkedHashSet<>();
    Map<Class<?>, Map<Method, LockedOperation>> byBeanClass = new LinkedHashMap<>();
    for (Class<?> beanClass : beanClasses) {
      Map<Method, LockedOperation> operations = new LinkedHashMap<>();
      LockedDefinitions.targets(beanClass).forEach((method, target) -> {
        try {
          operations.put(method, LockedDefinitions.prepare(target, recording));
        } catch (IllegalArgumentException e) {
          methodProblems.add(e.getMessage());
        }
      });
      if (!operations.isEmpty()) {
        byBeanClass.put(beanClass, Map.copyOf(operations));
      }
    }
    problems.addAll(HoldfastConfig.problems(config, consulted));
    problems.addAll(methodProblems);
    return new LockedOperations(Map.copyOf(byBeanClass));
  }

  /** The operations of one bean class, or {@code null} if it has none. */
  Map<Method, LockedOperation> forBeanClass(Class<?> beanClass) {
    return byBeanClass.get(beanClass);
  }

  /**
   * The operation for {@code method} of an instance of {@code runtimeClass}: of the nearest
   * class, from {@code runtimeClass} up, that was prepared. For instances whose bean class the
   * container did not say (a subclass proxy such as {@code Foo$Proxy$_$$_WeldSubclass} or
   * {@code Foo_Subclass} maps to {@code Foo}).
   *
   * @return the operation, or {@code null} if none was prepared
   */
  LockedOperation nearest(Class<?> runtimeClass, Method method) {
    for (Class<?> c = runtimeClass; c != null; c = c.getSuperclass()) {
      Map<Method, LockedOperation> operations = byBeanClass.get(c);
      if (operations != null) {
        return operations.get(method);
      }
    }
    return null;
  }

  /**
   * {@return what wraps an asynchronous method's call so that it runs, on another thread, with the
   * context of the thread that wraps it (the caller's): the container's Jakarta Concurrency
   * context service (WildFly, other Jakarta EE servers), then Mutiny's callback decorators
   * (Quarkus' context propagation), each where it is} Found once per deployment, at the first
   * call, which is on an application thread (a server binds {@code java:comp} per component;
   * its default context service is the same in each). Two first calls at once may both look it
   * up; either answer is kept.
   */
  UnaryOperator<Callable<Object>> callerContext() {
    UnaryOperator<Callable<Object>> context = callerContext;
    if (context == null) {
      UnaryOperator<Callable<Object>> container = CONTEXT_SERVICE
          ? ContainerContext.find() : UnaryOperator.identity();
      context = MUTINY ? p -> UniLocked.contextual(container.apply(p)) : container;
      callerContext = context;
    }
    return context;
  }

  /** How many operations were prepared, over all bean classes. */
  int size() {
    return byBeanClass.values().stream().mapToInt(Map::size).sum();
  }

  /**
   * Creates the build-compatible extension's bean at run time: prepares every operation with the
   * run-time configuration.
   */
  public static final class Creator implements SyntheticBeanCreator<LockedOperations> {
    /** For the container. */
    public Creator() {
    }

    /**
     * @throws DeploymentException listing every problem, so that the application does not start
     */
    @Override
    public LockedOperations create(Instance<Object> lookup, Parameters params) {
      Class<?>[] beanClasses = params.get(BEAN_CLASSES_PARAM, Class[].class, new Class<?>[0]);
      Config config = HoldfastConfig.current(lookup.select(Config.class));
      List<String> problems = new ArrayList<>();
      LockedOperations operations = prepare(Arrays.asList(beanClasses), config, problems);
      if (!problems.isEmpty()) {
        throw new DeploymentException(HoldfastConfig.report(problems));
      }
      return operations;
    }
  }
}

package dev.holdfast.cdi;

import dev.holdfast.Locked;
import jakarta.enterprise.context.ApplicationScoped;
import jakarta.interceptor.InvocationContext;
import java.lang.reflect.Method;
import java.util.Optional;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentMap;
import java.util.function.Function;
import jakarta.enterprise.inject.Instance;
import jakarta.inject.Inject;
import org.eclipse.microprofile.config.Config;

/**
 * The prepared {@link LockedOperation} of every intercepted method, built on its first call and
 * reused after (deployment validation already proved that preparing cannot fail).
 * Application-scoped so that all interceptor instances share one cache. Thread-safe.
 */
@ApplicationScoped
public class LockedOperations {
  private final ConcurrentMap<Method, LockedOperation> prepared = new ConcurrentHashMap<>();
  private volatile Function<String, Optional<String>> config;

  @Inject
  Instance<Config> configBean;

  /** For the container. */
  public LockedOperations() {
  }

  LockedOperation of(InvocationContext ctx) {
    Method method = ctx.getMethod();
    LockedOperation op = prepared.get(method);
    if (op != null) {
      return op;
    }
    return prepared.computeIfAbsent(method, m -> prepare(ctx, m));
  }

  private LockedOperation prepare(InvocationContext ctx, Method method) {
    Locked locked = binding(ctx, method);
    boolean classLevel = method.getAnnotation(Locked.class) == null;
    Class<?> beanClass = ctx.getTarget() == null ? method.getDeclaringClass()
        : ctx.getTarget().getClass();
    LockedTarget target = LockedTarget.of(beanClass, method, locked, classLevel);
    return LockedDefinitions.prepare(target, config());
  }

  private static Locked binding(InvocationContext ctx, Method method) {
    // InvocationContext.getInterceptorBinding is CDI 4.1; read the annotation as 4.0 allows.
    Locked locked = method.getAnnotation(Locked.class);
    if (locked == null && ctx.getTarget() != null) {
      locked = ctx.getTarget().getClass().getAnnotation(Locked.class); // @Inherited
    }
    if (locked == null) {
      throw new IllegalStateException("No @Locked binding found for " + method);
    }
    return locked;
  }

  private Function<String, Optional<String>> config() {
    Function<String, Optional<String>> c = config;
    if (c == null) {
      c = HoldfastConfig.lookup(HoldfastConfig.current(configBean));
      config = c;
    }
    return c;
  }
}

package dev.holdfast.cdi;

import jakarta.enterprise.concurrent.ContextService;
import jakarta.enterprise.inject.Produces;
import jakarta.inject.Singleton;
import java.lang.reflect.Proxy;
import java.util.concurrent.Callable;

/**
 * A Jakarta Concurrency {@link ContextService} bean standing in for a Jakarta EE server's default
 * one (WildFly's carries the naming context, security identity and class loader) in this
 * module's Weld tests: {@code contextualCallable} captures {@link #CONTEXT} on the thread that
 * calls it and sets it around the call, on whatever thread runs it, leaving that thread as it
 * found it. Every other method is unsupported: Holdfast uses only that one.
 */
public final class ContainerContextService {
  /** The "context" of a test's calling thread, as the container would carry it. */
  static final ThreadLocal<String> CONTEXT = new ThreadLocal<>();

  @Produces
  @Singleton
  ContextService contextService() {
    return (ContextService) Proxy.newProxyInstance(ContextService.class.getClassLoader(),
        new Class<?>[] {ContextService.class}, (proxy, method, args) -> {
          switch (method.getName()) {
            case "contextualCallable":
              return contextual((Callable<?>) args[0]);
            case "toString":
              return "the tests' ContextService";
            case "hashCode":
              return System.identityHashCode(proxy);
            case "equals":
              return proxy == args[0];
            default:
              throw new UnsupportedOperationException(method.getName());
          }
        });
  }

  private static <V> Callable<V> contextual(Callable<V> callable) {
    return CallerContextDecorator.carry(CONTEXT, callable);
  }
}

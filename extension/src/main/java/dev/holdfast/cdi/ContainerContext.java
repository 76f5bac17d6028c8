package dev.holdfast.cdi;

import jakarta.enterprise.concurrent.ContextService;
import java.util.concurrent.Callable;
import java.util.function.UnaryOperator;
import javax.naming.NamingException;

/**
 * The caller's context for an asynchronous {@code @Locked} method, from the container's Jakarta
 * Concurrency {@link ContextService} (WildFly and the other Jakarta EE servers): the method runs
 * on the thread that completes the acquisition, which is not the caller's, and without this it
 * would run there without the caller's naming context ({@code java:comp} lookups), security
 * identity and class loader. What the service carries and clears is the container's choice; the
 * default one clears the transaction.
 *
 * <p>The only class of Holdfast that touches Jakarta Concurrency: loaded only when the API is
 * visible ({@link OptionalApis#CONTEXT_SERVICE}).
 */
final class ContainerContext {
  private static final System.Logger LOG = System.getLogger(LockedInterceptor.class.getName());
  /** Where a Jakarta EE server binds its default context service, for every component. */
  static final String JNDI_NAME = "java:comp/DefaultContextService";

  private ContainerContext() {
  }

  /**
   * What wraps a call so that it runs with the context of the thread that wrapped it: the
   * container's context service (its CDI bean, else {@value #JNDI_NAME}), or, where there is
   * none, nothing. Call it on an application thread (JNDI's {@code java:comp} is per component).
   */
  static UnaryOperator<Callable<Object>> find() {
    ContextService service;
    try {
      service = OptionalApis.containerResource(ContextService.class, JNDI_NAME);
    } catch (NamingException | RuntimeException e) {
      LOG.log(System.Logger.Level.DEBUG, () -> "No Jakarta Concurrency ContextService ("
          + e + "): asynchronous @Locked methods run without the caller's context");
      return UnaryOperator.identity();
    }
    // The context is captured when contextualCallable is called: on the caller's thread.
    return service::contextualCallable;
  }
}

package dev.holdfast.cdi;

import dev.holdfast.LockClient;
import jakarta.enterprise.context.ApplicationScoped;
import jakarta.enterprise.context.spi.CreationalContext;
import jakarta.enterprise.inject.Any;
import jakarta.enterprise.inject.spi.Bean;
import jakarta.enterprise.inject.spi.BeanManager;
import jakarta.enterprise.inject.spi.InjectionPoint;
import jakarta.enterprise.inject.spi.PassivationCapable;
import java.lang.annotation.Annotation;
import java.lang.reflect.Type;
import java.util.Set;
import org.eclipse.microprofile.health.HealthCheck;
import org.eclipse.microprofile.health.Readiness;

/**
 * The {@link HoldfastHealthCheck} bean of a CDI Full container (the portable extension adds it in
 * {@code AfterBeanDiscovery}); loaded only when MicroProfile Health is on the class path.
 *
 * <p><b>Why a hand-written {@code Bean} whose bean class is the application's.</b> A health
 * subsystem finds checks by looking up {@code @Readiness HealthCheck} beans with its own
 * {@code BeanManager}. WildFly's is that of its static module, which sees the deployment's
 * top-level bean archives but not the archive created on the fly for classes that an extension
 * adds from a jar that is no bean archive (Holdfast's): a check added as an annotated type, or
 * with a bean configurator, lands there and is never found. Weld puts a {@code Bean} given to
 * {@code AfterBeanDiscovery.addBean(Bean)} into the archive of its {@link #getBeanClass()}; one of
 * the application's bean classes puts the check where the health subsystem looks.
 */
final class HealthCheckBean implements Bean<HealthCheck>, PassivationCapable {
  private final Class<?> beanClass;
  private final BeanManager beans;

  /**
   * @param beanClass a bean class of the application's own archive
   * @param beans the extension's bean manager, which sees the {@link LockClient} bean
   */
  HealthCheckBean(Class<?> beanClass, BeanManager beans) {
    this.beanClass = beanClass;
    this.beans = beans;
  }

  @Override
  public Class<?> getBeanClass() {
    return beanClass;
  }

  @Override
  public Set<InjectionPoint> getInjectionPoints() {
    return Set.of();
  }

  @Override
  public HealthCheck create(CreationalContext<HealthCheck> context) {
    return new HoldfastHealthCheck(beans.createInstance().select(LockClient.class));
  }

  @Override
  public void destroy(HealthCheck instance, CreationalContext<HealthCheck> context) {
    context.release();
  }

  @Override
  public Set<Type> getTypes() {
    return Set.of(HealthCheck.class, Object.class);
  }

  @Override
  public Set<Annotation> getQualifiers() {
    return Set.of(Readiness.Literal.INSTANCE, Any.Literal.INSTANCE);
  }

  @Override
  public Class<? extends Annotation> getScope() {
    return ApplicationScoped.class;
  }

  @Override
  public String getName() {
    return null;
  }

  @Override
  public Set<Class<? extends Annotation>> getStereotypes() {
    return Set.of();
  }

  @Override
  public boolean isAlternative() {
    return false;
  }

  @Override
  public String getId() {
    return HoldfastHealthCheck.class.getName();
  }

  @Override
  public String toString() {
    return "Holdfast readiness check bean (" + HoldfastHealthCheck.NAME + ")";
  }
}

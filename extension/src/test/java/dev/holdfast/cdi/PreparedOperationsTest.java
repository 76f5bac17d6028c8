package dev.holdfast.cdi;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.holdfast.LockClient;
import dev.holdfast.Locked;
import dev.holdfast.testing.LoopbackPorts;
import dev.holdfast.testing.RedisExtension;
import jakarta.enterprise.context.ApplicationScoped;
import jakarta.enterprise.context.Dependent;
import jakarta.enterprise.inject.build.compatible.spi.BeanInfo;
import jakarta.enterprise.inject.build.compatible.spi.Discovery;
import jakarta.enterprise.inject.build.compatible.spi.Messages;
import jakarta.enterprise.inject.build.compatible.spi.Registration;
import jakarta.enterprise.inject.build.compatible.spi.ScannedClasses;
import jakarta.enterprise.inject.build.compatible.spi.Synthesis;
import jakarta.enterprise.inject.build.compatible.spi.SyntheticComponents;
import jakarta.inject.Inject;
import java.lang.reflect.Method;
import java.util.Arrays;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.stream.Collectors;
import java.util.stream.Stream;
import org.jboss.weld.environment.se.Weld;
import org.jboss.weld.environment.se.WeldContainer;
import org.jboss.weld.junit5.WeldInitiator;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * {@code @Locked} operations are prepared per bean class and method, all of them once, when the
 * application is deployed — by the portable extension, and by the build-compatible one (run here
 * by Weld's Lite extension translator) when the application starts.
 */
class PreparedOperationsTest {

  @RegisterExtension
  static final RedisExtension redis = RedisExtension.standalone();

  /** A base class whose one method two beans inherit, each with its own class-level name. */
  public abstract static class Desk {
    @Inject
    LockClient client;

    /** The names, of those used here, whose lock this thread holds during the call. */
    public String heldLocks() {
      return Stream.of("orders", "invoices", "archive")
          .filter(name -> client.getLock(name).isHeldByCurrentThread())
          .collect(Collectors.joining(","));
    }
  }

  @Locked("orders")
  @ApplicationScoped
  public static class OrdersDesk extends Desk {
  }

  @Locked("invoices")
  @ApplicationScoped
  public static class InvoicesDesk extends Desk {
  }

  /** The class-level annotation of a bean's superclass is the bean's ({@code @Inherited}). */
  @Locked("archive")
  public abstract static class ArchiveBase extends Desk {
  }

  @ApplicationScoped
  public static class ArchiveDesk extends ArchiveBase {
  }

  /** A default method, with its own {@code @Locked}, that a bean does not override. */
  public interface Auditing {
    LockClient client();

    @Locked("audit")
    default boolean audit() {
      return client().getLock("audit").isHeldByCurrentThread();
    }
  }

  @ApplicationScoped
  public static class AuditDesk implements Auditing {
    @Inject
    LockClient client;

    @Override
    public LockClient client() {
      return client;
    }
  }

  /** A bean without {@code @Locked}: nothing to prepare. */
  @Dependent
  public static class Plain {
    public void run() {
    }
  }

  /**
   * The build-compatible extension as ArC runs it: without {@code @SkipIfPortableExtensionPresent}
   * (not inherited), which Weld otherwise honours unconditionally. Weld's translator looks for
   * phase methods among the declared ones, hence the overrides.
   */
  public static class BuildCompatibleOnly extends HoldfastBuildCompatibleExtension {
    @Override
    @Discovery
    public void addQualifiers(jakarta.enterprise.inject.build.compatible.spi.MetaAnnotations meta) {
      super.addQualifiers(meta);
    }

    @Override
    @Discovery
    public void addLibraryBeans(ScannedClasses scanned) {
      super.addLibraryBeans(scanned);
    }

    @Override
    @Registration(types = Object.class)
    public void inspect(BeanInfo bean, Messages messages) {
      super.inspect(bean, messages);
    }

    @Override
    @Synthesis
    public void addBeans(SyntheticComponents components) {
      super.addBeans(components);
    }
  }

  private TestConfig config;

  @AfterEach
  void releaseConfig() {
    if (config != null) {
      config.close();
    }
  }

  @Test
  void buildCompatibleTwin_overridesEveryPhase() {
    assertEquals(phases(HoldfastBuildCompatibleExtension.class),
        phases(BuildCompatibleOnly.class), "BuildCompatibleOnly must override every phase");
  }

  private static Set<String> phases(Class<?> extension) {
    return Arrays.stream(extension.getDeclaredMethods())
        .filter(m -> Arrays.stream(m.getAnnotations()).anyMatch(a -> a.annotationType()
            .getPackageName().equals(Discovery.class.getPackageName())))
        .map(m -> m.getName() + Arrays.toString(m.getAnnotations()))
        .collect(Collectors.toCollection(TreeSet::new));
  }

  @Test
  void inheritedMethod_locksTheNameOfEachBeansOwnClassAnnotation() {
    config = TestConfig.of(Map.of("holdfast.redis.address", redis.server().uri()));
    try (WeldContainer weld = portable(new HoldfastExtension()).initialize()) {
      assertLocksOwnName(weld);
    }
  }

  @Test
  void inheritedMethod_locksTheNameOfEachBeansOwnClassAnnotation_buildCompatible() {
    config = TestConfig.of(Map.of("holdfast.redis.address", redis.server().uri()));
    try (WeldContainer weld = buildCompatible().initialize()) {
      assertLocksOwnName(weld);
    }
  }

  private static void assertLocksOwnName(WeldContainer weld) {
    // The first call used to prepare the operation for Desk.heldLocks, and every later call of
    // that method, on any bean, reused it.
    assertEquals("orders", weld.select(OrdersDesk.class).get().heldLocks());
    assertEquals("invoices", weld.select(InvoicesDesk.class).get().heldLocks());
    assertEquals("orders", weld.select(OrdersDesk.class).get().heldLocks());
    assertEquals("archive", weld.select(ArchiveDesk.class).get().heldLocks());
    assertTrue(weld.select(AuditDesk.class).get().audit(), "a default method is locked too");
  }

  @Test
  void everyOperation_isPreparedOnceAtDeployment_andUsedByTheInterceptor() throws Exception {
    config = TestConfig.of(Map.of("holdfast.redis.address", redis.server().uri()));
    HoldfastExtension extension = new HoldfastExtension();
    try (WeldContainer weld = portable(extension).initialize()) {
      LockedOperations prepared = extension.operations();
      assertNotNull(prepared, "prepared during deployment, before any call");
      assertEquals(4, prepared.size(),
          "Desk.heldLocks once per bean class, Auditing.audit, nothing for Plain");
      assertSame(prepared, weld.select(LockedOperations.class).get(),
          "the interceptor's operations are the deployment's");

      Method heldLocks = Desk.class.getMethod("heldLocks");
      LockedOperation orders = prepared.forBeanClass(OrdersDesk.class).get(heldLocks);
      LockedOperation invoices = prepared.forBeanClass(InvoicesDesk.class).get(heldLocks);
      assertTrue(orders.toString().startsWith("@Locked(\"orders\")"), orders.toString());
      assertTrue(invoices.toString().startsWith("@Locked(\"invoices\")"), invoices.toString());
      assertNull(prepared.forBeanClass(Plain.class));

      weld.select(OrdersDesk.class).get().heldLocks();
      weld.select(InvoicesDesk.class).get().heldLocks();
      assertEquals(4, prepared.size(), "calls prepare nothing");
      assertSame(orders, prepared.forBeanClass(OrdersDesk.class).get(heldLocks));
    }
  }

  @Test
  void runtimeSubclass_mapsToItsNearestPreparedBeanClass() throws Exception {
    config = TestConfig.of(Map.of("holdfast.redis.address", redis.server().uri()));
    HoldfastExtension extension = new HoldfastExtension();
    try (WeldContainer weld = portable(extension).initialize()) {
      OrdersDesk proxy = weld.select(OrdersDesk.class).get();
      Method heldLocks = Desk.class.getMethod("heldLocks");
      // The client proxy's class is generated (OrdersDesk$Proxy$_$$_WeldClientProxy).
      assertTrue(proxy.getClass() != OrdersDesk.class, proxy.getClass().getName());
      assertSame(extension.operations().forBeanClass(OrdersDesk.class).get(heldLocks),
          extension.operations().nearest(proxy.getClass(), heldLocks));
    }
  }

  @Test
  void badOverride_failsTheDeployment_namingMethodMemberAndKey() {
    String key = "holdfast.\"" + Desk.class.getName() + "/heldLocks\".locked.lease-time";
    config = TestConfig.of(Map.of(key, "0s"));
    String message = deploymentFailure(portable(new HoldfastExtension()));
    assertTrue(message.contains("Invalid configuration for @Locked.leaseTime on "
        + Desk.class.getName() + ".heldLocks(): " + key + "='0s' must be positive"), message);
  }

  @Test
  void badGlobalOverride_failsTheStart_notTheFirstCall_buildCompatible() {
    config = TestConfig.of(Map.of("holdfast.locked.lease-time", "0s"));
    String message = deploymentFailure(buildCompatible());
    assertTrue(message.contains("Invalid configuration for @Locked.leaseTime on "
        + Desk.class.getName() + ".heldLocks(): holdfast.locked.lease-time='0s' must be positive"),
        message);
  }

  @Test
  void badOverrideThatNoMethodUses_isReportedByItsKey() {
    config = TestConfig.of(Map.of("holdfast.locked.wait-time", "PT-1S"));
    String message = deploymentFailure(WeldInitiator.createWeld()
        .addExtension(new HoldfastExtension()).addBeanClasses(Plain.class));
    assertTrue(message.contains("holdfast.locked.wait-time='PT-1S' must not be negative"), message);
  }

  @Test
  void badClientConfig_failsTheStart_buildCompatible() {
    config = TestConfig.of(Map.of("holdfast.redis.timeout", "soon"));
    String message = deploymentFailure(buildCompatible());
    assertTrue(message.contains("holdfast.redis.timeout='soon' is not a duration"), message);
  }

  @Test
  void unreachableRedis_failsTheStart_buildCompatible() {
    int port = LoopbackPorts.reserve(); // nothing listens there
    try {
      config = TestConfig.of(Map.of("holdfast.redis.address", "redis://127.0.0.1:" + port));
      String message = deploymentFailure(buildCompatible());
      assertTrue(message.contains("DeploymentException: Cannot connect to Redis (standalone "
          + "redis://127.0.0.1:" + port + "): connection refused"), message);
    } finally {
      LoopbackPorts.release(port);
    }
  }

  @Test
  void unreachableRedis_withConnectAtStartupFalse_starts_buildCompatible() {
    int port = LoopbackPorts.reserve();
    try {
      config = TestConfig.of(Map.of("holdfast.redis.address", "redis://127.0.0.1:" + port,
          "holdfast.redis.connect-at-startup", "false"));
      try (WeldContainer weld = buildCompatible().initialize()) {
        assertTrue(weld.isRunning());
      }
    } finally {
      LoopbackPorts.release(port);
    }
  }

  private static Weld portable(HoldfastExtension extension) {
    return WeldInitiator.createWeld().addExtension(extension)
        .addBeanClasses(OrdersDesk.class, InvoicesDesk.class, ArchiveDesk.class, AuditDesk.class,
        Plain.class);
  }

  private static Weld buildCompatible() {
    return WeldInitiator.createWeld().addBuildCompatibleExtensions(BuildCompatibleOnly.class)
        .addBeanClasses(OrdersDesk.class, InvoicesDesk.class, ArchiveDesk.class, AuditDesk.class,
        Plain.class);
  }

  private static String deploymentFailure(Weld weld) {
    RuntimeException e = assertThrows(RuntimeException.class, () -> weld.initialize().close());
    StringBuilder all = new StringBuilder();
    for (Throwable t = e; t != null; t = t.getCause()) {
      all.append(t).append('\n');
    }
    return all.toString();
  }
}

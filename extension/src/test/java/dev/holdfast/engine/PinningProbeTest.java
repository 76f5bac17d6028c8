package dev.holdfast.engine;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.IOException;
import java.io.InputStream;
import java.lang.invoke.MethodHandle;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * Proves that the Java 25 suite's pinning check ({@code src/test/jfr/PinningCheck.java}, run by
 * {@code -Pjava25} after the tests) fails the build. Skipped unless asked, so it never pins in a
 * normal run:
 * <ul>
 *   <li>{@code -Dholdfast.pinningProbe=native}: a virtual thread blocks inside a class loader of
 *       this package that the JVM itself calls to resolve a class — a VM frame under the blocking
 *       call, which pins the carrier on every Java version (JEP 491 removed pinning by
 *       {@code synchronized}, not by native or VM frames). The check fails by default.</li>
 *   <li>{@code -Dholdfast.pinningProbe=init}: a virtual thread waits for the initializer of a
 *       class of this package that another virtual thread runs — a warm-up pin, which the check
 *       tolerates unless run strict ({@code -Djava25.pinning.strict=strict}).</li>
 * </ul>
 */
@Tag("concurrency")
class PinningProbeTest {
  private static final String PROBE = System.getProperty("holdfast.pinningProbe", "");

  @Test
  void virtualThreadBlockingUnderVmFrame_pinsItsCarrier_whenAsked() throws Throwable {
    assumeTrue(PROBE.equals("native"), "only with -Dholdfast.pinningProbe=native");
    ClassLoader loader = new BlockingLoader(PinningProbeTest.class.getClassLoader());
    Class<?> resolver = Class.forName(Resolver.class.getName(), true, loader);
    assertFalse(resolver == Resolver.class, "the resolver must come from the blocking loader");
    AtomicReference<Object> made = new AtomicReference<>();
    AtomicReference<Throwable> failure = new AtomicReference<>();
    Runnable task = () -> {
      try {
        made.set(resolver.getMethod("make").invoke(null));
      } catch (ReflectiveOperationException | RuntimeException e) {
        failure.set(e);
      }
    };
    join(task);
    assertEquals(null, failure.get());
    assertEquals(Target.class, made.get().getClass());
  }

  @Test
  void virtualThreadWaitingForClassInitializer_pinsItsCarrier_whenAsked() throws Throwable {
    assumeTrue(PROBE.equals("init"), "only with -Dholdfast.pinningProbe=init");
    Runnable task = SlowInitializer::touch;
    MethodHandle start = startVirtual();
    Thread first = (Thread) start.invokeExact(task);
    Thread second = (Thread) start.invokeExact(task);
    first.join(TimeUnit.SECONDS.toMillis(30));
    second.join(TimeUnit.SECONDS.toMillis(30));
    assertEquals(1, SlowInitializer.initialized);
  }

  private static void join(Runnable task) throws Throwable {
    Thread thread = (Thread) startVirtual().invokeExact(task);
    thread.join(TimeUnit.SECONDS.toMillis(30));
    assertFalse(thread.isAlive());
  }

  private static MethodHandle startVirtual() {
    MethodHandle start = VirtualThreadSmokeTest.startVirtualThread();
    assumeTrue(start != null, "virtual threads need Java 21+");
    return start;
  }

  /** Defines {@link Resolver} itself and sleeps 100 ms when the JVM asks it for {@link Target}. */
  static final class BlockingLoader extends ClassLoader {
    BlockingLoader(ClassLoader parent) {
      super(parent);
    }

    @Override
    public Class<?> loadClass(String name) throws ClassNotFoundException {
      if (name.equals(Target.class.getName())) {
        try {
          Thread.sleep(100); // blocks under the JVM's resolution of Resolver's reference
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
        }
      }
      if (name.equals(Resolver.class.getName())) {
        synchronized (getClassLoadingLock(name)) {
          Class<?> loaded = findLoadedClass(name);
          if (loaded != null) {
            return loaded;
          }
          String resource = name.replace('.', '/') + ".class";
          try (InputStream in = getParent().getResourceAsStream(resource)) {
            byte[] bytes = in.readAllBytes();
            return defineClass(name, bytes, 0, bytes.length);
          } catch (IOException e) {
            throw new ClassNotFoundException(name, e);
          }
        }
      }
      return super.loadClass(name);
    }
  }

  /** Defined by {@link BlockingLoader}: its first {@link #make()} makes the JVM resolve Target. */
  public static final class Resolver {
    /** Creates a Target. */
    public static Object make() {
      return new Target();
    }
  }

  /** What {@link Resolver} refers to. */
  public static final class Target {
    /** A plain object. */
    public Target() {
    }
  }

  /** Its initializer parks the thread that runs it for 100 ms. */
  static final class SlowInitializer {
    static int initialized;

    static {
      try {
        Thread.sleep(100);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
      initialized = 1;
    }

    static void touch() {
      // the first call runs the initializer
    }
  }
}

package dev.holdfast.engine;

import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.MethodType;
import java.util.concurrent.ThreadFactory;

/**
 * Thread factories for concurrency tests, which compile with {@code --release 17}: virtual
 * threads when the running JVM has them (Java 21+, found reflectively), else platform threads.
 */
final class TestThreads {
  private static final ThreadFactory VIRTUAL = virtualFactory();

  private TestThreads() {
  }

  /** Whether {@link #virtualIfAvailable()} makes virtual threads on this JVM. */
  static boolean virtualAvailable() {
    return VIRTUAL != null;
  }

  /** A factory of virtual threads on Java 21+, else of platform (daemon) threads. */
  static ThreadFactory virtualIfAvailable() {
    return VIRTUAL != null ? VIRTUAL : platform();
  }

  /** A factory of platform daemon threads with small stacks. */
  static ThreadFactory platform() {
    return r -> {
      Thread t = new Thread(null, r, "test-platform", 256 * 1024);
      t.setDaemon(true);
      return t;
    };
  }

  /** Starts a named platform daemon thread running {@code body}. */
  static Thread start(String name, Runnable body) {
    Thread t = new Thread(body, name);
    t.setDaemon(true);
    t.start();
    return t;
  }

  /** Whether {@code t} is in a frame of a method whose name contains {@code method}. */
  static boolean inFrame(Thread t, String method) {
    for (StackTraceElement e : t.getStackTrace()) {
      if ((e.getClassName() + "." + e.getMethodName()).contains(method)) {
        return true;
      }
    }
    return false;
  }

  /** {@code Thread.ofVirtual().factory()} through method handles, or null before Java 21. */
  private static ThreadFactory virtualFactory() {
    try {
      MethodHandles.Lookup lookup = MethodHandles.publicLookup();
      Class<?> builder = Class.forName("java.lang.Thread$Builder$OfVirtual");
      MethodHandle ofVirtual = lookup.findStatic(Thread.class, "ofVirtual",
          MethodType.methodType(builder));
      MethodHandle factory = lookup.findVirtual(Class.forName("java.lang.Thread$Builder"),
          "factory", MethodType.methodType(ThreadFactory.class));
      return (ThreadFactory) factory.invoke(ofVirtual.invoke());
    } catch (ClassNotFoundException | NoSuchMethodException e) {
      return null;
    } catch (Throwable e) {
      throw new IllegalStateException("Thread.ofVirtual() exists but failed", e);
    }
  }
}

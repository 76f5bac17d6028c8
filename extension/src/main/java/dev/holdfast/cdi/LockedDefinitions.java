package dev.holdfast.cdi;

import dev.holdfast.Locked;
import dev.holdfast.engine.ConfigValues;
import jakarta.interceptor.Interceptor;
import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.function.Function;

/**
 * The one place that decides whether a {@code @Locked} method is valid and what it means: used by
 * both extensions at deployment, and by {@link LockedOperations} to prepare every operation once.
 * Messages name the class, the method, the annotation member and the bad value.
 */
final class LockedDefinitions {

  static final String WAIT_TIME = "wait-time";
  static final String LEASE_TIME = "lease-time";

  private LockedDefinitions() {
  }

  /**
   * Problems of {@code target} as written in code: whether the container can intercept it, the
   * name template and the annotation's durations. Config overrides are checked by
   * {@link #prepare}.
   */
  static List<String> problems(LockedTarget t) {
    List<String> problems = new ArrayList<>();
    String origin = t.classLevel() ? "@Locked on class " + t.className() + " applies to "
        + t.where() + ", but " : "@Locked on " + t.where() + " has no effect: ";
    int m = t.modifiers();
    if (Modifier.isPrivate(m) && !t.classLevel()) {
      problems.add(origin + "private methods are not intercepted; make it non-private");
    }
    if (Modifier.isStatic(m) && !t.classLevel()) {
      problems.add(origin + "static methods are not intercepted; make it an instance method");
    }
    if (Modifier.isFinal(m) && !Modifier.isPrivate(m) && !Modifier.isStatic(m)) {
      problems.add(origin + "final methods are not intercepted; remove 'final'");
    }
    if (t.classFinal() && !t.classLevel()) {
      problems.add(origin + "the class is final, so it cannot be intercepted; remove 'final'");
    }
    try {
      template(t);
    } catch (IllegalArgumentException e) {
      problems.add(invalid(t, "value", t.value(), e.getMessage()));
    }
    try {
      waitTime(t.waitTime(), "@Locked.waitTime");
    } catch (IllegalArgumentException e) {
      problems.add(invalid(t, "waitTime", t.waitTime(), e.getMessage()));
    }
    try {
      leaseTime(t.leaseTime(), "@Locked.leaseTime");
    } catch (IllegalArgumentException e) {
      problems.add(invalid(t, "leaseTime", t.leaseTime(), e.getMessage()));
    }
    return problems;
  }

  /**
   * Prepares the operation, applying config overrides (method key, class key, global key, then
   * the annotation) to the wait and the lease; {@code fenced} is the annotation's: whether the
   * method receives a token is part of its code, not of its deployment.
   *
   * @throws IllegalArgumentException with a message naming the method, the member, the config key
   *     (or annotation member) the value came from, and the value
   */
  static LockedOperation prepare(LockedTarget t, Function<String, Optional<String>> config) {
    List<String> problems = problems(t);
    if (!problems.isEmpty()) {
      throw new IllegalArgumentException(String.join("; ", problems));
    }
    Map.Entry<String, String> wait = effective(t, WAIT_TIME, t.waitTime(), "@Locked.waitTime",
        config);
    Map.Entry<String, String> lease = effective(t, LEASE_TIME, t.leaseTime(),
        "@Locked.leaseTime", config);
    Duration waitTime;
    Duration leaseTime;
    try {
      waitTime = waitTime(wait.getValue(), wait.getKey());
    } catch (IllegalArgumentException e) {
      throw new IllegalArgumentException("Invalid configuration for @Locked.waitTime on "
          + t.where() + ": " + e.getMessage(), e);
    }
    try {
      leaseTime = leaseTime(lease.getValue(), lease.getKey());
    } catch (IllegalArgumentException e) {
      throw new IllegalArgumentException("Invalid configuration for @Locked.leaseTime on "
          + t.where() + ": " + e.getMessage(), e);
    }
    return new LockedOperation(t.where(), template(t), waitTime, leaseTime, t.fenced());
  }

  /**
   * Checks the value of an override key on its own, for keys no prepared method consulted.
   *
   * @param member {@link #WAIT_TIME} or {@link #LEASE_TIME}
   * @throws IllegalArgumentException naming the key and the value
   */
  static void checkOverride(String key, String member, String value) {
    if (member.equals(WAIT_TIME)) {
      waitTime(value, key);
    } else {
      leaseTime(value, key);
    }
  }

  /** The value in force and where it came from (a config key or the annotation member). */
  private static Map.Entry<String, String> effective(LockedTarget t, String member,
      String annotationValue, String annotationMember, Function<String, Optional<String>> config) {
    for (String key : List.of(t.methodKey(member), t.classKey(member),
        "holdfast.locked." + member)) {
      Optional<String> value = config.apply(key);
      if (value.isPresent()) {
        return Map.entry(key, value.get());
      }
    }
    return Map.entry(annotationMember, annotationValue);
  }

  private static LockNameTemplate template(LockedTarget t) {
    String source = t.value().isEmpty() ? t.className() + "." + t.methodName() : t.value();
    return LockNameTemplate.parse(source, t.parameterNames());
  }

  /** Null means "wait as long as it takes". */
  private static Duration waitTime(String value, String culprit) {
    if (value == null || value.isBlank()) {
      return null;
    }
    Duration d = ConfigValues.duration(culprit, value);
    if (d.isNegative()) {
      throw new IllegalArgumentException(culprit + "='" + value + "' must not be negative");
    }
    return d;
  }

  /** Null means "the watchdog". */
  private static Duration leaseTime(String value, String culprit) {
    if (value == null || value.isBlank()) {
      return null;
    }
    Duration d = ConfigValues.duration(culprit, value);
    if (d.isNegative() || d.isZero()) {
      throw new IllegalArgumentException(culprit + "='" + value + "' must be positive");
    }
    return d;
  }

  private static String invalid(LockedTarget t, String member, String value, String why) {
    return "Invalid @Locked." + member + " = \"" + value + "\" on " + t.where() + ": " + why;
  }

  /**
   * Every {@code @Locked} method of a bean class, keyed by the {@link Method} the container passes
   * to the interceptor, with the annotation in force (the method's, else the bean class's), by
   * reflection. Inherited methods are included: two bean classes that inherit one method from a
   * common base get a target each, with their own class-level annotation. Methods the container
   * never intercepts anyway (private, static, {@code Object}'s) are included only when annotated
   * themselves, so that they are reported. An interceptor has none: {@code @Locked} on an
   * interceptor class binds it, and interceptors are not intercepted.
   */
  static Map<Method, LockedTarget> targets(Class<?> beanClass) {
    Map<Method, LockedTarget> targets = new LinkedHashMap<>();
    if (beanClass.isAnnotationPresent(Interceptor.class)) {
      return targets;
    }
    Locked onClass = beanClass.getAnnotation(Locked.class);
    for (Class<?> c = beanClass; c != null && c != Object.class; c = c.getSuperclass()) {
      for (Method m : c.getDeclaredMethods()) {
        if (!m.isSynthetic() && !m.isBridge() && !overridden(beanClass, c, m)) {
          addTarget(targets, beanClass, onClass, m);
        }
      }
    }
    // Default methods the class hierarchy does not implement (getMethods() leaves out those it
    // overrides): the container intercepts them like the class's own.
    for (Method m : beanClass.getMethods()) {
      if (m.isDefault() && !m.isSynthetic() && !m.isBridge()) {
        addTarget(targets, beanClass, onClass, m);
      }
    }
    return targets;
  }

  private static void addTarget(Map<Method, LockedTarget> targets, Class<?> beanClass,
      Locked onClass, Method m) {
    Locked own = m.getAnnotation(Locked.class);
    if (own != null) {
      targets.put(m, LockedTarget.of(beanClass, m, own, false));
    } else if (onClass != null && isBusinessMethod(m)) {
      targets.put(m, LockedTarget.of(beanClass, m, onClass, true));
    }
  }

  private static boolean isBusinessMethod(Method m) {
    int mod = m.getModifiers();
    return !Modifier.isPrivate(mod) && !Modifier.isStatic(mod);
  }

  /** Whether a subclass between beanClass and declaring redeclares m (it is checked there). */
  private static boolean overridden(Class<?> beanClass, Class<?> declaring, Method m) {
    for (Class<?> c = beanClass; c != declaring; c = c.getSuperclass()) {
      try {
        c.getDeclaredMethod(m.getName(), m.getParameterTypes());
        return true;
      } catch (NoSuchMethodException e) {
        // keep looking
      }
    }
    return false;
  }
}

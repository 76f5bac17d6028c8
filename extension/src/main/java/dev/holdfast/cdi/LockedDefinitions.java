package dev.holdfast.cdi;

import dev.holdfast.Locked;
import dev.holdfast.engine.ConfigValues;
import jakarta.interceptor.Interceptor;
import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.function.Function;
import java.util.function.Supplier;

/**
 * The one place that decides whether a {@code @Locked} method is valid and what it means: used by
 * both extensions at deployment, and by {@link LockedOperations} to prepare every operation once.
 * Messages name the class, the method, the annotation member and the bad value.
 */
final class LockedDefinitions {

  static final String WAIT_TIME = "wait-time";
  static final String LEASE_TIME = "lease-time";
  static final String MODE = "mode";
  static final String SKIP_IF_BUSY = "skip-if-busy";
  static final String HOLD_AT_LEAST = "hold-at-least";
  static final String ON_LOSS = "on-loss";
  /** Not an annotation member: how the commit guard checks the hold ({@code local|redis}). */
  static final String VERIFY_BEFORE_COMMIT = "verify-before-commit";
  /** The members a configuration key can override, as they end the key. */
  static final List<String> CONFIGURABLE = List.of(WAIT_TIME, LEASE_TIME, MODE, SKIP_IF_BUSY,
      HOLD_AT_LEAST, ON_LOSS, VERIFY_BEFORE_COMMIT);

  private LockedDefinitions() {
  }

  /**
   * Problems of {@code target} as written in code: whether the container can intercept it, the
   * name template, the annotation's durations and the members that exclude each other. Config
   * overrides are checked by {@link #prepare}.
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
    String unsupported = LockedReturn.problem(t.returnTypes());
    if (unsupported != null) {
      problems.add((t.classLevel() ? origin : "@Locked on " + t.where() + " cannot work: ")
          + unsupported);
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
    Duration lease = null;
    try {
      lease = leaseTime(t.leaseTime(), "@Locked.leaseTime");
    } catch (IllegalArgumentException e) {
      problems.add(invalid(t, "leaseTime", t.leaseTime(), e.getMessage()));
    }
    Duration holdAtLeast = null;
    try {
      holdAtLeast = holdAtLeast(t.holdAtLeast(), "@Locked.holdAtLeast");
    } catch (IllegalArgumentException e) {
      problems.add(invalid(t, "holdAtLeast", t.holdAtLeast(), e.getMessage()));
    }
    String annotated = t.classLevel() ? " on class " + t.className() + ", which applies to "
        + t.where() : " on " + t.where();
    conflicts(t, annotated, Map.entry("@Locked.mode", t.mode().name()), t.mode(),
        Map.entry("@Locked.skipIfBusy", String.valueOf(t.skipIfBusy())), t.skipIfBusy(),
        Map.entry("@Locked.leaseTime", t.leaseTime()), lease,
        Map.entry("@Locked.holdAtLeast", t.holdAtLeast()), holdAtLeast,
        Map.entry("@Locked.onLoss", t.onLoss().name()), t.onLoss(), problems);
    return problems;
  }

  /**
   * Appends the problems of members that exclude each other: {@code skipIfBusy} on a method
   * that returns something, {@code fenced} with a mode other than {@code EXCLUSIVE}, a lease
   * shorter than {@code holdAtLeast}. Each value comes with where it came from (an annotation
   * member or a config key), which the message names.
   */
  private static void conflicts(LockedTarget t, String annotated,
      Map.Entry<String, String> modeSource, Locked.Mode mode,
      Map.Entry<String, String> skipSource, boolean skipIfBusy,
      Map.Entry<String, String> leaseSource, Duration lease,
      Map.Entry<String, String> holdSource, Duration holdAtLeast,
      Map.Entry<String, String> onLossSource, Locked.OnLoss onLoss, List<String> problems) {
    if (skipIfBusy && !t.skippable()) {
      problems.add("Invalid " + said(skipSource) + annotated + ": only a void method can be "
          + "skipped (a skipped call does not run the method and has no result to return), or one "
          + "returning a CompletionStage, CompletableFuture or Uni (which then completes with "
          + "null), but it returns " + t.returnType() + "; make it void or remove skipIfBusy");
    }
    if (t.fenced() && mode != Locked.Mode.EXCLUSIVE) {
      problems.add("Invalid @Locked.fenced = true with " + said(modeSource) + annotated
          + ": fencing tokens exist only for the EXCLUSIVE lock; remove fenced or use mode "
          + "EXCLUSIVE");
    }
    if (lease != null && holdAtLeast != null && lease.compareTo(holdAtLeast) < 0) {
      problems.add("Invalid " + said(holdSource) + " with " + said(leaseSource) + annotated
          + ": the lease ends the hold before the minimum; make leaseTime at least holdAtLeast "
          + "or leave it empty (the watchdog)");
    }
    boolean async = t.returns() != LockedReturn.SYNC;
    if (onLoss == Locked.OnLoss.INTERRUPT && async) {
      problems.add("Invalid " + said(onLossSource) + annotated + ": INTERRUPT stops the thread "
          + "that runs a blocking method, but this method is asynchronous (it returns "
          + t.returnType() + " and its work runs on other threads); use CANCEL");
    } else if (onLoss == Locked.OnLoss.CANCEL && !async) {
      problems.add("Invalid " + said(onLossSource) + annotated + ": CANCEL cancels the result "
          + "of an asynchronous method (CompletionStage, CompletableFuture, Uni), but this method "
          + "is blocking (it returns " + t.returnType() + "); use INTERRUPT");
    }
  }

  /**
   * A value and where it came from, as in the other messages: {@code @Locked.leaseTime = "10s"},
   * {@code @Locked.mode = READ} or {@code holdfast.locked.lease-time='10s'}.
   */
  private static String said(Map.Entry<String, String> source) {
    String from = source.getKey();
    if (!from.startsWith("@")) {
      return from + "='" + source.getValue() + "'";
    }
    boolean text = from.endsWith("Time") || from.endsWith("holdAtLeast");
    return from + " = " + (text ? "\"" + source.getValue() + "\"" : source.getValue());
  }

  /**
   * Prepares the operation, applying config overrides (method key, class key, global key, then
   * the annotation) to every member but {@code value} and {@code fenced}: the name and whether
   * the method receives a token are part of its code, not of its deployment.
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
    Map.Entry<String, String> mode = effective(t, MODE, t.mode().name(), "@Locked.mode", config);
    Map.Entry<String, String> skip = effective(t, SKIP_IF_BUSY, String.valueOf(t.skipIfBusy()),
        "@Locked.skipIfBusy", config);
    Map.Entry<String, String> hold = effective(t, HOLD_AT_LEAST, t.holdAtLeast(),
        "@Locked.holdAtLeast", config);
    Map.Entry<String, String> loss = effective(t, ON_LOSS, t.onLoss().name(), "@Locked.onLoss",
        config);
    Map.Entry<String, String> verify = effective(t, VERIFY_BEFORE_COMMIT, "local", "default",
        config);
    Duration waitTime = parse(t, "waitTime", () -> waitTime(wait.getValue(), wait.getKey()));
    Duration leaseTime = parse(t, "leaseTime", () -> leaseTime(lease.getValue(), lease.getKey()));
    Locked.Mode lockMode = parse(t, "mode", () -> mode(mode.getValue(), mode.getKey()));
    boolean skipIfBusy = parse(t, "skipIfBusy", () -> bool(skip.getValue(), skip.getKey()));
    Duration holdAtLeast = parse(t, "holdAtLeast",
        () -> holdAtLeast(hold.getValue(), hold.getKey()));
    Locked.OnLoss onLoss = parse(t, "onLoss", () -> onLoss(loss.getValue(), loss.getKey()));
    boolean verifyInRedis = parse(t, "the check before commit",
        () -> verifyInRedis(verify.getValue(), verify.getKey()));
    List<String> conflicts = new ArrayList<>();
    conflicts(t, " on " + t.where(), mode, lockMode, skip, skipIfBusy, lease, leaseTime, hold,
        holdAtLeast, loss, onLoss, conflicts);
    if (!conflicts.isEmpty()) {
      throw new IllegalArgumentException(String.join("; ", conflicts));
    }
    if (skipIfBusy && waitTime == null) {
      waitTime = Duration.ZERO; // a job that is busy elsewhere is skipped, not queued
    }
    return new LockedOperation(t.where(), template(t), waitTime, leaseTime, t.fenced(), lockMode,
        skipIfBusy, holdAtLeast, t.returns(), onLoss, verifyInRedis);
  }

  private static <T> T parse(LockedTarget t, String member, Supplier<T> parser) {
    try {
      return parser.get();
    } catch (IllegalArgumentException e) {
      throw new IllegalArgumentException("Invalid configuration for "
          + (member.contains(" ") ? member : "@Locked." + member) + " on "
          + t.where() + ": " + e.getMessage(), e);
    }
  }

  /**
   * Checks the value of an override key on its own, for keys no prepared method consulted.
   *
   * @param member one of {@link #CONFIGURABLE}
   * @throws IllegalArgumentException naming the key and the value
   */
  static void checkOverride(String key, String member, String value) {
    switch (member) {
      case WAIT_TIME -> waitTime(value, key);
      case LEASE_TIME -> leaseTime(value, key);
      case MODE -> mode(value, key);
      case SKIP_IF_BUSY -> bool(value, key);
      case HOLD_AT_LEAST -> holdAtLeast(value, key);
      case ON_LOSS -> onLoss(value, key);
      case VERIFY_BEFORE_COMMIT -> verifyInRedis(value, key);
      default -> throw new IllegalArgumentException("Unknown configuration key '" + key + "'");
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

  private static Locked.Mode mode(String value, String culprit) {
    try {
      return Locked.Mode.valueOf(value.trim().toUpperCase(Locale.ROOT));
    } catch (IllegalArgumentException e) {
      throw new IllegalArgumentException(culprit + "='" + value + "' is not a mode: use one of "
          + Arrays.toString(Locked.Mode.values()));
    }
  }

  private static Locked.OnLoss onLoss(String value, String culprit) {
    try {
      return Locked.OnLoss.valueOf(value.trim().toUpperCase(Locale.ROOT));
    } catch (IllegalArgumentException e) {
      throw new IllegalArgumentException(culprit + "='" + value + "' is not what a loss does: "
          + "use one of nothing, interrupt, cancel");
    }
  }

  /** {@code redis} (true) or {@code local} (false), any case. */
  private static boolean verifyInRedis(String value, String culprit) {
    String v = value.trim();
    if (v.equalsIgnoreCase("redis") || v.equalsIgnoreCase("local")) {
      return v.equalsIgnoreCase("redis");
    }
    throw new IllegalArgumentException(culprit + "='" + value + "' is not a check before "
        + "commit: use local or redis");
  }

  private static boolean bool(String value, String culprit) {
    String v = value.trim();
    if (v.equalsIgnoreCase("true") || v.equalsIgnoreCase("false")) {
      return Boolean.parseBoolean(v);
    }
    throw new IllegalArgumentException(culprit + "='" + value + "' must be true or false");
  }

  /** Null means "no minimum": released when the method returns; so does {@code 0s}. */
  private static Duration holdAtLeast(String value, String culprit) {
    if (value == null || value.isBlank()) {
      return null;
    }
    Duration d = ConfigValues.duration(culprit, value);
    if (d.isNegative()) {
      throw new IllegalArgumentException(culprit + "='" + value + "' must not be negative");
    }
    return d.isZero() ? null : d;
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

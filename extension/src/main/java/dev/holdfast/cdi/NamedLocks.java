package dev.holdfast.cdi;

import dev.holdfast.DistributedLock;
import dev.holdfast.FencedLock;
import dev.holdfast.LockClient;
import jakarta.enterprise.inject.Instance;
import jakarta.enterprise.inject.build.compatible.spi.Parameters;
import jakarta.enterprise.inject.build.compatible.spi.SyntheticBeanCreator;
import java.util.concurrent.locks.Lock;

/**
 * {@code @Named} lock injection points: which types count, how a name is resolved, and how the
 * build-compatible extension's synthetic beans create their lock.
 *
 * <p>A name gets up to two {@code @Dependent} beans with the qualifier {@code @Named("<name>")}:
 * a plain handle with the types {@code DistributedLock} and {@code Lock} if some injection point
 * asks for one of those, and a fenced handle with the type {@code FencedLock} if one asks for that.
 * Their types do not overlap, so every injection point resolves to exactly one; both handles are
 * the same lock in Redis. (The beans have no bean name: {@code @Named} is only their qualifier.)
 */
final class NamedLocks {
  static final String NAME_PARAM = "name";
  static final String FENCED_PARAM = "fenced";

  private NamedLocks() {
  }

  /** Whether an injection point of this type asks for a named lock. */
  static boolean isLockType(String typeName) {
    return typeName.equals(DistributedLock.class.getName()) || typeName.equals(Lock.class.getName())
        || isFencedType(typeName);
  }

  /** Whether an injection point of this type asks for a fenced handle. */
  static boolean isFencedType(String typeName) {
    return typeName.equals(FencedLock.class.getName());
  }

  /** The bean types of a name's fenced or plain bean. */
  static Class<?>[] beanTypes(boolean fenced) {
    return fenced ? new Class<?>[] {FencedLock.class}
        : new Class<?>[] {DistributedLock.class, Lock.class};
  }

  /** The handle a name's bean returns. */
  static DistributedLock create(LockClient client, String name, boolean fenced) {
    return fenced ? client.getFencedLock(name) : client.getLock(name);
  }

  /**
   * The lock name for an injection point qualified {@code @Named(value)}.
   *
   * @param fieldName the field's name, or {@code null} for a parameter
   * @param where     the injection point, for the message
   * @throws IllegalArgumentException if no usable name results
   */
  static String resolve(String value, String fieldName, String where) {
    if (value != null && !value.isBlank()) {
      return value;
    }
    if (fieldName != null) {
      return fieldName;
    }
    throw new IllegalArgumentException("@Named lock injection point " + where
        + " has no name: @Named without a value means the field name only on fields; "
        + "write @Named(\"<lock name>\")");
  }

  /** Creates the lock of a synthetic {@code @Named} bean (CDI Lite). */
  public static final class Creator implements SyntheticBeanCreator<DistributedLock> {
    /** For the container. */
    public Creator() {
    }

    @Override
    public DistributedLock create(Instance<Object> lookup, Parameters params) {
      return NamedLocks.create(lookup.select(LockClient.class).get(),
          params.get(NAME_PARAM, String.class), params.get(FENCED_PARAM, Boolean.class, false));
    }
  }
}

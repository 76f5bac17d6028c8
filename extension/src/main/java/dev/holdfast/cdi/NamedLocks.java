package dev.holdfast.cdi;

import dev.holdfast.DistributedLock;
import dev.holdfast.LockClient;
import jakarta.enterprise.inject.Instance;
import jakarta.enterprise.inject.build.compatible.spi.Parameters;
import jakarta.enterprise.inject.build.compatible.spi.SyntheticBeanCreator;
import java.util.concurrent.locks.Lock;

/**
 * {@code @Named} lock injection points: which types count, how a name is resolved, and how the
 * build-compatible extension's synthetic beans create their lock.
 */
final class NamedLocks {
  static final String NAME_PARAM = "name";

  private NamedLocks() {
  }

  /** Whether an injection point of this type asks for a named lock. */
  static boolean isLockType(String typeName) {
    return typeName.equals(DistributedLock.class.getName()) || typeName.equals(Lock.class.getName());
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
      return lookup.select(LockClient.class).get().getLock(params.get(NAME_PARAM, String.class));
    }
  }
}

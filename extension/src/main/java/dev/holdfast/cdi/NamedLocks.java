package dev.holdfast.cdi;

import dev.holdfast.DistributedLock;
import dev.holdfast.DistributedReadWriteLock;
import dev.holdfast.Fair;
import dev.holdfast.FencedLock;
import dev.holdfast.LockClient;
import jakarta.enterprise.inject.Instance;
import jakarta.enterprise.util.AnnotationLiteral;
import jakarta.enterprise.inject.build.compatible.spi.Parameters;
import jakarta.enterprise.inject.build.compatible.spi.SyntheticBeanCreator;
import java.util.concurrent.locks.Lock;
import java.util.concurrent.locks.ReadWriteLock;

/**
 * {@code @Named} lock injection points: which types count, how a name is resolved, and how the
 * build-compatible extension's synthetic beans create their lock.
 *
 * <p>A name gets up to four {@code @Dependent} beans, one per {@link Kind} some injection point
 * asks for, each with the qualifier {@code @Named("<name>")}: a plain handle with the types
 * {@code DistributedLock} and {@code Lock}; a fenced handle with the type {@code FencedLock}; a
 * read-write lock with the types {@code DistributedReadWriteLock} and {@code ReadWriteLock}; and
 * the fair lock, with the plain handle's types and also the qualifier {@link Fair @Fair}. The
 * plain and fenced handles are the same lock in Redis; the fair and read-write locks are those
 * of {@link LockClient#getFairLock} and {@link LockClient#getReadWriteLock}.
 *
 * <p>Every injection point resolves to exactly one bean. The types of the plain, fenced and
 * read-write beans do not overlap. A plain injection point ({@code @Named("x") DistributedLock})
 * also matches the fair bean, which has every qualifier it asks for; so when a name has both, its
 * plain bean is an alternative (with {@link #PLAIN_PRIORITY}), which CDI prefers to the fair bean
 * there, while a {@code @Fair} injection point matches only the fair bean. (The beans have no
 * bean name: {@code @Named} is only their qualifier.)
 */
final class NamedLocks {
  static final String NAME_PARAM = "name";
  static final String KIND_PARAM = "kind";
  /** The plain bean's priority when it must win over the fair bean of its name. */
  static final int PLAIN_PRIORITY = 1;

  /** The kinds of {@code @Named} lock bean. */
  enum Kind {
    PLAIN(DistributedLock.class, Lock.class),
    FENCED(FencedLock.class),
    FAIR(DistributedLock.class, Lock.class),
    READ_WRITE(DistributedReadWriteLock.class, ReadWriteLock.class);

    private final Class<?>[] types;

    Kind(Class<?>... types) {
      this.types = types;
    }

    /** The bean's types (besides {@code Object}). */
    Class<?>[] beanTypes() {
      return types.clone();
    }
  }

  /** {@code @Fair}, for synthetic beans. */
  @SuppressWarnings("all") // an annotation literal implements the annotation interface
  static final class FairLiteral extends AnnotationLiteral<Fair> implements Fair {
    static final FairLiteral INSTANCE = new FairLiteral();
    private static final long serialVersionUID = 1L;
  }

  private NamedLocks() {
  }

  /** Whether an injection point of this type asks for a named lock. */
  static boolean isLockType(String typeName) {
    return typeName.equals(DistributedLock.class.getName()) || typeName.equals(Lock.class.getName())
        || typeName.equals(FencedLock.class.getName())
        || typeName.equals(DistributedReadWriteLock.class.getName())
        || typeName.equals(ReadWriteLock.class.getName());
  }

  /**
   * The kind of bean an injection point of a lock type asks for.
   *
   * @param fair  whether it is qualified {@code @Fair}
   * @param where the injection point, for the message
   * @throws IllegalArgumentException if {@code @Fair} is on a type a fair lock does not have
   */
  static Kind kind(String typeName, boolean fair, String where) {
    if (fair) {
      if (typeName.equals(DistributedLock.class.getName())
          || typeName.equals(Lock.class.getName())) {
        return Kind.FAIR;
      }
      throw new IllegalArgumentException("@Fair lock injection point " + where + " has type "
          + typeName + ": a fair lock is injected as DistributedLock or Lock (it has no "
          + "fencing tokens and no read-write sides)");
    }
    if (typeName.equals(FencedLock.class.getName())) {
      return Kind.FENCED;
    }
    if (typeName.equals(DistributedReadWriteLock.class.getName())
        || typeName.equals(ReadWriteLock.class.getName())) {
      return Kind.READ_WRITE;
    }
    return Kind.PLAIN;
  }

  /** The handle a name's bean returns. */
  static Object create(LockClient client, String name, Kind kind) {
    return switch (kind) {
      case PLAIN -> client.getLock(name);
      case FENCED -> client.getFencedLock(name);
      case FAIR -> client.getFairLock(name);
      case READ_WRITE -> client.getReadWriteLock(name);
    };
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

  /** Creates the lock of a synthetic {@code @Named} bean (CDI Lite), except read-write ones. */
  public static final class Creator implements SyntheticBeanCreator<DistributedLock> {
    /** For the container. */
    public Creator() {
    }

    @Override
    public DistributedLock create(Instance<Object> lookup, Parameters params) {
      return (DistributedLock) NamedLocks.create(lookup.select(LockClient.class).get(),
          params.get(NAME_PARAM, String.class), Kind.valueOf(params.get(KIND_PARAM, String.class)));
    }
  }

  /** Creates the read-write lock of a synthetic {@code @Named} bean (CDI Lite). */
  public static final class ReadWriteCreator
      implements SyntheticBeanCreator<DistributedReadWriteLock> {
    /** For the container. */
    public ReadWriteCreator() {
    }

    @Override
    public DistributedReadWriteLock create(Instance<Object> lookup, Parameters params) {
      return lookup.select(LockClient.class).get()
          .getReadWriteLock(params.get(NAME_PARAM, String.class));
    }
  }
}

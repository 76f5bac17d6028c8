package dev.holdfast.cdi;

import java.util.ArrayDeque;
import java.util.Deque;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;

/**
 * What a {@code @Locked} method's declared return type means for its lock, decided by class name
 * so that no optional API (Mutiny, Reactive Streams) is needed to decide it: the method's work is
 * done when it returns ({@link #SYNC}), or when the stage or {@code Uni} it returns completes.
 * Types whose end Holdfast cannot follow are {@link #problem problems} at deployment.
 */
enum LockedReturn {
  /** Anything else: the work is done when the method returns. */
  SYNC,
  /** Declared {@code CompletionStage}: a {@code CompletableFuture} is returned in its place. */
  STAGE,
  /** Declared {@code CompletableFuture}: one of Holdfast's is returned in its place. */
  FUTURE,
  /** Declared Mutiny {@code Uni}: a {@code Uni} that takes the lock at each subscription. */
  UNI;

  static final String COMPLETION_STAGE = "java.util.concurrent.CompletionStage";
  static final String COMPLETABLE_FUTURE = "java.util.concurrent.CompletableFuture";
  static final String UNI_TYPE = "io.smallrye.mutiny.Uni";
  /** Streams: many items and no single end at which the lock could be released. */
  private static final List<String> STREAMS = List.of("io.smallrye.mutiny.Multi",
      "org.reactivestreams.Publisher", "java.util.concurrent.Flow.Publisher");

  /**
   * The kind of a method whose return type is {@code names.get(0)} and whose other names are its
   * supertypes; {@link #SYNC} for a type with a {@link #problem}.
   */
  static LockedReturn of(List<String> names) {
    String declared = names.isEmpty() ? "void" : canonical(names.get(0));
    return switch (declared) {
      case COMPLETION_STAGE -> STAGE;
      case COMPLETABLE_FUTURE -> FUTURE;
      case UNI_TYPE -> UNI;
      default -> SYNC;
    };
  }

  /**
   * Why a method returning {@code names.get(0)} (supertypes after it) cannot be {@code @Locked},
   * or {@code null} if it can.
   */
  static String problem(List<String> names) {
    if (names.isEmpty()) {
      return null;
    }
    Set<String> all = new LinkedHashSet<>();
    names.forEach(n -> all.add(canonical(n)));
    String declared = canonical(names.get(0));
    for (String stream : STREAMS) {
      if (all.contains(stream)) {
        return "it returns " + declared + ", a stream of items (" + stream + ") with no single end"
            + " at which the lock could be released; return a Uni or a CompletionStage, or lock"
            + " each item's work in a @Locked method of its own";
      }
    }
    if (of(names) == SYNC && (all.contains(COMPLETION_STAGE) || all.contains(UNI_TYPE))) {
      return "it returns " + declared + ", an asynchronous result Holdfast cannot hand back in "
          + "its place; declare CompletionStage, CompletableFuture or Uni";
    }
    return null;
  }

  /** {@code java.util.concurrent.Flow$Publisher} (a binary name) as a canonical name. */
  private static String canonical(String name) {
    return name.replace('$', '.');
  }

  /** {@code type}'s name, then the names of all its supertypes, by reflection. */
  static List<String> namesOf(Class<?> type) {
    Set<String> names = new LinkedHashSet<>();
    Deque<Class<?>> todo = new ArrayDeque<>();
    todo.add(type);
    while (!todo.isEmpty()) {
      Class<?> c = todo.poll();
      if (names.add(c.getName())) {
        if (c.getSuperclass() != null) {
          todo.add(c.getSuperclass());
        }
        todo.addAll(List.of(c.getInterfaces()));
      }
    }
    return List.copyOf(names);
  }
}

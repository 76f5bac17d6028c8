package dev.holdfast.engine;

import java.lang.ref.WeakReference;
import java.util.List;
import java.util.Map;

/**
 * A value a thread keeps about itself in stores that every thread shares (what a composite's
 * failed unlock() still owes, the sections a RedLock has open): only that thread reads or writes
 * it. A record whose thread has ended can never be used again; each store drops such records when
 * the next one is kept in it, so a store holds about one record per live thread that left one.
 *
 * @param value what the thread keeps
 * @param thread the thread, weakly: the record does not keep it alive
 * @param <T> the kind of value
 */
record ThreadRecord<T>(T value, WeakReference<Thread> thread) {

  /** {@return a record of {@code value} for the calling thread} */
  static <T> ThreadRecord<T> ofCurrentThread(T value) {
    return new ThreadRecord<>(value, new WeakReference<>(Thread.currentThread()));
  }

  /** {@return whether the record's thread has ended (or been collected)} */
  boolean threadEnded() {
    Thread t = thread.get();
    return t == null || !t.isAlive();
  }

  /**
   * Puts {@code record} under {@code key} in each store, dropping first the records there whose
   * thread has ended.
   */
  static <K, T> void keep(List<? extends Map<K, ThreadRecord<T>>> stores, K key,
      ThreadRecord<T> record) {
    for (Map<K, ThreadRecord<T>> store : stores) {
      store.values().removeIf(ThreadRecord::threadEnded);
      store.put(key, record);
    }
  }

  /** {@return the value under {@code key} in the first store that has one, or null} */
  static <K, T> T find(List<? extends Map<K, ThreadRecord<T>>> stores, K key) {
    for (Map<K, ThreadRecord<T>> store : stores) {
      ThreadRecord<T> r = store.get(key);
      if (r != null) {
        return r.value();
      }
    }
    return null;
  }

  /** {@return the value removed from every store under {@code key} (the first found), or null} */
  static <K, T> T take(List<? extends Map<K, ThreadRecord<T>>> stores, K key) {
    T found = null;
    for (Map<K, ThreadRecord<T>> store : stores) {
      ThreadRecord<T> r = store.remove(key);
      if (found == null && r != null) {
        found = r.value();
      }
    }
    return found;
  }
}

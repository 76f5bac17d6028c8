package dev.holdfast.testing;

import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * Detects two threads inside a section that a lock should make exclusive: every {@link #enter()}
 * that finds another thread already inside counts as an overlap. Thread-safe.
 */
public final class ExclusionProbe {
  private final AtomicBoolean inside = new AtomicBoolean();
  private final AtomicInteger overlaps = new AtomicInteger();

  /** Call first thing inside the section. */
  public void enter() {
    if (!inside.compareAndSet(false, true)) {
      overlaps.incrementAndGet();
    }
  }

  /** Call last thing inside the section (in {@code finally}). */
  public void exit() {
    inside.set(false);
  }

  /** How many times a thread entered while another was inside. */
  public int overlaps() {
    return overlaps.get();
  }

  /** Forgets past overlaps. */
  public void reset() {
    overlaps.set(0);
    inside.set(false);
  }
}

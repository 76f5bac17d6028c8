package dev.holdfast.benchmarks;

/** An implementation measured by {@link SideBySideBenchmark}. */
enum Impl {
  /** Holdfast's {@code LockClient}. */
  HOLDFAST("Holdfast"),
  /** Redisson 4.7's {@code RLock}. */
  REDISSON("Redisson"),
  /**
   * The protocol floor: the classic acquire and release scripts sent with raw Jedis
   * {@code EVALSHA} on a connection of the calling thread — no pool, no watchdog, no bookkeeping.
   * What any client speaking this protocol needs at least.
   */
  FLOOR("protocol floor");

  private final String label;

  Impl(String label) {
    this.label = label;
  }

  String label() {
    return label;
  }
}

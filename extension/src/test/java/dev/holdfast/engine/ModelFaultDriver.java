package dev.holdfast.engine;

import java.util.Map;

/**
 * What disturbs a {@link LockModelTest} run: a thread that plays a schedule fixed by the seed and
 * records every fault as a {@code FAULT} event with when it was active.
 */
interface ModelFaultDriver {

  void start();

  /** Stops the schedule, undoes what is in progress and brings every server back; returns then. */
  void stopAndHeal() throws InterruptedException;

  /** How many faults of each kind were injected. */
  Map<String, Integer> injectedCounts();
}

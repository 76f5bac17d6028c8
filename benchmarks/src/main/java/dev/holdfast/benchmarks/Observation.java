package dev.holdfast.benchmarks;

import dev.holdfast.LockClientConfig;
import jdk.jfr.Recording;

/** What observes the locks in one {@link ObservationBenchmark} mode. */
final class Observation {

  private Observation() {
  }

  /** Starts observing as {@code mode} says; closing the result stops it. */
  static AutoCloseable start(String mode, LockClientConfig.Builder config) {
    switch (mode) {
      case "plain":
        return () -> { };
      case "jfr": {
        Recording recording = new Recording();
        for (String event : new String[] {"LockWait", "LockHeld", "LockLost",
            "LockRenewalFailed"}) {
          recording.enable("dev.holdfast." + event).withoutThreshold();
        }
        recording.setToDisk(false);
        recording.start();
        return recording::close;
      }
      default:
        throw new IllegalArgumentException("Unknown mode " + mode
            + ": plain, jfr or micrometer (with -Pbench,micrometer)");
    }
  }
}

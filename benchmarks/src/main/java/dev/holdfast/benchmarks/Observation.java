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
      case "jfr":
      case "jfr-all": {
        Recording recording = new Recording();
        for (String event : new String[] {"LockWait", "LockHeld", "LockLost",
            "LockRenewalFailed"}) {
          var settings = recording.enable("dev.holdfast." + event); // threshold: 10 ms
          if (mode.equals("jfr-all")) {
            settings.withoutThreshold(); // every call written, with its stack trace
          }
        }
        recording.setToDisk(false);
        recording.start();
        return recording::close;
      }
      case "micrometer":
        config.meterRegistry(new io.micrometer.core.instrument.simple.SimpleMeterRegistry());
        return () -> { };
      default:
        throw new IllegalArgumentException(
            "Unknown mode " + mode + ": plain, jfr, jfr-all or micrometer");
    }
  }
}

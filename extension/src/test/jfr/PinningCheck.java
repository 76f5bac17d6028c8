import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import jdk.jfr.EventType;
import jdk.jfr.consumer.RecordedEvent;
import jdk.jfr.consumer.RecordedFrame;
import jdk.jfr.consumer.RecordedStackTrace;
import jdk.jfr.consumer.RecordingFile;

/**
 * The check after the Java 25 concurrency suite ({@code -Pjava25} in extension/pom.xml), run with
 * the JDK's source launcher: {@code java PinningCheck.java RECORDING [PACKAGE_PREFIX [strict]]}.
 *
 * <p>Fails (exit status 1) when the JFR recording of the suite
 * <ul>
 *   <li>is missing (the suite did not run, or its JVM did not dump the recording);</li>
 *   <li>did not record {@code jdk.VirtualThreadPinned} with threshold 0 (the profile's settings
 *       did not apply, so the absence of events would prove nothing);</li>
 *   <li>saw no virtual thread start (the suite ran without virtual threads);</li>
 *   <li>has a {@code jdk.VirtualThreadPinned} event with a frame of a class under the prefix
 *       (default {@code dev.holdfast.}) in its stack: a virtual thread pinned by Holdfast — or by
 *       one of its tests, which must not pin either. Each such stack is printed.</li>
 * </ul>
 * Except <em>warm-up pins</em>: a virtual thread that waits while the JVM initializes a class
 * another thread is initializing ({@code pinnedReason} "Waited for initialization of ..."), that
 * blocks in the static initializer of a JDK class (not one under the prefix: a Holdfast class
 * initializer that blocks fails the check), or
 * that blocks inside the JDK's own class loading or call-site linking (a frame of
 * {@code java.lang.ClassLoader.loadClass}, {@code jdk.internal.loader.*} or
 * {@code java.lang.invoke.MethodHandleNatives.link*} above the first frame under the prefix).
 * Each happens once per class and JVM, when the first virtual threads use a class at the same
 * time, and says nothing about Holdfast's design. Also tolerated: a pin whose reason is that the
 * JDK was inside one of its own critical sections ({@code "Freeze or preempt failed (2)"}, code 2 is
 * {@code jdk.internal.vm.Continuation.Pinned.CRITICAL_SECTION}): only JDK-internal code can enter
 * one ({@code Continuation.pin()} is not exported), so no frame of Holdfast's can cause it — seen
 * once as a 59 µs contended monitor enter under the socket poller's start-up. They are listed,
 * counted, and fail the check only with {@code strict} as third argument.
 * {@code java PinningCheck.java --clear RECORDING} deletes a recording left by an earlier run, so
 * that a stale file cannot pass for this run's.
 */
public final class PinningCheck {
  private static final String PINNED = "jdk.VirtualThreadPinned";
  private static final String STARTED = "jdk.VirtualThreadStart";
  /** The JVM's freeze result for "pinned by a JDK-internal critical section". */
  private static final int CRITICAL_SECTION = 2;

  public static void main(String[] args) throws Exception {
    if (args.length == 2 && args[0].equals("--clear")) {
      Files.deleteIfExists(Path.of(args[1]));
      return;
    }
    if (args.length < 1 || args.length > 3) {
      System.err.println("usage: java PinningCheck.java RECORDING [PACKAGE_PREFIX [strict]]"
          + " | --clear RECORDING");
      System.exit(2);
    }
    Path recording = Path.of(args[0]);
    String prefix = args.length > 1 ? args[1] : "dev.holdfast.";
    boolean strict = args.length > 2 && args[2].equals("strict");
    if (!Files.isRegularFile(recording)) {
      fail("no JFR recording at " + recording + ": the Java 25 concurrency suite did not run or"
          + " its JVM did not write the recording");
    }
    long pinnedTypeId = -1;
    long startedTypeId = -1;
    try (RecordingFile file = new RecordingFile(recording)) {
      for (EventType type : file.readEventTypes()) {
        if (type.getName().equals(PINNED)) {
          pinnedTypeId = type.getId();
        } else if (type.getName().equals(STARTED)) {
          startedTypeId = type.getId();
        }
      }
    }
    boolean thresholdZero = false;
    boolean pinnedEnabled = false;
    long virtualThreads = 0;
    long pinned = 0;
    List<String> ours = new ArrayList<>();
    List<String> warmUp = new ArrayList<>();
    try (RecordingFile file = new RecordingFile(recording)) {
      while (file.hasMoreEvents()) {
        RecordedEvent event = file.readEvent();
        String type = event.getEventType().getName();
        if (type.equals("jdk.ActiveSetting") && event.getLong("id") == pinnedTypeId) {
          String name = event.getString("name");
          String value = event.getString("value");
          if (name.equals("threshold")) {
            thresholdZero = value.trim().matches("0\\s*[a-z]*");
          } else if (name.equals("enabled")) {
            pinnedEnabled = value.equals("true");
          }
        } else if (type.equals(STARTED)) {
          virtualThreads++;
        } else if (type.equals(PINNED)) {
          pinned++;
          String stack = ownStack(event.getStackTrace(), prefix);
          if (stack != null) {
            String reason = event.hasField("pinnedReason") ? event.getString("pinnedReason")
                : "(no pinnedReason before Java 24)";
            String operation = event.hasField("blockingOperation")
                ? event.getString("blockingOperation") : "?";
            String text = "pinned for " + event.getDuration().toNanos() / 1000 + " µs in "
                + operation + ": " + reason + "\n" + stack;
            if (!strict && isWarmUp(event, reason, prefix)) {
              warmUp.add(text);
            } else {
              ours.add(text);
            }
          }
        }
      }
    }
    if (pinnedTypeId < 0 || !pinnedEnabled || !thresholdZero) {
      fail(recording + " did not record " + PINNED + " with threshold 0 (enabled " + pinnedEnabled
          + ", threshold 0 " + thresholdZero + "): check the -XX:StartFlightRecording options");
    }
    if (startedTypeId < 0 || virtualThreads == 0) {
      fail(recording + " saw no virtual thread start: the concurrency suite ran without virtual"
          + " threads (a JVM older than 21?), so it proves nothing about pinning");
    }
    System.out.printf("JFR pinning check: %s: %,d virtual threads started, %,d %s events, %d with"
        + " a %s frame%s%n", recording, virtualThreads, pinned, PINNED, ours.size() + warmUp.size(),
        prefix, strict ? " (strict)" : ", of which " + warmUp.size() + " warm-up or JDK-internal"
        + " pins (class initialization, loading or linking, JDK critical sections; tolerated)");
    warmUp.forEach(w -> System.out.println("  warm-up pin: " + w));
    if (!ours.isEmpty()) {
      ours.stream().limit(10).forEach(System.err::println);
      fail(ours.size() + " " + PINNED + " event(s) with a " + prefix + " frame in "
          + recording + " (first ones above): Holdfast pins virtual threads");
    }
  }

  /** Whether the pin is the JVM initializing, loading or linking a class (see the class doc). */
  private static boolean isWarmUp(RecordedEvent event, String reason, String prefix) {
    if (reason.startsWith("Waited for initialization of ")
        || reason.endsWith("failed (" + CRITICAL_SECTION + ")")) {
      return true;
    }
    if (reason.startsWith("VM call to ") && reason.contains(".<clinit>")) {
      // A class initializer that blocks: the JDK's warms up; Holdfast's must never block.
      return !reason.substring("VM call to ".length()).startsWith(prefix);
    }
    RecordedStackTrace trace = event.getStackTrace();
    for (RecordedFrame frame : trace.getFrames()) {
      if (frame.getMethod() == null) {
        continue;
      }
      String type = frame.getMethod().getType().getName();
      String method = frame.getMethod().getName();
      if (type.startsWith(prefix)) {
        return false; // only the JDK's frames above Holdfast's first one count
      }
      if ((type.equals("java.lang.ClassLoader") && method.startsWith("loadClass"))
          || type.startsWith("jdk.internal.loader.")
          || (type.equals("java.lang.invoke.MethodHandleNatives") && method.startsWith("link"))) {
        return true;
      }
    }
    return false;
  }

  /** The stack as text if it has a frame of a class under {@code prefix}, else null. */
  private static String ownStack(RecordedStackTrace trace, String prefix) {
    if (trace == null) {
      return null;
    }
    boolean own = false;
    StringBuilder text = new StringBuilder();
    for (RecordedFrame frame : trace.getFrames()) {
      if (frame.getMethod() == null) {
        continue;
      }
      String type = frame.getMethod().getType().getName();
      own |= type.startsWith(prefix);
      text.append("    at ").append(type).append('.').append(frame.getMethod().getName())
          .append(" line ").append(frame.getLineNumber()).append('\n');
    }
    if (trace.isTruncated()) {
      text.append("    ... (truncated)\n");
    }
    return own ? text.toString() : null;
  }

  private static void fail(String message) {
    System.err.println("JFR pinning check FAILED: " + message);
    System.exit(1);
  }
}

package dev.holdfast.testing;

import java.util.List;
import java.util.Objects;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.logging.Handler;
import java.util.logging.Level;
import java.util.logging.LogRecord;
import java.util.logging.Logger;
import java.util.logging.SimpleFormatter;

/**
 * Records what one logger (and its children) logs while it is open, for tests that assert on log
 * output. Holdfast logs through {@code System.Logger}, which the JDK routes to
 * {@code java.util.logging} under the same name when no other backend is installed, as in these
 * tests.
 *
 * <pre>{@code
 * try (LogCapture log = LogCapture.of("dev.holdfast.LockClientConfig")) {
 *   ...
 *   assertEquals(1, log.messages(Level.WARNING).size());
 * }
 * }</pre>
 *
 * <p>Thread-safe: records may arrive from any thread.
 */
public final class LogCapture extends Handler implements AutoCloseable {
  private final Logger logger; // strongly held: java.util.logging keeps loggers weakly
  private final List<LogRecord> records = new CopyOnWriteArrayList<>();
  private final SimpleFormatter formatter = new SimpleFormatter();

  private LogCapture(Logger logger) {
    this.logger = logger;
  }

  /** Starts recording everything {@code loggerName} logs at {@code INFO} or above. */
  public static LogCapture of(String loggerName) {
    LogCapture capture = new LogCapture(Logger.getLogger(Objects.requireNonNull(loggerName)));
    capture.setLevel(Level.ALL);
    capture.logger.addHandler(capture);
    return capture;
  }

  /** The formatted messages logged at exactly {@code level}, oldest first. */
  public List<String> messages(Level level) {
    return records.stream().filter(r -> r.getLevel().equals(level))
        .map(formatter::formatMessage).toList();
  }

  @Override
  public void publish(LogRecord record) {
    records.add(record);
  }

  @Override
  public void flush() {
  }

  /** Stops recording. */
  @Override
  public void close() {
    logger.removeHandler(this);
  }
}

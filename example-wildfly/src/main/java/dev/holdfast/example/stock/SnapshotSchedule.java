package dev.holdfast.example.stock;

import jakarta.annotation.PreDestroy;
import jakarta.annotation.Resource;
import jakarta.enterprise.concurrent.CronTrigger;
import jakarta.enterprise.concurrent.LastExecution;
import jakarta.enterprise.concurrent.ManagedScheduledExecutorService;
import jakarta.enterprise.concurrent.ZonedTrigger;
import jakarta.enterprise.context.ApplicationScoped;
import jakarta.enterprise.context.Initialized;
import jakarta.enterprise.event.Observes;
import jakarta.inject.Inject;
import java.time.Instant;
import java.time.ZoneId;
import java.time.ZoneOffset;
import java.time.ZonedDateTime;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.ThreadLocalRandom;
import org.eclipse.microprofile.config.inject.ConfigProperty;

/**
 * Runs {@link StockSnapshotJob#takeSnapshot} on {@code stock.snapshot.cron}, on this instance's
 * {@link ManagedScheduledExecutorService} (the server's default one), from the application's start
 * to its end. The cron is Jakarta Concurrency's {@link CronTrigger} syntax, with seconds:
 * {@code 0 * * * * *} is every minute (the default), {@code off} disables the job. It is read in
 * UTC, so that every instance fires at the same instants whatever its time zone.
 *
 * <p>Every instance schedules the job; the job's {@code @Locked(skipIfBusy = true)} makes it run
 * once per occurrence across all of them. {@code stock.snapshot.max-delay-millis} (default 0)
 * delays each call by a random time up to it, as schedulers on different hosts fire apart (like
 * Quarkus's {@code executionMaxDelay}); the tests use it to show {@code holdAtLeast} at work.
 */
@ApplicationScoped
public class SnapshotSchedule {
  private static final System.Logger LOG = System.getLogger(SnapshotSchedule.class.getName());

  @Resource(lookup = "java:comp/DefaultManagedScheduledExecutorService")
  ManagedScheduledExecutorService executor;

  @Inject
  StockSnapshotJob job;

  @Inject
  @ConfigProperty(name = "stock.snapshot.cron", defaultValue = "0 * * * * *")
  String cron;

  @Inject
  @ConfigProperty(name = "stock.snapshot.max-delay-millis", defaultValue = "0")
  long maxDelayMillis;

  private ScheduledFuture<?> scheduled;

  /** Starts the schedule when the application starts. */
  void start(@Observes @Initialized(ApplicationScoped.class) Object applicationStarted) {
    if (cron.isBlank() || cron.strip().equalsIgnoreCase("off")) {
      LOG.log(System.Logger.Level.INFO, "Stock snapshot job off (stock.snapshot.cron={0})", cron);
      return;
    }
    OccurrenceTrigger trigger;
    try {
      trigger = new OccurrenceTrigger(new CronTrigger(cron.strip(), ZoneOffset.UTC));
    } catch (RuntimeException e) {
      throw new IllegalArgumentException("stock.snapshot.cron: '" + cron + "' is not a cron "
          + "expression (seconds minutes hours days-of-month months days-of-week), nor 'off'", e);
    }
    scheduled = executor.schedule(() -> runOnce(trigger.occurrence()), trigger);
    LOG.log(System.Logger.Level.INFO, "Stock snapshot job scheduled: {0}", cron);
  }

  @PreDestroy
  void stop() {
    if (scheduled != null) {
      scheduled.cancel(false);
    }
  }

  /** One occurrence; a failure is logged, and the schedule goes on. */
  private void runOnce(Instant occurrence) {
    try {
      if (maxDelayMillis > 0) {
        Thread.sleep(ThreadLocalRandom.current().nextLong(maxDelayMillis));
      }
      job.takeSnapshot(occurrence);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt(); // the schedule is being cancelled
    } catch (RuntimeException e) {
      LOG.log(System.Logger.Level.WARNING, "Stock snapshot of " + occurrence + " failed", e);
    }
  }

  /**
   * A cron schedule that also tells the task which occurrence it is running. The executor calls
   * {@link #skipRun} with each run's scheduled time just before the run; the runs of one task
   * never overlap (the next is scheduled once the last is done), so the last time seen is the
   * running one's.
   */
  static final class OccurrenceTrigger implements ZonedTrigger {
    private final CronTrigger cron;
    private volatile Instant occurrence;

    OccurrenceTrigger(CronTrigger cron) {
      this.cron = cron;
    }

    @Override
    public ZonedDateTime getNextRunTime(LastExecution lastExecution,
        ZonedDateTime taskScheduledTime) {
      return cron.getNextRunTime(lastExecution, taskScheduledTime);
    }

    @Override
    public ZoneId getZoneId() {
      return cron.getZoneId();
    }

    @Override
    public boolean skipRun(LastExecution lastExecution, ZonedDateTime scheduledRunTime) {
      occurrence = scheduledRunTime.toInstant();
      return false;
    }

    /** The scheduled time of the run in progress. */
    Instant occurrence() {
      Instant current = occurrence;
      if (current == null) {
        throw new IllegalStateException("No run in progress: the executor did not call skipRun");
      }
      return current;
    }
  }
}

package dev.holdfast.example.stock;

import dev.holdfast.Locked;
import jakarta.enterprise.context.ApplicationScoped;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

/** Test bean: {@code @Locked} methods of each mode on one name, under Quarkus ArC. */
@ApplicationScoped
public class CatalogLocks {
  private final AtomicInteger inside = new AtomicInteger();
  private final AtomicInteger mostInside = new AtomicInteger();

  /** The most callers that were inside these methods at once (through the client proxy). */
  public int mostInside() {
    return mostInside.get();
  }

  @Locked(value = "catalog", mode = Locked.Mode.READ)
  public void read(CountDownLatch entered, CountDownLatch leave) throws InterruptedException {
    mostInside.accumulateAndGet(inside.incrementAndGet(), Math::max);
    entered.countDown();
    try {
      leave.await(10, TimeUnit.SECONDS);
    } finally {
      inside.decrementAndGet();
    }
  }

  @Locked(value = "catalog", mode = Locked.Mode.WRITE, waitTime = "0s")
  public void write() {
    mostInside.accumulateAndGet(inside.incrementAndGet(), Math::max);
    inside.decrementAndGet();
  }

  @Locked(value = "catalog-fair", mode = Locked.Mode.FAIR)
  public String fair() {
    return "ran";
  }
}

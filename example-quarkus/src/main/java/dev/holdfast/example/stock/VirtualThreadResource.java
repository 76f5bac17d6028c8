package dev.holdfast.example.stock;

import dev.holdfast.Locked;
import io.smallrye.common.annotation.RunOnVirtualThread;
import jakarta.inject.Inject;
import jakarta.ws.rs.POST;
import jakarta.ws.rs.Path;
import jakarta.ws.rs.PathParam;
import jakarta.ws.rs.Produces;
import jakarta.ws.rs.core.MediaType;

/**
 * {@code POST /stock/{sku}/reserve-virtual}: a reservation on a virtual thread, the endpoint
 * itself {@code @Locked} on the SKU's lock (the lock belongs to the virtual thread that runs the
 * call; {@code waitedMs} is about 0, because the lock is held before the method starts).
 *
 * <p>Only in builds on JDK 21 or later: Quarkus refuses to build a {@code @RunOnVirtualThread}
 * endpoint on an older JDK, so the {@code jdk-before-21} profile leaves this class out.
 */
@Path("/stock/{sku}/reserve-virtual")
@Produces(MediaType.APPLICATION_JSON)
public class VirtualThreadResource {

  @Inject
  Inventory inventory;

  @POST
  @RunOnVirtualThread
  @Locked("stock:{sku}")
  public Result reserve(@PathParam("sku") String sku) {
    long calledNanos = System.nanoTime();
    StockResource.ReserveResult result =
        StockResource.ReserveResult.of(inventory.reserveUnprotected(sku), calledNanos);
    return new Result(result.reserved(), result.waitedMs(), onVirtualThread());
  }

  /** Whether this thread is virtual ({@code Thread.isVirtual()}, by reflection: Java 17 build). */
  private static boolean onVirtualThread() {
    try {
      return (Boolean) Thread.class.getMethod("isVirtual").invoke(Thread.currentThread());
    } catch (ReflectiveOperationException e) {
      return false;
    }
  }

  /** {@link StockResource.ReserveResult}, and whether the call ran on a virtual thread. */
  public record Result(boolean reserved, long waitedMs, boolean virtualThread) {
  }
}

package dev.holdfast.example.stock;

import io.smallrye.mutiny.Uni;
import jakarta.inject.Inject;
import jakarta.ws.rs.Consumes;
import jakarta.ws.rs.DELETE;
import jakarta.ws.rs.GET;
import jakarta.ws.rs.POST;
import jakarta.ws.rs.PUT;
import jakarta.ws.rs.Path;
import jakarta.ws.rs.PathParam;
import jakarta.ws.rs.Produces;
import jakarta.ws.rs.QueryParam;
import jakarta.ws.rs.core.MediaType;
import jakarta.ws.rs.core.Response;
import java.util.Arrays;
import java.util.OptionalInt;
import java.util.concurrent.TimeUnit;

/**
 * {@code /stock/{sku}}: the WildFly example's API, plus {@code DELETE}:
 *
 * <pre>
 * PUT    /stock/A1  {"units": 20}             {"sku":"A1","units":20}
 * GET    /stock/A1                            {"sku":"A1","units":20}, 404 if never stocked
 * POST   /stock/A1/reserve                    {"reserved":true,"waitedMs":12}
 * POST   /stock/A1/reserve-uni                the same as a Uni (non-blocking, event loop)
 * POST   /stock/A1/reserve-virtual            {"reserved":true,"waitedMs":0,"virtualThread":true}
 *                                             the same on a virtual thread, when built on a JDK
 *                                             with them ({@link VirtualThreadResource})
 * POST   /stock/A1/reserve-unprotected        the same without the lock
 * POST   /stock/A1/restock?units=5            what the lock and the transaction did, in order
 * PUT    /stock/A1/fenced?holdMs=0  {"units": 5}
 *                                             {"sku":"A1","units":5,"accepted":true,"token":…,
 *                                             "lockLost":false}; 409, "accepted":false, if the
 *                                             store refused the write's fencing token
 * PUT    /stock/A1/unfenced?holdMs=0  {"units": 5}   the same lock, no token check
 * DELETE /stock/A1
 * </pre>
 */
@Path("/stock/{sku}")
@Produces(MediaType.APPLICATION_JSON)
public class StockResource {
  /** The longest {@code holdMs} a write accepts. */
  static final long MAX_HOLD_MS = 10_000;

  @Inject
  Inventory inventory;

  @Inject
  StockStore store;

  /** The level, or 404 if the SKU was never stocked. */
  @GET
  public Response level(@PathParam("sku") String sku) {
    OptionalInt units = store.units(sku);
    return units.isPresent()
        ? Response.ok(new Level(sku, units.getAsInt())).build()
        : error(Response.Status.NOT_FOUND, "No stock for " + sku);
  }

  /** Sets the level: {@code {"units": 20}}. */
  @PUT
  @Consumes(MediaType.APPLICATION_JSON)
  public Response setLevel(@PathParam("sku") String sku, NewLevel level) {
    if (level == null || level.units() == null || level.units() < 0) {
      return error(Response.Status.BAD_REQUEST, "Expected {\"units\": <a number >= 0>}");
    }
    store.setUnits(sku, level.units());
    return Response.ok(new Level(sku, level.units())).build();
  }

  /**
   * Sets the level under the SKU's fenced lock ({@link Inventory#setUnitsFenced}), waiting
   * {@code holdMs} between acquiring the lock and writing: 200 if the store took the write, 409
   * if it refused the token because a later holder of the lock has written since.
   */
  @PUT
  @Path("/fenced")
  @Consumes(MediaType.APPLICATION_JSON)
  public Response setLevelFenced(@PathParam("sku") String sku, @QueryParam("holdMs") long holdMs,
      NewLevel level) {
    Response invalid = invalidWrite(level, holdMs);
    if (invalid != null) {
      return invalid;
    }
    try {
      long token = inventory.setUnitsFenced(sku, level.units(), holdMs);
      return Response.ok(new Write(sku, level.units(), true, token, false)).build();
    } catch (Inventory.StaleTokenException e) {
      return Response.status(Response.Status.CONFLICT)
          .entity(new Write(sku, level.units(), false, e.token(), lostOnRelease(e))).build();
    } catch (IllegalMonitorStateException e) {
      // Thrown by the release after the method returned, so the store took the write (its token
      // was still the newest); the lease had run out before the release.
      return Response.ok(new Write(sku, level.units(), true, null, true)).build();
    }
  }

  /** {@link #setLevelFenced} without the token check ({@link Inventory#setUnitsUnfenced}). */
  @PUT
  @Path("/unfenced")
  @Consumes(MediaType.APPLICATION_JSON)
  public Response setLevelUnfenced(@PathParam("sku") String sku,
      @QueryParam("holdMs") long holdMs, NewLevel level) {
    Response invalid = invalidWrite(level, holdMs);
    if (invalid != null) {
      return invalid;
    }
    boolean lockLost = false;
    try {
      inventory.setUnitsUnfenced(sku, level.units(), holdMs);
    } catch (IllegalMonitorStateException e) {
      lockLost = true; // the write happened, after the lease had run out
    }
    return Response.ok(new Write(sku, level.units(), true, null, lockLost)).build();
  }

  @DELETE
  public void delete(@PathParam("sku") String sku) {
    store.delete(sku);
  }

  @POST
  @Path("/reserve")
  public ReserveResult reserve(@PathParam("sku") String sku) {
    long calledNanos = System.nanoTime();
    return ReserveResult.of(inventory.reserve(sku), calledNanos);
  }

  /**
   * {@link #reserve} without blocking a thread while waiting for the lock: a {@code Uni} endpoint
   * (run on the event loop) over the {@code @Locked} {@code Uni} method
   * {@link Inventory#reserveUni}, which holds the SKU's lock until its work is done.
   */
  @POST
  @Path("/reserve-uni")
  public Uni<ReserveResult> reserveUni(@PathParam("sku") String sku) {
    long calledNanos = System.nanoTime();
    return inventory.reserveUni(sku).map(r -> ReserveResult.of(r, calledNanos));
  }

  @POST
  @Path("/reserve-unprotected")
  public ReserveResult reserveUnprotected(@PathParam("sku") String sku) {
    long calledNanos = System.nanoTime();
    return ReserveResult.of(inventory.reserveUnprotected(sku), calledNanos);
  }

  /** Adds {@code units} in a {@code @Transactional} method under the SKU's lock. */
  @POST
  @Path("/restock")
  public Response restock(@PathParam("sku") String sku, @QueryParam("units") int units) {
    if (units <= 0) {
      return error(Response.Status.BAD_REQUEST, "Expected ?units=<a number > 0>");
    }
    Inventory.Restock restock = inventory.restock(sku, units);
    Inventory.LockAtCompletion completion = restock.atCompletion();
    return Response.ok(new RestockResult(restock.units(), restock.inTransaction(),
        restock.lockHoldCount() > 0, restock.lockHoldCount(), completion.heldBeforeCompletion(),
        completion.committed(), completion.heldAfterCompletion())).build();
  }

  /** Whether releasing the lock failed because it was lost, after the method threw {@code e}. */
  private static boolean lostOnRelease(Exception e) {
    return Arrays.stream(e.getSuppressed())
        .anyMatch(IllegalMonitorStateException.class::isInstance);
  }

  private static Response invalidWrite(NewLevel level, long holdMs) {
    if (level == null || level.units() == null || level.units() < 0) {
      return error(Response.Status.BAD_REQUEST, "Expected {\"units\": <a number >= 0>}");
    }
    if (holdMs < 0 || holdMs > MAX_HOLD_MS) {
      return error(Response.Status.BAD_REQUEST, "Expected ?holdMs=<0 to " + MAX_HOLD_MS + ">");
    }
    return null;
  }

  private static Response error(Response.Status status, String message) {
    return Response.status(status).entity(new Error(message)).build();
  }

  /** The body of a 4xx answer. */
  public record Error(String error) {
  }

  /** A SKU's level. */
  public record Level(String sku, int units) {
  }

  /**
   * The answer to a fenced or unfenced write.
   *
   * @param accepted whether the store took the write
   * @param token    the write's fencing token; null for an unfenced write, and for a fenced one
   *                 whose lock was lost before its release
   * @param lockLost whether the lock's lease ran out before the lock was released: the write may
   *                 have come after another holder's
   */
  public record Write(String sku, int units, boolean accepted, Long token, boolean lockLost) {
  }

  /** The body of a {@code PUT}. */
  public record NewLevel(Integer units) {
  }

  /**
   * A reservation's answer.
   *
   * @param waitedMs from before the call to the reservation's first line: the time spent waiting
   *                 for the lock (about 0 without one)
   */
  public record ReserveResult(boolean reserved, long waitedMs) {
    static ReserveResult of(Inventory.Reservation reservation, long calledNanos) {
      return new ReserveResult(reservation.reserved(),
          TimeUnit.NANOSECONDS.toMillis(reservation.startedNanos() - calledNanos));
    }
  }

  /**
   * What a restock observed, in order. {@code lockHoldCount} is 1: {@code @Locked} was applied
   * once (twice would reenter, 2).
   */
  public record RestockResult(int units, boolean inTransaction, boolean lockHeldInTransaction,
      int lockHoldCount, Boolean lockHeldBeforeCommit, boolean committed,
      Boolean lockHeldAfterCommit) {
  }
}

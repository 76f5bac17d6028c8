package dev.holdfast.example.stock;

import io.quarkus.arc.Arc;
import jakarta.enterprise.context.ApplicationScoped;
import jakarta.inject.Inject;
import java.util.concurrent.CompletionStage;

/**
 * Calls {@link ArcAsyncJobs}' asynchronous methods inside a request of its own, tagged, as an
 * endpoint would: the request context stays active until the returned stage completes.
 */
@ApplicationScoped
public class TaggedCaller {
  @Inject
  RequestTag tag;

  @Inject
  ArcAsyncJobs jobs;

  /** {@link ArcAsyncJobs#taggedStage} in a new request tagged {@code id}. */
  public CompletionStage<String> stage(String id, String name) {
    return inRequest(id, () -> jobs.taggedStage(name));
  }

  /** {@link ArcAsyncJobs#taggedUni}, subscribed in a new request tagged {@code id}. */
  public CompletionStage<String> uni(String id, String name) {
    return inRequest(id, () -> jobs.taggedUni(name).subscribeAsCompletionStage());
  }

  private CompletionStage<String> inRequest(String id,
      java.util.function.Supplier<CompletionStage<String>> call) {
    var request = Arc.container().requestContext();
    var outer = request.isActive() ? request.getState() : null; // the test's own, if any
    request.activate();
    try {
      tag.set(id);
      CompletionStage<String> result = call.get();
      var state = request.getState();
      // Ended when the call's work is done, not when it returns (the work runs later).
      return result.whenComplete((value, failure) -> request.destroy(state));
    } finally {
      request.deactivate();
      if (outer != null) {
        request.activate(outer);
      }
    }
  }
}

package dev.holdfast.example.stock;

import dev.holdfast.FencingToken;
import dev.holdfast.Locked;
import io.smallrye.mutiny.Uni;
import jakarta.enterprise.context.ApplicationScoped;
import jakarta.inject.Inject;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.CountDownLatch;

/** Asynchronous {@code @Locked} methods for {@link AsyncLockedArcTest}: a bean of ArC. */
@ApplicationScoped
public class ArcAsyncJobs {
  /** Counted down when {@link #stage} starts (static: a field read through the client proxy
   * would be the proxy's, not the bean's). */
  static volatile CountDownLatch started = new CountDownLatch(1);

  @Inject
  RequestTag tag;

  @Locked("arc:{name}")
  public CompletionStage<String> stage(String name, CompletableFuture<String> work) {
    started.countDown();
    return work;
  }

  @Locked(value = "arc:{name}", skipIfBusy = true)
  public Uni<String> skipping(String name) {
    return Uni.createFrom().item("ran");
  }

  @Locked(value = "arc:{name}", fenced = true)
  public CompletionStage<Long> fenced(String name) {
    return CompletableFuture.completedFuture(FencingToken.current());
  }

  /** Reads the caller's request-scoped tag in its synchronous part (on a Holdfast thread). */
  @Locked("arc:{name}")
  public CompletionStage<String> taggedStage(String name) {
    return CompletableFuture.completedFuture(tag.value());
  }

  /** {@link #taggedStage} as a {@code Uni}: the tag is read at subscription, once held. */
  @Locked("arc:{name}")
  public Uni<String> taggedUni(String name) {
    return Uni.createFrom().item(tag.value());
  }
}

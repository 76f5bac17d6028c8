package dev.holdfast.example.stock;

import dev.holdfast.LockLost;
import jakarta.enterprise.context.ApplicationScoped;
import jakarta.enterprise.event.Observes;
import java.util.ArrayDeque;
import java.util.Deque;
import java.util.List;

/**
 * The last {@value #KEPT} locks this instance lost, from Holdfast's {@link LockLost} CDI event:
 * how the application learns of a loss outside the locked call. Thread-safe.
 */
@ApplicationScoped
public class LostLocks {
  static final int KEPT = 100;

  private final Deque<LockLost> recent = new ArrayDeque<>();

  void onLost(@Observes LockLost lost) {
    synchronized (recent) {
      if (recent.size() == KEPT) {
        recent.removeFirst();
      }
      recent.addLast(lost);
    }
  }

  /** {@return the losses kept, oldest first} */
  public List<LockLost> recent() {
    synchronized (recent) {
      return List.copyOf(recent);
    }
  }
}
